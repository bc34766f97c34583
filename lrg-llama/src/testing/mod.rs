//! Test and bench support: a tiny random-weight GGUF model, a synthetic large
//! vocabulary, a realistic answer schema, a tiny vision projector for that
//! model, and tiny PNG images.
//!
//! Public so that this crate's tests, the workspace benches and the CLI can
//! run the real engine offline. Nothing here is needed in production.

mod gguf;
mod png;
mod schema;
mod tiny_model;
mod tiny_projector;
mod vocab;

pub use png::tiny_png;
pub use schema::{AnswerCaps, answer_schema, sample_answer, sample_tools};
pub use tiny_model::{CHATML_TEMPLATE, TinyModelSpec, write_tiny_model};
pub use tiny_projector::{TinyProjectorSpec, write_tiny_projector};
pub use vocab::synthetic_tok_env;
