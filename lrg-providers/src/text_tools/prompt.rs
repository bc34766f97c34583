//! Describing the tools in the system prompt, in the family's own format,
//! for servers that do not take tools natively, and writing one call in that
//! format (the prompt's example, and recovery messages).

use serde_json::{Value, json};

use super::ToolFormat;
use super::recovery::example_arguments;
use crate::ToolSpec;

/// One call to `name` with `arguments`, written the way `format` writes it.
pub fn render_call(format: ToolFormat, name: &str, arguments: &Value) -> String {
    let call = json!({"name": name, "arguments": arguments});
    match format {
        ToolFormat::Hermes => format!("<tool_call>\n{call}\n</tool_call>"),
        ToolFormat::Qwen3Coder => {
            let mut out = format!("<tool_call>\n<function={name}>\n");
            for (key, value) in arguments.as_object().into_iter().flatten() {
                let value = match value {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                out.push_str(&format!("<parameter={key}>\n{value}\n</parameter>\n"));
            }
            out.push_str("</function>\n</tool_call>");
            out
        }
        ToolFormat::Mistral => format!("[TOOL_CALLS][{call}]"),
        ToolFormat::Llama3 => json!({"name": name, "parameters": arguments}).to_string(),
        ToolFormat::Harmony => format!(
            "<|channel|>commentary to=functions.{name} <|constrain|>json<|message|>{arguments}<|call|>"
        ),
        ToolFormat::Granite => format!("<|tool_call|>[{call}]"),
        ToolFormat::DeepSeek => format!(
            "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>{name}\n```json\n{arguments}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>"
        ),
        ToolFormat::Pythonic => format!("[{}]", python_call(name, arguments)),
        ToolFormat::MarkdownJson => format!("```json\n{call}\n```"),
        ToolFormat::Gemma => format!("```tool_code\n{}\n```", python_call(name, arguments)),
    }
}

/// A tool's result as the history of a text-format conversation shows it:
/// in Gemma's ```` ```tool_output ```` block, else in `<tool_response>` tags.
pub(crate) fn render_result(format: ToolFormat, text: &str) -> String {
    match format {
        ToolFormat::Gemma => format!("```tool_output\n{text}\n```"),
        _ => format!("<tool_response>\n{text}\n</tool_response>"),
    }
}

/// `name(key=value, …)`.
fn python_call(name: &str, arguments: &Value) -> String {
    let args: Vec<String> = arguments
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, v)| format!("{k}={}", python_literal(v)))
        .collect();
    format!("{name}({})", args.join(", "))
}

fn python_literal(value: &Value) -> String {
    match value {
        Value::Null => "None".into(),
        Value::Bool(true) => "True".into(),
        Value::Bool(false) => "False".into(),
        Value::Array(items) => format!(
            "[{}]",
            items
                .iter()
                .map(python_literal)
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Value::Object(map) => format!(
            "{{{}}}",
            map.iter()
                .map(|(k, v)| format!("{}: {}", Value::String(k.clone()), python_literal(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        other => other.to_string(),
    }
}

/// The system-prompt section that offers `tools` to a model that writes
/// calls in `format`. Hermes follows the Qwen/Hermes chat template's own
/// wording; the others list the tools as JSON and show one call.
pub fn tools_prompt(format: ToolFormat, tools: &[ToolSpec]) -> String {
    let specs: Vec<String> = tools
        .iter()
        .map(|t| {
            json!({"type": "function", "function": {
                "name": t.name, "description": t.description, "parameters": t.input_schema}})
            .to_string()
        })
        .collect();
    let example = tools
        .first()
        .map(|t| render_call(format, &t.name, &example_arguments(&t.input_schema)))
        .unwrap_or_default();
    if format == ToolFormat::Hermes {
        return format!(
            "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n\
             You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n{}\n</tools>\n\n\
             For each function call, return a json object with function name and arguments within \
             <tool_call></tool_call> XML tags:\n<tool_call>\n{{\"name\": <function-name>, \"arguments\": <args-json-object>}}\n</tool_call>",
            specs.join("\n")
        );
    }
    format!(
        "# Tools\n\nYou may call one or more of these functions to assist with the user query:\n{}\n\n\
         To call a function, write the call exactly in this format, then stop and wait for its result:\n{example}",
        specs.join("\n")
    )
}
