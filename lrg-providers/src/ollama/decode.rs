//! The `/api/chat` answer decoder: NDJSON lines in, [`TurnEvent`]s out.

use serde::Deserialize;
use serde_json::Value;

use crate::model::whole_call_delta;
use crate::openai::{frame_error, stream_error};
use crate::wire::{CallIds, Decoder, Frame};
use crate::{Message, ProviderError, StopReason, ToolCall, TurnEvent, Usage};

/// Decodes one `/api/chat` answer (streamed lines, or one whole reply).
#[derive(Debug)]
pub struct OllamaDecoder {
    ids: CallIds,
    emitted_calls: bool,
    /// Calls emitted in this answer (the next call's delta index).
    calls: u32,
    ended: bool,
}

impl OllamaDecoder {
    /// A decoder whose call ids avoid those already in `history`.
    pub fn new(history: &[Message]) -> Self {
        Self {
            ids: CallIds::from_history(history),
            emitted_calls: false,
            calls: 0,
            ended: false,
        }
    }

    fn line(&mut self, line: Line, out: &mut Vec<TurnEvent>) -> Result<(), ProviderError> {
        if let Some(error) = line.error {
            return Err(stream_error(&error));
        }
        if let Some(message) = line.message {
            if let Some(text) = text_of(message.thinking) {
                out.push(TurnEvent::ReasoningDelta { text });
            }
            if let Some(text) = text_of(message.content) {
                out.push(TurnEvent::TextDelta { text });
            }
            // Calls arrive whole, so each goes out as soon as it is read,
            // after its one delta.
            for call in message.tool_calls.unwrap_or_default() {
                let call = self.call(call)?;
                out.push(whole_call_delta(self.calls, &call));
                self.calls += 1;
                out.push(TurnEvent::ToolCall(call));
            }
        }
        if line.done == Some(true) {
            if line.prompt_eval_count.is_some() || line.eval_count.is_some() {
                out.push(TurnEvent::Usage(Usage::new(
                    clamp(line.prompt_eval_count),
                    clamp(line.eval_count),
                )));
            }
            let stop = match line.done_reason.as_deref() {
                Some("length") => StopReason::MaxTokens,
                None | Some("stop") | Some("") if self.emitted_calls => StopReason::ToolCalls,
                None | Some("stop") | Some("") => StopReason::EndTurn,
                Some(other) => StopReason::Other(other.to_string()),
            };
            out.push(TurnEvent::End { stop });
            self.ended = true;
        }
        Ok(())
    }

    fn call(&mut self, call: WireCall) -> Result<ToolCall, ProviderError> {
        let function = call.function.unwrap_or_default();
        let Some(name) = function.name.filter(|n| !n.is_empty()) else {
            return Err(ProviderError::Protocol {
                message: "Ollama sent a tool call without a tool name".into(),
            });
        };
        let arguments = match function.arguments {
            None | Some(Value::Null) => Value::Object(Default::default()),
            Some(Value::String(raw)) if raw.trim().is_empty() => Value::Object(Default::default()),
            Some(Value::String(raw)) => {
                serde_json::from_str(&raw).map_err(|e| ProviderError::Protocol {
                    message: format!(
                        "the arguments of the call to tool `{name}` are not valid JSON ({e})"
                    ),
                })?
            }
            Some(other) => other,
        };
        self.emitted_calls = true;
        Ok(ToolCall {
            id: self.ids.claim(call.id),
            name,
            arguments,
        })
    }
}

impl Decoder for OllamaDecoder {
    fn decode(&mut self, frame: &Frame, out: &mut Vec<TurnEvent>) -> Result<(), ProviderError> {
        let data = frame.data.trim();
        if self.ended || data.is_empty() {
            return Ok(());
        }
        let line: Line = serde_json::from_str(data).map_err(|e| frame_error(&e, data))?;
        self.line(line, out)
    }

    fn finish(&mut self, _out: &mut Vec<TurnEvent>) -> Result<(), ProviderError> {
        if self.ended {
            return Ok(());
        }
        Err(ProviderError::transient(
            "the stream ended before Ollama said it was done",
        ))
    }
}

fn text_of(value: Option<Value>) -> Option<String> {
    match value? {
        Value::String(s) if !s.is_empty() => Some(s),
        _ => None,
    }
}

fn clamp(n: Option<u64>) -> u32 {
    n.map_or(0, |n| u32::try_from(n).unwrap_or(u32::MAX))
}

#[derive(Deserialize)]
struct Line {
    #[serde(default)]
    message: Option<WireMessage>,
    #[serde(default)]
    done: Option<bool>,
    #[serde(default)]
    done_reason: Option<String>,
    #[serde(default)]
    prompt_eval_count: Option<u64>,
    #[serde(default)]
    eval_count: Option<u64>,
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Deserialize)]
struct WireMessage {
    #[serde(default)]
    content: Option<Value>,
    #[serde(default)]
    thinking: Option<Value>,
    #[serde(default)]
    tool_calls: Option<Vec<WireCall>>,
}

#[derive(Deserialize)]
struct WireCall {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: Option<WireFunction>,
}

#[derive(Deserialize, Default)]
struct WireFunction {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    arguments: Option<Value>,
}
