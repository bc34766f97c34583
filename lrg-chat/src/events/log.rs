//! The numbered, kept event log of one session ([`EventLog`]) and its live
//! fan-out ([`Subscription`]). The rules are in [`crate::events`].

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use bytes::Bytes;
use serde_json::Value;
use tokio::sync::watch;

use super::{Event, LogEntry};

/// How far (in events) a live subscriber may fall behind before it is sent
/// [`Event::Resync`] and dropped.
pub const LAG_LIMIT: u64 = 1024;

/// Default for [`crate::SessionConfig::max_kept_events`]: the most numbered
/// events a log keeps.
pub const DEFAULT_MAX_KEPT_EVENTS: usize = 4096;

/// Default for [`crate::SessionConfig::max_kept_event_bytes`]: the most
/// payload bytes (see [`EventLog::retained_bytes`]) a log keeps, 32 MiB.
pub const DEFAULT_MAX_KEPT_EVENT_BYTES: usize = 32 * 1024 * 1024;

/// What every event is counted as besides its text and arguments: its
/// `Arc`, its enum and its ids, roughly.
const EVENT_OVERHEAD: usize = 64;

/// A published event as live subscribers share it: its JSON text is written
/// at most once, by the first subscriber that asks, however many read it
/// (1,000 pages on one chat would otherwise serialize every event 1,000
/// times).
#[derive(Debug)]
struct Live {
    entry: Arc<LogEntry>,
    json: OnceLock<Bytes>,
    /// [`approx_bytes`] of the event.
    bytes: usize,
}

