//! The strict-shaping suite: what each kind of schema becomes.

use serde_json::{Value, json};

use super::*;

fn openai(schema: Value) -> StrictSchema {
    strict_schema(&schema, StrictTarget::OpenAi)
}

#[test]
fn optional_properties_become_required_and_nullable() {
    let shaped = openai(json!({
        "type": "object",
        "properties": {
            "label": {"type": "string", "enum": ["bug", "feature"]},
            "note": {"type": "string"},
            "tags": {"type": "array", "items": {"type": "string"}}
        },
        "required": ["label"]
    }));
    assert!(shaped.strict, "{:?}", shaped.why_not);
    assert!(!shaped.wrapped);
    assert_eq!(
        shaped.schema,
        json!({
            "type": "object",
            "properties": {
                "label": {"type": "string", "enum": ["bug", "feature"]},
                "note": {"type": ["string", "null"]},
                "tags": {"type": ["array", "null"], "items": {"type": "string"}}
            },
            "required": ["label", "note", "tags"],
            "additionalProperties": false
        })
    );
}

#[test]
fn nested_objects_and_arrays_of_objects_are_closed_too() {
    let shaped = openai(json!({
        "type": "object",
        "properties": {
            "plan": {
                "type": "object",
                "properties": {
                    "steps": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {"do": {"type": "string"}, "why": {"type": "string"}},
                            "required": ["do"]
                        }
                    }
                },
                "required": ["steps"]
            }
        },
        "required": ["plan"]
    }));
    assert!(shaped.strict);
    let item = &shaped.schema["properties"]["plan"]["properties"]["steps"]["items"];
    assert_eq!(item["additionalProperties"], json!(false));
    assert_eq!(item["required"], json!(["do", "why"]));
    assert_eq!(item["properties"]["why"]["type"], json!(["string", "null"]));
    assert_eq!(
        shaped.schema["properties"]["plan"]["additionalProperties"],
        json!(false)
    );
}

#[test]
fn enums_without_a_type_and_refs_become_nullable_by_their_own_means() {
    let shaped = openai(json!({
        "type": "object",
        "$defs": {"Level": {"enum": ["low", "high"]}},
        "properties": {
            "level": {"$ref": "#/$defs/Level"},
            "mood": {"enum": ["ok", "bad"]},
            "pick": {"anyOf": [{"type": "string"}, {"type": "integer"}]}
        }
    }));
    assert!(shaped.strict, "{:?}", shaped.why_not);
    let p = &shaped.schema["properties"];
    // A reference is kept (OpenAI follows `$defs`) and offered beside null.
    assert_eq!(
        p["level"],
        json!({"anyOf": [{"$ref": "#/$defs/Level"}, {"type": "null"}]})
    );
    // An enum gets the type its values share (strict modes want one).
    assert_eq!(
        p["mood"],
        json!({"enum": ["ok", "bad", null], "type": ["string", "null"]})
    );
    assert_eq!(
        p["pick"],
        json!({"anyOf": [{"type": "string"}, {"type": "integer"}, {"type": "null"}]})
    );
    assert_eq!(
        shaped.schema["$defs"]["Level"],
        json!({"enum": ["low", "high"], "type": "string"})
    );
}

#[test]
fn unsupported_keywords_move_into_the_description() {
    let shaped = openai(json!({
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "Who.", "maxLength": 20, "minLength": 1},
            "n": {"type": "integer", "minimum": 1, "maximum": 5, "default": 3}
        },
        "required": ["name", "n"]
    }));
    assert!(shaped.strict);
    assert_eq!(
        shaped.schema["properties"]["name"],
        json!({"type": "string", "description": "Who. (also: maxLength 20; minLength 1)"})
    );
    // OpenAI enforces numeric bounds; the default is only a hint.
    assert_eq!(
        shaped.schema["properties"]["n"],
        json!({"type": "integer", "minimum": 1, "maximum": 5, "description": "(also: default 3)"})
    );
    // Anthropic enforces neither bounds nor lengths.
    let anthropic = strict_schema(
        &json!({"type": "object", "properties": {"n": {"type": "integer", "maximum": 5}}, "required": ["n"]}),
        StrictTarget::Anthropic,
    );
    assert_eq!(
        anthropic.schema["properties"]["n"],
        json!({"type": "integer", "description": "(also: maximum 5)"})
    );
}

#[test]
fn one_of_is_read_as_any_of_and_meta_keywords_go() {
    let shaped = openai(json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "Pick",
        "type": "object",
        "properties": {"x": {"oneOf": [{"type": "string"}, {"type": "number"}]}},
        "required": ["x"]
    }));
    assert!(shaped.strict);
    assert!(shaped.schema.get("$schema").is_none());
    assert_eq!(shaped.schema["title"], json!("Pick"));
    assert_eq!(
        shaped.schema["properties"]["x"],
        json!({"anyOf": [{"type": "string"}, {"type": "number"}]})
    );
}

