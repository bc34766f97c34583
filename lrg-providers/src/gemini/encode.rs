//! [`TurnRequest`] → `generateContent` request body. Pure: no I/O.

use serde_json::{Map, Value, json};

use super::{GeminiConfig, PROVIDER, output};
use crate::generation::capped_stop;
use crate::images::{CLOUD_IMAGE_LIMIT, IMAGE_PLACEHOLDER, limit_images};
use crate::openai::decimal;
use crate::schema::{SchemaTarget, portable_tool_schema};
use crate::{Image, Message, NativePart, Part, ProviderError, Role, ToolResult, TurnRequest};

/// Most stop sequences `generationConfig` takes.
const GEMINI_STOP_LIMIT: usize = 5;

/// Sent in place of a result the history lacks, so every call is answered.
const MISSING_RESULT: &str = "No result was recorded for this call.";

/// The `generateContent` body for `request` (the same for the streamed call).
///
/// - `systemInstruction` holds the system prompt; tools go as
///   `functionDeclarations` with `parametersJsonSchema`.
/// - Every `functionResponse` carries the id and name of its call, and the
///   images a tool returned as `inlineData` in its `parts`.
/// - Reasoning parts are dropped; this model's thought signatures go back on
///   the part they came with; other providers' and models' native parts are
///   dropped.
/// - Only the newest [`CLOUD_IMAGE_LIMIT`] images stay attached.
/// - A typed answer's schema goes in `generationConfig` on a request
///   without tools (Gemini refuses it beside function declarations), else
///   its instructions follow the system prompt.
///
/// Fails only when a tool's schema cannot be shaped for the API.
pub fn encode(request: &TurnRequest, config: &GeminiConfig) -> Result<Value, ProviderError> {
    let model = config.model_name();
    let answer = output::generation_fields(request, model);
    let mut body = Map::new();
    let limited = limit_images(&request.messages, CLOUD_IMAGE_LIMIT);
    body.insert(
        "contents".into(),
        Value::Array(encode_contents(&limited, model)),
    );

    let system = match (&request.output, &answer) {
        (Some(schema), None) => Some(crate::openai::system_with_instructions(
            request.system.as_deref(),
            schema,
        )),
        _ => request.system.clone().filter(|s| !s.trim().is_empty()),
    };
    if let Some(system) = system {
        body.insert(
            "systemInstruction".into(),
            json!({"parts": [{"text": system}]}),
        );
    }

    if !request.tools.is_empty() {
        let mut declarations = Vec::with_capacity(request.tools.len());
        for t in request.tools.iter() {
            let mut declaration = json!({"name": t.name, "parametersJsonSchema": tool_schema(&t.name, &t.input_schema)?});
            if !t.description.is_empty() {
                declaration["description"] = json!(t.description);
            }
            declarations.push(declaration);
        }
        body.insert(
            "tools".into(),
            json!([{"functionDeclarations": declarations}]),
        );
    }

    let mut generation = Map::new();
    let settings = &request.settings;
    let budget = settings.max_tokens.unwrap_or(config.max_tokens).max(1);
    generation.insert("maxOutputTokens".into(), json!(budget));
    if let Some(t) = settings.temperature.or(config.temperature) {
        generation.insert("temperature".into(), json!(decimal(t)));
    }
    if let Some(p) = settings.top_p {
        generation.insert("topP".into(), json!(decimal(p)));
    }
    if let Some(k) = settings.top_k {
        generation.insert("topK".into(), json!(k));
    }
    if let Some(seed) = settings.seed {
        // The API's seed is an int32: keep the low 31 bits, so one seed
        // still always means the same sampling.
        generation.insert("seed".into(), json!(seed & 0x7fff_ffff));
    }
    let stop = capped_stop("Gemini", &settings.stop, Some(GEMINI_STOP_LIMIT));
    if !stop.is_empty() {
        generation.insert("stopSequences".into(), json!(stop));
    }
    let thoughts = config.include_thoughts.unwrap_or_else(|| thinks(model));
    if thoughts || config.thinking_budget.is_some() {
        let mut thinking = Map::new();
        if thoughts {
            thinking.insert("includeThoughts".into(), json!(true));
        }
        if let Some(b) = config.thinking_budget {
            thinking.insert("thinkingBudget".into(), json!(b));
        }
        generation.insert("thinkingConfig".into(), Value::Object(thinking));
    }
    generation.extend(answer.unwrap_or_default());
    body.insert("generationConfig".into(), Value::Object(generation));
    Ok(Value::Object(body))
}

/// Whether a model name is one of Gemini's thinking models, which accept
/// `includeThoughts` (older ones reject it).
fn thinks(model: &str) -> bool {
    model.contains("2.5") || model.starts_with("gemini-3") || model.contains("thinking")
}

