//! Rewriting a portable schema into the OpenAPI 3.0 subset Gemini's
//! `functionDeclarations[].parameters` accepts. The list of what changes is in
//! the module docs of [`schema`](super).

use serde_json::{Map, Value, json};

use super::error::{SchemaError, json_type};
use super::merge::{Fold, fold_all_of};
use super::path::{Path, check_schema_depth};
use super::validate::{non_negative, type_list};

/// How many values of a non-string `enum` are listed in the description.
const LISTED_VALUES: usize = 20;

/// Rewrites an inlined, flattened root object for Gemini.
pub(crate) fn gemini_root(root: Map<String, Value>) -> Result<Value, SchemaError> {
    let mut cleaned = clean_object(root, &Path::ROOT, 0)?;
    if let Value::Object(map) = &mut cleaned {
        map.insert("type".to_owned(), Value::String("object".to_owned()));
        map.remove("nullable");
    }
    Ok(cleaned)
}

fn clean(node: Value, path: &Path<'_>, depth: usize) -> Result<Value, SchemaError> {
    check_schema_depth(depth, path)?;
    match node {
        // Gemini has no boolean schemas; `{}` is its "anything". `false` cannot
        // be said at all and is relaxed to the same.
        Value::Bool(_) => Ok(Value::Object(Map::new())),
        Value::Object(map) => clean_object(map, path, depth),
        other => Err(SchemaError::NotAnObject {
            path: path.render(),
            found: json_type(&other),
        }),
    }
}

fn clean_object(
    mut map: Map<String, Value>,
    path: &Path<'_>,
    depth: usize,
) -> Result<Value, SchemaError> {
    fold_all_of(&mut map, Fold::Relaxed);
    map.remove("allOf");
    let mut nullable = map.get("nullable") == Some(&Value::Bool(true));
    let mut types = type_list(&map, path)?.unwrap_or_default();
    if types.iter().any(|t| t == "null") {
        nullable = true;
        types.retain(|t| t != "null");
    }
    if types.len() > 1 {
        // Several types: one alternative per type, each with the keywords of its type.
        let at = path.key("type");
        let mut alternatives = Vec::with_capacity(types.len());
        for (index, name) in types.iter().enumerate() {
            let mut single = map.clone();
            single.insert("type".to_owned(), Value::String(name.clone()));
            single.remove("nullable");
            single.remove("description");
            single.remove("title");
            alternatives.push(clean_object(single, &at.index(index), depth + 1)?);
        }
        let mut out = Map::new();
        copy_description(&map, &mut out);
        if nullable {
            out.insert("nullable".to_owned(), Value::Bool(true));
        }
        out.insert("anyOf".to_owned(), Value::Array(alternatives));
        return Ok(Value::Object(out));
    }
    let mut kind = types.pop();
    if kind.is_none() {
        kind = inferred_type(&map);
    }

    let mut out = Map::new();
    if let Some(kind) = &kind {
        out.insert("type".to_owned(), Value::String(kind.clone()));
    }
    copy_description(&map, &mut out);
    let mut extra_notes = Vec::new();

    // `const` is a one-value `enum`; Gemini's `enum` holds strings only.
    let values = match (map.remove("enum"), map.remove("const")) {
        (Some(Value::Array(values)), _) => Some(values),
        (_, Some(value)) => Some(vec![value]),
        _ => None,
    };
    if let Some(mut values) = values {
        if values.iter().any(Value::is_null) {
            nullable = true;
            values.retain(|v| !v.is_null());
        }
        let strings = values.iter().all(Value::is_string);
        if strings && !values.is_empty() && kind.as_deref().is_none_or(|k| k == "string") {
            out.insert("type".to_owned(), Value::String("string".to_owned()));
            out.insert("enum".to_owned(), Value::Array(values));
            kind = Some("string".to_owned());
        } else if !values.is_empty() {
            let listed: Vec<String> = values
                .iter()
                .take(LISTED_VALUES)
                .map(Value::to_string)
                .collect();
            let more = if values.len() > LISTED_VALUES {
                ", ..."
            } else {
                ""
            };
            extra_notes.push(format!("One of: {}{more}.", listed.join(", ")));
        }
    }
    if nullable {
        out.insert("nullable".to_owned(), Value::Bool(true));
    }
    if let Some(Value::String(format)) = map.get("format") {
        let allowed = match kind.as_deref() {
            Some("string") => matches!(format.as_str(), "enum" | "date-time"),
            Some("integer") => matches!(format.as_str(), "int32" | "int64"),
            Some("number") => matches!(format.as_str(), "float" | "double"),
            _ => false,
        };
        if allowed {
            out.insert("format".to_owned(), Value::String(format.clone()));
        }
    }

    match kind.as_deref() {
        Some("object") => object_keywords(&mut map, &mut out, path, depth)?,
        Some("array") => array_keywords(&mut map, &mut out, path, depth)?,
        Some("string") => {
            copy_counts(&map, &mut out, path, &["minLength", "maxLength"])?;
            if let Some(Value::String(pattern)) = map.get("pattern") {
                out.insert("pattern".to_owned(), Value::String(pattern.clone()));
            }
        }
        Some("number" | "integer") => {
            for (bound, exclusive) in [
                ("minimum", "exclusiveMinimum"),
                ("maximum", "exclusiveMaximum"),
            ] {
                // An exclusive bound (2019-09 form: a number) is kept as an
                // inclusive one: slightly looser, never tighter.
                let value = map
                    .get(bound)
                    .filter(|v| v.is_number())
                    .or(map.get(exclusive).filter(|v| v.is_number()));
                if let Some(value) = value {
                    out.insert(bound.to_owned(), value.clone());
                }
            }
        }
        _ => {}
    }

    let alternatives = match (map.remove("anyOf"), map.remove("oneOf")) {
        (Some(any), _) => Some(("anyOf", any)),
        (None, Some(one)) => Some(("oneOf", one)),
        (None, None) => None,
    };
    if let Some((keyword, Value::Array(parts))) = alternatives {
        let at = path.key(keyword);
        let mut cleaned = Vec::with_capacity(parts.len());
        for (index, part) in parts.into_iter().enumerate() {
            if is_null_only(&part) {
                out.insert("nullable".to_owned(), Value::Bool(true));
                continue;
            }
            let part = clean(part, &at.index(index), depth + 1)?;
            if !cleaned.contains(&part) {
                cleaned.push(part);
            }
        }
        let only_annotations = out
            .keys()
            .all(|k| matches!(k.as_str(), "description" | "nullable"));
        match cleaned.len() {
            0 => {}
            // `Option<T>` as `anyOf: [T, null]`: just T, nullable.
            1 if only_annotations => {
                if let Some(Value::Object(single)) = cleaned.pop() {
                    for (key, value) in single {
                        out.entry(key).or_insert(value);
                    }
                }
            }
            _ => {
                out.insert("anyOf".to_owned(), Value::Array(cleaned));
            }
        }
    }

    if !extra_notes.is_empty() {
        let note = extra_notes.join(" ");
        let description = match out.get("description") {
            Some(Value::String(text)) if !text.is_empty() => format!("{text} {note}"),
            _ => note,
        };
        out.insert("description".to_owned(), Value::String(description));
    }
    Ok(Value::Object(out))
}

