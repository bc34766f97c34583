//! Targeted cases of schema shaping, one rule each (the corpus snapshots show
//! the rules at work on real schemas).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use lrg_providers::schema::{SchemaTarget, grammar_schema, portable_tool_schema, split_choice};
use serde_json::{Value, json};

fn grammar(schema: Value) -> Value {
    grammar_schema(&schema, 50).unwrap()
}

fn gemini(schema: Value) -> Value {
    portable_tool_schema(&schema, SchemaTarget::Gemini).unwrap()
}

fn openai(schema: Value) -> Value {
    portable_tool_schema(&schema, SchemaTarget::OpenAi).unwrap()
}

#[test]
fn strings_are_capped_at_the_smaller_limit_but_enums_are_left_alone() {
    let shaped = grammar(json!({"type": "object", "properties": {
        "free": {"type": "string"},
        "short": {"type": "string", "maxLength": 10, "minLength": 2},
        "long": {"type": "string", "maxLength": 500},
        "choice": {"type": "string", "enum": ["a-value-longer-than-the-cap-of-fifty-characters-for-sure"]},
        "either": {"type": ["string", "integer"]},
    }}));
    let p = &shaped["properties"];
    assert_eq!(p["free"], json!({"type": "string", "maxLength": 50}));
    assert_eq!(
        p["short"],
        json!({"type": "string", "minLength": 2, "maxLength": 10})
    );
    assert_eq!(p["long"]["maxLength"], 50);
    assert_eq!(p["choice"].get("maxLength"), None);
    assert_eq!(
        p["either"],
        json!({"type": ["string", "integer"], "maxLength": 50})
    );
}

#[test]
fn annotations_formats_and_numeric_bounds_are_dropped() {
    let shaped = grammar(
        json!({"$schema": "https://json-schema.org/draft/2020-12/schema",
            "title": "T", "description": "d", "type": "object", "properties": {
            "n": {"type": "integer", "format": "int64", "minimum": 0, "maximum": 9, "multipleOf": 3,
                  "default": 3, "examples": [3], "description": "a number"},
            "x": {"type": "number", "format": "double", "exclusiveMinimum": 0},
            "s": {"type": "string", "format": "uri", "pattern": "^h", "x-custom": 1},
        }}),
    );
    assert_eq!(
        shaped,
        json!({"type": "object", "additionalProperties": false, "properties": {
            "n": {"type": "integer"},
            "x": {"type": "number"},
            "s": {"type": "string", "maxLength": 50},
        }})
    );
}

#[test]
fn refs_are_inlined_with_the_keywords_beside_them() {
    let shaped = grammar(json!({"type": "object",
        "properties": {
            "a": {"$ref": "#/$defs/Name", "description": "the name", "minLength": 3},
            "b": {"$ref": "#/definitions/Tag"},
            "c": {"$ref": "#/$defs/With%20Space"},
            "d": {"$ref": "#/$defs/Outer/$defs/Inner"},
        },
        "$defs": {
            "Name": {"type": "string", "maxLength": 20},
            "With Space": {"type": "boolean"},
            "Outer": {"$defs": {"Inner": {"type": "integer"}}},
        },
        "definitions": {"Tag": {"enum": ["x", "y"]}},
    }));
    assert_eq!(
        shaped["properties"],
        json!({
            "a": {"type": "string", "minLength": 3, "maxLength": 20},
            "b": {"enum": ["x", "y"]},
            "c": {"type": "boolean"},
            "d": {"type": "integer"},
        })
    );
    assert_eq!(shaped.get("$defs"), None);
    assert_eq!(shaped.get("definitions"), None);
}

#[test]
fn annotations_beside_a_ref_shape_as_if_inlined_by_hand() {
    // Grammar shaping inlines without annotations; the result must not tell.
    let with_refs = json!({"type": "object", "properties": {
        "any": {"anyOf": [{"$ref": "#/$defs/Any", "description": "x"}, {"type": "null"}]},
        "bare": {"$ref": "#/$defs/Any", "title": "t"},
        "never": {"$ref": "#/$defs/Never", "description": "x"},
        "named": {"$ref": "#/$defs/Name", "description": "beside", "default": "a"},
    }, "$defs": {"Any": true, "Never": false,
        "Name": {"type": "string", "description": "inside", "format": "email"}}});
    let by_hand = json!({"type": "object", "properties": {
        "any": {"anyOf": [{"description": "x"}, {"type": "null"}]},
        "bare": {"title": "t"},
        "never": false,
        "named": {"type": "string", "description": "beside", "format": "email", "default": "a"},
    }});
    assert_eq!(grammar(with_refs), grammar(by_hand));
}

