//! Checking arguments against a tool's input schema before the call, and
//! telling the model what was wrong *and* what the schema expects.
//!
//! Small models do not look back in context for a tool's schema, so the error
//! repeats it in a compact form: one entry per argument, `name` (required or
//! not), its type, the allowed values of an enum, and one level of nesting.

use std::fmt::Write as _;

use lrg_providers::{Part, ToolSpec};
use serde_json::{Map, Value};

use super::ToolOutput;

/// How many problems are listed before "and N more".
const MAX_LISTED_ERRORS: usize = 5;
/// How deep nested objects and arrays are spelled out.
const MAX_DEPTH: usize = 2;
/// Enum values listed before "...".
const MAX_ENUM_VALUES: usize = 12;

/// A compiled input schema for one tool.
pub struct ArgumentCheck {
    validator: Option<jsonschema::Validator>,
    expected: String,
}

impl std::fmt::Debug for ArgumentCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ArgumentCheck")
            .field("validates", &self.validator.is_some())
            .field("expected", &self.expected)
            .finish()
    }
}

impl ArgumentCheck {
    /// Compile `schema`. A schema that does not compile (a server's mistake,
    /// or a reference this build cannot resolve) is not enforced: the
    /// server still checks its own arguments, so the tool stays usable.
    pub fn new(tool: &str, schema: &Value) -> Self {
        let validator = match jsonschema::validator_for(schema) {
            Ok(v) => Some(v),
            Err(e) => {
                tracing::warn!(tool, error = %e, "tool input schema does not compile; arguments are not checked");
                None
            }
        };
        Self {
            validator,
            expected: describe_arguments(schema),
        }
    }

    /// The compact description of the expected arguments.
    pub fn expected(&self) -> &str {
        &self.expected
    }

    /// `Ok` when `args` fit the schema, else the message for the model.
    pub fn check(&self, tool: &str, args: &Value) -> Result<(), String> {
        let Some(validator) = &self.validator else {
            return Ok(());
        };
        let mut problems: Vec<String> = Vec::new();
        let mut more = 0usize;
        for error in validator.iter_errors(args) {
            if problems.len() == MAX_LISTED_ERRORS {
                more += 1;
                continue;
            }
            let path = error.instance_path().to_string();
            let line = if path.is_empty() || path == "/" {
                error.to_string()
            } else {
                format!("at {path}: {error}")
            };
            problems.push(truncate(&line, 300));
        }
        if problems.is_empty() {
            return Ok(());
        }
        Err(self.message(tool, &problems, more))
    }

    /// The message for arguments that are not even a JSON object.
    pub fn not_an_object(&self, tool: &str, args: &Value) -> String {
        let found = match args {
            Value::Array(_) => "an array",
            Value::String(_) => "a string",
            Value::Number(_) => "a number",
            Value::Bool(_) => "a boolean",
            Value::Null => "null",
            Value::Object(_) => "an object",
        };
        self.message(
            tool,
            &[format!(
                "the arguments must be a JSON object, found {found}"
            )],
            0,
        )
    }

    fn message(&self, tool: &str, problems: &[String], more: usize) -> String {
        let mut out = format!("Invalid arguments for tool `{tool}`:\n");
        for p in problems {
            let _ = writeln!(out, "- {p}");
        }
        if more > 0 {
            let _ = writeln!(out, "- and {more} more");
        }
        let _ = write!(out, "{}", self.expected);
        out.push_str("\nCall the tool again with arguments that match.");
        out
    }
}

/// Most characters of the expected arguments a runtime error repeats.
pub const TEACH_CAP: usize = 500;

/// The start of [`ArgumentCheck`]'s own messages, which already say what
/// the schema expects.
const INVALID_PREFIX: &str = "Invalid arguments for tool `";

/// A tool's own runtime error, followed by what the model can do about it:
/// the tool's expected arguments (at most [`TEACH_CAP`] characters) and one
/// line on what to try. Small models do not look back for the schema, and
/// a wrong argument often surfaces as "not found" or "permission denied",
/// so the error text is not second-guessed by its words. Left as it is:
/// a success; a stopped message (`stopped`); an error with a warning (the
/// server died, timed out or was restarted: lrg's side, not the
/// arguments); the argument check's own message (it already teaches); and
/// a tool that takes no arguments (there is nothing to correct).
pub(crate) fn teach_runtime_error(spec: &ToolSpec, output: &mut ToolOutput, stopped: bool) {
    if !output.is_error
        || stopped
        || output.warning.is_some()
        || !takes_arguments(&spec.input_schema)
    {
        return;
    }
    let own_check = output
        .parts
        .iter()
        .any(|p| matches!(p, Part::Text { text } if text.starts_with(INVALID_PREFIX)));
    if own_check {
        return;
    }
    let name = &spec.name;
    let hint = format!(
        "\n\n{}\nNext: if the error is about the arguments, call `{name}` again with corrected ones; \
         if not, do not repeat the call: do the task another way or tell the user.",
        truncate(&describe_arguments(&spec.input_schema), TEACH_CAP)
    );
    match output.parts.iter_mut().rev().find_map(|p| match p {
        Part::Text { text } => Some(text),
        _ => None,
    }) {
        Some(text) => text.push_str(&hint),
        None => output.parts.push(Part::text(hint.trim_start())),
    }
}

