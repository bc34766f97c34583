//! Bad input to schema shaping gets a clear error, never a panic or a stack
//! overflow.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use lrg_providers::schema::{
    SchemaError, SchemaTarget, grammar_schema, portable_tool_schema, split_choice,
};
use serde_json::{Value, json};

const TARGETS: [SchemaTarget; 3] = [
    SchemaTarget::OpenAi,
    SchemaTarget::Anthropic,
    SchemaTarget::Gemini,
];

/// Runs all three functions and returns every error (split_choice succeeds on
/// schemas it has nothing to split, so it is only checked where it must fail).
fn shaping_errors(schema: &Value) -> Vec<SchemaError> {
    let mut errors = Vec::new();
    errors.extend(grammar_schema(schema, 100).err());
    for target in TARGETS {
        errors.extend(portable_tool_schema(schema, target).err());
    }
    errors
}

#[test]
fn a_schema_that_is_not_an_object_is_refused_by_all_three() {
    for schema in [
        json!("string"),
        json!(true),
        json!([{"type": "object"}]),
        json!(null),
        json!(3),
    ] {
        let errors = shaping_errors(&schema);
        assert_eq!(errors.len(), 4, "{schema}");
        for error in errors {
            assert!(
                matches!(error, SchemaError::NotAnObject { ref path, .. } if path.is_empty()),
                "{error:?}"
            );
        }
        let error = split_choice(schema.clone()).unwrap_err();
        assert!(
            matches!(error, SchemaError::NotAnObject { .. }),
            "{error:?}"
        );
    }
}

#[test]
fn a_subschema_that_is_not_a_schema_names_where_it_is() {
    let schema = json!({"type": "object", "properties": {"a/b": 5}});
    let error = grammar_schema(&schema, 100).unwrap_err();
    assert_eq!(
        error,
        SchemaError::NotAnObject {
            path: "/properties/a~1b".into(),
            found: "number"
        }
    );
    assert_eq!(
        error.to_string(),
        "schema at #/properties/a~1b must be a JSON object, found number"
    );
}

#[test]
fn an_unresolved_ref_names_the_ref_and_where_it_is() {
    let cases = [
        json!({"type": "object", "properties": {"x": {"$ref": "#/$defs/Missing"}}, "$defs": {}}),
        json!({"type": "object", "properties": {"x": {"$ref": "https://example.com/s.json"}}}),
        json!({"type": "object", "properties": {"x": {"$ref": "#anchor"}}}),
        json!({"type": "object", "properties": {"x": {"$ref": "#/$defs/%ZZ"}}}),
    ];
    for schema in cases {
        let errors = shaping_errors(&schema);
        assert_eq!(errors.len(), 4, "{schema}");
        for error in errors {
            let SchemaError::UnresolvedRef {
                path, reference, ..
            } = &error
            else {
                panic!("{error:?}");
            };
            assert_eq!(path, "/properties/x");
            assert_eq!(
                Some(reference.as_str()),
                schema["properties"]["x"]["$ref"].as_str()
            );
            assert!(error.to_string().contains(reference.as_str()), "{error}");
        }
    }
}

