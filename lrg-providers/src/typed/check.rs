//! Checking an answer against its schema, and saying what is wrong in words a
//! model can act on.

use serde_json::{Map, Value};

use super::extract::extract_json;
use super::output_schema::OutputSchema;
use super::strict::WRAP_KEY;

/// Problems listed before "and N more": a repair turn needs the first few,
/// not hundreds.
const MAX_LISTED: usize = 8;
/// Longest problem line: a validator quotes the offending value.
const MAX_LINE_CHARS: usize = 300;
/// Deepest schema walk when dropping `null`s (the schema's own nesting is
/// bounded by its size; references can loop).
const MAX_WALK_DEPTH: usize = 64;

/// Why an answer is not a valid typed answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the answer does not match its schema: {}", errors.join("; "))]
#[non_exhaustive]
pub struct AnswerProblems {
    /// One line per problem, naming where it is:
    /// ``"`priority`: 7 is greater than the maximum of 5"``, or
    /// `"the answer holds no JSON value"`.
    pub errors: Vec<String>,
}

/// What a repair turn tells the model: its answer's problems, and to answer
/// again with only the JSON.
pub fn repair_prompt(errors: &[String]) -> String {
    let mut prompt = String::from("Your answer does not match the required JSON Schema:\n");
    for error in errors {
        prompt.push_str("- ");
        prompt.push_str(error);
        prompt.push('\n');
    }
    prompt.push_str(
        "Answer again with only the corrected JSON value, nothing before or after it. \
         Do not call any tool.",
    );
    prompt
}

pub(super) fn check(schema: &OutputSchema, text: &str) -> Result<Value, AnswerProblems> {
    let Some(mut value) = extract_json(text) else {
        return Err(AnswerProblems {
            errors: vec![if text.trim().is_empty() {
                "the answer is empty: it holds no JSON value".to_owned()
            } else {
                "the answer holds no JSON value (write the JSON itself, not a description of it)"
                    .to_owned()
            }],
        });
    };
    let root = schema.schema();
    // A strict API was sent the schema inside `{"answer": ...}` when its
    // root is not an object; a model may also echo that form elsewhere.
    if let Some(inner) = unwrap(&value)
        && schema.validate(&value).is_err()
    {
        value = inner;
    }
    drop_optional_nulls(&mut value, root, root, 0);
    schema
        .validate(&value)
        .map(|()| value)
        .map_err(|errors| AnswerProblems { errors })
}

/// `{"answer": x}` → `x`.
fn unwrap(value: &Value) -> Option<Value> {
    match value {
        Value::Object(map) if map.len() == 1 => map.get(WRAP_KEY).cloned(),
        _ => None,
    }
}

pub(super) fn validate(
    validator: &jsonschema::Validator,
    value: &Value,
) -> Result<(), Vec<String>> {
    let mut errors = Vec::new();
    let mut more = 0usize;
    for error in validator.iter_errors(value) {
        if errors.len() == MAX_LISTED {
            more += 1;
            continue;
        }
        let at = error.instance_path().to_string();
        let line = if at.is_empty() || at == "/" {
            format!("the answer: {error}")
        } else {
            format!("`{}`: {error}", readable_path(&at))
        };
        errors.push(clip(&line));
    }
    if errors.is_empty() {
        return Ok(());
    }
    if more > 0 {
        errors.push(format!("and {more} more"));
    }
    Err(errors)
}

/// `/items/0/name` → `items[0].name`; JSON-pointer escapes resolved.
fn readable_path(pointer: &str) -> String {
    let mut out = String::new();
    for token in pointer.split('/').skip(1) {
        let token = token.replace("~1", "/").replace("~0", "~");
        if !token.is_empty() && token.bytes().all(|b| b.is_ascii_digit()) {
            out.push('[');
            out.push_str(&token);
            out.push(']');
        } else {
            if !out.is_empty() {
                out.push('.');
            }
            out.push_str(&token);
        }
    }
    out
}

fn clip(line: &str) -> String {
    crate::text::clip(line, MAX_LINE_CHARS)
}

/// Drops `null` from every property the schema leaves optional and does not
/// itself allow to be `null`: strict shaping made such properties required
/// and nullable, so a strict API writes `null` for "left out".
fn drop_optional_nulls(value: &mut Value, schema: &Value, root: &Value, depth: usize) {
    if depth > MAX_WALK_DEPTH {
        return;
    }
    let Some(schema) = resolve(schema, root) else {
        return;
    };
    match value {
        Value::Object(object) => {
            let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
                return;
            };
            let required = required_of(schema);
            object.retain(|key, v| {
                !(v.is_null()
                    && !required.contains(&key.as_str())
                    && properties
                        .get(key)
                        .is_some_and(|p| !allows_null(p, root, depth + 1)))
            });
            for (key, v) in object.iter_mut() {
                if let Some(property) = properties.get(key) {
                    drop_optional_nulls(v, property, root, depth + 1);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item) = schema.get("items").filter(|i| i.is_object()) {
                for v in items {
                    drop_optional_nulls(v, item, root, depth + 1);
                }
            }
        }
        _ => {}
    }
}

