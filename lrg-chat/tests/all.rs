//! Every integration test of this crate, as modules of one test binary:
//! one link instead of one per file (the separate binaries left in
//! Cargo.toml need a process of their own).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod browser_support;
mod http_support;
mod oauth_support;
#[macro_use]
mod session_support;
#[macro_use]
mod store_support;
mod tool_search_support;

#[cfg(feature = "acp")]
mod acp_backend;
#[cfg(feature = "acp")]
mod acp_models;
mod approver;
mod client_tools;
mod context;
mod delivery;
mod engine_pool;
mod events;
mod fuzz_corpus;
mod generation;
mod hooks;
mod http;
mod http_browser;
mod http_browser_approvals;
mod http_browser_chats;
mod http_browser_page;
mod http_browser_questions;
mod http_browser_sub_agents;
mod http_browser_tools;
mod http_openai;
mod http_owners;
mod http_sse;
mod http_store;
mod http_sub_agents;
mod http_typed;
mod locality;
mod mcp_oauth;
mod mcp_progress;
mod mcp_prompts;
mod mcp_python;
mod mcp_questions;
mod mcp_resources;
mod mcp_sampling;
mod memory_bound;
mod prompt;
mod registry;
mod session;
mod store;
mod store_crash;
mod store_damage;
mod store_postgres;
mod sub_agents;
mod teaching_errors;
mod text_tools;
mod tool_limits;
mod tool_search;
mod tools;
mod tools_npm;
mod typed;
mod typed_http;
