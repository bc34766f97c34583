//! The handlers of `/v1/owners/{owner}/…`: owner tokens minted by the
//! agent token, and an owner's chats listed, opened (new, or again from the
//! store), named and deleted with one of that owner's tokens (see
//! [`super::owner_auth`]). Every refusal is the uniform 403: a wrong token,
//! another owner's chat and an unknown one look alike.

use std::sync::Arc;

use axum::Json;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};

use super::AppState;
use super::error::ApiError;
use super::guard::Agent;
use super::open::Caller;
use super::owner_auth::{OwnerAuth, check_owner};
use super::routes::{OpenBody, open_spec};
use crate::registry::{OtherModel, OwnedChat};
use crate::store::SessionId;

type St = State<Arc<AppState>>;

/// The longest name a chat may be given, in characters.
pub(crate) const MAX_NAME_CHARS: usize = 200;

/// What a list shows for a chat with neither a name nor a message.
const NEW_CHAT: &str = "New chat";

/// `POST /v1/owners/{owner}/tokens` (agent token) → 201 `{token, owner}`.
pub(crate) async fn mint(
    State(state): St,
    _: Agent,
    Path(owner): Path<String>,
) -> Result<Response, ApiError> {
    check_owner("owner", &owner)?;
    let token = state.owner_tokens.mint(&owner);
    Ok((
        StatusCode::CREATED,
        Json(json!({"token": token, "owner": owner})),
    )
        .into_response())
}

/// `GET /v1/owners/{owner}/chats` → `{owner, chats: [entry]}`, newest first.
pub(crate) async fn list(State(state): St, auth: OwnerAuth) -> Result<Response, ApiError> {
    let chats = state
        .registry
        .owned(&auth.owner)
        .await
        .map_err(|e| store_failed(&e))?;
    let chats: Vec<Value> = chats.iter().map(entry).collect();
    Ok(Json(json!({"owner": auth.owner, "chats": chats})).into_response())
}

/// `POST /v1/owners/{owner}/chats`: a new chat of the owner, kept in the
/// store. The body is an open's, less what only the app's agent token may
/// give (tools, keys); a model must be the server's default or an available
/// one of the menu.
pub(crate) async fn create(
    State(state): St,
    auth: OwnerAuth,
    body: Body,
) -> Result<Response, ApiError> {
    let body: OpenBody = super::body::read_json(state.config.limits.body_bytes, body).await?;
    let (mut spec, keys, _) = open_spec(body)?;
    if spec.mcp_servers.is_some() {
        return Err(ApiError::bad_request(
            "mcpServers",
            "only the app's agent token gives a chat tools; an owner's chats get the server's",
        ));
    }
    if keys.is_some() {
        return Err(ApiError::bad_request(
            "client_key",
            "keyed chats are opened with the app's agent token (POST /v1/chat/sessions)",
        ));
    }
    if spec.owner.as_deref().is_some_and(|o| o != auth.owner) {
        return Err(ApiError::bad_request(
            "owner",
            "is the route's owner here: leave it out",
        ));
    }
    spec.owner = Some(auth.owner.clone());
    if let Some(model) = spec.model.as_deref().map(str::trim) {
        state.check_owner_model(model).await?;
    }
    let link = state
        .open_chat(spec, None, OtherModel::Refuse, Caller::Remote)
        .await?;
    Ok((
        StatusCode::CREATED,
        Json(state.opened(&link.session, &link.chat_token)),
    )
        .into_response())
}

