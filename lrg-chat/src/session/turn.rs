//! What a message is and what becomes of it: [`UserInput`], [`TurnHandle`],
//! [`TurnOutcome`], [`SessionError`].

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use lrg_providers::typed::OutputSchemaError;
use lrg_providers::{Image, Message, Part, ProviderError, Role};
use serde_json::Value;
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
        /// The validated answer of a typed message
        /// ([`super::ChatSession::send_with_schema`]); `None` for prose.
        json: Option<Value>,
    },
    /// A typed message's answer never matched its schema within
    /// [`super::SessionConfig::typed_repairs`] repairs (also sent as an
    /// `error` event of kind `invalid_answer`). The last answer is kept in
    /// the history, as the model gave it.
    Invalid {
        /// The last answer's text.
        text: String,
        /// What is wrong with it, one line per problem.
        errors: Vec<String>,
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
    /// The next model turn would have passed a limit of
    /// [`super::SessionConfig::budget`] (also sent as an `error` event of
    /// kind `budget`); every call made so far has its result.
    OverBudget {
        /// Which limit, and what was spent.
        reason: String,
    },
    /// A `user_prompt_submit` hook blocked the message: the model never saw
    /// it (see [`crate::hooks`]). The message stays in the history, with a
    /// note that it was not answered.
    Blocked {
        /// The hook's reason.
        reason: String,
    },
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
    /// No client-tool call of that id waits for an answer.
    #[error("no client tool call `{0}` waits for a result")]
    NoSuchClientCall(String),
    /// There is no user message to answer again.
    #[error("there is no user message to retry")]
    NothingToRetry,
    /// The conversation is empty.
    #[error("the conversation is empty: nothing to compact")]
    NothingToCompact,
    /// Not called from within a tokio runtime.
    #[error("no tokio runtime: a ChatSession runs its turns as tokio tasks")]
    NoRuntime,
    /// A typed message's schema cannot be used (refused before anything is
    /// sent or recorded).
    #[error(transparent)]
    Schema(#[from] OutputSchemaError),
}

/// The running message (or compaction) of a session; await it for its outcome.
/// Dropping the handle does not stop the work (use [`super::ChatSession::stop`]).
///
/// `O` is what awaiting it gives: a [`TurnOutcome`], or for a typed message
/// ([`super::ChatSession::send_typed`]) the typed answer or why there is none.
pub struct TurnHandle<O = TurnOutcome> {
    pub(super) task: tokio::task::JoinHandle<TurnOutcome>,
    /// Told once the message is kept and announced (see [`Self::accepted`]).
    pub(super) accepted: Option<oneshot::Receiver<bool>>,
    /// What it told.
    pub(super) kept: bool,
    /// Turns the outcome into what the caller asked for (a plain function:
    /// the handle stays `Unpin` and `Send` whatever `O` is).
    pub(super) map: fn(TurnOutcome) -> O,
}

impl<O> std::fmt::Debug for TurnHandle<O> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TurnHandle")
            .field("task", &self.task)
            .field("accepted", &self.accepted)
            .field("kept", &self.kept)
            .finish_non_exhaustive()
    }
}

impl TurnHandle {
    /// The handle of `task`, giving its outcome as it is.
    pub(super) fn new(
        task: tokio::task::JoinHandle<TurnOutcome>,
        accepted: oneshot::Receiver<bool>,
    ) -> Self {
        Self {
            task,
            accepted: Some(accepted),
            kept: false,
            map: std::convert::identity,
        }
    }

    /// The same work, giving `map` of its outcome.
    pub(super) fn map<P>(self, map: fn(TurnOutcome) -> P) -> TurnHandle<P> {
        TurnHandle {
            task: self.task,
            accepted: self.accepted,
            kept: self.kept,
            map,
        }
    }
}

impl<O> TurnHandle<O> {
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

impl<O> Future for TurnHandle<O> {
    type Output = O;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<O> {
        let map = self.map;
        Pin::new(&mut self.task).poll(cx).map(|r| {
            map(r.unwrap_or_else(|e| TurnOutcome::Failed {
                error: ProviderError::Other {
                    message: format!("the session task failed: {e}"),
                },
            }))
        })
    }
}
