//! # lrg-mlx
//!
//! Not implemented yet: this crate exposes no API. See the README for what it
//! will hold (an MLX `LocalEngine` driving a Python sidecar).
