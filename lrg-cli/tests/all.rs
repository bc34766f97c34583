//! Every integration test of this crate, as modules of one test binary:
//! one link instead of one per file (the separate binaries left in
//! Cargo.toml need a process of their own).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod security_support;

mod acp;
mod acp_models;
mod acp_questions;
mod acp_sessions;
mod acp_ts;
mod chat_pty;
mod cli;
mod closed_stdout;
mod cloud_consent;
mod cost;
mod generation;
mod hooks_cmd;
mod limits_flags;
mod llama;
mod mcp_answers;
mod mcp_login;
mod mcp_sampling_cli;
mod mlx;
mod models;
mod more_providers;
mod otel;
mod output_schema;
mod prompt_cmd;
mod providers;
mod reopen;
mod resources_cmd;
mod security_connections;
mod security_env;
mod security_kill;
mod security_model_specs;
mod security_strict;
mod serve;
mod serve_mlx;
mod sessions;
mod sessions_export;
mod sessions_sub_agents;
mod test_cmd;
mod test_typed;
mod tool_search_cmd;
