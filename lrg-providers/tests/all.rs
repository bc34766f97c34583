//! Every integration test of this crate, as modules of one test binary:
//! one link instead of one per file (the separate binaries left in
//! Cargo.toml need a process of their own).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod schema_corpus;

mod anthropic;
mod catalog;
mod cli_agents;
mod engine_pool;
mod fuzz_corpus;
mod gemini;
mod generation_settings;
mod hosted_dialects;
mod local_chat;
mod ollama;
mod openai;
mod openai_secrets;
mod record;
mod record_keys;
mod request_invariants;
mod responses;
mod responses_secrets;
mod schema_errors;
mod schema_properties;
mod schema_shaping;
mod schema_snapshots;
mod text_tools;
mod text_tools_formats;
mod timeouts;
