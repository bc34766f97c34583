//! What a viewer is told: the event schema and the numbered, replayable log.
//!
//! # The schema
//!
//! Every [`Event`] serializes as one JSON object with a `type` field
//! (`snake_case`), wrapped in a [`LogEntry`] that adds `seq` when the event is
//! numbered. This is the one event format of lrg: the CLI prints it as JSON
//! lines (`--json`), the web page reads it as server-sent events, and a Rust
//! subscriber gets it typed. Fields are only ever added, never renamed.
//!
//! ```json
//! {"seq":1,"type":"user_message","text":"list my files"}
//! {"type":"delta","kind":"text","text":"Let"}
//! {"seq":2,"type":"assistant_turn","text":"Let me look."}
//! {"seq":3,"type":"tool_call","call_id":"c1","tool":"list","class":"read","arguments":{}}
//! ```
//!
//! # Rebuilding a view
//!
//! Everything that changes what a viewer shows is numbered (`seq`, from 1) and
//! kept for the life of the session, so a viewer that reconnects with
//! `after=<last seq it saw>` rebuilds the conversation exactly. The only
//! exceptions are [`Event::Delta`]s and [`Event::ToolCallDelta`]s: the model's
//! text and tool calls as they are decoded, live only, never numbered, and
//! always followed by one numbered [`Event::AssistantTurn`] holding the whole
//! turn, then a numbered [`Event::ToolCall`] per call (or by
//! [`Event::Stopped`], an [`Event::Error`], or a retrying [`Event::Warning`],
//! after which what was streamed is dropped).
//!
//! In a session kept in a store, a numbered event that reports a change to
//! the conversation (`user_message`, `assistant_turn`, `tool_done`,
//! `tool_skipped`, `rewound`) is published only once that change is durable,
//! so what a viewer saw, a resume has (see `session/persist.rs`).
//!
//! A subscriber that falls more than [`LAG_LIMIT`] events behind the live
//! stream is sent [`Event::Resync`] and dropped; it reconnects with `after=`
//! and catches up from the log.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use bytes::Bytes;

use lrg_providers::ProviderError;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::watch;

use crate::permissions::{Answer, ApprovalReason, PermissionSettings};
use crate::tools::ToolClass;

/// The version of the event schema. Front ends that write events out (the
/// CLI's `--json` header line, say) state it, so a reader can tell which
/// fields to expect; it changes only if a field is ever renamed or removed
/// (fields are only added).
pub const EVENTS_SCHEMA_VERSION: u32 = 1;

/// How far (in events) a live subscriber may fall behind before it is sent
/// [`Event::Resync`] and dropped.
pub const LAG_LIMIT: u64 = 1024;

