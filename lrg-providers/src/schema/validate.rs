//! Reading keyword values, with an error that names the keyword and where it is
//! when a value is not what the specification allows.

use serde_json::{Map, Value};

use super::error::{SchemaError, json_type};
use super::keywords::TYPE_NAMES;
use super::path::{Path, check_json_depth};

/// The checks every public entry point makes first: the schema is an object, and
/// its JSON nests no deeper than the walks allow.
pub(crate) fn require_root_object(schema: &Value) -> Result<&Map<String, Value>, SchemaError> {
    let Value::Object(map) = schema else {
        return Err(SchemaError::NotAnObject {
            path: String::new(),
            found: json_type(schema),
        });
    };
    check_json_depth(schema)?;
    Ok(map)
}

/// The `type` keyword as a list of names; `None` when absent.
pub(crate) fn type_list(
    map: &Map<String, Value>,
    path: &Path<'_>,
) -> Result<Option<Vec<String>>, SchemaError> {
    map.get("type")
        .map(|value| type_names(value, path))
        .transpose()
}

/// The value of a `type` keyword as a list of names.
pub(crate) fn type_names(value: &Value, path: &Path<'_>) -> Result<Vec<String>, SchemaError> {
    let bad = |reason: String| SchemaError::InvalidKeyword {
        path: path.render(),
        keyword: "type".to_owned(),
        reason,
    };
    let check = |name: &str| {
        if TYPE_NAMES.contains(&name) {
            Ok(name.to_owned())
        } else {
            Err(bad(format!(
                "{name:?} is not a JSON Schema type (expected one of {})",
                TYPE_NAMES.join(", ")
            )))
        }
    };
    match value {
        Value::String(name) => Ok(vec![check(name)?]),
        Value::Array(names) if !names.is_empty() => {
            let mut list: Vec<String> = Vec::with_capacity(names.len());
            for name in names {
                let Value::String(name) = name else {
                    return Err(bad(format!(
                        "type names must be strings, found {}",
                        json_type(name)
                    )));
                };
                let name = check(name)?;
                if !list.contains(&name) {
                    list.push(name);
                }
            }
            Ok(list)
        }
        Value::Array(_) => Err(bad("must not be an empty array".to_owned())),
        other => Err(bad(format!(
            "must be a string or an array of strings, found {}",
            json_type(other)
        ))),
    }
}

/// A keyword whose value is an array of strings (`required`).
pub(crate) fn string_list<'v>(
    value: &'v Value,
    path: &Path<'_>,
    keyword: &str,
) -> Result<Vec<&'v str>, SchemaError> {
    let bad = |reason: String| SchemaError::InvalidKeyword {
        path: path.render(),
        keyword: keyword.to_owned(),
        reason,
    };
    let Value::Array(items) = value else {
        return Err(bad(format!(
            "must be an array of strings, found {}",
            json_type(value)
        )));
    };
    items
        .iter()
        .map(|item| {
            item.as_str()
                .ok_or_else(|| bad(format!("must hold only strings, found {}", json_type(item))))
        })
        .collect()
}

/// A keyword whose value is a non-negative integer (`maxLength`, `minItems`, ...).
/// `3.0` is accepted, as the specification allows.
pub(crate) fn non_negative(
    value: &Value,
    path: &Path<'_>,
    keyword: &str,
) -> Result<u64, SchemaError> {
    let number = value.as_u64().or_else(|| {
        value
            .as_f64()
            .filter(|f| f.fract() == 0.0 && *f >= 0.0 && *f <= u64::MAX as f64)
            .map(|f| f as u64)
    });
    number.ok_or_else(|| SchemaError::InvalidKeyword {
        path: path.render(),
        keyword: keyword.to_owned(),
        reason: match value {
            Value::Number(number) => format!("must be a non-negative integer, found {number}"),
            other => format!("must be a non-negative integer, found {}", json_type(other)),
        },
    })
}
