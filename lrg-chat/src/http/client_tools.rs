//! Tools the page (or any HTTP client) runs itself
//! ([`crate::tools::client`]): declared when a chat opens
//! (`client_tools: [{name, description, input_schema, annotations?,
//! ends_turn?}]`), each call a `tool_call` event with `runs_on: "client"`,
//! answered with `POST …/tool_results/{call_id}` and `{content, is_error?}`
//! where `content` is a string or a list of MCP content parts (`text`,
//! `image`). 404 for a call that does not wait (unknown, answered, timed
//! out, stopped); 400 for a malformed answer.

use axum::Json;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use lrg_providers::{Image, Part, ToolAnnotations, ToolSpec};
use serde::Deserialize;
use serde_json::{Value, json};

use std::sync::Arc;

use super::AppState;
use super::error::ApiError;
use super::guard::AuthedChat;
use crate::tools::ToolOutput;
use crate::tools::client::ClientToolSpec;

/// The most client tools one chat may declare.
const MAX_CLIENT_TOOLS: usize = 64;

/// One declared client tool, as the open body gives it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ClientToolBody {
    name: String,
    #[serde(default)]
    description: String,
    #[serde(default = "empty_object_schema")]
    input_schema: Value,
    #[serde(default)]
    annotations: ToolAnnotations,
    #[serde(default)]
    ends_turn: bool,
}

fn empty_object_schema() -> Value {
    json!({"type": "object"})
}

/// The declared tools, checked: names valid and unique, schemas objects.
pub(crate) fn client_tools(body: Vec<ClientToolBody>) -> Result<Vec<ClientToolSpec>, ApiError> {
    if body.len() > MAX_CLIENT_TOOLS {
        return Err(ApiError::bad_request(
            "client_tools",
            format!("at most {MAX_CLIENT_TOOLS} tools"),
        ));
    }
    let mut out: Vec<ClientToolSpec> = Vec::with_capacity(body.len());
    for tool in body {
        if !crate::tools::names::is_valid_name(&tool.name) {
            return Err(ApiError::bad_request(
                "client_tools",
                format!(
                    "`{}` is not a tool name (1 to 64 characters of a-z, A-Z, 0-9, `_` or `-`)",
                    tool.name
                ),
            ));
        }
        if out.iter().any(|t| t.spec.name == tool.name) {
            return Err(ApiError::bad_request(
                "client_tools",
                format!("`{}` is declared twice", tool.name),
            ));
        }
        if !tool.input_schema.is_object() {
            return Err(ApiError::bad_request(
                "client_tools",
                format!(
                    "the input_schema of `{}` is not a JSON Schema object",
                    tool.name
                ),
            ));
        }
        out.push(ClientToolSpec {
            spec: ToolSpec {
                name: tool.name,
                description: tool.description,
                input_schema: tool.input_schema,
                annotations: tool.annotations,
                output_schema: None,
            },
            ends_turn: tool.ends_turn,
        });
    }
    Ok(out)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ResultBody {
    content: Value,
    #[serde(default)]
    is_error: bool,
}

/// `POST …/tool_results/{call_id}`.
pub(crate) async fn post_tool_result(
    State(state): State<Arc<AppState>>,
    AuthedChat(chat): AuthedChat,
    Path((_, call_id)): Path<(String, String)>,
    body: Body,
) -> Result<Response, ApiError> {
    let body: ResultBody = super::body::read_json(state.config.limits.body_bytes, body).await?;
    let parts = parts_of(body.content)?;
    chat.session
        .submit_tool_result(
            &call_id,
            ToolOutput {
                parts,
                is_error: body.is_error,
                warning: None,
                structured: None,
                resources: Vec::new(),
            },
        )
        .map_err(|e| ApiError::not_found(e.to_string()))?;
    Ok(Json(json!({"accepted": true})).into_response())
}

/// `content`: a string, or MCP content parts (`{"type": "text", "text"}`,
/// `{"type": "image", "data", "mimeType"}`).
fn parts_of(content: Value) -> Result<Vec<Part>, ApiError> {
    let bad = |why: String| ApiError::bad_request("content", why);
    match content {
        Value::String(text) => Ok(vec![Part::text(text)]),
        Value::Array(items) => items
            .into_iter()
            .enumerate()
            .map(|(i, item)| match item.get("type").and_then(Value::as_str) {
                Some("text") => item
                    .get("text")
                    .and_then(Value::as_str)
                    .map(Part::text)
                    .ok_or_else(|| bad(format!("part {i}: a text part needs `text`"))),
                Some("image") => {
                    let mime = item
                        .get("mimeType")
                        .and_then(Value::as_str)
                        .filter(|m| m.starts_with("image/"))
                        .ok_or_else(|| {
                            bad(format!("part {i}: an image needs an image/ `mimeType`"))
                        })?;
                    let data = item
                        .get("data")
                        .and_then(Value::as_str)
                        .and_then(|d| base64::engine::general_purpose::STANDARD.decode(d).ok())
                        .ok_or_else(|| bad(format!("part {i}: an image needs base64 `data`")))?;
                    Ok(Part::Image(Image {
                        mime: mime.to_owned(),
                        data: data.into(),
                    }))
                }
                _ => Err(bad(format!(
                    "part {i}: `type` must be \"text\" or \"image\""
                ))),
            })
            .collect(),
        _ => Err(bad("must be a string or a list of content parts".to_owned())),
    }
}
