//! One sub-agent's run: its message, its approval questions passed up to
//! the parent, and its final word handed back.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use super::{SubAgentStatus, manager_of};
use crate::events::{Event, SubAgentAsk};
use crate::session::{ChatSession, Shared};
use crate::store::{SessionId, SessionMeta, SessionStore};
use crate::{TurnOutcome, session};

/// Run sub-agent `id` (its `session`, kept in `stored` when the parent is) on
/// `prompt`, then record its end on the parent and let the parent react.
pub(super) async fn run(
    parent: Arc<Shared>,
    id: String,
    sub: ChatSession,
    stored: Option<session::Kept>,
    prompt: String,
) {
    if let Some((store, sub_id)) = &stored {
        create(&parent, store.as_ref(), sub_id).await;
    }
    let outcome = work(&parent, &id, &sub, prompt).await;
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
    if let Some((store, sub_id)) = &stored {
        store.release(sub_id).await;
    }
    if let Some(manager) = manager_of(&parent)
        && manager.finished(&id, status, text)
    {
        manager.start_queued();
        session::deliver(&parent);
    }
}

/// Make the sub-agent's place in the store, bound to the parent's model.
async fn create(parent: &Shared, store: &dyn SessionStore, sub_id: &SessionId) {
    let Some(parent_id) = sub_id.parent() else {
        return;
    };
    let parent_meta = match store.load(&parent_id).await {
        Ok(stored) => stored.meta,
        Err(e) => {
            tracing::warn!("sub-agent {sub_id}: cannot read its parent's record: {e}");
            return;
        }
    };
    let mut meta = SessionMeta::new(parent_meta.model);
    meta.id = sub_id.clone();
    meta.owner = parent_meta.owner;
    if let Err(e) = store.create(&meta).await {
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
/// stream, under call ids prefixed with the sub-agent's id.
struct Relay<'a> {
    id: &'a str,
    /// The sub-agent's calls so far, to say what an approval is about.
    calls: HashMap<String, SubAgentAsk>,
    /// Questions passed up and not yet answered.
    asked: HashSet<String>,
}

impl<'a> Relay<'a> {
    fn new(id: &'a str) -> Self {
        Self {
            id,
            calls: HashMap::new(),
            asked: HashSet::new(),
        }
    }

    fn prefixed(&self, call_id: &str) -> String {
        format!("{}::{call_id}", self.id)
    }

    fn pass(&mut self, parent: &Shared, event: &Event) {
        let up = match event {
            Event::ToolCall {
                call_id,
                tool,
                class,
                arguments,
                ..
            } => {
                let ask = SubAgentAsk::new(self.id, tool.clone(), *class, arguments.clone());
                self.calls.insert(call_id.clone(), ask);
                None
            }
            Event::ApprovalNeeded {
                call_id,
                reason,
                offer_always,
                ..
            } => {
                self.asked.insert(call_id.clone());
                let ask = self.calls.get(call_id).cloned().unwrap_or_else(|| {
                    SubAgentAsk::new(
                        self.id,
                        "?",
                        crate::tools::ToolClass::Destructive,
                        serde_json::Value::Null,
                    )
                });
                Some(Event::ApprovalNeeded {
                    call_id: self.prefixed(call_id),
                    reason: reason.clone(),
                    offer_always: *offer_always,
                    sub_agent: Some(ask),
                })
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
