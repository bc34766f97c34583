//! The Chat Completions answer decoder: SSE chunks (or one whole JSON reply)
//! in, [`TurnEvent`]s out. Tool-call fragments are joined here, tolerating the
//! ways servers differ from OpenAI.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::Value;

use super::dialect::ReasoningField;
use crate::text::{quote, truncate};
use crate::wire::{CallIds, Decoder, Frame, StrOrJson, borrowed_str};
use crate::{Message, ProviderError, StopReason, ToolCall, TurnEvent, Usage};

/// Decodes one Chat Completions answer.
#[derive(Debug)]
pub struct OpenAiDecoder {
    reasoning_fields: &'static [ReasoningField],
    calls: Vec<PendingCall>,
    ids: CallIds,
    finish: Option<StopReason>,
    emitted_calls: bool,
    /// Calls of this turn whose first delta went out (the next call's index).
    announced: u32,
    ended: bool,
}

#[derive(Debug, Default)]
struct PendingCall {
    index: Option<i64>,
    id: Option<String>,
    name: String,
    arguments: String,
    arguments_json: Option<Value>,
    /// Set once the call's first delta went out: its index in the turn and
    /// the id claimed for it then (the id its `ToolCall` gets).
    announced: Option<(u32, String)>,
}

impl OpenAiDecoder {
    /// A decoder reading reasoning from `reasoning_fields` (first present
    /// wins); ids it makes up for calls that lack one avoid those of `history`.
    pub fn new(reasoning_fields: &'static [ReasoningField], history: &[Message]) -> Self {
        Self {
            reasoning_fields,
            calls: Vec::new(),
            ids: CallIds::from_history(history),
            finish: None,
            emitted_calls: false,
            announced: 0,
            ended: false,
        }
    }

    fn chunk(&mut self, chunk: Chunk<'_>, out: &mut Vec<TurnEvent>) -> Result<(), ProviderError> {
        if let Some(error) = chunk.error {
            return Err(stream_error(&error));
        }
        for choice in chunk.choices.unwrap_or_default() {
            if let Some(delta) = choice.delta.or(choice.message.map(|m| *m)) {
                self.delta(delta, out);
            }
            if let Some(reason) = choice.finish_reason {
                let has_calls = !self.calls.is_empty() || self.emitted_calls;
                self.finish = Some(stop_reason(&reason, has_calls));
                self.flush_calls(out)?;
            }
        }
        if let Some(usage) = chunk.usage {
            out.push(TurnEvent::Usage(usage.usage()));
        }
        Ok(())
    }

    fn delta(&mut self, delta: Delta<'_>, out: &mut Vec<TurnEvent>) {
        let Delta {
            content,
            reasoning_content,
            reasoning,
            refusal,
            tool_calls,
        } = delta;
        let mut reasoning_content = text_of(reasoning_content);
        let mut reasoning = text_of(reasoning);
        let picked = self.reasoning_fields.iter().find_map(|f| match f {
            ReasoningField::ReasoningContent => reasoning_content.take(),
            ReasoningField::Reasoning => reasoning.take(),
        });
        if let Some(text) = picked {
            out.push(TurnEvent::ReasoningDelta { text });
        }
        for text in [text_of(content), text_of(refusal)].into_iter().flatten() {
            out.push(TurnEvent::TextDelta { text });
        }
        for fragment in tool_calls.unwrap_or_default() {
            self.fragment(fragment, out);
        }
    }

