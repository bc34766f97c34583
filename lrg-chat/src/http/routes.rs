//! The handlers of `/v1/chat/*`. Each takes its caller's right first (the
//! [`AuthedChat`] or [`Agent`] extractor: origin, then token), and only then
//! reads the body, so nothing about a chat or a limit is told to a caller
//! without its token.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::Json;
use axum::body::Body;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use lrg_providers::Image;
use lrg_providers::typed::OutputSchema;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::error::ApiError;
use super::guard::{Agent, AuthedChat};
use super::menu;
use super::open::Caller;
use super::opener::ChatSpec;
use super::sessions::LiveChat;
use super::{AppState, OpenedAs, sse};
use crate::events::Event;
use crate::permissions::{Answer, ApprovalReason, Mode, PermissionSettings, Rule, SaveStatus};
use crate::registry::OtherModel;
use crate::session::{SessionError, UserInput};
use crate::store::SessionKeys;
use crate::tools::{McpConfig, ToolClass};

type St = State<Arc<AppState>>;

/// Read a JSON body of at most the configured size, strictly (see
/// [`body`](super::body)).
async fn read_json<T: DeserializeOwned>(state: &AppState, body: Body) -> Result<T, ApiError> {
    super::body::read_json(state.config.limits.body_bytes, body).await
}

fn session_error(e: SessionError) -> ApiError {
    match e {
        SessionError::Busy => ApiError::busy(),
        SessionError::NoSuchClientCall(id) => {
            ApiError::not_found(format!("no client tool call `{id}` waits for a result"))
        }
        SessionError::NoSuchApproval(id) => {
            ApiError::not_found(format!("no approval is waiting for tool call `{id}`"))
        }
        other @ (SessionError::NothingToRetry | SessionError::NothingToCompact) => {
            ApiError::conflict(other.to_string())
        }
        SessionError::NoRuntime => ApiError::internal("the chat could not start its work"),
        SessionError::Schema(e) => ApiError::bad_request("output_schema", e),
    }
}

/// The `202` for work a chat took on. `saved: false` is added when the
/// store failed to keep it (the chat goes on in memory only, and a
/// `warning` event said why): the caller was acknowledged, but a crash
/// would lose it.
fn accepted(chat: &LiveChat, saved: bool) -> Response {
    let mut body = json!({"last_seq": chat.session.events().last_seq()});
    if !saved {
        body["saved"] = json!(false);
    }
    (StatusCode::ACCEPTED, Json(body)).into_response()
}

// ---- open and end ---------------------------------------------------------

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct OpenBody {
    #[serde(default)]
    model: Option<String>,
    #[serde(default, rename = "mcpServers")]
    mcp_servers: Option<Value>,
    #[serde(default)]
    permissions: Option<PermissionSettings>,
    #[serde(default)]
    system: Option<String>,
    #[serde(default)]
    local_only: Option<bool>,
    #[serde(default)]
    client_key: Option<String>,
    #[serde(default)]
    context_key: Option<String>,
    /// Keys on another model: archive that chat and start a new one.
    #[serde(default)]
    replace: bool,
    /// Keys on another model: carry the conversation over to this one.
    #[serde(default)]
    carry_over: bool,
    /// Who the chat belongs to (default: the default owner).
    #[serde(default)]
    owner: Option<String>,
    /// Tools the client runs itself (see [`super::client_tools`]).
    #[serde(default)]
    client_tools: Option<Vec<super::client_tools::ClientToolBody>>,
    /// Let the model delegate tasks to sub-agents (default: the server's).
    #[serde(default)]
    sub_agents: Option<bool>,
}