fn required_of(schema: &Map<String, Value>) -> Vec<&str> {
    schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// The object a (sub)schema is, following a local `$ref`.
fn resolve<'v>(schema: &'v Value, root: &'v Value) -> Option<&'v Map<String, Value>> {
    let mut schema = schema;
    // A chain of references, bounded like every walk here.
    for _ in 0..MAX_WALK_DEPTH {
        let map = schema.as_object()?;
        match map.get("$ref").and_then(Value::as_str) {
            Some(reference) => schema = pointer(root, reference)?,
            None => return Some(map),
        }
    }
    None
}

fn pointer<'v>(root: &'v Value, reference: &str) -> Option<&'v Value> {
    let path = reference.strip_prefix('#')?;
    if path.is_empty() {
        return Some(root);
    }
    root.pointer(path)
}

/// Whether a property's own schema admits `null` (then a `null` is an
/// answer, not a left-out property).
fn allows_null(schema: &Value, root: &Value, depth: usize) -> bool {
    if depth > MAX_WALK_DEPTH {
        return true;
    }
    if schema == &Value::Bool(true) {
        return true;
    }
    let Some(map) = resolve(schema, root) else {
        return true;
    };
    let typed_null = match map.get("type") {
        Some(Value::String(t)) => t == "null",
        Some(Value::Array(ts)) => ts.iter().any(|t| t == "null"),
        None => !map.contains_key("enum") && !map.contains_key("const") && !has_choice(map),
        _ => false,
    };
    typed_null
        || map
            .get("enum")
            .and_then(Value::as_array)
            .is_some_and(|e| e.contains(&Value::Null))
        || map.get("const") == Some(&Value::Null)
        || ["anyOf", "oneOf"].iter().any(|k| {
            map.get(*k)
                .and_then(Value::as_array)
                .is_some_and(|parts| parts.iter().any(|p| allows_null(p, root, depth + 1)))
        })
}

fn has_choice(map: &Map<String, Value>) -> bool {
    ["anyOf", "oneOf", "allOf"]
        .iter()
        .any(|k| map.contains_key(*k))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn schema(value: Value) -> OutputSchema {
        OutputSchema::new(value).unwrap()
    }

    #[test]
    fn problems_are_named_by_where_they_are() {
        let s = schema(json!({
            "type": "object",
            "properties": {
                "priority": {"type": "integer", "maximum": 5},
                "steps": {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}}
            },
            "required": ["priority"]
        }));
        let problems = s
            .check(r#"{"priority": 7, "steps": [{"name": "a"}, {}]}"#)
            .unwrap_err();
        assert_eq!(
            problems.errors,
            [
                "`priority`: 7 is greater than the maximum of 5",
                "`steps[1]`: \"name\" is a required property"
            ]
        );
        let root = s.check("[1]").unwrap_err();
        assert_eq!(root.errors, [r#"the answer: [1] is not of type "object""#]);
    }

    #[test]
    fn nulls_of_optional_properties_are_dropped_but_meant_nulls_kept() {
        let s = schema(json!({
            "type": "object",
            "$defs": {"Note": {"type": "object", "properties": {"by": {"type": "string"}}}},
            "properties": {
                "label": {"type": "string"},
                "note": {"$ref": "#/$defs/Note"},
                "notes": {"type": "array", "items": {"$ref": "#/$defs/Note"}},
                "maybe": {"type": ["string", "null"]},
                "needed": {"type": "string"}
            },
            "required": ["needed"],
            "additionalProperties": false
        }));
        let value = s
            .check(r#"{"label": null, "note": {"by": null}, "notes": [{"by": null}], "maybe": null, "needed": "x"}"#)
            .unwrap();
        assert_eq!(
            value,
            json!({"note": {}, "notes": [{}], "maybe": null, "needed": "x"})
        );
        // A required property's null is the model's mistake, not dropped.
        let problems = s.check(r#"{"needed": null}"#).unwrap_err();
        assert_eq!(
            problems.errors,
            [r#"`needed`: null is not of type "string""#]
        );
    }

    #[test]
    fn a_wrapped_non_object_root_is_unwrapped() {
        let s = schema(json!({"type": "array", "items": {"type": "integer"}}));
        assert_eq!(s.check(r#"{"answer": [1, 2]}"#).unwrap(), json!([1, 2]));
        assert_eq!(s.check("[3]").unwrap(), json!([3]));
        // An object root that has an `answer` property is left as it is.
        let o = schema(json!({"type": "object", "properties": {"answer": {"type": "string"}}}));
        assert_eq!(
            o.check(r#"{"answer": "x"}"#).unwrap(),
            json!({"answer": "x"})
        );
    }

    #[test]
    fn no_json_says_so() {
        let s = schema(json!({"type": "object"}));
        assert!(s.check("I think it is a bug.").unwrap_err().errors[0].contains("no JSON"));
        assert!(s.check("  ").unwrap_err().errors[0].contains("empty"));
    }

    #[test]
    fn many_problems_are_capped() {
        let s = schema(json!({"type": "array", "items": {"type": "string"}}));
        let problems = s
            .check(&format!("[{}]", vec!["1"; 20].join(",")))
            .unwrap_err();
        assert_eq!(problems.errors.len(), MAX_LISTED + 1);
        assert_eq!(problems.errors.last().unwrap(), "and 12 more");
    }

    #[test]
    fn the_repair_prompt_lists_the_problems() {
        let prompt = repair_prompt(&["`a`: 1 is not a string".into()]);
        assert!(prompt.contains("- `a`: 1 is not a string\n"));
        assert!(prompt.contains("only the corrected JSON"));
    }
}
