//! Request encoding for Chat Completions: a pure function from a
//! [`TurnRequest`] to the JSON body.

use std::borrow::Cow;

use serde_json::{Map, Value, json};

use super::{OpenAiConfig, SchemaField, output};
use crate::generation::{capped_stop, dropped};
use crate::images::limit_images;
use crate::schema::{SchemaTarget, portable_tool_schema};
use crate::{
    Image, Message, Part, ProviderError, Role, ToolCall, ToolResult, ToolSpec, TurnRequest,
};

/// The Chat Completions body for one streamed turn.
///
/// A typed answer's schema ([`TurnRequest::output`]) goes where the
/// dialect's [`SchemaField`] says; where it cannot go (that field is
/// `Prompted`, or tools are offered to a server that cannot hold both), its
/// instructions follow the system prompt instead.
pub fn encode(request: &TurnRequest, config: &OpenAiConfig) -> Result<Value, ProviderError> {
    encode_for(request, config, config.dialect.schema_field)
}

/// [`encode`] with the schema sent through `field` (`Prompted` for a server
/// found to refuse the dialect's own).
pub(crate) fn encode_for(
    request: &TurnRequest,
    config: &OpenAiConfig,
    field: SchemaField,
) -> Result<Value, ProviderError> {
    let dialect = &config.dialect;
    let history = match dialect.image_limit {
        Some(keep) => limit_images(&request.messages, keep),
        None => Cow::Borrowed(request.messages.as_slice()),
    };
    let schema = output::carried(request, field, dialect.schema_with_tools);

    let mut messages = Vec::with_capacity(history.len() + 1);
    if let Some(system) = output::system_prompt(request, schema) {
        messages.push(json!({"role": "system", "content": system}));
    }
    // A tool message carries text only: images a tool returned wait here and
    // follow in a user message right after the tool messages.
    let mut pending: Vec<Value> = Vec::new();
    // Calls of the last assistant message still waiting for their result:
    // the API refuses a request where one has none.
    let mut open: Vec<&ToolCall> = Vec::new();
    for message in history.iter() {
        match message.role {
            Role::Assistant => {
                close_open(&mut open, &mut messages);
                flush_pending(&mut pending, &mut messages);
                messages.push(assistant_message(message));
                open = message.tool_calls().collect();
            }
            Role::User | Role::Tool => {
                for part in &message.parts {
                    match part {
                        Part::ToolResult(result) => {
                            match open.iter().position(|c| c.id == result.call_id) {
                                Some(at) => {
                                    open.remove(at);
                                    messages.push(tool_message(result, &mut pending));
                                }
                                None => orphan_result(result, &mut pending),
                            }
                        }
                        Part::Text { text } => pending.push(text_part(text)),
                        Part::Image(image) => pending.push(image_part(image)),
                        // Reasoning is not sent back; tool calls belong to
                        // assistant messages; these servers have no native parts.
                        Part::Reasoning { .. } | Part::ToolCall(_) | Part::Native(_) => {}
                    }
                }
                if message.role == Role::User {
                    close_open(&mut open, &mut messages);
                    flush_pending(&mut pending, &mut messages);
                }
            }
        }
    }
    close_open(&mut open, &mut messages);
    flush_pending(&mut pending, &mut messages);

    let mut body = Map::new();
    body.insert("model".into(), Value::String(config.model.clone()));
    body.insert("messages".into(), Value::Array(messages));
    if !request.tools.is_empty() {
        let tools = request
            .tools
            .iter()
            .map(tool_spec)
            .collect::<Result<Vec<_>, _>>()?;
        body.insert("tools".into(), Value::Array(tools));
    }
    body.insert("stream".into(), Value::Bool(true));
    if dialect.stream_usage {
        body.insert("stream_options".into(), json!({"include_usage": true}));
    }
    let settings = &request.settings;
    let max_tokens = settings
        .max_tokens
        .or(config.max_tokens)
        .unwrap_or(dialect.default_max_tokens);
    body.insert(
        dialect.max_tokens_field.as_str().into(),
        Value::from(max_tokens),
    );
    let temperature = settings.temperature.or(config.temperature);
    if dialect.is_reasoning_model(&config.model) {
        // Reasoning models refuse sampling settings and stop sequences.
        dropped(
            dialect.name,
            &[
                ("temperature", temperature.is_some()),
                ("top_p", settings.top_p.is_some()),
                ("top_k", settings.top_k.is_some()),
                ("stop", !settings.stop.is_empty()),
            ],
        );
    } else {
        if let Some(t) = temperature {
            body.insert("temperature".into(), Value::from(decimal(t)));
        }
        if let Some(p) = settings.top_p {
            body.insert("top_p".into(), Value::from(decimal(p)));
        }
        match settings.top_k {
            Some(k) if dialect.top_k => {
                body.insert("top_k".into(), Value::from(k));
            }
            Some(_) => dropped(dialect.name, &[("top_k", true)]),
            None => {}
        }
        let stop = capped_stop(dialect.name, &settings.stop, dialect.stop_limit);
        if !stop.is_empty() {
            body.insert("stop".into(), json!(stop));
        }
    }
    if let Some(seed) = settings.seed {
        body.insert(dialect.seed_field.into(), Value::from(seed));
    }
    if let Some(schema) = schema {
        output::insert(&mut body, schema, field);
    }
    Ok(Value::Object(body))
}