/// What an open body asks for: the chat, its keys, and what keys that name
/// a chat on another model do.
pub(crate) fn open_spec(
    body: OpenBody,
) -> Result<(ChatSpec, Option<SessionKeys>, OtherModel), ApiError> {
    let keys = SessionKeys::from_optional(body.client_key.as_deref(), body.context_key.as_deref())
        .map_err(|e| ApiError::bad_body(e.to_string()))?;
    let other = match (body.replace, body.carry_over) {
        (false, false) => OtherModel::Refuse,
        (true, false) => OtherModel::Replace,
        (false, true) => OtherModel::CarryOver,
        (true, true) => {
            return Err(ApiError::bad_request(
                "carry_over",
                "give `carry_over` or `replace`, not both",
            ));
        }
    };
    if other != OtherModel::Refuse && keys.is_none() {
        let field = if body.replace {
            "replace"
        } else {
            "carry_over"
        };
        return Err(ApiError::bad_request(
            field,
            "is for keyed chats: give client_key and context_key",
        ));
    }
    let mcp_servers = match body.mcp_servers {
        None => None,
        Some(servers) => Some(
            McpConfig::from_value(json!({ "mcpServers": servers }))
                .map_err(|e| ApiError::bad_request("mcpServers", e))?,
        ),
    };
    if let Some(owner) = &body.owner {
        super::owner_auth::check_owner("owner", owner)?;
    }
    let client_tools = match body.client_tools {
        Some(tools) => super::client_tools::client_tools(tools)?,
        None => Vec::new(),
    };
    let spec = ChatSpec {
        model: body.model,
        mcp_servers,
        permissions: body.permissions,
        system: body.system,
        local_only: body.local_only,
        owner: body.owner,
        client_tools,
        sub_agents: body.sub_agents,
    };
    Ok((spec, keys, other))
}

pub(crate) async fn open(State(state): St, _: Agent, body: Body) -> Result<Response, ApiError> {
    let (mut spec, keys, other) = open_spec(read_json(&state, body).await?)?;
    // No model named: a kept chat resumes on its own model.
    if spec.model.is_none()
        && let Some(keys) = &keys
    {
        spec.model = state.kept_model(keys).await?;
    }
    // Before anything is resolved: nothing is spawned or opened for a
    // model the agent token may not name.
    state.check_open_model(spec.model.as_deref()).await?;
    let link = state.open_chat(spec, keys, other, Caller::Remote).await?;
    let status = if link.opened == OpenedAs::Live {
        StatusCode::OK
    } else {
        StatusCode::CREATED
    };
    Ok((status, Json(link)).into_response())
}

pub(crate) async fn end(
    State(state): St,
    AuthedChat(chat): AuthedChat,
) -> Result<Response, ApiError> {
    state.end_chat(&chat).await?;
    Ok(Json(json!({"ended": true})).into_response())
}

// ---- messages and turn control -------------------------------------------

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct MessageBody {
    #[serde(default)]
    text: String,
    #[serde(default)]
    images: Vec<ImageBody>,
    /// A JSON Schema the final answer must match: a typed message.
    #[serde(default)]
    output_schema: Option<Value>,
    /// A tool server's prompt to expand and send instead of `text`.
    #[serde(default)]
    prompt: Option<super::prompts_route::PromptBody>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ImageBody {
    mime: String,
    /// base64
    data: String,
}

pub(crate) async fn message(
    State(state): St,
    AuthedChat(chat): AuthedChat,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let mut body: MessageBody = read_json(&state, body).await?;
    let (input, output) = match body.prompt.take() {
        None => message_input(body, state.config.limits.message_chars)?,
        Some(prompt) => {
            if !body.text.is_empty() || !body.images.is_empty() {
                return Err(ApiError::bad_request(
                    "prompt",
                    "give either `text` (and `images`) or `prompt`, not both",
                ));
            }
            let expanded = super::prompts_route::expand(&chat, prompt).await?;
            body.text = expanded.text;
            // The expanded text is held to the same limit as a typed one.
            let (mut input, output) = message_input(body, state.config.limits.message_chars)?;
            input.images.extend(expanded.images);
            (input, output)
        }
    };
    // A caller's `traceparent` is the parent of the message's span.
    let traceparent = headers.get("traceparent").and_then(|v| v.to_str().ok());
    let handle = crate::otel::under_remote_parent(traceparent, || match output {
        Some(schema) => chat.session.send_output(input, schema),
        None => chat.session.send(input),
    });
    let mut handle = handle.map_err(session_error)?;
    // The 202 waits until the message is kept: what was acknowledged
    // survives a crash (a failed store says so in a `warning` event).
    let saved = handle.accepted().await;
    Ok(accepted(&chat, saved))
}

/// The message a body carries, with at most `limit` characters of text,
/// and its answer schema when it is typed. The schema is checked here, so
/// one that cannot be used is a 400 before anything is recorded.
pub(crate) fn message_input(
    body: MessageBody,
    limit: usize,
) -> Result<(UserInput, Option<OutputSchema>), ApiError> {
    let chars = body.text.chars().count();
    if chars > limit {
        return Err(ApiError::too_large(format!(
            "`text` is {chars} characters; a message may have at most {limit}"
        )));
    }
    if body.text.trim().is_empty() && body.images.is_empty() {
        return Err(ApiError::bad_request("text", "the message is empty"));
    }
    let mut images = Vec::with_capacity(body.images.len());
    for (i, image) in body.images.into_iter().enumerate() {
        if !image.mime.starts_with("image/") {
            return Err(ApiError::bad_request(
                &format!("images[{i}].mime"),
                "must be an image type such as image/png",
            ));
        }
        let data = base64::engine::general_purpose::STANDARD
            .decode(image.data.as_bytes())
            .map_err(|_| ApiError::bad_request(&format!("images[{i}].data"), "is not base64"))?;
        images.push(Image {
            mime: image.mime,
            data: data.into(),
        });
    }
    let output = body
        .output_schema
        .map(OutputSchema::new)
        .transpose()
        .map_err(|e| ApiError::bad_request("output_schema", e))?;
    let input = UserInput {
        text: body.text,
        images,
    };
    Ok((input, output))
}

pub(crate) async fn stop(AuthedChat(chat): AuthedChat) -> Result<Response, ApiError> {
    let stopped = chat.session.stop();
    Ok(Json(json!({"stopped": stopped})).into_response())
}

/// `POST …/retry`: an empty body (or `{}`) answers the last message again;
/// `{"text": …}` replaces its text first (the person edited it).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RetryBody {
    #[serde(default)]
    text: Option<String>,
}

