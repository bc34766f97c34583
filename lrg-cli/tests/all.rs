//! Every integration test of this crate, as modules of one test binary:
//! one link instead of one per file (the separate binaries left in
//! Cargo.toml need a process of their own).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod security_support;

mod acp;
mod chat_pty;
mod cli;
mod closed_stdout;
mod cloud_consent;
mod cost;
mod generation;
mod hooks_cmd;
mod limits_flags;
mod llama;
mod mlx;
mod models;
mod more_providers;
mod otel;
mod output_schema;
mod prompt_cmd;
mod providers;
mod reopen;
mod security_connections;
mod security_env;
mod security_kill;
mod security_model_specs;
mod security_strict;
mod serve;
mod sessions;
mod test_cmd;
mod test_typed;
mod tool_search_cmd;
