//! Hooks: the operator's code at four points of a message, able to stop
//! what the model does.
//!
//! - `user_prompt_submit`, before the model sees a message: add context, or
//!   block it with a reason;
//! - `pre_tool_use`, before a call's permission check: allow, deny (the
//!   model reads the reason), ask, or rewrite the arguments (validated
//!   against the tool's schema);
//! - `post_tool_use`, after a call: add a note to its result;
//! - `stop`, when the model has answered: ask for one more turn, with a
//!   reason, at most [`MAX_STOP_CONTINUES`] times per message.
//!
//! In Rust, implement [`SessionHooks`] and give it to
//! [`ChatSessionBuilder::hook`](crate::session::ChatSessionBuilder::hook).
//! From a config file, [`HooksConfig`] turns command lines into
//! [`CommandHook`]s (one JSON object on stdin, one on stdout; see
//! [`command`]).
//!
//! A hook that fails (an error, a timeout, output that is not its JSON)
//! decides nothing: the session shows a `warning` and goes on as if it were
//! not there. A failed `pre_tool_use` hook leaves the call to the
//! permission rules, never to "allow". Each decision a hook takes is a
//! `hook_decision` event.

pub mod command;
mod config;
mod run;

pub use command::CommandHook;
pub use config::{HookCommandConfig, HooksConfig, HooksConfigError};
pub(crate) use run::{Hooks, Note, ToolAnswer};

use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::tools::ToolClass;

/// How the result of a call a hook denied begins (the transcript reads it
/// as denied).
pub(crate) const DENIED_PREFIX: &str =
    "Not run: a hook set by the user's operator refused this call:";

/// How many times the `stop` hooks may ask for one more turn per message.
pub const MAX_STOP_CONTINUES: u32 = 3;

/// A message about to go to the model.
#[derive(Debug, Clone, Serialize)]
pub struct PromptSubmit {
    /// The session's id, when it is kept in a store.
    pub session_id: Option<String>,
    /// The message's text.
    pub text: String,
}

/// What a `user_prompt_submit` hook decided.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum PromptVerdict {
    /// Nothing: the message goes on as it is.
    #[default]
    Continue,
    /// Add this text for the model, after the message (kept in the history).
    AddContext(String),
    /// Do not send the message to the model; the person sees why.
    Block(String),
}

/// A tool call about to be checked against the permissions.
#[derive(Debug, Clone, Serialize)]
pub struct PreToolUse {
    /// The session's id, when it is kept in a store.
    pub session_id: Option<String>,
    /// The tool.
    pub tool: String,
    /// The call's id.
    pub call_id: String,
    /// The arguments, as the model wrote them.
    pub arguments: Value,
    /// What the tool may do to the world.
    pub class: ToolClass,
}

/// What a `pre_tool_use` hook answered to a call.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ToolDecision {
    /// Run it without asking (the bulk limit still asks).
    Allow,
    /// Do not run it; the model is told the reason.
    Deny,
    /// Ask the person, whatever the rules say.
    Ask,
}

/// A `pre_tool_use` hook's answer: a decision, its reason, and arguments
/// to run the call with instead of the model's. All empty: no opinion.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolVerdict {
    /// The decision; `None` leaves it to the permission rules.
    pub decision: Option<ToolDecision>,
    /// Why, for the person and (with a denial) for the model.
    pub reason: Option<String>,
    /// The arguments to call the tool with (checked against its schema;
    /// a rewrite the schema rejects is a failure of the hook).
    pub arguments: Option<Value>,
}

impl ToolVerdict {
    /// Deny, with the reason the model reads.
    pub fn deny(reason: impl Into<String>) -> Self {
        Self {
            decision: Some(ToolDecision::Deny),
            reason: Some(reason.into()),
            arguments: None,
        }
    }

    /// Allow without asking.
    pub fn allow() -> Self {
        Self {
            decision: Some(ToolDecision::Allow),
            ..Self::default()
        }
    }
}

/// A call that has run.
#[derive(Debug, Clone, Serialize)]
pub struct PostToolUse {
    /// The session's id, when it is kept in a store.
    pub session_id: Option<String>,
    /// The tool.
    pub tool: String,
    /// The call's id.
    pub call_id: String,
    /// The arguments it ran with.
    pub arguments: Value,
    /// Its text output (or error message).
    pub result: String,
    /// Whether it failed.
    pub is_error: bool,
}

/// A message the model has answered.
#[derive(Debug, Clone, Serialize)]
pub struct StopCheck {
    /// The session's id, when it is kept in a store.
    pub session_id: Option<String>,
    /// The final answer's text.
    pub text: String,
    /// How many times hooks already asked for one more turn for this message.
    pub continued: u32,
}

/// Why a hook decided nothing: said in a `warning`, never a decision.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct HookError(pub String);

/// The operator's code at the four points of a message (see the [module
/// docs](self)). Every method has a default that decides nothing, so an
/// implementation writes only the ones it needs.
pub trait SessionHooks: Send + Sync {
    /// A short name shown in `hook_decision` events and warnings.
    fn name(&self) -> &str {
        "app"
    }

    /// A message is about to go to the model.
    fn user_prompt_submit<'a>(
        &'a self,
        prompt: &'a PromptSubmit,
    ) -> BoxFuture<'a, Result<PromptVerdict, HookError>> {
        let _ = prompt;
        Box::pin(async { Ok(PromptVerdict::Continue) })
    }

    /// A call is about to be checked against the permissions.
    fn pre_tool_use<'a>(
        &'a self,
        call: &'a PreToolUse,
    ) -> BoxFuture<'a, Result<ToolVerdict, HookError>> {
        let _ = call;
        Box::pin(async { Ok(ToolVerdict::default()) })
    }

    /// A call has run: `Some(note)` is added to its result for the model.
    fn post_tool_use<'a>(
        &'a self,
        call: &'a PostToolUse,
    ) -> BoxFuture<'a, Result<Option<String>, HookError>> {
        let _ = call;
        Box::pin(async { Ok(None) })
    }

    /// The model has answered: `Some(reason)` asks for one more turn (the
    /// model reads the reason).
    fn stop<'a>(
        &'a self,
        check: &'a StopCheck,
    ) -> BoxFuture<'a, Result<Option<String>, HookError>> {
        let _ = check;
        Box::pin(async { Ok(None) })
    }
}

/// Which of the four points a hook ran at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HookEvent {
    /// Before the model sees a message.
    UserPromptSubmit,
    /// Before a call's permission check.
    PreToolUse,
    /// After a call ran.
    PostToolUse,
    /// When the model has answered.
    Stop,
}

impl HookEvent {
    /// The snake_case name, as in config files and events.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::UserPromptSubmit => "user_prompt_submit",
            Self::PreToolUse => "pre_tool_use",
            Self::PostToolUse => "post_tool_use",
            Self::Stop => "stop",
        }
    }
}

/// What a hook decided, as a `hook_decision` event says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum HookDecisionKind {
    /// A call runs without asking.
    Allow,
    /// A call does not run.
    Deny,
    /// The person is asked about a call.
    Ask,
    /// A call runs with the hook's arguments.
    Rewrite,
    /// A message does not go to the model.
    Block,
    /// Context was added to a message.
    Context,
    /// A note was added to a call's result.
    Note,
    /// The model gets one more turn.
    Continue,
}

impl HookDecisionKind {
    /// The snake_case name, as in events.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Allow => "allow",
            Self::Deny => "deny",
            Self::Ask => "ask",
            Self::Rewrite => "rewrite",
            Self::Block => "block",
            Self::Context => "context",
            Self::Note => "note",
            Self::Continue => "continue",
        }
    }
}
