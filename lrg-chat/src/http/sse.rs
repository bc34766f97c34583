//! `GET …/events`: the chat's event log as server-sent events.
//!
//! One JSON event per `data:` line; numbered events carry their `seq` as the
//! SSE `id:`, so a client reconnects with `?after=<last id>` (or the
//! `Last-Event-ID` header) and rebuilds exactly the same log. Deltas are live
//! only and have no id. A subscriber more than [`crate::events::LAG_LIMIT`]
//! events behind gets `resync` and the stream ends; publishing never waits
//! for a subscriber, so a slow one never stalls the chat.

use std::convert::Infallible;
use std::sync::Arc;

use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};

use super::AppState;
use super::error::ApiError;
use super::sessions::LiveChat;
use crate::events::LogEntry;

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

fn to_sse(entry: &LogEntry) -> SseEvent {
    let data = serde_json::to_string(entry).unwrap_or_else(|_| "{}".into());
    let event = SseEvent::default().data(data);
    match entry.seq {
        Some(seq) => event.id(seq.to_string()),
        None => event,
    }
}

/// The stream for `chat`, from after `after`.
pub(crate) fn stream(
    state: &AppState,
    chat: &Arc<LiveChat>,
    after: u64,
) -> Result<Response, ApiError> {
    let limit = state.config.limits.subscribers_per_chat;
    let slot = chat.subscribe_slot(limit).ok_or_else(|| {
        ApiError::too_many(format!(
            "this chat already has {limit} event streams, the most allowed: close one first"
        ))
    })?;
    let subscription = chat.session.subscribe(after);
    let ended = chat.ended.clone();
    // The slot is held as long as the stream lives. When the chat ends, the
    // events already published are still sent (a stream is polled first),
    // then the stream closes.
    let start = (subscription, slot, ended);
    let events = futures::stream::unfold(start, |(mut sub, slot, ended)| async move {
        let entry = tokio::select! {
            biased;
            entry = sub.next() => entry?,
            _ = ended.cancelled() => return None,
        };
        Some((Ok::<_, Infallible>(to_sse(&entry)), (sub, slot, ended)))
    });
    let mut response = Sse::new(events)
        .keep_alive(KeepAlive::new().interval(state.config.heartbeat))
        .into_response();
    // Proxies that buffer would hold the stream back.
    response.headers_mut().insert(
        "x-accel-buffering",
        axum::http::HeaderValue::from_static("no"),
    );
    Ok(response)
}
