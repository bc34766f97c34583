//! `GET …/events`: the chat's event log as server-sent events (and, the
//! same way, a sub-agent's: `GET …/sub_agents/{n}/events`, see
//! `http/sub_agents.rs`).
//!
//! One JSON event per `data:` line; numbered events carry their `seq` as the
//! SSE `id:`, so a client reconnects with `?after=<last id>` (or the
//! `Last-Event-ID` header) and rebuilds exactly the same log. Deltas are live
//! only and have no id. A subscriber more than [`crate::events::LAG_LIMIT`]
//! events behind gets `resync` and the stream ends; publishing never waits
//! for a subscriber, so a slow one never stalls the chat. A client asking
//! for events the log no longer keeps (it keeps the newest only: see
//! [`crate::events`]) gets `resync` at once, as the stream's only event; it
//! rebuilds from `GET …/transcript` and follows from that response's
//! `lrg-last-seq` header.

use std::convert::Infallible;
use std::fmt::Write as _;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use bytes::{BufMut as _, Bytes, BytesMut};
use futures::FutureExt as _;
use futures::future::BoxFuture;
use tokio::time::{Instant, Sleep};

use super::AppState;
use super::error::ApiError;
use super::sessions::{LiveChat, SubscriberSlot};
use crate::events::{Event, LogEntry, Subscription};

/// An idle stream's heartbeat: an SSE comment, which readers skip.
const HEARTBEAT: &[u8] = b":\n\n";

/// Events already queued for a stream go out together, in one body frame (one
/// HTTP chunk, one socket write) of about this many bytes at most, rather
/// than one frame each.
const BATCH_BYTES: usize = 64 * 1024;

/// Parse `after` from the query string (falling back to `Last-Event-ID`).
pub(crate) fn after(query: Option<&str>, last_event_id: Option<&str>) -> Result<u64, ApiError> {
    let from_query = query.and_then(|q| {
        q.split('&')
            .filter_map(|pair| pair.split_once('='))
            .find(|(k, _)| *k == "after")
            .map(|(_, v)| v)
    });
    match (from_query, last_event_id) {
        (Some(v), _) => v.parse().map_err(|_| {
            ApiError::bad_request("after", "must be the seq of the last event seen (a number)")
        }),
        (None, Some(v)) => v.trim().parse().map_err(|_| {
            ApiError::bad_request("Last-Event-ID", "must be the seq of the last event seen")
        }),
        (None, None) => Ok(0),
    }
}

/// Append `entry`, whose JSON text is `json`, as one SSE event: a `data:`
/// line, then its `seq` as the `id:` when it is numbered.
fn write_event(buf: &mut BytesMut, entry: &LogEntry, json: &[u8]) {
    // JSON as serde_json writes it escapes every CR and LF, so the event is
    // always one `data:` line. The order and spacing are those the stream
    // has always had (axum's `Event::default().data(..).id(..)`).
    buf.extend_from_slice(b"data: ");
    buf.extend_from_slice(json);
    buf.put_u8(b'\n');
    if let Some(seq) = entry.seq {
        // Writing to a `BytesMut` cannot fail.
        let _ = writeln!(buf, "id: {seq}");
    }
    buf.put_u8(b'\n');
}

/// One open event stream: its subscription, the slot it holds, and its
/// heartbeat timer.
struct Feed {
    sub: Subscription,
    _slot: SubscriberSlot,
    /// Done when what the stream follows has ended (the chat, or a
    /// sub-agent's work).
    ended: BoxFuture<'static, ()>,
    heartbeat: Pin<Box<Sleep>>,
    every: Duration,
    /// The subscription ended after the events in the last chunk.
    finished: bool,
}

impl Feed {
    /// The next body chunk: every event ready now (up to [`BATCH_BYTES`]),
    /// or a heartbeat after `every` without one; `None` once the stream is
    /// over.
    async fn next_chunk(&mut self) -> Option<Bytes> {
        if self.finished {
            return None;
        }
        // The subscription first: when the chat ends, the events already
        // published are still sent, then the stream closes.
        let (entry, json) = tokio::select! {
            biased;
            next = self.sub.next_json() => next?,
            () = &mut self.ended => return None,
            () = &mut self.heartbeat => {
                self.rearm();
                return Some(Bytes::from_static(HEARTBEAT));
            }
        };
        let mut buf = BytesMut::with_capacity(json.len() + 32);
        write_event(&mut buf, &entry, &json);
        // A subscriber woken once for many events (a burst of deltas, a
        // reconnect's replay) writes them in one go.
        while buf.len() < BATCH_BYTES {
            match self.sub.next_json().now_or_never() {
                Some(Some((entry, json))) => write_event(&mut buf, &entry, &json),
                Some(None) => {
                    self.finished = true;
                    break;
                }
                None => break,
            }
        }
        self.rearm();
        Some(buf.freeze())
    }

    fn rearm(&mut self) {
        self.heartbeat.as_mut().reset(Instant::now() + self.every);
    }
}

/// The stream for `chat`, from after `after`.
pub(crate) fn stream(
    state: &AppState,
    chat: &Arc<LiveChat>,
    after: u64,
) -> Result<Response, ApiError> {
    let ended = Box::pin(chat.ended.clone().cancelled_owned());
    stream_of(state, chat, chat.session.subscribe(after), ended)
}

/// The stream of `sub`, an event log of `chat` (its own, or one of its
/// sub-agents'), until `ended`: it holds one of the chat's stream slots.
pub(crate) fn stream_of(
    state: &AppState,
    chat: &Arc<LiveChat>,
    sub: Subscription,
    ended: BoxFuture<'static, ()>,
) -> Result<Response, ApiError> {
    let limit = state.config.limits.subscribers_per_chat;
    let slot = chat.subscribe_slot(limit).ok_or_else(|| {
        ApiError::too_many(format!(
            "this chat already has {limit} event streams, the most allowed: close one first"
        ))
    })?;
    let every = state.config.heartbeat;
    // The slot is held as long as the stream lives.
    let feed = Feed {
        sub,
        _slot: slot,
        ended,
        heartbeat: Box::pin(tokio::time::sleep(every)),
        every,
        finished: false,
    };
    let chunks = futures::stream::unfold(feed, |mut feed| async move {
        let chunk = feed.next_chunk().await?;
        Some((Ok::<_, Infallible>(chunk), feed))
    });
    Ok(event_stream(Body::from_stream(chunks)))
}

/// A stream whose only event is `resync`: the log the client followed is
/// gone (a sub-agent's, rebuilt from the store once it was released), so
/// it rebuilds from `after=0`.
pub(crate) fn resync_only() -> Response {
    let entry = LogEntry {
        seq: None,
        event: Event::Resync,
    };
    let json = serde_json::to_vec(&entry).unwrap_or_else(|_| b"{}".to_vec());
    let mut buf = BytesMut::new();
    write_event(&mut buf, &entry, &json);
    event_stream(Body::from(buf.freeze()))
}

fn event_stream(body: Body) -> Response {
    (
        [
            // (`Cache-Control: no-store` is on every response of the API.)
            (header::CONTENT_TYPE, "text/event-stream"),
            // Proxies that buffer would hold the stream back.
            (header::HeaderName::from_static("x-accel-buffering"), "no"),
        ],
        body,
    )
        .into_response()
}
