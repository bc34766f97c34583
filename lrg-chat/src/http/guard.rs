//! Who may use a route, as extractors that run before any body is read:
//! [`AuthedChat`] for a chat's routes (origin, then the chat's token) and
//! [`Agent`] for opening chats (origin, then the agent token). Every refusal
//! is the one uniform 403, so nothing about a chat or a limit is told to a
//! caller without its token.

use std::sync::Arc;

use axum::extract::{FromRequestParts, RawPathParams};
use axum::http::request::Parts;

use super::error::ApiError;
use super::sessions::LiveChat;
use super::{AppState, auth};

/// The route's `{name}` segment, empty when there is none (a route without
/// it, or one that does not decode): the caller refuses an empty one.
pub(crate) async fn path_param(parts: &mut Parts, state: &Arc<AppState>, name: &str) -> String {
    RawPathParams::from_request_parts(parts, state)
        .await
        .ok()
        .and_then(|p| {
            p.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        })
        .unwrap_or_default()
}

/// The chat named by the route's `{id}`, when the request may use it.
pub(crate) struct AuthedChat(pub(crate) Arc<LiveChat>);

impl FromRequestParts<Arc<AppState>> for AuthedChat {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &Arc<AppState>,
    ) -> Result<Self, ApiError> {
        if !auth::origin_allowed(&parts.headers, &state.config.allowed_origins) {
            return Err(ApiError::forbidden());
        }
        let id = path_param(parts, state, "id").await;
        let given = auth::bearer(&parts.headers).unwrap_or_default();
        let chat = state
            .chats
            .get(&id)
            // Its chat token, or a token of its owner.
            .filter(|chat| chat.token_matches(given) | state.owner_token_matches(&chat.id, given))
            .ok_or_else(ApiError::forbidden)?;
        // A use, for idle eviction. A chat the registry put away meanwhile
        // has ended: its keys open it again.
        if state.registry.get(&chat.id).is_none() {
            state.end_gone();
            return Err(ApiError::forbidden());
        }
        Ok(Self(chat))
    }
}

/// A request carrying the agent token.
pub(crate) struct Agent;

impl FromRequestParts<Arc<AppState>> for Agent {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &Arc<AppState>,
    ) -> Result<Self, ApiError> {
        let ok = auth::origin_allowed(&parts.headers, &state.config.allowed_origins)
            && auth::bearer(&parts.headers)
                .is_some_and(|given| auth::same_token(given, &state.config.agent_token));
        if ok {
            Ok(Self)
        } else {
            Err(ApiError::forbidden())
        }
    }
}
