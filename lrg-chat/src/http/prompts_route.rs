//! MCP prompts over HTTP: `GET …/prompts` lists what the chat's tool
//! servers offer (`{"prompts": [{server, name, title?, description,
//! arguments: [{name, description, required}]}], "failed_servers":
//! [{error}]}`, the same entries as `lrg prompts --json`), and `POST
//! …/messages {"prompt": {server, name, arguments}}` sends one, expanded.
//! (`GET …/prompt`, singular, is the system prompt preview: another route.)

use std::collections::BTreeMap;

use axum::Json;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};

use super::error::ApiError;
use super::guard::AuthedChat;
use super::sessions::LiveChat;
use crate::session::UserInput;
use crate::tools::McpRequestError;

/// `GET /v1/chat/sessions/{id}/prompts` → `200 {"prompts": [...],
/// "failed_servers": [...]}`; a chat without tool servers has none.
pub(crate) async fn list(AuthedChat(chat): AuthedChat) -> Result<Response, ApiError> {
    let Some(host) = &chat.host else {
        return Ok(Json(json!({"prompts": [], "failed_servers": []})).into_response());
    };
    let listing = host.prompts().await;
    let failed: Vec<Value> = listing
        .failures
        .iter()
        .map(|f| {
            // The detail may name a server's address: logged, not sent.
            tracing::warn!(error = %f, "a tool server's prompts could not be listed");
            json!({"error": public(f)})
        })
        .collect();
    Ok(Json(json!({"prompts": listing.items, "failed_servers": failed})).into_response())
}

/// The `prompt` of a message body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PromptBody {
    server: String,
    name: String,
    #[serde(default)]
    arguments: BTreeMap<String, String>,
}

/// The message a `prompt` expands to, or the 4xx that says why not: 404
/// for an unknown server or prompt, 400 naming a missing or unknown
/// argument, 500 when the server fails.
pub(crate) async fn expand(chat: &LiveChat, prompt: PromptBody) -> Result<UserInput, ApiError> {
    let Some(host) = &chat.host else {
        return Err(ApiError::not_found(format!(
            "this chat has no tool servers, so no prompt `{}/{}`",
            prompt.server, prompt.name
        )));
    };
    match host
        .get_prompt(&prompt.server, &prompt.name, &prompt.arguments)
        .await
    {
        Ok(expanded) => {
            let input = expanded.into_input();
            if input.text.trim().is_empty() && input.images.is_empty() {
                return Err(ApiError::bad_request(
                    "prompt",
                    format!(
                        "prompt `{}/{}` expanded to nothing",
                        prompt.server, prompt.name
                    ),
                ));
            }
            Ok(input)
        }
        Err(e @ McpRequestError::UnknownServer { .. }) => Err(ApiError::not_found(format!(
            "there is no tool server `{}`{}",
            prompt.server,
            match &e {
                McpRequestError::UnknownServer { known, .. } => format!(" (servers: {known})"),
                _ => String::new(),
            }
        ))),
        Err(McpRequestError::Invalid { message }) if message.contains("has no prompt") => {
            Err(ApiError::not_found(message))
        }
        Err(McpRequestError::Invalid { message }) => {
            Err(ApiError::bad_request("prompt.arguments", message))
        }
        Err(e @ McpRequestError::NotOffered { .. }) => Err(ApiError::not_found(e.to_string())),
        Err(e) => {
            tracing::warn!(error = %e, "expanding a prompt failed");
            Err(ApiError::internal(public(&e)))
        }
    }
}

/// What a caller is told of a server's failure: which server, and the
/// kind, never the server's own text (it may name an address).
fn public(e: &McpRequestError) -> String {
    match e {
        McpRequestError::Failed { server, .. } => {
            format!("tool server `{server}` failed to answer")
        }
        McpRequestError::TimedOut { server, what, secs } => {
            format!("tool server `{server}` did not answer {what} within {secs} s")
        }
        other => other.to_string(),
    }
}
