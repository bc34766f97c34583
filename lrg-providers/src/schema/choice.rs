//! [`split_choice`]: "exactly one of these arguments" as separate schemas.

use serde_json::{Map, Value};

use super::error::SchemaError;
use super::keywords::is_annotation;
use super::path::{Path, drop_flat};
use super::validate::{require_root_object, string_list};

/// Splits a tool schema whose top level says "exactly one of these arguments"
/// into one closed object schema per choice.
///
/// The form recognised is a top-level `oneOf` (or `anyOf`, which is what
/// [`grammar_schema`](super::grammar_schema) turns it into) of at least two
/// parts that only list `required` names, with no name in two parts:
/// `{"properties": {"path": ..., "url": ..., "depth": ...}, "oneOf":
/// [{"required": ["path"]}, {"required": ["url"]}]}`. Choice `i` becomes the
/// schema without the `oneOf`, requiring its own names and leaving out the names
/// of every other choice; properties no choice names (`depth`) stay in every
/// branch. Every branch is closed with `additionalProperties: false`, so an
/// instance valid against one branch is invalid against every other.
///
/// A grammar engine cannot express "exactly one"; offering the branches as
/// alternatives can. A schema without such a choice (or whose choice names an
/// argument missing from `properties`) comes back unchanged, as the only branch
/// (moved there, not copied). Works on raw and
/// grammar-shaped schemas alike.
pub fn split_choice(schema: Value) -> Result<Vec<Value>, SchemaError> {
    let map = match require_root_object(&schema) {
        Ok(map) => map,
        Err(error) => {
            drop_flat(schema);
            return Err(error);
        }
    };
    let Some(Choice { keyword, choices }) = find_choice(map) else {
        // Most schemas have no choice: they come back without a copy.
        return Ok(vec![schema]);
    };
    let path = Path::ROOT;
    // A choice naming an argument the schema does not declare cannot become
    // closed objects; it is left whole, for the tool to judge.
    let Some(Value::Object(properties)) = map.get("properties") else {
        return Ok(vec![Value::clone(&schema)]);
    };
    if choices
        .iter()
        .flatten()
        .any(|name| !properties.contains_key(*name))
    {
        return Ok(vec![Value::clone(&schema)]);
    }
    let base_required = match map.get("required") {
        Some(required) => string_list(required, &path, "required")?,
        None => Vec::new(),
    };

    // The last branch is made from the schema itself, not copied: a choice
    // is most often between two arguments, so that halves the copying.
    let last = choices.len().saturating_sub(1);
    let mut branches = Vec::with_capacity(choices.len());
    let mut last_branch = None;
    for (index, own) in choices.iter().enumerate() {
        let others: Vec<&str> = choices
            .iter()
            .enumerate()
            .filter(|(other, _)| *other != index)
            .flat_map(|(_, n)| n.iter().copied())
            .collect();
        let mut required: Vec<Value> = Vec::new();
        for name in base_required
            .iter()
            .filter(|name| !others.contains(name))
            .chain(own.iter())
        {
            let name = Value::String((*name).to_owned());
            if !required.contains(&name) {
                required.push(name);
            }
        }
        if index == last {
            let others: Vec<String> = others.into_iter().map(str::to_owned).collect();
            last_branch = Some((others, required));
            break;
        }
        let mut branch = Map::with_capacity(map.len() + 2);
        for (key, value) in map {
            match key.as_str() {
                k if k == keyword => {}
                "properties" => {
                    let kept = properties
                        .iter()
                        .filter(|(name, _)| !others.contains(&name.as_str()))
                        .map(|(name, schema)| (name.clone(), schema.clone()));
                    branch.insert(key.clone(), Value::Object(kept.collect()));
                }
                "required" | "additionalProperties" | "type" => {}
                _ => {
                    branch.insert(key.clone(), value.clone());
                }
            }
        }
        close_branch(&mut branch, required);
        branches.push(Value::Object(branch));
    }
    if let (Some((others, required)), Value::Object(mut branch)) = (last_branch, schema) {
        // The same keys, in the same order, as the copied branches.
        branch.retain(|key, value| match key.as_str() {
            k if k == keyword => false,
            "properties" => {
                if let Value::Object(properties) = value {
                    properties.retain(|name, _| !others.contains(name));
                }
                true
            }
            "required" | "additionalProperties" | "type" => false,
            _ => true,
        });
        close_branch(&mut branch, required);
        branches.push(Value::Object(branch));
    }
    Ok(branches)
}

/// Ends a branch: an object requiring `required` and nothing else.
fn close_branch(branch: &mut Map<String, Value>, required: Vec<Value>) {
    branch.insert("type".to_owned(), Value::String("object".to_owned()));
    branch.insert("required".to_owned(), Value::Array(required));
    branch.insert("additionalProperties".to_owned(), Value::Bool(false));
}

/// A choice between arguments found at the top level of a schema.
struct Choice<'s> {
    /// `oneOf` or `anyOf`.
    keyword: &'static str,
    /// The names each choice requires.
    choices: Vec<Vec<&'s str>>,
}

/// The choice between arguments at the top level of `map`, if it has one.
fn find_choice(map: &Map<String, Value>) -> Option<Choice<'_>> {
    let keyword = match (map.get("oneOf"), map.get("anyOf")) {
        (Some(_), None) => "oneOf",
        (None, Some(_)) => "anyOf",
        _ => return None,
    };
    let Some(Value::Array(parts)) = map.get(keyword) else {
        return None;
    };
    if parts.len() < 2 {
        return None;
    }
    let mut choices: Vec<Vec<&str>> = Vec::with_capacity(parts.len());
    for part in parts {
        let part = part.as_object()?;
        let only_required = part.iter().all(|(key, value)| match key.as_str() {
            "required" => true,
            "type" => value == "object",
            key => is_annotation(key),
        });
        let required = part.get("required")?;
        let Ok(names) = string_list(required, &Path::ROOT, "required") else {
            return None;
        };
        if !only_required || names.is_empty() {
            return None;
        }
        if choices.iter().flatten().any(|seen| names.contains(seen)) {
            return None;
        }
        choices.push(names);
    }
    Some(Choice { keyword, choices })
}