pub(crate) async fn retry(
    State(state): St,
    AuthedChat(chat): AuthedChat,
    body: Body,
) -> Result<Response, ApiError> {
    let body: RetryBody = read_json(&state, body).await?;
    let handle = match body.text {
        Some(text) => {
            let limit = state.config.limits.message_chars;
            let chars = text.chars().count();
            if chars > limit {
                return Err(ApiError::too_large(format!(
                    "`text` is {chars} characters; a message may have at most {limit}"
                )));
            }
            if text.trim().is_empty() {
                return Err(ApiError::bad_request("text", "the message is empty"));
            }
            chat.session.retry_with_text(text)
        }
        None => chat.session.retry_last(),
    };
    let mut handle = handle.map_err(session_error)?;
    let saved = handle.accepted().await;
    Ok(accepted(&chat, saved))
}

pub(crate) async fn clear(AuthedChat(chat): AuthedChat) -> Result<Response, ApiError> {
    // Answered once the clear is kept and `cleared` published: a clear
    // acknowledged is not undone by a crash.
    let saved = chat.session.clear_kept().await.map_err(session_error)?;
    let mut body = json!({"last_seq": chat.session.events().last_seq()});
    if !saved {
        body["saved"] = json!(false);
    }
    Ok(Json(body).into_response())
}

pub(crate) async fn compact(AuthedChat(chat): AuthedChat) -> Result<Response, ApiError> {
    let mut handle = chat.session.compact().map_err(session_error)?;
    let saved = handle.accepted().await;
    Ok(accepted(&chat, saved))
}

// ---- approvals ------------------------------------------------------------

#[derive(Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub(crate) enum AnswerArg {
    Once,
    Chat,
    Always,
    Deny,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ApprovalBody {
    answer: AnswerArg,
    #[serde(default)]
    note: Option<String>,
}

pub(crate) async fn approval(
    State(state): St,
    AuthedChat(chat): AuthedChat,
    Path((_, call_id)): Path<(String, String)>,
    body: Body,
) -> Result<Response, ApiError> {
    let body: ApprovalBody = read_json(&state, body).await?;
    if body.note.is_some() && body.answer != AnswerArg::Deny {
        return Err(ApiError::bad_request(
            "note",
            "goes only with the answer \"deny\"",
        ));
    }
    if body.answer == AnswerArg::Always && !offers_always(&chat, &call_id) {
        return Err(ApiError::bad_request(
            "answer",
            "\"always\" is not offered for a bulk question: answer once, chat or deny",
        ));
    }
    let answer = match body.answer {
        AnswerArg::Once => Answer::Once,
        AnswerArg::Chat => Answer::ThisChat,
        AnswerArg::Always => Answer::Always,
        AnswerArg::Deny => Answer::Deny { note: body.note },
    };
    chat.session
        .answer_approval(&call_id, answer)
        .map_err(session_error)?;
    Ok(Json(json!({"answered": true})).into_response())
}

