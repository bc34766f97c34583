//! Messages API events → [`TurnEvent`]s. A state machine fed one SSE frame at a
//! time; a whole non-streamed reply (`{"type": "message", ...}`) is decoded
//! from a single frame by the same code.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::{Value, json};

use super::PROVIDER;
use crate::text::quote;
use crate::wire::{Decoder, Frame};
use crate::{NativePart, ProviderError, StopReason, ToolCall, TurnEvent, Usage};

/// Decoder for one streamed (or whole) Messages API answer.
#[derive(Debug)]
pub struct AnthropicDecoder {
    model: String,
    /// Open content blocks, by the API's `index`.
    blocks: Vec<Option<Block>>,
    input_tokens: u64,
    /// Cache writes and reads, once reported (`input_tokens` leaves both out).
    cache_creation: Option<u64>,
    cache_read: Option<u64>,
    output_tokens: u64,
    /// Usage read but not yet reported.
    usage_pending: bool,
    stop: Option<StopReason>,
    /// Tool calls started in this answer (the next call's delta index).
    calls: u32,
    /// The synthetic answer tool of a typed answer, whose input is streamed
    /// as text (see [`super::answer`]).
    answer_tool: Option<String>,
    /// Whether the answer tool was called.
    answered: bool,
    started: bool,
    done: bool,
}

#[derive(Debug)]
enum Block {
    Text,
    Thinking {
        thinking: String,
        signature: String,
    },
    Redacted {
        value: Value,
    },
    ToolUse {
        /// The call's number in this answer, for its deltas.
        index: u32,
        id: String,
        name: String,
        json: String,
        input: Option<Value>,
    },
    /// The answer tool's `tool_use`: its input is the answer's text.
    Answer,
    /// A block type this adapter does not use (server tools, ...): skipped.
    Ignored,
}

impl AnthropicDecoder {
    /// A decoder for an answer from `model` (recorded on native parts).
    pub fn new(model: &str) -> Self {
        Self {
            model: model.to_string(),
            blocks: Vec::new(),
            input_tokens: 0,
            cache_creation: None,
            cache_read: None,
            output_tokens: 0,
            usage_pending: false,
            stop: None,
            calls: 0,
            answer_tool: None,
            answered: false,
            started: false,
            done: false,
        }
    }

    /// Read calls of the tool `name` as a typed answer: their input JSON
    /// comes out as text deltas (streamed fragments as they arrive), never
    /// as a tool call or a native part, and a turn whose only call it was
    /// ends as [`StopReason::EndTurn`].
    pub fn with_answer_tool(mut self, name: impl Into<String>) -> Self {
        self.answer_tool = Some(name.into());
        self
    }

    fn native(&self, value: Value) -> TurnEvent {
        TurnEvent::Native(NativePart {
            provider: PROVIDER.to_string(),
            model: self.model.clone(),
            value,
        })
    }

    fn usage(&mut self) -> TurnEvent {
        self.usage_pending = false;
        let written = self.cache_creation.unwrap_or(0);
        let read = self.cache_read.unwrap_or(0);
        let prompt = self
            .input_tokens
            .saturating_add(written)
            .saturating_add(read);
        // Thinking is billed inside `output_tokens` and not counted apart.
        TurnEvent::Usage(
            Usage::new(clamp(prompt), clamp(self.output_tokens))
                .with_cached_prompt_tokens(self.cache_read.map(clamp))
                .with_cache_write_tokens(self.cache_creation.map(clamp)),
        )
    }

    fn read_usage(&mut self, usage: &Value) {
        let read = |field: &str| usage.get(field).and_then(Value::as_u64);
        let (input, written, cached, output) = (
            read("input_tokens"),
            read("cache_creation_input_tokens"),
            read("cache_read_input_tokens"),
            read("output_tokens"),
        );
        self.input_tokens = input.unwrap_or(self.input_tokens);
        self.cache_creation = written.or(self.cache_creation);
        self.cache_read = cached.or(self.cache_read);
        self.output_tokens = output.unwrap_or(self.output_tokens);
        self.usage_pending |=
            input.is_some() || written.is_some() || cached.is_some() || output.is_some();
    }

