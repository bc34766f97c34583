//! [`grammar_schema`]: the schema both grammar engines (llguidance, XGrammar)
//! constrain a local model's arguments with.

use std::cell::RefCell;

use serde_json::{Map, Value, json};

use super::error::{SchemaError, json_type};
use super::keyword_map::{KeywordMap, Kw};
use super::merge::{Fold, distribute_properties, fold_all_of};
use super::path::{Path, check_schema_depth};
use super::refs::{Annotations, inline_refs_if_any};
use super::validate::{TypeList, non_negative, require_root_object, string_items};

/// Shapes a tool's input schema for a grammar engine.
///
/// What comes out: every `$ref` inlined (the tool's `$defs`/`definitions`; one
/// grammar holds all tools, so no shared definitions); `oneOf` read as `anyOf`;
/// `allOf` parts folded into their object where that keeps the meaning; objects
/// with declared properties (and the root object) closed with
/// `additionalProperties: false`, so a model cannot invent arguments; `format`,
/// `default`, `description`, `title`, `examples`, `pattern`, numeric bounds and
/// every keyword a grammar engine may not know dropped; every string capped with
/// `maxLength = min(existing, max_string_len)` (a string limited by `enum` or
/// `const` is left as is). An unconstrained value (`true`, `{}`) becomes "any
/// JSON value up to two levels deep with capped strings", and a nested object
/// with no declared properties stays a map of such values.
///
/// Kept: `type`, `properties`, `required`, `additionalProperties`, `items`,
/// `prefixItems`, `minItems`, `maxItems`, `minLength`, `maxLength`, `enum`,
/// `const`, `anyOf`, `allOf`. (OpenAPI's `nullable` is not JSON Schema and is
/// dropped: a JSON Schema validator on the tool's side would refuse the `null`.)
///
/// Dropping keywords widens what the schema accepts (an out-of-range number, a
/// string that misses a pattern); the tool still validates its input. Closing
/// objects and capping strings narrow it.
pub fn grammar_schema(schema: &Value, max_string_len: u32) -> Result<Value, SchemaError> {
    require_root_object(schema)?;
    // Read, never consumed: the output is built from what the grammar keeps,
    // so the descriptions and the rest are neither copied nor freed.
    let inlined = inline_refs_if_any(schema, Annotations::Drop)?;
    let shaper = Shaper {
        cap: u64::from(max_string_len),
        assertions: false,
    };
    shaper.shape(&inlined, &Path::ROOT, 0, Position::Root)
}

/// [`grammar_schema`] for a typed answer rather than a tool's arguments:
/// numeric bounds (`minimum`, `maximum`, `exclusiveMinimum`,
/// `exclusiveMaximum`) and string `pattern`s are kept, since llguidance
/// enforces them and no tool is there to check the value afterwards. The
/// root may be any schema (an answer need not be an object).
pub(crate) fn answer_grammar_schema(
    schema: &Value,
    max_string_len: u32,
) -> Result<Value, SchemaError> {
    require_root_object(schema)?;
    let inlined = inline_refs_if_any(schema, Annotations::Drop)?;
    let shaper = Shaper {
        cap: u64::from(max_string_len),
        assertions: true,
    };
    shaper.shape(&inlined, &Path::ROOT, 0, Position::Value)
}

/// The assertions [`answer_grammar_schema`] keeps for numbers.
const NUMBER_BOUNDS: [&str; 4] = ["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"];

/// Where a subschema sits, which decides how it is closed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Position {
    /// The tool's input itself.
    Root,
    /// A value of its own: a property, an array item, a map value.
    Value,
    /// A part of `anyOf`/`allOf`: applies to the same value as its parent.
    Branch,
}

/// What decides how an object schema is closed.
#[derive(Clone, Copy, Debug)]
struct ObjectContext {
    position: Position,
    /// It has `anyOf`, `oneOf` or `allOf` parts.
    has_combinator: bool,
    /// Its `type` (given or inferred) includes `object`.
    explicit_object: bool,
}

struct Shaper {
    cap: u64,
    /// Keep numeric bounds and patterns (a typed answer's grammar).
    assertions: bool,
}

impl Shaper {
    fn shape(
        &self,
        node: &Value,
        path: &Path<'_>,
        depth: usize,
        position: Position,
    ) -> Result<Value, SchemaError> {
        check_schema_depth(depth, path)?;
        match node {
            Value::Bool(true) if position != Position::Branch => Ok(self.any_value()),
            Value::Bool(accepts) => Ok(Value::Bool(*accepts)),
            Value::Object(map) => self.object(map, path, depth, position),
            other => Err(SchemaError::NotAnObject {
                path: path.render(),
                found: json_type(other),
            }),
        }
    }

