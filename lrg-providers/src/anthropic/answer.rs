//! Typed answers on the Messages API, two ways:
//!
//! - **Structured outputs** (`output_config.format`, json_schema) on models
//!   that have them ([`structured_outputs`]), with the schema shaped to
//!   Anthropic's strict rules: the API decodes the answer's text under the
//!   schema ([`OutputMode::NativeStrict`]).
//! - **A forced answer tool** otherwise, and for a schema that cannot be
//!   strict ([`OutputMode::ForcedTool`]): a synthetic tool, [`ANSWER_TOOL`],
//!   whose input is the answer, offered beside the caller's tools. With no
//!   other tool it is forced (`tool_choice: {type: "tool"}`), except with
//!   extended thinking on, which the API refuses to combine with a forced
//!   tool: there it is offered with `auto` and the system prompt asks for it.
//!   The decoder turns its `tool_use` into the answer's text (see
//!   [`super::AnthropicDecoder::with_answer_tool`]): never a tool call, never
//!   a native part, so nothing of it is sent back later as a `tool_use`
//!   without its result.

use serde_json::{Value, json};

use super::AnthropicConfig;
use crate::schema::{SchemaTarget, portable_tool_schema};
use crate::typed::{OutputMode, OutputSchema, StrictTarget};
use crate::{ToolSpec, TurnRequest};

/// The answer tool's name (suffixed with `_2`, `_3`, ... when the caller
/// has a tool of that name).
pub const ANSWER_TOOL: &str = "final_answer";

/// Model families and the first version of each with structured outputs.
const STRUCTURED_OUTPUTS: &[(&str, (u32, u32))] =
    &[("opus", (4, 1)), ("sonnet", (4, 5)), ("haiku", (4, 5))];

/// From this major version on, every family has structured outputs.
const EVERY_FAMILY_FROM: u32 = 5;

/// Whether `model` has structured outputs (`claude-opus-4-1`,
/// `claude-sonnet-4-5-20250929`, `claude-haiku-4-5`, and any 5 or later;
/// not `claude-opus-4-20250514` or any `claude-3-*`).
pub(crate) fn structured_outputs(model: &str) -> bool {
    let Some((family, major, minor)) = version(model) else {
        return false;
    };
    major >= EVERY_FAMILY_FROM
        || STRUCTURED_OUTPUTS
            .iter()
            .any(|(f, since)| *f == family && (major, minor) >= *since)
}

/// How `model` gives a typed answer (per request, a schema that cannot be
/// strict still goes through the answer tool).
pub(crate) fn output_mode(model: &str) -> OutputMode {
    if structured_outputs(model) {
        OutputMode::NativeStrict
    } else {
        OutputMode::ForcedTool
    }
}

/// `claude-<family>-<major>[-<minor>][-<date>]` (or `.` between the numbers,
/// and a vendor prefix before `claude-`): the family and version. The older
/// `claude-<major>-<minor>-<family>` names give their numbers and an empty
/// family.
fn version(model: &str) -> Option<(&str, u32, u32)> {
    let name = model.split('@').next().unwrap_or(model);
    let rest = &name[name.find("claude-")? + "claude-".len()..];
    let mut words = rest.split(['-', '.']);
    let first = words.next()?;
    let number = |w: Option<&str>| {
        w.filter(|w| (1..=2).contains(&w.len()))
            .and_then(|w| w.parse::<u32>().ok())
    };
    if let Ok(major) = first.parse::<u32>() {
        return Some(("", major, number(words.next()).unwrap_or(0)));
    }
    let major = number(words.next())?;
    Some((first, major, number(words.next()).unwrap_or(0)))
}

/// What a request asks of the API for its typed answer.
#[derive(Debug)]
pub(crate) enum Plan<'a> {
    /// `output_config.format` with this (strict) schema.
    Native(&'a Value),
    /// The answer tool.
    Tool {
        /// Its name.
        name: String,
        /// Its `input_schema`.
        schema: Value,
        /// Whether `tool_choice` forces it.
        forced: bool,
    },
}

/// The plan for `request` on `config`'s model; `None` without a typed answer.
pub(crate) fn plan<'a>(request: &'a TurnRequest, config: &AnthropicConfig) -> Option<Plan<'a>> {
    let output = request.output.as_ref()?;
    let strict = output.strict(StrictTarget::Anthropic);
    if strict.strict && structured_outputs(&config.model) {
        return Some(Plan::Native(&strict.schema));
    }
    Some(Plan::Tool {
        name: tool_name(&request.tools),
        schema: tool_schema(output),
        // The API refuses a forced tool with extended thinking on.
        forced: request.tools.is_empty() && config.thinking_budget.is_none(),
    })
}

/// The answer tool's name for `request`, when its typed answer goes through
/// one (what the decoder is told to read as text).
pub(crate) fn answer_tool(request: &TurnRequest, config: &AnthropicConfig) -> Option<String> {
    match plan(request, config)? {
        Plan::Tool { name, .. } => Some(name),
        Plan::Native(_) => None,
    }
}

