//! `POST …/consent`: the person agreed, on the page, to send this chat to a
//! provider's cloud. The page asks once per provider: again only for a
//! provider this chat (kept with it) and the permission settings ("don't
//! ask again for PROVIDER", `always`) have no consent for. `GET …/models`
//! says whether the current model's provider has one (`cloud_consented`).
//!
//! Consent is the page's question, not a gate: the API sends what a caller
//! with the chat token asks it to, as before.

use std::sync::Arc;

use axum::Json;
use axum::body::Body;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::json;

use super::AppState;
use super::error::ApiError;
use super::guard::AuthedChat;
use crate::permissions::SaveStatus;

/// The longest provider name taken: names go into the settings file.
const MAX_PROVIDER_CHARS: usize = 64;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ConsentBody {
    /// The provider, as the model menu names it (`openai`).
    provider: String,
    /// "Don't ask again for PROVIDER": for every chat, in the permission
    /// settings.
    #[serde(default)]
    always: bool,
}

/// `POST …/consent {provider, always?}` → `200 {provider, always, saved}`
/// once the consent is kept: with the chat (`saved: false` when the chat is
/// not kept, or its store failed), and with `always` in the permission
/// settings too (`settings_saved`, and `save_error` when writing failed).
pub(crate) async fn post_consent(
    State(state): State<Arc<AppState>>,
    AuthedChat(chat): AuthedChat,
    body: Body,
) -> Result<Response, ApiError> {
    let body: ConsentBody = super::body::read_json(state.config.limits.body_bytes, body).await?;
    let provider = body.provider.trim();
    check_provider(provider)?;
    let status = chat.session.consent_to_cloud(provider, body.always);
    let saved = chat.session.store_id().is_some() && chat.session.keep_state().await;
    let mut answer = json!({"provider": provider, "always": body.always, "saved": saved});
    if let Some(status) = status {
        answer["settings_saved"] = json!(status.saved());
        if let SaveStatus::Failed(e) = status {
            answer["save_error"] = json!(e);
        }
    }
    Ok(Json(answer).into_response())
}

/// A provider name: what the model menu's ids begin with, nothing else.
fn check_provider(provider: &str) -> Result<(), ApiError> {
    if provider.is_empty() {
        return Err(ApiError::bad_request("provider", "is empty"));
    }
    if provider.chars().count() > MAX_PROVIDER_CHARS {
        return Err(ApiError::bad_request(
            "provider",
            format!("is longer than {MAX_PROVIDER_CHARS} characters"),
        ));
    }
    let ok = provider
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if !ok {
        return Err(ApiError::bad_request(
            "provider",
            "is not a provider name (letters, digits, `-`, `_` and `.` only)",
        ));
    }
    Ok(())
}
