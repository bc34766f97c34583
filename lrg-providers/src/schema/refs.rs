//! `$ref` inlining: every local reference replaced by a copy of what it points
//! to, so a schema stands alone (one grammar holds all tools; cloud APIs follow
//! no references).
//!
//! Only references inside the same schema are followed (`#`, `#/$defs/Name`,
//! `#/definitions/Name`, any JSON pointer after `#`, percent-encoded or not).
//! A recursive reference is an error, since inlining it would never end, and so is
//! a schema whose references fan out into more than [`MAX_NODES`] values.

use std::borrow::Cow;

use serde_json::{Map, Value};

use super::error::{SchemaError, json_type};
use super::keywords::{Holds, holds, is_annotation};
use super::path::{MAX_JSON_DEPTH, Path, check_schema_depth};

/// The most JSON values an inlined schema may hold. Real tool schemas hold a few
/// hundred; refs that reference each other twice per level would otherwise grow
/// without practical bound.
pub(crate) const MAX_NODES: usize = 100_000;

/// Whether inlining keeps the keywords that only annotate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Annotations {
    /// Kept: the result is the whole schema.
    Keep,
    /// Left out (`description`, `title`, `default`, `format`, ...; see
    /// [`is_annotation`]): for a reader that drops them anyway, which then
    /// neither copies nor frees them.
    Drop,
}

/// Returns `schema` with every `$ref` inlined and `$defs`/`definitions` removed.
pub(crate) fn inline_refs(schema: &Value) -> Result<Value, SchemaError> {
    inline_refs_if_any(schema, Annotations::Keep).map(Cow::into_owned)
}

/// [`inline_refs`] for a reader that only reads: most tool schemas have no
/// references, and those come back as they are, not copied (annotations and
/// all, whatever `annotations` says).
pub(crate) fn inline_refs_if_any(
    schema: &Value,
    annotations: Annotations,
) -> Result<Cow<'_, Value>, SchemaError> {
    if !mentions_refs(schema, 0) {
        return Ok(Cow::Borrowed(schema));
    }
    let mut inliner = Inliner {
        root: schema,
        active: vec![String::new()],
        budget: MAX_NODES,
        annotations,
    };
    inliner.schema(schema, &Path::ROOT, 0).map(Cow::Owned)
}

struct Inliner<'r> {
    root: &'r Value,
    /// JSON pointers of the schemas being expanded, outermost first: meeting one
    /// of them again means the reference is recursive.
    active: Vec<String>,
    budget: usize,
    annotations: Annotations,
}

impl<'r> Inliner<'r> {
    fn spend(&mut self, nodes: usize, path: &Path<'_>) -> Result<(), SchemaError> {
        match self.budget.checked_sub(nodes) {
            Some(left) => {
                self.budget = left;
                Ok(())
            }
            None => Err(SchemaError::TooLarge {
                path: path.render(),
                limit: MAX_NODES,
            }),
        }
    }

    fn schema(
        &mut self,
        node: &Value,
        path: &Path<'_>,
        depth: usize,
    ) -> Result<Value, SchemaError> {
        check_schema_depth(depth, path)?;
        self.spend(1, path)?;
        let Value::Object(map) = node else {
            // Booleans are schemas; anything else is left for the shaper to reject
            // with the keyword it sits under.
            return Ok(node.clone());
        };
        let mut out = Map::with_capacity(map.len());
        let mut reference = None;
        let mut dropped_annotation = false;
        for (keyword, value) in map {
            match keyword.as_str() {
                "$ref" | "$dynamicRef" | "$recursiveRef" => {
                    let Value::String(text) = value else {
                        return Err(SchemaError::InvalidKeyword {
                            path: path.render(),
                            keyword: keyword.clone(),
                            reason: format!("must be a string, found {}", json_type(value)),
                        });
                    };
                    reference = Some(text.as_str());
                    continue;
                }
                // Everything they held is inlined where it was used.
                "$defs" | "definitions" => continue,
                _ => {}
            }
            let at = path.key(keyword);
            if self.annotations == Annotations::Drop && is_annotation(keyword) {
                // Counted as if copied, so the size limit means the same.
                self.spend(count_values(value), &at)?;
                dropped_annotation = true;
                continue;
            }
            let shaped = match (holds(keyword), value) {
                (Holds::One, _) | (Holds::OneOrList, Value::Object(_) | Value::Bool(_)) => {
                    self.schema(value, &at, depth + 1)?
                }
                (Holds::List | Holds::OneOrList, Value::Array(items)) => {
                    let mut list = Vec::with_capacity(items.len());
                    for (index, item) in items.iter().enumerate() {
                        list.push(self.schema(item, &at.index(index), depth + 1)?);
                    }
                    Value::Array(list)
                }
                (Holds::Map, Value::Object(entries)) => {
                    let mut shaped = Map::with_capacity(entries.len());
                    for (name, item) in entries {
                        shaped.insert(name.clone(), self.schema(item, &at.key(name), depth + 1)?);
                    }
                    Value::Object(shaped)
                }
                (Holds::Nothing, _) | (Holds::List | Holds::Map | Holds::OneOrList, _) => {
                    self.spend(count_values(value), &at)?;
                    value.clone()
                }
            };
            out.insert(keyword.clone(), shaped);
        }
        match reference {
            None => Ok(Value::Object(out)),
            Some(reference) => {
                let target = self.expand(reference, path, depth)?;
                merge_siblings(target, out, dropped_annotation, reference, path)
            }
        }
    }

