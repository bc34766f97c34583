//! Keeping a session in a [`SessionStore`]: the new tail of the history is
//! appended after each step, the whole history rewritten after a clear, a
//! retry or a compaction.
//!
//! What a viewer saw, a resume has: every numbered event that reports a
//! change to the history (`user_message`, `assistant_turn`, `tool_done`,
//! `tool_skipped`, `rewound`, `cleared`, `compacted`, and a sub-agent's
//! answer as its `tool_call` + `tool_done`) is published only after the
//! change is durable (appended and `sync_data`'d, or rewritten). Changes
//! made outside a model turn wait in [`Announce`], in order, for the save
//! that covers them. A tool's result is kept the moment
//! the call ends ([`save_result`]), ahead of the step's one results
//! message, which then writes only what was not kept yet.
//!
//! The chat's setup for its first message ([`ChatSession::keep_setup`]:
//! the model, system prompt, settings and tools, for `lrg sessions export
//! --test`) is written with every state; a resume keeps the stored one.
//!
//! A write that fails is said once (a `warning` event, published *before*
//! the event whose change it failed to keep, so nothing is shown as kept
//! that is not) and the chat goes on in memory, unsaved: a full disk should
//! not take the conversation away from the person in it.

use std::sync::Arc;

use lrg_providers::{Message, Part, ProviderError, Role, ToolResult};

use super::{ChatSession, Shared, State};
use crate::events::{Event, ImageDescriptor, SkipReason};
use crate::permissions::is_offered;
use crate::store::{
    ChatSetup, SessionId, SessionState, SessionStore, SetupOrigin, StoredSession, now_ms,
};
use crate::tools::ToolClass;
use crate::transcript::{ToolOutcome, outcome_of};

pub(crate) struct Persister {
    store: Arc<dyn SessionStore>,
    id: SessionId,
    progress: tokio::sync::Mutex<Progress>,
    /// How the chat was set up for its first message ([`ChatSession::keep_setup`],
    /// or the stored one on resume): written with every state.
    setup: std::sync::Mutex<Option<Arc<ChatSetup>>>,
}