/// `POST /v1/owners/{owner}/chats/{session}/open` → 200 `{session,
/// chat_token, model}`: live, or resumed from the store on its own model.
pub(crate) async fn open(
    State(state): St,
    auth: OwnerAuth,
    Path((_, session)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    let id: SessionId = session.parse().map_err(|_| ApiError::forbidden())?;
    let link = state.open_owned(&id, &auth.owner).await?;
    Ok(Json(state.opened(&link.session, &link.chat_token)).into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RenameBody {
    name: Option<String>,
}

/// `PATCH /v1/owners/{owner}/chats/{session}` `{name}` → 200 with its list
/// entry; an empty (or null) name clears it.
pub(crate) async fn rename(
    State(state): St,
    auth: OwnerAuth,
    Path((_, session)): Path<(String, String)>,
    body: Body,
) -> Result<Response, ApiError> {
    let id = state.owned_id(&session, &auth.owner).await?;
    let body: RenameBody = super::body::read_json(state.config.limits.body_bytes, body).await?;
    let name = body.name.as_deref().map(str::trim).unwrap_or_default();
    let chars = name.chars().count();
    if chars > MAX_NAME_CHARS {
        return Err(ApiError::bad_request(
            "name",
            format!("has {chars} characters; a chat's name has at most {MAX_NAME_CHARS}"),
        ));
    }
    if name.chars().any(char::is_control) {
        return Err(ApiError::bad_request(
            "name",
            "holds a control character (a line break, a tab): a name is one line",
        ));
    }
    state
        .registry
        .rename(&id, Some(name))
        .await
        .map_err(|e| store_failed(&e))?
        .ok_or_else(ApiError::forbidden)?;
    let chats = state
        .registry
        .owned(&auth.owner)
        .await
        .map_err(|e| store_failed(&e))?;
    let chat = chats
        .iter()
        .find(|c| c.meta.id == id)
        .ok_or_else(ApiError::forbidden)?;
    Ok(Json(entry(chat)).into_response())
}

/// `DELETE /v1/owners/{owner}/chats/{session}` → 204: ended when live, and
/// deleted from the store.
pub(crate) async fn delete(
    State(state): St,
    auth: OwnerAuth,
    Path((_, session)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    let id = state.owned_id(&session, &auth.owner).await?;
    match state.chats.get(id.as_str()) {
        Some(chat) => state.end_chat(&chat).await?,
        None => {
            state.registry.end(&id).await.map_err(|e| {
                tracing::warn!("the stored copy of chat {id} was not deleted: {e}");
                ApiError::internal("the chat could not be deleted: its store failed")
            })?;
        }
    }
    Ok(StatusCode::NO_CONTENT.into_response())
}

impl AppState {
    /// The id `session` names when it is a chat of `owner`'s, live or
    /// stored; the uniform 403 otherwise.
    async fn owned_id(&self, session: &str, owner: &str) -> Result<SessionId, ApiError> {
        let id: SessionId = session.parse().map_err(|_| ApiError::forbidden())?;
        match self.registry.owned_meta(&id, owner).await {
            Ok(Some(_)) => Ok(id),
            Ok(None) => Err(ApiError::forbidden()),
            Err(e) => Err(store_failed(&e)),
        }
    }

    /// What an owner's open answers: the chat, its token and its model.
    fn opened(&self, session: &str, chat_token: &str) -> Value {
        let model = session
            .parse::<SessionId>()
            .ok()
            .and_then(|id| self.registry.live_meta(&id))
            .map(|m| m.model.model);
        json!({"session": session, "chat_token": chat_token, "model": model})
    }

    /// Refuse a model an owner's new chat may not be on: the server's
    /// default, or an available model of the menu, by its exact id.
    async fn check_owner_model(&self, id: &str) -> Result<(), ApiError> {
        let default = self.config.defaults.model.as_deref().map(str::trim);
        if default == Some(id) {
            return Ok(());
        }
        let offered = self
            .menu
            .menu()
            .await
            .iter()
            .flat_map(|g| &g.models)
            .any(|e| e.available && e.id == id);
        if offered {
            Ok(())
        } else {
            Err(ApiError::bad_request(
                "model",
                "not one of this server's models: choose an available one, by its id, from \
                 a chat's GET …/models",
            ))
        }
    }
}

/// A registry failure of a listing or a change, said without the store's
/// detail (which names files); the detail goes to the log.
fn store_failed(e: &crate::registry::RegistryError) -> ApiError {
    tracing::warn!("an owner's chats: {e}");
    ApiError::internal("the chats could not be read: the store failed")
}

/// A chat as a list shows it.
fn entry(chat: &OwnedChat) -> Value {
    let meta = &chat.meta;
    let title = meta
        .name
        .clone()
        .or_else(|| chat.first_message.clone())
        .unwrap_or_else(|| NEW_CHAT.to_string());
    json!({
        "session": meta.id,
        "title": title,
        "name": meta.name,
        "model": meta.model.model,
        "created_at": rfc3339(meta.created_ms),
        "updated_at": rfc3339(chat.updated_ms),
        "running": chat.running,
        "live": chat.live,
        "archived": meta.archived,
    })
}

/// Milliseconds since the Unix epoch as RFC 3339 UTC, to the second
/// (`2026-12-02T02:20:00Z`); `None` for 0 (unknown).
pub(crate) fn rfc3339(ms: u64) -> Option<String> {
    if ms == 0 {
        return None;
    }
    let secs = ms / 1000;
    let (days, rest) = (secs / 86_400, secs % 86_400);
    let (h, m, s) = (rest / 3600, rest % 3600 / 60, rest % 60);
    // Howard Hinnant's civil_from_days, for days since 1970-01-01.
    let z = i64::try_from(days).ok()? + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    Some(format!(
        "{year:04}-{month:02}-{day:02}T{h:02}:{m:02}:{s:02}Z"
    ))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn times_are_rfc3339_utc() {
        assert_eq!(rfc3339(0), None);
        assert_eq!(rfc3339(1).as_deref(), Some("1970-01-01T00:00:00Z"));
        assert_eq!(
            rfc3339(951_782_400_000).as_deref(),
            Some("2000-02-29T00:00:00Z")
        );
        assert_eq!(
            rfc3339(1_796_180_400_123).as_deref(),
            Some("2026-12-02T03:00:00Z")
        );
    }
}
