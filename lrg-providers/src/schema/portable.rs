//! [`portable_tool_schema`]: tool schemas in a form every cloud API accepts.

use serde_json::{Map, Value};

use super::error::{SchemaError, json_type};
use super::gemini;
use super::merge::{Fold, fold_all_of};
use super::path::Path;
use super::refs::inline_refs;
use super::validate::{require_root_object, string_list, type_list};

/// Which cloud API a portable schema is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SchemaTarget {
    /// OpenAI's `tools[].function.parameters` (non-strict mode).
    OpenAi,
    /// Anthropic's `tools[].input_schema`.
    Anthropic,
    /// Gemini's `functionDeclarations[].parameters` (its OpenAPI 3.0 subset).
    Gemini,
}

/// Shapes a tool's input schema for a cloud API.
///
/// For every target: `$ref`s inlined and `$defs`/`definitions` removed (Gemini
/// follows no references, and an inlined schema reads the same everywhere); no
/// `oneOf`/`anyOf`/`allOf` at the top level (OpenAI and Anthropic refuse them
/// there): `allOf` parts are folded into the root object, and the alternatives of
/// `anyOf`/`oneOf` are relaxed into one object holding every alternative's
/// properties and requiring only what all of them require (a choice between
/// arguments is stated in the root's `description` instead); the root is always
/// `{"type": "object", "properties": {...}}`. A root that describes something
/// other than an object is an error.
///
/// For [`SchemaTarget::Gemini`], the schema is also rewritten into the subset its
/// `parameters` field accepts; see the [module docs](super) for what that means.
pub fn portable_tool_schema(schema: &Value, target: SchemaTarget) -> Result<Value, SchemaError> {
    require_root_object(schema)?;
    let mut root = match inline_refs(schema)? {
        Value::Object(map) => map,
        other => {
            return Err(SchemaError::NotAnObject {
                path: String::new(),
                found: json_type(&other),
            });
        }
    };
    flatten_top_level(&mut root)?;
    object_root(&mut root)?;
    match target {
        SchemaTarget::OpenAi | SchemaTarget::Anthropic => Ok(Value::Object(root)),
        SchemaTarget::Gemini => gemini::gemini_root(root),
    }
}

/// Removes `allOf`, `anyOf` and `oneOf` from the top level, keeping as much of
/// what they said as one object can.
fn flatten_top_level(root: &mut Map<String, Value>) -> Result<(), SchemaError> {
    fold_all_of(root, Fold::Relaxed);
    let mut notes = Vec::new();
    for keyword in ["oneOf", "anyOf"] {
        let Some(parts) = root.remove(keyword) else {
            continue;
        };
        let Value::Array(parts) = parts else {
            return Err(SchemaError::InvalidKeyword {
                path: String::new(),
                keyword: keyword.to_owned(),
                reason: format!("must be an array of schemas, found {}", json_type(&parts)),
            });
        };
        if let Some(note) = choice_note(keyword, &parts) {
            notes.push(note);
        }
        relax_alternatives(root, parts, &Path::ROOT.key(keyword))?;
    }
    // Alternatives may have brought their own allOf parts along.
    fold_all_of(root, Fold::Relaxed);
    root.remove("allOf");
    if !notes.is_empty() {
        let note = notes.join(" ");
        let description = match root.get("description") {
            Some(Value::String(existing)) if !existing.is_empty() => {
                format!("{existing}\n\n{note}")
            }
            _ => note,
        };
        root.insert("description".to_owned(), Value::String(description));
    }
    Ok(())
}

