use serde_json::json;

use super::*;

/// The form server-everything's `trigger-elicitation-request` asks.
fn everything_form() -> Value {
    json!({
        "type": "object",
        "properties": {
            "name": {"title": "String", "type": "string", "description": "Your full, legal name"},
            "check": {"title": "Boolean", "type": "boolean"},
            "firstLine": {"type": "string", "default": "It was a dark and stormy night."},
            "email": {"type": "string", "format": "email"},
            "homepage": {"type": "string", "format": "uri"},
            "birthdate": {"type": "string", "format": "date"},
            "integer": {"type": "integer", "minimum": 1, "maximum": 100, "default": 42},
            "number": {"type": "number", "minimum": 0, "maximum": 1000, "default": 2.5},
            "untitledSingleSelectEnum": {"type": "string", "enum": ["Monica", "Rachel"], "default": "Monica"},
            "untitledMultipleSelectEnum": {
                "type": "array", "minItems": 1, "maxItems": 2,
                "items": {"type": "string", "enum": ["Guitar", "Piano", "Violin"]},
                "default": ["Guitar"]
            },
            "titledSingleSelectEnum": {
                "type": "string",
                "oneOf": [{"const": "hero-1", "title": "Superman"}, {"const": "hero-2", "title": "Green Lantern"}]
            },
            "titledMultipleSelectEnum": {
                "type": "array",
                "items": {"anyOf": [{"const": "fish-1", "title": "Tuna"}, {"const": "fish-2", "title": "Salmon"}]}
            },
            "legacyTitledEnum": {"type": "string", "enum": ["pet-1", "pet-2"], "enumNames": ["Cats", "Dogs"]},
            "when": {"type": "string", "format": "date-time"},
            "nick": {"type": "string", "minLength": 2, "maxLength": 4}
        },
        "required": ["name"]
    })
}

fn err(form: &Form, content: Value) -> FieldError {
    form.check(&content).unwrap_err()
}

#[test]
fn every_kind_of_the_subset_is_read() {
    let form = Form::parse(&everything_form()).unwrap();
    assert_eq!(form.fields.len(), 15);
    let name = form.field("name").unwrap();
    assert!(name.required);
    assert_eq!(name.label(), "String");
    assert_eq!(form.field("integer").unwrap().default, Some(json!(42)));
    assert!(matches!(
        form.field("legacyTitledEnum").unwrap().kind,
        FieldKind::Choice { ref options } if options[1].title.as_deref() == Some("Dogs")
    ));
    assert!(matches!(
        form.field("titledMultipleSelectEnum").unwrap().kind,
        FieldKind::Choices { ref options, .. } if options[0].value == "fish-1"
    ));
}