    fn event(
        &mut self,
        kind: &str,
        v: &Value,
        out: &mut Vec<TurnEvent>,
    ) -> Result<(), ProviderError> {
        match kind {
            "message_start" => {
                self.started = true;
                if let Some(usage) = v.pointer("/message/usage") {
                    self.read_usage(usage);
                }
            }
            "content_block_start" => {
                let index = index_of(v, kind)?;
                let block = v
                    .get("content_block")
                    .ok_or_else(|| missing(kind, "content_block"))?;
                self.start_block(index, block, out)?;
            }
            "content_block_delta" => {
                let index = index_of(v, kind)?;
                let delta = v.get("delta").ok_or_else(|| missing(kind, "delta"))?;
                let delta = DeltaBody::deserialize(delta).map_err(|e| {
                    protocol(format!(
                        "a malformed delta ({e}): {}",
                        quote(&delta.to_string())
                    ))
                })?;
                self.delta(index, &delta, out)?;
            }
            "content_block_stop" => {
                let index = index_of(v, kind)?;
                self.stop_block(index, out)?;
            }
            "message_delta" => {
                if let Some(reason) = v.pointer("/delta/stop_reason").and_then(Value::as_str) {
                    self.stop = Some(stop_reason(reason));
                }
                if let Some(usage) = v.get("usage") {
                    self.read_usage(usage);
                    let usage = self.usage();
                    out.push(usage);
                }
            }
            "message_stop" => self.end(out),
            "message" => self.whole(v, out)?,
            "error" => return Err(stream_error(v)),
            // `ping` and events added to the API later.
            other => tracing::trace!(event = other, "anthropic: ignored event"),
        }
        Ok(())
    }