/// One thing that happened in a chat. See the [module docs](self) for the
/// wire format and the replay rules.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Event {
    /// The person sent a message.
    UserMessage {
        /// Its text.
        text: String,
        /// How many images came with it.
        #[serde(default, skip_serializing_if = "is_zero")]
        images: usize,
    },
    /// More of the model's answer, as decoded. Live only: never numbered,
    /// never replayed.
    Delta {
        /// Reasoning or answer text.
        kind: DeltaKind,
        /// The new text, to append to what came before in this turn.
        text: String,
    },
    /// More of a tool call while the model is still writing it. Live only:
    /// never numbered, never replayed; the numbered `tool_call` with the same
    /// `call_id` follows and replaces it. A call whose turn ends without its
    /// `tool_call` (cut short, stopped, failed) is dropped.
    ToolCallDelta {
        /// The call's number within its model turn, from 0: the key that
        /// joins its fragments.
        index: u32,
        /// The call's id, on the call's first delta only.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        call_id: Option<String>,
        /// The tool's name, on the call's first delta only.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tool: Option<String>,
        /// More of the arguments' JSON text, to append to what came before.
        arguments_fragment: String,
    },
    /// One finished model turn; replaces the deltas streamed for it.
    AssistantTurn {
        /// The model's visible reasoning, if it showed any.
        #[serde(default, skip_serializing_if = "String::is_empty")]
        reasoning: String,
        /// The answer text (may be empty when the turn only calls tools).
        text: String,
    },
    /// The model asked for a tool call. Followed, for the same `call_id`, by
    /// either `tool_skipped`, or `tool_running` then `tool_done`, possibly
    /// after `approval_needed` and `approval_answered`.
    ToolCall {
        /// Id pairing this call with its later events.
        call_id: String,
        /// Tool name.
        tool: String,
        /// The tool's human-readable title, when it has one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        title: Option<String>,
        /// What the tool may do to the world.
        class: ToolClass,
        /// The arguments, as the model wrote them.
        arguments: Value,
        /// How many items the call is aimed at, when that can be told.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        targets: Option<usize>,
    },
    /// The call waits for the person's answer
    /// ([`crate::session::ChatSession::answer_approval`]).
    ApprovalNeeded {
        /// The call that waits.
        call_id: String,
        /// Why it was not allowed outright.
        reason: ApprovalReason,
        /// Whether "always allow" is a meaningful answer (it is not for a bulk
        /// question: the limit asks even for an allowed tool).
        offer_always: bool,
        /// Set when a sub-agent asks: which one, and the call it wants to
        /// make (its `tool_call` is in the sub-agent's own stream). The
        /// `call_id` is then the sub-agent's id, `::`, and its call's id;
        /// answer it on the parent like any other.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sub_agent: Option<SubAgentAsk>,
    },
    /// The person answered an approval question.
    ApprovalAnswered {
        /// The call that was waiting.
        call_id: String,
        /// The answer.
        answer: Answer,
    },
    /// The call is running.
    ToolRunning {
        /// The call.
        call_id: String,
    },
    /// The call finished (successfully or not).
    ToolDone {
        /// The call.
        call_id: String,
        /// Whether it succeeded.
        ok: bool,
        /// Its text output (or error message).
        text: String,
        /// The images it returned, described; the bytes are fetched
        /// separately (over HTTP: `GET …/images/{call_id}/{index}`).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        images: Vec<ImageDescriptor>,
    },
    /// The call never ran; the model is told why.
    ToolSkipped {
        /// The call.
        call_id: String,
        /// Why it did not run.
        reason: SkipReason,
        /// The person's note with a denial, passed to the model too.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        note: Option<String>,
    },
    /// Something the person should know that does not end the turn.
    Warning {
        /// What happened.
        message: String,
        /// The model turn is being retried: drop what was streamed of it.
        #[serde(default, skip_serializing_if = "is_false")]
        retrying: bool,
    },
    /// The turn ended with an error.
    Error {
        /// What went wrong, for a person.
        message: String,
        /// Machine-readable kind.
        kind: ErrorKind,
    },
    /// The person stopped the turn; text streamed for an unfinished model
    /// turn is dropped.
    Stopped,
    /// The session started or finished working on a message.
    Busy {
        /// Whether it is working now.
        busy: bool,
        /// The work was not started by the person: the model reacts to a
        /// sub-agent's result on its own.
        #[serde(default, skip_serializing_if = "is_false")]
        autonomous: bool,
    },
    /// Token usage of the last model turn.
    Usage {
        /// Its counts, as the provider reported them (normalised: see
        /// [`lrg_providers::Usage`]). On the wire they are fields of the
        /// event itself (`prompt_tokens`, `completion_tokens` and, when
        /// reported, `cached_prompt_tokens`, `cache_write_tokens`,
        /// `reasoning_tokens`).
        #[serde(flatten)]
        usage: lrg_providers::Usage,
        /// The window the session fits the conversation into.
        context_window: u32,
    },
    /// The permission settings changed.
    Permissions {
        /// The settings now in force.
        settings: PermissionSettings,
        /// Whether they were written to disk (false until a path is bound).
        saved: bool,
        /// Why saving failed, when it did.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        save_error: Option<String>,
    },
    /// The conversation was cut back for a retry: drop everything shown after
    /// the event numbered `to_seq` (the user message being answered again).
    Rewound {
        /// The last event that stays.
        to_seq: u64,
    },
    /// The conversation was emptied.
    Cleared,
    /// The conversation was replaced by a summary, which seeds the new
    /// history as a user message.
    Compacted {
        /// The summary.
        summary: String,
    },
    /// Sent to a subscriber that fell too far behind, just before its stream
    /// ends: reconnect with `after=` the last `seq` seen.
    Resync,
    /// Where the conversation goes: sent before the first model turn and
    /// whenever the model's destination changes.
    SendsTo {
        /// The provider prefix (`openai`, `ollama`, ...).
        provider: String,
        /// The host it is sent to; `null` when it stays on this machine.
        host: Option<String>,
    },
    /// A sub-agent was spawned by the call `call_id` (`spawn_sub_agent`;
    /// every task of one call shares it). Its own events are in its own
    /// stream ([`crate::session::ChatSession::sub_agent`]); its final answer
    /// comes back as a `sub_agent_result` tool call.
    SubtaskStart {
        /// The parent's `spawn_sub_agent` call.
        call_id: String,
        /// The sub-agent's session id (`{parent}::sub::{n}`).
        sub_session_id: String,
        /// The task's short description.
        description: String,
    },
}

