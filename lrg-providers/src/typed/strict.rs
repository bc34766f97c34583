//! Strict shaping: a caller's schema rewritten to the rules of an API's
//! strict structured-output mode (the rules are on [`strict_schema`]).

use serde_json::{Map, Value, json};

/// The property a non-object root is wrapped in.
pub(crate) const WRAP_KEY: &str = "answer";

/// Deepest subschema nesting shaped: the caller's schema is at most
/// [`super::MAX_SCHEMA_BYTES`], but references can fan out.
const MAX_DEPTH: usize = 64;

/// Which API's strict rules to shape for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StrictTarget {
    /// OpenAI Chat Completions and Responses (and servers that copy them).
    OpenAi,
    /// Anthropic structured outputs.
    Anthropic,
}

/// What an API is sent as the answer's schema.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct StrictSchema {
    /// The schema to send.
    pub schema: Value,
    /// Whether it meets the strict rules (send `strict: true`).
    pub strict: bool,
    /// Why not, when it does not: names the keyword and where it is.
    pub why_not: Option<String>,
    /// Whether the caller's root was wrapped in `{"answer": ...}`.
    pub wrapped: bool,
}

/// `schema` shaped for `target`'s strict mode. Never fails: a schema that
/// cannot be strict comes back as it was, `strict: false`.
///
/// OpenAI's strict mode (Chat Completions `response_format`, Responses
/// `text.format`) and Anthropic's structured outputs decode with a grammar
/// made from the schema, so they take a subset of JSON Schema:
///
/// - every object closed (`additionalProperties: false`) and every property
///   required; a property the caller left optional becomes required *and
///   nullable* (the answer's `null` is dropped again before validation, see
///   [`super::OutputSchema::check`]);
/// - the root an object: another root goes inside `{"answer": ...}`;
/// - `oneOf` read as `anyOf`;
/// - keywords the API does not enforce are moved into the `description`
///   (`maxLength: 20` becomes "… (also: maxLength 20)"), so the model still
///   reads them and validation still holds the answer to them;
/// - Anthropic follows no recursive reference: its references are inlined.
///
/// What cannot be made strict without changing what the schema means (an open
/// map, a tuple, `allOf`, `not`, `if`/`then`, a schema that admits anything)
/// is sent as it is with `strict: false` ([`StrictSchema::strict`]), and the
/// answer is validated like any other.
pub fn strict_schema(schema: &Value, target: StrictTarget) -> StrictSchema {
    let mut shaper = Shaper {
        target,
        root: schema,
        active: Vec::new(),
    };
    match shaper.shape(schema, &At::Root, 0) {
        Ok(shaped) => {
            let (shaped, wrapped) = wrap_root(shaped, true);
            if wrapped && mentions_root_ref(&shaped) {
                return loose(
                    schema_without_meta(schema),
                    "a `$ref` to the root (`#`) cannot survive wrapping a non-object root".into(),
                );
            }
            StrictSchema {
                schema: shaped,
                strict: true,
                why_not: None,
                wrapped,
            }
        }
        Err(why) => loose(schema_without_meta(schema), why),
    }
}

/// The caller's schema, sent without strictness (wrapped when its root is not
/// an object: the APIs take object roots only).
fn loose(schema: Value, why: String) -> StrictSchema {
    let (schema, wrapped) = wrap_root(schema, false);
    StrictSchema {
        schema,
        strict: false,
        why_not: Some(why),
        wrapped,
    }
}

/// `schema` without `$schema` and `$id`, which no API wants, keys in the
/// order the caller wrote them.
pub(crate) fn schema_without_meta(schema: &Value) -> Value {
    let mut schema = schema.clone();
    if let Some(map) = schema.as_object_mut() {
        map.shift_remove("$schema");
        map.shift_remove("$id");
    }
    schema
}

/// `{"answer": root}` when `root` is not an object schema; its `$defs` move
/// up with it so references keep resolving.
/// A strict root must also be free of `anyOf` (the APIs refuse a choice
/// there); a loose one need only be an object.
fn wrap_root(mut root: Value, strict: bool) -> (Value, bool) {
    let is_object = root.get("type").and_then(Value::as_str) == Some("object")
        && !(strict && root.get("anyOf").is_some());
    if is_object {
        return (root, false);
    }
    let mut wrapper = Map::new();
    if let Some(map) = root.as_object_mut() {
        for defs in ["$defs", "definitions"] {
            if let Some(d) = map.remove(defs) {
                wrapper.insert(defs.to_owned(), d);
            }
        }
    }
    wrapper.insert("additionalProperties".into(), Value::Bool(false));
    wrapper.insert("properties".into(), json!({ WRAP_KEY: root }));
    wrapper.insert("required".into(), json!([WRAP_KEY]));
    wrapper.insert("type".into(), json!("object"));
    (Value::Object(wrapper), true)
}