    fn object(
        &self,
        map: &Map<String, Value>,
        path: &Path<'_>,
        depth: usize,
        position: Position,
    ) -> Result<Value, SchemaError> {
        let mut map = KeywordMap::new(map);
        let distributable = map.has(Kw::Properties) && (map.has(Kw::AnyOf) != map.has(Kw::OneOf));
        let folded;
        if map.has(Kw::AllOf) || distributable {
            // The rare object whose parts merge is copied to be rewritten.
            let mut owned = map.source().clone();
            fold_all_of(&mut owned, Fold::Exact);
            distribute_properties(&mut owned);
            folded = owned;
            map = KeywordMap::new(&folded);
        }

        let mut types = map
            .get(Kw::Type)
            .map(|value| TypeList::read(value, path))
            .transpose()?;
        if types.is_none() {
            types = match position {
                // A tool's input is an object, whatever its schema forgot to say.
                Position::Root => Some(TypeList::one("object")),
                Position::Value => inferred_type(&map),
                Position::Branch => None,
            };
        }
        let allows = |name: &str| {
            types.is_none_or(|types| {
                types
                    .iter()
                    .any(|t| t == name || (name == "number" && t == "integer"))
            })
        };
        let has_combinator = map.has_any(&[Kw::AnyOf, Kw::OneOf, Kw::AllOf]);

        let mut out = Map::with_capacity(8);
        if let Some(types) = types {
            out.insert("type".to_owned(), types.to_value());
        }
        let limited = map.has_any(&[Kw::Enum, Kw::Const]);
        if let Some(values) = map.take(Kw::Enum) {
            if !values.is_array() {
                return Err(invalid(
                    path,
                    "enum",
                    format!("must be an array, found {}", json_type(values)),
                ));
            }
            out.insert("enum".to_owned(), values.clone());
        }
        if let Some(value) = map.take(Kw::Const) {
            out.insert("const".to_owned(), value.clone());
        }

        if allows("object") {
            let explicit_object = types.is_some_and(|t| t.contains("object"));
            let context = ObjectContext {
                position,
                has_combinator,
                explicit_object,
            };
            self.object_keywords(&mut map, &mut out, path, depth, context)?;
        }
        if allows("array") {
            self.array_keywords(&mut map, &mut out, path, depth)?;
        }
        let any_of = map.take(Kw::AnyOf);
        let one_of = map.take(Kw::OneOf);
        let mut alternatives = Vec::new();
        for (keyword, value) in [("anyOf", any_of), ("oneOf", one_of)] {
            if let Some(value) = value {
                alternatives.push(self.branches(value, &path.key(keyword), keyword, depth)?);
            }
        }
        let mut alternatives = alternatives.into_iter();
        if let Some(first) = alternatives.next() {
            out.insert("anyOf".to_owned(), first);
        }
        // `anyOf` and `oneOf` side by side: both must hold, the second as an
        // `allOf` part (which shaping again leaves where it is).
        if let Some(second) = alternatives.next() {
            out.insert("allOf".to_owned(), json!([{ "anyOf": second }]));
        }
        if let Some(value) = map.take(Kw::AllOf) {
            let parts = self.branches(value, &path.key("allOf"), "allOf", depth)?;
            match out.get_mut("allOf") {
                Some(Value::Array(existing)) => {
                    existing.extend(parts.as_array().into_iter().flatten().cloned())
                }
                _ => {
                    out.insert("allOf".to_owned(), parts);
                }
            }
        }

        if out.is_empty() && position != Position::Branch && !map.has(Kw::Required) {
            return Ok(self.any_value());
        }
        // An untyped schema whose values `enum`, `const` or its branches already
        // limit needs no cap of its own, and an untyped branch is capped by its
        // parent, which holds the same value.
        let capped_elsewhere =
            types.is_none() && (limited || has_combinator || position == Position::Branch);
        if allows("string") && !capped_elsewhere {
            if let Some(min) = map.get(Kw::MinLength) {
                out.insert(
                    "minLength".to_owned(),
                    Value::from(non_negative(min, path, "minLength")?),
                );
            }
            let existing = map
                .get(Kw::MaxLength)
                .map(|max| non_negative(max, path, "maxLength"))
                .transpose()?;
            if !limited || existing.is_some() {
                let max = existing.map_or(self.cap, |max| max.min(self.cap));
                out.insert("maxLength".to_owned(), Value::from(max));
            }
        }

        if self.assertions {
            let source = map.source();
            if allows("number") {
                for keyword in NUMBER_BOUNDS {
                    if let Some(bound) = source.get(keyword).filter(|b| b.is_number()) {
                        out.insert(keyword.to_owned(), bound.clone());
                    }
                }
            }
            if allows("string")
                && let Some(pattern) = source.get("pattern").filter(|p| p.is_string())
            {
                out.insert("pattern".to_owned(), pattern.clone());
            }
        }

        Ok(Value::Object(out))
    }

