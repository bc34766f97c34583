//! Codex CLI: `codex exec --json`, read-only sandbox, the user's config
//! ignored, the prompt on stdin (`-`); `codex exec ... resume <id> -` to
//! continue. Its lines: `thread.started` (the session id), `item.completed`
//! (`reasoning`, `agent_message`, ...), `turn.completed` (usage),
//! `turn.failed` and `error`.

use std::ffi::OsString;

use serde_json::Value;

use super::lines::{TurnState, cli_error, count, json_line, part_count, usage};
use crate::wire::{Decoder, Frame};
use crate::{ProviderError, TurnEvent};

const NAME: &str = "Codex CLI";

/// The arguments of one turn.
pub(crate) fn args(model: &str, system: Option<&str>, resume: Option<&str>) -> Vec<OsString> {
    let mut args: Vec<OsString> = [
        "exec",
        "--json",
        "--skip-git-repo-check",
        "--ignore-user-config",
        "--sandbox",
        "read-only",
    ]
    .into_iter()
    .map(OsString::from)
    .collect();
    if model != "default" && !model.is_empty() {
        args.extend(["--model".into(), model.into()]);
    }
    if let Some(system) = system.filter(|s| !s.is_empty()) {
        // A TOML string: a JSON string's escapes are valid TOML ones.
        let quoted = serde_json::to_string(system).unwrap_or_default();
        args.extend([
            "-c".into(),
            format!("developer_instructions={quoted}").into(),
        ]);
    }
    if let Some(id) = resume {
        args.extend(["resume".into(), id.into()]);
    }
    args.push("-".into());
    args
}

/// Parses `codex exec --json` output.
#[derive(Debug)]
pub(crate) struct CodexDecoder {
    provider: &'static str,
    model: String,
    state: TurnState,
}

impl CodexDecoder {
    pub(crate) fn new(provider: &'static str, model: &str) -> Self {
        Self {
            provider,
            model: model.to_string(),
            state: TurnState::default(),
        }
    }

    fn item(&mut self, item: &Value, out: &mut Vec<TurnEvent>) {
        let text = item.get("text").and_then(Value::as_str).unwrap_or("");
        match item.get("type").and_then(Value::as_str) {
            Some("agent_message") => self.state.text(text, out),
            Some("reasoning") if !text.is_empty() => out.push(TurnEvent::ReasoningDelta {
                text: text.to_string(),
            }),
            Some("error") => tracing::debug!(message = text, "codex reported a non-fatal error"),
            _ => {}
        }
    }
}

impl Decoder for CodexDecoder {
    fn decode(&mut self, frame: &Frame, out: &mut Vec<TurnEvent>) -> Result<(), ProviderError> {
        if self.state.ended {
            return Ok(());
        }
        let Some(line) = json_line(frame)? else {
            return Ok(());
        };
        match line.get("type").and_then(Value::as_str) {
            Some("thread.started") => {
                self.state.session = line
                    .get("thread_id")
                    .and_then(Value::as_str)
                    .map(str::to_string);
            }
            Some("item.completed") => {
                if let Some(item) = line.get("item") {
                    self.item(item, out);
                }
            }
            Some("turn.completed") => {
                if let Some(u) = line.get("usage") {
                    // OpenAI's counting: the input includes the cached
                    // part, the output the reasoning part.
                    let usage = usage(count(u, "/input_tokens"), count(u, "/output_tokens"))
                        .with_cached_prompt_tokens(part_count(u, "/cached_input_tokens"))
                        .with_reasoning_tokens(part_count(u, "/reasoning_output_tokens"));
                    out.push(TurnEvent::Usage(usage));
                }
                self.state.end(self.provider, &self.model, out);
            }
            Some("turn.failed") => {
                let message = line
                    .pointer("/error/message")
                    .and_then(Value::as_str)
                    .unwrap_or("the turn failed");
                return Err(cli_error(NAME, message));
            }
            Some("error") => {
                let message = line
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or("unknown error");
                return Err(cli_error(NAME, message));
            }
            _ => {}
        }
        Ok(())
    }

    fn finish(&mut self, _out: &mut Vec<TurnEvent>) -> Result<(), ProviderError> {
        self.state.finish(NAME)
    }
}
