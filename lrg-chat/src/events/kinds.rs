//! The closed sets an event names: which stream a delta is ([`DeltaKind`]),
//! what failed ([`ErrorKind`]) and why a call did not run ([`SkipReason`]).

use lrg_providers::{ProviderError, ProviderErrorKind};
use serde::{Deserialize, Serialize};

/// Which stream a [`Event::Delta`](super::Event::Delta) belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeltaKind {
    /// The model's reasoning.
    Reasoning,
    /// The answer.
    Text,
}

/// What kind of failure an [`Event::Error`](super::Event::Error) reports.
///
/// Serialized in `snake_case` (`"context_overflow"`, `"max_steps"`, ...).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ErrorKind {
    /// A transient provider error (429, 5xx, a cut stream) that outlived its
    /// retries.
    Transient,
    /// The provider refused the key.
    Auth,
    /// The provider refused the request as malformed.
    BadRequest,
    /// The conversation does not fit the model's context window.
    ContextOverflow,
    /// The model does not exist on its provider.
    ModelNotFound,
    /// The model cannot do what was asked.
    Unsupported,
    /// Missing or invalid configuration (no key, bad base URL).
    Config,
    /// The model's answer could not be understood.
    Protocol,
    /// Any other provider failure.
    Other,
    /// [`crate::SessionConfig::max_steps`] model turns passed without a final
    /// answer.
    MaxSteps,
    /// Compaction produced no summary; the conversation was kept.
    Compact,
    /// A tool or model plugged into the session panicked.
    Internal,
    /// The session is local only and the model would send the conversation
    /// to a cloud.
    LocalOnly,
    /// A typed message's answer never matched its schema, repairs included
    /// ([`crate::SessionConfig::typed_repairs`]).
    InvalidAnswer,
    /// The next model turn would pass a limit of
    /// [`crate::SessionConfig::budget`] (tokens or dollars).
    Budget,
}

impl ErrorKind {
    /// The kind of a provider error.
    pub fn of(error: &ProviderError) -> Self {
        Self::from(error.kind())
    }
}

impl From<ProviderErrorKind> for ErrorKind {
    fn from(kind: ProviderErrorKind) -> Self {
        match kind {
            ProviderErrorKind::Transient => Self::Transient,
            ProviderErrorKind::Auth => Self::Auth,
            ProviderErrorKind::BadRequest => Self::BadRequest,
            ProviderErrorKind::ContextOverflow => Self::ContextOverflow,
            ProviderErrorKind::ModelNotFound => Self::ModelNotFound,
            ProviderErrorKind::Unsupported => Self::Unsupported,
            ProviderErrorKind::Config => Self::Config,
            ProviderErrorKind::Protocol => Self::Protocol,
            // The enum grows: a kind this build does not know is "other".
            _ => Self::Other,
        }
    }
}

/// Why a tool call did not run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum SkipReason {
    /// The same tool with the same arguments was already called for this
    /// message.
    RepeatedCall,
    /// The person denied it.
    NotAllowed,
    /// The person stopped the turn before it ran.
    Stopped,
    /// The tool is blocked by a rule (the model was not offered it).
    Blocked,
    /// No tool of that name exists.
    UnknownTool,
    /// A `pre_tool_use` hook denied it (see [`crate::hooks`]).
    HookDenied,
    /// Its approval question got no answer within
    /// [`crate::SessionConfig::approval_timeout`]: a denial.
    ApprovalTimedOut,
}

impl SkipReason {
    /// A few words for a person ("not allowed", "no such tool").
    pub fn describe(self) -> &'static str {
        match self {
            Self::RepeatedCall => "the same call was already made",
            Self::NotAllowed => "not allowed",
            Self::Stopped => "stopped",
            Self::Blocked => "blocked by a rule",
            Self::UnknownTool => "no such tool",
            Self::HookDenied => "denied by a hook",
            Self::ApprovalTimedOut => "no answer in time",
        }
    }
}
