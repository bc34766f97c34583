//! Work done outside the loop: a model that owns its own loop and tools (an
//! external ACP agent) reports its tool calls and asks its permission
//! questions through the session whose turn it is taking
//! ([`ChatSession::current`]), so every viewer and approver (terminal, page,
//! script) serves it as it serves lrg's own.

use std::future::Future;
use std::sync::{Arc, Weak};

use super::approver::{ApprovalRequest, Waited};
use super::{ChatSession, Shared};
use crate::events::Event;
use crate::permissions::{Answer, AnswerKind, ApprovalReason};
use crate::tools::ToolClass;

/// A handle to a session that does not keep it alive: what a model of the
/// session holds (the session holds the model).
#[derive(Clone)]
pub struct WeakChatSession(Weak<Shared>);

impl std::fmt::Debug for WeakChatSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WeakChatSession")
    }
}

tokio::task_local! {
    /// The session whose message (or compaction) the task is working on.
    static WORKING: WeakChatSession;
}

/// Marks the work of a session's task as that session's.
pub(super) fn working(shared: &Arc<Shared>) -> WeakChatSession {
    WeakChatSession(Arc::downgrade(shared))
}

impl WeakChatSession {
    /// Run `work` as this session's: [`ChatSession::current`] finds it.
    pub(super) fn scope_to<F: Future>(self, work: F) -> impl Future<Output = F::Output> {
        WORKING.scope(self, work)
    }

    /// The session, while it lives.
    pub fn upgrade(&self) -> Option<ChatSession> {
        self.0.upgrade().map(|shared| ChatSession { shared })
    }

    /// Whether both handles are of the same session.
    pub fn ptr_eq(&self, other: &WeakChatSession) -> bool {
        Weak::ptr_eq(&self.0, &other.0)
    }
}

impl ChatSession {
    /// The session whose message the calling task is working on: what a
    /// model's [`lrg_providers::ChatModel::turn`] finds when a session
    /// calls it. `None` outside a session's turn.
    pub fn current() -> Option<ChatSession> {
        WORKING.try_with(WeakChatSession::upgrade).ok().flatten()
    }

    /// How many times the history was rewritten rather than added to
    /// (cleared, retried, compacted, carried over): a model that keeps the
    /// conversation itself (an external agent) compares it with what it
    /// last saw, to start afresh when the two parted.
    pub fn history_generation(&self) -> u64 {
        self.shared.lock().generation
    }

    /// A handle that does not keep the session alive.
    pub fn downgrade(&self) -> WeakChatSession {
        WeakChatSession(Arc::downgrade(&self.shared))
    }

    /// Tell viewers of a tool call made outside the loop (`tool_call`,
    /// `tool_running`, `tool_done`, `tool_skipped`); returns its `seq`. The
    /// history is not changed: the agent that made the call keeps it.
    pub fn publish_external(&self, event: Event) -> u64 {
        self.shared.publish(event)
    }

    /// Ask the person about call `call_id`, made outside the loop (announce
    /// it with [`ChatSession::publish_external`] first: the question shows
    /// that call's tool and arguments), as an `approval_needed` of reason
    /// `agent` that [`ChatSession::answer_approval`] or the session's
    /// [`Approver`](super::Approver) answers. A denial when no message is
    /// running, when it is stopped before the answer, or when nobody
    /// answers within [`SessionConfig::approval_timeout`](super::SessionConfig::approval_timeout).
    pub async fn ask_approval(&self, call_id: &str, offer_always: bool) -> Answer {
        let Some(cancel) = self.shared.lock().running.clone() else {
            return Answer::deny_with("no message is being worked on");
        };
        let mut request = announced(&self.shared, call_id);
        if !offer_always {
            request.answers.retain(|kind| *kind != AnswerKind::Always);
        }
        let denied = match super::approver::wait(&self.shared, &request, &cancel).await {
            Waited::Answered(answer) => return answer,
            Waited::Stopped => Answer::deny_with("stopped before an answer"),
            Waited::TimedOut(after) => {
                Answer::deny_with(format!("nobody answered within {} s", after.as_secs_f64()))
            }
        };
        self.shared.publish(Event::ApprovalAnswered {
            call_id: call_id.to_string(),
            answer: denied.clone(),
        });
        denied
    }
}

/// The question about external call `call_id`, from the `tool_call` that
/// announced it (the newest kept one of that id; without one, a question
/// about an unknown tool, destructive as anything unknown is).
fn announced(shared: &Shared, call_id: &str) -> ApprovalRequest {
    let entries = shared.events.entries();
    let call = entries.iter().rev().find_map(|entry| match &entry.event {
        Event::ToolCall {
            call_id: id,
            tool,
            title,
            class,
            arguments,
            targets,
            ..
        } if id == call_id => Some((tool, title, *class, arguments, *targets)),
        _ => None,
    });
    match call {
        Some((tool, title, class, arguments, targets)) => {
            let mut request = ApprovalRequest::new(
                call_id,
                tool.clone(),
                class,
                arguments.clone(),
                ApprovalReason::Agent,
            );
            request.title = title.clone();
            request.targets = targets;
            request
        }
        None => {
            let mut request = ApprovalRequest::new(
                call_id,
                "",
                ToolClass::Destructive,
                serde_json::Value::Null,
                ApprovalReason::Agent,
            );
            request.warnings.push(
                "the agent did not say which tool this call is to, so it counts as destructive"
                    .to_string(),
            );
            request
        }
    }
}
