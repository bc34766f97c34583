#![doc = include_str!("../README.md")]
// Every public item is API an embedder reads on docs.rs: say what it is.
#![warn(missing_docs)]
// On docs.rs (`--cfg docsrs`), mark each item with the feature it needs.
#![cfg_attr(docsrs, feature(doc_cfg))]

mod endpoint;
mod error;
mod generation;
mod message;
mod messages;
mod model;
mod model_ref;
mod overflow;
mod paging;
mod scripted;
mod secret;
pub mod text;

pub mod child_env;
#[doc(hidden)]
pub mod fuzz;
pub mod images;
pub mod local_chat;
pub mod pricing;
pub mod record;
pub mod retry;
pub mod schema;
pub mod sync;
pub mod text_tools;
pub mod traceparent;
pub mod transport;
pub mod typed;
pub mod wire;

pub mod catalog;

pub mod anthropic;
pub mod cli_agents;
pub mod gemini;
pub mod ollama;
pub mod openai;
pub mod responses;

pub use error::{ProviderError, ProviderErrorKind};
pub use generation::{GenerationSettings, InvalidSetting};
pub use message::{
    Image, Message, NativePart, Part, Role, ToolAnnotations, ToolCall, ToolResult, ToolSpec,
};
pub use messages::Messages;
pub use model::{
    AssistantTurn, ChatModel, ModelInfo, ModelLocation, StopReason, TurnEvent, TurnRequest,
    TurnStream, Usage, collect_turn,
};
pub use model_ref::{ACP_PREFIX, AcpModelId, ModelRef, ModelRefError, Provider};
pub use retry::RetryPolicy;
pub use scripted::{ScriptedCall, ScriptedError, ScriptedModel, ScriptedTurn};
pub use secret::ApiKey;