    fn start_block(
        &mut self,
        index: usize,
        block: &Value,
        out: &mut Vec<TurnEvent>,
    ) -> Result<(), ProviderError> {
        let str_field = |f: &str| {
            block
                .get(f)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        let state = match block.get("type").and_then(Value::as_str) {
            Some("text") => {
                let text = str_field("text");
                if !text.is_empty() {
                    out.push(TurnEvent::TextDelta { text });
                }
                Block::Text
            }
            Some("thinking") => {
                let thinking = str_field("thinking");
                if !thinking.is_empty() {
                    out.push(TurnEvent::ReasoningDelta {
                        text: thinking.clone(),
                    });
                }
                Block::Thinking {
                    thinking,
                    signature: str_field("signature"),
                }
            }
            Some("redacted_thinking") => Block::Redacted {
                value: block.clone(),
            },
            Some("tool_use")
                if self.answer_tool.as_deref() == block.get("name").and_then(Value::as_str) =>
            {
                self.answered = true;
                // A whole reply carries the input itself; a streamed one
                // starts with `input: {}` and sends it in deltas.
                if let Some(input) = block
                    .get("input")
                    .filter(|i| i.as_object().is_some_and(|o| !o.is_empty()))
                {
                    out.push(TurnEvent::TextDelta {
                        text: input.to_string(),
                    });
                }
                Block::Answer
            }
            Some("tool_use") => {
                let id = str_field("id");
                let name = str_field("name");
                if id.is_empty() || name.is_empty() {
                    return Err(protocol(format!(
                        "a tool_use block without id or name: {}",
                        quote(&block.to_string())
                    )));
                }
                // Streamed blocks start with `input: {}` and fill it by deltas;
                // a whole reply carries the input itself.
                let input = block
                    .get("input")
                    .filter(|i| i.as_object().is_some_and(|o| !o.is_empty()))
                    .cloned();
                let call = self.calls;
                self.calls += 1;
                out.push(TurnEvent::ToolCallDelta {
                    index: call,
                    id: Some(id.clone()),
                    name: Some(name.clone()),
                    arguments_fragment: input.as_ref().map(Value::to_string).unwrap_or_default(),
                });
                Block::ToolUse {
                    index: call,
                    id,
                    name,
                    json: String::new(),
                    input,
                }
            }
            other => {
                tracing::debug!(block = ?other, "anthropic: ignored content block");
                Block::Ignored
            }
        };
        if self.blocks.len() <= index {
            self.blocks.resize_with(index + 1, || None);
        }
        self.blocks[index] = Some(state);
        Ok(())
    }

    fn delta(
        &mut self,
        index: usize,
        delta: &DeltaBody<'_>,
        out: &mut Vec<TurnEvent>,
    ) -> Result<(), ProviderError> {
        let block = self
            .blocks
            .get_mut(index)
            .and_then(Option::as_mut)
            .ok_or_else(|| {
                protocol(format!(
                    "a delta for content block {index}, which was never started"
                ))
            })?;
        let text = |f: &Option<Cow<'_, str>>| f.as_deref().unwrap_or_default().to_string();
        match (delta.kind.as_ref(), block) {
            ("text_delta", Block::Text) => {
                let text = text(&delta.text);
                if !text.is_empty() {
                    out.push(TurnEvent::TextDelta { text });
                }
            }
            ("thinking_delta", Block::Thinking { thinking, .. }) => {
                let text = text(&delta.thinking);
                if !text.is_empty() {
                    thinking.push_str(&text);
                    out.push(TurnEvent::ReasoningDelta { text });
                }
            }
            ("signature_delta", Block::Thinking { signature, .. }) => {
                signature.push_str(delta.signature.as_deref().unwrap_or_default())
            }
            ("input_json_delta", Block::Answer) => {
                let text = text(&delta.partial_json);
                if !text.is_empty() {
                    out.push(TurnEvent::TextDelta { text });
                }
            }
            ("input_json_delta", Block::ToolUse { index, json, .. }) => {
                let fragment = delta.partial_json.as_deref().unwrap_or_default();
                if !fragment.is_empty() {
                    json.push_str(fragment);
                    out.push(TurnEvent::ToolCallDelta {
                        index: *index,
                        id: None,
                        name: None,
                        arguments_fragment: fragment.to_string(),
                    });
                }
            }
            (_, Block::Ignored) => {}
            (kind, _) => tracing::debug!(delta = kind, index, "anthropic: ignored delta"),
        }
        Ok(())
    }

    fn stop_block(&mut self, index: usize, out: &mut Vec<TurnEvent>) -> Result<(), ProviderError> {
        let block = self
            .blocks
            .get_mut(index)
            .and_then(Option::take)
            .ok_or_else(|| {
                protocol(format!(
                    "content block {index} stopped but was never started"
                ))
            })?;
        match block {
            Block::Thinking {
                thinking,
                signature,
            } => {
                out.push(self.native(
                    json!({"type": "thinking", "thinking": thinking, "signature": signature}),
                ));
            }
            Block::Redacted { value } => out.push(self.native(value)),
            Block::ToolUse {
                id,
                name,
                json,
                input,
                ..
            } => {
                let arguments = if json.trim().is_empty() {
                    input.unwrap_or_else(|| json!({}))
                } else {
                    serde_json::from_str(&json).map_err(|e| {
                        ProviderError::transient(format!(
                            "the model's arguments for tool `{name}` are not valid JSON ({e})"
                        ))
                    })?
                };
                out.push(TurnEvent::ToolCall(ToolCall {
                    id,
                    name,
                    arguments,
                }));
            }
            Block::Text | Block::Answer | Block::Ignored => {}
        }
        Ok(())
    }

    /// A whole (non-streamed) reply: every block started and stopped at once.
    fn whole(&mut self, v: &Value, out: &mut Vec<TurnEvent>) -> Result<(), ProviderError> {
        self.started = true;
        let content = v
            .get("content")
            .and_then(Value::as_array)
            .ok_or_else(|| missing("message", "content"))?;
        for (index, block) in content.iter().enumerate() {
            self.start_block(index, block, out)?;
            self.stop_block(index, out)?;
        }
        if let Some(reason) = v.get("stop_reason").and_then(Value::as_str) {
            self.stop = Some(stop_reason(reason));
        }
        if let Some(usage) = v.get("usage") {
            self.read_usage(usage);
        }
        self.end(out);
        Ok(())
    }

    fn end(&mut self, out: &mut Vec<TurnEvent>) {
        if self.done {
            return;
        }
        // A stream that never sent `message_delta` still reports its input.
        if self.usage_pending {
            let usage = self.usage();
            out.push(usage);
        }
        self.done = true;
        let stop = match self.stop.clone() {
            // The answer tool was the only call: the answer is given.
            Some(StopReason::ToolCalls) if self.answered && self.calls == 0 => StopReason::EndTurn,
            stop => stop.unwrap_or(StopReason::EndTurn),
        };
        out.push(TurnEvent::End { stop });
    }
}

impl Decoder for AnthropicDecoder {
    fn decode(&mut self, frame: &Frame, out: &mut Vec<TurnEvent>) -> Result<(), ProviderError> {
        if self.done {
            return Ok(());
        }
        // Most of a stream is deltas: read those straight into borrowed
        // fields, without building a JSON tree. Anything unusual takes the
        // general path below, which also words the errors.
        let maybe_delta = matches!(frame.event.as_deref(), Some("content_block_delta") | None);
        if let Some(event) = maybe_delta
            .then(|| serde_json::from_str::<DeltaEvent<'_>>(&frame.data).ok())
            .flatten()
            .filter(|e| e.kind == "content_block_delta")
        {
            return self.delta(event.index, &event.delta, out);
        }
        let v: Value = serde_json::from_str(&frame.data).map_err(|e| {
            let event = frame.event.as_deref().unwrap_or("(unnamed)");
            // JSON that stops short is a stream cut mid-event: worth a retry.
            if e.is_eof() {
                return ProviderError::transient(format!(
                    "the Anthropic stream was cut in the middle of event `{event}`: {}",
                    quote(&frame.data)
                ));
            }
            protocol(format!(
                "event `{event}` is not valid JSON ({e}): {}",
                quote(&frame.data)
            ))
        })?;
        let kind = v
            .get("type")
            .and_then(Value::as_str)
            .or(frame.event.as_deref())
            .ok_or_else(|| protocol(format!("an event without a type: {}", quote(&frame.data))))?
            .to_string();
        self.event(&kind, &v, out)
    }

    fn finish(&mut self, _out: &mut Vec<TurnEvent>) -> Result<(), ProviderError> {
        if self.done {
            return Ok(());
        }
        let what = if self.started {
            "before message_stop"
        } else {
            "before any message"
        };
        Err(ProviderError::transient(format!(
            "the Anthropic stream ended {what}"
        )))
    }
}

/// A `content_block_delta` event, borrowed from the frame where it can be.
#[derive(Deserialize)]
struct DeltaEvent<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    index: usize,
    #[serde(borrow)]
    delta: DeltaBody<'a>,
}

/// The `delta` of a `content_block_delta`; which field is set depends on its type.
#[derive(Deserialize)]
struct DeltaBody<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(borrow, default)]
    text: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    thinking: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    signature: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    partial_json: Option<Cow<'a, str>>,
}