/// The sub-agent behind an [`Event::ApprovalNeeded`], and what it wants to
/// run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct SubAgentAsk {
    /// The sub-agent's session id.
    pub sub_session_id: String,
    /// The tool it wants to call.
    pub tool: String,
    /// What the tool may do to the world.
    pub class: ToolClass,
    /// The arguments, as the sub-agent's model wrote them.
    pub arguments: Value,
}

impl SubAgentAsk {
    /// Sub-agent `sub_session_id` asks to call `tool` (of `class`) with
    /// `arguments`.
    pub fn new(
        sub_session_id: impl Into<String>,
        tool: impl Into<String>,
        class: ToolClass,
        arguments: Value,
    ) -> Self {
        Self {
            sub_session_id: sub_session_id.into(),
            tool: tool.into(),
            class,
            arguments,
        }
    }
}

/// One image of a tool result, as `tool_done` describes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ImageDescriptor {
    /// Its position among the result's images, from 0.
    pub index: usize,
    /// MIME type, e.g. `image/png`.
    pub mime: String,
    /// Size of the encoded image in bytes.
    pub bytes: usize,
}

impl ImageDescriptor {
    /// The image at `index`, of type `mime`, `bytes` long.
    pub fn new(index: usize, mime: impl Into<String>, bytes: usize) -> Self {
        Self {
            index,
            mime: mime.into(),
            bytes,
        }
    }

    /// Describe the images among `parts`, in order.
    pub fn of_parts(parts: &[lrg_providers::Part]) -> Vec<Self> {
        parts
            .iter()
            .filter_map(|p| match p {
                lrg_providers::Part::Image(image) => Some(image),
                _ => None,
            })
            .enumerate()
            .map(|(index, image)| Self {
                index,
                mime: image.mime.clone(),
                bytes: image.data.len(),
            })
            .collect()
    }
}

/// Which stream a [`Event::Delta`] belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeltaKind {
    /// The model's reasoning.
    Reasoning,
    /// The answer.
    Text,
}

/// What kind of failure an [`Event::Error`] reports.
///
/// Serialized in `snake_case` (`"context_overflow"`, `"max_steps"`, ...).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ErrorKind {
    /// A transient provider error (429, 5xx, a cut stream) that outlived its
    /// retries.
    Transient,
    /// The provider refused the key.
    Auth,
    /// The provider refused the request as malformed.
    BadRequest,
    /// The conversation does not fit the model's context window.
    ContextOverflow,
    /// The model does not exist on its provider.
    ModelNotFound,
    /// The model cannot do what was asked.
    Unsupported,
    /// Missing or invalid configuration (no key, bad base URL).
    Config,
    /// The model's answer could not be understood.
    Protocol,
    /// Any other provider failure.
    Other,
    /// [`crate::SessionConfig::max_steps`] model turns passed without a final
    /// answer.
    MaxSteps,
    /// Compaction produced no summary; the conversation was kept.
    Compact,
    /// A tool or model plugged into the session panicked.
    Internal,
    /// The session is local only and the model would send the conversation
    /// to a cloud.
    LocalOnly,
}

