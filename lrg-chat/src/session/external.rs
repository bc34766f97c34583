//! Work done outside the loop: a model that owns its own loop and tools (an
//! external ACP agent) reports its tool calls and asks its permission
//! questions through the session whose turn it is taking
//! ([`ChatSession::current`]), so every viewer and approver (terminal, page,
//! script) serves it as it serves lrg's own.

use std::future::Future;
use std::sync::{Arc, Weak};

use tokio::sync::oneshot;

use super::{ChatSession, Shared};
use crate::events::Event;
use crate::permissions::{Answer, ApprovalReason};

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
    /// it with [`ChatSession::publish_external`] first), as an
    /// `approval_needed` of reason `agent` that
    /// [`ChatSession::answer_approval`] answers. A denial when no message is
    /// running, or when it is stopped before the answer.
    pub async fn ask_approval(&self, call_id: &str, offer_always: bool) -> Answer {
        let (sender, receiver) = oneshot::channel();
        let cancel = {
            let mut state = self.shared.lock();
            let Some(cancel) = state.running.clone() else {
                return Answer::deny_with("no message is being worked on");
            };
            state.approvals.insert(call_id.to_string(), sender);
            self.shared.publish(Event::ApprovalNeeded {
                call_id: call_id.to_string(),
                reason: ApprovalReason::Agent,
                offer_always,
                sub_agent: None,
            });
            cancel
        };
        let answer = tokio::select! {
            biased;
            _ = cancel.cancelled() => None,
            answer = receiver => answer.ok(),
        };
        self.shared.lock().approvals.remove(call_id);
        let answer = answer.unwrap_or_else(|| Answer::deny_with("stopped before an answer"));
        self.shared.publish(Event::ApprovalAnswered {
            call_id: call_id.to_string(),
            answer: answer.clone(),
        });
        answer
    }
}