/// Whether the question for `call_id` offers "always" (the last one asked).
fn offers_always(chat: &LiveChat, call_id: &str) -> bool {
    chat.session
        .events()
        .entries()
        .iter()
        .rev()
        .find_map(|e| match &e.event {
            Event::ApprovalNeeded {
                call_id: c,
                offer_always,
                reason,
                ..
            } if c == call_id => {
                Some(*offer_always && !matches!(reason, ApprovalReason::Bulk { .. }))
            }
            _ => None,
        })
        .unwrap_or(true)
}

// ---- permissions ----------------------------------------------------------

#[derive(Serialize)]
struct ToolRow {
    name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    title: Option<String>,
    class: ToolClass,
    #[serde(skip_serializing_if = "Option::is_none")]
    rule: Option<Rule>,
}

fn permissions_view(chat: &LiveChat, status: Option<SaveStatus>) -> Value {
    let permissions = chat.session.permissions();
    let settings = permissions.settings();
    let tools: Vec<ToolRow> = chat
        .host
        .as_ref()
        .map(|h| h.tools())
        .unwrap_or_default()
        .into_iter()
        .map(|t| ToolRow {
            rule: settings.rules.get(&t.spec.name).copied(),
            title: t.spec.annotations.title.clone(),
            name: t.spec.name,
            class: t.class,
        })
        .collect();
    let (saved, save_error) = match status {
        Some(SaveStatus::Saved) => (true, None),
        Some(SaveStatus::Failed(e)) => (false, Some(e)),
        Some(SaveStatus::NotBound) => (false, None),
        None => (permissions.path().is_some(), None),
    };
    let mut view = json!({
        "mode": settings.mode,
        "rules": settings.rules,
        "bulk_limit": settings.bulk_limit,
        "saved": saved,
        "local_only": chat.session.local_only(),
        "tools": tools,
    });
    if let Some(e) = save_error {
        view["save_error"] = Value::String(e);
    }
    view
}