struct Progress {
    /// History rows the store holds.
    saved: usize,
    /// The [`State::generation`] they belong to.
    generation: u64,
    /// A write failed: the store is no longer written.
    failed: bool,
    /// Call ids whose results the store holds ahead of the history (kept
    /// as each call ended; the step's results message follows).
    ahead: Vec<String>,
    /// The lock and the consents the store holds, as last written (`None`:
    /// not known yet): [`save_state`] writes only a change.
    choices: Option<(bool, Vec<String>)>,
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
                ahead: Vec::new(),
                choices: None,
            }),
            setup: std::sync::Mutex::new(None),
        }
    }

    fn setup(&self) -> Option<Arc<ChatSetup>> {
        lrg_providers::sync::lock(&self.setup).clone()
    }

    fn set_setup(&self, setup: Option<Arc<ChatSetup>>) {
        *lrg_providers::sync::lock(&self.setup) = setup;
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

impl ChatSession {
    /// Keep, with this chat, how it is set up for its first message: the
    /// model as it describes itself, the system prompt, the generation
    /// settings and step limit, every tool listed (and which the
    /// permissions block), and what `origin` tells of where the tools came
    /// from. That is what turns a kept chat into a test later (`lrg
    /// sessions export --test`). Call it before the first message; it is
    /// written with the next save.
    ///
    /// Returns whether it was kept: not for a chat without a store, nor for
    /// one that has a history already (a resumed chat keeps the setup its
    /// first message had). Fails when the model cannot be resolved.
    pub async fn keep_setup(&self, origin: SetupOrigin) -> Result<bool, ProviderError> {
        let shared = &self.shared;
        let Some(persister) = &shared.persister else {
            return Ok(false);
        };
        if !shared.lock().history.is_empty() {
            return Ok(false);
        }
        let model = shared.models.resolve().await?;
        let info = model.info();
        drop(model);
        // What the first turn will warn about, too: no tools to keep.
        let tools = match shared.base_tools.list_shared().await {
            Ok(specs) => specs.to_vec(),
            Err(_) => Vec::new(),
        };
        let mut offered = match &shared.delegation {
            Some(_) => shared
                .tools
                .list_shared()
                .await
                .map(|specs| specs.to_vec())
                .unwrap_or_default(),
            None => tools.clone(),
        };
        let settings = shared.permissions.settings();
        let blocked = offered
            .iter()
            .filter(|s| !is_offered(&settings, &s.name))
            .map(|s| s.name.clone())
            .collect();
        offered.retain(|s| is_offered(&settings, &s.name));
        let setup = ChatSetup {
            system: (shared.system_prompt)(&info, &offered),
            model: Some(info),
            generation: shared.lock().generation_settings.clone(),
            max_steps: Some(shared.config.max_steps),
            tools,
            blocked,
            sub_agents: shared.delegation.is_some(),
            origin,
        };
        persister.set_setup(Some(Arc::new(setup)));
        Ok(true)
    }
}

enum Write {
    Append(Vec<Message>),
    /// Shared with the history: a rewrite copies no message.
    Rewrite(lrg_providers::Messages),
}

fn state_of(shared: &Shared, state: &State) -> SessionState {
    let mut granted: Vec<String> = state.chat_allowed.iter().cloned().collect();
    granted.sort();
    SessionState {
        granted,
        usage: state.usage,
        updated_ms: now_ms(),
        local_only: shared.local_only.load(std::sync::atomic::Ordering::SeqCst),
        cloud_consent: state.cloud_consent.iter().cloned().collect(),
        cost: Some(super::budget::chat_total(state).cost),
        // A sub-agent's end is written once, by its runner, after its last
        // save.
        sub_agent_end: None,
        setup: shared.persister.as_ref().and_then(Persister::setup),
    }
}

/// Keep the state now, though the history has not changed (the lock turned
/// on, a consent given): a chat closed before its next message still
/// resumes as it was left. Returns whether it is durable (see [`save`]).
pub(super) async fn save_state(shared: &Shared) -> bool {
    let Some(persister) = &shared.persister else {
        return true;
    };
    let mut progress = persister.progress.lock().await;
    if progress.failed {
        return false;
    }
    let pending = {
        let state = shared.lock();
        state.generation != progress.generation || state.history.len() != progress.saved
    };
    if pending {
        // Rows not kept yet go first; their write carries the state.
        return save_locked(shared, persister, &mut progress).await;
    }
    let stored = state_of(shared, &shared.lock());
    let choices = (stored.local_only, stored.cloud_consent.clone());
    if progress.choices.as_ref() == Some(&choices) {
        return true;
    }
    match persister.store.append(&persister.id, &[], &stored).await {
        Ok(()) => {
            progress.choices = Some(choices);
            true
        }
        Err(e) => {
            fail(shared, &mut progress, &e);
            false
        }
    }
}

/// Write what the store lacks: the rows added since the last save, or the
/// whole history when it was cut back or replaced meanwhile. Returns
/// whether the history is durable now: `true` without a store, `false`
/// once a write has failed.
pub(super) async fn save(shared: &Shared) -> bool {
    let Some(persister) = &shared.persister else {
        return true;
    };
    // Held across the write, so saves reach the store in order.
    let mut progress = persister.progress.lock().await;
    save_locked(shared, persister, &mut progress).await
}

/// Keep a tool call's result now, before its `tool_done` (or
/// `tool_skipped`) is published: a `tool_done ok:true` that was shown must
/// not come back as "not finished" after a crash. The result is appended as
/// a row of its own; the step's results message, saved later, skips it, and
/// a load merges the rows into one message again.
pub(super) async fn save_result(shared: &Shared, result: &ToolResult) -> bool {
    let Some(persister) = &shared.persister else {
        return true;
    };
    let mut progress = persister.progress.lock().await;
    // Whatever came before the call first (normally kept already).
    if !save_locked(shared, persister, &mut progress).await {
        return false;
    }
    let row = [Message::tool_results([result.clone()])];
    let stored = state_of(shared, &shared.lock());
    match persister.store.append(&persister.id, &row, &stored).await {
        Ok(()) => {
            progress.ahead.push(result.call_id.clone());
            true
        }
        Err(e) => {
            fail(shared, &mut progress, &e);
            false
        }
    }
}

async fn save_locked(shared: &Shared, persister: &Persister, progress: &mut Progress) -> bool {
    if progress.failed {
        return false;
    }
    let (write, stored, len, generation) = {
        let state = shared.lock();
        let len = state.history.len();
        let write = if state.generation != progress.generation || len < progress.saved {
            Write::Rewrite(state.history.clone())
        } else if len > progress.saved {
            Write::Append(without_ahead(
                &state.history[progress.saved..],
                &progress.ahead,
            ))
        } else {
            return true;
        };
        (write, state_of(shared, &state), len, state.generation)
    };
    // The step's results were all kept as each call ended, with the state
    // as it was then (a grant comes before its call runs): nothing is left
    // to write, and no second fsync is paid for the step.
    if matches!(&write, Write::Append(rows) if rows.is_empty()) {
        progress.saved = len;
        progress.ahead.clear();
        return true;
    }
    let result = match &write {
        Write::Append(rows) => persister.store.append(&persister.id, rows, &stored).await,
        Write::Rewrite(rows) => persister.store.rewrite(&persister.id, rows, &stored).await,
    };
    match result {
        Ok(()) => {
            progress.saved = len;
            progress.generation = generation;
            progress.ahead.clear();
            progress.choices = Some((stored.local_only, stored.cloud_consent));
            true
        }
        Err(e) => {
            fail(shared, progress, &e);
            false
        }
    }
}

fn fail(shared: &Shared, progress: &mut Progress, e: &crate::store::StoreError) {
    progress.failed = true;
    shared.publish(Event::Warning {
        message: format!(
            "This chat is no longer being saved: {e}. It goes on in memory only \
             and is lost when the program ends."
        ),
        retrying: false,
    });
}

/// `rows` without the results the store holds already ([`save_result`]);
/// a results row left with nothing is left out.
fn without_ahead(rows: &[Message], ahead: &[String]) -> Vec<Message> {
    if ahead.is_empty() {
        return rows.to_vec();
    }
    rows.iter()
        .filter_map(|row| {
            if row.role != Role::Tool {
                return Some(row.clone());
            }
            let parts: Vec<Part> = row
                .parts
                .iter()
                .filter(|p| !matches!(p, Part::ToolResult(r) if ahead.contains(&r.call_id)))
                .cloned()
                .collect();
            (!parts.is_empty()).then(|| Message {
                role: Role::Tool,
                parts,
            })
        })
        .collect()
}

/// A change to the history whose event waits for the change to be kept.
/// Queued in [`State::announce`] in the order the changes were made, and
/// published, in that order, by whichever save first covers them.
pub(super) enum Announce {
    /// The user message at `index` of the history.
    User {
        index: usize,
        text: String,
        images: usize,
    },
    /// A retry cut the history back to the user message of event `to_seq`.
    Rewound { to_seq: u64 },
    /// The history was emptied ([`ChatSession::clear`](super::ChatSession::clear)).
    Cleared,
    /// Rows entered outside a model turn (a sub-agent's answer, as a call
    /// and its result): the events that show them.
    Events(Vec<Event>),
}

/// Publish what the starting work announces, then `busy`: called once its
/// first save is done, so a `user_message` is never shown (nor a `202`
/// given) for a message a crash could still lose.
pub(super) fn announce(shared: &Shared, autonomous: bool) {
    let mut state = shared.lock();
    publish_pending(shared, &mut state);
    super::budget::start_message(&mut state);
    shared.publish(Event::Busy {
        busy: true,
        autonomous,
        message_total: None,
        chat_total: None,
    });
}

/// Publish every change queued for announcement: call only once a save
/// that covers them returned (or when there is no store to wait for).
pub(super) fn publish_pending(shared: &Shared, state: &mut State) {
    for pending in std::mem::take(&mut state.announce) {
        match pending {
            Announce::User {
                index,
                text,
                images,
            } => {
                let seq = shared.publish(Event::UserMessage { text, images });
                state.user_seqs.push((index, seq));
            }
            Announce::Rewound { to_seq } => {
                shared.publish(Event::Rewound { to_seq });
            }
            Announce::Cleared => {
                shared.publish(Event::Cleared);
            }
            Announce::Events(events) => {
                for event in events {
                    shared.publish(event);
                }
            }
        }
    }
}

/// Save, then publish what waited for it ([`publish_pending`]). Returns
/// whether the history is durable (see [`save`]).
pub(super) async fn save_and_announce(shared: &Shared) -> bool {
    let kept = save(shared).await;
    publish_pending(shared, &mut shared.lock());
    kept
}

/// Seed a new session's state from a stored one and tell viewers its
/// history as numbered events, so a page that connects with `after=0`
/// rebuilds the conversation. Tool classes are not stored; replayed calls
/// show as destructive, the class of a tool nothing is known about.
pub(super) fn replay(shared: &Shared, stored: StoredSession) {
    if let Some(persister) = &shared.persister {
        // The first message's setup stays the chat's.
        persister.set_setup(stored.state.setup.clone());
    }
    let mut state = shared.lock();
    state.chat_allowed = stored.state.granted.into_iter().collect();
    state.usage = stored.state.usage;
    super::budget::resume(&mut state, stored.state.usage, stored.state.cost);
    state.cloud_consent = stored.state.cloud_consent.into_iter().collect();
    // A kept lock holds on resume; one the opener asks for holds too.
    if stored.state.local_only {
        shared
            .local_only
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }
    for (index, row) in stored.rows.iter().enumerate() {
        for event in row_events(row) {
            let user = matches!(event, Event::UserMessage { .. });
            let seq = shared.publish(event);
            if user {
                state.user_seqs.push((index, seq));
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

/// The numbered events that tell a viewer what `rows` hold, in order: what
/// a resumed session's log begins with, and what a reader that needs the
/// whole conversation replays when the log has forgotten its start.
///
/// A typed answer's `json` is not stored in the history (the row keeps the
/// text the model wrote, as a provider sees it again), so its rebuilt
/// `assistant_turn` has none: the text still holds the JSON.
pub(crate) fn history_events(rows: &[Message]) -> Vec<Event> {
    rows.iter().flat_map(row_events).collect()
}

/// The events of one stored row (see [`history_events`]).
fn row_events(row: &Message) -> Vec<Event> {
    let mut events = Vec::new();
    match row.role {
        Role::User => {
            let images = row
                .parts
                .iter()
                .filter(|p| matches!(p, Part::Image(_)))
                .count();
            events.push(Event::UserMessage {
                text: row.text(),
                images,
            });
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
            // A stopped turn was kept with the stop note after its text:
            // shown again as it was, marked stopped.
            let text = row.text();
            let (text, stopped) = match text.strip_suffix(super::STOPPED_NOTE) {
                Some(shown) => (shown.trim_end().to_owned(), true),
                None => (text, false),
            };
            events.push(Event::AssistantTurn {
                reasoning,
                text,
                json: None,
                stopped,
            });
            for call in row.tool_calls() {
                events.push(Event::ToolCall {
                    call_id: call.id.clone(),
                    tool: call.name.clone(),
                    title: None,
                    class: ToolClass::Destructive,
                    arguments: call.arguments.clone(),
                    targets: None,
                    runs_on: Default::default(),
                });
            }
            // An external agent's own calls, kept with its answer.
            #[cfg(feature = "acp")]
            events.extend(crate::acp::agent_call_events(&row.parts));
        }
        Role::Tool => {
            for part in &row.parts {
                if let Part::ToolResult(result) = part {
                    events.push(result_event(result));
                }
            }
        }
    }
    events
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
            structured: None,
            resources: Vec::new(),
        },
    }
}