fn mentions_root_ref(value: &Value) -> bool {
    match value {
        Value::Object(map) => map
            .iter()
            .any(|(k, v)| (k == "$ref" && v == "#") || mentions_root_ref(v)),
        Value::Array(items) => items.iter().any(mentions_root_ref),
        _ => false,
    }
}

/// Where a subschema is, as a JSON pointer written out only for an error
/// (a path per subschema would otherwise be built and dropped at every node).
enum At<'a> {
    Root,
    Key(&'a At<'a>, &'a str),
    Index(&'a At<'a>, usize),
}

impl<'a> At<'a> {
    fn key(&'a self, key: &'a str) -> At<'a> {
        At::Key(self, key)
    }

    fn index(&'a self, index: usize) -> At<'a> {
        At::Index(self, index)
    }
}

impl std::fmt::Display for At<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            At::Root => f.write_str("#"),
            At::Key(parent, key) => write!(f, "{parent}/{key}"),
            At::Index(parent, index) => write!(f, "{parent}/{index}"),
        }
    }
}

/// What a keyword is to the shaper.
enum Role {
    /// Kept as it is.
    Keep,
    /// Dropped without a word (meta-data no model needs).
    Drop,
    /// Moved into the description.
    Describe,
    /// Makes the schema impossible to shape strictly.
    Refuse,
}

struct Shaper<'r> {
    target: StrictTarget,
    /// The whole schema, which `$ref`s point into.
    root: &'r Value,
    /// The references being inlined (Anthropic), outermost first: meeting
    /// one again is recursion.
    active: Vec<&'r str>,
}

impl<'r> Shaper<'r> {
    fn role(&self, keyword: &str, value: &Value) -> Role {
        match keyword {
            "type" | "enum" | "const" | "description" | "title" | "$ref" | "pattern" => Role::Keep,
            "$schema" | "$id" | "$comment" | "$anchor" | "readOnly" | "writeOnly"
            | "deprecated" | "contentEncoding" | "contentMediaType" => Role::Drop,
            // Inlined where they are used.
            "$defs" | "definitions" if self.target == StrictTarget::Anthropic => Role::Drop,
            // Numeric formats (schemars' `uint8`, `double`, ...) say no more
            // than the type and bounds beside them.
            "format"
                if value.as_str().is_some_and(|f| {
                    matches!(
                        f,
                        "int8"
                            | "int16"
                            | "int32"
                            | "int64"
                            | "uint"
                            | "uint8"
                            | "uint16"
                            | "uint32"
                            | "uint64"
                            | "float"
                            | "double"
                    )
                }) =>
            {
                Role::Drop
            }
            "format" => {
                let supported: &[&str] = match self.target {
                    StrictTarget::OpenAi => &[
                        "date-time",
                        "time",
                        "date",
                        "duration",
                        "email",
                        "hostname",
                        "ipv4",
                        "ipv6",
                        "uuid",
                    ],
                    StrictTarget::Anthropic => &[
                        "date-time",
                        "time",
                        "date",
                        "duration",
                        "email",
                        "hostname",
                        "uri",
                        "ipv4",
                        "ipv6",
                        "uuid",
                    ],
                };
                if value.as_str().is_some_and(|f| supported.contains(&f)) {
                    Role::Keep
                } else {
                    Role::Describe
                }
            }
            "minimum" | "maximum" | "exclusiveMinimum" | "exclusiveMaximum" | "multipleOf"
            | "maxItems" => match self.target {
                StrictTarget::OpenAi => Role::Keep,
                StrictTarget::Anthropic => Role::Describe,
            },
            "minItems" => match self.target {
                StrictTarget::OpenAi => Role::Keep,
                // Anthropic takes 0 and 1 only.
                StrictTarget::Anthropic if value.as_u64().is_some_and(|n| n <= 1) => Role::Keep,
                StrictTarget::Anthropic => Role::Describe,
            },
            "minLength" | "maxLength" | "minProperties" | "maxProperties" | "uniqueItems"
            | "contains" | "minContains" | "maxContains" | "default" | "examples" | "example"
            | "propertyNames" => Role::Describe,
            "patternProperties"
            | "prefixItems"
            | "allOf"
            | "not"
            | "if"
            | "then"
            | "else"
            | "dependentRequired"
            | "dependentSchemas"
            | "dependencies"
            | "unevaluatedProperties"
            | "unevaluatedItems"
            | "additionalItems" => Role::Refuse,
            // Handled by `shape` itself.
            "properties"
            | "required"
            | "additionalProperties"
            | "items"
            | "anyOf"
            | "oneOf"
            | "$defs"
            | "definitions" => Role::Keep,
            // An unknown keyword asserts nothing a validator knows either.
            _ => Role::Describe,
        }
    }

