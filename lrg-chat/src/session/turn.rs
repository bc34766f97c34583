//! What a message is and what becomes of it: [`UserInput`], [`TurnHandle`],
//! [`TurnOutcome`], [`SessionError`].

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use lrg_providers::{Image, Message, Part, ProviderError, Role};
use tokio::sync::oneshot;

/// What the person sends: text and optional images.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct UserInput {
    /// The text.
    pub text: String,
    /// Images attached to it.
    pub images: Vec<Image>,
}

impl From<&str> for UserInput {
    fn from(text: &str) -> Self {
        Self {
            text: text.to_string(),
            images: Vec::new(),
        }
    }
}

impl From<String> for UserInput {
    fn from(text: String) -> Self {
        Self {
            text,
            images: Vec::new(),
        }
    }
}

impl UserInput {
    pub(super) fn into_message(self) -> Message {
        let mut parts = vec![Part::text(self.text)];
        parts.extend(self.images.into_iter().map(Part::Image));
        Message {
            role: Role::User,
            parts,
        }
    }
}

/// How a message (or a compaction) ended.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum TurnOutcome {
    /// The model answered without further tool calls.
    Completed {
        /// The final answer text.
        text: String,
    },
    /// The person stopped it.
    Stopped,
    /// A fatal error ended it (also sent as an `error` event). A failure
    /// that is not the model's (a panicking tool, an empty summary) comes as
    /// [`ProviderError::Other`].
    Failed {
        /// What went wrong.
        error: ProviderError,
    },
    /// [`super::SessionConfig::max_steps`] model turns passed without a final answer.
    StepsExhausted,
}

/// Why a session refused a request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SessionError {
    /// A message is being worked on.
    #[error("the session is busy with a message: stop it or wait for it to finish")]
    Busy,
    /// No approval question is open for that call.
    #[error("no approval is waiting for tool call `{0}`")]
    NoSuchApproval(String),
    /// There is no user message to answer again.
    #[error("there is no user message to retry")]
    NothingToRetry,
    /// The conversation is empty.
    #[error("the conversation is empty: nothing to compact")]
    NothingToCompact,
    /// Not called from within a tokio runtime.
    #[error("no tokio runtime: a ChatSession runs its turns as tokio tasks")]
    NoRuntime,
}

/// The running message (or compaction) of a session; await it for its outcome.
/// Dropping the handle does not stop the work (use [`super::ChatSession::stop`]).
#[derive(Debug)]
pub struct TurnHandle {
    pub(super) task: tokio::task::JoinHandle<TurnOutcome>,
    /// Told once the message is kept and announced (see [`Self::accepted`]).
    pub(super) accepted: Option<oneshot::Receiver<bool>>,
    /// What it told.
    pub(super) kept: bool,
}

impl TurnHandle {
    /// Wait until the work is accepted: the user message (or a retry's
    /// rewind) is durable in the session's store and its numbered event
    /// published — what to await before acknowledging a message to anyone
    /// (an HTTP `202`). Returns whether it is kept: `false` when the store
    /// failed (a `warning` event said so, and the chat goes on in memory
    /// only); `true` without a store. Returns at once when called again;
    /// cancel-safe (a wait given up can be taken up again).
    pub async fn accepted(&mut self) -> bool {
        if let Some(receiver) = &mut self.accepted {
            // A task that ended without telling (a panic) kept nothing it
            // could vouch for.
            self.kept = receiver.await.unwrap_or(false);
            self.accepted = None;
        }
        self.kept
    }
}

impl Future for TurnHandle {
    type Output = TurnOutcome;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<TurnOutcome> {
        Pin::new(&mut self.task).poll(cx).map(|r| {
            r.unwrap_or_else(|e| TurnOutcome::Failed {
                error: ProviderError::Other {
                    message: format!("the session task failed: {e}"),
                },
            })
        })
    }
}
