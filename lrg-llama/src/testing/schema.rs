//! A realistic answer schema in the shape `LocalChatModel` constrains local
//! models to: `{"analysis", "call": {"<tool>": {args}}}` per tool, or
//! `{"analysis", "reply"}`, with the string caps of the design.

use serde_json::{Map, Value, json};

/// String caps (`maxLength`, in characters) of an answer schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AnswerCaps {
    /// Cap on `analysis`.
    pub analysis: u64,
    /// Cap on every string argument.
    pub argument: u64,
    /// Cap on `reply`.
    pub reply: u64,
}

impl AnswerCaps {
    /// The design's caps: 600, 1,000 and 6,000.
    pub const DESIGN: Self = Self {
        analysis: 600,
        argument: 1000,
        reply: 6000,
    };
}

/// `(name, arguments schema)` of a realistic set of `n` tools: file system,
/// shell, web and issue-tracker tools first, then numbered variants of them.
/// String arguments are capped at `caps.argument`.
pub fn sample_tools(n: usize, caps: &AnswerCaps) -> Vec<(String, Value)> {
    let s = || json!({"type": "string", "maxLength": caps.argument});
    let base: Vec<(&str, Value)> = vec![
        (
            "read_file",
            obj(
                &[("path", s())],
                &[("offset", json!({"type": "integer", "minimum": 0}))],
            ),
        ),
        ("write_file", obj(&[("path", s()), ("content", s())], &[])),
        (
            "list_directory",
            obj(
                &[("path", s())],
                &[("recursive", json!({"type": "boolean"}))],
            ),
        ),
        (
            "search_files",
            obj(
                &[("pattern", s())],
                &[
                    ("path", s()),
                    (
                        "max_results",
                        json!({"type": "integer", "minimum": 1, "maximum": 500}),
                    ),
                ],
            ),
        ),
        (
            "run_command",
            obj(
                &[("command", s())],
                &[("timeout_s", json!({"type": "number"}))],
            ),
        ),
        (
            "fetch_url",
            obj(
                &[("url", s())],
                &[("method", json!({"enum": ["GET", "POST", "HEAD"]}))],
            ),
        ),
        (
            "create_issue",
            obj(
                &[("title", s()), ("body", s())],
                &[(
                    "labels",
                    json!({"type": "array", "items": s(), "maxItems": 3}),
                )],
            ),
        ),
        (
            "send_email",
            obj(&[("to", s()), ("subject", s()), ("body", s())], &[]),
        ),
    ];
    (0..n)
        .map(|i| {
            let (name, schema) = &base[i % base.len()];
            let name = if i < base.len() {
                (*name).to_string()
            } else {
                format!("{name}_{}", i / base.len())
            };
            (name, schema.clone())
        })
        .collect()
}

fn obj(required: &[(&str, Value)], optional: &[(&str, Value)]) -> Value {
    let mut props = Map::new();
    for (k, v) in required.iter().chain(optional) {
        props.insert((*k).to_string(), v.clone());
    }
    let req: Vec<&str> = required.iter().map(|(k, _)| *k).collect();
    json!({"type": "object", "properties": props, "required": req, "additionalProperties": false})
}

/// The answer schema for `tools`: one `call` branch per tool and a `reply`
/// branch.
pub fn answer_schema(tools: &[(String, Value)], caps: &AnswerCaps) -> Value {
    let analysis = json!({"type": "string", "maxLength": caps.analysis});
    let mut branches: Vec<Value> = tools
        .iter()
        .map(|(name, args)| {
            json!({
                "type": "object",
                "properties": {
                    "analysis": analysis,
                    "call": {
                        "type": "object",
                        "properties": {(name.as_str()): args},
                        "required": [name],
                        "additionalProperties": false
                    }
                },
                "required": ["analysis", "call"],
                "additionalProperties": false
            })
        })
        .collect();
    branches.push(json!({
        "type": "object",
        "properties": {
            "analysis": analysis,
            "reply": {"type": "string", "maxLength": caps.reply}
        },
        "required": ["analysis", "reply"],
        "additionalProperties": false
    }));
    json!({"anyOf": branches})
}

/// A valid answer for [`answer_schema`] of [`sample_tools`] (at least two
/// tools): a long analysis, then a call of the second tool. Benches walk it
/// token by token.
pub fn sample_answer() -> String {
    let analysis = "The user wants the configuration written back with the new timeout. \
                    I read the file first, found the key under [server], and now write the \
                    whole file with timeout = 30 so nothing else changes.";
    json!({
        "analysis": analysis,
        "call": {"write_file": {
            "path": "/etc/app/config.toml",
            "content": "[server]\nhost = \"0.0.0.0\"\nport = 8080\ntimeout = 30\n"
        }}
    })
    .to_string()
}