#[test]
fn a_non_object_root_is_wrapped() {
    let shaped = openai(json!({
        "type": "array",
        "$defs": {"Item": {"type": "string"}},
        "items": {"$ref": "#/$defs/Item"}
    }));
    assert!(shaped.strict);
    assert!(shaped.wrapped);
    assert_eq!(
        shaped.schema,
        json!({
            "$defs": {"Item": {"type": "string"}},
            "additionalProperties": false,
            "properties": {"answer": {"type": "array", "items": {"$ref": "#/$defs/Item"}}},
            "required": ["answer"],
            "type": "object"
        })
    );
}

#[test]
fn what_cannot_be_strict_is_sent_loose_with_the_reason() {
    for (schema, needle) in [
        (
            json!({"type": "object", "additionalProperties": {"type": "integer"}}),
            "open map",
        ),
        (
            json!({"type": "object", "properties": {"m": {"type": "object"}}, "required": ["m"]}),
            "/properties/m is an open map",
        ),
        (
            json!({"type": "object", "properties": {"t": {"type": "array", "prefixItems": [{"type": "string"}]}}}),
            "prefixItems",
        ),
        (
            json!({"type": "object", "properties": {"any": {}}}),
            "admits any value",
        ),
        (
            json!({"type": "object", "allOf": [{"properties": {"a": {"type": "string"}}}]}),
            "allOf",
        ),
    ] {
        let shaped = openai(schema.clone());
        assert!(!shaped.strict, "{schema}");
        let why = shaped.why_not.clone().unwrap_or_default();
        assert!(why.contains(needle), "{schema}: {why}");
        // Sent as the caller wrote it (the validator holds the answer to it).
        assert_eq!(shaped.schema, schema);
    }
}

#[test]
fn recursion_is_kept_for_openai_and_loose_for_anthropic() {
    let tree = json!({
        "type": "object",
        "$defs": {"Node": {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/Node"}}}, "required": ["kids"]}},
        "properties": {"root": {"$ref": "#/$defs/Node"}},
        "required": ["root"]
    });
    let shaped = openai(tree.clone());
    assert!(shaped.strict, "{:?}", shaped.why_not);
    assert_eq!(
        shaped.schema["$defs"]["Node"]["additionalProperties"],
        json!(false)
    );
    let anthropic = strict_schema(&tree, StrictTarget::Anthropic);
    assert!(!anthropic.strict);
    assert!(
        anthropic.why_not.unwrap().contains("references"),
        "a recursive reference cannot be inlined"
    );
}

#[test]
fn anthropic_inlines_references() {
    let shaped = strict_schema(
        &json!({
            "type": "object",
            "$defs": {"Tag": {"type": "string", "enum": ["a", "b"]}},
            "properties": {"tag": {"$ref": "#/$defs/Tag"}},
            "required": ["tag"]
        }),
        StrictTarget::Anthropic,
    );
    assert!(shaped.strict, "{:?}", shaped.why_not);
    assert_eq!(
        shaped.schema["properties"]["tag"],
        json!({"type": "string", "enum": ["a", "b"]})
    );
    assert!(shaped.schema.get("$defs").is_none());
}

#[test]
fn shaping_never_fails_on_odd_input() {
    for schema in [
        json!({}),
        json!({"type": "object", "properties": []}),
        json!({"type": "object", "properties": {"a": true}}),
        json!({"anyOf": "x"}),
        json!({"type": "object", "properties": {"a": {"items": [1]}}}),
    ] {
        let shaped = openai(schema);
        assert!(!shaped.strict);
        assert!(shaped.schema.is_object());
    }
}

#[test]
fn numeric_formats_go_and_a_refs_description_is_kept_when_inlined() {
    let schema = json!({
        "type": "object",
        "$defs": {"Count": {"type": "integer", "format": "uint32", "minimum": 0}},
        "properties": {
            "n": {"$ref": "#/$defs/Count", "description": "How many."},
            "at": {"type": "string", "format": "date-time"}
        },
        "required": ["n", "at"]
    });
    let shaped = strict_schema(&schema, StrictTarget::Anthropic);
    assert!(shaped.strict, "{:?}", shaped.why_not);
    assert_eq!(
        shaped.schema["properties"]["n"],
        json!({"type": "integer", "description": "How many. (also: minimum 0)"})
    );
    assert_eq!(
        shaped.schema["properties"]["at"],
        json!({"type": "string", "format": "date-time"})
    );
    // An assertion beside a reference is not merged: loose, and why.
    let beside = json!({
        "type": "object",
        "$defs": {"S": {"type": "string"}},
        "properties": {"s": {"$ref": "#/$defs/S", "minLength": 2}},
        "required": ["s"]
    });
    let shaped = strict_schema(&beside, StrictTarget::Anthropic);
    assert!(!shaped.strict);
    assert!(shaped.why_not.unwrap().contains("beside its `$ref`"));
    // A reference that points nowhere is said, not followed.
    let nowhere =
        json!({"type": "object", "properties": {"s": {"$ref": "#/$defs/Gone"}}, "required": ["s"]});
    let shaped = strict_schema(&nowhere, StrictTarget::Anthropic);
    assert!(shaped.why_not.unwrap().contains("points nowhere"));
}