impl ErrorKind {
    /// The kind of a provider error.
    pub fn of(error: &ProviderError) -> Self {
        match error {
            ProviderError::Transient { .. } => Self::Transient,
            ProviderError::Auth { .. } => Self::Auth,
            ProviderError::BadRequest { .. } => Self::BadRequest,
            ProviderError::ContextOverflow { .. } => Self::ContextOverflow,
            ProviderError::ModelNotFound { .. } => Self::ModelNotFound,
            ProviderError::Unsupported { .. } => Self::Unsupported,
            ProviderError::Config { .. } => Self::Config,
            ProviderError::Protocol { .. } => Self::Protocol,
            _ => Self::Other,
        }
    }
}

/// Why a tool call did not run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum SkipReason {
    /// The same tool with the same arguments was already called for this
    /// message.
    RepeatedCall,
    /// The person denied it.
    NotAllowed,
    /// The person stopped the turn before it ran.
    Stopped,
    /// The tool is blocked by a rule (the model was not offered it).
    Blocked,
    /// No tool of that name exists.
    UnknownTool,
}

impl SkipReason {
    /// A few words for a person ("not allowed", "no such tool").
    pub fn describe(self) -> &'static str {
        match self {
            Self::RepeatedCall => "the same call was already made",
            Self::NotAllowed => "not allowed",
            Self::Stopped => "stopped",
            Self::Blocked => "blocked by a rule",
            Self::UnknownTool => "no such tool",
        }
    }
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// An event as it appears in the log and on the wire: numbered (`seq`) unless
/// it is live only.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LogEntry {
    /// Position in the log, from 1; absent for live-only events (deltas,
    /// resync).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq: Option<u64>,
    /// The event.
    #[serde(flatten)]
    pub event: Event,
}

/// A published event as live subscribers share it: its JSON text is written
/// at most once, by the first subscriber that asks, however many read it
/// (1,000 pages on one chat would otherwise serialize every event 1,000
/// times).
#[derive(Debug)]
struct Live {
    entry: Arc<LogEntry>,
    json: OnceLock<Bytes>,
}

impl Live {
    fn new(entry: Arc<LogEntry>) -> Arc<Self> {
        Arc::new(Self {
            entry,
            json: OnceLock::new(),
        })
    }

    fn json(&self) -> Bytes {
        self.json.get_or_init(|| to_json(&self.entry)).clone()
    }
}

/// `entry` as one line of JSON, the form every front end reads.
fn to_json(entry: &LogEntry) -> Bytes {
    // Every event serializes (string keys, finite numbers); "{}" is a reader's
    // "unknown event", never a torn line.
    serde_json::to_vec(entry).map_or_else(|_| Bytes::from_static(b"{}"), Bytes::from)
}

/// What [`Subscription`] hands out next: an event for this subscriber alone
/// (replayed from the log, or its resync), or a live one shared with the
/// other subscribers.
enum Next {
    Own(Arc<LogEntry>),
    Live(Arc<Live>),
}

#[derive(Debug, Default)]
struct LogState {
    /// Every numbered event, `entries[i].seq == i + 1`.
    entries: Vec<Arc<LogEntry>>,
    /// The most recent published events (numbered and live), at most
    /// [`LAG_LIMIT`], for live subscribers. Kept only while someone listens.
    recent: VecDeque<Arc<Live>>,
    /// How many events were ever put in `recent` (its end position).
    published: u64,
    /// Live [`Subscription`]s (counted under the lock, unlike the watch
    /// channel's receivers).
    subscribers: usize,
}

/// The numbered, kept event log of one session, with live fan-out to any
/// number of subscribers.
///
/// Publishing never waits for a subscriber: a slow one falls behind and,
/// past [`LAG_LIMIT`], is told to resync. Dropping the log ends every
/// subscription.
#[derive(Debug)]
pub struct EventLog {
    state: Arc<Mutex<LogState>>,
    head: watch::Sender<u64>,
}