/// The tool's schema shaped for Gemini (refs inlined, only the keywords its
/// function declarations accept), then made plain JSON Schema again for
/// `parametersJsonSchema`: the OpenAPI `nullable` flag becomes a `null` type.
fn tool_schema(name: &str, schema: &Value) -> Result<Value, ProviderError> {
    let mut shaped = portable_tool_schema(schema, SchemaTarget::Gemini).map_err(|e| {
        ProviderError::BadRequest {
            message: format!("the input schema of tool `{name}` cannot be sent to Gemini: {e}"),
        }
    })?;
    nullable_to_json_schema(&mut shaped);
    Ok(shaped)
}

fn nullable_to_json_schema(node: &mut Value) {
    match node {
        Value::Object(map) => {
            if map.remove("nullable") == Some(Value::Bool(true)) {
                match map.get_mut("type") {
                    Some(Value::String(t)) => {
                        let single = std::mem::take(t);
                        map.insert("type".into(), json!([single, "null"]));
                    }
                    _ => {
                        if let Some(Value::Array(alternatives)) = map.get_mut("anyOf") {
                            alternatives.push(json!({"type": "null"}));
                        }
                    }
                }
            }
            map.values_mut().for_each(nullable_to_json_schema);
        }
        Value::Array(items) => items.iter_mut().for_each(nullable_to_json_schema),
        _ => {}
    }
}

/// One `Content` under construction.
struct Turn {
    role: &'static str,
    /// A user turn holding the function responses to the model turn before
    /// it. Kept apart from the user's own words: Gemini wants a responses turn
    /// to answer the calls and nothing else.
    responses: bool,
    parts: Vec<Value>,
}

fn encode_contents(messages: &[Message], model: &str) -> Vec<Value> {
    let mut turns: Vec<Turn> = Vec::new();
    for message in messages {
        let split: Vec<(bool, Vec<Value>)> = match message.role {
            Role::Assistant => vec![(false, model_parts(&message.parts, model))],
            Role::User | Role::Tool => {
                let (responses, others) = user_parts(&message.parts)
                    .into_iter()
                    .partition(|p: &Value| p.get("functionResponse").is_some());
                vec![(true, responses), (false, others)]
            }
        };
        let role = if message.role == Role::Assistant {
            "model"
        } else {
            "user"
        };
        for (responses, parts) in split.into_iter().filter(|(_, p)| !p.is_empty()) {
            match turns.last_mut() {
                Some(last) if last.role == role && last.responses == responses => {
                    last.parts.extend(parts)
                }
                _ => turns.push(Turn {
                    role,
                    responses,
                    parts,
                }),
            }
        }
    }
    pair_responses(&mut turns);
    turns
        .into_iter()
        .map(|t| json!({"role": t.role, "parts": t.parts}))
        .collect()
}

fn model_parts(parts: &[Part], model: &str) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::new();
    for part in parts {
        match part {
            Part::Text { text } if !text.is_empty() => out.push(json!({"text": text})),
            Part::ToolCall(call) => out.push(json!({"functionCall": {
                "id": call.id,
                "name": call.name,
                "args": arguments_object(&call.arguments),
            }})),
            Part::Native(native) if native.belongs_to(PROVIDER, model) => {
                attach_native(native, &mut out)
            }
            // The API takes no images from the model role.
            Part::Image(_) => out.push(json!({"text": IMAGE_PLACEHOLDER})),
            _ => {}
        }
    }
    out
}

/// A native part is either a whole part to send back verbatim (`{"part": ..}`:
/// thought parts and empty-text parts that carried a signature) or a
/// signature for the part just before it (`{"thoughtSignature", "on"}`).
fn attach_native(native: &NativePart, out: &mut Vec<Value>) {
    if let Some(part) = native.value.get("part") {
        out.push(part.clone());
        return;
    }
    let Some(signature) = native.value.get("thoughtSignature").and_then(Value::as_str) else {
        tracing::debug!("gemini: native part of unknown shape dropped");
        return;
    };
    let on = native
        .value
        .get("on")
        .and_then(Value::as_str)
        .unwrap_or("text");
    match out.last_mut() {
        Some(Value::Object(last))
            if last.contains_key(on) && !last.contains_key("thoughtSignature") =>
        {
            last.insert("thoughtSignature".into(), json!(signature));
        }
        // Its part is gone (edited history): Gemini only insists on
        // signatures of calls in the current turn, so dropping is safest.
        _ => tracing::debug!(on, "gemini: thought signature without its part dropped"),
    }
}

fn user_parts(parts: &[Part]) -> Vec<Value> {
    let mut out = Vec::new();
    for part in parts {
        match part {
            Part::Text { text } if !text.is_empty() => out.push(json!({"text": text})),
            Part::Image(image) => out.push(inline_data(image)),
            Part::ToolResult(result) => out.push(function_response(result)),
            _ => {}
        }
    }
    out
}