    fn expand(
        &mut self,
        reference: &str,
        path: &Path<'_>,
        depth: usize,
    ) -> Result<Value, SchemaError> {
        let unresolved = |reason| SchemaError::UnresolvedRef {
            path: path.render(),
            reference: reference.to_owned(),
            reason,
        };
        let Some(fragment) = reference.strip_prefix('#') else {
            return Err(unresolved(
                "only references inside the schema (starting with '#') are followed",
            ));
        };
        let pointer = percent_decode(fragment).ok_or_else(|| unresolved("bad percent-encoding"))?;
        if !pointer.is_empty() && !pointer.starts_with('/') {
            return Err(unresolved(
                "named anchors are not supported; use a JSON pointer such as #/$defs/Name",
            ));
        }
        let root = self.root;
        let target = root
            .pointer(&pointer)
            .ok_or_else(|| unresolved("nothing at that JSON pointer"))?;
        // Meeting a schema that is still being expanded means the expansion would
        // contain itself.
        if self.active.contains(&pointer) {
            return Err(SchemaError::RecursiveRef {
                path: path.render(),
                reference: reference.to_owned(),
            });
        }
        self.active.push(pointer);
        let expanded = self.schema(target, path, depth + 1);
        self.active.pop();
        expanded
    }
}

/// Combines what a `$ref` points to with the keywords written beside it (allowed
/// since draft 2019-09, and what schemars emits for documented fields).
/// `dropped_annotation`: there were annotations beside it too, left out; the
/// result has the form it would have with them.
fn merge_siblings(
    target: Value,
    siblings: Map<String, Value>,
    dropped_annotation: bool,
    reference: &str,
    path: &Path<'_>,
) -> Result<Value, SchemaError> {
    if siblings.is_empty() && !dropped_annotation {
        return Ok(target);
    }
    let mut target = match target {
        Value::Object(map) => map,
        Value::Bool(true) => return Ok(Value::Object(siblings)),
        Value::Bool(false) => return Ok(Value::Bool(false)),
        other => {
            return Err(SchemaError::InvalidKeyword {
                path: path.render(),
                keyword: "$ref".to_owned(),
                reason: format!(
                    "{reference:?} points to a {}, not a schema",
                    json_type(&other)
                ),
            });
        }
    };
    let conflicts = siblings.iter().any(|(keyword, value)| {
        !is_annotation(keyword)
            && target
                .get(keyword)
                .is_some_and(|existing| existing != value)
    });
    if conflicts {
        // Both must hold; leave the intersection to whoever reads allOf.
        let both = Value::Array(vec![Value::Object(target), Value::Object(siblings)]);
        return Ok(Value::Object(Map::from_iter([("allOf".to_owned(), both)])));
    }
    for (keyword, value) in siblings {
        target.insert(keyword, value);
    }
    Ok(Value::Object(target))
}

/// Whether any object in `value` has a key that inlining acts on. A property
/// that happens to be named `$ref` only costs the slow path. Recursive, but
/// never past [`MAX_JSON_DEPTH`] (deeper is left to the slow path, which
/// reports it), and without allocating: it runs on every schema shaped.
fn mentions_refs(value: &Value, depth: usize) -> bool {
    if depth > MAX_JSON_DEPTH {
        return true;
    }
    match value {
        Value::Array(items) => items.iter().any(|item| mentions_refs(item, depth + 1)),
        Value::Object(map) => map.iter().any(|(key, value)| {
            matches!(
                key.as_str(),
                "$ref" | "$dynamicRef" | "$recursiveRef" | "$defs" | "definitions"
            ) || mentions_refs(value, depth + 1)
        }),
        _ => false,
    }
}

/// Counts the JSON values in `value`, without recursion.
pub(crate) fn count_values(value: &Value) -> usize {
    if !matches!(value, Value::Array(_) | Value::Object(_)) {
        // Most values counted are strings: no stack for them.
        return 1;
    }
    let mut count = 0;
    let mut stack = vec![value];
    while let Some(value) = stack.pop() {
        count += 1;
        match value {
            Value::Array(items) => stack.extend(items),
            Value::Object(map) => stack.extend(map.values()),
            _ => {}
        }
    }
    count
}

/// Decodes `%XX` escapes (a `$ref` is a URI); `None` on a malformed escape or
/// bytes that are not UTF-8.
fn percent_decode(text: &str) -> Option<String> {
    if !text.contains('%') {
        return Some(text.to_owned());
    }
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        if bytes[index] == b'%' {
            let hex = text.get(index + 1..index + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            index += 3;
        } else {
            out.push(bytes[index]);
            index += 1;
        }
    }
    String::from_utf8(out).ok()
}
