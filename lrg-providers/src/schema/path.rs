//! Where a walk is inside a schema, and the limits every walk respects.
//!
//! A path is a chain of borrowed segments on the walker's own stack, so going one
//! level deeper costs nothing; it is rendered as a JSON pointer only when an
//! error needs it.

use serde_json::Value;

use super::error::SchemaError;

/// How many subschema levels a walk follows (`properties/x` or `items` is one
/// level); a deeper schema is an error, never a stack overflow.
pub(crate) const MAX_SCHEMA_DEPTH: usize = 64;

/// How deeply the raw JSON of a schema may nest (a subschema level is one or two
/// JSON levels). Checked without recursion before any recursive walk starts.
pub(crate) const MAX_JSON_DEPTH: usize = 2 * MAX_SCHEMA_DEPTH + 8;

/// One step from a JSON value to one inside it.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Segment<'a> {
    Key(&'a str),
    Index(usize),
}

/// A JSON pointer, built as a linked chain while walking.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Path<'a> {
    parent: Option<&'a Path<'a>>,
    segment: Option<Segment<'a>>,
    depth: usize,
}

impl<'a> Path<'a> {
    /// The schema itself.
    pub(crate) const ROOT: Path<'static> = Path {
        parent: None,
        segment: None,
        depth: 0,
    };

    /// The value under `key` of the object at this path.
    pub(crate) fn key<'b>(&'b self, key: &'b str) -> Path<'b> {
        Path {
            parent: Some(self),
            segment: Some(Segment::Key(key)),
            depth: self.depth + 1,
        }
    }

    /// The value at `index` of the array at this path.
    pub(crate) fn index(&'a self, index: usize) -> Path<'a> {
        Path {
            parent: Some(self),
            segment: Some(Segment::Index(index)),
            depth: self.depth + 1,
        }
    }

    /// Renders the path as a JSON pointer (RFC 6901): `""` or `"/properties/a~1b"`.
    pub(crate) fn render(&self) -> String {
        let mut segments = Vec::with_capacity(self.depth);
        let mut at = Some(self);
        while let Some(path) = at {
            if let Some(segment) = path.segment {
                segments.push(segment);
            }
            at = path.parent;
        }
        segments.reverse();
        render_segments(&segments)
    }
}

fn render_segments(segments: &[Segment<'_>]) -> String {
    let mut out = String::new();
    for segment in segments {
        out.push('/');
        match segment {
            Segment::Key(key) => out.push_str(&key.replace('~', "~0").replace('/', "~1")),
            Segment::Index(index) => out.push_str(&index.to_string()),
        }
    }
    out
}

/// Drops `value` without recursion: serde_json drops recursively, and a value
/// too deep to shape is also too deep to drop that way.
pub(crate) fn drop_flat(value: Value) {
    let mut stack = vec![value];
    while let Some(mut value) = stack.pop() {
        match &mut value {
            Value::Object(map) => stack.extend(std::mem::take(map).into_iter().map(|(_, v)| v)),
            Value::Array(items) => stack.append(items),
            _ => {}
        }
    }
}

/// Checks that `value` nests no deeper than [`MAX_JSON_DEPTH`].
///
/// Every recursive walk in this module is bounded by its own depth counter too;
/// this check runs first so that even cloning or dropping a hostile value inside a
/// walk cannot exhaust the stack. It recurses, but stops at the depth it checks
/// for, and allocates only to report a failure: it runs on every schema shaped.
pub(crate) fn check_json_depth(value: &Value) -> Result<(), SchemaError> {
    match too_deep(value, 0) {
        None => Ok(()),
        Some(mut segments) => {
            segments.reverse();
            Err(SchemaError::TooDeep {
                path: render_segments(&segments),
                limit: MAX_JSON_DEPTH,
            })
        }
    }
}

/// The path (innermost segment first) to the first array or object inside
/// `value`, itself `depth` levels down, that sits [`MAX_JSON_DEPTH`] levels deep.
fn too_deep(value: &Value, depth: usize) -> Option<Vec<Segment<'_>>> {
    match value {
        Value::Object(map) => map
            .iter()
            .find_map(|(key, child)| too_deep_below(Segment::Key(key), child, depth + 1)),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .find_map(|(index, child)| too_deep_below(Segment::Index(index), child, depth + 1)),
        _ => None,
    }
}

/// [`too_deep`] for `child`, reached through `segment`, `depth` levels down.
fn too_deep_below<'v>(
    segment: Segment<'v>,
    child: &'v Value,
    depth: usize,
) -> Option<Vec<Segment<'v>>> {
    if !matches!(child, Value::Object(_) | Value::Array(_)) {
        return None;
    }
    if depth >= MAX_JSON_DEPTH {
        return Some(vec![segment]);
    }
    let mut trail = too_deep(child, depth)?;
    trail.push(segment);
    Some(trail)
}

/// Fails with [`SchemaError::TooDeep`] when a walk is `depth` subschema levels
/// down, past [`MAX_SCHEMA_DEPTH`].
pub(crate) fn check_schema_depth(depth: usize, path: &Path<'_>) -> Result<(), SchemaError> {
    if depth > MAX_SCHEMA_DEPTH {
        return Err(SchemaError::TooDeep {
            path: path.render(),
            limit: MAX_SCHEMA_DEPTH,
        });
    }
    Ok(())
}