    fn shape(&mut self, schema: &'r Value, at: &At<'_>, depth: usize) -> Result<Value, String> {
        if depth > MAX_DEPTH {
            return Err(format!("{at} nests deeper than {MAX_DEPTH} levels"));
        }
        let Value::Object(map) = schema else {
            return Err(format!(
                "{at} is `{schema}`, which admits any value or none"
            ));
        };
        if self.target == StrictTarget::Anthropic
            && let Some(reference) = map.get("$ref").and_then(Value::as_str)
        {
            return self.inline(map, reference, at, depth);
        }
        let mut out = Map::with_capacity(map.len() + 2);
        // Written into directly: most schemas move nothing here.
        let mut described = String::new();
        for (keyword, value) in map {
            match self.role(keyword, value) {
                Role::Drop => {}
                Role::Describe => {
                    use std::fmt::Write as _;
                    let sep = if described.is_empty() { "" } else { "; " };
                    let _ = write!(described, "{sep}{keyword} {value}");
                }
                Role::Refuse => {
                    return Err(format!(
                        "{at} uses `{keyword}`, which strict mode cannot express"
                    ));
                }
                Role::Keep => {
                    let shaped = match keyword.as_str() {
                        "properties" | "$defs" | "definitions" => {
                            Value::Object(self.shape_map(value, &at.key(keyword), depth)?)
                        }
                        "items" => match value {
                            Value::Array(_) => {
                                return Err(format!(
                                    "{at}/items is a tuple, which strict mode cannot express"
                                ));
                            }
                            item => self.shape(item, &at.key("items"), depth + 1)?,
                        },
                        "anyOf" | "oneOf" => {
                            let Value::Array(parts) = value else {
                                return Err(format!("{at}/{keyword} is not a list"));
                            };
                            let mut shaped = Vec::with_capacity(parts.len());
                            for (i, part) in parts.iter().enumerate() {
                                let key = at.key(keyword);
                                shaped.push(self.shape(part, &key.index(i), depth + 1)?);
                            }
                            // oneOf is read as anyOf: a grammar cannot count matches.
                            let key = "anyOf";
                            if let Some(Value::Array(existing)) = out.get_mut(key) {
                                existing.extend(shaped);
                                continue;
                            }
                            out.insert(key.to_owned(), Value::Array(shaped));
                            continue;
                        }
                        "required" | "additionalProperties" => continue,
                        _ => value.clone(),
                    };
                    out.insert(keyword.clone(), shaped);
                }
            }
        }
        if is_object_schema(map) {
            self.close_object(map, &mut out, at)?;
        } else if !(out.contains_key("type")
            || out.contains_key("enum")
            || out.contains_key("const")
            || out.contains_key("anyOf")
            || out.contains_key("$ref"))
        {
            return Err(format!("{at} has no `type`, so it admits any value"));
        }
        if !out.contains_key("type")
            && let Some(name) = out.get("enum").and_then(one_type)
        {
            // Strict modes want a type beside an enum; its values say which.
            out.insert("type".into(), json!(name));
        }
        if !described.is_empty() {
            let also = format!("(also: {described})");
            let description = match out.get("description").and_then(Value::as_str) {
                Some(d) if !d.is_empty() => format!("{d} {also}"),
                _ => also,
            };
            out.insert("description".into(), Value::String(description));
        }
        Ok(Value::Object(out))
    }

    /// A `$ref` replaced by what it points to, shaped (Anthropic follows no
    /// reference). Annotations beside it (`description`, `title`) are laid
    /// over; an assertion beside it is not merged, so the schema goes loose.
    fn inline(
        &mut self,
        map: &'r Map<String, Value>,
        reference: &'r str,
        at: &At<'_>,
        depth: usize,
    ) -> Result<Value, String> {
        if self.active.contains(&reference) {
            return Err(format!(
                "its references cannot be inlined: {at} refers to `{reference}` inside itself"
            ));
        }
        let target = reference
            .strip_prefix('#')
            .and_then(|pointer| {
                if pointer.is_empty() {
                    Some(self.root)
                } else {
                    self.root.pointer(pointer)
                }
            })
            .ok_or_else(|| {
                format!("its references cannot be inlined: {at}/$ref `{reference}` points nowhere in this schema")
            })?;
        self.active.push(reference);
        let shaped = self.shape(target, at, depth + 1);
        self.active.pop();
        let mut shaped = shaped?;
        for (keyword, value) in map {
            match keyword.as_str() {
                "$ref" => {}
                "description" | "title" => {
                    if let Value::Object(out) = &mut shaped {
                        // What the target moved into its description stays.
                        let moved = out
                            .get(keyword.as_str())
                            .and_then(Value::as_str)
                            .and_then(|d| d.find("(also: ").map(|at| d[at..].to_owned()));
                        let value = match (value.as_str(), moved) {
                            (Some(own), Some(moved)) => Value::String(format!("{own} {moved}")),
                            _ => value.clone(),
                        };
                        out.insert(keyword.clone(), value);
                    }
                }
                other if matches!(self.role(other, value), Role::Drop) => {}
                other => {
                    return Err(format!(
                        "{at} has `{other}` beside its `$ref`, which strict mode cannot merge"
                    ));
                }
            }
        }
        Ok(shaped)
    }

