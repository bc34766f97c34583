//! [`TurnRequest`] → Messages API request body. Pure: no I/O, easy to snapshot.

use serde_json::{Map, Value, json};

use super::answer::{self, Plan};
use super::{AnthropicConfig, PROVIDER};
use crate::generation::dropped;
use crate::images::{CLOUD_IMAGE_LIMIT, IMAGE_PLACEHOLDER, limit_images};
use crate::openai::decimal;
use crate::schema::{SchemaTarget, portable_tool_schema};
use crate::{Image, Message, Part, ProviderError, Role, ToolResult, TurnRequest};

/// Anthropic's minimum extended-thinking budget.
const MIN_THINKING_BUDGET: u32 = 1_024;

/// Text sent in place of a result the history lacks, so every `tool_use`
/// still has its `tool_result` (the API refuses a request otherwise).
const MISSING_RESULT: &str = "No result was recorded for this call.";

/// The Messages API body for `request`, streamed.
///
/// - Reasoning parts are dropped; this model's own thinking blocks travel as
///   [`crate::NativePart`]s and go back verbatim, thinking first.
/// - Native parts of another provider or model are dropped.
/// - Only the newest [`CLOUD_IMAGE_LIMIT`] images stay attached.
/// - Tool results become `tool_result` blocks (text and images) in a user
///   message, each paired with its call.
/// - Prompt caching marks the last tool, the system prompt and the last block
///   of the conversation (3 of the 4 allowed breakpoints).
/// - A typed answer goes as structured outputs (`output_config.format`) or
///   through the answer tool ([`super::ANSWER_TOOL`]).
///
/// Fails only when a tool's schema cannot be shaped for the API.
pub fn encode(request: &TurnRequest, config: &AnthropicConfig) -> Result<Value, ProviderError> {
    let settings = &request.settings;
    let answer_budget = settings.max_tokens.unwrap_or(config.max_tokens).max(1);
    let thinking = config.thinking_budget.map(|b| b.max(MIN_THINKING_BUDGET));
    let mut body = Map::new();
    body.insert("model".into(), json!(config.model));
    // Thinking counts against max_tokens; add it so the answer keeps its budget.
    let max_tokens = answer_budget.saturating_add(thinking.unwrap_or(0));
    body.insert("max_tokens".into(), json!(max_tokens));
    body.insert("stream".into(), json!(true));
    let cache = config.prompt_caching;
    let answer = answer::plan(request, config);

    let system = request.system.as_deref().filter(|s| !s.trim().is_empty());
    let system = match &answer {
        Some(Plan::Tool {
            name,
            forced: false,
            ..
        }) => {
            let note = answer::system_note(name);
            Some(match system {
                Some(system) => format!("{system}\n\n{note}"),
                None => note,
            })
        }
        _ => system.map(str::to_owned),
    };
    if let Some(system) = system {
        let mut block = json!({"type": "text", "text": system});
        if cache {
            block["cache_control"] = ephemeral();
        }
        body.insert("system".into(), json!([block]));
    }

    let limited = limit_images(&request.messages, CLOUD_IMAGE_LIMIT);
    let mut messages = encode_messages(&limited, &config.model);
    if cache {
        mark_last_block(&mut messages);
    }
    body.insert("messages".into(), Value::Array(messages));

    let mut tools = Vec::with_capacity(request.tools.len() + 1);
    for t in request.tools.iter() {
        let mut tool =
            json!({"name": t.name, "input_schema": tool_schema(&t.name, &t.input_schema)?});
        if !t.description.is_empty() {
            tool["description"] = json!(t.description);
        }
        tools.push(tool);
    }
    match &answer {
        Some(Plan::Native(schema)) => {
            body.insert(
                "output_config".into(),
                json!({"format": {"type": "json_schema", "schema": schema}}),
            );
        }
        Some(Plan::Tool {
            name,
            schema,
            forced,
        }) => {
            tools.push(answer::tool(name, schema));
            if *forced {
                body.insert("tool_choice".into(), json!({"type": "tool", "name": name}));
            }
        }
        None => {}
    }
    if !tools.is_empty() {
        if let Some(last) = tools.last_mut().filter(|_| cache) {
            last["cache_control"] = ephemeral();
        }
        body.insert("tools".into(), Value::Array(tools));
    }

    let temperature = settings.temperature.or(config.temperature);
    match thinking {
        // The API rejects sampling settings with thinking on.
        Some(budget) => {
            body.insert(
                "thinking".into(),
                json!({"type": "enabled", "budget_tokens": budget}),
            );
            dropped(
                "Anthropic (thinking on)",
                &[
                    ("temperature", temperature.is_some()),
                    ("top_p", settings.top_p.is_some()),
                    ("top_k", settings.top_k.is_some()),
                ],
            );
        }
        None => {
            if let Some(t) = temperature {
                body.insert("temperature".into(), json!(decimal(t)));
            }
            // Newer models refuse a temperature and a top_p together; the
            // temperature is the one people mean.
            match settings.top_p {
                Some(_) if temperature.is_some() => dropped("Anthropic", &[("top_p", true)]),
                Some(p) => {
                    body.insert("top_p".into(), json!(decimal(p)));
                }
                None => {}
            }
            if let Some(k) = settings.top_k {
                body.insert("top_k".into(), json!(k));
            }
        }
    }
    if !settings.stop.is_empty() {
        body.insert("stop_sequences".into(), json!(settings.stop));
    }
    dropped("Anthropic", &[("seed", settings.seed.is_some())]);
    Ok(Value::Object(body))
}

