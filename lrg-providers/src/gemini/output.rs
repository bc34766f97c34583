//! Typed answers on Gemini: `generationConfig.responseMimeType:
//! "application/json"` with the schema, in the field the model takes.
//!
//! Gemini refuses a response schema beside function declarations ("Function
//! calling with a response mime type: 'application/json' is unsupported",
//! 400), so a request that offers tools carries the schema in its
//! instructions instead; the schema goes on the wire where no tool is
//! offered (a typed message without tools, a repair turn).

use serde_json::{Map, Value, json};

use crate::TurnRequest;
use crate::schema::{SchemaTarget, portable_tool_schema};
use crate::typed::{OutputMode, OutputSchema, StrictTarget};

/// Where a Gemini model takes an answer schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SchemaField {
    /// `responseJsonSchema`: JSON Schema as it is (references, `anyOf`,
    /// numeric bounds and all).
    JsonSchema,
    /// `responseSchema`: the OpenAPI 3.0 subset, shaped as tool schemas are
    /// for Gemini.
    OpenApi,
    /// No JSON mode at all: the schema goes into the instructions.
    Prompted,
}

/// Model-name prefixes and the field each takes, first match wins; any
/// other model takes `responseJsonSchema`.
const SCHEMA_FIELDS: &[(&str, SchemaField)] = &[
    // Gemma on the Gemini API has no JSON mode.
    ("gemma", SchemaField::Prompted),
    // Older models know only the OpenAPI form.
    ("gemini-1.", SchemaField::OpenApi),
    ("gemini-2.0", SchemaField::OpenApi),
];

fn field(model: &str) -> SchemaField {
    SCHEMA_FIELDS
        .iter()
        .find(|(prefix, _)| model.starts_with(prefix))
        .map_or(SchemaField::JsonSchema, |(_, field)| *field)
}

/// How `model` gives a typed answer.
pub(crate) fn output_mode(model: &str) -> OutputMode {
    match field(model) {
        SchemaField::JsonSchema | SchemaField::OpenApi => OutputMode::Native,
        SchemaField::Prompted => OutputMode::Prompted,
    }
}

/// The `generationConfig` fields that carry `request`'s answer schema to
/// `model`, or `None` when the schema goes into the instructions (no schema
/// asked for, tools offered, a model without JSON mode, or a schema the
/// OpenAPI subset cannot hold).
pub(crate) fn generation_fields(request: &TurnRequest, model: &str) -> Option<Map<String, Value>> {
    let schema = request.output.as_ref()?;
    if !request.tools.is_empty() {
        return None;
    }
    let (key, value) = match field(model) {
        SchemaField::JsonSchema => (
            "responseJsonSchema",
            crate::openai::without_meta(schema.schema()),
        ),
        SchemaField::OpenApi => ("responseSchema", open_api(schema)?),
        SchemaField::Prompted => return None,
    };
    let mut fields = Map::new();
    fields.insert("responseMimeType".into(), json!("application/json"));
    fields.insert(key.into(), value);
    Some(fields)
}

/// The schema in the OpenAPI subset: from its strict shape (an object root,
/// the caller's root wrapped in `answer` when it is not one, which the
/// answer check unwraps), then shaped as a Gemini tool schema (references
/// inlined, unknown keywords dropped). `None` when it cannot be (a
/// recursive reference).
fn open_api(schema: &OutputSchema) -> Option<Value> {
    let rooted = &schema.strict(StrictTarget::OpenAi).schema;
    match portable_tool_schema(rooted, SchemaTarget::Gemini) {
        Ok(shaped) => Some(shaped),
        Err(e) => {
            tracing::debug!(error = %e, "answer schema not sent as responseSchema; prompted instead");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Message, ToolSpec};

    fn request() -> TurnRequest {
        let schema = OutputSchema::new(json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "properties": {"n": {"type": "integer", "maximum": 5}},
            "required": ["n"]
        }))
        .unwrap();
        TurnRequest::new(vec![Message::user("x")]).output(schema)
    }

    #[test]
    fn the_model_name_picks_the_field() {
        let new = generation_fields(&request(), "gemini-2.5-flash").unwrap();
        assert_eq!(new["responseMimeType"], "application/json");
        assert_eq!(new["responseJsonSchema"]["properties"]["n"]["maximum"], 5);
        assert!(new["responseJsonSchema"].get("$schema").is_none());
        for old in ["gemini-1.5-pro", "gemini-2.0-flash-001"] {
            let fields = generation_fields(&request(), old).unwrap();
            assert!(fields.get("responseJsonSchema").is_none(), "{old}");
            assert_eq!(fields["responseSchema"]["type"], "object", "{old}");
        }
        assert_eq!(generation_fields(&request(), "gemma-3-27b-it"), None);
        assert_eq!(output_mode("gemma-3-27b-it"), OutputMode::Prompted);
        assert_eq!(output_mode("gemini-3-pro-preview"), OutputMode::Native);
    }

    #[test]
    fn no_schema_beside_tools_or_without_one() {
        let tool = ToolSpec {
            name: "look".into(),
            description: String::new(),
            input_schema: json!({"type": "object"}),
            annotations: Default::default(),
            output_schema: None,
        };
        let tooled = request().tools(vec![tool]);
        assert_eq!(generation_fields(&tooled, "gemini-2.5-flash"), None);
        let plain = TurnRequest::new(vec![Message::user("x")]);
        assert_eq!(generation_fields(&plain, "gemini-2.5-flash"), None);
    }

    #[test]
    fn a_non_object_root_is_wrapped_for_the_open_api_form() {
        let schema =
            OutputSchema::new(json!({"type": "array", "items": {"type": "string"}})).unwrap();
        let request = TurnRequest::new(vec![Message::user("x")]).output(schema);
        let fields = generation_fields(&request, "gemini-2.0-flash").unwrap();
        let shaped = &fields["responseSchema"];
        assert_eq!(shaped["type"], "object");
        assert_eq!(shaped["properties"]["answer"]["type"], "array");
    }
}
