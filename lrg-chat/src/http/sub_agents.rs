//! A chat's sub-agents ([`crate::sub_agents`]) over HTTP, under the chat's
//! token (or its owner's):
//!
//! - `GET …/sub_agents` lists them, by number: this run's from the
//!   session, earlier runs' (before a restart) from the store.
//! - `GET …/sub_agents/{n}/events` is sub-agent `n`'s own stream, as the
//!   chat's (`?after=`, `Last-Event-ID`, heartbeats, `resync`; one of the
//!   chat's stream slots). While it works the stream follows it, and it
//!   ends once the sub-agent has. One that was released (its result is in
//!   the chat), or of an earlier run, is its transcript as numbered events
//!   from 1, as a resumed chat's log begins, and the stream ends after
//!   them; a client that followed it live and reconnects with `after` set
//!   gets `resync` alone, and reads it again from `after=0`. One still
//!   queued is a 409.
//!
//! Its approval questions are on the chat's own stream (`approval_needed`
//! with `sub_agent`), answered with the chat's `POST …/approvals/{call_id}`.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, RawQuery, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use futures::future::BoxFuture;
use lrg_providers::Message;
use serde_json::{Value, json};

use super::error::ApiError;
use super::guard::AuthedChat;
use super::owners::rfc3339;
use super::sessions::LiveChat;
use super::{AppState, sse};
use crate::events::EventLog;
use crate::store::{SessionId, StoreError};
use crate::sub_agents::{SubAgentInfo, View};

type St = State<Arc<AppState>>;

/// `GET …/sub_agents` → `{sub_agents: [{n, id, description, status,
/// call_id, started_at, ended_at}]}`, by number; times are RFC 3339 UTC,
/// `null` when not yet (or never) known.
pub(crate) async fn list(
    State(state): St,
    AuthedChat(chat): AuthedChat,
) -> Result<Response, ApiError> {
    let mut all = chat.session.sub_agents();
    if let (Some(store), Some(parent)) = (&state.config.store, chat.session.store_id()) {
        let kept = crate::sub_agents::stored(store.as_ref(), parent)
            .await
            .map_err(|e| store_failed(&e))?;
        // This run's are as they are now; the store has the earlier runs'.
        let earlier: Vec<SubAgentInfo> = kept
            .into_iter()
            .filter(|k| !all.iter().any(|a| a.id == k.id))
            .collect();
        all.extend(earlier);
    }
    all.sort_by_key(|a| a.n);
    let rows: Vec<Value> = all.iter().map(entry).collect();
    Ok(Json(json!({"sub_agents": rows})).into_response())
}

fn entry(agent: &SubAgentInfo) -> Value {
    json!({
        "n": agent.n,
        "id": agent.id,
        "description": agent.description,
        "status": agent.status,
        "call_id": agent.call_id,
        "started_at": agent.started_ms.and_then(rfc3339),
        "ended_at": agent.ended_ms.and_then(rfc3339),
    })
}

/// `GET …/sub_agents/{n}/events?after=N`: sub-agent `n`'s stream (see the
/// [module docs](self)).
pub(crate) async fn events(
    State(state): St,
    AuthedChat(chat): AuthedChat,
    Path((_, n)): Path<(String, String)>,
    headers: HeaderMap,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    let n: u64 = n.parse().map_err(|_| {
        ApiError::bad_request(
            "n",
            "must be a sub-agent's number (its `n` in GET …/sub_agents)",
        )
    })?;
    let last_event_id = headers.get("last-event-id").and_then(|v| v.to_str().ok());
    let after = sse::after(query.as_deref(), last_event_id)?;
    let view = crate::sub_agents::manager_of(&chat.session).and_then(|m| m.view(n));
    match view {
        Some(View::Live { session, ended }) => {
            let chat_ended = chat.ended.clone();
            let until: BoxFuture<'static, ()> = Box::pin(async move {
                tokio::select! {
                    () = ended.cancelled_owned() => {}
                    () = chat_ended.cancelled_owned() => {}
                }
            });
            sse::stream_of(&state, &chat, session.subscribe(after), until)
        }
        Some(View::Queued) => Err(ApiError::conflict(format!(
            "sub-agent {n} has not started yet (it waits for a free place): its events begin \
             when it starts"
        ))),
        Some(View::Kept(history)) => replay(&state, &chat, &history, after),
        Some(View::Stored(id)) => {
            let history = stored_history(&state, &id).await?.unwrap_or_default();
            replay(&state, &chat, &history, after)
        }
        // Not of this run: of an earlier one, in the store, if anywhere.
        None => {
            let id = chat.session.store_id().map(|parent| parent.sub_agent(n));
            let history = match &id {
                Some(id) => stored_history(&state, id).await?,
                None => None,
            };
            let history = history
                .ok_or_else(|| ApiError::not_found(format!("this chat has no sub-agent {n}")))?;
            replay(&state, &chat, &history, after)
        }
    }
}

/// Sub-agent `id`'s transcript as the store keeps it; `None` when it keeps
/// none.
async fn stored_history(
    state: &AppState,
    id: &SessionId,
) -> Result<Option<Vec<Message>>, ApiError> {
    let Some(store) = &state.config.store else {
        return Ok(None);
    };
    match store.load(id).await {
        Ok(kept) => Ok(Some(kept.rows)),
        Err(StoreError::NotFound(_)) => Ok(None),
        Err(e) => Err(store_failed(&e)),
    }
}

/// The stream of a sub-agent that no longer works here: `rows` as numbered
/// events, then its end.
fn replay(
    state: &AppState,
    chat: &Arc<LiveChat>,
    rows: &[Message],
    after: u64,
) -> Result<Response, ApiError> {
    // Its numbers are not those of the live stream the client followed.
    if after > 0 {
        return Ok(sse::resync_only());
    }
    let log = EventLog::new();
    for event in crate::session::history_events(rows) {
        log.publish(event);
    }
    let sub = log.subscribe(0);
    // With the log gone, the subscription ends after what it holds.
    drop(log);
    sse::stream_of(state, chat, sub, Box::pin(std::future::pending()))
}

/// A store failure, said without its detail (which names files); the
/// detail goes to the log.
fn store_failed(e: &StoreError) -> ApiError {
    tracing::warn!("a chat's sub-agents: {e}");
    ApiError::internal("the sub-agents could not be read: the store failed")
}
