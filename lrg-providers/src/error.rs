//! Errors a model can end a turn with, sorted into "try again" and "give up".

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Why a model turn failed.
///
/// [`ProviderError::is_transient`] tells the caller whether to retry (see
/// [`crate::retry`]); every other variant is fatal and its message says what the
/// user can do about it. Messages never contain an API key.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ProviderError {
    /// Worth retrying: 429, 5xx, a reset connection, a stream cut before its end,
    /// a server's own "error parsing tool call".
    #[error("{message} (temporary; retrying may help)")]
    Transient {
        /// What happened.
        message: String,
        /// How long the server asked us to wait, when it said.
        retry_after: Option<Duration>,
    },
    /// The key is missing, wrong or lacks access (401/403).
    #[error("authentication failed: {message}")]
    Auth {
        /// What the server said.
        message: String,
    },
    /// The server refused the request as malformed (400).
    #[error("request rejected: {message}")]
    BadRequest {
        /// What the server said.
        message: String,
    },
    /// The conversation does not fit the model's context window.
    #[error("context window exceeded: {message}")]
    ContextOverflow {
        /// What the server or engine said.
        message: String,
    },
    /// The model does not exist on this provider.
    #[error("model not found: {message}")]
    ModelNotFound {
        /// Which model, and what the server said.
        message: String,
    },
    /// The provider cannot do what was asked (e.g. images on a text-only model).
    #[error("unsupported: {message}")]
    Unsupported {
        /// What is not supported.
        message: String,
    },
    /// Missing or invalid configuration (no key, bad base URL, unreadable file).
    #[error("configuration error: {message}")]
    Config {
        /// What is wrong and what to set.
        message: String,
    },
    /// The server's answer could not be understood (malformed frame, bad JSON).
    #[error("could not decode the model's answer: {message}")]
    Protocol {
        /// What was malformed.
        message: String,
    },
    /// Anything else that makes the turn fail for good.
    #[error("{message}")]
    Other {
        /// What happened.
        message: String,
    },
}

impl ProviderError {
    /// A transient error without a retry hint.
    pub fn transient(message: impl Into<String>) -> Self {
        Self::Transient {
            message: message.into(),
            retry_after: None,
        }
    }

    /// Whether retrying the same request may succeed.
    pub fn is_transient(&self) -> bool {
        matches!(self, Self::Transient { .. })
    }

    /// The server's requested wait, for transient errors that carried one.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Self::Transient { retry_after, .. } => *retry_after,
            _ => None,
        }
    }

    /// Which variant it is, for events, logs and recordings
    /// ([`ProviderErrorKind::as_str`] is its wire name).
    pub fn kind(&self) -> ProviderErrorKind {
        match self {
            Self::Transient { .. } => ProviderErrorKind::Transient,
            Self::Auth { .. } => ProviderErrorKind::Auth,
            Self::BadRequest { .. } => ProviderErrorKind::BadRequest,
            Self::ContextOverflow { .. } => ProviderErrorKind::ContextOverflow,
            Self::ModelNotFound { .. } => ProviderErrorKind::ModelNotFound,
            Self::Unsupported { .. } => ProviderErrorKind::Unsupported,
            Self::Config { .. } => ProviderErrorKind::Config,
            Self::Protocol { .. } => ProviderErrorKind::Protocol,
            Self::Other { .. } => ProviderErrorKind::Other,
        }
    }

    /// What happened, without the prefix [`Display`](std::fmt::Display)
    /// puts before it ("authentication failed: ", ...).
    pub fn message(&self) -> &str {
        match self {
            Self::Transient { message, .. }
            | Self::Auth { message }
            | Self::BadRequest { message }
            | Self::ContextOverflow { message }
            | Self::ModelNotFound { message }
            | Self::Unsupported { message }
            | Self::Config { message }
            | Self::Protocol { message }
            | Self::Other { message } => message,
        }
    }

    /// An error of `kind` saying `message` (a transient one without a retry
    /// hint): what a recording or a remote report turns back into an error.
    pub fn of_kind(kind: ProviderErrorKind, message: impl Into<String>) -> Self {
        let message = message.into();
        match kind {
            ProviderErrorKind::Transient => Self::transient(message),
            ProviderErrorKind::Auth => Self::Auth { message },
            ProviderErrorKind::BadRequest => Self::BadRequest { message },
            ProviderErrorKind::ContextOverflow => Self::ContextOverflow { message },
            ProviderErrorKind::ModelNotFound => Self::ModelNotFound { message },
            ProviderErrorKind::Unsupported => Self::Unsupported { message },
            ProviderErrorKind::Config => Self::Config { message },
            ProviderErrorKind::Protocol => Self::Protocol { message },
            ProviderErrorKind::Other => Self::Other { message },
        }
    }
}

/// The variants of [`ProviderError`] by name: the one list of them, which
/// events (`lrg_chat::ErrorKind`), recordings and logs use. Serialized in
/// `snake_case` (`"context_overflow"`); a name this build does not know
/// (a newer lrg wrote it) reads as [`ProviderErrorKind::Other`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ProviderErrorKind {
    /// [`ProviderError::Transient`].
    Transient,
    /// [`ProviderError::Auth`].
    Auth,
    /// [`ProviderError::BadRequest`].
    BadRequest,
    /// [`ProviderError::ContextOverflow`].
    ContextOverflow,
    /// [`ProviderError::ModelNotFound`].
    ModelNotFound,
    /// [`ProviderError::Unsupported`].
    Unsupported,
    /// [`ProviderError::Config`].
    Config,
    /// [`ProviderError::Protocol`].
    Protocol,
    /// [`ProviderError::Other`], and any name this build does not know.
    #[serde(other)]
    Other,
}

impl ProviderErrorKind {
    /// Its wire name (`transient`, `auth`, `bad_request`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Transient => "transient",
            Self::Auth => "auth",
            Self::BadRequest => "bad_request",
            Self::ContextOverflow => "context_overflow",
            Self::ModelNotFound => "model_not_found",
            Self::Unsupported => "unsupported",
            Self::Config => "config",
            Self::Protocol => "protocol",
            Self::Other => "other",
        }
    }
}

impl std::fmt::Display for ProviderErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
