//! `GET …/prompt`: the system prompt and tools the chat's next model turn
//! would send, section by section (the page's "Show the system prompt").
//! The same JSON as `lrg prompt --json`:
//! `{"sections": [{"name", "text", "source", "added_by"}], "tools": [{"name",
//! "description", "class"}], "model": "provider:model"}`.

use axum::Json;
use axum::response::{IntoResponse, Response};

use super::error::ApiError;
use super::guard::AuthedChat;

/// `GET /v1/chat/sessions/{id}/prompt` → `200` [`crate::prompt::PromptPreview`].
pub(crate) async fn get_prompt(AuthedChat(chat): AuthedChat) -> Result<Response, ApiError> {
    match chat.session.next_prompt(None).await {
        Ok(preview) => Ok(Json(preview).into_response()),
        Err(e) => {
            // The detail may name a server's address: logged, not sent.
            tracing::warn!(error = %e, "cannot preview a chat's prompt");
            Err(ApiError::internal(
                "the chat's model cannot be reached now, so its prompt cannot be shown",
            ))
        }
    }
}