    /// Join one tool-call fragment to its call and stream it on as a
    /// [`TurnEvent::ToolCallDelta`] once the call's name is known.
    fn fragment(&mut self, fragment: CallDelta<'_>, out: &mut Vec<TurnEvent>) {
        let id = fragment.id.filter(|id| !id.is_empty());
        let slot = self.slot(fragment.index, id.as_deref());
        let call = &mut self.calls[slot];
        if call.id.is_none() {
            call.id = id.map(Cow::into_owned);
        }
        let Some(function) = fragment.function else {
            return;
        };
        if let Some(name) = function.name.filter(|n| !n.is_empty()) {
            // Servers that repeat the name on every fragment must not double it.
            if call.name.is_empty() {
                call.name = name.into_owned();
            }
        }
        let new_text = match function.arguments {
            Some(StrOrJson::Str(s)) => {
                call.arguments.push_str(&s);
                Some(s)
            }
            // (A JSON null reads as `None`.)
            None => None,
            // Arguments sent as an object are whole; a later one replaces it.
            Some(StrOrJson::Json(other)) => {
                let text = other.to_string();
                call.arguments_json = Some(*other);
                Some(Cow::Owned(text))
            }
        };
        if call.name.is_empty() {
            // Nothing to show before the name; what came so far goes out with it.
            return;
        }
        match &call.announced {
            Some((index, _)) => {
                if let Some(text) = new_text.filter(|t| !t.is_empty()) {
                    out.push(TurnEvent::ToolCallDelta {
                        index: *index,
                        id: None,
                        name: None,
                        arguments_fragment: text.into_owned(),
                    });
                }
            }
            None => {
                let index = self.announced;
                self.announced += 1;
                let id = self.ids.claim(call.id.clone());
                let arguments_fragment = match &call.arguments_json {
                    Some(value) if call.arguments.is_empty() => value.to_string(),
                    _ => call.arguments.clone(),
                };
                out.push(TurnEvent::ToolCallDelta {
                    index,
                    id: Some(id.clone()),
                    name: Some(call.name.clone()),
                    arguments_fragment,
                });
                call.announced = Some((index, id));
            }
        }
    }

    /// Which pending call a fragment belongs to: by index, else by id, else
    /// the last open call.
    fn slot(&mut self, index: Option<i64>, id: Option<&str>) -> usize {
        if let Some(index) = index {
            if let Some(pos) = self.calls.iter().rposition(|c| c.index == Some(index)) {
                // Some servers number every call 0; a new id means a new call.
                let new_call = matches!((id, self.calls[pos].id.as_deref()), (Some(new), Some(old)) if new != old);
                if !new_call {
                    return pos;
                }
            }
            return self.open(Some(index), id);
        }
        if let Some(id) = id {
            if let Some(pos) = self.calls.iter().rposition(|c| c.id.as_deref() == Some(id)) {
                return pos;
            }
            return self.open(None, Some(id));
        }
        match self.calls.len() {
            0 => self.open(None, None),
            n => n - 1,
        }
    }

    fn open(&mut self, index: Option<i64>, id: Option<&str>) -> usize {
        self.calls.push(PendingCall {
            index,
            id: id.map(str::to_string),
            ..Default::default()
        });
        self.calls.len() - 1
    }

    fn flush_calls(&mut self, out: &mut Vec<TurnEvent>) -> Result<(), ProviderError> {
        let cut_short = self.finish == Some(StopReason::MaxTokens);
        for call in std::mem::take(&mut self.calls) {
            if call.name.is_empty() {
                return Err(ProviderError::Protocol {
                    message: "the server sent a tool call without a tool name".into(),
                });
            }
            let arguments = match call.arguments_json {
                Some(value) => value,
                None => parse_arguments(&call.name, &call.arguments, cut_short)?,
            };
            let id = match call.announced {
                Some((_, id)) => id,
                None => self.ids.claim(call.id),
            };
            out.push(TurnEvent::ToolCall(ToolCall {
                id,
                name: call.name,
                arguments,
            }));
            self.emitted_calls = true;
        }
        Ok(())
    }

    fn end(&mut self, out: &mut Vec<TurnEvent>) -> Result<(), ProviderError> {
        self.flush_calls(out)?;
        let stop = self.finish.take().unwrap_or(if self.emitted_calls {
            StopReason::ToolCalls
        } else {
            StopReason::EndTurn
        });
        out.push(TurnEvent::End { stop });
        self.ended = true;
        Ok(())
    }
}

