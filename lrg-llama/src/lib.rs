//! The llama.cpp engine for lrg.
//!
//! [`LlamaEngine`] implements [`lrg_providers::local_chat::LocalEngine`] on
//! llama.cpp (through `llama-cpp-2`): one worker thread owns the model and its
//! context, every answer is constrained by an llguidance grammar compiled from
//! the turn's JSON Schema, and each chat's KV cache is kept between its turns
//! so a turn evaluates only what follows the longest prefix it shares with
//! the chat's last one.
//!
//! One engine serves many chats: the context has [`LlamaConfig::n_seq_max`]
//! slots, turns of different chats decode together in one batch per step,
//! and a chat that lost its slot to others has its KV state saved to host
//! memory (within [`LlamaConfig::kv_cache_mem`]) and restored on its next
//! turn.
//!
//! With a vision projector ([`LlamaConfig::with_mmproj`]) the model sees the
//! images of user messages and tool results, through llama.cpp's multimodal
//! library; the KV cache is then reused chunk by chunk (an image is the same
//! image when its bytes are). Without one the model is blind and
//! [`lrg_providers::local_chat::LocalChatModel`] sends it a note per image.
//!
//! [`testing`] writes a tiny random-weight model, so all of this runs offline.

mod backend;
mod chunks;
mod config;
pub mod constraint;
mod engine;
mod sampling;
pub mod testing;
mod utf8;
mod vision;
mod worker;

pub use config::LlamaConfig;
pub use constraint::{AnswerConstraint, ConstraintCompiler};
pub use engine::{EngineStats, LlamaEngine};
/// The vocabulary type constraints are built for (re-exported from `toktrie`).
pub use toktrie::{SimpleVob, TokEnv};

/// The README's example, compiled as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