impl Live {
    fn new(entry: Arc<LogEntry>, bytes: usize) -> Arc<Self> {
        Arc::new(Self {
            entry,
            json: OnceLock::new(),
            bytes,
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

/// A numbered event the log keeps, with what it counts for.
#[derive(Debug)]
struct Kept {
    entry: Arc<LogEntry>,
    bytes: usize,
}

#[derive(Debug, Default)]
struct LogState {
    /// The newest numbered events, `entries[i].seq == forgotten + i + 1`.
    entries: VecDeque<Kept>,
    /// How many numbered events were published before the oldest kept one.
    forgotten: u64,
    /// [`approx_bytes`] of `entries` together.
    bytes: usize,
    /// The most recent published events (numbered and live), at most
    /// [`LAG_LIMIT`] and at most `max_bytes` of them, for live subscribers.
    /// Kept only while someone listens.
    recent: VecDeque<Arc<Live>>,
    /// [`approx_bytes`] of `recent` together.
    recent_bytes: usize,
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
    /// The most numbered events kept.
    max_events: usize,
    /// The most payload bytes kept (numbered events, and live ones apart).
    max_bytes: usize,
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
    /// An empty log with the default bounds ([`DEFAULT_MAX_KEPT_EVENTS`],
    /// [`DEFAULT_MAX_KEPT_EVENT_BYTES`]).
    pub fn new() -> Self {
        Self::with_limits(DEFAULT_MAX_KEPT_EVENTS, DEFAULT_MAX_KEPT_EVENT_BYTES)
    }

    /// An empty log that keeps at most `max_events` numbered events and at
    /// most `max_bytes` of their payload (the newest event is kept even when
    /// it alone is larger; 0 counts as 1 event).
    pub fn with_limits(max_events: usize, max_bytes: usize) -> Self {
        Self {
            state: Arc::default(),
            head: watch::Sender::new(0),
            max_events: max_events.max(1),
            max_bytes,
        }
    }

    /// Append a numbered event and send it to live subscribers; returns its
    /// `seq`. The oldest kept events are forgotten past the log's bounds.
    pub fn publish(&self, event: Event) -> u64 {
        let bytes = approx_bytes(&event);
        let mut state = lock(&self.state);
        let seq = state.forgotten + state.entries.len() as u64 + 1;
        let entry = Arc::new(LogEntry {
            seq: Some(seq),
            event,
        });
        state.entries.push_back(Kept {
            entry: entry.clone(),
            bytes,
        });
        state.bytes += bytes;
        while state.entries.len() > 1
            && (state.entries.len() > self.max_events || state.bytes > self.max_bytes)
        {
            if let Some(old) = state.entries.pop_front() {
                state.bytes -= old.bytes;
                state.forgotten += 1;
            }
        }
        self.fan_out(&mut state, entry, bytes);
        seq
    }

    /// Send a live-only event (a delta) to live subscribers; it is not kept.
    pub fn publish_live(&self, event: Event) {
        if self.head.receiver_count() == 0 {
            return;
        }
        let bytes = approx_bytes(&event);
        let mut state = lock(&self.state);
        self.fan_out(&mut state, Arc::new(LogEntry { seq: None, event }), bytes);
    }

    fn fan_out(&self, state: &mut LogState, entry: Arc<LogEntry>, bytes: usize) {
        // Nobody listening: a later subscriber replays from `entries`, so
        // there is nothing to keep for live delivery.
        if self.head.receiver_count() == 0 {
            state.recent.clear();
            state.recent_bytes = 0;
            return;
        }
        state.recent.push_back(Live::new(entry, bytes));
        state.recent_bytes += bytes;
        state.published += 1;
        // Two pages on a chat keep the last events for the slower one; by
        // bytes too, or 1,024 answers of 4 MiB would be held for it. A
        // subscriber whose next event is gone is sent `resync` and replays
        // from `entries`.
        while state.recent.len() as u64 > LAG_LIMIT
            || (state.recent.len() > 1 && state.recent_bytes > self.max_bytes)
        {
            if let Some(old) = state.recent.pop_front() {
                state.recent_bytes -= old.bytes;
            }
        }
        self.head.send_replace(state.published);
    }

    /// The `seq` of the last numbered event (0 when empty).
    pub fn last_seq(&self) -> u64 {
        let state = lock(&self.state);
        state.forgotten + state.entries.len() as u64
    }

    /// The `seq` of the oldest numbered event still kept (1 until the log
    /// has forgotten any; `last_seq() + 1` while it is empty). A subscriber
    /// can rebuild the view from the log only with `after >=
    /// first_kept_seq() - 1`.
    pub fn first_kept_seq(&self) -> u64 {
        lock(&self.state).forgotten + 1
    }

    /// How many payload bytes the kept numbered events take, as estimated
    /// for the log's bound: their text, reasoning, arguments and messages,
    /// plus a fixed overhead each. The live copies held for subscribers
    /// that lag behind are bounded the same way, apart.
    pub fn retained_bytes(&self) -> usize {
        lock(&self.state).bytes
    }

    /// Every kept numbered event after `after`, in order (those older than
    /// [`first_kept_seq`](Self::first_kept_seq) are gone).
    pub fn since(&self, after: u64) -> Vec<Arc<LogEntry>> {
        let state = lock(&self.state);
        let start = kept_index(&state, after);
        state
            .entries
            .range(start..)
            .map(|k| k.entry.clone())
            .collect()
    }

    /// Every kept numbered event, in order.
    pub fn entries(&self) -> Vec<Arc<LogEntry>> {
        self.since(0)
    }

    /// The kept events after `after`, then live events as they are
    /// published, with nothing lost or repeated in between. When events
    /// after `after` are no longer kept, the subscription yields only
    /// [`Event::Resync`] (see [`crate::events`]).
    pub fn subscribe(&self, after: u64) -> Subscription {
        let mut state = lock(&self.state);
        state.subscribers += 1;
        let stale = after < state.forgotten;
        let replay: VecDeque<_> = if stale {
            VecDeque::new()
        } else {
            let start = kept_index(&state, after);
            state
                .entries
                .range(start..)
                .map(|k| k.entry.clone())
                .collect()
        };
        // Subscribing under the lock: every event published from here on is
        // at a position >= `published`, and every earlier one is in `replay`
        // (or was a delta, which is not replayed).
        let head = self.head.subscribe();
        Subscription {
            state: self.state.clone(),
            head,
            replay,
            next: state.published,
            stale,
            done: false,
        }
    }

    /// How many live subscribers there are.
    pub fn subscriber_count(&self) -> usize {
        self.head.receiver_count()
    }
}

/// The index in `state.entries` of the first event after `after`.
fn kept_index(state: &LogState, after: u64) -> usize {
    usize::try_from(after.saturating_sub(state.forgotten))
        .unwrap_or(usize::MAX)
        .min(state.entries.len())
}

/// What `event` counts for against a log's byte bound: the text it carries
/// (answers, tool results, arguments, messages) plus [`EVENT_OVERHEAD`]. An
/// estimate, cheaper than serializing every event, and close where it
/// matters: the big events are big by their text.
fn approx_bytes(event: &Event) -> usize {
    let opt = |s: &Option<String>| s.as_ref().map_or(0, String::len);
    EVENT_OVERHEAD
        + match event {
            Event::UserMessage { text, .. } | Event::Delta { text, .. } => text.len(),
            Event::ToolCallDelta {
                call_id,
                tool,
                arguments_fragment,
                ..
            } => opt(call_id) + opt(tool) + arguments_fragment.len(),
            Event::AssistantTurn {
                reasoning,
                text,
                json,
                ..
            } => reasoning.len() + text.len() + json.as_ref().map_or(0, value_bytes),
            Event::ToolCall {
                call_id,
                tool,
                title,
                arguments,
                ..
            } => call_id.len() + tool.len() + opt(title) + value_bytes(arguments),
            Event::ApprovalNeeded {
                call_id,
                tool,
                title,
                arguments,
                warnings,
                sub_agent,
                ..
            } => {
                call_id.len()
                    + tool.len()
                    + opt(title)
                    + value_bytes(arguments)
                    + warnings.iter().map(String::len).sum::<usize>()
                    + sub_agent.as_ref().map_or(0, |a| {
                        a.sub_session_id.len() + a.tool.len() + value_bytes(&a.arguments)
                    })
            }
            Event::ToolDone {
                call_id,
                text,
                images,
                ..
            } => call_id.len() + text.len() + images.len() * EVENT_OVERHEAD,
            Event::ToolSkipped { call_id, note, .. } => call_id.len() + opt(note),
            Event::Warning { message, .. } | Event::Error { message, .. } => message.len(),
            Event::Compacted { summary } => summary.len(),
            Event::Permissions { settings, .. } => {
                serde_json::to_vec(settings).map_or(0, |v| v.len())
            }
            Event::SubtaskStart {
                call_id,
                sub_session_id,
                description,
            } => call_id.len() + sub_session_id.len() + description.len(),
            _ => 0,
        }
}

/// About how many bytes `value` takes as JSON (strings and keys counted by
/// their length, every other value as a few bytes).
fn value_bytes(value: &Value) -> usize {
    match value {
        Value::String(s) => s.len() + 2,
        Value::Array(items) => 2 + items.iter().map(|v| value_bytes(v) + 1).sum::<usize>(),
        Value::Object(map) => {
            2 + map
                .iter()
                .map(|(k, v)| k.len() + 4 + value_bytes(v))
                .sum::<usize>()
        }
        _ => 8,
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
    /// It asked for events the log no longer keeps: it gets `resync` only.
    stale: bool,
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
            state.recent_bytes = 0;
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
        if self.stale && !self.done {
            self.done = true;
            return Some(Next::Own(Arc::new(LogEntry {
                seq: None,
                event: Event::Resync,
            })));
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
                            let read: usize = state.recent.drain(..=index).map(|l| l.bytes).sum();
                            state.recent_bytes -= read;
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
    use crate::events::DeltaKind;

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

    fn turn(bytes: usize) -> Event {
        Event::AssistantTurn {
            reasoning: String::new(),
            text: "x".repeat(bytes),
            json: None,
            stopped: false,
        }
    }

    #[tokio::test]
    async fn kept_events_are_bounded_by_bytes_and_renumbered_never() {
        let log = EventLog::with_limits(1000, 10_000);
        for _ in 0..50 {
            log.publish(turn(1_000));
        }
        assert!(log.retained_bytes() <= 10_000, "{}", log.retained_bytes());
        assert_eq!(log.last_seq(), 50);
        let kept = log.entries();
        assert_eq!(kept.len(), 10_000 / (1_000 + EVENT_OVERHEAD));
        assert_eq!(kept[0].seq, Some(log.first_kept_seq()));
        assert_eq!(log.since(0).len(), kept.len());
        assert_eq!(log.since(48).len(), 2);
        // One event over the bound alone is still kept: it is the newest.
        log.publish(turn(50_000));
        assert_eq!(log.entries().len(), 1);
        assert_eq!(log.first_kept_seq(), 51);
        assert_eq!(log.subscribe(50).replay.len(), 1);
    }

    #[tokio::test]
    async fn a_lagging_second_subscriber_does_not_hold_more_than_the_bound() {
        let log = EventLog::with_limits(1000, 10_000);
        let mut reader = log.subscribe(0);
        let mut idle = log.subscribe(0);
        for _ in 0..50 {
            log.publish(turn(1_000));
            reader.next().await.expect("event");
        }
        let held = lock(&log.state).recent_bytes;
        assert!(held <= 10_000, "{held}");
        // The one that read nothing missed events it can no longer get live,
        // nor from the log: resync.
        let e = idle.next().await.expect("resync");
        assert_eq!(e.event, Event::Resync);
        assert!(idle.next().await.is_none());
    }
}