#[test]
fn a_ref_whose_siblings_contradict_it_keeps_both() {
    // Both must hold (here nothing can): the first part folds in, the one that
    // disagrees stays an allOf part.
    let shaped = grammar(json!({"type": "object", "properties": {
        "a": {"$ref": "#/$defs/S", "type": "integer"}}, "$defs": {"S": {"type": "string"}}}));
    assert_eq!(
        shaped["properties"]["a"],
        json!({"type": "string", "maxLength": 50, "allOf": [{"type": "integer"}]})
    );
}

#[test]
fn all_of_parts_are_folded_into_one_closed_object() {
    // A flattened struct as some generators write it: closing each part
    // separately would reject everything.
    let shaped = grammar(json!({"type": "object",
        "properties": {"x": {"type": "string"}},
        "allOf": [{"$ref": "#/$defs/Paging"}, {"properties": {"y": {"type": "integer"}}, "required": ["y"]}],
        "$defs": {"Paging": {"type": "object", "properties": {"page": {"type": "integer"}}, "required": ["page"]}},
    }));
    assert_eq!(
        shaped,
        json!({"type": "object", "additionalProperties": false,
            "properties": {"x": {"type": "string", "maxLength": 50}, "page": {"type": "integer"}, "y": {"type": "integer"}},
            "required": ["page", "y"]})
    );
}

#[test]
fn shared_properties_move_into_each_alternative_before_closing() {
    let shaped = grammar(json!({"type": "object",
        "properties": {"id": {"type": "integer"}},
        "required": ["id"],
        "oneOf": [
            {"properties": {"kind": {"const": "a"}, "a": {"type": "boolean"}}, "required": ["kind"]},
            {"properties": {"kind": {"const": "b"}, "b": {"type": "null"}}, "required": ["kind"]},
        ],
    }));
    assert_eq!(
        shaped,
        json!({"type": "object", "anyOf": [
            {"properties": {"id": {"type": "integer"}, "kind": {"const": "a"}, "a": {"type": "boolean"}},
             "required": ["id", "kind"], "additionalProperties": false},
            {"properties": {"id": {"type": "integer"}, "kind": {"const": "b"}, "b": {"type": "null"}},
             "required": ["id", "kind"], "additionalProperties": false},
        ]})
    );
}

