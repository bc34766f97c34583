//! Questions a tool server puts to the person (MCP elicitation), beside
//! approvals: one pattern. A server asks during a call; the session
//! publishes a numbered `question` event carrying everything a front end
//! needs to ask (the form's schema, or the URL), and waits for
//! [`ChatSession::answer_question`]. A stop, the end of the chat and
//! [`SessionConfig::question_timeout`](super::SessionConfig::question_timeout)
//! cancel it; every question ends with one `question_answered`, and the
//! server (and so the waiting tool) always gets an answer.
//!
//! An accepted answer is checked against the form
//! ([`crate::tools::elicitation::Form::check`]): a bad one is refused with
//! [`QuestionError::Invalid`] naming the field, and the question stays open.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use super::{ChatSession, Shared};
use crate::events::Event;
use crate::tools::elicitation::Form;
use crate::tools::mcp_link::{Asked, CallSink, Caller, Elicited, Progress, ServerQuestion};

/// Default for [`SessionConfig::question_timeout`](super::SessionConfig::question_timeout):
/// 10 minutes.
pub const DEFAULT_QUESTION_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(600);

/// What a question asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QuestionMode {
    /// Fill in a form.
    Form,
    /// Go to a page of the server's.
    Url,
}

/// How a question ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QuestionAction {
    /// Answered (a form with its values; a page visited).
    Accept,
    /// Refused: the tool goes on without it.
    Decline,
    /// Dismissed: the tool's whole operation is called off.
    Cancel,
}

impl QuestionAction {
    /// Its wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Accept => "accept",
            Self::Decline => "decline",
            Self::Cancel => "cancel",
        }
    }
}

/// The person's answer to a question (over HTTP the body `{"action":
/// "accept", "content": {...}}`, `{"action": "decline"}`, `{"action":
/// "cancel"}`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case")]
#[non_exhaustive]
pub enum QuestionAnswer {
    /// Answer: for a form, the field values (checked against it); for a
    /// URL, that the person went there (no content).
    Accept {
        /// The field values, an object keyed by field name.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        content: Option<Value>,
    },
    /// Refuse to answer.
    Decline {
        /// Why, told to the server (`_meta["io.lrg/reason"]`) and in
        /// `question_answered`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// Call the whole thing off.
    Cancel {
        /// Why, as for a decline.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
}

impl QuestionAnswer {
    /// Accept with these field values.
    pub fn accept(content: Value) -> Self {
        Self::Accept {
            content: Some(content),
        }
    }

    /// Decline, saying nothing.
    pub fn decline() -> Self {
        Self::Decline { reason: None }
    }

    /// Decline, telling the server why.
    pub fn decline_with(reason: impl Into<String>) -> Self {
        Self::Decline {
            reason: Some(reason.into()),
        }
    }

    /// Cancel, saying nothing.
    pub fn cancel() -> Self {
        Self::Cancel { reason: None }
    }
}

/// Why an answer was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum QuestionError {
    /// No question of that number is open (never asked, answered, or
    /// cancelled).
    #[error("no question {0} is open")]
    NoSuchQuestion(u64),
    /// The content does not fit the form; the question stays open.
    #[error("the answer's field `{field}` {message}")]
    Invalid {
        /// The field that is wrong.
        field: String,
        /// What is wrong with it.
        message: String,
    },
}

/// An open question.
struct Open {
    form: Option<Form>,
    answer: oneshot::Sender<Elicited>,
}

/// A session's open questions.
pub(crate) struct Desk {
    me: Weak<Shared>,
    next: AtomicU64,
    open: Mutex<HashMap<u64, Open>>,
    /// Numbers the servers' sampling requests (see [`super::sampling`]).
    pub(super) samplings: AtomicU64,
}

impl Desk {
    pub(crate) fn new(me: Weak<Shared>) -> Self {
        Self {
            me,
            next: AtomicU64::new(0),
            open: Mutex::new(HashMap::new()),
            samplings: AtomicU64::new(0),
        }
    }