fn ephemeral() -> Value {
    json!({"type": "ephemeral"})
}

/// The tool's schema in a form the API accepts (refs inlined, no top-level
/// `oneOf`/`anyOf`/`allOf`, an object root).
fn tool_schema(name: &str, schema: &Value) -> Result<Value, ProviderError> {
    portable_tool_schema(schema, SchemaTarget::Anthropic).map_err(|e| ProviderError::BadRequest {
        message: format!("the input schema of tool `{name}` cannot be sent to Anthropic: {e}"),
    })
}

/// One API message under construction.
struct Turn {
    role: &'static str,
    content: Vec<Value>,
}

fn encode_messages(messages: &[Message], model: &str) -> Vec<Value> {
    let mut turns: Vec<Turn> = Vec::new();
    for message in messages {
        let (role, content) = match message.role {
            Role::Assistant => ("assistant", assistant_content(&message.parts, model)),
            Role::User | Role::Tool => ("user", user_content(&message.parts)),
        };
        if content.is_empty() {
            continue;
        }
        // The API wants user and assistant to alternate: merge neighbours.
        match turns.last_mut() {
            Some(last) if last.role == role => last.content.extend(content),
            _ => turns.push(Turn { role, content }),
        }
    }
    pair_tool_results(&mut turns);
    turns
        .into_iter()
        .map(|t| json!({"role": t.role, "content": t.content}))
        .collect()
}

fn assistant_content(parts: &[Part], model: &str) -> Vec<Value> {
    let mut content = Vec::new();
    for part in parts {
        match part {
            Part::Text { text } if !text.is_empty() => {
                content.push(json!({"type": "text", "text": text}))
            }
            Part::ToolCall(call) => content.push(json!({
                "type": "tool_use",
                "id": call.id,
                "name": call.name,
                "input": arguments_object(&call.arguments),
            })),
            Part::Native(native) if native.belongs_to(PROVIDER, model) => {
                content.push(native.value.clone())
            }
            // The API takes no images from the assistant.
            Part::Image(_) => content.push(json!({"type": "text", "text": IMAGE_PLACEHOLDER})),
            // Reasoning travels only as this model's own thinking blocks.
            _ => {}
        }
    }
    thinking_first(&mut content);
    content
}

/// Thinking blocks lead an assistant turn. Those that came after a tool use
/// (interleaved thinking) keep their place; the rest move to the front, in order.
fn thinking_first(content: &mut Vec<Value>) {
    let first_tool = content
        .iter()
        .position(|b| block_type(b) == Some("tool_use"))
        .unwrap_or(content.len());
    let (head, tail) = content.split_at(first_tool);
    let (mut thinking, rest): (Vec<Value>, Vec<Value>) =
        head.iter().cloned().partition(is_thinking);
    thinking.extend(rest);
    thinking.extend(tail.iter().cloned());
    *content = thinking;
}

fn is_thinking(block: &Value) -> bool {
    matches!(block_type(block), Some("thinking" | "redacted_thinking"))
}

fn block_type(block: &Value) -> Option<&str> {
    block.get("type").and_then(Value::as_str)
}

fn user_content(parts: &[Part]) -> Vec<Value> {
    let mut content = Vec::new();
    for part in parts {
        match part {
            Part::Text { text } if !text.is_empty() => {
                content.push(json!({"type": "text", "text": text}))
            }
            Part::Image(image) => content.push(image_block(image)),
            Part::ToolResult(result) => content.push(tool_result_block(result)),
            _ => {}
        }
    }
    content
}

fn image_block(image: &Image) -> Value {
    json!({
        "type": "image",
        "source": {"type": "base64", "media_type": image.mime, "data": image.base64()},
    })
}