#[test]
fn a_required_name_left_undeclared_stays_possible_after_closing() {
    let shaped = grammar(
        json!({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a", "b"]}),
    );
    assert_eq!(shaped["required"], json!(["a", "b"]));
    assert!(shaped["properties"]["b"].is_object(), "{shaped}");
    let typed = grammar(
        json!({"type": "object", "properties": {}, "required": ["b"],
        "additionalProperties": {"type": "integer"}}),
    );
    assert_eq!(typed["properties"]["b"], json!({"type": "integer"}));
}

#[test]
fn unconstrained_values_become_bounded_any_values() {
    let shaped = grammar(
        json!({"type": "object", "properties": {"v": {}, "w": true, "m": {"type": "object"}}}),
    );
    let scalar = json!({"type": ["string", "number", "boolean", "null"], "maxLength": 50});
    let any = json!({"type": ["string", "number", "boolean", "null", "array", "object"], "maxLength": 50,
        "items": scalar, "additionalProperties": scalar});
    assert_eq!(shaped["properties"]["v"], any);
    assert_eq!(shaped["properties"]["w"], any);
    assert_eq!(
        shaped["properties"]["m"],
        json!({"type": "object", "additionalProperties": any})
    );
    // The tool's own input without declared properties takes no arguments.
    assert_eq!(
        grammar(json!({"type": "object"})),
        json!({"type": "object", "properties": {}, "additionalProperties": false})
    );
    assert_eq!(
        grammar(json!({})),
        json!({"type": "object", "properties": {}, "additionalProperties": false})
    );
}

#[test]
fn tuples_of_draft_7_become_prefix_items() {
    let shaped = grammar(
        json!({"type": "object", "properties": {"t": {"type": "array",
        "items": [{"type": "string"}, {"type": "number"}], "additionalItems": false, "uniqueItems": true}}}),
    );
    assert_eq!(
        shaped["properties"]["t"],
        json!({"type": "array", "prefixItems": [{"type": "string", "maxLength": 50}, {"type": "number"}], "items": false})
    );
}

#[test]
fn one_of_is_read_as_any_of_and_nested_alternatives_are_flattened() {
    let shaped = grammar(json!({"type": "object", "properties": {"v": {"anyOf": [
        {"oneOf": [{"type": "string"}, {"type": "boolean"}]}, {"type": "null"}]}}}));
    assert_eq!(
        shaped["properties"]["v"],
        json!({"anyOf": [{"type": "string", "maxLength": 50}, {"type": "boolean"}, {"type": "null"}]})
    );
}

#[test]
fn grammar_shaping_is_idempotent_on_the_corpus_rules() {
    let schema = json!({"type": "object", "properties": {
        "a": {"$ref": "#/$defs/A"}, "b": {}, "c": {"type": ["string", "null"], "maxLength": 9000}},
        "oneOf": [{"required": ["a"]}, {"required": ["b"]}],
        "$defs": {"A": {"type": "array", "items": {"type": "object", "properties": {"x": {"type": "string"}}}}}});
    let once = grammar(schema);
    assert_eq!(grammar(once.clone()), once);
}

#[test]
fn split_choice_keeps_shared_arguments_in_every_branch() {
    let schema = json!({"type": "object",
        "properties": {"path": {"type": "string"}, "url": {"type": "string"}, "depth": {"type": "integer"}},
        "required": ["depth"],
        "oneOf": [{"required": ["path"]}, {"required": ["url"]}]});
    let branches = split_choice(schema.clone()).unwrap();
    assert_eq!(
        branches,
        [
            json!({"type": "object", "properties": {"path": {"type": "string"}, "depth": {"type": "integer"}},
                "required": ["depth", "path"], "additionalProperties": false}),
            json!({"type": "object", "properties": {"url": {"type": "string"}, "depth": {"type": "integer"}},
                "required": ["depth", "url"], "additionalProperties": false}),
        ]
    );
}

#[test]
fn split_choice_gives_every_branch_the_same_keys_in_the_same_order() {
    // The last branch is the schema itself, rewritten; the others are copies.
    let schema = json!({"type": "object", "title": "Where",
        "properties": {"path": {"type": "string"}, "url": {"type": "string"}, "id": {"type": "integer"}},
        "anyOf": [{"required": ["path"]}, {"required": ["url"]}, {"required": ["id"]}],
        "description": "One place."});
    let branches = split_choice(schema).unwrap();
    let keys =
        |branch: &Value| -> Vec<String> { branch.as_object().unwrap().keys().cloned().collect() };
    assert_eq!(branches.len(), 3);
    for branch in &branches {
        assert_eq!(
            keys(branch),
            [
                "title",
                "properties",
                "description",
                "type",
                "required",
                "additionalProperties"
            ]
        );
    }
    assert_eq!(
        branches[2]["properties"],
        json!({"id": {"type": "integer"}})
    );
    assert_eq!(branches[2]["required"], json!(["id"]));
}

#[test]
fn split_choice_leaves_other_alternatives_alone() {
    for schema in [
        json!({"type": "object", "properties": {"a": {"type": "string"}}}),
        json!({"type": "object", "properties": {"a": {}}, "oneOf": [{"required": ["a"]}]}),
        json!({"type": "object", "properties": {"a": {}}, "oneOf": [{"required": ["a"]}, {"required": ["b"]}]}),
        json!({"oneOf": [{"required": ["a"]}, {"required": ["b"]}]}),
        json!({"type": "object", "properties": {"a": {}, "b": {}}, "oneOf": [{"required": ["a"]}, {"required": ["a", "b"]}]}),
        json!({"type": "object", "properties": {"a": {}, "b": {}}, "oneOf": [{"required": ["a"]}, {"properties": {"b": {}}}]}),
        json!({"type": "object", "properties": {"a": {}, "b": {}}, "oneOf": [{"required": ["a"]}, {"required": ["b"]}],
            "anyOf": [{"required": ["a"]}, {"required": ["b"]}]}),
    ] {
        assert_eq!(
            split_choice(schema.clone()).unwrap(),
            std::slice::from_ref(&schema)
        );
    }
}

#[test]
fn portable_schemas_have_no_top_level_alternatives() {
    let schema = json!({"anyOf": [
        {"type": "object", "properties": {"a": {"type": "string"}, "c": {"type": "boolean"}}, "required": ["a", "c"]},
        {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}}, "required": ["a", "b"]},
    ]});
    assert_eq!(
        openai(schema),
        json!({"type": "object",
            "properties": {
                "a": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
                "b": {"type": "string"},
                "c": {"type": "boolean"},
            },
            "required": ["a"]})
    );
    let all = json!({"type": ["object", "null"], "allOf": [{"properties": {"x": {"type": "string"}}, "required": ["x"]}]});
    assert_eq!(
        openai(all),
        json!({"type": "object", "properties": {"x": {"type": "string"}}, "required": ["x"]})
    );
}

