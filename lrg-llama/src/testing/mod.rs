//! Test and bench support: a tiny random-weight GGUF model, a synthetic large
//! vocabulary, and a realistic answer schema.
//!
//! Public so that this crate's tests, the workspace benches and the CLI can
//! run the real engine offline. Nothing here is needed in production.

mod gguf;
mod schema;
mod tiny_model;
mod vocab;

pub use schema::{AnswerCaps, answer_schema, sample_answer, sample_tools};
pub use tiny_model::{CHATML_TEMPLATE, TinyModelSpec, write_tiny_model};
pub use vocab::synthetic_tok_env;
