//! Request encoding for the Responses API: a pure function from a
//! [`TurnRequest`] to the JSON body of `POST /responses`.
//!
//! The conversation becomes a list of input items: user messages
//! (`input_text`, `input_image`), the assistant's own items (its reasoning
//! items exactly as received, `output_text` messages, `function_call`s) and
//! `function_call_output`s. By default nothing is stored on the server
//! (`store: false`) and reasoning items carry their `encrypted_content`, so a
//! reasoning model keeps its chain of thought across tool calls statelessly.

use serde_json::{Map, Value, json};

use super::{RESPONSE_ID, ResponsesConfig};
use crate::generation::dropped;
use crate::images::{CLOUD_IMAGE_LIMIT, limit_images};
use crate::openai::{decimal, function_tool};
use crate::typed::StrictTarget;
use crate::{
    Image, Message, NativePart, Part, ProviderError, Role, ToolCall, ToolResult, ToolSpec,
    TurnRequest,
};

/// Text sent for a call the history has no result for: the API refuses a
/// `function_call` without its output.
const MISSING_RESULT: &str = "No result was recorded for this call.";

/// The Responses body for one streamed turn. A typed answer's schema goes
/// in `text.format` (json_schema, shaped to OpenAI's strict rules).
pub fn encode(request: &TurnRequest, config: &ResponsesConfig) -> Result<Value, ProviderError> {
    let history = limit_images(&request.messages, CLOUD_IMAGE_LIMIT);
    let reasoning = config.reasons();
    let mut input = Input {
        items: Vec::with_capacity(history.len() + 1),
        open: Vec::new(),
        provider: config.host.provider,
        model: &config.model,
        keep_ids: config.previous_response_id,
    };
    // With `previous_response_id` the server holds everything up to the last
    // response it stored: only what follows is sent.
    let previous = config
        .previous_response_id
        .then(|| last_response(&history, config.host.provider, &config.model))
        .flatten();
    let start = match &previous {
        Some((at, _)) => {
            input.open = history[*at].tool_calls().collect();
            at + 1
        }
        None => 0,
    };
    for message in &history[start..] {
        input.message(message);
    }
    input.close_open();

    let mut body = Map::new();
    body.insert("model".into(), Value::String(config.model.clone()));
    if let Some(system) = request.system.as_deref().filter(|s| !s.is_empty()) {
        body.insert("instructions".into(), Value::String(system.to_string()));
    }
    body.insert("input".into(), Value::Array(input.items));
    if !request.tools.is_empty() {
        let tools = request
            .tools
            .iter()
            .map(tool_spec)
            .collect::<Result<Vec<_>, _>>()?;
        body.insert("tools".into(), Value::Array(tools));
    }
    if let Some(schema) = &request.output {
        // Strict mode, as for Chat Completions; the answer comes as
        // ordinary output text. Tools may still be called first.
        let strict = schema.strict(StrictTarget::OpenAi);
        body.insert(
            "text".into(),
            json!({"format": {
                "type": "json_schema",
                "name": schema.name(),
                "schema": strict.schema,
                "strict": strict.strict,
            }}),
        );
    }
    body.insert("stream".into(), Value::Bool(true));
    body.insert("store".into(), Value::Bool(config.previous_response_id));
    if let Some((_, id)) = previous {
        body.insert("previous_response_id".into(), Value::String(id));
    }
    if reasoning {
        let mut settings = Map::new();
        if let Some(effort) = config.reasoning_effort {
            settings.insert("effort".into(), Value::from(effort.as_str()));
        }
        if config.host.reasoning_summary {
            settings.insert("summary".into(), Value::from("auto"));
        }
        if !settings.is_empty() {
            body.insert("reasoning".into(), Value::Object(settings));
        }
        if !config.previous_response_id {
            body.insert("include".into(), json!(["reasoning.encrypted_content"]));
        }
    }
    let settings = &request.settings;
    let max_tokens = settings
        .max_tokens
        .or(config.max_tokens)
        .unwrap_or(config.host.default_max_tokens);
    body.insert("max_output_tokens".into(), Value::from(max_tokens));
    let temperature = settings.temperature.or(config.temperature);
    // Reasoning models reject sampling settings.
    if reasoning {
        dropped(
            config.host.name,
            &[
                ("temperature", temperature.is_some()),
                ("top_p", settings.top_p.is_some()),
            ],
        );
    } else {
        if let Some(t) = temperature {
            body.insert("temperature".into(), Value::from(decimal(t)));
        }
        if let Some(p) = settings.top_p {
            body.insert("top_p".into(), Value::from(decimal(p)));
        }
    }
    // The Responses API has neither a seed, a top-k nor stop sequences.
    dropped(
        config.host.name,
        &[
            ("seed", settings.seed.is_some()),
            ("top_k", settings.top_k.is_some()),
            ("stop", !settings.stop.is_empty()),
        ],
    );
    Ok(Value::Object(body))
}

/// The last assistant message carrying a stored response id of this
/// provider and model: its index and the id.
fn last_response(history: &[Message], provider: &str, model: &str) -> Option<(usize, String)> {
    history.iter().enumerate().rev().find_map(|(at, m)| {
        if m.role != Role::Assistant {
            return None;
        }
        m.parts.iter().find_map(|p| match p {
            Part::Native(n) if n.belongs_to(provider, model) && is_response_id(n) => n
                .value
                .get("id")
                .and_then(Value::as_str)
                .map(|id| (at, id.to_string())),
            _ => None,
        })
    })
}

fn is_response_id(native: &NativePart) -> bool {
    native.value.get("type").and_then(Value::as_str) == Some(RESPONSE_ID)
}