#[test]
fn a_choice_between_arguments_is_stated_in_the_description() {
    let schema = json!({"type": "object", "description": "Fetch a page.",
        "properties": {"path": {"type": "string"}, "url": {"type": "string"}},
        "oneOf": [{"required": ["path"]}, {"required": ["url"]}]});
    for target in [
        SchemaTarget::OpenAi,
        SchemaTarget::Anthropic,
        SchemaTarget::Gemini,
    ] {
        let portable = portable_tool_schema(&schema, target).unwrap();
        assert_eq!(
            portable["description"],
            "Fetch a page.\n\nGive exactly one of: `path`, `url`."
        );
        assert_eq!(portable.get("oneOf"), None);
        assert_eq!(portable.get("required"), None);
    }
}

#[test]
fn gemini_gets_only_the_keywords_its_schema_has() {
    let shaped = gemini(json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema", "$id": "urn:x", "type": "object",
        "additionalProperties": false, "title": "Args", "examples": [{}],
        "properties": {
            "name": {"type": ["string", "null"], "default": "x", "format": "hostname", "title": "Name"},
            "when": {"type": "string", "format": "date-time", "pattern": "^2"},
            "mode": {"const": "fast"},
            "level": {"type": "integer", "enum": [1, 2, 3], "description": "Level."},
            "ratio": {"type": "number", "format": "double", "exclusiveMinimum": 0, "maximum": 1, "multipleOf": 0.1},
            "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": true, "contains": {"const": "a"}},
            "pair": {"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}]},
            "any": {"type": "array"},
            "mixed": {"type": ["string", "integer"], "maxLength": 4},
            "maybe": {"anyOf": [{"$ref": "#/$defs/Point"}, {"type": "null"}]},
            "empty": {"type": "object", "properties": {}, "required": ["ghost"]},
            "yes": true,
        },
        "required": ["name", "undeclared"],
        "$defs": {"Point": {"type": "object", "properties": {"x": {"type": "number"}}, "required": ["x"],
            "additionalProperties": false, "propertyNames": {"pattern": "^[a-z]$"}}},
    }));
    assert_eq!(
        shaped,
        json!({"type": "object", "description": "Args", "required": ["name"], "properties": {
            "name": {"type": "string", "nullable": true, "description": "Name"},
            "when": {"type": "string", "format": "date-time", "pattern": "^2"},
            "mode": {"type": "string", "enum": ["fast"]},
            "level": {"type": "integer", "description": "Level. One of: 1, 2, 3."},
            "ratio": {"type": "number", "format": "double", "minimum": 0, "maximum": 1},
            "tags": {"type": "array", "items": {"type": "string"}},
            "pair": {"type": "array", "items": {"anyOf": [{"type": "string"}, {"type": "integer"}]}},
            "any": {"type": "array", "items": {}},
            "mixed": {"anyOf": [{"type": "string", "maxLength": 4}, {"type": "integer"}]},
            "maybe": {"type": "object", "nullable": true, "properties": {"x": {"type": "number"}}, "required": ["x"]},
            "empty": {"type": "object"},
            "yes": {},
        }})
    );
}

#[test]
fn gemini_root_without_arguments_is_a_bare_object() {
    assert_eq!(
        gemini(json!({"type": "object", "properties": {}})),
        json!({"type": "object"})
    );
    assert_eq!(
        openai(json!({"type": "object"})),
        json!({"type": "object", "properties": {}})
    );
}