impl Default for EventLog {
    fn default() -> Self {
        Self::new()
    }
}

fn lock(state: &Mutex<LogState>) -> MutexGuard<'_, LogState> {
    // Every critical section leaves the state consistent (pushes and
    // counters), so a poisoned lock is safe to reuse.
    lrg_providers::sync::lock(state)
}

impl EventLog {
    /// An empty log.
    pub fn new() -> Self {
        Self {
            state: Arc::default(),
            head: watch::Sender::new(0),
        }
    }

    /// Append a numbered event and send it to live subscribers; returns its
    /// `seq`.
    pub fn publish(&self, event: Event) -> u64 {
        let mut state = lock(&self.state);
        let seq = state.entries.len() as u64 + 1;
        let entry = Arc::new(LogEntry {
            seq: Some(seq),
            event,
        });
        state.entries.push(entry.clone());
        self.fan_out(&mut state, entry);
        seq
    }

    /// Send a live-only event (a delta) to live subscribers; it is not kept.
    pub fn publish_live(&self, event: Event) {
        if self.head.receiver_count() == 0 {
            return;
        }
        let mut state = lock(&self.state);
        self.fan_out(&mut state, Arc::new(LogEntry { seq: None, event }));
    }

    fn fan_out(&self, state: &mut LogState, entry: Arc<LogEntry>) {
        // Nobody listening: a later subscriber replays from `entries`, so
        // there is nothing to keep for live delivery.
        if self.head.receiver_count() == 0 {
            state.recent.clear();
            return;
        }
        state.recent.push_back(Live::new(entry));
        state.published += 1;
        while state.recent.len() as u64 > LAG_LIMIT {
            state.recent.pop_front();
        }
        self.head.send_replace(state.published);
    }

    /// The `seq` of the last numbered event (0 when empty).
    pub fn last_seq(&self) -> u64 {
        lock(&self.state).entries.len() as u64
    }

    /// Every numbered event after `after`, in order.
    pub fn since(&self, after: u64) -> Vec<Arc<LogEntry>> {
        let state = lock(&self.state);
        let start = usize::try_from(after)
            .unwrap_or(usize::MAX)
            .min(state.entries.len());
        state.entries[start..].to_vec()
    }

    /// Every numbered event, in order.
    pub fn entries(&self) -> Vec<Arc<LogEntry>> {
        self.since(0)
    }

    /// The kept events after `after`, then live events as they are
    /// published, with nothing lost or repeated in between.
    pub fn subscribe(&self, after: u64) -> Subscription {
        let mut state = lock(&self.state);
        state.subscribers += 1;
        let start = usize::try_from(after)
            .unwrap_or(usize::MAX)
            .min(state.entries.len());
        let replay: VecDeque<_> = state.entries[start..].iter().cloned().collect();
        // Subscribing under the lock: every event published from here on is
        // at a position >= `published`, and every earlier one is in `replay`
        // (or was a delta, which is not replayed).
        let head = self.head.subscribe();
        Subscription {
            state: self.state.clone(),
            head,
            replay,
            next: state.published,
            done: false,
        }
    }

    /// How many live subscribers there are.
    pub fn subscriber_count(&self) -> usize {
        self.head.receiver_count()
    }
}

/// A subscriber's view of an [`EventLog`]: the replay, then live events.
#[derive(Debug)]
pub struct Subscription {
    state: Arc<Mutex<LogState>>,
    head: watch::Receiver<u64>,
    replay: VecDeque<Arc<LogEntry>>,
    /// Position (in `published` terms) of the next live event to deliver.
    next: u64,
    done: bool,
}

impl Drop for Subscription {
    fn drop(&mut self) {
        // The last subscriber leaving: nothing in `recent` is needed any
        // more, and the next publish (which would clear it) may never come.
        let mut state = lock(&self.state);
        state.subscribers = state.subscribers.saturating_sub(1);
        if state.subscribers == 0 {
            state.recent.clear();
        }
    }
}

