//! Which JSON Schema keywords hold subschemas, and how.
//!
//! Walkers must know this: the keys under `properties` are property names (a
//! property may well be called `$ref`), and `enum`, `const`, `default` and
//! `examples` hold data, never schemas.

/// How a keyword's value holds subschemas.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Holds {
    /// One schema (`not`, `additionalProperties`, `items` in 2020-12, ...).
    One,
    /// An array of schemas (`anyOf`, `prefixItems`, ...).
    List,
    /// An object whose values are schemas (`properties`, `$defs`, ...).
    Map,
    /// `items`: one schema, or (drafts 4-7) an array of schemas.
    OneOrList,
    /// Data or an annotation, no subschemas.
    Nothing,
}

/// How `keyword`'s value holds subschemas.
pub(crate) fn holds(keyword: &str) -> Holds {
    match keyword {
        "additionalProperties"
        | "not"
        | "if"
        | "then"
        | "else"
        | "contains"
        | "propertyNames"
        | "additionalItems"
        | "unevaluatedProperties"
        | "unevaluatedItems"
        | "contentSchema" => Holds::One,
        "anyOf" | "oneOf" | "allOf" | "prefixItems" => Holds::List,
        "properties" | "patternProperties" | "dependentSchemas" | "$defs" | "definitions" => {
            Holds::Map
        }
        "items" => Holds::OneOrList,
        _ => Holds::Nothing,
    }
}

/// Keywords that only annotate: dropping or overriding them never changes which
/// instances a schema accepts.
pub(crate) fn is_annotation(keyword: &str) -> bool {
    matches!(
        keyword,
        "title"
            | "description"
            | "default"
            | "examples"
            | "example"
            | "$comment"
            | "deprecated"
            | "readOnly"
            | "writeOnly"
            | "$schema"
            | "$id"
            | "id"
            | "$anchor"
            | "$dynamicAnchor"
            | "$vocabulary"
            | "contentMediaType"
            | "contentEncoding"
            | "format"
    )
}

/// The type names JSON Schema defines.
pub(crate) const TYPE_NAMES: [&str; 7] = [
    "null", "boolean", "object", "array", "number", "integer", "string",
];
