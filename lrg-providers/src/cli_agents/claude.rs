//! Claude Code: `claude -p --output-format stream-json --verbose
//! --include-partial-messages`, the prompt on stdin, no tools, no MCP
//! servers. Its lines: `system` (init, with the session id), `stream_event`
//! (the Messages API's own events, for live deltas), `assistant` (whole
//! messages), `result` (usage, success or the error).

use std::ffi::OsString;

use serde_json::Value;

use super::lines::{TurnState, cli_error, count, json_line, part_count, usage};
use crate::wire::{Decoder, Frame};
use crate::{ProviderError, TurnEvent};

const NAME: &str = "Claude Code";

/// The arguments of one turn.
pub(crate) fn args(model: &str, system: Option<&str>, resume: Option<&str>) -> Vec<OsString> {
    let mut args: Vec<OsString> = [
        "-p",
        "--output-format",
        "stream-json",
        "--verbose",
        "--include-partial-messages",
        // Chat only: no built-in tools, and no MCP server from any config.
        "--tools",
        "",
        "--strict-mcp-config",
        "--mcp-config",
        r#"{"mcpServers":{}}"#,
    ]
    .into_iter()
    .map(OsString::from)
    .collect();
    if model != "default" && !model.is_empty() {
        args.extend(["--model".into(), model.into()]);
    }
    if let Some(system) = system.filter(|s| !s.is_empty()) {
        args.extend(["--system-prompt".into(), system.into()]);
    }
    if let Some(id) = resume {
        args.extend(["--resume".into(), id.into()]);
    }
    args
}

/// Parses Claude Code's stream-json output.
#[derive(Debug)]
pub(crate) struct ClaudeDecoder {
    provider: &'static str,
    model: String,
    state: TurnState,
    /// Deltas of the current message came as stream events, so its whole
    /// `assistant` line repeats them.
    streamed: bool,
}

impl ClaudeDecoder {
    pub(crate) fn new(provider: &'static str, model: &str) -> Self {
        Self {
            provider,
            model: model.to_string(),
            state: TurnState::default(),
            streamed: false,
        }
    }

    fn stream_event(&mut self, event: &Value, out: &mut Vec<TurnEvent>) {
        if event.get("type").and_then(Value::as_str) != Some("content_block_delta") {
            return;
        }
        let Some(delta) = event.get("delta") else {
            return;
        };
        let text = |field: &str| {
            delta
                .get(field)
                .and_then(Value::as_str)
                .filter(|t| !t.is_empty())
                .map(str::to_string)
        };
        match delta.get("type").and_then(Value::as_str) {
            Some("text_delta") => {
                if let Some(text) = text("text") {
                    if self.state.wrote_text && !self.streamed {
                        out.push(TurnEvent::TextDelta {
                            text: "\n\n".into(),
                        });
                    }
                    self.state.wrote_text = true;
                    self.streamed = true;
                    out.push(TurnEvent::TextDelta { text });
                }
            }
            Some("thinking_delta") => {
                if let Some(text) = text("thinking") {
                    self.streamed = true;
                    out.push(TurnEvent::ReasoningDelta { text });
                }
            }
            _ => {}
        }
    }

    fn assistant(&mut self, line: &Value, out: &mut Vec<TurnEvent>) {
        if std::mem::take(&mut self.streamed) {
            return;
        }
        let blocks = line.pointer("/message/content").and_then(Value::as_array);
        for block in blocks.into_iter().flatten() {
            let text = |field: &str| block.get(field).and_then(Value::as_str).unwrap_or("");
            match block.get("type").and_then(Value::as_str) {
                Some("text") => self.state.text(text("text"), out),
                Some("thinking") if !text("thinking").is_empty() => {
                    out.push(TurnEvent::ReasoningDelta {
                        text: text("thinking").to_string(),
                    });
                }
                _ => {}
            }
        }
    }

    fn result(&mut self, line: &Value, out: &mut Vec<TurnEvent>) -> Result<(), ProviderError> {
        let failed = line.get("is_error").and_then(Value::as_bool) == Some(true)
            || line
                .get("subtype")
                .and_then(Value::as_str)
                .is_some_and(|s| s.starts_with("error"));
        if failed {
            let message = line
                .get("result")
                .and_then(Value::as_str)
                .or_else(|| line.get("subtype").and_then(Value::as_str))
                .unwrap_or("the turn failed");
            return Err(cli_error(NAME, message));
        }
        if let Some(u) = line.get("usage").filter(|u| u.is_object()) {
            let prompt = count(u, "/input_tokens")
                + count(u, "/cache_creation_input_tokens")
                + count(u, "/cache_read_input_tokens");
            // Like the Messages API: `input_tokens` leaves cache reads and
            // writes out, so they are added back (see `Usage`).
            let usage = usage(prompt, count(u, "/output_tokens"))
                .with_cached_prompt_tokens(part_count(u, "/cache_read_input_tokens"))
                .with_cache_write_tokens(part_count(u, "/cache_creation_input_tokens"));
            out.push(TurnEvent::Usage(usage));
        }
        self.state.end(self.provider, &self.model, out);
        Ok(())
    }
}

impl Decoder for ClaudeDecoder {
    fn decode(&mut self, frame: &Frame, out: &mut Vec<TurnEvent>) -> Result<(), ProviderError> {
        if self.state.ended {
            return Ok(());
        }
        let Some(line) = json_line(frame)? else {
            return Ok(());
        };
        if let Some(id) = line.get("session_id").and_then(Value::as_str) {
            self.state.session = Some(id.to_string());
        }
        match line.get("type").and_then(Value::as_str) {
            Some("stream_event") => {
                if let Some(event) = line.get("event") {
                    self.stream_event(event, out);
                }
            }
            Some("assistant") => self.assistant(&line, out),
            Some("result") => self.result(&line, out)?,
            _ => {}
        }
        Ok(())
    }

    fn finish(&mut self, _out: &mut Vec<TurnEvent>) -> Result<(), ProviderError> {
        self.state.finish(NAME)
    }
}