impl Decoder for OpenAiDecoder {
    fn decode(&mut self, frame: &Frame, out: &mut Vec<TurnEvent>) -> Result<(), ProviderError> {
        let data = frame.data.trim();
        if self.ended || data.is_empty() {
            return Ok(());
        }
        if data == "[DONE]" {
            return self.end(out);
        }
        let chunk: Chunk = serde_json::from_str(data).map_err(|e| frame_error(&e, data))?;
        self.chunk(chunk, out)
    }

    fn finish(&mut self, out: &mut Vec<TurnEvent>) -> Result<(), ProviderError> {
        if self.ended {
            return Ok(());
        }
        if self.finish.is_none() {
            return Err(ProviderError::transient(
                "the stream ended before the answer was complete (no finish_reason and no [DONE])",
            ));
        }
        self.end(out)
    }
}

/// A call's arguments from their JSON text; `cut_short` (the answer hit its
/// token limit) explains why they may be incomplete.
pub(crate) fn parse_arguments(
    tool: &str,
    raw: &str,
    cut_short: bool,
) -> Result<Value, ProviderError> {
    if raw.trim().is_empty() {
        return Ok(Value::Object(Default::default()));
    }
    match serde_json::from_str::<Value>(raw) {
        // Some servers encode the arguments object twice.
        Ok(Value::String(inner)) => match serde_json::from_str::<Value>(&inner) {
            Ok(v @ Value::Object(_)) => Ok(v),
            _ => Ok(Value::String(inner)),
        },
        Ok(v) => Ok(v),
        Err(e) => Err(ProviderError::Protocol {
            message: format!(
                "the arguments of the call to tool `{tool}` are not valid JSON ({e}){}: {}",
                if cut_short {
                    "; the answer hit its token limit while writing them"
                } else {
                    ""
                },
                quote(raw)
            ),
        }),
    }
}

/// The error for a frame that is not a JSON chunk. A frame cut off inside its
/// JSON means the stream was cut (worth a retry); anything else is garbage.
pub(crate) fn frame_error(e: &serde_json::Error, data: &str) -> ProviderError {
    if e.is_eof() {
        return ProviderError::transient(format!(
            "the stream was cut in the middle of an event: {}",
            quote(data)
        ));
    }
    ProviderError::Protocol {
        message: format!("malformed stream frame ({e}): {}", quote(data)),
    }
}

/// An error the server reported inside the stream (`{"error": ...}`).
pub(crate) fn stream_error(error: &Value) -> ProviderError {
    let message = error
        .get("message")
        .and_then(Value::as_str)
        .or_else(|| error.as_str())
        .map(str::to_string)
        .unwrap_or_else(|| error.to_string());
    if crate::overflow::is_context_overflow(crate::overflow::error_code(error), &message) {
        return ProviderError::ContextOverflow { message };
    }
    // Mid-stream failures are the server's (a crashed runner, its own "error
    // parsing tool call" when the model wrote a malformed call): try again.
    ProviderError::transient(format!(
        "the server reported an error mid-answer: {}",
        truncate(&message, 2_000)
    ))
}

fn stop_reason(reason: &str, has_calls: bool) -> StopReason {
    match reason {
        "length" => StopReason::MaxTokens,
        "tool_calls" | "function_call" => StopReason::ToolCalls,
        // Several servers say "stop" after tool calls.
        "stop" | "end_turn" | "eos" if has_calls => StopReason::ToolCalls,
        "stop" | "end_turn" | "eos" => StopReason::EndTurn,
        other => StopReason::Other(other.to_string()),
    }
}

/// The text in a delta field: a string, or the `text` of an array of parts;
/// `None` when empty or of another shape.
fn text_of(value: Option<StrOrJson<'_>>) -> Option<String> {
    let text = match value? {
        StrOrJson::Str(s) => s.into_owned(),
        StrOrJson::Json(value) => match *value {
            Value::Array(parts) => parts
                .iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect(),
            _ => return None,
        },
    };
    (!text.is_empty()).then_some(text)
}