fn inline_data(image: &Image) -> Value {
    json!({"inlineData": {"mimeType": image.mime, "data": image.base64()}})
}

fn function_response(result: &ToolResult) -> Value {
    let text = result.text_content();
    let key = if result.is_error { "error" } else { "output" };
    let mut response = json!({
        "id": result.call_id,
        "name": result.name,
        "response": {key: text},
    });
    let images: Vec<Value> = result
        .parts
        .iter()
        .filter_map(|p| match p {
            Part::Image(image) => Some(inline_data(image)),
            _ => None,
        })
        .collect();
    if !images.is_empty() {
        response["parts"] = Value::Array(images);
    }
    json!({"functionResponse": response})
}

/// Each `functionCall` of a model turn is answered in the responses turn
/// right after it, in call order; a response whose call is not in the model
/// turn before becomes text, and a call without a response gets an error
/// response.
fn pair_responses(turns: &mut Vec<Turn>) {
    let mut i = 0;
    while i < turns.len() {
        let has_calls = turns[i].role == "model" && !calls_of(&turns[i]).is_empty();
        if has_calls && turns.get(i + 1).is_none_or(|t| !t.responses) {
            turns.insert(
                i + 1,
                Turn {
                    role: "user",
                    responses: true,
                    parts: Vec::new(),
                },
            );
        }
        i += 1;
    }
    for i in 0..turns.len() {
        if !turns[i].responses {
            continue;
        }
        let calls = match i.checked_sub(1).map(|p| &turns[p]) {
            Some(prev) if prev.role == "model" => calls_of(prev),
            _ => Vec::new(),
        };
        let parts = std::mem::take(&mut turns[i].parts);
        turns[i].parts = pair_with(parts, &calls);
    }
}

/// `(id, name)` of each function call in a model turn.
fn calls_of(turn: &Turn) -> Vec<(String, String)> {
    turn.parts
        .iter()
        .filter_map(|p| p.get("functionCall"))
        .map(|c| (str_at(c, "id").to_string(), str_at(c, "name").to_string()))
        .collect()
}

fn pair_with(parts: Vec<Value>, calls: &[(String, String)]) -> Vec<Value> {
    let mut responses: Vec<Option<Value>> = vec![None; calls.len()];
    let mut others = Vec::new();
    for part in parts {
        let Some(response) = part.get("functionResponse") else {
            others.push(part);
            continue;
        };
        let id = str_at(response, "id");
        match calls.iter().position(|(c, _)| c == id) {
            Some(at) if responses[at].is_none() => responses[at] = Some(part),
            _ => others.extend(orphan_as_parts(response)),
        }
    }
    let mut out: Vec<Value> = responses
        .into_iter()
        .zip(calls)
        .map(|(response, (id, name))| {
            response.unwrap_or_else(|| {
                json!({"functionResponse": {"id": id, "name": name, "response": {"error": MISSING_RESULT}}})
            })
        })
        .collect();
    out.extend(others);
    out
}

/// A response without its call, as text (and its images) the model can read.
fn orphan_as_parts(response: &Value) -> Vec<Value> {
    let body = response.get("response");
    let text = body
        .and_then(|r| r.get("output").or_else(|| r.get("error")))
        .and_then(Value::as_str)
        .unwrap_or_default();
    let mut out = vec![json!({"text": format!(
        "Result of {} (call {}):\n{text}",
        str_at(response, "name"),
        str_at(response, "id")
    )})];
    out.extend(
        response
            .get("parts")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .cloned(),
    );
    out
}

fn str_at<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or_default()
}