#[test]
fn a_good_answer_passes_and_a_bad_one_names_its_field() {
    let form = Form::parse(&everything_form()).unwrap();
    let good = json!({
        "name": "Ada", "check": true, "email": "ada@example.com",
        "homepage": "https://ada.example/", "birthdate": "1815-12-10",
        "integer": 7, "number": 2.5, "untitledSingleSelectEnum": "Rachel",
        "untitledMultipleSelectEnum": ["Piano", "Violin"],
        "titledSingleSelectEnum": "hero-2", "titledMultipleSelectEnum": ["fish-1"],
        "legacyTitledEnum": "pet-2", "when": "2026-12-02T07:30:00.5+01:00", "nick": "ada"
    });
    assert_eq!(form.check(&good).unwrap().len(), 14);
    let cases = [
        (json!({}), "name", "is required"),
        (json!({"name": null}), "name", "is required"),
        (
            json!({"name": "A", "colour": "red"}),
            "colour",
            "no such field",
        ),
        (json!({"name": 5}), "name", "must be text"),
        (
            json!({"name": "A", "email": "ada.example.com"}),
            "email",
            "email",
        ),
        (
            json!({"name": "A", "homepage": "not a uri"}),
            "homepage",
            "URI",
        ),
        (
            json!({"name": "A", "birthdate": "2026-02-30"}),
            "birthdate",
            "date",
        ),
        (
            json!({"name": "A", "when": "2026-12-02 07:30"}),
            "when",
            "date and time",
        ),
        (
            json!({"name": "A", "integer": 101}),
            "integer",
            "at most 100",
        ),
        (json!({"name": "A", "integer": 1.5}), "integer", "whole"),
        (json!({"name": "A", "number": -1}), "number", "at least 0"),
        (
            json!({"name": "A", "check": "yes"}),
            "check",
            "true or false",
        ),
        (
            json!({"name": "A", "untitledSingleSelectEnum": "Joey"}),
            "untitledSingleSelectEnum",
            "one of",
        ),
        (
            json!({"name": "A", "untitledMultipleSelectEnum": []}),
            "untitledMultipleSelectEnum",
            "at least 1",
        ),
        (
            json!({"name": "A", "untitledMultipleSelectEnum": ["Piano", "Guitar", "Violin"]}),
            "untitledMultipleSelectEnum",
            "at most 2",
        ),
        (
            json!({"name": "A", "titledSingleSelectEnum": "Superman"}),
            "titledSingleSelectEnum",
            "one of",
        ),
        (json!({"name": "A", "nick": "a"}), "nick", "at least 2"),
        (json!({"name": "A", "nick": "abcde"}), "nick", "at most 4"),
    ];
    for (content, field, says) in cases {
        let e = err(&form, content.clone());
        assert_eq!(e.field, field, "{content}: {e}");
        assert!(e.message.contains(says), "{content}: {e}");
    }
    assert_eq!(err(&form, json!("Ada")).field, "content");
}

#[test]
fn typed_input_is_read_per_field() {
    let form = Form::parse(&everything_form()).unwrap();
    let f = |name: &str| form.field(name).unwrap();
    assert_eq!(f("integer").parse_input(" 12 "), Ok(json!(12)));
    assert!(f("integer").parse_input("twelve").is_err());
    assert_eq!(f("check").parse_input("y"), Ok(json!(true)));
    assert_eq!(
        f("titledSingleSelectEnum").parse_input("2"),
        Ok(json!("hero-2"))
    );
    assert_eq!(
        f("titledSingleSelectEnum").parse_input("Superman"),
        Ok(json!("hero-1"))
    );
    assert_eq!(
        f("untitledMultipleSelectEnum").parse_input("Piano, 1"),
        Ok(json!(["Piano", "Guitar"]))
    );
    assert!(f("email").parse_input("nope").is_err());
}

#[test]
fn schemas_outside_the_subset_are_refused_with_the_reason() {
    let cases = [
        (json!("form"), "not a JSON object"),
        (json!({"type": "array"}), "type \"object\""),
        (
            json!({"type": "object", "properties": {"address": {"type": "object", "properties": {}}}}),
            "field \"address\": nested objects",
        ),
        (
            json!({"type": "object", "properties": {"photo": {"type": "file"}}}),
            "field \"photo\": the type \"file\"",
        ),
        (
            json!({"type": "object", "properties": {"tags": {"type": "array", "items": {"type": "string"}}}}),
            "field \"tags\": a list",
        ),
        (
            json!({"type": "object", "properties": {"x": {"type": "string", "format": "ipv4"}}}),
            "\"ipv4\"",
        ),
        (
            json!({"type": "object", "properties": {}, "required": ["ghost"]}),
            "requires \"ghost\"",
        ),
        (
            json!({"type": "object", "properties": {"x": {}}}),
            "no \"type\"",
        ),
    ];
    for (schema, says) in cases {
        let e = Form::parse(&schema).unwrap_err();
        assert!(e.message.contains(says), "{schema}: {e}");
    }
}

#[test]
fn a_default_the_field_refuses_is_not_offered() {
    let form = Form::parse(&json!({
        "type": "object",
        "properties": {"n": {"type": "integer", "maximum": 5, "default": 9}}
    }))
    .unwrap();
    assert_eq!(form.fields[0].default, None);
}