fn clamp(n: Option<u64>) -> u32 {
    n.map_or(0, |n| u32::try_from(n).unwrap_or(u32::MAX))
}

/// One frame's JSON, borrowing its strings from the frame: a fragment costs
/// no allocation until its event is built.
#[derive(Deserialize)]
struct Chunk<'a> {
    #[serde(borrow, default)]
    choices: Option<Vec<Choice<'a>>>,
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(default)]
    error: Option<Box<Value>>,
}

// A choice is moved several times per frame while serde builds it: kept
// small (no inline `Value`), those moves stop being the main cost of a
// tool-call fragment (they were ~20% of it at 650 bytes).
const _: () = assert!(size_of::<Choice<'static>>() <= 160);

#[derive(Deserialize)]
struct Choice<'a> {
    #[serde(borrow, default)]
    delta: Option<Delta<'a>>,
    /// A whole (non-streamed) reply carries `message` instead of `delta`
    /// (boxed: it comes once, and keeps the per-fragment `Choice` small).
    #[serde(borrow, default)]
    message: Option<Box<Delta<'a>>>,
    #[serde(borrow, default, deserialize_with = "borrowed_str")]
    finish_reason: Option<Cow<'a, str>>,
}

/// Text fields are read as any JSON so that a server putting something else
/// there (an array of parts, a reasoning object) does not fail the answer.
#[derive(Deserialize)]
struct Delta<'a> {
    #[serde(borrow, default)]
    content: Option<StrOrJson<'a>>,
    #[serde(borrow, default)]
    reasoning_content: Option<StrOrJson<'a>>,
    #[serde(borrow, default)]
    reasoning: Option<StrOrJson<'a>>,
    #[serde(borrow, default)]
    refusal: Option<StrOrJson<'a>>,
    #[serde(borrow, default)]
    tool_calls: Option<Vec<CallDelta<'a>>>,
}

#[derive(Deserialize)]
struct CallDelta<'a> {
    #[serde(default)]
    index: Option<i64>,
    #[serde(borrow, default, deserialize_with = "borrowed_str")]
    id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    function: Option<FunctionDelta<'a>>,
}

#[derive(Deserialize)]
struct FunctionDelta<'a> {
    #[serde(borrow, default, deserialize_with = "borrowed_str")]
    name: Option<Cow<'a, str>>,
    /// A string fragment, or (some servers) the whole arguments object.
    #[serde(borrow, default)]
    arguments: Option<StrOrJson<'a>>,
}

/// `prompt_tokens` includes the cached ones and `completion_tokens` the
/// reasoning ones, as [`Usage`] counts them.
#[derive(Deserialize)]
struct WireUsage {
    #[serde(default)]
    prompt_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens: Option<u64>,
    #[serde(default)]
    prompt_tokens_details: Option<PromptDetails>,
    #[serde(default)]
    completion_tokens_details: Option<CompletionDetails>,
    /// DeepSeek's name for the cached part (its `prompt_tokens` is hits
    /// plus misses, so the same rule holds).
    #[serde(default)]
    prompt_cache_hit_tokens: Option<u64>,
}

#[derive(Deserialize)]
struct PromptDetails {
    #[serde(default)]
    cached_tokens: Option<u64>,
}

#[derive(Deserialize)]
struct CompletionDetails {
    #[serde(default)]
    reasoning_tokens: Option<u64>,
}

impl WireUsage {
    fn usage(&self) -> Usage {
        let cached = self
            .prompt_tokens_details
            .as_ref()
            .and_then(|d| d.cached_tokens)
            .or(self.prompt_cache_hit_tokens);
        let reasoning = self
            .completion_tokens_details
            .as_ref()
            .and_then(|d| d.reasoning_tokens);
        Usage::new(clamp(self.prompt_tokens), clamp(self.completion_tokens))
            .with_cached_prompt_tokens(cached.map(|n| clamp(Some(n))))
            .with_reasoning_tokens(reasoning.map(|n| clamp(Some(n))))
    }
}
