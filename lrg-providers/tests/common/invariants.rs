//! [`Invariants`]: a wiremock matcher that checks, on every request it sees,
//! what every adapter must keep whatever the conversation (after codex's
//! request-invariant matcher). A broken invariant panics with a message that
//! names it, so the test fails on the very request that broke it:
//!
//! - the body is JSON of the API's documented shape (its required fields,
//!   known roles and item types);
//! - every tool result follows its call, no result comes without its call,
//!   and every call is answered exactly once;
//! - no provider-native part of another API is sent (Anthropic thinking
//!   blocks, Gemini thought signatures, Responses encrypted reasoning);
//! - the API key never appears in the body.
//!
//! Mount it with `.expect(n)` so that an extra or missing request fails too.

use std::collections::HashMap;
use std::fmt;

use serde_json::Value;

/// Which API a request body is written for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Api {
    /// OpenAI Chat Completions (and compatible servers).
    OpenAi,
    /// Anthropic Messages.
    Anthropic,
    /// Gemini generateContent.
    Gemini,
    /// Ollama /api/chat.
    Ollama,
    /// OpenAI Responses.
    Responses,
}

/// The matcher. See the module docs.
pub struct Invariants {
    /// The API the body is written for.
    pub api: Api,
    /// The key that must never be in the body.
    pub key: Option<&'static str>,
}

/// A broken invariant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Broken {
    /// The body is not JSON.
    NotJson,
    /// The body lacks what the API requires, or holds what it does not know.
    Shape(String),
    /// The key is in the body.
    KeyInBody,
    /// A tool result whose call comes after it.
    ResultBeforeCall(String),
    /// A tool result whose call is nowhere.
    ResultWithoutCall(String),
    /// A call answered twice.
    AnsweredTwice(String),
    /// A call never answered.
    Unanswered(String),
    /// Another API's native part (the key that marks it).
    ForeignNative(&'static str),
}

impl fmt::Display for Broken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Broken::NotJson => write!(f, "the body is not JSON"),
            Broken::Shape(what) => write!(f, "the body is not of the API's shape: {what}"),
            Broken::KeyInBody => write!(f, "the API key is in the body"),
            Broken::ResultBeforeCall(id) => {
                write!(f, "the tool result for `{id}` comes before its call")
            }
            Broken::ResultWithoutCall(id) => {
                write!(
                    f,
                    "a tool result for `{id}`, a call that is not in the request"
                )
            }
            Broken::AnsweredTwice(id) => write!(f, "the tool call `{id}` is answered twice"),
            Broken::Unanswered(id) => write!(f, "the tool call `{id}` has no result"),
            Broken::ForeignNative(marker) => {
                write!(f, "another provider's native part (`{marker}`) was sent")
            }
        }
    }
}

/// One step of the conversation a body holds, in order.
enum Step {
    /// A tool call, by id (Gemini: by name).
    Call(String),
    /// A tool result, by its call's id (Gemini: by name).
    Result(String),
}

impl Invariants {
    /// A matcher for `api` bodies that must not hold `key`.
    pub fn new(api: Api, key: Option<&'static str>) -> Self {
        Self { api, key }
    }

    /// Check one request body.
    pub fn check(&self, body: &[u8]) -> Result<(), Broken> {
        let text = String::from_utf8_lossy(body);
        if self.key.is_some_and(|key| text.contains(key)) {
            return Err(Broken::KeyInBody);
        }
        let body: Value = serde_json::from_str(&text).map_err(|_| Broken::NotJson)?;
        if let Some(marker) = foreign_native(self.api, &body) {
            return Err(Broken::ForeignNative(marker));
        }
        let steps = match self.api {
            Api::OpenAi | Api::Ollama => chat_steps(&body)?,
            Api::Anthropic => anthropic_steps(&body)?,
            Api::Gemini => gemini_steps(&body)?,
            Api::Responses => responses_steps(&body)?,
        };
        // With `previous_response_id` the calls live in the stored response.
        let stored_calls = self.api == Api::Responses && body.get("previous_response_id").is_some();
        pair(&steps, stored_calls)
    }
}

