//! What a run must do: [`Expectations`], checked against a [`Transcript`].
//!
//! This is the one implementation of every check: `lrg test` reads it from
//! scenario files, and [`Transcript`]'s `assert_*` helpers build it in code.

use std::collections::BTreeMap;
use std::fmt;

use regex::Regex;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub(crate) use lrg_providers::text::clip;

use super::transcript::{Outcome, Transcript};

/// Everything a run must do. Every field is optional; an empty set still
/// asks that a replay did not drift and played every recorded turn.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct Expectations {
    /// Tools the model must call, each with conditions on its arguments.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub calls: Vec<CallExpectation>,
    /// Tools that must be called in this order (others may come between).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub order: Vec<String>,
    /// Tools the model must never call.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub never_called: Vec<String>,
    /// The most model turns the whole run may take.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_turns: Option<usize>,
    /// No `error` event at all (also not the step limit's).
    #[serde(skip_serializing_if = "is_false")]
    pub no_error: bool,
    /// The final reply (of the last message).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reply: Option<ReplyExpectation>,
    /// Tools an approval must have been asked for.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub approval_asked: Vec<String>,
    /// The exit status `lrg run` would end with: 0 replied, 1 a model or tool
    /// error, 3 stopped or out of steps (`lrg test` takes 0 when unset).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_status: Option<u8>,
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// A tool the model must call. The call counts when every condition given
/// holds for its arguments; without `times`, one such call is enough.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct CallExpectation {
    /// The tool's name.
    pub tool: String,
    /// Arguments compared as `match` says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args: Option<Value>,
    /// How `args` is compared (default `subset`).
    #[serde(
        default,
        rename = "match",
        skip_serializing_if = "ArgsMatch::is_subset"
    )]
    pub match_: ArgsMatch,
    /// A regular expression per argument: a top-level field name, or a JSON
    /// pointer (`/filter/name`). A string is matched as is, anything else as
    /// its JSON text.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub args_regex: BTreeMap<String, String>,
    /// A JSON Schema the arguments must satisfy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args_schema: Option<Value>,
    /// Exactly this many matching calls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub times: Option<usize>,
}

impl CallExpectation {
    /// `tool` called at least once, with any arguments.
    pub fn new(tool: impl Into<String>) -> Self {
        Self {
            tool: tool.into(),
            ..Self::default()
        }
    }
}

/// How a call's arguments are compared with `args`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ArgsMatch {
    /// Every field given is there with an equal value (objects compared the
    /// same way, recursively); other fields may be there too.
    #[default]
    Subset,
    /// The arguments equal `args` exactly.
    Equal,
}

impl ArgsMatch {
    fn is_subset(&self) -> bool {
        *self == ArgsMatch::Subset
    }
}

/// Conditions on the final reply.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct ReplyExpectation {
    /// Text the reply must contain (one string or a list).
    #[serde(
        deserialize_with = "one_or_many",
        skip_serializing_if = "Vec::is_empty"
    )]
    #[schemars(with = "OneOrMany")]
    pub contains: Vec<String>,
    /// Text the reply must not contain (one string or a list).
    #[serde(
        deserialize_with = "one_or_many",
        skip_serializing_if = "Vec::is_empty"
    )]
    #[schemars(with = "OneOrMany")]
    pub not_contains: Vec<String>,
    /// A regular expression the reply must match (anywhere in it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub regex: Option<String>,
    /// A JSON Schema for a structured reply: the reply must be JSON (a
    /// Markdown code fence around it is allowed) that satisfies it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub schema: Option<Value>,
}

/// One string or a list of them.
#[derive(Deserialize, JsonSchema)]
#[serde(untagged)]
enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

fn one_or_many<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    Ok(match OneOrMany::deserialize(d)? {
        OneOrMany::One(s) => vec![s],
        OneOrMany::Many(v) => v,
    })
}

/// An expectation that does not hold: what was expected, and what happened.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Failure {
    /// The expectation, in words.
    pub expected: String,
    /// What the run did instead: the relevant events, or the replay diff.
    pub found: String,
}

