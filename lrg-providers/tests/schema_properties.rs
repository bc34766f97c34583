//! Corpus properties of schema shaping, checked with the `jsonschema` crate:
//!
//! - an instance valid against the grammar schema (or one of its
//!   `split_choice` branches: what a local model is constrained with) and within
//!   the original's bounds is valid against the original schema;
//! - each `split_choice` branch accepts exactly one of the choices;
//! - the portable schemas accept those instances too (they only relax).
//!
//! Instances come from a small deterministic generator that walks the shaped
//! schema and picks plausible values, several per schema. "Within the original's
//! bounds" is decided by the validator: an instance whose only errors against
//! the original come from keywords grammar shaping drops on purpose (numeric
//! bounds, `format`, `pattern`, `uniqueItems`, ...) is counted as out of bounds
//! and set aside; any other error fails the test.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::schema_corpus;

use jsonschema::Validator;
use jsonschema::error::ValidationErrorKind;
use lrg_providers::schema::{SchemaTarget, grammar_schema, portable_tool_schema, split_choice};
use schema_corpus::{Tool, corpus};
use serde_json::{Map, Value, json};

const CAP: u32 = 40;
const INSTANCES_PER_BRANCH: u64 = 24;

/// Keywords grammar shaping drops on purpose: an instance that breaks only
/// these is outside the original's bounds. `oneOf` exclusivity is read as
/// `anyOf` by design (choices between arguments are `split_choice`'s job).
fn dropped_on_purpose(kind: &ValidationErrorKind) -> bool {
    matches!(kind, ValidationErrorKind::OneOfMultipleValid { .. })
        || matches!(
            kind.keyword(),
            "minimum"
                | "maximum"
                | "exclusiveMinimum"
                | "exclusiveMaximum"
                | "multipleOf"
                | "format"
                | "pattern"
                | "uniqueItems"
                | "minProperties"
                | "maxProperties"
                | "contains"
                | "propertyNames"
        )
}

/// splitmix64: deterministic, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// `parent` with `part`'s keywords added: properties merged, required joined.
fn merged(parent: &Map<String, Value>, part: &Value, without: &str) -> Value {
    let mut out = parent.clone();
    out.remove(without);
    if let Value::Object(part) = part {
        for (key, value) in part {
            match (key.as_str(), out.get_mut(key), value) {
                ("properties", Some(Value::Object(existing)), Value::Object(added)) => {
                    existing.extend(added.clone());
                }
                ("required", Some(Value::Array(existing)), Value::Array(added)) => {
                    existing.extend(added.iter().cloned());
                }
                _ => {
                    out.insert(key.clone(), value.clone());
                }
            }
        }
    }
    Value::Object(out)
}