fn tool_result_block(result: &ToolResult) -> Value {
    let mut inner = Vec::new();
    for part in &result.parts {
        match part {
            Part::Text { text } if !text.is_empty() => {
                inner.push(json!({"type": "text", "text": text}))
            }
            Part::Image(image) => inner.push(image_block(image)),
            _ => {}
        }
    }
    let mut block = json!({"type": "tool_result", "tool_use_id": result.call_id});
    if !inner.is_empty() {
        block["content"] = Value::Array(inner);
    }
    if result.is_error {
        block["is_error"] = json!(true);
    }
    block
}

/// Every `tool_use` gets a `tool_result` in the next user message (tool results
/// first there, in call order); a result whose call is not in the assistant
/// message just before becomes plain text, since the API refuses an unpaired
/// `tool_result`.
fn pair_tool_results(turns: &mut Vec<Turn>) {
    let mut i = 0;
    while i < turns.len() {
        let has_calls = turns[i].role == "assistant" && !call_ids(&turns[i]).is_empty();
        if has_calls && turns.get(i + 1).is_none_or(|t| t.role != "user") {
            turns.insert(
                i + 1,
                Turn {
                    role: "user",
                    content: Vec::new(),
                },
            );
        }
        i += 1;
    }
    for i in 0..turns.len() {
        if turns[i].role != "user" {
            continue;
        }
        let calls = match i.checked_sub(1).map(|p| &turns[p]) {
            Some(prev) if prev.role == "assistant" => call_ids(prev),
            _ => Vec::new(),
        };
        let content = std::mem::take(&mut turns[i].content);
        turns[i].content = pair_with(content, &calls);
    }
}

fn call_ids(turn: &Turn) -> Vec<String> {
    turn.content
        .iter()
        .filter(|b| block_type(b) == Some("tool_use"))
        .filter_map(|b| b.get("id").and_then(Value::as_str).map(str::to_string))
        .collect()
}

fn pair_with(content: Vec<Value>, calls: &[String]) -> Vec<Value> {
    let mut results: Vec<Option<Value>> = vec![None; calls.len()];
    let mut others = Vec::new();
    for block in content {
        if block_type(&block) != Some("tool_result") {
            others.push(block);
            continue;
        }
        let id = block
            .get("tool_use_id")
            .and_then(Value::as_str)
            .unwrap_or_default();
        match calls.iter().position(|c| c == id) {
            Some(at) if results[at].is_none() => results[at] = Some(block),
            _ => others.extend(orphan_as_text(&block)),
        }
    }
    let mut out: Vec<Value> = results
        .into_iter()
        .zip(calls)
        .map(|(result, call)| {
            result.unwrap_or_else(|| {
                json!({
                    "type": "tool_result",
                    "tool_use_id": call,
                    "content": [{"type": "text", "text": MISSING_RESULT}],
                    "is_error": true,
                })
            })
        })
        .collect();
    out.extend(others);
    out
}

/// A `tool_result` without its call, as text (and its images) the model can read.
fn orphan_as_text(block: &Value) -> Vec<Value> {
    let id = block
        .get("tool_use_id")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let mut text = format!("Result of tool call {id}:");
    let mut images = Vec::new();
    for inner in block
        .get("content")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        match block_type(inner) {
            Some("text") => {
                text.push('\n');
                text.push_str(
                    inner
                        .get("text")
                        .and_then(Value::as_str)
                        .unwrap_or_default(),
                );
            }
            Some("image") => images.push(inner.clone()),
            _ => {}
        }
    }
    let mut out = vec![json!({"type": "text", "text": text})];
    out.extend(images);
    out
}

/// The API wants `input` to be an object.
fn arguments_object(arguments: &Value) -> Value {
    match arguments {
        Value::Object(_) => arguments.clone(),
        Value::Null => json!({}),
        Value::String(s) => match serde_json::from_str::<Value>(s) {
            Ok(v @ Value::Object(_)) => v,
            _ => json!({"input": s}),
        },
        other => json!({"input": other}),
    }
}