/// [`ANSWER_TOOL`], or the first of `final_answer_2`, `final_answer_3`, ...
/// that no offered tool is called.
fn tool_name(tools: &[ToolSpec]) -> String {
    let taken = |name: &str| tools.iter().any(|t| t.name == name);
    if !taken(ANSWER_TOOL) {
        return ANSWER_TOOL.to_owned();
    }
    (2..)
        .map(|n| format!("{ANSWER_TOOL}_{n}"))
        .find(|name| !taken(name))
        .unwrap_or_else(|| format!("{ANSWER_TOOL}_{}", tools.len() + 2))
}

/// An object schema for the tool's input: the caller's own schema made
/// portable (references inlined, no top-level choice), with its bounds and
/// optional properties as written, since no grammar holds a tool's input on
/// these models; a root that is not an object goes inside `answer` (which
/// the answer check unwraps). Where that cannot be made, the strict shape.
fn tool_schema(output: &OutputSchema) -> Value {
    let strict = output.strict(StrictTarget::Anthropic);
    let source = if strict.wrapped {
        // The shaped form is the one with `answer` around the root.
        strict.schema.clone()
    } else {
        crate::openai::without_meta(output.schema())
    };
    portable_tool_schema(&source, SchemaTarget::Anthropic).unwrap_or_else(|_| strict.schema.clone())
}

/// The tool as the request lists it.
pub(crate) fn tool(name: &str, schema: &Value) -> Value {
    json!({
        "name": name,
        "description": "Give your final answer by calling this tool, once you need no other \
                        tool: its input is the answer. Call it instead of answering in text.",
        "input_schema": schema,
    })
}

/// What the system prompt adds when the tool is offered but not forced.
pub(crate) fn system_note(name: &str) -> String {
    format!("Give your final answer by calling the `{name}` tool, after any other tool calls.")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ApiKey;

    #[test]
    fn the_model_table_says_which_have_structured_outputs() {
        for yes in [
            "claude-opus-4-1",
            "claude-opus-4-1-20250805",
            "claude-sonnet-4-5",
            "claude-sonnet-4-5-20250929",
            "claude-sonnet-4-5@20250929",
            "claude-haiku-4-5",
            "claude-opus-4-6",
            "claude-sonnet-5",
            "claude-newfamily-5-1",
            "anthropic/claude-sonnet-4.5",
        ] {
            assert!(structured_outputs(yes), "{yes}");
            assert_eq!(output_mode(yes), OutputMode::NativeStrict, "{yes}");
        }
        for no in [
            "claude-opus-4-20250514",
            "claude-sonnet-4-20250514",
            "claude-opus-4",
            "claude-3-7-sonnet-latest",
            "claude-3-5-haiku-20241022",
            "claude-test-1",
            "gpt-4.1",
            "",
        ] {
            assert!(!structured_outputs(no), "{no}");
            assert_eq!(output_mode(no), OutputMode::ForcedTool, "{no}");
        }
    }

    fn schema(value: Value) -> OutputSchema {
        OutputSchema::new(value).unwrap()
    }

    fn spec(name: &str) -> ToolSpec {
        ToolSpec {
            name: name.into(),
            description: String::new(),
            input_schema: json!({"type": "object"}),
            annotations: Default::default(),
            output_schema: None,
        }
    }

    #[test]
    fn strict_on_a_new_model_is_native_anything_else_the_tool() {
        let strict = schema(json!({"type": "object", "properties": {"a": {"type": "string"}}}));
        let open_map =
            schema(json!({"type": "object", "additionalProperties": {"type": "integer"}}));
        let new = AnthropicConfig::new("claude-sonnet-4-5", ApiKey::new("k"));
        let old = AnthropicConfig::new("claude-3-7-sonnet-latest", ApiKey::new("k"));
        let request = TurnRequest::new(vec![]).output(strict.clone());
        assert!(matches!(plan(&request, &new), Some(Plan::Native(_))));
        assert!(answer_tool(&request, &new).is_none());
        match plan(&request, &old) {
            Some(Plan::Tool {
                name,
                schema,
                forced,
            }) => {
                assert_eq!(name, ANSWER_TOOL);
                assert_eq!(schema["properties"]["a"]["type"], "string");
                assert!(forced);
            }
            other => panic!("{other:?}"),
        }
        let request = TurnRequest::new(vec![]).output(open_map);
        assert!(matches!(plan(&request, &new), Some(Plan::Tool { .. })));
        assert!(plan(&TurnRequest::new(vec![]), &new).is_none());
    }

    #[test]
    fn not_forced_beside_tools_or_with_thinking_and_never_named_like_a_tool() {
        let request = TurnRequest::new(vec![])
            .output(schema(json!({"type": "array"})))
            .tools(vec![spec(ANSWER_TOOL), spec("final_answer_2")]);
        let old = AnthropicConfig::new("claude-3-7-sonnet-latest", ApiKey::new("k"));
        match plan(&request, &old) {
            Some(Plan::Tool {
                name,
                schema,
                forced,
            }) => {
                assert_eq!(name, "final_answer_3");
                // A non-object root is wrapped.
                assert_eq!(schema["type"], "object");
                assert_eq!(schema["properties"]["answer"]["type"], "array");
                assert!(!forced);
            }
            other => panic!("{other:?}"),
        }
        let thinking = old.with_thinking_budget(2048);
        let request = TurnRequest::new(vec![]).output(schema(json!({"type": "object"})));
        assert!(matches!(
            plan(&request, &thinking),
            Some(Plan::Tool { forced: false, .. })
        ));
    }
}
