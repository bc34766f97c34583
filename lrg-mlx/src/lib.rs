//! The MLX engine for lrg.
//!
//! [`MlxEngine`] implements [`lrg_providers::local_chat::LocalEngine`] with a
//! Python sidecar (`lrg-mlx/sidecar/`, the `lrg_mlx_sidecar` package) that
//! runs the model on MLX through mlx-lm and constrains every answer with
//! llguidance. They talk JSON lines over the sidecar's stdio; the sidecar
//! keeps mlx-lm's prompt cache (trimmed to the longest prefix a turn shares
//! with the last one) and the compiled grammar between turns.
//!
//! Building needs only a Rust toolchain; running needs Python with
//! `mlx-lm` and `llguidance` (`pip install "mlx-lm[cpu]" "llguidance>=1.9,<1.10"`
//! on Linux, `mlx-lm` on Apple silicon). Python comes from `LRG_MLX_PYTHON`,
//! else `python3`; every missing piece is a [`ProviderError`](lrg_providers::ProviderError)
//! that names the fix.
//!
//! ```no_run
//! # async fn demo() -> Result<(), lrg_providers::ProviderError> {
//! use std::sync::Arc;
//! use lrg_mlx::{MlxConfig, MlxEngine};
//! use lrg_providers::local_chat::LocalChatModel;
//!
//! let engine = MlxEngine::start(MlxConfig::new("/models/Qwen3-4B-4bit")).await?;
//! let model = LocalChatModel::new("mlx", Arc::new(engine));
//! # let _ = model; Ok(()) }
//! ```

mod config;
mod engine;
mod protocol;
mod sidecar;
pub mod testing;

pub use config::{BUNDLED_SIDECAR_DIR, MlxConfig, PYTHON_ENV};
pub use engine::{MlxEngine, MlxStats};
pub use protocol::{PROTOCOL_VERSION, SidecarInfo, SidecarModel, Versions};

/// The README's example, compiled as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
