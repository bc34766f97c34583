//! # lrg-chat
//!
//! The chat session of lrg: the loop that drives a [`lrg_providers::ChatModel`]
//! through tool calls, the tools themselves (MCP servers and Rust functions),
//! permissions, the numbered event log and context fitting.

pub mod context;
pub mod events;
pub mod model_source;
pub mod permissions;
pub mod session;
pub mod tools;

pub use events::{Event, EventLog, LogEntry, Subscription};
pub use model_source::{FixedModel, ModelSource};
pub use permissions::{Answer, Mode, PermissionSettings, Permissions, Rule};
pub use session::{ChatSession, SessionConfig, SessionError, TurnHandle, TurnOutcome, UserInput};
