//! The one error type of schema shaping.

/// Why a tool's JSON Schema could not be shaped.
///
/// Every variant names where the problem is as a JSON pointer into the schema
/// (`""` is the schema itself, `"/properties/path"` one of its properties), so a
/// tool author can find it; [`std::fmt::Display`] writes it as a URI fragment
/// (`#/properties/path`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SchemaError {
    /// A schema (the whole schema, or a subschema) is not a JSON object.
    #[error("schema at #{path} must be a JSON object, found {found}")]
    NotAnObject {
        /// JSON pointer of the offending value.
        path: String,
        /// The JSON type that was found instead (`array`, `string`, ...).
        found: &'static str,
    },
    /// A `$ref` points nowhere inside the schema (or outside it, which is not followed).
    #[error("$ref {reference:?} at #{path} does not resolve: {reason}")]
    UnresolvedRef {
        /// JSON pointer of the object holding the `$ref`.
        path: String,
        /// The reference as written.
        reference: String,
        /// Why it could not be resolved.
        reason: &'static str,
    },
    /// A `$ref` refers, directly or through other refs, to a schema it is part of;
    /// inlining it would never end.
    #[error("$ref {reference:?} at #{path} is recursive; recursive schemas cannot be inlined")]
    RecursiveRef {
        /// JSON pointer of the object holding the `$ref`.
        path: String,
        /// The reference as written.
        reference: String,
    },
    /// The schema (or the JSON it is made of) nests deeper than the limit.
    #[error("schema nests too deep at #{path} (limit {limit} levels)")]
    TooDeep {
        /// JSON pointer where the limit was crossed.
        path: String,
        /// The limit that was crossed.
        limit: usize,
    },
    /// Inlining `$ref`s would make the schema larger than the limit (refs that
    /// fan out, level after level, grow it exponentially).
    #[error("schema grows too large at #{path} once its $refs are inlined (limit {limit} nodes)")]
    TooLarge {
        /// JSON pointer where the limit was crossed.
        path: String,
        /// The limit, in JSON values produced.
        limit: usize,
    },
    /// A keyword has a value the specification does not allow (`"required": "a"`,
    /// `"type": "text"`, `"maxLength": -1`, ...).
    #[error("invalid {keyword:?} at #{path}: {reason}")]
    InvalidKeyword {
        /// JSON pointer of the schema holding the keyword.
        path: String,
        /// The keyword.
        keyword: String,
        /// What is wrong with its value.
        reason: String,
    },
}

/// The JSON type name of a value, for error messages.
pub(crate) fn json_type(value: &serde_json::Value) -> &'static str {
    match value {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "boolean",
        serde_json::Value::Number(_) => "number",
        serde_json::Value::String(_) => "string",
        serde_json::Value::Array(_) => "array",
        serde_json::Value::Object(_) => "object",
    }
}
