//! The formats as data: each one's markers ([`rules`]) and how a call body
//! is read ([`read_body`]).

use serde_json::{Map, Value};

use super::ToolFormat;
use super::json::parse_lenient;
use super::pythonic::parse_calls;
use super::scan::{Body, End, Fallback, Open, Rule};

const THINK: Rule = Rule::new(
    "<think>",
    Open::Reasoning {
        close: &["</think>"],
    },
);
const fn drop(open: &'static str) -> Rule {
    Rule::new(open, Open::Drop)
}
const fn call(end: End, body: Body) -> Open {
    Open::Call {
        end,
        body,
        fallback: Fallback::Failure,
    }
}
const HERMES_CALL: Open = call(End::Marker(&["</tool_call>"]), Body::Json);
/// Llama 3.x writes several calls joined by `;`.
const BARE_JSON_LIST: Open = Open::Call {
    end: End::Balanced,
    body: Body::JsonList,
    fallback: Fallback::TextUnlessCall,
};
const MARKDOWN: Open = Open::Call {
    end: End::Marker(&["```"]),
    body: Body::Json,
    fallback: Fallback::TextUnlessKnown,
};

const HERMES: &[Rule] = &[
    THINK,
    Rule::new("<tool_call>", HERMES_CALL),
    drop("<|im_end|>"),
];
const QWEN3_CODER: &[Rule] = &[
    THINK,
    Rule::new(
        "<tool_call>",
        call(End::Marker(&["</tool_call>"]), Body::Qwen3Xml),
    ),
    // The model sometimes leaves out the `<tool_call>` wrapper.
    Rule::kept(
        "<function=",
        call(End::Marker(&["</function>"]), Body::Qwen3Xml),
    ),
    drop("<|im_end|>"),
];
const MISTRAL: &[Rule] = &[
    THINK,
    Rule::new(
        "[THINK]",
        Open::Reasoning {
            close: &["[/THINK]"],
        },
    ),
    Rule::new("[TOOL_CALLS]", call(End::Balanced, Body::Mistral)),
    drop("</s>"),
];
const LLAMA3: &[Rule] = &[
    Rule::new("<|python_tag|>", call(End::Balanced, Body::JsonList)),
    // Llama 3.1's custom-tool form (its model card's system prompt).
    Rule::new(
        "<function=",
        call(End::Marker(&["</function>"]), Body::LlamaFunction),
    ),
    Rule::at_start("{", BARE_JSON_LIST),
    drop("<|eom_id|>"),
    drop("<|eot_id|>"),
];
const HARMONY: &[Rule] = &[
    Rule::new("<|channel|>", Open::HarmonyHeader),
    Rule::new("<|start|>", Open::HarmonyHeader),
    drop("<|end|>"),
    drop("<|return|>"),
    drop("<|call|>"),
];
const GRANITE: &[Rule] = &[
    THINK,
    Rule::new("<|tool_call|>", call(End::Balanced, Body::Json)),
    Rule::new("<tool_call>", call(End::Balanced, Body::Json)),
    Rule::new("<function_call>", call(End::Balanced, Body::Json)),
    drop("</function_call>"),
    drop("</tool_call>"),
    drop("<|end_of_text|>"),
];
const DEEPSEEK: &[Rule] = &[
    THINK,
    Rule::new(
        "<｜tool▁calls▁begin｜>",
        call(End::Marker(&["<｜tool▁calls▁end｜>"]), Body::DeepSeek),
    ),
    drop("<｜end▁of▁sentence｜>"),
];
const PYTHONIC: &[Rule] = &[
    THINK,
    Rule::new(
        "<|python_start|>",
        call(End::Marker(&["<|python_end|>"]), Body::Pythonic),
    ),
    Rule::at_start(
        "[",
        Open::Call {
            end: End::Balanced,
            body: Body::Pythonic,
            fallback: Fallback::TextUnlessCall,
        },
    ),
    drop("<|eot|>"),
    drop("<|eom|>"),
];
const MARKDOWN_JSON: &[Rule] = &[
    THINK,
    Rule::new("```json", MARKDOWN),
    Rule::new("```tool_call", MARKDOWN),
];

const GEMMA: &[Rule] = &[
    Rule::new("```tool_code", call(End::Marker(&["```"]), Body::ToolCode)),
    Rule::at_start(
        "[",
        Open::Call {
            end: End::Balanced,
            body: Body::Pythonic,
            fallback: Fallback::TextUnlessCall,
        },
    ),
    drop("<end_of_turn>"),
];

/// The markers of the formats of `chain`: all of the first one's, then the
/// call markers of the others (not their reasoning or end-of-turn tokens,
/// which the family does not write); a marker already taken keeps the
/// earlier meaning.
pub(crate) fn chain(chain: &[ToolFormat]) -> Vec<Rule> {
    let mut out: Vec<Rule> = Vec::new();
    for (i, format) in chain.iter().enumerate() {
        for rule in rules(*format) {
            let call = matches!(rule.then, Open::Call { .. });
            if (i == 0 || call) && !out.iter().any(|r| r.open == rule.open) {
                out.push(*rule);
            }
        }
    }
    out
}