impl Failure {
    /// A failure from its two halves.
    pub fn new(expected: impl Into<String>, found: impl Into<String>) -> Self {
        Self {
            expected: expected.into(),
            found: found.into(),
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "expected: {}", self.expected)?;
        let mut lines = self.found.lines();
        write!(f, "   found: {}", lines.next().unwrap_or_default())?;
        for line in lines {
            write!(f, "\n          {line}")?;
        }
        Ok(())
    }
}

/// An expectation that cannot be checked: a bad regex or JSON Schema.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {problem}")]
#[non_exhaustive]
pub struct ExpectationError {
    /// Where, as a path in the expectations (`calls[0].args_regex.text`).
    pub field: String,
    /// What is wrong.
    pub problem: String,
}

impl Expectations {
    /// Check that every regex compiles and every schema is a valid JSON
    /// Schema, so a bad one is reported before anything runs.
    pub fn validate(&self) -> Result<(), ExpectationError> {
        let bad = |field: String, problem: String| ExpectationError { field, problem };
        for (i, call) in self.calls.iter().enumerate() {
            for (field, pattern) in &call.args_regex {
                Regex::new(pattern)
                    .map_err(|e| bad(format!("calls[{i}].args_regex.{field}"), e.to_string()))?;
            }
            if let Some(schema) = &call.args_schema {
                compile_schema(schema).map_err(|e| bad(format!("calls[{i}].args_schema"), e))?;
            }
        }
        if let Some(reply) = &self.reply {
            if let Some(pattern) = &reply.regex {
                Regex::new(pattern).map_err(|e| bad("reply.regex".into(), e.to_string()))?;
            }
            if let Some(schema) = &reply.schema {
                compile_schema(schema).map_err(|e| bad("reply.schema".into(), e))?;
            }
        }
        Ok(())
    }

    /// Every expectation that does not hold for `run`, in the order they are
    /// written; a replay that drifted or stopped early fails first, whatever
    /// the expectations say. Drift is reported alone: everything after it
    /// follows from it.
    pub fn check(&self, run: &Transcript) -> Vec<Failure> {
        let mut failures = run.replay_failures();
        if run.replay.as_ref().is_some_and(|r| r.drift.is_some()) {
            return failures;
        }
        failures.extend(self.calls.iter().filter_map(|c| check_call(c, run)));
        if !self.order.is_empty() {
            failures.extend(check_order(&self.order, run));
        }
        for tool in &self.never_called {
            let made = run.calls_of(tool).count();
            if made > 0 {
                failures.push(Failure::new(
                    format!("`{tool}` never called"),
                    format!("called {made} time(s):\n{}", run.describe_calls()),
                ));
            }
        }
        if let Some(max) = self.max_turns
            && run.model_turns > max
        {
            failures.push(Failure::new(
                format!("at most {max} model turn(s)"),
                format!("{} model turns:\n{}", run.model_turns, run.describe_turns()),
            ));
        }
        if self.no_error && !run.errors.is_empty() {
            failures.push(Failure::new("no error event", run.describe_errors()));
        }
        if let Some(reply) = &self.reply {
            failures.extend(check_reply(reply, run));
        }
        for tool in &self.approval_asked {
            if !run.calls_of(tool).any(|c| c.approval.is_some()) {
                failures.push(Failure::new(
                    format!("an approval asked for `{tool}`"),
                    run.describe_approvals(),
                ));
            }
        }
        let got = run.outcome.exit_status();
        if let Some(want) = self.exit_status
            && want != got
        {
            failures.push(Failure::new(
                format!("exit status {want}"),
                format!("exit status {got}: {}", run.describe_outcome()),
            ));
        }
        failures
    }
}

fn compile_schema(schema: &Value) -> Result<jsonschema::Validator, String> {
    jsonschema::validator_for(schema).map_err(|e| format!("not a valid JSON Schema: {e}"))
}

/// Where in the JSON a schema error is, for a message (nothing at the root).
fn at_path(pointer: &str) -> String {
    if pointer.is_empty() {
        String::new()
    } else {
        format!(" at `{pointer}`")
    }
}

/// Whether `have` holds every field of `want` with an equal value.
fn is_subset(want: &Value, have: &Value) -> bool {
    match (want, have) {
        (Value::Object(w), Value::Object(h)) => w
            .iter()
            .all(|(k, v)| h.get(k).is_some_and(|hv| is_subset(v, hv))),
        _ => want == have,
    }
}

