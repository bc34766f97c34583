//! Recovery from a call the model wrote but lrg cannot run (reference design:
//! "Error Recovery Pattern"). The parser turns it into a call to
//! [`RECOVERY_TOOL`] whose arguments are a [`Recovery`]: the session answers
//! that call with [`Recovery::message`] (plus the tool's expected arguments,
//! which the session knows), and publishes a warning.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::ToolFormat;
use super::formats::Problem;
use super::prompt::render_call;
use crate::ToolSpec;
use crate::text::quote;

/// The name of the stand-in call for a tool call that could not be used.
/// No real tool may have this name: it starts with `lrg.`.
pub const RECOVERY_TOOL: &str = "lrg.invalid_tool_call";

/// The arguments of a [`RECOVERY_TOOL`] call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Recovery {
    /// What went wrong and how to write the call, for the model.
    pub message: String,
    /// The offered tool the model most likely meant, if one can be told.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
}

impl Recovery {
    /// Read a [`RECOVERY_TOOL`] call's arguments.
    pub fn from_arguments(arguments: &Value) -> Option<Self> {
        serde_json::from_value(arguments.clone()).ok()
    }

    fn into_value(self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

/// A call body that could not be read.
pub(crate) fn unreadable(
    format: ToolFormat,
    problem: &Problem,
    raw: &str,
    tools: &[ToolSpec],
) -> Value {
    // The tool the model meant: the first offered name in what it wrote.
    let meant = tools
        .iter()
        .find(|t| raw.contains(t.name.as_str()))
        .or(tools.first());
    let why = match problem {
        Problem::Unreadable(why) => why.clone(),
        Problem::NoName => "it names no tool".to_string(),
    };
    let mut message = format!(
        "Your tool call could not be read ({why}): {}\nWrite the call exactly in this format, for example:\n",
        quote(raw.trim())
    );
    if let Some(tool) = meant {
        message.push_str(&render_call(
            format,
            &tool.name,
            &example_arguments(&tool.input_schema),
        ));
    }
    Recovery {
        message,
        tool: meant.map(|t| t.name.clone()),
    }
    .into_value()
}

/// A call to a tool that was not offered; `candidates`: the offered names
/// it fits equally well (see [`super::NameMatch::Ambiguous`]).
pub(crate) fn unknown_name(
    format: ToolFormat,
    written: &str,
    candidates: &[&str],
    tools: &[ToolSpec],
) -> Value {
    let names: Vec<String> = tools.iter().map(|t| t.name.clone()).collect();
    let mut message = if candidates.is_empty() {
        format!(
            "There is no tool named `{written}`. The tools are: {}.",
            if names.is_empty() {
                "none".to_string()
            } else {
                names.join(", ")
            }
        )
    } else {
        format!(
            "There is no tool named `{written}`, and it fits several: {}. Call the one you mean by its exact name.",
            candidates.join(", ")
        )
    };
    if let Some(tool) = tools.first() {
        message.push_str(" A call looks like this:\n");
        message.push_str(&render_call(
            format,
            &tool.name,
            &example_arguments(&tool.input_schema),
        ));
    }
    Recovery {
        message,
        tool: None,
    }
    .into_value()
}

/// Arguments that show the shape a schema asks for: each required property
/// (or the first two when none is required) with a placeholder of its type.
pub(crate) fn example_arguments(schema: &Value) -> Value {
    let mut args = Map::new();
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        return Value::Object(args);
    };
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    for (name, property) in properties {
        if !required.is_empty() && !required.contains(&name.as_str()) {
            continue;
        }
        if required.is_empty() && args.len() == 2 {
            break;
        }
        let placeholder = match property.get("type").and_then(Value::as_str) {
            Some("integer") => Value::from(1),
            Some("number") => Value::from(1.5),
            Some("boolean") => Value::Bool(true),
            Some("array") => Value::Array(Vec::new()),
            Some("object") => Value::Object(Map::new()),
            _ => match property
                .get("enum")
                .and_then(Value::as_array)
                .and_then(|e| e.first())
            {
                Some(first) => first.clone(),
                None => Value::String(format!("<{name}>")),
            },
        };
        args.insert(name.clone(), placeholder);
    }
    Value::Object(args)
}