/// Whether the schema names any argument (or alternatives of them).
fn takes_arguments(schema: &Value) -> bool {
    let named = schema
        .get("properties")
        .and_then(Value::as_object)
        .is_some_and(|p| !p.is_empty());
    named || ["oneOf", "anyOf"].iter().any(|k| schema.get(*k).is_some())
}

/// Arguments as an object. `null` means none; a string holding a JSON
/// object (a common slip of small models) is read as that object.
pub(crate) fn normalize_arguments(arguments: Value) -> Result<Map<String, Value>, Value> {
    match arguments {
        Value::Object(m) => Ok(m),
        Value::Null => Ok(Map::new()),
        Value::String(s) => match serde_json::from_str::<Value>(&s) {
            Ok(Value::Object(m)) => Ok(m),
            _ => Err(Value::String(s)),
        },
        other => Err(other),
    }
}

fn truncate(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_owned();
    }
    let mut t: String = s.chars().take(max).collect();
    t.push('…');
    t
}

/// `Expected arguments: a (required): string; b: one of "x", "y"`, or a note
/// that the tool takes none.
pub fn describe_arguments(schema: &Value) -> String {
    let root = schema;
    let props = schema.get("properties").and_then(Value::as_object);
    let required = required_of(schema);
    match props {
        Some(p) if !p.is_empty() => {
            let mut out = String::from("Expected arguments: ");
            out.push_str(&describe_properties(root, p, &required, 0, "; "));
            if schema.get("additionalProperties") == Some(&Value::Bool(false)) {
                out.push_str(" (no other arguments)");
            }
            out
        }
        _ => {
            if schema.get("additionalProperties") == Some(&Value::Bool(false)) {
                "Expected arguments: none (pass {}).".to_owned()
            } else {
                let alts = ["oneOf", "anyOf"]
                    .iter()
                    .find_map(|k| schema.get(*k).and_then(Value::as_array));
                match alts {
                    Some(alts) => format!(
                        "Expected arguments: {}",
                        alts.iter()
                            .map(|a| format!("{{{}}}", describe_object(root, a, 0)))
                            .collect::<Vec<_>>()
                            .join(" or ")
                    ),
                    None => "Expected arguments: an object (the schema names none).".to_owned(),
                }
            }
        }
    }
}

fn required_of(schema: &Value) -> Vec<&str> {
    schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

fn describe_properties(
    root: &Value,
    props: &Map<String, Value>,
    required: &[&str],
    depth: usize,
    sep: &str,
) -> String {
    // Required arguments first: they are what a model most often forgets.
    let mut entries: Vec<(&String, &Value, bool)> = props
        .iter()
        .map(|(k, v)| (k, v, required.contains(&k.as_str())))
        .collect();
    entries.sort_by_key(|(_, _, req)| !*req);
    entries
        .iter()
        .map(|(name, s, req)| {
            let ty = describe_type(root, s, depth + 1);
            if *req {
                format!("{name} (required): {ty}")
            } else {
                format!("{name}: {ty}")
            }
        })
        .collect::<Vec<_>>()
        .join(sep)
}

fn describe_object(root: &Value, schema: &Value, depth: usize) -> String {
    let schema = resolve(root, schema);
    match schema.get("properties").and_then(Value::as_object) {
        Some(p) if !p.is_empty() => describe_properties(root, p, &required_of(schema), depth, ", "),
        _ => String::new(),
    }
}

/// Follow a local `$ref` (`#/$defs/X`, `#/definitions/X`), once.
fn resolve<'a>(root: &'a Value, schema: &'a Value) -> &'a Value {
    match schema.get("$ref").and_then(Value::as_str) {
        Some(r) if r.starts_with("#/") => root.pointer(&r[1..]).unwrap_or(schema),
        _ => schema,
    }
}

fn describe_type(root: &Value, schema: &Value, depth: usize) -> String {
    let schema = resolve(root, schema);
    if let Some(values) = schema.get("enum").and_then(Value::as_array) {
        let mut listed: Vec<String> = values
            .iter()
            .take(MAX_ENUM_VALUES)
            .map(|v| v.to_string())
            .collect();
        if values.len() > MAX_ENUM_VALUES {
            listed.push("...".to_owned());
        }
        return format!("one of {}", listed.join(", "));
    }
    if let Some(c) = schema.get("const") {
        return format!("exactly {c}");
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(alts) = schema.get(key).and_then(Value::as_array) {
            let parts: Vec<String> = alts.iter().map(|a| describe_type(root, a, depth)).collect();
            return dedup(parts).join(" or ");
        }
    }
    if let Some([only]) = schema
        .get("allOf")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
    {
        return describe_type(root, only, depth);
    }
    let types: Vec<&str> = match schema.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => {
            if schema.get("properties").is_some() {
                vec!["object"]
            } else if schema.get("items").is_some() {
                vec!["array"]
            } else {
                vec![]
            }
        }
    };
    if types.is_empty() {
        return "any value".to_owned();
    }
    let parts: Vec<String> = types
        .iter()
        .map(|t| describe_one(root, schema, t, depth))
        .collect();
    parts.join(" or ")
}

