//! Structured tool output: a result's `structuredContent` checked against
//! the tool's `outputSchema`, and handed to the model when the text does
//! not already carry it.

use lrg_providers::Part;
use serde_json::Value;

use super::super::ToolOutput;

/// How many schema problems are named before "and N more".
const MAX_LISTED: usize = 5;

/// A tool's compiled output schema.
pub(crate) struct OutputCheck {
    validator: jsonschema::Validator,
}

impl std::fmt::Debug for OutputCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OutputCheck").finish_non_exhaustive()
    }
}

impl OutputCheck {
    /// Compile `schema`; one that does not compile is not enforced (as
    /// with input schemas: the tool stays usable), and says so in the log.
    pub(crate) fn new(tool: &str, schema: &Value) -> Option<Self> {
        match jsonschema::validator_for(schema) {
            Ok(validator) => Some(Self { validator }),
            Err(e) => {
                tracing::warn!(tool, error = %e, "tool output schema does not compile; results are not checked");
                None
            }
        }
    }

    /// Check `out` of `tool`, as the MCP spec asks of a client: a successful
    /// result of a tool with an output schema must carry structured content
    /// that matches it; otherwise the result becomes an error saying what
    /// failed. A failed call (`isError`) is left as it is.
    pub(crate) fn check(&self, tool: &str, out: &mut ToolOutput) {
        if out.is_error {
            return;
        }
        let Some(value) = &out.structured else {
            *out = failed(
                out,
                format!(
                    "The tool `{tool}` declares an output schema but returned no structured \
                     content, so its result cannot be trusted."
                ),
            );
            return;
        };
        let mut problems = Vec::new();
        let mut more = 0usize;
        for error in self.validator.iter_errors(value) {
            if problems.len() == MAX_LISTED {
                more += 1;
                continue;
            }
            let path = error.instance_path().to_string();
            problems.push(if path.is_empty() || path == "/" {
                error.to_string()
            } else {
                format!("at {path}: {error}")
            });
        }
        if problems.is_empty() {
            return;
        }
        let mut message = format!(
            "The structured result of `{tool}` does not match its output schema: {}",
            problems.join("; ")
        );
        if more > 0 {
            message.push_str(&format!("; and {more} more"));
        }
        message.push('.');
        *out = failed(out, message);
    }
}

/// An error result with `message`, keeping the warning and the structured
/// content (a front end may still show what came).
fn failed(out: &ToolOutput, message: String) -> ToolOutput {
    let mut failed = ToolOutput::error(message);
    failed.warning = out.warning.clone();
    failed.structured = out.structured.clone();
    failed
}

/// Give the model the structured content as compact JSON, unless one of the
/// text parts already is that same JSON (servers are asked to repeat it as
/// text, and most do).
pub(crate) fn show_to_model(out: &mut ToolOutput) {
    let Some(value) = &out.structured else {
        return;
    };
    let carried = out.parts.iter().any(|p| match p {
        Part::Text { text } => serde_json::from_str::<Value>(text).is_ok_and(|v| v == *value),
        _ => false,
    });
    if !carried {
        out.parts.push(Part::text(value.to_string()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn weather_check() -> OutputCheck {
        OutputCheck::new(
            "weather",
            &json!({"type": "object", "properties": {"temperature": {"type": "number"}},
                    "required": ["temperature"]}),
        )
        .unwrap()
    }

    fn with(structured: Option<Value>, text: &str) -> ToolOutput {
        let mut out = ToolOutput::text(text);
        out.structured = structured;
        out
    }

    #[test]
    fn a_matching_result_passes_unchanged() {
        let mut out = with(Some(json!({"temperature": 3})), "{\"temperature\":3}");
        weather_check().check("weather", &mut out);
        assert!(!out.is_error);
        show_to_model(&mut out);
        assert_eq!(out.parts.len(), 1, "the text already carries it");
    }

    #[test]
    fn a_mismatch_is_an_error_that_names_the_field() {
        let mut out = with(Some(json!({"temperature": "warm"})), "warm");
        weather_check().check("weather", &mut out);
        assert!(out.is_error);
        let Part::Text { text } = &out.parts[0] else {
            panic!("text expected")
        };
        assert!(text.contains("does not match its output schema"), "{text}");
        assert!(text.contains("/temperature"), "{text}");
        assert_eq!(out.structured, Some(json!({"temperature": "warm"})));
    }

    #[test]
    fn missing_structured_content_is_an_error() {
        let mut out = with(None, "sunny");
        weather_check().check("weather", &mut out);
        assert!(out.is_error);
        // A failed call stays as the server said.
        let mut err = ToolOutput::error("boom");
        weather_check().check("weather", &mut err);
        assert_eq!(err, ToolOutput::error("boom"));
    }

    #[test]
    fn structured_content_not_in_the_text_is_added_compactly() {
        let mut out = with(Some(json!({"a": [1, 2]})), "Here is the data.");
        show_to_model(&mut out);
        assert_eq!(out.parts[1], Part::text("{\"a\":[1,2]}"));
    }
}
