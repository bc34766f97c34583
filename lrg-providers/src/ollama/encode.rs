//! Request encoding for Ollama's native `/api/chat`: a pure function from a
//! [`TurnRequest`] to the JSON body.

use serde_json::{Map, Value, json};

use super::OllamaConfig;
use crate::openai::{decimal, function_tool, system_with_instructions, without_meta};
use crate::{Image, Message, Part, ProviderError, Role, ToolResult, ToolSpec, TurnRequest};

/// Ollama's answer budget when neither the request nor the config sets one:
/// a server's window may be small.
pub const DEFAULT_NUM_PREDICT: u32 = 2_048;

/// The `/api/chat` body for one streamed turn.
///
/// A typed answer's schema goes in `format`, but only on a request without
/// tools: Ollama turns `format` into a grammar over the whole answer, so a
/// model under it can no longer call a tool (ollama/ollama#13750). With
/// tools, and where tools go as text, the schema's instructions follow the
/// system prompt instead.
pub fn encode(request: &TurnRequest, config: &OllamaConfig) -> Result<Value, ProviderError> {
    let schema = request.output.as_ref();
    let format = schema.filter(|_| {
        request.tools.is_empty() && !crate::openai::tools_as_text(config.tool_mode, &config.model)
    });
    let system = match (schema, format) {
        (Some(schema), None) => Some(system_with_instructions(request.system.as_deref(), schema)),
        _ => request.system.clone().filter(|s| !s.is_empty()),
    };
    let mut messages = Vec::with_capacity(request.messages.len() + 1);
    if let Some(system) = system {
        messages.push(json!({"role": "system", "content": system}));
    }
    // Images a tool returned follow the tool messages in a user message, the
    // one place every model template renders them.
    let mut pending = Pending::default();
    for message in &request.messages {
        match message.role {
            Role::Assistant => {
                pending.flush(&mut messages);
                messages.push(assistant_message(message));
            }
            Role::User | Role::Tool => {
                for part in &message.parts {
                    match part {
                        Part::ToolResult(result) => {
                            messages.push(tool_message(result, &mut pending))
                        }
                        Part::Text { text } => pending.texts.push(text.clone()),
                        Part::Image(image) => pending.images.push(base64(image)),
                        Part::Reasoning { .. } | Part::ToolCall(_) | Part::Native(_) => {}
                    }
                }
                if message.role == Role::User {
                    pending.flush(&mut messages);
                }
            }
        }
    }
    pending.flush(&mut messages);

    let mut options = Map::new();
    let settings = &request.settings;
    let budget = settings
        .max_tokens
        .or(config.max_tokens)
        .unwrap_or(DEFAULT_NUM_PREDICT);
    options.insert("num_predict".into(), Value::from(budget));
    // Ollama runs a model at its own small default context (2,048 to 4,096
    // tokens) unless told, and then silently cuts the tool list and history:
    // send the window the session fits the conversation into.
    if let Some(window) = config.context_window {
        options.insert("num_ctx".into(), Value::from(window));
    }
    if let Some(t) = settings.temperature.or(config.temperature) {
        options.insert("temperature".into(), Value::from(decimal(t)));
    }
    if let Some(p) = settings.top_p {
        options.insert("top_p".into(), Value::from(decimal(p)));
    }
    if let Some(k) = settings.top_k {
        options.insert("top_k".into(), Value::from(k));
    }
    if let Some(seed) = settings.seed {
        options.insert("seed".into(), Value::from(seed));
    }
    if !settings.stop.is_empty() {
        options.insert("stop".into(), json!(settings.stop));
    }
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
    if let Some(schema) = format {
        body.insert("format".into(), without_meta(schema.schema()));
    }
    body.insert("stream".into(), Value::Bool(true));
    if let Some(think) = config.think {
        body.insert("think".into(), Value::Bool(think));
    }
    body.insert("options".into(), Value::Object(options));
    Ok(Value::Object(body))
}

/// Text and images waiting to go out as one user message.
#[derive(Default)]
struct Pending {
    texts: Vec<String>,
    images: Vec<String>,
}

impl Pending {
    fn flush(&mut self, messages: &mut Vec<Value>) {
        if self.texts.is_empty() && self.images.is_empty() {
            return;
        }
        let mut message = Map::new();
        message.insert("role".into(), Value::from("user"));
        message.insert("content".into(), Value::String(self.texts.join("\n")));
        if !self.images.is_empty() {
            message.insert(
                "images".into(),
                Value::from(std::mem::take(&mut self.images)),
            );
        }
        self.texts.clear();
        messages.push(Value::Object(message));
    }
}

fn base64(image: &Image) -> String {
    image.base64()
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
    let mut out = Map::new();
    out.insert("role".into(), Value::from("assistant"));
    out.insert("content".into(), Value::String(texts.join("\n")));
    let calls: Vec<Value> = message
        .tool_calls()
        .map(|c| json!({"id": c.id, "function": {"name": c.name, "arguments": c.arguments}}))
        .collect();
    if !calls.is_empty() {
        out.insert("tool_calls".into(), Value::Array(calls));
    }
    Value::Object(out)
}

fn tool_message(result: &ToolResult, pending: &mut Pending) -> Value {
    let images: Vec<String> = result
        .parts
        .iter()
        .filter_map(|p| match p {
            Part::Image(i) => Some(base64(i)),
            _ => None,
        })
        .collect();
    let mut text = result.text_content();
    if !images.is_empty() {
        pending.texts.push(format!(
            "Image{} returned by {} (call {}):",
            if images.len() == 1 { "" } else { "s" },
            result.name,
            result.call_id
        ));
        let note = format!(
            "({} image(s) attached in the next user message)",
            images.len()
        );
        text = if text.is_empty() {
            note
        } else {
            format!("{text}\n{note}")
        };
        pending.images.extend(images);
    }
    if text.is_empty() {
        text = "(no output)".into();
    }
    if result.is_error {
        text = format!("Error: {text}");
    }
    json!({"role": "tool", "tool_name": result.name, "tool_call_id": result.call_id, "content": text})
}

/// Ollama takes OpenAI-style function specs, so the schema is shaped as for
/// OpenAI (refs inlined, no top-level `oneOf`/`anyOf`/`allOf`).
fn tool_spec(tool: &ToolSpec) -> Result<Value, ProviderError> {
    function_tool(tool, " to Ollama")
}