/// Cache the whole conversation: mark its last block that may carry a
/// breakpoint (thinking blocks cannot).
fn mark_last_block(messages: &mut [Value]) {
    let Some(content) = messages
        .last_mut()
        .and_then(|m| m.get_mut("content"))
        .and_then(Value::as_array_mut)
    else {
        return;
    };
    if let Some(block) = content.iter_mut().rev().find(|b| !is_thinking(b)) {
        block["cache_control"] = ephemeral();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ApiKey, NativePart, ToolCall};

    fn config() -> AnthropicConfig {
        AnthropicConfig::new("claude-test", ApiKey::new("k"))
    }

    fn call(id: &str) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: "look".into(),
            arguments: json!({"q": id}),
        }
    }

    #[test]
    fn thinking_goes_first_and_foreign_native_is_dropped() {
        let thinking = json!({"type": "thinking", "thinking": "hm", "signature": "sig"});
        let msg = Message {
            role: Role::Assistant,
            parts: vec![
                Part::reasoning("hm"),
                Part::text("Let me look."),
                Part::Native(NativePart {
                    provider: "anthropic".into(),
                    model: "claude-test".into(),
                    value: thinking.clone(),
                }),
                Part::Native(NativePart {
                    provider: "anthropic".into(),
                    model: "other".into(),
                    value: json!({"type": "thinking"}),
                }),
                Part::Native(NativePart {
                    provider: "gemini".into(),
                    model: "claude-test".into(),
                    value: json!({"x": 1}),
                }),
                Part::ToolCall(call("a")),
            ],
        };
        let req = TurnRequest {
            messages: vec![
                Message::user("hi"),
                msg,
                Message::tool_results([ToolResult::text(&call("a"), "ok", false)]),
            ]
            .into(),
            ..Default::default()
        };
        let body = encode(&req, &config()).unwrap();
        let content = &body["messages"][1]["content"];
        assert_eq!(content[0], thinking);
        assert_eq!(content[1]["type"], "text");
        assert_eq!(content[2]["type"], "tool_use");
        assert_eq!(content.as_array().map(Vec::len), Some(3));
    }

    #[test]
    fn missing_and_orphan_results_are_repaired() {
        let assistant = Message {
            role: Role::Assistant,
            parts: vec![Part::ToolCall(call("a")), Part::ToolCall(call("b"))],
        };
        let stray = ToolResult::text(&call("zzz"), "late", false);
        let req = TurnRequest {
            messages: vec![
                Message::user("go"),
                assistant,
                Message::tool_results([ToolResult::text(&call("b"), "B", false), stray]),
                Message::user("and?"),
            ]
            .into(),
            ..Default::default()
        };
        let body = encode(&req, &config()).unwrap();
        let msgs = body["messages"].as_array().cloned().unwrap_or_default();
        assert_eq!(msgs.len(), 3, "{body:#}");
        let content = msgs[2]["content"].as_array().cloned().unwrap_or_default();
        assert_eq!(content[0]["tool_use_id"], "a");
        assert_eq!(content[0]["is_error"], true);
        assert_eq!(content[1]["tool_use_id"], "b");
        assert_eq!(content[2]["type"], "text");
        assert!(
            content[2]["text"]
                .as_str()
                .unwrap_or_default()
                .contains("late")
        );
        assert_eq!(content[3]["text"], "and?");
        assert_eq!(content[3]["cache_control"]["type"], "ephemeral");
    }

    #[test]
    fn tool_schemas_lose_their_top_level_choice() {
        let tool = crate::ToolSpec {
            name: "tag".into(),
            description: "Tag photos.".into(),
            input_schema: json!({
                "type": "object",
                "properties": {"set": {"type": "string"}, "ids": {"type": "array", "items": {"type": "integer"}}},
                "oneOf": [{"required": ["set"]}, {"required": ["ids"]}]
            }),
            annotations: Default::default(),
            output_schema: None,
        };
        let req = TurnRequest {
            messages: vec![Message::user("x")].into(),
            tools: vec![tool].into(),
            ..Default::default()
        };
        let body = encode(&req, &config()).unwrap();
        let schema = &body["tools"][0]["input_schema"];
        assert!(schema.get("oneOf").is_none(), "{schema:#}");
        assert_eq!(schema["type"], "object");
        assert_eq!(body["tools"][0]["cache_control"]["type"], "ephemeral");
    }

    #[test]
    fn thinking_adds_to_budget_and_drops_temperature() {
        let mut cfg = config();
        cfg.thinking_budget = Some(100);
        let req = TurnRequest::new(vec![Message::user("x")]).settings(
            crate::GenerationSettings::new()
                .temperature(0.5)
                .top_p(0.9)
                .stop(["END"]),
        );
        let body = encode(&req, &cfg).unwrap();
        assert_eq!(body["thinking"]["budget_tokens"], 1024);
        assert_eq!(body["max_tokens"], 8192 + 1024);
        assert!(body.get("temperature").is_none());
        assert!(body.get("top_p").is_none());
        assert_eq!(body["stop_sequences"], json!(["END"]));
    }
}