/// The argument a regex is aimed at: a JSON pointer, or a top-level field.
fn argument<'a>(args: &'a Value, field: &str) -> Option<&'a Value> {
    if field.starts_with('/') {
        args.pointer(field)
    } else {
        args.get(field)
    }
}

/// Why `args` fails `call`'s conditions, or `None` when they all hold.
fn argument_mismatch(call: &CallExpectation, args: &Value) -> Option<String> {
    if let Some(want) = &call.args {
        let ok = match call.match_ {
            ArgsMatch::Subset => is_subset(want, args),
            ArgsMatch::Equal => want == args,
        };
        if !ok {
            return Some("arguments differ".into());
        }
    }
    for (field, pattern) in &call.args_regex {
        let Ok(re) = Regex::new(pattern) else {
            return Some(format!("bad regex for `{field}`"));
        };
        let text = match argument(args, field) {
            None => return Some(format!("no argument `{field}`")),
            Some(Value::String(s)) => s.clone(),
            Some(other) => other.to_string(),
        };
        if !re.is_match(&text) {
            return Some(format!("`{field}` = {text:?} does not match /{pattern}/"));
        }
    }
    if let Some(schema) = &call.args_schema {
        match compile_schema(schema) {
            Err(e) => return Some(e),
            Ok(v) => {
                if let Some(e) = v.iter_errors(args).next() {
                    return Some(format!(
                        "schema: {e}{}",
                        at_path(&e.instance_path().to_string())
                    ));
                }
            }
        }
    }
    None
}

fn describe_call_expectation(call: &CallExpectation) -> String {
    let mut parts = vec![format!("`{}` called", call.tool)];
    if let Some(args) = &call.args {
        let how = match call.match_ {
            ArgsMatch::Subset => "including",
            ArgsMatch::Equal => "exactly",
        };
        parts.push(format!("with arguments {how} {args}"));
    }
    for (field, pattern) in &call.args_regex {
        parts.push(format!("`{field}` matching /{pattern}/"));
    }
    if call.args_schema.is_some() {
        parts.push("arguments valid against the given schema".into());
    }
    if let Some(n) = call.times {
        parts.push(format!("exactly {n} time(s)"));
    }
    parts.join(", ")
}

fn check_call(call: &CallExpectation, run: &Transcript) -> Option<Failure> {
    let of_tool: Vec<_> = run.calls_of(&call.tool).collect();
    let matching = of_tool
        .iter()
        .filter(|c| argument_mismatch(call, &c.arguments).is_none())
        .count();
    let ok = match call.times {
        Some(n) => matching == n,
        None => matching > 0,
    };
    if ok {
        return None;
    }
    let found = if of_tool.is_empty() {
        format!("`{}` was not called; {}", call.tool, run.describe_calls())
    } else {
        let why: Vec<String> = of_tool
            .iter()
            .map(|c| {
                let verdict =
                    argument_mismatch(call, &c.arguments).unwrap_or_else(|| "matches".to_string());
                format!("{} {} ({verdict})", c.tool, c.arguments)
            })
            .collect();
        format!(
            "{matching} matching call(s) of {}:\n{}",
            of_tool.len(),
            why.join("\n")
        )
    };
    Some(Failure::new(describe_call_expectation(call), found))
}

fn check_order(order: &[String], run: &Transcript) -> Option<Failure> {
    let mut want = order.iter().peekable();
    for call in &run.calls {
        if want.peek().is_some_and(|w| **w == call.tool) {
            want.next();
        }
    }
    // Every tool of the order was seen: it holds.
    want.peek()?;
    let made: Vec<&str> = run.calls.iter().map(|c| c.tool.as_str()).collect();
    Some(Failure::new(
        format!("calls in the order {}", order.join(" → ")),
        if made.is_empty() {
            "no tool calls".to_string()
        } else {
            format!("calls in the order {}", made.join(" → "))
        },
    ))
}

