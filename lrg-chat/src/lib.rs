//! # lrg-chat
//!
//! The chat session of lrg: the loop that drives a [`lrg_providers::ChatModel`]
//! through tool calls, the tools themselves (MCP servers and Rust functions),
//! permissions, the numbered event log and context fitting.

pub mod tools;
