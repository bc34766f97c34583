//! Every integration test of this crate, as modules of one test binary:
//! one link instead of one per file (the separate binaries left in
//! Cargo.toml need a process of their own).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

mod engine;
mod faults;
mod real_model;
mod sequences;
mod tool_habit;
mod typed;