/// The markers of `format`.
pub(crate) fn rules(format: ToolFormat) -> &'static [Rule] {
    match format {
        ToolFormat::Hermes => HERMES,
        ToolFormat::Qwen3Coder => QWEN3_CODER,
        ToolFormat::Mistral => MISTRAL,
        ToolFormat::Llama3 => LLAMA3,
        ToolFormat::Harmony => HARMONY,
        ToolFormat::Granite => GRANITE,
        ToolFormat::DeepSeek => DEEPSEEK,
        ToolFormat::Pythonic => PYTHONIC,
        ToolFormat::MarkdownJson => MARKDOWN_JSON,
        ToolFormat::Gemma => GEMMA,
    }
}

/// Why a body is not a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Problem {
    /// Not readable as a call at all.
    Unreadable(String),
    /// Readable, but without a tool name.
    NoName,
}

/// One call as written: the name the model used, and its arguments.
pub(crate) type Written = (String, Value);

/// Read a call body. `name` is the name from a Harmony header.
pub(crate) fn read_body(
    body: Body,
    text: &str,
    name: Option<&str>,
    schema_of: &dyn Fn(&str) -> Option<Value>,
) -> Result<Vec<Written>, Problem> {
    match body {
        // A list is split into its values before it is read.
        Body::Json | Body::JsonList => json_calls(text),
        Body::Qwen3Xml => qwen3_calls(text, schema_of),
        Body::Mistral => mistral_calls(text),
        Body::DeepSeek => deepseek_calls(text),
        Body::Pythonic => parse_calls(text).ok_or_else(|| unreadable("a Python call list")),
        Body::LlamaFunction => llama_function_call(text),
        Body::ToolCode => tool_code_calls(text),
        Body::HarmonyArgs => {
            let name = name.unwrap_or_default().to_string();
            Ok(vec![(name, arguments_of(text)?)])
        }
    }
}

fn unreadable(what: &str) -> Problem {
    Problem::Unreadable(format!("it is not {what}"))
}

/// Arguments written as JSON text (empty: no arguments).
fn arguments_of(text: &str) -> Result<Value, Problem> {
    let text = strip_fence(text);
    if text.trim().is_empty() {
        return Ok(Value::Object(Map::new()));
    }
    parse_lenient(text).ok_or_else(|| unreadable("valid JSON"))
}

/// The inside of a Markdown code fence, if `text` is fenced.
fn strip_fence(text: &str) -> &str {
    let t = text.trim();
    let Some(rest) = t.strip_prefix("```") else {
        return text;
    };
    let rest = rest.trim_start_matches(|c: char| c.is_ascii_alphanumeric() || c == '_');
    rest.strip_suffix("```").unwrap_or(rest)
}

/// Calls in JSON: an object or a list of them.
pub(crate) fn json_calls(text: &str) -> Result<Vec<Written>, Problem> {
    let value = parse_lenient(text).ok_or_else(|| unreadable("valid JSON"))?;
    match value {
        Value::Array(items) => items.into_iter().map(json_call).collect(),
        other => Ok(vec![json_call(other)?]),
    }
}

/// `{"name", "arguments"|"parameters"}`, also nested in `"function"`.
pub(crate) fn json_call(value: Value) -> Result<Written, Problem> {
    let Value::Object(mut object) = value else {
        return Err(unreadable("a JSON object"));
    };
    if let Some(Value::Object(function)) = object.remove("function") {
        object.extend(function);
    }
    let name = match object.remove("name") {
        Some(Value::String(name)) if !name.trim().is_empty() => name,
        _ => return Err(Problem::NoName),
    };
    let arguments = match object
        .remove("arguments")
        .or_else(|| object.remove("parameters"))
        .or_else(|| object.remove("args"))
    {
        None | Some(Value::Null) => Value::Object(Map::new()),
        // Arguments encoded as a JSON string.
        Some(Value::String(s)) => arguments_of(&s)?,
        Some(v) => v,
    };
    Ok((name, arguments))
}

fn mistral_calls(text: &str) -> Result<Vec<Written>, Problem> {
    let t = text.trim_start();
    if t.starts_with('[') || t.starts_with('{') {
        return json_calls(t);
    }
    // `NAME[ARGS]{…}` (possibly with `[CALL_ID]id` before `[ARGS]`), or
    // `NAME{…}` when the server drops the `[ARGS]` token's text.
    let (head, args) = match t.split_once("[ARGS]") {
        Some(split) => split,
        None => t
            .find('{')
            .map(|i| t.split_at(i))
            .ok_or_else(|| unreadable("`NAME[ARGS]{…}`"))?,
    };
    let name = head.split("[CALL_ID]").next().unwrap_or(head).trim();
    if name.is_empty() {
        return Err(Problem::NoName);
    }
    Ok(vec![(name.to_string(), arguments_of(args)?)])
}