    fn object_keywords(
        &self,
        map: &mut KeywordMap<'_>,
        out: &mut Map<String, Value>,
        path: &Path<'_>,
        depth: usize,
        context: ObjectContext,
    ) -> Result<(), SchemaError> {
        let ObjectContext {
            position,
            has_combinator,
            explicit_object,
        } = context;
        let properties = match map.take(Kw::Properties) {
            None => None,
            Some(Value::Object(properties)) => {
                let at = path.key("properties");
                let mut shaped = Map::with_capacity(properties.len());
                for (name, schema) in properties {
                    let value = self.shape(schema, &at.key(name), depth + 1, Position::Value)?;
                    shaped.insert(name.clone(), value);
                }
                Some(shaped)
            }
            Some(other) => {
                return Err(invalid(
                    path,
                    "properties",
                    format!("must be an object, found {}", json_type(other)),
                ));
            }
        };
        let mut undeclared = Vec::new();
        if let Some(required) = map.take(Kw::Required) {
            let names = string_items(required, path, "required")?;
            if let Some(properties) = &properties {
                undeclared.extend(
                    names
                        .iter()
                        .filter_map(Value::as_str)
                        .filter(|name| !properties.contains_key(*name))
                        .map(str::to_owned),
                );
            }
            if !names.is_empty() {
                out.insert("required".to_owned(), required.clone());
            }
        }
        let additional = map.take(Kw::AdditionalProperties);
        if let Some(mut properties) = properties {
            // A required name the schema forgot to declare was allowed as an
            // additional property; closing the object must not make it impossible.
            // A schema given for them is shaped even when no name needs it (its
            // errors are the schema's errors); "anything" is copied only for a
            // name that needs it, which few objects have.
            let value = match &additional {
                Some(Value::Bool(false)) => None,
                Some(schema @ Value::Object(_)) => Some(self.shape(
                    schema,
                    &path.key("additionalProperties"),
                    depth + 1,
                    Position::Value,
                )?),
                _ if undeclared.is_empty() => None,
                _ => Some(self.any_value()),
            };
            if let Some(value) = value {
                for name in undeclared {
                    properties.insert(name, value.clone());
                }
            }
            out.insert("properties".to_owned(), Value::Object(properties));
            out.insert("additionalProperties".to_owned(), Value::Bool(false));
            return Ok(());
        }
        if has_combinator || position == Position::Branch || !explicit_object {
            // The branches, or the parent, say which properties there are; an
            // untyped schema need not be an object at all.
            return Ok(());
        }
        if position == Position::Root {
            // A tool that declares no arguments takes none.
            out.insert("properties".to_owned(), Value::Object(Map::new()));
            out.insert("additionalProperties".to_owned(), Value::Bool(false));
            return Ok(());
        }
        // A nested object without declared properties is a map (headers,
        // environment, free-form options): keep it usable, with shaped values.
        let values = match additional {
            None | Some(Value::Bool(true)) => self.any_value(),
            Some(Value::Bool(false)) => Value::Bool(false),
            Some(schema @ Value::Object(_)) => self.shape(
                schema,
                &path.key("additionalProperties"),
                depth + 1,
                Position::Value,
            )?,
            Some(other) => {
                return Err(invalid(
                    path,
                    "additionalProperties",
                    format!("must be a schema, found {}", json_type(other)),
                ));
            }
        };
        out.insert("additionalProperties".to_owned(), values);
        Ok(())
    }

