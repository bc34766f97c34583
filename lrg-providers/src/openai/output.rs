//! Typed answers over Chat Completions: where the schema goes
//! ([`SchemaField`]), the instructions that stand in for it where it cannot
//! go, and the servers found to refuse it.
//!
//! A server that answers a request carrying the schema with a 400 is asked
//! once more without it (the schema then goes into the instructions), and
//! when that works, its base URL and model are remembered for the rest of
//! the process: the next request goes prompted at once and
//! [`crate::ModelInfo::output_mode`] says `prompted`.

use std::collections::HashSet;
use std::sync::{LazyLock, Mutex};

use serde_json::{Map, Value, json};

use super::SchemaField;
use crate::TurnRequest;
use crate::text_tools::{ToolMode, profile_for};
use crate::typed::{OutputSchema, StrictTarget};

/// Servers (base URL and model) that refused the schema field with a 400
/// and answered without it.
static REFUSED: LazyLock<Mutex<HashSet<(String, String)>>> = LazyLock::new(Mutex::default);

fn key(base_url: &str, model: &str) -> (String, String) {
    (base_url.trim_end_matches('/').to_owned(), model.to_owned())
}

/// Whether the server at `base_url` refused the schema field for `model`
/// earlier in this process.
pub(crate) fn refused(base_url: &str, model: &str) -> bool {
    crate::sync::lock(&REFUSED).contains(&key(base_url, model))
}

/// Remember that the server at `base_url` refuses the schema field for
/// `model`.
pub(crate) fn learn_refused(base_url: &str, model: &str) {
    crate::sync::lock(&REFUSED).insert(key(base_url, model));
}

/// Whether tools go to `model` as text under `mode` (a text-tool-format
/// server): its answer is then prompted, never held to a schema on the wire,
/// since a schema-made grammar would forbid the calls it writes as text.
pub(crate) fn tools_as_text(mode: ToolMode, model: &str) -> bool {
    match mode {
        ToolMode::Native => false,
        ToolMode::Auto => !profile_for(model).server_parses_tools,
        _ => true,
    }
}

/// The schema `request` carries on the wire through `field`, when it does:
/// none without [`TurnRequest::output`], through [`SchemaField::Prompted`],
/// or beside tools where the server cannot hold both.
pub(crate) fn carried(
    request: &TurnRequest,
    field: SchemaField,
    with_tools: bool,
) -> Option<&OutputSchema> {
    let schema = request.output.as_ref()?;
    let tools_block = !with_tools && !request.tools.is_empty();
    (field != SchemaField::Prompted && !tools_block).then_some(schema)
}

/// Put `schema` into `body` through `field`.
pub(crate) fn insert(body: &mut Map<String, Value>, schema: &OutputSchema, field: SchemaField) {
    match field {
        SchemaField::StrictResponseFormat => {
            let strict = schema.strict(StrictTarget::OpenAi);
            body.insert(
                "response_format".into(),
                json!({"type": "json_schema", "json_schema": {
                    "name": schema.name(),
                    "schema": strict.schema,
                    "strict": strict.strict,
                }}),
            );
        }
        SchemaField::ResponseFormat => {
            body.insert(
                "response_format".into(),
                json!({"type": "json_schema", "json_schema": {
                    "name": schema.name(),
                    "schema": without_meta(schema.schema()),
                }}),
            );
        }
        SchemaField::Field(name) => {
            body.insert(name.into(), without_meta(schema.schema()));
        }
        SchemaField::Prompted => {}
    }
}

pub(crate) use crate::typed::without_meta;

/// The system prompt of a request whose schema does not go on the wire:
/// `system` with the schema's instructions after it, unless it holds them
/// already (the session adds them itself for a model whose
/// [`crate::ModelInfo::output_mode`] is `prompted`).
pub(crate) fn system_with_instructions(system: Option<&str>, schema: &OutputSchema) -> String {
    let instructions = schema.instructions();
    match system.filter(|s| !s.trim().is_empty()) {
        Some(system) if system.contains(&instructions) => system.to_owned(),
        Some(system) => format!("{system}\n\n{instructions}"),
        None => instructions,
    }
}