    fn open(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Open>> {
        lrg_providers::sync::lock(&self.open)
    }
}

/// The caller of tool call `call_id`, made while the session's `cancel`
/// holds: the servers it reaches ask this session.
pub(super) fn caller(shared: &Shared, call_id: &str, cancel: &CancellationToken) -> Caller {
    Caller {
        call_id: call_id.to_owned(),
        sink: Arc::new(Sink(shared.questions.me.clone())),
        cancel: cancel.clone(),
    }
}

/// Where a session's calls' servers reach it (holds it weakly: a server's
/// late request never keeps an ended chat alive).
struct Sink(Weak<Shared>);

/// Closes a question that ends without the person's answer (its waiting
/// was cut: a stop, the timeout, the server gone) with `question_answered`.
struct Asking {
    me: Weak<Shared>,
    id: u64,
    why: Option<(QuestionAction, String)>,
}

impl Drop for Asking {
    fn drop(&mut self) {
        let Some(shared) = self.me.upgrade() else {
            return;
        };
        if shared.questions.open().remove(&self.id).is_none() {
            // Answered: that published its own event.
            return;
        }
        let (action, reason) = self.why.take().unwrap_or((
            QuestionAction::Cancel,
            "the tool server stopped waiting for the answer".to_owned(),
        ));
        shared.publish(Event::QuestionAnswered {
            question_id: self.id,
            action,
            content: None,
            reason: Some(reason),
        });
    }
}

impl CallSink for Sink {
    fn ask(
        &self,
        question: ServerQuestion,
        cancel: CancellationToken,
    ) -> BoxFuture<'static, Elicited> {
        let me = self.0.clone();
        Box::pin(async move {
            let Some(shared) = me.upgrade() else {
                return Elicited::Cancel(Some("the chat has ended".to_owned()));
            };
            let timeout = shared.config.question_timeout;
            let (sender, receiver) = oneshot::channel();
            let id = shared.questions.next.fetch_add(1, Ordering::SeqCst) + 1;
            let (mode, requested_schema, url, form) = match question.ask {
                Asked::Form { schema, form } => {
                    (QuestionMode::Form, Some(schema), None, Some(form))
                }
                Asked::Url { url } => (QuestionMode::Url, None, Some(url), None),
            };
            // Registered before the question goes out, so an answer sent
            // the moment it is seen finds it.
            shared.questions.open().insert(
                id,
                Open {
                    form,
                    answer: sender,
                },
            );
            shared.publish(Event::Question {
                question_id: id,
                server: question.server,
                tool_call_id: question.tool_call_id,
                message: question.message,
                mode,
                requested_schema,
                url,
            });
            drop(shared);
            let mut asking = Asking { me, id, why: None };
            let stopped = "the person stopped the chat's work".to_owned();
            let timed_out = format!("no answer within {} s", timeout.as_secs());
            tokio::select! {
                biased;
                answer = receiver => match answer {
                    Ok(answer) => answer,
                    Err(_) => Elicited::Cancel(Some("the chat has ended".to_owned())),
                },
                () = cancel.cancelled() => {
                    asking.why = Some((QuestionAction::Cancel, stopped.clone()));
                    Elicited::Cancel(Some(stopped))
                }
                () = tokio::time::sleep(timeout) => {
                    asking.why = Some((QuestionAction::Cancel, timed_out.clone()));
                    Elicited::Cancel(Some(timed_out))
                }
            }
        })
    }

    fn progress(&self, call_id: &str, progress: Progress) {
        if let Some(shared) = self.0.upgrade() {
            shared.events.publish_live(Event::ToolProgress {
                call_id: call_id.to_owned(),
                progress: progress.progress,
                total: progress.total,
                message: progress.message,
            });
        }
    }

    fn sample(
        &self,
        ask: crate::tools::mcp_sampling::SamplingAsk,
        cancel: CancellationToken,
    ) -> BoxFuture<
        'static,
        Result<crate::tools::mcp_sampling::Sampled, crate::tools::mcp_sampling::Refused>,
    > {
        super::sampling::sample(self.0.clone(), ask, cancel)
    }

    fn server_log(&self, server: &str, level: &str, logger: Option<&str>, message: &str) {
        if let Some(shared) = self.0.upgrade() {
            shared.publish(Event::ServerLog {
                server: server.to_owned(),
                level: level.to_owned(),
                logger: logger.map(str::to_owned),
                message: message.to_owned(),
            });
        }
    }
}

impl ChatSession {
    /// Answer question `question_id` (a `question` event). An accepted
    /// form is checked first: a bad answer is refused with
    /// [`QuestionError::Invalid`] naming the field, and the question stays
    /// open for another answer.
    pub fn answer_question(
        &self,
        question_id: u64,
        answer: QuestionAnswer,
    ) -> Result<(), QuestionError> {
        let desk = &self.shared.questions;
        let mut open = desk.open();
        let Some(question) = open.get(&question_id) else {
            return Err(QuestionError::NoSuchQuestion(question_id));
        };
        let mut why = None;
        let (elicited, action, content) = match answer {
            QuestionAnswer::Accept { content } => match &question.form {
                Some(form) => {
                    let given = content.unwrap_or_else(|| Value::Object(Map::new()));
                    let checked = form.check(&given).map_err(|e| QuestionError::Invalid {
                        field: e.field,
                        message: e.message,
                    })?;
                    let shown = Value::Object(checked.clone());
                    (
                        Elicited::Accept(Some(checked)),
                        QuestionAction::Accept,
                        Some(shown),
                    )
                }
                None => (Elicited::Accept(None), QuestionAction::Accept, None),
            },
            QuestionAnswer::Decline { reason } => {
                why.clone_from(&reason);
                (Elicited::Decline(reason), QuestionAction::Decline, None)
            }
            QuestionAnswer::Cancel { reason } => {
                why.clone_from(&reason);
                (Elicited::Cancel(reason), QuestionAction::Cancel, None)
            }
        };
        let Some(question) = open.remove(&question_id) else {
            return Err(QuestionError::NoSuchQuestion(question_id));
        };
        // Published under the lock, so no cancel can slip in between.
        self.shared.publish(Event::QuestionAnswered {
            question_id,
            action,
            content,
            reason: why,
        });
        drop(open);
        // The server may have given up meanwhile; the answer then has no one to go to.
        let _ = question.answer.send(elicited);
        Ok(())
    }

    /// The numbers of the questions open now, lowest first.
    pub fn pending_questions(&self) -> Vec<u64> {
        let mut ids: Vec<u64> = self.shared.questions.open().keys().copied().collect();
        ids.sort_unstable();
        ids
    }
}