impl wiremock::Match for Invariants {
    #[allow(clippy::panic)] // failing the test on the request that broke it is the point
    fn matches(&self, request: &wiremock::Request) -> bool {
        if let Err(broken) = self.check(&request.body) {
            let body = match broken {
                // Never print a key, even a fake one.
                Broken::KeyInBody => "(not shown: it holds the key)".to_string(),
                _ => String::from_utf8_lossy(&request.body)
                    .chars()
                    .take(4_000)
                    .collect(),
            };
            panic!(
                "request invariant broken ({:?}, {} {}): {broken}\nbody: {body}",
                self.api, request.method, request.url
            );
        }
        true
    }
}

/// Mount `response` on `POST path`, every request checked by `invariants`,
/// expecting exactly `n` requests (verified when the server is verified or
/// dropped: call `server.verify()` before a `reset`).
pub async fn mount_checked(
    server: &wiremock::MockServer,
    path: &str,
    invariants: Invariants,
    response: wiremock::ResponseTemplate,
    n: u64,
) {
    wiremock::Mock::given(wiremock::matchers::method("POST"))
        .and(wiremock::matchers::path(path))
        .and(invariants)
        .respond_with(response)
        .expect(n)
        .mount(server)
        .await;
}

/// Calls and results must pair: each result after its call, each call
/// answered once (unless the calls are stored server-side).
fn pair(steps: &[Step], stored_calls: bool) -> Result<(), Broken> {
    let mut open: HashMap<&str, usize> = HashMap::new();
    let mut called: HashMap<&str, usize> = HashMap::new();
    for (i, step) in steps.iter().enumerate() {
        match step {
            Step::Call(id) => {
                *open.entry(id).or_default() += 1;
                *called.entry(id).or_default() += 1;
            }
            Step::Result(id) => match open.get_mut(id.as_str()) {
                Some(n) if *n > 0 => *n -= 1,
                _ if called.contains_key(id.as_str()) => {
                    return Err(Broken::AnsweredTwice(id.clone()));
                }
                _ if steps[i..]
                    .iter()
                    .any(|s| matches!(s, Step::Call(c) if c == id)) =>
                {
                    return Err(Broken::ResultBeforeCall(id.clone()));
                }
                _ if stored_calls => {}
                _ => return Err(Broken::ResultWithoutCall(id.clone())),
            },
        }
    }
    // In order of the calls, so the message names the first one.
    for step in steps {
        if let Step::Call(id) = step
            && open.get(id.as_str()).is_some_and(|n| *n > 0)
        {
            return Err(Broken::Unanswered(id.clone()));
        }
    }
    Ok(())
}

/// The first key in `body` that marks another API's native part.
fn foreign_native(api: Api, body: &Value) -> Option<&'static str> {
    match body {
        Value::Object(map) => {
            if api != Api::Gemini && map.contains_key("thoughtSignature") {
                return Some("thoughtSignature");
            }
            if api != Api::Responses && map.contains_key("encrypted_content") {
                return Some("encrypted_content");
            }
            if api != Api::Anthropic
                && matches!(
                    map.get("type").and_then(Value::as_str),
                    Some("thinking" | "redacted_thinking")
                )
            {
                return Some("type: thinking");
            }
            map.values().find_map(|v| foreign_native(api, v))
        }
        Value::Array(items) => items.iter().find_map(|v| foreign_native(api, v)),
        _ => None,
    }
}

fn shape(what: impl Into<String>) -> Broken {
    Broken::Shape(what.into())
}

fn array<'a>(body: &'a Value, field: &str) -> Result<&'a Vec<Value>, Broken> {
    body.get(field)
        .and_then(Value::as_array)
        .ok_or_else(|| shape(format!("no `{field}` array")))
}

fn string<'a>(value: &'a Value, field: &str, of: &str) -> Result<&'a str, Broken> {
    value
        .get(field)
        .and_then(Value::as_str)
        .ok_or_else(|| shape(format!("{of} without a `{field}` string")))
}

fn role_in<'a>(message: &'a Value, roles: &[&str]) -> Result<&'a str, Broken> {
    let role = string(message, "role", "a message")?;
    if roles.contains(&role) {
        Ok(role)
    } else {
        Err(shape(format!("role `{role}` (expected one of {roles:?})")))
    }
}