fn object_keywords(
    map: &mut Map<String, Value>,
    out: &mut Map<String, Value>,
    path: &Path<'_>,
    depth: usize,
) -> Result<(), SchemaError> {
    let mut names = Vec::new();
    if let Some(Value::Object(properties)) = map.remove("properties") {
        let at = path.key("properties");
        let mut cleaned = Map::new();
        for (name, schema) in properties {
            let value = clean(schema, &at.key(&name), depth + 1)?;
            names.push(name.clone());
            cleaned.insert(name, value);
        }
        // Gemini refuses an OBJECT whose `properties` is empty; leaving it out
        // is accepted.
        if !cleaned.is_empty() {
            out.insert("properties".to_owned(), Value::Object(cleaned));
        }
    }
    if let Some(Value::Array(required)) = map.get("required") {
        // Gemini refuses a required name that is not a declared property.
        let known: Vec<Value> = required
            .iter()
            .filter(|name| name.as_str().is_some_and(|n| names.iter().any(|k| k == n)))
            .cloned()
            .collect();
        if !known.is_empty() {
            out.insert("required".to_owned(), Value::Array(known));
        }
    }
    copy_counts(map, out, path, &["minProperties", "maxProperties"])
}

fn array_keywords(
    map: &mut Map<String, Value>,
    out: &mut Map<String, Value>,
    path: &Path<'_>,
    depth: usize,
) -> Result<(), SchemaError> {
    let items = match (map.remove("prefixItems"), map.remove("items")) {
        // A tuple: Gemini has none; each item may be any of the tuple's parts.
        (Some(Value::Array(parts)), _) | (None, Some(Value::Array(parts))) => {
            let at = path.key("items");
            let mut cleaned = Vec::with_capacity(parts.len());
            for (index, part) in parts.into_iter().enumerate() {
                let part = clean(part, &at.index(index), depth + 1)?;
                if !cleaned.contains(&part) {
                    cleaned.push(part);
                }
            }
            match cleaned.len() {
                0 => Value::Object(Map::new()),
                1 => cleaned.remove(0),
                _ => json!({ "anyOf": cleaned }),
            }
        }
        (_, Some(items)) => clean(items, &path.key("items"), depth + 1)?,
        // Gemini wants `items` on every ARRAY.
        _ => Value::Object(Map::new()),
    };
    out.insert("items".to_owned(), items);
    copy_counts(map, out, path, &["minItems", "maxItems"])
}

/// Copies count keywords (`minItems`, ...) that hold valid values.
fn copy_counts(
    map: &Map<String, Value>,
    out: &mut Map<String, Value>,
    path: &Path<'_>,
    keywords: &[&str],
) -> Result<(), SchemaError> {
    for keyword in keywords {
        if let Some(value) = map.get(*keyword) {
            out.insert(
                (*keyword).to_owned(),
                Value::from(non_negative(value, path, keyword)?),
            );
        }
    }
    Ok(())
}

/// Keeps `description`, or `title` when there is no description (Gemini has no
/// use for titles, but a model does).
fn copy_description(map: &Map<String, Value>, out: &mut Map<String, Value>) {
    let text = match (map.get("description"), map.get("title")) {
        (Some(Value::String(text)), _) | (None, Some(Value::String(text))) => text,
        _ => return,
    };
    out.insert("description".to_owned(), Value::String(text.clone()));
}

fn inferred_type(map: &Map<String, Value>) -> Option<String> {
    let has = |keywords: &[&str]| keywords.iter().any(|k| map.contains_key(*k));
    let name = if has(&["properties", "required", "additionalProperties"]) {
        "object"
    } else if has(&["items", "prefixItems", "minItems", "maxItems"]) {
        "array"
    } else if has(&["minLength", "maxLength", "pattern"]) {
        "string"
    } else {
        return None;
    };
    Some(name.to_owned())
}

fn is_null_only(schema: &Value) -> bool {
    schema.as_object().is_some_and(|map| {
        map.get("type")
            .is_some_and(|t| t == "null" || *t == json!(["null"]))
            && map
                .keys()
                .all(|k| k == "type" || k == "description" || k == "title")
    })
}
