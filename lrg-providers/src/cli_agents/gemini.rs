//! Gemini CLI: `gemini --output-format stream-json`, the prompt on stdin
//! (a piped stdin makes it headless, like `-p`), `--resume <id>` to
//! continue. Its lines: `init` (the session id), `message` (assistant
//! deltas), `tool_use`/`tool_result`, `error` (warnings), `result`.

use std::ffi::OsString;

use serde_json::Value;

use super::lines::{TurnState, cli_error, count, json_line, part_count, usage};
use crate::wire::{Decoder, Frame};
use crate::{ProviderError, TurnEvent};

const NAME: &str = "Gemini CLI";

/// The arguments of one turn (it has no system-prompt flag: the prompt
/// text carries the instructions).
pub(crate) fn args(model: &str, resume: Option<&str>) -> Vec<OsString> {
    let mut args: Vec<OsString> = vec!["--output-format".into(), "stream-json".into()];
    if model != "default" && !model.is_empty() {
        args.extend(["--model".into(), model.into()]);
    }
    if let Some(id) = resume {
        args.extend(["--resume".into(), id.into()]);
    }
    args
}

/// Parses Gemini CLI's stream-json output.
#[derive(Debug)]
pub(crate) struct GeminiDecoder {
    provider: &'static str,
    model: String,
    state: TurnState,
    /// The last error line, which a failed `result` may not repeat.
    last_error: Option<String>,
}

impl GeminiDecoder {
    pub(crate) fn new(provider: &'static str, model: &str) -> Self {
        Self {
            provider,
            model: model.to_string(),
            state: TurnState::default(),
            last_error: None,
        }
    }

    fn result(&mut self, line: &Value, out: &mut Vec<TurnEvent>) -> Result<(), ProviderError> {
        if line.get("status").and_then(Value::as_str) == Some("error") {
            let message = line
                .pointer("/error/message")
                .and_then(Value::as_str)
                .map(str::to_string)
                .or_else(|| self.last_error.take())
                .unwrap_or_else(|| "the turn failed".into());
            return Err(cli_error(NAME, &message));
        }
        if let Some(stats) = line.get("stats") {
            // `input_tokens` includes the `cached` part.
            let usage = usage(
                count(stats, "/input_tokens"),
                count(stats, "/output_tokens"),
            )
            .with_cached_prompt_tokens(part_count(stats, "/cached"));
            out.push(TurnEvent::Usage(usage));
        }
        self.state.end(self.provider, &self.model, out);
        Ok(())
    }
}

impl Decoder for GeminiDecoder {
    fn decode(&mut self, frame: &Frame, out: &mut Vec<TurnEvent>) -> Result<(), ProviderError> {
        if self.state.ended {
            return Ok(());
        }
        let Some(line) = json_line(frame)? else {
            return Ok(());
        };
        match line.get("type").and_then(Value::as_str) {
            Some("init") => {
                self.state.session = line
                    .get("session_id")
                    .and_then(Value::as_str)
                    .map(str::to_string);
            }
            Some("message") if line.get("role").and_then(Value::as_str) == Some("assistant") => {
                let text = line.get("content").and_then(Value::as_str).unwrap_or("");
                if line.get("delta").and_then(Value::as_bool) == Some(true) {
                    if !text.is_empty() {
                        self.state.wrote_text = true;
                        out.push(TurnEvent::TextDelta {
                            text: text.to_string(),
                        });
                    }
                } else {
                    self.state.text(text, out);
                }
            }
            Some("error") => {
                let message = line.get("message").and_then(Value::as_str).unwrap_or("");
                tracing::debug!(message, "gemini reported an error");
                self.last_error = Some(message.to_string());
            }
            Some("result") => self.result(&line, out)?,
            _ => {}
        }
        Ok(())
    }

    fn finish(&mut self, _out: &mut Vec<TurnEvent>) -> Result<(), ProviderError> {
        self.state.finish(NAME)
    }
}