/// Chat Completions and Ollama: `model`, `messages`; calls in an assistant
/// message's `tool_calls`, results as `tool` messages.
fn chat_steps(body: &Value) -> Result<Vec<Step>, Broken> {
    string(body, "model", "the body")?;
    let mut steps = Vec::new();
    for m in array(body, "messages")? {
        let role = role_in(m, &["system", "developer", "user", "assistant", "tool"])?;
        for call in m
            .get("tool_calls")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if role != "assistant" {
                return Err(shape(format!("tool calls in a `{role}` message")));
            }
            steps.push(Step::Call(string(call, "id", "a tool call")?.to_string()));
        }
        if role == "tool" {
            steps.push(Step::Result(
                string(m, "tool_call_id", "a tool message")?.to_string(),
            ));
        }
    }
    Ok(steps)
}

/// Anthropic Messages: `model`, `max_tokens`, `messages` of user/assistant
/// turns; `tool_use` blocks answered by `tool_result` blocks.
fn anthropic_steps(body: &Value) -> Result<Vec<Step>, Broken> {
    string(body, "model", "the body")?;
    if !body.get("max_tokens").is_some_and(Value::is_u64) {
        return Err(shape("no `max_tokens`"));
    }
    let mut steps = Vec::new();
    for m in array(body, "messages")? {
        let role = role_in(m, &["user", "assistant"])?;
        for block in m
            .get("content")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            match block.get("type").and_then(Value::as_str) {
                Some("tool_use") if role == "assistant" => steps.push(Step::Call(
                    string(block, "id", "a tool_use block")?.to_string(),
                )),
                Some("tool_result") if role == "user" => steps.push(Step::Result(
                    string(block, "tool_use_id", "a tool_result block")?.to_string(),
                )),
                Some(kind @ ("tool_use" | "tool_result")) => {
                    return Err(shape(format!("a `{kind}` block in a `{role}` message")));
                }
                Some(_) => {}
                None => return Err(shape("a content block without a `type`")),
            }
        }
    }
    Ok(steps)
}

/// Gemini: `contents` of user/model turns; `functionCall` parts answered by
/// `functionResponse` parts, paired by id where the call has one, else by
/// name in order.
fn gemini_steps(body: &Value) -> Result<Vec<Step>, Broken> {
    let mut steps = Vec::new();
    for c in array(body, "contents")? {
        let role = role_in(c, &["user", "model"])?;
        for part in array(c, "parts")? {
            if let Some(f) = part.get("functionCall") {
                if role != "model" {
                    return Err(shape("a functionCall in a `user` turn"));
                }
                steps.push(Step::Call(gemini_key(f, "a functionCall")?));
            }
            if let Some(f) = part.get("functionResponse") {
                if role != "user" {
                    return Err(shape("a functionResponse in a `model` turn"));
                }
                steps.push(Step::Result(gemini_key(f, "a functionResponse")?));
            }
        }
    }
    Ok(steps)
}

/// What pairs a Gemini call with its response: its id, else its name.
fn gemini_key(f: &Value, of: &str) -> Result<String, Broken> {
    match f.get("id").and_then(Value::as_str) {
        Some(id) => Ok(id.to_string()),
        None => string(f, "name", of).map(str::to_string),
    }
}

/// Responses: `model`, `input` items; `function_call` items answered by
/// `function_call_output` items with the same `call_id`.
fn responses_steps(body: &Value) -> Result<Vec<Step>, Broken> {
    string(body, "model", "the body")?;
    let mut steps = Vec::new();
    for item in array(body, "input")? {
        // A message item may leave out `type`.
        match item
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("message")
        {
            "message" => {
                role_in(item, &["system", "developer", "user", "assistant"])?;
            }
            "function_call" => steps.push(Step::Call(
                string(item, "call_id", "a function_call item")?.to_string(),
            )),
            "function_call_output" => steps.push(Step::Result(
                string(item, "call_id", "a function_call_output item")?.to_string(),
            )),
            "reasoning" | "item_reference" => {}
            other => return Err(shape(format!("an input item of type `{other}`"))),
        }
    }
    Ok(steps)
}
