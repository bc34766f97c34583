//! One sub-agent's run: its message, its approval questions passed up to
//! the parent, and its final word handed back.

use std::collections::HashSet;
use std::sync::Arc;

use super::{Manager, SubAgentStatus, SubAgentTask};
use crate::events::Event;
use crate::session::{ApprovalRequest, ChatSession, Shared};
use crate::store::{SessionId, SessionMeta, SessionStore};
use crate::{TurnOutcome, session};

/// What a sub-agent is started on.
pub(super) struct Task {
    /// Its prompt, its first message.
    pub(super) prompt: String,
    /// What its meta keeps of the task.
    pub(super) kept: SubAgentTask,
    /// When it started, in milliseconds since the Unix epoch.
    pub(super) started_ms: u64,
}

/// Run sub-agent `id` (its `session`, kept in `stored` when the parent is) on
/// its task, then record its end (in the store first) on the parent and
/// let the parent react.
pub(super) async fn run(
    manager: Arc<Manager>,
    parent: Arc<Shared>,
    id: String,
    sub: ChatSession,
    stored: Option<session::Kept>,
    task: Task,
) {
    let mut created = false;
    if let Some((store, sub_id)) = &stored {
        created = create(&parent, store.as_ref(), sub_id, &task).await;
    }
    let outcome = work(&parent, &id, &sub, task.prompt).await;
    let (status, text) = match outcome {
        TurnOutcome::Completed { text, .. } if text.trim().is_empty() => (
            SubAgentStatus::Done,
            "(The sub-agent finished without writing an answer.)".to_string(),
        ),
        TurnOutcome::Completed { text, .. } => (SubAgentStatus::Done, text),
        // Sub-agents' tasks are never typed; kept as the answer should one be.
        TurnOutcome::Invalid { text, .. } => (SubAgentStatus::Done, text),
        TurnOutcome::Stopped => (SubAgentStatus::Stopped, String::new()),
        TurnOutcome::Failed { error } => (
            SubAgentStatus::Failed,
            format!("The sub-agent failed: {error}"),
        ),
        TurnOutcome::StepsExhausted => (
            SubAgentStatus::Failed,
            "The sub-agent gave up: it used all its model turns without a final answer.".into(),
        ),
        TurnOutcome::Blocked { reason } => (
            SubAgentStatus::Failed,
            format!("A hook blocked the sub-agent's task: {reason}"),
        ),
        TurnOutcome::OverBudget { reason } => (
            SubAgentStatus::Failed,
            format!("The sub-agent ran out of budget: {reason}"),
        ),
    };
    let mut ended_ms = crate::store::now_ms();
    // Whether the store has all of it: a write that failed midway left it
    // short, and its history then stays in memory when it is released.
    let mut saved = created && sub.is_saving().await;
    if let Some((store, sub_id)) = &stored {
        if created {
            // Kept before it is said: a `subtask_status` a viewer saw is
            // what a listing after a crash says.
            match super::stored::keep_end(store.as_ref(), sub_id, status).await {
                Ok(at) => ended_ms = at,
                Err(e) => {
                    tracing::warn!("sub-agent {sub_id}: how it ended is not kept: {e}");
                    saved = false;
                }
            }
        }
        store.release(sub_id).await;
    }
    if manager.finished(&parent, &id, status, text, ended_ms, saved) {
        manager.start_queued();
        session::deliver_next(&parent);
    }
}

/// Make the sub-agent's place in the store, bound to the parent's model,
/// with its task; returns whether it was made.
async fn create(
    parent: &Shared,
    store: &dyn SessionStore,
    sub_id: &SessionId,
    task: &Task,
) -> bool {
    let Some(parent_id) = sub_id.parent() else {
        return false;
    };
    let parent_meta = match store.load(&parent_id).await {
        Ok(stored) => stored.meta,
        Err(e) => {
            tracing::warn!("sub-agent {sub_id}: cannot read its parent's record: {e}");
            return false;
        }
    };
    let mut meta = SessionMeta::new(parent_meta.model);
    meta.id = sub_id.clone();
    meta.owner = parent_meta.owner;
    meta.created_ms = task.started_ms;
    meta.sub_agent = Some(task.kept.clone());
    let created = store.create(&meta).await;
    if let Err(e) = &created {
        // The sub-agent works on; its own `warning` says it is not saved.
        tracing::warn!("sub-agent {sub_id} is not saved: {e}");
        session::publish(
            parent,
            Event::Warning {
                message: format!("Sub-agent {sub_id} is not being saved: {e}"),
                retrying: false,
            },
        );
    }
    created.is_ok()
}

/// Send the prompt and pass approval questions up until the message ends.
async fn work(parent: &Shared, id: &str, sub: &ChatSession, prompt: String) -> TurnOutcome {
    let mut events = sub.subscribe(0);
    let mut handle = match sub.send(prompt) {
        Ok(handle) => handle,
        Err(e) => {
            return TurnOutcome::Failed {
                error: lrg_providers::ProviderError::Other {
                    message: e.to_string(),
                },
            };
        }
    };
    let mut relay = Relay::new(id);
    let mut last_seq = 0;
    let outcome = loop {
        tokio::select! {
            outcome = &mut handle => break outcome,
            entry = events.next() => match entry {
                Some(entry) => {
                    last_seq = entry.seq.unwrap_or(last_seq);
                    relay.pass(parent, &entry.event);
                }
                // Fell behind (a resync): pick up from the log, from its
                // oldest kept event if it has forgotten the ones after
                // `last_seq` (asking for those would resync at once, forever).
                None => {
                    last_seq = last_seq.max(sub.events().first_kept_seq() - 1);
                    events = sub.subscribe(last_seq);
                }
            },
        }
    };
    for entry in sub.events().since(last_seq) {
        relay.pass(parent, &entry.event);
    }
    // What it spent is the parent chat's cost too.
    session::absorb_sub_agent(parent, sub);
    outcome
}

/// Passes a sub-agent's approval questions (and their ends) to the parent's
/// stream, under call ids prefixed with the sub-agent's id (as
/// `session::approver::ForSubAgent` puts them to the parent's approver).
struct Relay<'a> {
    id: &'a str,
    /// Questions passed up and not yet answered.
    asked: HashSet<String>,
}

impl<'a> Relay<'a> {
    fn new(id: &'a str) -> Self {
        Self {
            id,
            asked: HashSet::new(),
        }
    }

    fn prefixed(&self, call_id: &str) -> String {
        format!("{}::{call_id}", self.id)
    }

    fn pass(&mut self, parent: &Shared, event: &Event) {
        let up = match event {
            // The question carries its call: passed up as it is, labelled.
            Event::ApprovalNeeded { call_id, .. } => {
                self.asked.insert(call_id.clone());
                ApprovalRequest::from_event(event).map(|r| r.of_sub_agent(self.id).to_event())
            }
            Event::ApprovalAnswered { call_id, answer } if self.asked.remove(call_id) => {
                Some(Event::ApprovalAnswered {
                    call_id: self.prefixed(call_id),
                    answer: answer.clone(),
                })
            }
            // A question withdrawn by a stop: close it on the parent too.
            Event::ToolSkipped {
                call_id,
                reason,
                note,
            } if self.asked.remove(call_id) => Some(Event::ToolSkipped {
                call_id: self.prefixed(call_id),
                reason: *reason,
                note: note.clone(),
            }),
            _ => None,
        };
        if let Some(event) = up {
            session::publish(parent, event);
        }
    }
}
