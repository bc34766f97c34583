#![doc = include_str!("../README.md")]
// Every public item is API an embedder reads on docs.rs: say what it is.
#![warn(missing_docs)]
// On docs.rs (`--cfg docsrs`), mark each item with the feature it needs.
#![cfg_attr(docsrs, feature(doc_cfg))]

#[cfg(feature = "acp")]
pub mod acp;
mod atomic_file;
pub mod context;
pub mod events;
#[doc(hidden)]
pub mod fuzz;
pub mod hooks;
pub mod http;
pub mod model_source;
pub mod otel;
pub mod permissions;
pub mod prompt;
pub mod registry;
pub mod session;
pub mod store;
pub mod sub_agents;
pub mod testing;
pub mod tools;
pub mod transcript;

pub use events::{ErrorKind, SkipReason};
pub use events::{Event, EventLog, LogEntry, Subscription};
/// The schema of a typed answer ([`ChatSession::send_with_output`]).
pub use lrg_providers::typed::{OutputMode, OutputSchema, OutputSchemaError};
pub use model_source::{FixedModel, ModelSource};
pub use permissions::{Answer, AnswerKind, Mode, PermissionSettings, Permissions, Rule};
/// Approvals from Rust, and what a session is built of (the README's example
/// needs them at the root).
pub use session::{ApprovalRequest, Approver, ChatSessionBuilder, approver_fn};
pub use session::{
    ChatSession, CostBudget, SessionConfig, SessionError, SpendLimit, TurnHandle, TurnOutcome,
    TypedError, UserInput,
};
/// Tool servers' questions to the person (MCP elicitation).
pub use session::{QuestionAction, QuestionAnswer, QuestionError, QuestionMode};
pub use tools::ToolHost;