    fn shape_map(
        &mut self,
        value: &'r Value,
        at: &At<'_>,
        depth: usize,
    ) -> Result<Map<String, Value>, String> {
        let Value::Object(entries) = value else {
            return Err(format!("{at} is not an object"));
        };
        let mut out = Map::with_capacity(entries.len());
        for (name, schema) in entries {
            out.insert(name.clone(), self.shape(schema, &at.key(name), depth + 1)?);
        }
        Ok(out)
    }

    /// Every property required, the optional ones made nullable, nothing else allowed.
    fn close_object(
        &mut self,
        source: &Map<String, Value>,
        out: &mut Map<String, Value>,
        at: &At<'_>,
    ) -> Result<(), String> {
        let declared = source
            .get("properties")
            .and_then(Value::as_object)
            .is_some_and(|p| !p.is_empty());
        match source.get("additionalProperties") {
            None | Some(Value::Bool(false)) if declared => {}
            Some(Value::Bool(false)) => {}
            _ => {
                return Err(format!(
                    "{at} is an open map (its keys are not listed), which strict mode cannot express"
                ));
            }
        }
        let required: Vec<&str> = source
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let mut names = Vec::new();
        if let Some(Value::Object(properties)) = out.get_mut("properties") {
            for (name, property) in properties.iter_mut() {
                if !required.contains(&name.as_str()) {
                    make_nullable(property);
                }
                names.push(Value::String(name.clone()));
            }
        } else {
            out.insert("properties".into(), Value::Object(Map::new()));
        }
        out.insert("required".into(), Value::Array(names));
        out.insert("additionalProperties".into(), Value::Bool(false));
        out.entry("type").or_insert_with(|| json!("object"));
        Ok(())
    }
}

/// The one JSON type every value of an `enum` has, if they share one.
fn one_type(values: &Value) -> Option<&'static str> {
    let kind = |v: &Value| match v {
        Value::String(_) => Some("string"),
        Value::Bool(_) => Some("boolean"),
        Value::Number(n) if n.is_i64() || n.is_u64() => Some("integer"),
        Value::Number(_) => Some("number"),
        _ => None,
    };
    let mut kinds = values.as_array()?.iter().map(kind);
    let first = kinds.next()??;
    kinds.all(|k| k == Some(first)).then_some(first)
}

fn is_object_schema(map: &Map<String, Value>) -> bool {
    match map.get("type") {
        Some(Value::String(t)) => t == "object",
        Some(Value::Array(ts)) => ts.iter().any(|t| t == "object"),
        _ => map.contains_key("properties"),
    }
}

/// An optional property made required and nullable: `null` added to its
/// type (and enum), or the property offered beside `{"type": "null"}`.
fn make_nullable(property: &mut Value) {
    let Value::Object(map) = property else {
        return;
    };
    let simple =
        (map.contains_key("type") || map.contains_key("enum")) && !map.contains_key("$ref");
    if simple {
        if let Some(t) = map.get_mut("type") {
            match t {
                Value::String(name) if name != "null" => {
                    *t = json!([name.clone(), "null"]);
                }
                Value::Array(names) if !names.iter().any(|n| n == "null") => {
                    names.push(json!("null"));
                }
                _ => {}
            }
        }
        if let Some(Value::Array(values)) = map.get_mut("enum")
            && !values.contains(&Value::Null)
        {
            values.push(Value::Null);
        }
        if !map.contains_key("const") {
            return;
        }
    }
    let only_choice = map.len() == 1;
    if let Some(Value::Array(parts)) = map.get_mut("anyOf")
        && only_choice
    {
        if !parts.iter().any(|p| p.get("type") == Some(&json!("null"))) {
            parts.push(json!({"type": "null"}));
        }
        return;
    }
    let inner = std::mem::take(map);
    map.insert(
        "anyOf".into(),
        json!([Value::Object(inner), {"type": "null"}]),
    );
}

#[cfg(test)]
#[path = "strict_tests.rs"]
mod tests;