/// The input items being built, with the calls still waiting for a result.
struct Input<'a> {
    items: Vec<Value>,
    open: Vec<&'a ToolCall>,
    provider: &'a str,
    model: &'a str,
    /// Whether item ids are sent (only a server that stored them knows them).
    keep_ids: bool,
}

impl<'a> Input<'a> {
    fn message(&mut self, message: &'a Message) {
        match message.role {
            Role::Assistant => {
                self.close_open();
                self.assistant(message);
                self.open = message.tool_calls().collect();
            }
            Role::User | Role::Tool => {
                let mut content = Vec::new();
                for part in &message.parts {
                    match part {
                        Part::ToolResult(result) => {
                            match self.open.iter().position(|c| c.id == result.call_id) {
                                Some(at) => {
                                    self.open.remove(at);
                                    self.items.push(function_output(result));
                                }
                                None => orphan_result(result, &mut content),
                            }
                        }
                        Part::Text { text } => content.push(input_text(text)),
                        Part::Image(image) => content.push(input_image(image)),
                        // Reasoning is the model's own; tool calls belong to
                        // assistant messages; native parts are the assistant's.
                        Part::Reasoning { .. } | Part::ToolCall(_) | Part::Native(_) => {}
                    }
                }
                // A user message ends the calls' turn; so does text that
                // must follow their outputs.
                if message.role == Role::User || !content.is_empty() {
                    self.close_open();
                }
                if !content.is_empty() {
                    self.items
                        .push(json!({"role": "user", "content": Value::Array(content)}));
                }
            }
        }
    }

    /// The assistant's items in the order it produced them: its reasoning
    /// items as received, its text as `output_text`, its calls.
    fn assistant(&mut self, message: &Message) {
        let mut text: Vec<Value> = Vec::new();
        for part in &message.parts {
            match part {
                Part::Text { text: t } if !t.is_empty() => {
                    text.push(json!({"type": "output_text", "text": t}))
                }
                Part::ToolCall(call) => {
                    self.flush_text(&mut text);
                    self.items.push(json!({
                        "type": "function_call",
                        "call_id": call.id,
                        "name": call.name,
                        "arguments": call.arguments.to_string(),
                    }));
                }
                Part::Native(native)
                    if native.belongs_to(self.provider, self.model) && !is_response_id(native) =>
                {
                    self.flush_text(&mut text);
                    self.items.push(self.native_item(native));
                }
                _ => {}
            }
        }
        self.flush_text(&mut text);
    }

    /// A native item sent back unchanged, except that without a stored
    /// response its `id` refers to nothing the server keeps (the API then
    /// answers "item not found"): the item's content, `encrypted_content`
    /// included, is what carries it.
    fn native_item(&self, native: &NativePart) -> Value {
        match &native.value {
            Value::Object(map) if !self.keep_ids => Value::Object(
                map.iter()
                    .filter(|(k, _)| *k != "id")
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
            ),
            other => other.clone(),
        }
    }

    fn flush_text(&mut self, text: &mut Vec<Value>) {
        if !text.is_empty() {
            let content = std::mem::take(text);
            self.items
                .push(json!({"type": "message", "role": "assistant", "content": content}));
        }
    }

    fn close_open(&mut self) {
        for call in self.open.drain(..) {
            self.items.push(json!({
                "type": "function_call_output",
                "call_id": call.id,
                "output": MISSING_RESULT,
            }));
        }
    }
}

/// A result as a `function_call_output`: its text alone as a string, or
/// `input_text` and `input_image` parts when the tool returned images.
fn function_output(result: &ToolResult) -> Value {
    let mut text = result.text_content();
    if text.is_empty() && !has_images(result) {
        text = "(no output)".into();
    }
    if result.is_error {
        text = format!("Error: {text}");
    }
    let output = if has_images(result) {
        let mut parts = Vec::new();
        if !text.is_empty() {
            parts.push(input_text(&text));
        }
        parts.extend(result.parts.iter().filter_map(|p| match p {
            Part::Image(image) => Some(input_image(image)),
            _ => None,
        }));
        Value::Array(parts)
    } else {
        Value::String(text)
    };
    json!({"type": "function_call_output", "call_id": result.call_id, "output": output})
}

fn has_images(result: &ToolResult) -> bool {
    result.parts.iter().any(|p| matches!(p, Part::Image(_)))
}

/// A result whose call is not in the assistant message before it (a trimmed
/// history): the API would refuse it as an output, so it goes as user text.
fn orphan_result(result: &ToolResult, content: &mut Vec<Value>) {
    let mut text = format!(
        "Result of {} (call {}): {}",
        result.name,
        result.call_id,
        result.text_content()
    );
    if result.is_error {
        text.push_str(" (the call failed)");
    }
    content.push(input_text(&text));
    for part in &result.parts {
        if let Part::Image(image) = part {
            content.push(input_image(image));
        }
    }
}

fn input_text(text: &str) -> Value {
    json!({"type": "input_text", "text": text})
}

fn input_image(image: &Image) -> Value {
    json!({
        "type": "input_image",
        "image_url": format!("data:{};base64,{}", image.mime, image.base64()),
        "detail": "auto",
    })
}

/// `{"type": "function", "name", "description", "parameters"}`: the flat
/// form the Responses API takes, from the Chat Completions one.
fn tool_spec(tool: &ToolSpec) -> Result<Value, ProviderError> {
    let mut nested = function_tool(tool, "")?;
    let mut flat = Map::new();
    flat.insert("type".into(), Value::from("function"));
    if let Some(Value::Object(function)) = nested.get_mut("function").map(Value::take) {
        flat.extend(function);
    }
    // Strict mode would demand every property be required.
    flat.insert("strict".into(), Value::Bool(false));
    Ok(Value::Object(flat))
}
