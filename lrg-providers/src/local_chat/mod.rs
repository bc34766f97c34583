//! Tool calling for local models by constrained decoding (see DESIGN.md,
//! "Tool calling without a tool-call format").
//!
//! [`LocalChatModel`] turns any [`LocalEngine`] into a [`ChatModel`](crate::ChatModel):
//! it renders the conversation as plain messages, constrains every answer with
//! [`answer_schema`] to `{"analysis", "call": {"<tool>": {…}}}` or
//! `{"analysis", "reply"}`, streams `analysis` and `reply` as they are decoded
//! ([`AnswerDecoder`]) and turns a `call` into a tool call ([`parse_answer`]).

mod answer;
mod answer_schema;
mod chat;
#[doc(hidden)]
pub mod conformance;
mod decoder;
mod engine;
mod model;
pub mod pool;
mod prompt;

pub use answer::{Answer, parse_answer, parse_typed_answer};
pub use answer_schema::{ANALYSIS_MAX_CHARS, ARGUMENT_MAX_CHARS, REPLY_MAX_CHARS, answer_schema};
pub use decoder::AnswerDecoder;
pub use engine::{
    DEFAULT_KV_CACHE_MEM, DEFAULT_PARALLEL, EngineEvent, EngineMessage, EngineRole, EngineSettings,
    EngineStop, EngineTurn, IMAGE_SLOT, KvReuse, LoadProgress, LocalEngine, SequenceId,
};
pub use model::{DEFAULT_MAX_IMAGES, DEFAULT_MAX_TOKENS, LocalChatModel};
pub use pool::{EnginePool, LoadedModel, LoadingEvent, PoolConfig};
