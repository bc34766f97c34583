//! TEMPORARY stand-in for `crate::schema::{grammar_schema, split_choice}` while
//! they are being written; removed once they land.

use serde_json::{Map, Value};

pub(crate) fn grammar_schema(schema: &Value, max_string_len: u32) -> Result<Value, String> {
    let defs = schema
        .get("$defs")
        .or_else(|| schema.get("definitions"))
        .cloned()
        .unwrap_or(Value::Null);
    shape(schema, &defs, max_string_len, 0)
}

fn shape(schema: &Value, defs: &Value, max: u32, depth: u32) -> Result<Value, String> {
    if depth > 32 {
        return Err("schema nests too deeply (recursive $ref?)".into());
    }
    let Value::Object(obj) = schema else {
        return Ok(schema.clone());
    };
    if let Some(Value::String(r)) = obj.get("$ref") {
        let name = r.rsplit('/').next().unwrap_or_default();
        let target = defs
            .get(name)
            .ok_or_else(|| format!("unresolved $ref {r}"))?;
        return shape(target, defs, max, depth + 1);
    }
    let mut out = Map::new();
    for (k, v) in obj {
        match k.as_str() {
            "$defs" | "definitions" | "$schema" | "format" | "default" | "description"
            | "title" | "minimum" | "maximum" | "exclusiveMinimum" | "exclusiveMaximum"
            | "multipleOf" | "examples" => {}
            "properties" => {
                let mut props = Map::new();
                if let Value::Object(p) = v {
                    for (name, s) in p {
                        props.insert(name.clone(), shape(s, defs, max, depth + 1)?);
                    }
                }
                out.insert(k.clone(), Value::Object(props));
            }
            "items" | "additionalProperties" if v.is_object() => {
                out.insert(k.clone(), shape(v, defs, max, depth + 1)?);
            }
            "oneOf" | "anyOf" | "allOf" => {
                let list = v.as_array().ok_or_else(|| format!("{k} is not an array"))?;
                let shaped = list
                    .iter()
                    .map(|s| shape(s, defs, max, depth + 1))
                    .collect::<Result<Vec<_>, _>>()?;
                out.insert(
                    if k == "oneOf" {
                        "anyOf".into()
                    } else {
                        k.clone()
                    },
                    Value::Array(shaped),
                );
            }
            _ => {
                out.insert(k.clone(), v.clone());
            }
        }
    }
    if out.get("type").and_then(Value::as_str) == Some("object") || out.contains_key("properties") {
        out.insert("additionalProperties".into(), Value::Bool(false));
    }
    if out.get("type").and_then(Value::as_str) == Some("string") && !out.contains_key("enum") {
        out.insert("maxLength".into(), Value::from(max));
    }
    Ok(Value::Object(out))
}

pub(crate) fn split_choice(schema: &Value) -> Result<Vec<Value>, String> {
    let Some(Value::Array(choices)) = schema.get("anyOf") else {
        return Ok(vec![schema.clone()]);
    };
    let props = schema
        .get("properties")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let base_required: Vec<Value> = schema
        .get("required")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut branches = Vec::new();
    for choice in choices {
        let Some(Value::Array(req)) = choice.get("required") else {
            return Err("oneOf branch without required".into());
        };
        let others: Vec<&str> = choices
            .iter()
            .filter_map(|c| c.get("required")?.as_array())
            .flatten()
            .filter_map(Value::as_str)
            .filter(|n| !req.iter().any(|r| r.as_str() == Some(n)))
            .collect();
        let mut p = Map::new();
        for (k, v) in &props {
            if !others.contains(&k.as_str()) {
                p.insert(k.clone(), v.clone());
            }
        }
        let mut required = base_required.clone();
        required.extend(req.iter().cloned());
        let mut b = Map::new();
        b.insert("type".into(), "object".into());
        b.insert("properties".into(), Value::Object(p));
        b.insert("required".into(), Value::Array(required));
        b.insert("additionalProperties".into(), Value::Bool(false));
        branches.push(Value::Object(b));
    }
    Ok(branches)
}