/// One instance the shaped `schema` accepts (or should), or `None` when this
/// path cannot produce one.
fn generate(schema: &Value, rng: &mut Rng, depth: usize) -> Option<Value> {
    assert!(depth < 40, "generator ran away on {schema}");
    let map = match schema {
        Value::Bool(true) => return Some(json!("x")),
        Value::Bool(false) => return None,
        Value::Object(map) => map,
        other => panic!("not a schema: {other}"),
    };
    if let Some(Value::Array(parts)) = map.get("anyOf") {
        let part = rng.pick(parts);
        return generate(&merged(map, part, "anyOf"), rng, depth + 1);
    }
    if let Some(Value::Array(parts)) = map.get("allOf") {
        let mut all = map.clone();
        all.remove("allOf");
        let mut all = Value::Object(all);
        for part in parts {
            all = merged(all.as_object()?, part, "allOf");
        }
        return generate(&all, rng, depth + 1);
    }
    if let Some(Value::Array(values)) = map.get("enum") {
        return Some(rng.pick(values).clone());
    }
    if let Some(value) = map.get("const") {
        return Some(value.clone());
    }
    let types: Vec<&str> = match map.get("type") {
        Some(Value::String(name)) => vec![name],
        Some(Value::Array(names)) => names.iter().filter_map(Value::as_str).collect(),
        _ if map.contains_key("properties") => vec!["object"],
        _ => vec!["string"],
    };
    match *rng.pick(&types) {
        "null" => Some(Value::Null),
        "boolean" => Some(Value::Bool(rng.next().is_multiple_of(2))),
        "integer" => Some(json!(*rng.pick(&[1, 2, 3, 5, 7, 10, 0, 42]))),
        "number" => Some(json!(*rng.pick(&[1.0, 2.5, 0.5, 3.0, 10.0, 7.25]))),
        "string" => {
            let min = map.get("minLength").and_then(Value::as_u64).unwrap_or(0) as usize;
            let max = map
                .get("maxLength")
                .and_then(Value::as_u64)
                .map_or(usize::MAX, |m| m as usize);
            let mut candidates: Vec<String> = [
                "a",
                "abc",
                "hello world",
                "2024-01-02T03:04:05Z",
                "https://example.com/page",
                "x@example.com",
                "+44 20 7946 0000",
                "my-slug-1",
                "",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect();
            if max < 100 {
                candidates.push("m".repeat(max));
            }
            candidates.retain(|s| (min..=max).contains(&s.chars().count()));
            if candidates.is_empty() {
                return Some(Value::String("n".repeat(min)));
            }
            Some(Value::String(rng.pick(&candidates).clone()))
        }
        "array" => {
            let min = map.get("minItems").and_then(Value::as_u64).unwrap_or(0) as usize;
            let max = map
                .get("maxItems")
                .and_then(Value::as_u64)
                .map_or(usize::MAX, |m| m as usize);
            let prefix = map
                .get("prefixItems")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            let items = map.get("items");
            let mut len = (min + rng.below(3)).min(max).max(min);
            if items.is_none() && !prefix.is_empty() {
                len = len.min(prefix.len());
            }
            let mut out = Vec::with_capacity(len);
            for index in 0..len {
                let item = prefix
                    .get(index)
                    .or(items)
                    .cloned()
                    .unwrap_or(Value::Bool(true));
                out.push(generate(&item, rng, depth + 1)?);
            }
            Some(Value::Array(out))
        }
        "object" => {
            let required: Vec<&str> = map
                .get("required")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            let mut out = Map::new();
            if let Some(Value::Object(properties)) = map.get("properties") {
                for (name, schema) in properties {
                    if required.contains(&name.as_str()) || rng.next().is_multiple_of(2) {
                        out.insert(name.clone(), generate(schema, rng, depth + 1)?);
                    }
                }
            }
            for name in &required {
                if !out.contains_key(*name) {
                    out.insert((*name).to_owned(), json!("x"));
                }
            }
            if let Some(values @ Value::Object(_)) = map.get("additionalProperties")
                && rng.next().is_multiple_of(2)
            {
                out.insert("extra_key".into(), generate(values, rng, depth + 1)?);
            }
            Some(Value::Object(out))
        }
        other => panic!("unknown type {other}"),
    }
}

fn validator(schema: &Value) -> Validator {
    jsonschema::options()
        .should_validate_formats(true)
        .build(schema)
        .unwrap_or_else(|e| panic!("invalid schema {schema}: {e}"))
}

fn errors(validator: &Validator, instance: &Value) -> Vec<String> {
    validator
        .iter_errors(instance)
        .map(|e| format!("{} at {}: {e}", e.kind().keyword(), e.instance_path()))
        .collect()
}

/// What happened to one tool's instances.
#[derive(Default, Debug)]
struct Tally {
    checked: usize,
    out_of_bounds: usize,
}

fn check_tool(tool: &Tool) -> Tally {
    let name = &tool.name;
    let original = validator(&tool.schema);
    let grammar = grammar_schema(&tool.schema, CAP).unwrap();
    let branches = split_choice(grammar.clone()).unwrap();
    let raw_branches = split_choice(tool.schema.clone()).unwrap();
    assert_eq!(
        branches.len(),
        raw_branches.len(),
        "{name}: raw and shaped schemas split alike"
    );
    let branch_validators: Vec<Validator> = branches.iter().map(validator).collect();
    let portable: Vec<Validator> = [SchemaTarget::OpenAi, SchemaTarget::Anthropic]
        .into_iter()
        .map(|target| validator(&portable_tool_schema(&tool.schema, target).unwrap()))
        .collect();

    let mut tally = Tally::default();
    for (index, branch) in branches.iter().enumerate() {
        let mut in_bounds = 0;
        for seed in 0..INSTANCES_PER_BRANCH {
            let mut rng = Rng(seed * 7919 + index as u64);
            let Some(instance) = generate(branch, &mut rng, 0) else {
                continue;
            };
            let own = errors(&branch_validators[index], &instance);
            assert!(
                own.is_empty(),
                "{name}: generated {instance} is not valid against its branch {branch}: {own:?}"
            );
            for (other, other_validator) in branch_validators.iter().enumerate() {
                if other != index {
                    assert!(
                        !other_validator.is_valid(&instance),
                        "{name}: {instance} (choice {index}) is also valid against branch {other}: {}",
                        branches[other]
                    );
                }
            }
            let against_original: Vec<_> = original.iter_errors(&instance).collect();
            if !against_original.is_empty() {
                let unexpected: Vec<String> = against_original
                    .iter()
                    .filter(|e| !dropped_on_purpose(e.kind()))
                    .map(|e| format!("{} at {}: {e}", e.kind().keyword(), e.instance_path()))
                    .collect();
                assert!(
                    unexpected.is_empty(),
                    "{name}: {instance} is valid against the grammar schema but not the original: {unexpected:?}\n\
                     grammar branch: {branch}\noriginal: {}",
                    tool.schema
                );
                tally.out_of_bounds += 1;
                continue;
            }
            for validator in &portable {
                let errors = errors(validator, &instance);
                assert!(
                    errors.is_empty(),
                    "{name}: portable schema refuses {instance}: {errors:?}"
                );
            }
            in_bounds += 1;
            tally.checked += 1;
        }
        assert!(
            in_bounds > 0,
            "{name}: no instance of branch {index} within the original's bounds: {branch}"
        );
    }
    tally
}

#[test]
fn grammar_instances_are_valid_against_the_original() {
    let mut total = Tally::default();
    let tools = corpus();
    assert!(tools.len() >= 35, "corpus has {} tools", tools.len());
    for tool in &tools {
        let tally = check_tool(tool);
        total.checked += tally.checked;
        total.out_of_bounds += tally.out_of_bounds;
    }
    eprintln!("{} tools: {total:?}", tools.len());
    // Most instances must be in bounds, or the property says little.
    assert!(total.checked > 3 * total.out_of_bounds, "{total:?}");
}

#[test]
fn each_branch_takes_exactly_one_choice() {
    let tools = corpus();
    let choice_tools: Vec<&Tool> = tools
        .iter()
        .filter(|t| split_choice(t.schema.clone()).is_ok_and(|b| b.len() > 1))
        .collect();
    let names: Vec<&str> = choice_tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "choices/fetch_page",
            "choices/locate",
            "choices/notify",
            "choices/lookup_record",
            "choices/search"
        ],
        "the corpus's choices are recognised, its near misses are not"
    );
    let fetch = choice_tools[0];
    let branches = split_choice(grammar_schema(&fetch.schema, CAP).unwrap()).unwrap();
    let validators: Vec<Validator> = branches.iter().map(validator).collect();
    let original = validator(&fetch.schema);
    let by_path = json!({"path": "/tmp/a.html", "max_bytes": 10});
    let by_url = json!({"url": "https://example.com/", "max_bytes": 10});
    let both = json!({"path": "/tmp/a.html", "url": "https://example.com/"});
    let neither = json!({"max_bytes": 10});
    let accepts = |instance: &Value| {
        validators
            .iter()
            .map(|v| v.is_valid(instance))
            .collect::<Vec<_>>()
    };
    assert_eq!(accepts(&by_path), [true, false]);
    assert_eq!(accepts(&by_url), [false, true]);
    assert_eq!(accepts(&both), [false, false]);
    assert_eq!(accepts(&neither), [false, false]);
    assert!(original.is_valid(&by_path) && original.is_valid(&by_url));
    assert!(!original.is_valid(&both) && !original.is_valid(&neither));

    // Two names per choice, plus a name every branch requires.
    let locate = choice_tools[1];
    let branches = split_choice(locate.schema.clone()).unwrap();
    let validators: Vec<Validator> = branches.iter().map(validator).collect();
    let accepts = |instance: &Value| {
        validators
            .iter()
            .map(|v| v.is_valid(instance))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        accepts(&json!({"units": "km", "lat": 1.0, "lon": 2.0})),
        [true, false]
    );
    assert_eq!(
        accepts(&json!({"units": "km", "address": "Main St 1"})),
        [false, true]
    );
    assert_eq!(accepts(&json!({"units": "km", "lat": 1.0})), [false, false]);
    assert_eq!(accepts(&json!({"lat": 1.0, "lon": 2.0})), [false, false]);
}

#[test]
fn a_schema_without_a_choice_is_its_own_only_branch() {
    for tool in corpus() {
        let branches = split_choice(tool.schema.clone()).unwrap();
        if branches.len() == 1 {
            assert_eq!(branches[0], tool.schema, "{}", tool.name);
        }
    }
}