/// Text sent for a call the history has no result for.
const MISSING_RESULT: &str = "No result was recorded for this call.";

fn close_open(open: &mut Vec<&ToolCall>, messages: &mut Vec<Value>) {
    for call in open.drain(..) {
        messages.push(json!({"role": "tool", "tool_call_id": call.id, "content": MISSING_RESULT}));
    }
}

/// A result whose call is not in the assistant message before it (a trimmed
/// history): the API would refuse it as a tool message, so it goes as text.
fn orphan_result(result: &ToolResult, pending: &mut Vec<Value>) {
    let mut text = format!(
        "Result of {} (call {}): {}",
        result.name,
        result.call_id,
        result.text_content()
    );
    if result.is_error {
        text.push_str(" (the call failed)");
    }
    pending.push(text_part(&text));
    for part in &result.parts {
        if let Part::Image(image) = part {
            pending.push(image_part(image));
        }
    }
}

fn flush_pending(pending: &mut Vec<Value>, messages: &mut Vec<Value>) {
    if pending.is_empty() {
        return;
    }
    let parts = std::mem::take(pending);
    messages.push(json!({"role": "user", "content": user_content(parts)}));
}

/// A plain string where the parts are all text (older servers take nothing
/// else), the array form once an image is among them.
fn user_content(parts: Vec<Value>) -> Value {
    let all_text = parts.iter().all(|p| p["type"] == "text");
    if !all_text {
        return Value::Array(parts);
    }
    let texts: Vec<&str> = parts.iter().filter_map(|p| p["text"].as_str()).collect();
    Value::String(texts.join("\n"))
}

fn text_part(text: &str) -> Value {
    json!({"type": "text", "text": text})
}

fn image_part(image: &Image) -> Value {
    json!({
        "type": "image_url",
        "image_url": {"url": format!("data:{};base64,{}", image.mime, image.base64())},
    })
}

fn assistant_message(message: &Message) -> Value {
    let texts: Vec<&str> = message
        .parts
        .iter()
        .filter_map(|p| match p {
            Part::Text { text } if !text.is_empty() => Some(text.as_str()),
            _ => None,
        })
        .collect();
    let calls: Vec<Value> = message.tool_calls().map(tool_call).collect();
    let mut out = Map::new();
    out.insert("role".into(), Value::from("assistant"));
    let content = if texts.is_empty() && !calls.is_empty() {
        Value::Null
    } else {
        Value::String(texts.join("\n"))
    };
    out.insert("content".into(), content);
    if !calls.is_empty() {
        out.insert("tool_calls".into(), Value::Array(calls));
    }
    Value::Object(out)
}

fn tool_call(call: &ToolCall) -> Value {
    json!({
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": call.arguments.to_string()},
    })
}

fn tool_message(result: &ToolResult, pending: &mut Vec<Value>) -> Value {
    let images: Vec<&Image> = result
        .parts
        .iter()
        .filter_map(|p| match p {
            Part::Image(i) => Some(i),
            _ => None,
        })
        .collect();
    let mut text = result.text_content();
    if !images.is_empty() {
        pending.push(text_part(&format!(
            "Image{} returned by {} (call {}):",
            if images.len() == 1 { "" } else { "s" },
            result.name,
            result.call_id
        )));
        pending.extend(images.iter().map(|i| image_part(i)));
        let note = format!(
            "({} image(s) attached in the next user message)",
            images.len()
        );
        text = if text.is_empty() {
            note
        } else {
            format!("{text}\n{note}")
        };
    }
    if text.is_empty() {
        text = "(no output)".into();
    }
    if result.is_error {
        text = format!("Error: {text}");
    }
    json!({"role": "tool", "tool_call_id": result.call_id, "content": text})
}

fn tool_spec(tool: &ToolSpec) -> Result<Value, ProviderError> {
    function_tool(tool, "")
}

/// `tool` as a `{"type": "function", ...}` spec, the form OpenAI-style APIs
/// (Ollama included) take. `destination` (e.g. `" to Ollama"`) completes the
/// error message when the schema cannot be shaped.
pub(crate) fn function_tool(tool: &ToolSpec, destination: &str) -> Result<Value, ProviderError> {
    let mut function = Map::new();
    function.insert("name".into(), Value::String(tool.name.clone()));
    if !tool.description.is_empty() {
        function.insert(
            "description".into(),
            Value::String(tool.description.clone()),
        );
    }
    function.insert("parameters".into(), tool_parameters(tool, destination)?);
    Ok(json!({"type": "function", "function": function}))
}

/// The tool's schema in a form the API accepts (refs inlined, no top-level
/// `oneOf`/`anyOf`/`allOf`).
fn tool_parameters(tool: &ToolSpec, destination: &str) -> Result<Value, ProviderError> {
    portable_tool_schema(&tool.input_schema, SchemaTarget::OpenAi).map_err(|e| {
        ProviderError::BadRequest {
            message: format!(
                "the input schema of tool `{}` cannot be sent{destination}: {e}",
                tool.name
            ),
        }
    })
}

/// An `f32` setting as the decimal a person wrote (0.7, not 0.699999988).
pub(crate) fn decimal(value: f32) -> f64 {
    value.to_string().parse().unwrap_or(f64::from(value))
}