#[test]
fn a_recursive_ref_is_refused_not_followed() {
    let cases = [
        // A tree: a node holds nodes.
        json!({"$ref": "#/$defs/Node", "$defs": {"Node": {"type": "object", "properties": {
            "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}}}}}}),
        // The root refers to itself.
        json!({"type": "object", "properties": {"again": {"$ref": "#"}}}),
        // Two definitions refer to each other.
        json!({"type": "object", "properties": {"a": {"$ref": "#/definitions/A"}}, "definitions": {
            "A": {"type": "object", "properties": {"b": {"$ref": "#/definitions/B"}}},
            "B": {"type": "object", "properties": {"a": {"$ref": "#/definitions/A"}}}}}),
        // A ref to itself.
        json!({"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}}, "$defs": {"A": {"$ref": "#/$defs/A"}}}),
    ];
    for schema in cases {
        let errors = shaping_errors(&schema);
        assert_eq!(errors.len(), 4, "{schema}");
        for error in errors {
            assert!(
                matches!(error, SchemaError::RecursiveRef { .. }),
                "{error:?}"
            );
            assert!(error.to_string().contains("recursive"), "{error}");
        }
    }
}

/// `{key: inner, ...rest}`, moving `inner` in (`json!` would serialize it,
/// recursively).
fn wrap(rest: Value, key: &str, inner: Value) -> Value {
    let Value::Object(mut map) = rest else {
        unreachable!()
    };
    map.insert(key.to_owned(), inner);
    Value::Object(map)
}

/// `depth` levels of `{"type": "object", "properties": {"a": ...}}`, built
/// without recursion.
fn nested(depth: usize) -> Value {
    let mut schema = json!({"type": "string"});
    for _ in 0..depth {
        let properties = wrap(json!({}), "a", schema);
        schema = wrap(json!({"type": "object"}), "properties", properties);
    }
    schema
}

/// Drops a deep value without recursing (serde_json drops recursively).
fn drop_flat(value: Value) {
    let mut stack = vec![value];
    while let Some(mut value) = stack.pop() {
        match &mut value {
            Value::Object(map) => stack.extend(std::mem::take(map).into_iter().map(|(_, v)| v)),
            Value::Array(items) => stack.append(items),
            _ => {}
        }
    }
}

#[test]
fn ten_thousand_levels_of_nesting_are_an_error_not_a_stack_overflow() {
    let schema = nested(10_000);
    let errors = shaping_errors(&schema);
    assert_eq!(errors.len(), 4);
    for error in errors {
        assert!(matches!(error, SchemaError::TooDeep { .. }), "{error:?}");
    }
    // Taken by value, and dropped without recursion.
    assert!(matches!(
        split_choice(schema),
        Err(SchemaError::TooDeep { .. })
    ));

    let mut array = json!(0);
    for _ in 0..10_000 {
        array = wrap(json!({"type": "object"}), "enum", Value::Array(vec![array]));
    }
    assert!(matches!(
        grammar_schema(&array, 10),
        Err(SchemaError::TooDeep { .. })
    ));
    drop_flat(array);
}

#[test]
fn nesting_within_the_limit_is_shaped() {
    let schema = nested(60);
    let shaped = grammar_schema(&schema, 10).unwrap();
    let mut at = &shaped;
    for _ in 0..60 {
        assert_eq!(at["additionalProperties"], json!(false));
        at = &at["properties"]["a"];
    }
    assert_eq!(at, &json!({"type": "string", "maxLength": 10}));
}

#[test]
fn refs_that_fan_out_exponentially_are_refused() {
    // Each level refers to the next one twice: 2^25 copies once inlined.
    let mut defs = serde_json::Map::new();
    for level in 0..25 {
        let next = format!("#/$defs/L{}", level + 1);
        defs.insert(
            format!("L{level}"),
            json!({"type": "object", "properties": {"l": {"$ref": next}, "r": {"$ref": next}}}),
        );
    }
    defs.insert("L25".into(), json!({"type": "string"}));
    let schema =
        json!({"type": "object", "properties": {"x": {"$ref": "#/$defs/L0"}}, "$defs": defs});
    let errors = shaping_errors(&schema);
    assert_eq!(errors.len(), 4);
    for error in errors {
        assert!(matches!(error, SchemaError::TooLarge { .. }), "{error:?}");
    }
}

#[test]
fn invalid_keyword_values_name_the_keyword() {
    let cases = [
        (
            json!({"type": "object", "properties": {"a": {"type": "text"}}}),
            "type",
            "/properties/a",
        ),
        (
            json!({"type": "object", "required": "a", "properties": {}}),
            "required",
            "",
        ),
        (
            json!({"type": "object", "properties": {"a": {"type": "string", "maxLength": -1}}}),
            "maxLength",
            "/properties/a",
        ),
        (
            json!({"type": "object", "properties": {"a": {"anyOf": []}}}),
            "anyOf",
            "/properties/a/anyOf",
        ),
        (
            json!({"type": "object", "properties": {"a": {"$ref": 7}}}),
            "$ref",
            "/properties/a",
        ),
        (
            json!({"type": "object", "properties": []}),
            "properties",
            "",
        ),
    ];
    for (schema, keyword, at) in cases {
        let error = grammar_schema(&schema, 100).unwrap_err();
        let SchemaError::InvalidKeyword {
            path,
            keyword: named,
            ..
        } = &error
        else {
            panic!("{schema}: {error:?}");
        };
        assert_eq!((named.as_str(), path.as_str()), (keyword, at), "{error}");
    }
}

#[test]
fn a_root_that_is_not_an_object_type_is_refused_for_cloud_apis() {
    let schema = json!({"type": "string"});
    for target in TARGETS {
        let error = portable_tool_schema(&schema, target).unwrap_err();
        assert!(error.to_string().contains("must be an object"), "{error}");
    }
}