pub(crate) async fn get_permissions(AuthedChat(chat): AuthedChat) -> Result<Response, ApiError> {
    Ok(Json(permissions_view(&chat, None)).into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PermissionsBody {
    #[serde(default)]
    mode: Option<Mode>,
    /// Replaces every rule; `null` for a tool removes its rule.
    #[serde(default)]
    rules: Option<BTreeMap<String, Option<Rule>>>,
    #[serde(default)]
    bulk_limit: Option<u32>,
    /// The "local only" lock: on, a cloud model is refused at its next turn.
    #[serde(default)]
    local_only: Option<bool>,
}

pub(crate) async fn put_permissions(
    State(state): St,
    AuthedChat(chat): AuthedChat,
    body: Body,
) -> Result<Response, ApiError> {
    let body: PermissionsBody = read_json(&state, body).await?;
    if let Some(on) = body.local_only {
        chat.session.set_local_only(on);
        // Answered once the lock is kept with the chat.
        chat.session.keep_state().await;
    }
    let status = chat.session.update_permissions(|s| {
        if let Some(mode) = body.mode {
            s.mode = mode;
        }
        if let Some(rules) = body.rules {
            s.rules = rules
                .into_iter()
                .filter_map(|(tool, rule)| rule.map(|r| (tool, r)))
                .collect();
        }
        if let Some(limit) = body.bulk_limit {
            s.bulk_limit = limit;
        }
    });
    Ok(Json(permissions_view(&chat, Some(status))).into_response())
}

// ---- models ---------------------------------------------------------------

pub(crate) async fn models(
    State(state): St,
    AuthedChat(chat): AuthedChat,
) -> Result<Response, ApiError> {
    let model = chat.model();
    let groups = menu::with_current(state.menu.menu().await, &model);
    let current = menu::MenuEntry::from_info(&model);
    let consented = chat.session.cloud_consented(&model.provider);
    Ok(
        Json(json!({"current": current, "groups": groups, "cloud_consented": consented}))
            .into_response(),
    )
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SwitchBody {
    model: String,
    /// Accepted from clients of the two-step switch; a switch loses
    /// nothing now, so nothing needs confirming.
    #[serde(default, rename = "confirm")]
    _confirm: bool,
    /// Carry this chat's conversation over to the model, in place.
    #[serde(default)]
    carry_over: bool,
}

/// `POST …/model`: without `carry_over`, a new chat on the model (201, as
/// an open answers) while this one stays kept and live; with it, this
/// chat's conversation goes on on the model (200, the same chat and token).
pub(crate) async fn switch_model(
    State(state): St,
    AuthedChat(chat): AuthedChat,
    body: Body,
) -> Result<Response, ApiError> {
    let body: SwitchBody = read_json(&state, body).await?;
    let model = body.model.trim().to_string();
    if model.is_empty() {
        return Err(ApiError::bad_request("model", "is empty"));
    }
    // Before anything else: nothing is resolved for a model not offered.
    state.check_switch_model(&chat.model(), &model).await?;
    if chat.session.is_busy() {
        return Err(ApiError::busy());
    }
    if body.carry_over {
        state.carry_over(&chat, model).await?;
        let link = state.link(&chat, OpenedAs::CarriedOver);
        return Ok((StatusCode::OK, Json(link)).into_response());
    }
    let link = state.switch(&chat, model).await?;
    Ok((StatusCode::CREATED, Json(link)).into_response())
}

// ---- events, transcript, images -------------------------------------------

pub(crate) async fn events(
    State(state): St,
    AuthedChat(chat): AuthedChat,
    headers: HeaderMap,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    let last_event_id = headers.get("last-event-id").and_then(|v| v.to_str().ok());
    let after = sse::after(query.as_deref(), last_event_id)?;
    sse::stream(&state, &chat, after)
}

/// `GET …/transcript`'s header: the `seq` of the last event the rows are
/// known to include; follow the events with `after=` it.
const LAST_SEQ_HEADER: &str = "lrg-last-seq";
/// `GET …/transcript`'s header: the `seq` of the oldest event the chat's
/// log still keeps; a viewer that saw up to at least this minus one catches
/// up from the events alone.
const FIRST_KEPT_SEQ_HEADER: &str = "lrg-first-kept-seq";

pub(crate) async fn transcript(
    State(state): St,
    AuthedChat(chat): AuthedChat,
) -> Result<Response, ApiError> {
    // Where a viewer that rebuilds from these rows (after a `resync`)
    // follows the events from, in headers so the rows stay the same for
    // the same conversation. Read first: a change whose event comes later
    // may then show in both the rows and the events, but never in neither.
    let last_seq = chat.session.events().last_seq();
    let first_kept_seq = chat.session.events().first_kept_seq();
    let transcript = state
        .registry
        .transcript(&chat.id)
        .await
        .map_err(|_| ApiError::forbidden())?;
    let mut response = Json(transcript).into_response();
    let h = response.headers_mut();
    h.insert(LAST_SEQ_HEADER, HeaderValue::from(last_seq));
    h.insert(FIRST_KEPT_SEQ_HEADER, HeaderValue::from(first_kept_seq));
    Ok(response)
}

pub(crate) async fn image(
    AuthedChat(chat): AuthedChat,
    Path((_, call_id, n)): Path<(String, String, String)>,
) -> Result<Response, ApiError> {
    let n: usize = n
        .parse()
        .map_err(|_| ApiError::bad_request("n", "must be the image's index, from 0"))?;
    let history = chat.session.history();
    let image = crate::transcript::tool_image(&history, &call_id, n)
        .ok_or_else(|| ApiError::not_found(format!("tool call `{call_id}` has no image {n}")))?;
    // Only image types are served as themselves; the sandbox keeps even a
    // crafted SVG from running script.
    let mime = if image.mime.starts_with("image/") && !image.mime.contains([';', '\r', '\n']) {
        image.mime.as_str()
    } else {
        "application/octet-stream"
    };
    let mut response = image.data.clone().into_response();
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_str(mime).unwrap_or(HeaderValue::from_static("application/octet-stream")),
    );
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static("default-src 'none'; sandbox"),
    );
    Ok(response)
}

// ---- fallbacks and layers -------------------------------------------------

/// Refuse, with the uniform 403, a request to a name that is not loopback
/// when the server takes loopback names only
/// ([`super::HttpConfig::loopback_hosts_only`]).
pub(crate) async fn host_guard(
    State(state): St,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    if state.config.loopback_hosts_only
        && !super::auth::host_allowed(request.headers(), request.uri())
    {
        return ApiError::forbidden().into_response();
    }
    next.run(request).await
}

pub(crate) async fn not_found() -> ApiError {
    ApiError::not_found("no such route")
}

pub(crate) async fn method_not_allowed() -> ApiError {
    ApiError::method_not_allowed()
}

/// Headers every response carries.
pub(crate) async fn security_headers(mut response: Response) -> Response {
    let h = response.headers_mut();
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    response
}
