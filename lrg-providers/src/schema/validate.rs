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
        .map(|value| TypeList::read(value, path).map(|t| t.iter().map(str::to_owned).collect()))
        .transpose()
}

/// The names of a `type` keyword, in the order written and without repeats,
/// held without allocating (there are only seven).
#[derive(Clone, Copy, Debug)]
pub(crate) struct TypeList {
    names: [&'static str; TYPE_NAMES.len()],
    len: usize,
}

impl TypeList {
    /// One type.
    pub(crate) fn one(name: &'static str) -> Self {
        let mut names = [""; TYPE_NAMES.len()];
        names[0] = name;
        Self { names, len: 1 }
    }

    /// Reads a `type` keyword's value, or says what is wrong with it.
    pub(crate) fn read(value: &Value, path: &Path<'_>) -> Result<Self, SchemaError> {
        let bad = |reason: String| SchemaError::InvalidKeyword {
            path: path.render(),
            keyword: "type".to_owned(),
            reason,
        };
        let check = |name: &str| {
            TYPE_NAMES.into_iter().find(|t| *t == name).ok_or_else(|| {
                bad(format!(
                    "{name:?} is not a JSON Schema type (expected one of {})",
                    TYPE_NAMES.join(", ")
                ))
            })
        };
        match value {
            Value::String(name) => Ok(Self::one(check(name)?)),
            Value::Array(names) if !names.is_empty() => {
                let mut list = Self {
                    names: [""; TYPE_NAMES.len()],
                    len: 0,
                };
                for name in names {
                    let Value::String(name) = name else {
                        return Err(bad(format!(
                            "type names must be strings, found {}",
                            json_type(name)
                        )));
                    };
                    let name = check(name)?;
                    // Seven distinct names at most, so a slot is always free.
                    if !list.contains(name)
                        && let Some(slot) = list.names.get_mut(list.len)
                    {
                        *slot = name;
                        list.len += 1;
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

    /// The names, in the order written.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.names[..self.len].iter().copied()
    }

    /// Whether `name` is one of them.
    pub(crate) fn contains(&self, name: &str) -> bool {
        self.iter().any(|t| t == name)
    }

    /// The `type` keyword's value: one name, or an array of several.
    pub(crate) fn to_value(self) -> Value {
        match self.names[..self.len] {
            [single] => Value::String(single.to_owned()),
            ref names => Value::Array(
                names
                    .iter()
                    .map(|name| Value::String((*name).to_owned()))
                    .collect(),
            ),
        }
    }
}

/// A keyword whose value is an array of strings (`required`).
pub(crate) fn string_list<'v>(
    value: &'v Value,
    path: &Path<'_>,
    keyword: &str,
) -> Result<Vec<&'v str>, SchemaError> {
    Ok(string_items(value, path, keyword)?
        .iter()
        .filter_map(Value::as_str)
        .collect())
}

/// [`string_list`] without collecting: the items, checked to be strings.
pub(crate) fn string_items<'v>(
    value: &'v Value,
    path: &Path<'_>,
    keyword: &str,
) -> Result<&'v [Value], SchemaError> {
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
    match items.iter().find(|item| !item.is_string()) {
        Some(item) => Err(bad(format!(
            "must hold only strings, found {}",
            json_type(item)
        ))),
        None => Ok(items),
    }
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
