//! The typed-answer conformance check both engine crates run on their tiny
//! generated models: whatever a random model samples under the grammar
//! [`LocalChatModel`] builds, a typed answer validates. Shared so that llama.cpp
//! and MLX are held to the very same turn and the very same check.

use serde_json::{Value, json};

use super::answer::{Answer, parse_typed_answer};
use super::engine::EngineTurn;
use super::model::LocalChatModel;
use crate::typed::OutputSchema;
use crate::{Message, ToolSpec, TurnRequest};

/// How short the conformance turn keeps `analysis`: a random model rarely
/// closes a string early, and 600 characters per seed would only cost time.
const ANALYSIS_CAP: u64 = 40;

/// A schema with what a grammar must enforce and validation checks: an enum,
/// integer bounds, a capped string, an optional array of objects, a nested
/// required object.
pub fn schema() -> OutputSchema {
    let schema = json!({
        "title": "Triage",
        "type": "object",
        "properties": {
            "label": {"type": "string", "enum": ["bug", "feature", "question"]},
            "priority": {"type": "integer", "minimum": 1, "maximum": 5},
            "summary": {"type": "string", "maxLength": 24},
            "owner": {
                "type": "object",
                "properties": {"team": {"type": "string", "maxLength": 12}, "oncall": {"type": "boolean"}},
                "required": ["team"]
            },
            "steps": {
                "type": "array",
                "maxItems": 3,
                "items": {
                    "type": "object",
                    "properties": {"do": {"type": "string", "maxLength": 16}, "ratio": {"type": "number", "minimum": 0, "maximum": 1}},
                    "required": ["do"]
                }
            }
        },
        "required": ["label", "priority", "summary", "owner"]
    });
    match OutputSchema::new(schema) {
        Ok(schema) => schema,
        // The schema above is fixed and valid: this cannot be reached.
        Err(error) => unreachable!("the conformance schema is invalid: {error}"),
    }
}

/// Two tools, so the grammar offers calls beside the typed reply.
pub fn tools() -> Vec<ToolSpec> {
    let path = json!({"type": "object", "properties": {"path": {"type": "string", "maxLength": 24}}, "required": ["path"]});
    ["read_file", "list_directory"]
        .into_iter()
        .map(|name| ToolSpec {
            name: name.into(),
            description: format!("The {name} tool."),
            input_schema: path.clone(),
            annotations: Default::default(),
            output_schema: None,
        })
        .collect()
}

/// The engine turn `model` builds for a typed question (with or without the
/// tools), sampled at temperature 1 with `seed`, with `analysis` capped short.
pub fn engine_turn(model: &LocalChatModel, with_tools: bool, seed: u32) -> EngineTurn {
    let mut request = TurnRequest::new(vec![Message::user("The app crashes at start. Triage it.")])
        .output(schema())
        .temperature(1.0)
        .max_tokens(1500);
    request.settings.seed = Some(seed);
    if with_tools {
        request = request.tools(tools());
    }
    let mut turn = model.engine_turn(&request);
    cap_analysis(&mut turn.schema);
    turn
}

fn cap_analysis(schema: &mut Value) {
    let branches = schema
        .get_mut("anyOf")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten();
    for branch in branches {
        if let Some(analysis) = branch.pointer_mut("/properties/analysis") {
            analysis["maxLength"] = json!(ANALYSIS_CAP);
        }
    }
}

/// What a conformance answer was.
#[derive(Debug, Clone, PartialEq)]
pub enum Checked {
    /// A typed reply that validated, as its value.
    Typed(Value),
    /// A call of one of [`tools`], with valid arguments.
    Call(String),
}

/// Checks a complete answer: a typed reply must validate against [`schema`]
/// (the answer's text is the reply's JSON, as [`LocalChatModel`] streams it),
/// a call must name an offered tool with arguments its schema takes.
///
/// # Errors
///
/// What is wrong, with the answer.
pub fn check(answer: &str) -> Result<Checked, String> {
    match parse_typed_answer(answer) {
        Ok(Answer::Typed { reply, .. }) => {
            let text = reply.to_string();
            schema()
                .check(&text)
                .map(Checked::Typed)
                .map_err(|e| format!("{e} in {answer}"))
        }
        Ok(Answer::Call {
            name, arguments, ..
        }) => {
            let tool = tools()
                .into_iter()
                .find(|t| t.name == name)
                .ok_or_else(|| format!("`{name}` was not offered: {answer}"))?;
            let valid = jsonschema::validator_for(&tool.input_schema)
                .map_err(|e| e.to_string())?
                .is_valid(&arguments);
            if valid {
                Ok(Checked::Call(name))
            } else {
                Err(format!("invalid arguments for `{name}`: {answer}"))
            }
        }
        Ok(Answer::Reply { .. }) => Err(format!("a string reply to a typed question: {answer}")),
        Err(e) => Err(format!("{e}: {answer}")),
    }
}