impl Subscription {
    /// The next event; `None` once the log is gone or after a
    /// [`Event::Resync`].
    pub async fn next(&mut self) -> Option<Arc<LogEntry>> {
        Some(match self.next_shared().await? {
            Next::Own(entry) => entry,
            Next::Live(live) => live.entry.clone(),
        })
    }

    /// [`next`](Self::next) with the event's JSON text (as
    /// `serde_json::to_vec` writes the [`LogEntry`]). A live event is
    /// serialized once and the bytes shared by every subscriber; any other
    /// is serialized for this subscriber alone.
    pub(crate) async fn next_json(&mut self) -> Option<(Arc<LogEntry>, Bytes)> {
        Some(match self.next_shared().await? {
            Next::Own(entry) => {
                let json = to_json(&entry);
                (entry, json)
            }
            Next::Live(live) => (live.entry.clone(), live.json()),
        })
    }

    // Cancel safe: nothing changes before an event is returned, so a caller
    // may drop the future (to poll for an event that is ready now, say).
    async fn next_shared(&mut self) -> Option<Next> {
        if let Some(entry) = self.replay.pop_front() {
            return Some(Next::Own(entry));
        }
        loop {
            if self.done {
                return None;
            }
            {
                let mut state = lock(&self.state);
                let oldest = state.published - state.recent.len() as u64;
                if self.next < oldest || state.published - self.next > LAG_LIMIT {
                    self.done = true;
                    return Some(Next::Own(Arc::new(LogEntry {
                        seq: None,
                        event: Event::Resync,
                    })));
                }
                if self.next < state.published {
                    let index = usize::try_from(self.next - oldest).unwrap_or(usize::MAX);
                    if let Some(entry) = state.recent.get(index).cloned() {
                        self.next += 1;
                        // The only subscriber (none can join while the lock
                        // is held, and one that joins later starts at
                        // `published`): what it has read is needed by no
                        // one. An idle chat with its page open would
                        // otherwise keep its last LAG_LIMIT events, deltas
                        // included (about 130 KiB after a 600-delta message).
                        if state.subscribers == 1 {
                            state.recent.drain(..=index);
                        }
                        return Some(Next::Live(entry));
                    }
                }
                self.head.mark_unchanged();
            }
            if self.head.changed().await.is_err() {
                self.done = true;
            }
        }
    }

    /// This subscription as a [`futures::Stream`].
    pub fn into_stream(self) -> impl futures::Stream<Item = Arc<LogEntry>> + Send {
        futures::stream::unfold(
            self,
            |mut sub| async move { sub.next().await.map(|e| (e, sub)) },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn delta(i: usize) -> Event {
        Event::Delta {
            kind: DeltaKind::Text,
            text: i.to_string(),
        }
    }

    fn recent(log: &EventLog) -> usize {
        lock(&log.state).recent.len()
    }

    #[tokio::test]
    async fn a_sole_subscriber_keeps_only_what_it_has_not_read() {
        let log = EventLog::new();
        let mut sub = log.subscribe(0);
        for i in 0..100 {
            log.publish_live(delta(i));
        }
        for _ in 0..60 {
            sub.next().await.expect("event");
        }
        assert_eq!(recent(&log), 40);
        for _ in 0..40 {
            sub.next().await.expect("event");
        }
        assert_eq!(recent(&log), 0);
        log.publish_live(delta(100));
        let last = sub.next().await.expect("event");
        assert_eq!(last.event, delta(100));
    }

    #[tokio::test]
    async fn two_subscribers_keep_the_recent_events_until_both_are_gone() {
        let log = EventLog::new();
        let mut first = log.subscribe(0);
        let second = log.subscribe(0);
        for i in 0..100 {
            log.publish_live(delta(i));
        }
        for _ in 0..100 {
            first.next().await.expect("event");
        }
        assert_eq!(recent(&log), 100, "the second subscriber has read none");
        drop(second);
        assert_eq!(recent(&log), 100, "the first is still there");
        drop(first);
        assert_eq!(recent(&log), 0);
    }
}
