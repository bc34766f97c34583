//! Keeping a session in a [`SessionStore`]: the new tail of the history is
//! appended after each step, the whole history rewritten after a clear, a
//! retry or a compaction. A write that fails is said once (a `warning`
//! event) and the chat goes on in memory, unsaved.

use std::sync::Arc;

use lrg_providers::{Message, Part, Role};

use super::{Shared, State};
use crate::events::{Event, ImageDescriptor, SkipReason};
use crate::store::{SessionId, SessionState, SessionStore, StoredSession, now_ms};
use crate::tools::ToolClass;
use crate::transcript::{ToolOutcome, outcome_of};

pub(crate) struct Persister {
    store: Arc<dyn SessionStore>,
    id: SessionId,
    progress: tokio::sync::Mutex<Progress>,
}

struct Progress {
    /// History rows the store holds.
    saved: usize,
    /// The [`State::generation`] they belong to.
    generation: u64,
    /// A write failed: the store is no longer written.
    failed: bool,
}

impl Persister {
    pub(crate) fn new(store: Arc<dyn SessionStore>, id: SessionId, saved: usize) -> Self {
        Self {
            store,
            id,
            progress: tokio::sync::Mutex::new(Progress {
                saved,
                generation: 0,
                failed: false,
            }),
        }
    }

    pub(crate) fn id(&self) -> &SessionId {
        &self.id
    }

    pub(crate) fn store(&self) -> &Arc<dyn SessionStore> {
        &self.store
    }

    pub(crate) async fn is_saving(&self) -> bool {
        !self.progress.lock().await.failed
    }
}

enum Write {
    Append(Vec<Message>),
    /// Shared with the history: a rewrite copies no message.
    Rewrite(lrg_providers::Messages),
}

fn state_of(state: &State) -> SessionState {
    let mut granted: Vec<String> = state.chat_allowed.iter().cloned().collect();
    granted.sort();
    SessionState {
        granted,
        usage: state.usage,
        updated_ms: now_ms(),
    }
}

/// Write what the store lacks: the rows added since the last save, or the
/// whole history when it was cut back or replaced meanwhile.
pub(super) async fn save(shared: &Shared) {
    let Some(persister) = &shared.persister else {
        return;
    };
    // Held across the write, so saves reach the store in order.
    let mut progress = persister.progress.lock().await;
    if progress.failed {
        return;
    }
    let (write, stored, len, generation) = {
        let state = shared.lock();
        let len = state.history.len();
        let write = if state.generation != progress.generation || len < progress.saved {
            Write::Rewrite(state.history.clone())
        } else if len > progress.saved {
            Write::Append(state.history[progress.saved..].to_vec())
        } else {
            return;
        };
        (write, state_of(&state), len, state.generation)
    };
    let result = match &write {
        Write::Append(rows) => persister.store.append(&persister.id, rows, &stored).await,
        Write::Rewrite(rows) => persister.store.rewrite(&persister.id, rows, &stored).await,
    };
    match result {
        Ok(()) => {
            progress.saved = len;
            progress.generation = generation;
        }
        Err(e) => {
            progress.failed = true;
            shared.publish(Event::Warning {
                message: format!(
                    "This chat is no longer being saved: {e}. It goes on in memory only \
                     and is lost when the program ends."
                ),
                retrying: false,
            });
        }
    }
}

/// Seed a new session's state from a stored one and tell viewers its
/// history as numbered events, so a page that connects with `after=0`
/// rebuilds the conversation. Tool classes are not stored; replayed calls
/// show as destructive, the class of a tool nothing is known about.
pub(super) fn replay(shared: &Shared, stored: StoredSession) {
    let mut state = shared.lock();
    state.chat_allowed = stored.state.granted.into_iter().collect();
    state.usage = stored.state.usage;
    for (index, row) in stored.rows.iter().enumerate() {
        match row.role {
            Role::User => {
                let images = row
                    .parts
                    .iter()
                    .filter(|p| matches!(p, Part::Image(_)))
                    .count();
                let seq = shared.publish(Event::UserMessage {
                    text: row.text(),
                    images,
                });
                state.user_seqs.push((index, seq));
            }
            Role::Assistant => {
                let reasoning: String = row
                    .parts
                    .iter()
                    .filter_map(|p| match p {
                        Part::Reasoning { text } => Some(text.as_str()),
                        _ => None,
                    })
                    .collect();
                shared.publish(Event::AssistantTurn {
                    reasoning,
                    text: row.text(),
                });
                for call in row.tool_calls() {
                    shared.publish(Event::ToolCall {
                        call_id: call.id.clone(),
                        tool: call.name.clone(),
                        title: None,
                        class: ToolClass::Destructive,
                        arguments: call.arguments.clone(),
                        targets: None,
                    });
                }
            }
            Role::Tool => {
                for part in &row.parts {
                    if let Part::ToolResult(result) = part {
                        shared.publish(result_event(result));
                    }
                }
            }
        }
    }
    state.history = stored.rows.into();
    drop(state);
    for warning in stored.warnings {
        shared.publish(Event::Warning {
            message: warning,
            retrying: false,
        });
    }
}

fn result_event(result: &lrg_providers::ToolResult) -> Event {
    let text = result.text_content();
    let images = ImageDescriptor::of_parts(&result.parts);
    let skipped = |reason| Event::ToolSkipped {
        call_id: result.call_id.clone(),
        reason,
        note: None,
    };
    match outcome_of(result) {
        ToolOutcome::Denied => skipped(SkipReason::NotAllowed),
        ToolOutcome::Stopped => skipped(SkipReason::Stopped),
        ToolOutcome::Skipped => skipped(SkipReason::RepeatedCall),
        ToolOutcome::Ok | ToolOutcome::Failed | ToolOutcome::Running => Event::ToolDone {
            call_id: result.call_id.clone(),
            ok: !result.is_error,
            text,
            images,
        },
    }
}