/// Adds the properties of every alternative to `root`, and requires the names
/// every alternative requires.
fn relax_alternatives(
    root: &mut Map<String, Value>,
    parts: Vec<Value>,
    path: &Path<'_>,
) -> Result<(), SchemaError> {
    let mut merged: Map<String, Value> = Map::new();
    let mut required_by_all: Option<Vec<Value>> = None;
    for (index, part) in parts.into_iter().enumerate() {
        let Value::Object(mut part) = part else {
            // `true` allows anything (requires nothing); `false` adds nothing.
            if part == Value::Bool(true) {
                required_by_all = Some(Vec::new());
            }
            continue;
        };
        fold_all_of(&mut part, Fold::Relaxed);
        let required = match part.get("required") {
            Some(value) => string_list(value, &path.index(index), "required")?
                .into_iter()
                .map(|name| Value::String(name.to_owned()))
                .collect(),
            None => Vec::new(),
        };
        required_by_all = Some(match required_by_all {
            None => required,
            Some(all) => all
                .into_iter()
                .filter(|name| required.contains(name))
                .collect(),
        });
        if let Some(Value::Object(properties)) = part.remove("properties") {
            for (name, schema) in properties {
                match merged.get_mut(&name) {
                    None => {
                        merged.insert(name, schema);
                    }
                    Some(existing) if *existing == schema => {}
                    Some(existing) => add_alternative(existing, schema),
                }
            }
        }
    }
    let properties = match root.entry("properties") {
        serde_json::map::Entry::Vacant(entry) => entry.insert(Value::Object(Map::new())),
        serde_json::map::Entry::Occupied(entry) => entry.into_mut(),
    };
    if let Value::Object(properties) = properties {
        for (name, schema) in merged {
            // The root's own declaration of a property holds in every alternative.
            properties.entry(name).or_insert(schema);
        }
    }
    let required_by_all = required_by_all.unwrap_or_default();
    if !required_by_all.is_empty() {
        let required = root
            .entry("required")
            .or_insert_with(|| Value::Array(Vec::new()));
        if let Value::Array(required) = required {
            for name in required_by_all {
                if !required.contains(&name) {
                    required.push(name);
                }
            }
        }
    }
    Ok(())
}

/// Makes `existing` also accept what `schema` accepts.
fn add_alternative(existing: &mut Value, schema: Value) {
    if existing_is_union(existing)
        && let Some(Value::Array(options)) = existing.get_mut("anyOf")
    {
        if !options.contains(&schema) {
            options.push(schema);
        }
        return;
    }
    let first = existing.take();
    *existing = Value::Object(Map::from_iter([(
        "anyOf".to_owned(),
        Value::Array(vec![first, schema]),
    )]));
}

fn existing_is_union(value: &Value) -> bool {
    value
        .as_object()
        .is_some_and(|map| map.len() == 1 && map.contains_key("anyOf"))
}

/// "Give exactly one of: `path`, `url`." for a choice between arguments.
fn choice_note(keyword: &str, parts: &[Value]) -> Option<String> {
    let mut groups = Vec::with_capacity(parts.len());
    for part in parts {
        let part = part.as_object()?;
        if part
            .keys()
            .any(|key| key != "required" && key != "description" && key != "title")
        {
            return None;
        }
        let names: Vec<String> = part
            .get("required")?
            .as_array()?
            .iter()
            .map(|n| n.as_str().map(|n| format!("`{n}`")))
            .collect::<Option<_>>()?;
        if names.is_empty() {
            return None;
        }
        groups.push(names.join(" with "));
    }
    if groups.len() < 2 {
        return None;
    }
    let how = if keyword == "oneOf" {
        "exactly one"
    } else {
        "at least one"
    };
    Some(format!("Give {how} of: {}.", groups.join(", ")))
}

/// Makes the root `{"type": "object", "properties": {...}}`, or says why it
/// cannot be.
fn object_root(root: &mut Map<String, Value>) -> Result<(), SchemaError> {
    match type_list(root, &Path::ROOT)? {
        None => {}
        Some(types) if types.iter().any(|t| t == "object") => {}
        Some(types) => {
            return Err(SchemaError::InvalidKeyword {
                path: String::new(),
                keyword: "type".to_owned(),
                reason: format!(
                    "a tool's input must be an object, this schema describes {}",
                    types.join(" or ")
                ),
            });
        }
    }
    root.insert("type".to_owned(), Value::String("object".to_owned()));
    match root.get("properties") {
        None => {
            root.insert("properties".to_owned(), Value::Object(Map::new()));
        }
        Some(Value::Object(_)) => {}
        Some(other) => {
            return Err(SchemaError::InvalidKeyword {
                path: String::new(),
                keyword: "properties".to_owned(),
                reason: format!("must be an object, found {}", json_type(other)),
            });
        }
    }
    Ok(())
}
