//! Schema shaping: a tool's JSON Schema made fit for what reads it.
//!
//! Tool schemas come from MCP servers and from `schemars`, written against any
//! draft, with `$ref`s, `oneOf` choices, formats and bounds. Three readers take
//! less:
//!
//! - [`grammar_schema`]: the grammar engines that constrain a local model
//!   (llguidance, XGrammar). References inlined, `oneOf` read as `anyOf`, objects
//!   closed, strings capped, everything a grammar need not enforce dropped.
//! - [`split_choice`]: "exactly one of these arguments" (a top-level `oneOf` of
//!   `required` lists), which no grammar expresses, as one closed schema per choice.
//! - [`portable_tool_schema`]: cloud APIs. References inlined, no top-level
//!   `oneOf`/`anyOf`/`allOf`, the root always an object, and for Gemini the
//!   rewrite below.
//!
//! # What Gemini is sent
//!
//! Gemini's `functionDeclarations[].parameters` is a protobuf `Schema` (a subset
//! of OpenAPI 3.0): a field it does not have fails the whole request with
//! `Unknown name "..."`, and some values it has are refused. So for
//! [`SchemaTarget::Gemini`] only these keywords are kept: `type` (one name),
//! `nullable`, `description`, `enum` (strings only), `format` (`enum` and
//! `date-time` on strings, `int32`/`int64` on integers, `float`/`double` on
//! numbers), `properties`, `required`, `minProperties`, `maxProperties`,
//! `items`, `minItems`, `maxItems`, `minLength`, `maxLength`, `pattern`,
//! `minimum`, `maximum`, `anyOf`. In particular:
//!
//! - removed: `$schema`, `$id`, `$defs`/`definitions` (after inlining),
//!   `$comment`, `additionalProperties`, `patternProperties`, `propertyNames`,
//!   `unevaluatedProperties`/`Items`, `dependentRequired`/`Schemas`,
//!   `uniqueItems`, `contains`, `multipleOf`, `not`, `if`/`then`/`else`,
//!   `default`, `examples`/`example`, `readOnly`/`writeOnly`, `deprecated`,
//!   `contentEncoding`/`contentMediaType`, and every other format;
//! - `title` becomes the `description` when there is none;
//! - `type: [T, "null"]`, a `null` in `enum`, and `anyOf: [T, {"type":
//!   "null"}]` become `T` with `nullable: true`; several types become an `anyOf`;
//! - `const: v` becomes `enum: [v]`; an `enum` or `const` of non-strings (which
//!   Gemini refuses) is dropped and its values listed in the `description`;
//! - `oneOf` becomes `anyOf`, `allOf` parts are merged into one schema;
//! - `exclusiveMinimum`/`exclusiveMaximum` (numbers) become inclusive bounds;
//! - tuples (`prefixItems`, array `items`) become `items: {anyOf: parts}`, and an
//!   array without `items` gets `items: {}`;
//! - `properties` is left out when empty (Gemini refuses an empty one, at the
//!   root too: a tool without arguments is `{"type": "object"}`), and `required`
//!   keeps only declared properties;
//! - boolean schemas become `{}`.
//!
//! # Limits
//!
//! Every walk is bounded: a schema nesting more than 64 subschema levels (or its
//! JSON more than 136 levels), a recursive `$ref`, and `$ref`s that would inline
//! into more than 100,000 JSON values are errors ([`SchemaError`]), never a stack
//! overflow or a hang. Only references inside the schema are followed.

mod choice;
mod error;
mod gemini;
mod grammar;
mod keyword_map;
mod keywords;
mod merge;
mod path;
mod portable;
mod refs;
mod validate;

pub use choice::split_choice;
pub use error::SchemaError;
pub(crate) use error::json_type;
pub(crate) use grammar::answer_grammar_schema;
pub use grammar::grammar_schema;
pub use portable::{SchemaTarget, portable_tool_schema};

/// The string cap the fuzz target and the seed-corpus test use.
const FUZZ_STRING_CAP: u32 = 1_000;

/// Feeds `data`, read as JSON, to every shaping function and checks what holds
/// for any input: no panic, and every output is again a schema each function
/// accepts. Shared by the cargo-fuzz target (`fuzz/`) and the test that runs its
/// seed corpus, so CI exercises the same code.
///
/// # Panics
///
/// When an invariant fails: that is what the fuzzer looks for.
#[doc(hidden)]
#[allow(clippy::panic)]
pub fn fuzz_shape(data: &[u8]) {
    let Ok(schema) = serde_json::from_slice::<serde_json::Value>(data) else {
        return;
    };
    if let Ok(shaped) = grammar_schema(&schema, FUZZ_STRING_CAP) {
        // Shaping what was shaped succeeds (the result may differ in form: an
        // allOf part that did not fold may fold once shaped).
        if let Err(error) = grammar_schema(&shaped, FUZZ_STRING_CAP) {
            panic!("grammar_schema refuses its own output {shaped}: {error}");
        }
        if let Err(error) = split_choice(shaped.clone()) {
            panic!("split_choice refuses grammar output {shaped}: {error}");
        }
    }
    if let Ok(branches) = split_choice(schema.clone())
        && branches.is_empty()
    {
        panic!("split_choice returned no branch for {schema}");
    }
    for target in [
        SchemaTarget::OpenAi,
        SchemaTarget::Anthropic,
        SchemaTarget::Gemini,
    ] {
        if let Ok(portable) = portable_tool_schema(&schema, target) {
            let is_object_root =
                portable.get("type").and_then(serde_json::Value::as_str) == Some("object");
            let combinators = ["oneOf", "anyOf", "allOf"]
                .iter()
                .any(|k| portable.get(*k).is_some());
            if !is_object_root || combinators {
                panic!(
                    "portable_tool_schema({target:?}) gave a root that is not a plain object: {portable}"
                );
            }
        }
    }
}