    fn array_keywords(
        &self,
        map: &mut KeywordMap<'_>,
        out: &mut Map<String, Value>,
        path: &Path<'_>,
        depth: usize,
    ) -> Result<(), SchemaError> {
        let mut prefix = map.take(Kw::PrefixItems);
        let mut items = map.take(Kw::Items);
        if let Some(Value::Array(_)) = items {
            // Drafts 4-7 tuples: `items` is the prefix, `additionalItems` the rest.
            prefix = items.take();
            items = map.take(Kw::AdditionalItems);
        }
        if let Some(prefix) = prefix {
            let Value::Array(parts) = prefix else {
                return Err(invalid(
                    path,
                    "prefixItems",
                    format!("must be an array, found {}", json_type(prefix)),
                ));
            };
            let at = path.key("prefixItems");
            let mut shaped = Vec::with_capacity(parts.len());
            for (index, part) in parts.iter().enumerate() {
                shaped.push(self.shape(part, &at.index(index), depth + 1, Position::Value)?);
            }
            out.insert("prefixItems".to_owned(), Value::Array(shaped));
        }
        if let Some(items) = items {
            let shaped = self.shape(items, &path.key("items"), depth + 1, Position::Value)?;
            out.insert("items".to_owned(), shaped);
        }
        for keyword in [Kw::MinItems, Kw::MaxItems] {
            if let Some(value) = map.get(keyword) {
                let name = keyword.name();
                out.insert(
                    name.to_owned(),
                    Value::from(non_negative(value, path, name)?),
                );
            }
        }
        Ok(())
    }

    /// Shapes the parts of `anyOf`, `oneOf` or `allOf`.
    fn branches(
        &self,
        value: &Value,
        path: &Path<'_>,
        keyword: &str,
        depth: usize,
    ) -> Result<Value, SchemaError> {
        let Value::Array(parts) = value else {
            return Err(SchemaError::InvalidKeyword {
                path: path.render(),
                keyword: keyword.to_owned(),
                reason: format!("must be an array of schemas, found {}", json_type(value)),
            });
        };
        if parts.is_empty() {
            return Err(SchemaError::InvalidKeyword {
                path: path.render(),
                keyword: keyword.to_owned(),
                reason: "must not be empty".to_owned(),
            });
        }
        let mut shaped = Vec::with_capacity(parts.len());
        for (index, part) in parts.iter().enumerate() {
            let part = self.shape(part, &path.index(index), depth + 1, Position::Branch)?;
            match part {
                // An alternative that is only alternatives joins this list
                // (`Option<untagged enum>` nests them).
                Value::Object(mut inner)
                    if keyword != "allOf" && inner.len() == 1 && inner.contains_key("anyOf") =>
                {
                    if let Some(Value::Array(nested)) = inner.remove("anyOf") {
                        shaped.extend(nested);
                    }
                }
                part => shaped.push(part),
            }
        }
        Ok(Value::Array(shaped))
    }

    /// Any JSON value, two levels deep at most, every string capped: what an
    /// unconstrained argument becomes (a grammar cannot recurse without bound).
    fn any_value(&self) -> Value {
        thread_local! {
            // Built once per string cap: copying a map is several times
            // cheaper than building it through `json!`.
            static ANY: RefCell<Option<(u64, Value)>> = const { RefCell::new(None) };
        }
        ANY.with_borrow_mut(|any| match any {
            Some((cap, value)) if *cap == self.cap => value.clone(),
            _ => {
                let scalar = json!({
                    "type": ["string", "number", "boolean", "null"],
                    "maxLength": self.cap,
                });
                let value = json!({
                    "type": ["string", "number", "boolean", "null", "array", "object"],
                    "maxLength": self.cap,
                    "items": scalar,
                    "additionalProperties": scalar,
                });
                *any = Some((self.cap, value.clone()));
                value
            }
        })
    }
}

/// The type a schema without `type` evidently means, from its keywords.
fn inferred_type(map: &KeywordMap) -> Option<TypeList> {
    if map.has_any(&[Kw::AnyOf, Kw::OneOf, Kw::AllOf, Kw::Enum, Kw::Const]) {
        return None;
    }
    let name = if map.has_any(&[
        Kw::Properties,
        Kw::AdditionalProperties,
        Kw::PatternProperties,
        Kw::Required,
    ]) {
        "object"
    } else if map.has_any(&[Kw::Items, Kw::PrefixItems, Kw::MinItems, Kw::MaxItems]) {
        "array"
    } else if map.has_any(&[Kw::MinLength, Kw::MaxLength, Kw::Pattern]) {
        "string"
    } else {
        return None;
    };
    Some(TypeList::one(name))
}

fn invalid(path: &Path<'_>, keyword: &str, reason: String) -> SchemaError {
    SchemaError::InvalidKeyword {
        path: path.render(),
        keyword: keyword.to_owned(),
        reason,
    }
}
