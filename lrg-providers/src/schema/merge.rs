//! Folding subschemas that apply to the same instance into one object schema.
//!
//! `allOf: [A, B]` beside `properties` (a flattened struct, a `$ref` with
//! constraints beside it) has to become one object before it can be closed with
//! `additionalProperties: false`: closing each part separately would make every
//! part reject the other parts' properties.

use serde_json::{Map, Value};

use super::keywords::is_annotation;

/// How strictly [`fold_all_of`] folds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fold {
    /// Fold a part only when the result accepts exactly what `allOf` accepted
    /// (as far as object keywords go); leave the others in `allOf`.
    Exact,
    /// Fold every object part; where two parts disagree on a keyword other than
    /// `properties`/`required`, keep the first. The result may accept more than
    /// the `allOf` did: for cloud APIs that refuse `allOf` at the top level.
    Relaxed,
}

/// Folds the parts of `map["allOf"]` into `map` itself (see [`Fold`]).
pub(crate) fn fold_all_of(map: &mut Map<String, Value>, how: Fold) {
    let Some(Value::Array(parts)) = map.remove("allOf") else {
        return;
    };
    let mut kept = Vec::new();
    for part in parts {
        match part {
            Value::Bool(true) => {}
            Value::Object(mut part) => {
                // A part may itself be an allOf (a $ref with keywords beside it).
                fold_all_of(&mut part, how);
                if how == Fold::Relaxed || can_fold(map, &part) {
                    fold_into(map, part);
                } else {
                    kept.push(Value::Object(part));
                }
            }
            other => kept.push(other),
        }
    }
    if !kept.is_empty() {
        match map.get_mut("allOf") {
            Some(Value::Array(existing)) => existing.extend(kept),
            _ => {
                map.insert("allOf".to_owned(), Value::Array(kept));
            }
        }
    }
}

/// Whether folding `part` into `into` keeps the meaning of "both must hold".
pub(crate) fn can_fold(into: &Map<String, Value>, part: &Map<String, Value>) -> bool {
    part.iter().all(|(keyword, value)| match keyword.as_str() {
        "properties" | "required" => true,
        "anyOf" | "oneOf" | "allOf" => !into.contains_key(keyword.as_str()),
        _ if is_annotation(keyword) => true,
        _ => into.get(keyword).is_none_or(|existing| existing == value),
    })
}

/// Adds `part`'s keywords to `into`: properties merged (one named in both must
/// satisfy both), required names joined, any other keyword kept from `into`
/// when both have it.
pub(crate) fn fold_into(into: &mut Map<String, Value>, part: Map<String, Value>) {
    for (keyword, value) in part {
        match (keyword.as_str(), into.get_mut(&keyword), value) {
            ("properties", Some(Value::Object(existing)), Value::Object(added)) => {
                for (name, schema) in added {
                    match existing.get_mut(&name) {
                        Some(present) if *present != schema => {
                            let both = Value::Array(vec![present.take(), schema]);
                            *present = Value::Object(Map::from_iter([("allOf".to_owned(), both)]));
                        }
                        Some(_) => {}
                        None => {
                            existing.insert(name, schema);
                        }
                    }
                }
            }
            ("required", Some(Value::Array(existing)), Value::Array(added)) => {
                for name in added {
                    if !existing.contains(&name) {
                        existing.push(name);
                    }
                }
            }
            (_, Some(_), _) => {}
            (_, None, value) => {
                into.insert(keyword, value);
            }
        }
    }
}

/// `properties: P, anyOf: [{properties: A}, {properties: B}]` becomes
/// `anyOf: [{properties: P+A}, {properties: P+B}]`, so each branch can be closed
/// on its own: the shape schemars gives a struct with a flattened enum.
///
/// Applies only when every branch declares `properties` (a branch that only says
/// `required` is a choice between arguments, see `split_choice`).
pub(crate) fn distribute_properties(map: &mut Map<String, Value>) {
    let has_properties = matches!(map.get("properties"), Some(Value::Object(p)) if !p.is_empty());
    let combinator = match (map.contains_key("anyOf"), map.contains_key("oneOf")) {
        (true, false) => "anyOf",
        (false, true) => "oneOf",
        _ => return,
    };
    if !has_properties {
        return;
    }
    let Some(Value::Array(branches)) = map.get(combinator) else {
        return;
    };
    let mut shared = Map::new();
    for keyword in ["properties", "required"] {
        if let Some(value) = map.get(keyword) {
            shared.insert(keyword.to_owned(), value.clone());
        }
    }
    let distributable = branches.iter().all(|branch| {
        branch
            .as_object()
            .is_some_and(|b| b.contains_key("properties") && can_fold(b, &shared))
    });
    if !distributable {
        return;
    }
    let Some(Value::Array(branches)) = map.get_mut(combinator) else {
        return;
    };
    for branch in branches.iter_mut() {
        if let Value::Object(branch) = branch {
            // The parent's properties come first, as they were written.
            let own = std::mem::take(branch);
            let mut merged = shared.clone();
            fold_into(&mut merged, own);
            *branch = merged;
        }
    }
    map.remove("properties");
    map.remove("required");
}
