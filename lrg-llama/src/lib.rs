//! The llama.cpp engine for lrg.
//!
//! [`LlamaEngine`] implements [`lrg_providers::local_chat::LocalEngine`] on
//! llama.cpp (through `llama-cpp-2`): one worker thread owns the model and its
//! context, every answer is constrained by an llguidance grammar compiled from
//! the turn's JSON Schema, and the KV cache is kept between turns so a turn
//! evaluates only what follows the longest prefix it shares with the last one.
//!
//! [`testing`] writes a tiny random-weight model, so all of this runs offline.

mod backend;
mod config;
pub mod constraint;
mod engine;
mod sampling;
pub mod testing;
mod utf8;
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