fn stop_reason(reason: &str) -> StopReason {
    match reason {
        "end_turn" | "stop_sequence" => StopReason::EndTurn,
        "tool_use" => StopReason::ToolCalls,
        "max_tokens" | "model_context_window_exceeded" => StopReason::MaxTokens,
        other => StopReason::Other(other.to_string()),
    }
}

/// An `error` event inside a 200 stream (`overloaded_error`, ...).
fn stream_error(v: &Value) -> ProviderError {
    let kind = v
        .pointer("/error/type")
        .and_then(Value::as_str)
        .unwrap_or("unknown_error");
    let detail = v
        .pointer("/error/message")
        .and_then(Value::as_str)
        .unwrap_or("no message");
    let message = format!("Anthropic reported {kind}: {detail}");
    match kind {
        _ if crate::overflow::is_context_overflow(
            v.pointer("/error/type").and_then(Value::as_str),
            detail,
        ) =>
        {
            ProviderError::ContextOverflow { message }
        }
        "invalid_request_error" | "request_too_large" => ProviderError::BadRequest { message },
        "authentication_error" | "permission_error" => ProviderError::Auth { message },
        "not_found_error" => ProviderError::ModelNotFound { message },
        // overloaded_error, api_error, rate_limit_error, timeout_error, and
        // anything new: the server's trouble, worth a retry.
        _ => ProviderError::transient(message),
    }
}