/// Llama 3.1: what follows `<function=`: `NAME>{…}`.
fn llama_function_call(text: &str) -> Result<Vec<Written>, Problem> {
    let (name, args) = text
        .split_once('>')
        .ok_or_else(|| unreadable("`<function=NAME>{…}</function>`"))?;
    let name = name.trim();
    if name.is_empty() {
        return Err(Problem::NoName);
    }
    Ok(vec![(name.to_string(), arguments_of(args)?)])
}

/// Gemma's `tool_code` block: one Python call per line (or a list of them),
/// each possibly wrapped in `print(…)`, as Gemini's code execution writes it.
fn tool_code_calls(text: &str) -> Result<Vec<Written>, Problem> {
    let unwrap = |line: &str| -> String {
        let t = line.trim();
        match t.strip_prefix("print(").and_then(|r| r.strip_suffix(')')) {
            Some(inner) => inner.trim().to_string(),
            None => t.to_string(),
        }
    };
    let problem = || unreadable("Python calls such as `get_weather(city=\"Paris\")`");
    if let Some(calls) = parse_calls(&unwrap(text)) {
        return Ok(calls);
    }
    let mut calls = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        calls.extend(parse_calls(&unwrap(line)).ok_or_else(problem)?);
    }
    if calls.is_empty() {
        return Err(problem());
    }
    Ok(calls)
}

const DS_CALL_BEGIN: &str = "<｜tool▁call▁begin｜>";
const DS_CALL_END: &str = "<｜tool▁call▁end｜>";
const DS_SEP: &str = "<｜tool▁sep｜>";

/// V3/R1: `function<｜tool▁sep｜>NAME\n```json\n{…}\n```; V3.1:
/// `NAME<｜tool▁sep｜>{…}`; each between call begin and end markers.
fn deepseek_calls(text: &str) -> Result<Vec<Written>, Problem> {
    let mut calls = Vec::new();
    for entry in text.split(DS_CALL_BEGIN).skip(1) {
        let entry = entry.split(DS_CALL_END).next().unwrap_or(entry);
        let (left, right) = entry
            .split_once(DS_SEP)
            .ok_or_else(|| unreadable("`NAME<｜tool▁sep｜>ARGUMENTS`"))?;
        let (name, args) = if left.trim() == "function" {
            let (name, args) = right.split_once('\n').unwrap_or((right, ""));
            (name.trim(), args)
        } else {
            (left.trim(), right)
        };
        if name.is_empty() {
            return Err(Problem::NoName);
        }
        calls.push((name.to_string(), arguments_of(args)?));
    }
    if calls.is_empty() {
        return Err(unreadable("a list of `<｜tool▁call▁begin｜>` calls"));
    }
    Ok(calls)
}

/// Qwen3-Coder: each `<function=NAME>` holds `<parameter=P>VALUE</parameter>`
/// entries; a value is JSON when its schema type is not a string.
fn qwen3_calls(
    text: &str,
    schema_of: &dyn Fn(&str) -> Option<Value>,
) -> Result<Vec<Written>, Problem> {
    let mut calls = Vec::new();
    for function in text.split("<function=").skip(1) {
        let function = function.split("</function>").next().unwrap_or(function);
        let (name, params) = function
            .split_once('>')
            .ok_or_else(|| unreadable("`<function=NAME>`"))?;
        let name = name.trim();
        if name.is_empty() {
            return Err(Problem::NoName);
        }
        let schema = schema_of(name);
        let mut arguments = Map::new();
        for param in params.split("<parameter=").skip(1) {
            let param = param.split("</parameter>").next().unwrap_or(param);
            let (key, value) = param.split_once('>').unwrap_or((param, ""));
            let value = value.strip_prefix('\n').unwrap_or(value);
            let value = value.strip_suffix('\n').unwrap_or(value);
            let key = key.trim().to_string();
            let typed = typed_value(value, schema.as_ref().and_then(|s| property_type(s, &key)));
            arguments.insert(key, typed);
        }
        calls.push((name.to_string(), Value::Object(arguments)));
    }
    if calls.is_empty() {
        return Err(unreadable("`<function=NAME>…</function>`"));
    }
    Ok(calls)
}

fn property_type<'a>(schema: &'a Value, key: &str) -> Option<&'a str> {
    schema.get("properties")?.get(key)?.get("type")?.as_str()
}

fn typed_value(raw: &str, declared: Option<&str>) -> Value {
    if declared == Some("string") {
        return Value::String(raw.to_string());
    }
    match parse_lenient(raw) {
        Some(v) if !v.is_string() || declared.is_some() => v,
        _ => Value::String(raw.to_string()),
    }
}