fn describe_one(root: &Value, schema: &Value, ty: &str, depth: usize) -> String {
    match ty {
        "array" => match schema.get("items") {
            Some(items) if depth < MAX_DEPTH + 1 => {
                format!("array of {}", describe_type(root, items, depth + 1))
            }
            _ => "array".to_owned(),
        },
        "object" if depth <= MAX_DEPTH => {
            let inner = describe_object(root, schema, depth);
            if inner.is_empty() {
                "object".to_owned()
            } else {
                format!("object {{{inner}}}")
            }
        }
        other => {
            let mut s = other.to_owned();
            // Number formats (`int64`, `uint8`, `double`...) are how schemars
            // spells Rust types: noise for a model. `date-time`, `uri`... help.
            // `null` (of `Option<u32>`: `["integer", "null"]`) has none.
            let numeric = matches!(other, "integer" | "number");
            if let Some(f) = schema
                .get("format")
                .and_then(Value::as_str)
                .filter(|_| !numeric && other != "null")
            {
                let _ = write!(s, " ({f})");
            }
            if numeric {
                let min = schema.get("minimum").and_then(Value::as_f64);
                let max = schema.get("maximum").and_then(Value::as_f64);
                match (min, max) {
                    (Some(lo), Some(hi)) => {
                        let _ = write!(s, " from {lo} to {hi}");
                    }
                    (Some(lo), None) => {
                        let _ = write!(s, " >= {lo}");
                    }
                    (None, Some(hi)) => {
                        let _ = write!(s, " <= {hi}");
                    }
                    (None, None) => {}
                }
            }
            s
        }
    }
}

fn dedup(parts: Vec<String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::with_capacity(parts.len());
    for p in parts {
        if !out.contains(&p) {
            out.push(p);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn describes_required_first_with_types_and_enums() {
        let schema = json!({
            "type": "object",
            "properties": {
                "mode": {"type": "string", "enum": ["fast", "slow"]},
                "ids": {"type": "array", "items": {"type": "integer"}},
                "note": {"type": ["string", "null"]}
            },
            "required": ["ids"]
        });
        assert_eq!(
            describe_arguments(&schema),
            "Expected arguments: ids (required): array of integer; mode: one of \"fast\", \"slow\"; note: string or null"
        );
    }

    #[test]
    fn follows_local_refs_and_nests_objects() {
        let schema = json!({
            "type": "object",
            "properties": {"target": {"$ref": "#/$defs/Target"}},
            "required": ["target"],
            "$defs": {"Target": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}
        });
        assert_eq!(
            describe_arguments(&schema),
            "Expected arguments: target (required): object {path (required): string}"
        );
    }

    #[test]
    fn reports_what_was_wrong_and_what_is_expected() {
        let schema = json!({
            "type": "object",
            "properties": {"ids": {"type": "array", "items": {"type": "integer"}}},
            "required": ["ids"]
        });
        let check = ArgumentCheck::new("delete_items", &schema);
        assert!(check.check("delete_items", &json!({"ids": [1, 2]})).is_ok());
        let msg = check
            .check("delete_items", &json!({"ids": ["a"]}))
            .unwrap_err();
        assert!(
            msg.contains("Invalid arguments for tool `delete_items`"),
            "{msg}"
        );
        assert!(msg.contains("/ids/0"), "{msg}");
        assert!(msg.contains("integer"), "{msg}");
        assert!(
            msg.contains("Expected arguments: ids (required): array of integer"),
            "{msg}"
        );
        let msg = check.check("delete_items", &json!({})).unwrap_err();
        assert!(msg.contains("\"ids\" is a required property"), "{msg}");
    }

    #[test]
    fn a_schema_that_does_not_compile_is_not_enforced() {
        let check = ArgumentCheck::new("t", &json!({"type": 12}));
        assert!(check.check("t", &json!({"anything": true})).is_ok());
    }
}