/// A reply's JSON: the whole text, or the body of a code fence around it.
fn reply_json(text: &str) -> Result<Value, String> {
    let trimmed = text.trim();
    let body = trimmed
        .strip_prefix("```")
        .and_then(|rest| rest.strip_suffix("```"))
        .map(|inner| inner.split_once('\n').map_or(inner, |(_, b)| b))
        .unwrap_or(trimmed);
    serde_json::from_str(body).map_err(|e| format!("the reply is not JSON: {e}"))
}

fn check_reply(reply: &ReplyExpectation, run: &Transcript) -> Vec<Failure> {
    let Some(text) = run.reply() else {
        return vec![Failure::new(
            "a final reply",
            format!("no reply: {}", run.describe_outcome()),
        )];
    };
    let shown = || format!("reply: {}", clip(text, 2000));
    let mut failures = Vec::new();
    for want in &reply.contains {
        if !text.contains(want.as_str()) {
            failures.push(Failure::new(
                format!("the reply contains {want:?}"),
                shown(),
            ));
        }
    }
    for unwanted in &reply.not_contains {
        if text.contains(unwanted.as_str()) {
            failures.push(Failure::new(
                format!("the reply does not contain {unwanted:?}"),
                shown(),
            ));
        }
    }
    if let Some(pattern) = &reply.regex {
        let ok = Regex::new(pattern).is_ok_and(|re| re.is_match(text));
        if !ok {
            failures.push(Failure::new(
                format!("the reply matches /{pattern}/"),
                shown(),
            ));
        }
    }
    if let Some(schema) = &reply.schema {
        let problem = match (compile_schema(schema), reply_json(text)) {
            (Err(e), _) | (_, Err(e)) => Some(e),
            (Ok(v), Ok(json)) => v
                .iter_errors(&json)
                .next()
                .map(|e| format!("{e}{}", at_path(&e.instance_path().to_string()))),
        };
        if let Some(problem) = problem {
            failures.push(Failure::new(
                "the reply is JSON valid against the given schema",
                format!("{problem}\n{}", shown()),
            ));
        }
    }
    failures
}

impl Outcome {
    /// The exit status `lrg run` ends with for this outcome: 0 replied, 1 a
    /// model or tool error, 3 stopped, out of steps, or out of time.
    pub fn exit_status(self) -> u8 {
        match self {
            Outcome::Replied => 0,
            Outcome::Failed => 1,
            Outcome::Stopped | Outcome::StepsExhausted | Outcome::TimedOut => 3,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    #[test]
    fn subset_is_recursive_and_equal_is_strict() {
        let args = json!({"a": 1, "b": {"c": 2, "d": 3}});
        assert!(is_subset(&json!({"b": {"c": 2}}), &args));
        assert!(!is_subset(&json!({"b": {"c": 3}}), &args));
        assert!(!is_subset(&json!({"z": 1}), &args));
        let mut call = CallExpectation::new("t");
        call.args = Some(json!({"a": 1}));
        call.match_ = ArgsMatch::Equal;
        assert!(argument_mismatch(&call, &args).is_some());
    }

    #[test]
    fn regex_per_field_and_pointer() {
        let mut call = CallExpectation::new("t");
        call.args_regex.insert("/b/c".into(), "^2$".into());
        call.args_regex.insert("name".into(), "^no".into());
        let args = json!({"name": "notes", "b": {"c": 2}});
        assert_eq!(argument_mismatch(&call, &args), None);
        let args = json!({"name": "other", "b": {"c": 2}});
        assert!(argument_mismatch(&call, &args).unwrap().contains("name"));
    }

    #[test]
    fn fenced_json_reply_is_read() {
        assert_eq!(
            reply_json("```json\n{\"a\":1}\n```").unwrap(),
            json!({"a":1})
        );
        assert_eq!(reply_json(" [1] ").unwrap(), json!([1]));
        assert!(reply_json("hello").is_err());
    }

    #[test]
    fn a_bad_regex_or_schema_is_named() {
        let mut e = Expectations::default();
        let mut call = CallExpectation::new("t");
        call.args_regex.insert("x".into(), "(".into());
        e.calls.push(call);
        let err = e.validate().unwrap_err();
        assert_eq!(err.field, "calls[0].args_regex.x");
        let e = Expectations {
            reply: Some(ReplyExpectation {
                schema: Some(json!({"type": 12})),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(e.validate().unwrap_err().field, "reply.schema");
    }
}