fn index_of(v: &Value, kind: &str) -> Result<usize, ProviderError> {
    let index = v
        .get("index")
        .and_then(Value::as_u64)
        .ok_or_else(|| missing(kind, "index"))?;
    // A real answer has a handful of blocks; refuse absurd indexes rather than
    // allocate for them.
    usize::try_from(index)
        .ok()
        .filter(|&i| i < 10_000)
        .ok_or_else(|| protocol(format!("`{kind}` has an out-of-range index {index}")))
}

fn missing(kind: &str, field: &str) -> ProviderError {
    protocol(format!("`{kind}` event without `{field}`"))
}

fn protocol(message: String) -> ProviderError {
    ProviderError::Protocol {
        message: format!("Anthropic stream: {message}"),
    }
}

fn clamp(n: u64) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(frames: &[&str]) -> (Vec<TurnEvent>, Result<(), ProviderError>) {
        crate::wire::decode_frames(&mut AnthropicDecoder::new("m"), frames)
    }

    #[test]
    fn whole_reply_in_one_frame() {
        let reply = json!({
            "id": "msg_1", "type": "message", "role": "assistant", "model": "m",
            "content": [
                {"type": "thinking", "thinking": "think", "signature": "S"},
                {"type": "text", "text": "Hi"},
                {"type": "tool_use", "id": "toolu_1", "name": "t", "input": {"a": 1}},
            ],
            "stop_reason": "tool_use",
            "usage": {"input_tokens": 10, "cache_creation_input_tokens": 2, "cache_read_input_tokens": 5, "output_tokens": 3},
        });
        let (events, r) = run(&[&reply.to_string()]);
        r.unwrap();
        assert_eq!(
            events,
            vec![
                TurnEvent::ReasoningDelta {
                    text: "think".into()
                },
                TurnEvent::Native(NativePart {
                    provider: "anthropic".into(),
                    model: "m".into(),
                    value: json!({"type": "thinking", "thinking": "think", "signature": "S"})
                }),
                TurnEvent::TextDelta { text: "Hi".into() },
                TurnEvent::ToolCallDelta {
                    index: 0,
                    id: Some("toolu_1".into()),
                    name: Some("t".into()),
                    arguments_fragment: r#"{"a":1}"#.into(),
                },
                TurnEvent::ToolCall(ToolCall {
                    id: "toolu_1".into(),
                    name: "t".into(),
                    arguments: json!({"a": 1})
                }),
                // `input_tokens` leaves cache writes and reads out.
                TurnEvent::Usage(
                    Usage::new(17, 3)
                        .with_cached_prompt_tokens(5)
                        .with_cache_write_tokens(2)
                ),
                TurnEvent::End {
                    stop: StopReason::ToolCalls
                },
            ]
        );
    }

    #[test]
    fn input_usage_is_reported_without_message_delta() {
        let (events, r) = run(&[
            r#"{"type":"message_start","message":{"usage":{"input_tokens":9,"output_tokens":1}}}"#,
            r#"{"type":"message_stop"}"#,
        ]);
        r.unwrap();
        assert_eq!(
            events,
            vec![
                TurnEvent::Usage(Usage::new(9, 1)),
                TurnEvent::End {
                    stop: StopReason::EndTurn
                },
            ]
        );
    }

    /// The fast path for deltas must decode exactly as the general one.
    #[test]
    fn fast_and_general_paths_agree() {
        let frames = [
            r#"{"type":"message_start","message":{"usage":{"input_tokens":2}}}"#,
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}"#,
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"h\u00e9"}}"#,
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"S"}}"#,
            r#"{"type":"content_block_stop","index":0}"#,
            r#"{"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}"#,
            r#"{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Hi \"you\""}}"#,
            r#"{"type":"content_block_delta","index":1,"delta":{"type":"citations_delta","citation":{}}}"#,
            r#"{"type":"content_block_stop","index":1}"#,
            r#"{"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"t","name":"n","input":{}}}"#,
            r#"{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"a\":"}}"#,
            r#"{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"1}"}}"#,
            r#"{"type":"content_block_stop","index":2}"#,
            r#"{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":5}}"#,
            r#"{"type":"message_stop"}"#,
        ];
        let mut fast = AnthropicDecoder::new("m");
        let mut general = AnthropicDecoder::new("m");
        let (mut a, mut b) = (Vec::new(), Vec::new());
        for f in frames {
            let frame = Frame {
                event: Some("content_block_delta".into()),
                data: f.to_string(),
            };
            fast.decode(&frame, &mut a).unwrap();
            let v: Value = serde_json::from_str(f).unwrap();
            let kind = v["type"].as_str().unwrap().to_string();
            general.event(&kind, &v, &mut b).unwrap();
        }
        assert_eq!(a, b);
        // The tool's name when its block starts, then each argument fragment.
        assert_eq!(a.len(), 9, "{a:?}");
        let fragments: String = a
            .iter()
            .filter_map(|e| match e {
                TurnEvent::ToolCallDelta {
                    index: 0,
                    arguments_fragment,
                    ..
                } => Some(arguments_fragment.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(fragments, r#"{"a":1}"#);
    }

    #[test]
    fn cut_stream_is_transient() {
        let (_, r) = run(&[r#"{"type":"message_start","message":{"usage":{"input_tokens":1}}}"#]);
        assert!(r.unwrap_err().is_transient());
    }

    #[test]
    fn overloaded_error_event_is_transient() {
        let (_, r) = run(&[
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
        ]);
        let e = r.unwrap_err();
        assert!(e.is_transient(), "{e}");
        assert!(e.to_string().contains("Overloaded"));
        let (_, r) = run(&[
            r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210000 tokens > 200000 maximum"}}"#,
        ]);
        assert!(matches!(
            r.unwrap_err(),
            ProviderError::ContextOverflow { .. }
        ));
        let (_, r) = run(&[
            r#"{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}"#,
        ]);
        assert!(matches!(r.unwrap_err(), ProviderError::Auth { .. }));
    }

    #[test]
    fn garbage_frames_give_errors_not_panics() {
        let garbage = [
            "",
            "{",
            "null",
            "[]",
            "42",
            "\"x\"",
            "{}",
            r#"{"type":5}"#,
            r#"{"type":"content_block_start"}"#,
            r#"{"type":"content_block_start","index":-1,"content_block":{"type":"text"}}"#,
            r#"{"type":"content_block_start","index":99999999999,"content_block":{"type":"text"}}"#,
            r#"{"type":"content_block_start","index":0,"content_block":null}"#,
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"tool_use"}}"#,
            r#"{"type":"content_block_delta","index":3,"delta":{"type":"text_delta","text":"x"}}"#,
            r#"{"type":"content_block_delta","index":0}"#,
            r#"{"type":"content_block_stop","index":7}"#,
            r#"{"type":"message_delta","delta":null,"usage":{"output_tokens":"many"}}"#,
            r#"{"type":"message","content":"nope"}"#,
            r#"{"type":"error"}"#,
            "\u{0}\u{ffff}",
        ];
        for g in garbage {
            let _ = run(&[g]);
            let _ = run(&[
                r#"{"type":"message_start","message":{}}"#,
                g,
                r#"{"type":"message_stop"}"#,
            ]);
        }
        // A started text block followed by every garbage delta shape.
        for g in garbage {
            let start = r#"{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"a","name":"b","input":{}}}"#;
            let delta = format!(
                r#"{{"type":"content_block_delta","index":0,"delta":{{"type":"input_json_delta","partial_json":{}}}}}"#,
                serde_json::Value::String(g.to_string())
            );
            let (_, r) = run(&[
                start,
                &delta,
                r#"{"type":"content_block_stop","index":0}"#,
                r#"{"type":"message_stop"}"#,
            ]);
            if !g.trim().is_empty() && serde_json::from_str::<Value>(g).is_err() {
                assert!(r.is_err(), "bad arguments {g:?} must be an error");
            }
        }
    }
}
