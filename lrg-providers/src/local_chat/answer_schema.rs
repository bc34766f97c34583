//! The answer schema: which JSON a local model may write, and which tools it is
//! offered.
//!
//! Key order matters for a grammar engine: it writes properties in the order the
//! schema lists them, and we want the reasoning first and the tool chosen before
//! its arguments. `serde_json::Map` is a sorted map by default and an
//! insertion-ordered one when any crate in the build enables serde_json's
//! `preserve_order` feature (lrg-llama's dependencies do). Every object built
//! here inserts its keys in alphabetical order (`analysis` < `call` < `reply`
//! among them), so the serialized schema is the same text, keys in the same
//! order, under either map.

use serde_json::{Map, Value, json};

use crate::ToolSpec;

/// Most characters of `analysis`, enforced by the engine's grammar.
pub const ANALYSIS_MAX_CHARS: u32 = 600;
/// Most characters of `reply`, enforced by the engine's grammar.
pub const REPLY_MAX_CHARS: u32 = 6000;
/// Most characters of each string in a tool's arguments.
pub const ARGUMENT_MAX_CHARS: u32 = 1000;

/// A tool that could be shaped for the grammar, with its shaped argument schemas.
#[derive(Debug, Clone)]
pub(crate) struct OfferedTool {
    /// The tool as the caller gave it (descriptions come from here: shaping
    /// drops them).
    pub spec: ToolSpec,
    /// One closed argument schema per `split_choice` branch (one when the
    /// schema offers no choice).
    pub branches: Vec<Value>,
}

/// Shape the tools for the grammar. A tool whose schema cannot be shaped, or
/// that repeats an earlier tool's name, is left out with a warning naming it:
/// the rest of the turn still works.
pub(crate) fn offer_tools(tools: &[ToolSpec]) -> Vec<OfferedTool> {
    let mut offered: Vec<OfferedTool> = Vec::with_capacity(tools.len());
    for spec in tools {
        if offered.iter().any(|t| t.spec.name == spec.name) {
            tracing::warn!(tool = %spec.name, "tool offered twice; only the first is offered to the local model");
            continue;
        }
        match shape_arguments(&spec.input_schema) {
            Ok(branches) if !branches.is_empty() => offered.push(OfferedTool {
                spec: spec.clone(),
                branches,
            }),
            Ok(_) => {
                tracing::warn!(tool = %spec.name, "tool schema admits no arguments object; not offered to the local model");
            }
            Err(error) => {
                tracing::warn!(tool = %spec.name, %error, "tool schema cannot be turned into a grammar; not offered to the local model");
            }
        }
    }
    offered
}

fn shape_arguments(schema: &Value) -> Result<Vec<Value>, String> {
    let shaped =
        crate::schema::grammar_schema(schema, ARGUMENT_MAX_CHARS).map_err(|e| e.to_string())?;
    crate::schema::split_choice(shaped).map_err(|e| e.to_string())
}

/// The answer schema for `tools`: an `anyOf` with one
/// `{"analysis", "call": {"<tool>": <arguments>}}` branch per tool (and per
/// choice of a tool whose arguments say "exactly one of"), and one
/// `{"analysis", "reply"}` branch. Tools whose schema cannot be shaped are left
/// out (with a warning).
pub fn answer_schema(tools: &[ToolSpec]) -> Value {
    schema_for(&offer_tools(tools), None)
}

/// The answer schema for tools already shaped; `typed_reply`, when given, is
/// the `reply` branch's value (a typed answer's grammar schema) in place of
/// a capped string.
pub(crate) fn schema_for(tools: &[OfferedTool], typed_reply: Option<&Value>) -> Value {
    let mut branches = Vec::new();
    for tool in tools {
        for arguments in &tool.branches {
            let mut call = Map::new();
            call.insert(tool.spec.name.clone(), arguments.clone());
            branches.push(answer_branch("call", closed_object(call)));
        }
    }
    let reply = match typed_reply {
        Some(schema) => schema.clone(),
        None => json!({"maxLength": REPLY_MAX_CHARS, "type": "string"}),
    };
    branches.push(answer_branch("reply", reply));
    json!({ "anyOf": branches })
}

/// `{"analysis": string, <key>: <value>}`, both required, nothing else.
fn answer_branch(key: &str, value: Value) -> Value {
    let mut properties = Map::new();
    // Inserted first, and alphabetically first: `analysis` leads under either map.
    properties.insert(
        "analysis".into(),
        json!({"maxLength": ANALYSIS_MAX_CHARS, "type": "string"}),
    );
    properties.insert(key.into(), value);
    closed_object(properties)
}

/// A closed object schema requiring every property, in their order.
fn closed_object(properties: Map<String, Value>) -> Value {
    let required: Vec<Value> = properties
        .keys()
        .map(|k| Value::String(k.clone()))
        .collect();
    let mut object = Map::new();
    object.insert("additionalProperties".into(), Value::Bool(false));
    object.insert("properties".into(), Value::Object(properties));
    object.insert("required".into(), Value::Array(required));
    object.insert("type".into(), json!("object"));
    Value::Object(object)
}