/// `request`'s system prompt as it is sent: with the instructions when it
/// asks for a typed answer and `carried` is `None`.
pub(crate) fn system_prompt<'a>(
    request: &'a TurnRequest,
    carried: Option<&OutputSchema>,
) -> Option<std::borrow::Cow<'a, str>> {
    let system = request.system.as_deref();
    match (&request.output, carried) {
        (Some(schema), None) => Some(system_with_instructions(system, schema).into()),
        _ => system.filter(|s| !s.is_empty()).map(Into::into),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Message, ToolSpec};

    fn schema() -> OutputSchema {
        OutputSchema::new(json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "properties": {"label": {"type": "string"}, "note": {"type": "string"}},
            "required": ["label"]
        }))
        .unwrap()
    }

    fn tool() -> ToolSpec {
        ToolSpec {
            name: "look".into(),
            description: String::new(),
            input_schema: json!({"type": "object"}),
            annotations: Default::default(),
            output_schema: None,
        }
    }

    #[test]
    fn the_schema_goes_where_the_field_says() {
        let s = schema();
        let mut body = Map::new();
        insert(&mut body, &s, SchemaField::StrictResponseFormat);
        let format = &body["response_format"]["json_schema"];
        assert_eq!(format["strict"], true);
        // Strict shaping: the optional property is required and nullable.
        assert_eq!(format["schema"]["required"], json!(["label", "note"]));
        assert_eq!(format["schema"]["additionalProperties"], false);

        let mut body = Map::new();
        insert(&mut body, &s, SchemaField::ResponseFormat);
        let format = &body["response_format"]["json_schema"];
        assert!(format.get("strict").is_none());
        assert_eq!(format["schema"]["required"], json!(["label"]));
        assert!(format["schema"].get("$schema").is_none());

        let mut body = Map::new();
        insert(&mut body, &s, SchemaField::Field("json_schema"));
        assert_eq!(body["json_schema"]["required"], json!(["label"]));
        assert!(body.get("response_format").is_none());

        let mut body = Map::new();
        insert(&mut body, &s, SchemaField::Prompted);
        assert!(body.is_empty());
    }

    #[test]
    fn a_schema_that_cannot_be_strict_goes_with_strict_false() {
        let open_map = OutputSchema::new(json!({
            "type": "object",
            "additionalProperties": {"type": "integer"}
        }))
        .unwrap();
        let mut body = Map::new();
        insert(&mut body, &open_map, SchemaField::StrictResponseFormat);
        let format = &body["response_format"]["json_schema"];
        assert_eq!(format["strict"], false);
        assert_eq!(format["schema"]["additionalProperties"]["type"], "integer");
    }

    #[test]
    fn beside_tools_the_schema_goes_only_where_the_server_holds_both() {
        let plain = TurnRequest::new(vec![Message::user("x")]).output(schema());
        let tooled = plain.clone().tools(vec![tool()]);
        let field = SchemaField::ResponseFormat;
        assert!(carried(&plain, field, false).is_some());
        assert!(carried(&tooled, field, false).is_none());
        assert!(carried(&tooled, field, true).is_some());
        assert!(carried(&plain, SchemaField::Prompted, true).is_none());
        assert!(carried(&TurnRequest::new(vec![Message::user("x")]), field, true).is_none());
    }

    #[test]
    fn instructions_are_added_once() {
        let s = schema();
        let once = system_with_instructions(Some("Be brief."), &s);
        assert!(once.starts_with("Be brief.\n\n"));
        assert!(once.ends_with(&s.instructions()));
        assert_eq!(system_with_instructions(Some(&once), &s), once);
        assert_eq!(system_with_instructions(None, &s), s.instructions());
        let request = TurnRequest::new(vec![Message::user("x")]).output(s.clone());
        assert_eq!(
            system_prompt(&request, None).as_deref(),
            Some(s.instructions().as_str())
        );
        assert_eq!(system_prompt(&request, Some(&s)), None);
    }

    #[test]
    fn a_refusal_is_remembered_by_base_url_and_model() {
        let base = "http://refusal-test.invalid:1/v1";
        assert!(!refused(base, "m"));
        learn_refused(&format!("{base}/"), "m");
        assert!(refused(base, "m"));
        assert!(!refused(base, "other"));
    }
}