/// The API wants `args` to be an object.
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ApiKey, ToolCall};

    fn native(value: Value) -> Part {
        Part::Native(NativePart {
            provider: "gemini".into(),
            model: "gemini-2.5-flash".into(),
            value,
        })
    }

    fn call(id: &str) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: "look".into(),
            arguments: json!({"q": id}),
        }
    }

    #[test]
    fn signatures_go_back_on_their_parts() {
        let assistant = Message {
            role: Role::Assistant,
            parts: vec![
                Part::reasoning("thinking..."),
                native(
                    json!({"part": {"text": "summary", "thought": true, "thoughtSignature": "T"}}),
                ),
                Part::text("Checking."),
                native(json!({"thoughtSignature": "A", "on": "text"})),
                Part::ToolCall(call("c1")),
                native(json!({"thoughtSignature": "B", "on": "functionCall"})),
                Part::ToolCall(call("c2")),
                native(json!({"part": {"text": "", "thoughtSignature": "C"}})),
                Part::Native(NativePart {
                    provider: "gemini".into(),
                    model: "other".into(),
                    value: json!({"thoughtSignature": "X", "on": "functionCall"}),
                }),
            ],
        };
        let req = TurnRequest {
            messages: vec![
                Message::user("q"),
                assistant,
                Message::tool_results([ToolResult::text(&call("c1"), "one", false)]),
            ]
            .into(),
            ..Default::default()
        };
        let cfg = GeminiConfig::new("gemini-2.5-flash", ApiKey::new("k"));
        let body = encode(&req, &cfg).unwrap();
        let parts = &body["contents"][1]["parts"];
        assert_eq!(
            parts[0],
            json!({"text": "summary", "thought": true, "thoughtSignature": "T"})
        );
        assert_eq!(
            parts[1],
            json!({"text": "Checking.", "thoughtSignature": "A"})
        );
        assert_eq!(parts[2]["thoughtSignature"], "B");
        assert_eq!(parts[2]["functionCall"]["id"], "c1");
        assert!(parts[3].get("thoughtSignature").is_none());
        assert_eq!(parts[4], json!({"text": "", "thoughtSignature": "C"}));
        assert_eq!(parts.as_array().map(Vec::len), Some(5));
        let answers = &body["contents"][2]["parts"];
        assert_eq!(answers[0]["functionResponse"]["id"], "c1");
        assert_eq!(answers[1]["functionResponse"]["id"], "c2");
        assert_eq!(
            answers[1]["functionResponse"]["response"]["error"],
            MISSING_RESULT
        );
        assert_eq!(
            body["generationConfig"]["thinkingConfig"]["includeThoughts"],
            true
        );
    }

    #[test]
    fn responses_stay_apart_from_the_users_words() {
        let assistant = Message {
            role: Role::Assistant,
            parts: vec![Part::ToolCall(call("c1"))],
        };
        let mut results = Message::tool_results([ToolResult::text(&call("c1"), "one", false)]);
        results.parts.push(Part::text("also, hurry"));
        let req = TurnRequest {
            messages: vec![
                Message::user("q"),
                assistant,
                results,
                Message::user("please"),
            ]
            .into(),
            ..Default::default()
        };
        let body = encode(&req, &GeminiConfig::new("gemini-3-pro", ApiKey::new("k"))).unwrap();
        let contents = body["contents"].as_array().cloned().unwrap_or_default();
        assert_eq!(contents.len(), 4, "{body:#}");
        assert_eq!(contents[2]["parts"].as_array().map(Vec::len), Some(1));
        assert_eq!(contents[2]["parts"][0]["functionResponse"]["id"], "c1");
        assert_eq!(
            contents[3],
            json!({"role": "user", "parts": [{"text": "also, hurry"}, {"text": "please"}]})
        );
    }

    #[test]
    fn tool_schemas_are_shaped_and_stay_json_schema() {
        let tool = crate::ToolSpec {
            name: "find".into(),
            description: String::new(),
            input_schema: json!({
                "type": "object",
                "$defs": {"Tag": {"type": ["string", "null"], "title": "A tag"}},
                "properties": {"tag": {"$ref": "#/$defs/Tag"}, "n": {"type": "integer", "default": 3}},
                "additionalProperties": false
            }),
            annotations: Default::default(),
            output_schema: None,
        };
        let req = TurnRequest {
            messages: vec![Message::user("x")].into(),
            tools: vec![tool].into(),
            ..Default::default()
        };
        let body = encode(&req, &GeminiConfig::new("gemini-2.5-pro", ApiKey::new("k"))).unwrap();
        let schema = &body["tools"][0]["functionDeclarations"][0]["parametersJsonSchema"];
        assert_eq!(
            schema["properties"]["tag"]["type"],
            json!(["string", "null"]),
            "{schema:#}"
        );
        assert!(
            schema.get("$defs").is_none() && schema.get("additionalProperties").is_none(),
            "{schema:#}"
        );
        assert!(!schema.to_string().contains("nullable"), "{schema:#}");
        let bad = crate::ToolSpec {
            input_schema: json!({"type": "string"}),
            ..req.tools[0].clone()
        };
        let err = encode(
            &TurnRequest {
                tools: vec![bad].into(),
                ..req
            },
            &GeminiConfig::new("g", ApiKey::new("k")),
        )
        .unwrap_err();
        assert!(err.to_string().contains("`find`"), "{err}");
    }

    #[test]
    fn older_models_are_not_asked_for_thoughts() {
        let cfg = GeminiConfig::new("gemini-2.0-flash", ApiKey::new("k"));
        let body = encode(
            &TurnRequest {
                messages: vec![Message::user("x")].into(),
                ..Default::default()
            },
            &cfg,
        )
        .unwrap();
        assert!(body["generationConfig"].get("thinkingConfig").is_none());
        assert_eq!(body["generationConfig"]["maxOutputTokens"], 8192);
    }
}
