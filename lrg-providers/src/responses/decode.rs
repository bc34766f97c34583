//! Responses API events → [`TurnEvent`]s: a state machine fed one SSE frame
//! at a time. A whole non-streamed reply (`{"object": "response", ...}`) is
//! decoded from a single frame by the same code.
//!
//! Text and reasoning-summary deltas pass straight through; a call's
//! argument deltas pass through as [`TurnEvent::ToolCallDelta`]s and are
//! joined, and the call is emitted whole when its item is done; reasoning items are kept whole (`encrypted_content`
//! included) as [`NativePart`]s, to go back with the next request.

use std::borrow::Cow;
use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;

use super::RESPONSE_ID;
use crate::openai::{frame_error, parse_arguments, stream_error};
use crate::text::{quote, truncate};
use crate::wire::{CallIds, Decoder, Frame, borrowed_str};
use crate::{Message, NativePart, ProviderError, StopReason, ToolCall, TurnEvent, Usage};

/// Decodes one Responses API answer.
#[derive(Debug)]
pub struct ResponsesDecoder {
    provider: &'static str,
    model: String,
    keep_response_id: bool,
    ids: CallIds,
    /// Function calls whose arguments are still arriving, by item id.
    calls: Vec<PendingCall>,
    /// The reasoning item and summary part the last reasoning delta was in.
    reasoning_at: Option<(String, u32)>,
    /// Reasoning items whose summary was streamed as deltas.
    summarized: Vec<String>,
    response_id: Option<String>,
    emitted_calls: bool,
    /// Calls of this answer whose first delta went out (the next one's index).
    announced: u32,
    ended: bool,
}

#[derive(Debug)]
struct PendingCall {
    item_id: String,
    call_id: String,
    name: String,
    arguments: String,
    /// The call's delta index and the id claimed for it when its item was added.
    announced: (u32, String),
}

/// A call's delta index and claimed id, once its first delta went out.
type Announced = Option<(u32, String)>;

impl ResponsesDecoder {
    /// A decoder for an answer from `provider`/`model` (recorded on native
    /// parts); ids it makes up for calls avoid those of `history`. With
    /// `keep_response_id`, the response's id is kept as a native part too,
    /// for `previous_response_id` on the next turn.
    pub fn new(
        provider: &'static str,
        model: &str,
        keep_response_id: bool,
        history: &[Message],
    ) -> Self {
        Self {
            provider,
            model: model.to_string(),
            keep_response_id,
            ids: CallIds::from_history(history),
            calls: Vec::new(),
            reasoning_at: None,
            summarized: Vec::new(),
            response_id: None,
            emitted_calls: false,
            announced: 0,
            ended: false,
        }
    }

    fn native(&self, value: Value) -> TurnEvent {
        TurnEvent::Native(NativePart {
            provider: self.provider.to_string(),
            model: self.model.clone(),
            value,
        })
    }

    fn event(&mut self, event: Event<'_>, out: &mut Vec<TurnEvent>) -> Result<(), ProviderError> {
        match event.kind.as_deref().unwrap_or("") {
            "response.output_text.delta" | "response.refusal.delta" => {
                if let Some(text) = event.delta.filter(|d| !d.is_empty()) {
                    out.push(TurnEvent::TextDelta {
                        text: text.into_owned(),
                    });
                }
            }
            "response.reasoning_summary_text.delta" | "response.reasoning_text.delta" => {
                self.reasoning_delta(&event, out);
            }
            "response.function_call_arguments.delta" => {
                if let (Some(item), Some(delta)) = (&event.item_id, event.delta)
                    && let Some(call) = self.calls.iter_mut().find(|c| c.item_id == *item)
                    && !delta.is_empty()
                {
                    call.arguments.push_str(&delta);
                    out.push(TurnEvent::ToolCallDelta {
                        index: call.announced.0,
                        id: None,
                        name: None,
                        arguments_fragment: delta.into_owned(),
                    });
                }
            }
            "response.function_call_arguments.done" => {
                if let (Some(item), Some(arguments)) = (&event.item_id, event.arguments)
                    && let Some(call) = self.calls.iter_mut().find(|c| c.item_id == *item)
                {
                    call.arguments = arguments;
                }
            }
            "response.output_item.added" => {
                if let Some(item) = &event.item
                    && item_type(item) == Some("function_call")
                {
                    let name = str_field(item, "name").to_string();
                    let arguments = str_field(item, "arguments").to_string();
                    let index = self.announced;
                    self.announced += 1;
                    let id = self.ids.claim(Some(str_field(item, "call_id").to_string()));
                    out.push(TurnEvent::ToolCallDelta {
                        index,
                        id: Some(id.clone()),
                        name: (!name.is_empty()).then(|| name.clone()),
                        arguments_fragment: arguments.clone(),
                    });
                    self.calls.push(PendingCall {
                        item_id: str_field(item, "id").to_string(),
                        call_id: str_field(item, "call_id").to_string(),
                        name,
                        arguments,
                        announced: (index, id),
                    });
                }
            }
            "response.output_item.done" => {
                if let Some(item) = event.item {
                    self.item_done(item, true, out)?;
                }
            }
            "response.created" | "response.in_progress" => {
                if let Some(id) = event.response.as_ref().and_then(|r| r.get("id")) {
                    self.response_id = id.as_str().map(str::to_string);
                }
            }
            "response.completed" | "response.incomplete" => {
                let response = event.response.unwrap_or(Value::Null);
                self.end(&response, out)?;
            }
            "response.failed" => {
                let error = event
                    .response
                    .as_ref()
                    .and_then(|r| r.get("error"))
                    .cloned()
                    .unwrap_or(Value::Null);
                return Err(response_error(&error));
            }
            "error" => {
                let error = match event.error {
                    Some(error) => error,
                    None => serde_json::json!({"code": event.code, "message": event.message}),
                };
                return Err(response_error(&error));
            }
            // Lifecycle events that add nothing (content_part.*, *.done, ...).
            _ => {}
        }
        Ok(())
    }

    fn reasoning_delta(&mut self, event: &Event<'_>, out: &mut Vec<TurnEvent>) {
        let Some(delta) = event.delta.as_deref().filter(|d| !d.is_empty()) else {
            return;
        };
        let item = event.item_id.as_deref().unwrap_or("");
        let index = event.summary_index.unwrap_or(0);
        let same = matches!(&self.reasoning_at, Some((i, n)) if i == item && *n == index);
        let mut text = String::new();
        if !same {
            // A new summary part reads as a new paragraph.
            if self.reasoning_at.is_some() {
                text.push_str("\n\n");
            }
            if !self.summarized.iter().any(|s| s == item) {
                self.summarized.push(item.to_string());
            }
            self.reasoning_at = Some((item.to_string(), index));
        }
        text.push_str(delta);
        out.push(TurnEvent::ReasoningDelta { text });
    }

    /// A finished output item. `streamed`: its text came as deltas already.
    fn item_done(
        &mut self,
        item: Value,
        streamed: bool,
        out: &mut Vec<TurnEvent>,
    ) -> Result<(), ProviderError> {
        match item_type(&item) {
            Some("reasoning") => {
                let id = str_field(&item, "id");
                if !self.summarized.iter().any(|s| s == id) {
                    // Not streamed (a whole reply, or a host that sends the
                    // summary only with the item): show it now.
                    let summary = summary_text(&item);
                    if !summary.is_empty() {
                        out.push(TurnEvent::ReasoningDelta { text: summary });
                    }
                }
                out.push(self.native(item));
            }
            Some("function_call") => {
                let item_id = str_field(&item, "id");
                let pending = self
                    .calls
                    .iter()
                    .position(|c| c.item_id == item_id)
                    .map(|at| self.calls.remove(at));
                let arguments = match (item.get("arguments").and_then(Value::as_str), &pending) {
                    (Some(a), _) => a.to_string(),
                    (None, Some(p)) => p.arguments.clone(),
                    (None, None) => String::new(),
                };
                let name = match str_field(&item, "name") {
                    "" => pending.as_ref().map(|p| p.name.clone()).unwrap_or_default(),
                    n => n.to_string(),
                };
                let (call_id, announced) = match pending {
                    Some(p) => (p.call_id, Some(p.announced)),
                    None => (String::new(), None),
                };
                let call_id = match str_field(&item, "call_id") {
                    "" => call_id,
                    c => c.to_string(),
                };
                self.emit_call(announced, call_id, name, &arguments, false, out)?;
            }
            Some("message") if !streamed => {
                let text = content_text(&item);
                if !text.is_empty() {
                    out.push(TurnEvent::TextDelta { text });
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// Emit a finished call; one never `announced` (a whole reply) gets its
    /// one delta first.
    fn emit_call(
        &mut self,
        announced: Announced,
        call_id: String,
        name: String,
        arguments: &str,
        cut_short: bool,
        out: &mut Vec<TurnEvent>,
    ) -> Result<(), ProviderError> {
        if name.is_empty() {
            return Err(ProviderError::Protocol {
                message: "the server sent a function call without a name".into(),
            });
        }
        let parsed = parse_arguments(&name, arguments, cut_short)?;
        let id = match announced {
            Some((_, id)) => id,
            None => {
                let id = self.ids.claim(Some(call_id));
                out.push(TurnEvent::ToolCallDelta {
                    index: self.announced,
                    id: Some(id.clone()),
                    name: Some(name.clone()),
                    arguments_fragment: arguments.to_string(),
                });
                self.announced += 1;
                id
            }
        };
        let arguments = parsed;
        out.push(TurnEvent::ToolCall(ToolCall {
            id,
            name,
            arguments,
        }));
        self.emitted_calls = true;
        Ok(())
    }

    /// `response.completed` / `response.incomplete`, or a whole reply.
    fn end(&mut self, response: &Value, out: &mut Vec<TurnEvent>) -> Result<(), ProviderError> {
        let incomplete = response
            .pointer("/incomplete_details/reason")
            .and_then(Value::as_str);
        let cut_short = incomplete == Some("max_output_tokens");
        // Calls whose item never said it was done.
        for call in std::mem::take(&mut self.calls) {
            self.emit_call(
                Some(call.announced),
                call.call_id,
                call.name,
                &call.arguments,
                cut_short,
                out,
            )?;
        }
        if let Some(usage) = response.get("usage").filter(|u| u.is_object()) {
            out.push(TurnEvent::Usage(read_usage(usage)));
        }
        if let Some(id) = response.get("id").and_then(Value::as_str) {
            self.response_id = Some(id.to_string());
        }
        if self.keep_response_id
            && let Some(id) = self.response_id.clone()
        {
            out.push(self.native(serde_json::json!({"type": RESPONSE_ID, "id": id})));
        }
        let stop = match incomplete {
            Some("max_output_tokens") => StopReason::MaxTokens,
            Some(other) => StopReason::Other(other.to_string()),
            None if self.emitted_calls => StopReason::ToolCalls,
            None => StopReason::EndTurn,
        };
        out.push(TurnEvent::End { stop });
        self.ended = true;
        Ok(())
    }

    /// A whole (non-streamed) reply in one frame.
    fn whole(&mut self, response: Value, out: &mut Vec<TurnEvent>) -> Result<(), ProviderError> {
        if let Some(error) = response.get("error").filter(|e| !e.is_null()) {
            return Err(response_error(error));
        }
        let items = response
            .get("output")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        for item in items {
            self.item_done(item, false, out)?;
        }
        self.end(&response, out)
    }
}

impl Decoder for ResponsesDecoder {
    fn decode(&mut self, frame: &Frame, out: &mut Vec<TurnEvent>) -> Result<(), ProviderError> {
        let data = frame.data.trim();
        if self.ended || data.is_empty() || data == "[DONE]" {
            return Ok(());
        }
        let event: Event<'_> = serde_json::from_str(data).map_err(|e| frame_error(&e, data))?;
        if event.kind.is_some() {
            return self.event(event, out);
        }
        let whole: Value = serde_json::from_str(data).map_err(|e| frame_error(&e, data))?;
        if whole.get("output").is_some() {
            return self.whole(whole, out);
        }
        if let Some(error) = whole.get("error") {
            return Err(response_error(error));
        }
        Err(ProviderError::Protocol {
            message: format!("a stream event without a type: {}", quote(data)),
        })
    }

    fn finish(&mut self, _out: &mut Vec<TurnEvent>) -> Result<(), ProviderError> {
        if self.ended {
            return Ok(());
        }
        Err(ProviderError::transient(
            "the stream ended before the answer was complete (no response.completed)",
        ))
    }
}

/// The error a failed response or an `error` event carries, classified by
/// its code: overflow and bad requests are fatal, rate limits and server
/// trouble are worth a retry (after the wait the message names, if any).
fn response_error(error: &Value) -> ProviderError {
    let code = error
        .get("code")
        .and_then(Value::as_str)
        .or_else(|| error.get("type").and_then(Value::as_str));
    let message = error
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or("no message")
        .to_string();
    let detail = || format!("{message} ({})", code.unwrap_or("no code"));
    if crate::overflow::is_context_overflow(code, &message) {
        return ProviderError::ContextOverflow { message };
    }
    match code {
        Some("rate_limit_exceeded" | "server_error" | "server_is_overloaded" | "slow_down") => {
            ProviderError::Transient {
                retry_after: wait_in_message(&message),
                message: format!(
                    "the server reported an error mid-answer: {}",
                    truncate(&detail(), 2_000)
                ),
            }
        }
        Some("insufficient_quota") => ProviderError::Other {
            message: format!("{message} (the account's quota is used up: check its billing)"),
        },
        Some("invalid_api_key") => ProviderError::Auth { message },
        Some("model_not_found") => ProviderError::ModelNotFound { message },
        Some(c) if c.starts_with("invalid_") => ProviderError::BadRequest { message: detail() },
        _ => stream_error(error),
    }
}

/// The wait in "Please try again in 1.5s" / "in 250ms", as rate-limit
/// messages put it.
fn wait_in_message(message: &str) -> Option<Duration> {
    let lower = message.to_ascii_lowercase();
    let rest = &lower[lower.find("try again in ")? + "try again in ".len()..];
    let digits = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(rest.len());
    let n: f64 = rest[..digits].parse().ok()?;
    let unit = rest[digits..].trim_start();
    let secs = if unit.starts_with("ms") {
        n / 1_000.0
    } else if unit.starts_with('s') {
        n
    } else if unit.starts_with('m') {
        n * 60.0
    } else {
        return None;
    };
    (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs.min(86_400.0)))
}

/// `input_tokens` includes the cached ones and `output_tokens` the reasoning
/// ones, as [`Usage`] counts them.
fn read_usage(usage: &Value) -> Usage {
    let n = |p: &str| usage.pointer(p).and_then(Value::as_u64).map(clamp);
    Usage::new(
        n("/input_tokens").unwrap_or(0),
        n("/output_tokens").unwrap_or(0),
    )
    .with_cached_prompt_tokens(n("/input_tokens_details/cached_tokens"))
    .with_reasoning_tokens(n("/output_tokens_details/reasoning_tokens"))
}

fn clamp(n: u64) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

fn item_type(item: &Value) -> Option<&str> {
    item.get("type").and_then(Value::as_str)
}

fn str_field<'a>(item: &'a Value, field: &str) -> &'a str {
    item.get(field).and_then(Value::as_str).unwrap_or("")
}

/// The summary of a reasoning item, its parts as paragraphs.
fn summary_text(item: &Value) -> String {
    texts(item.get("summary")).join("\n\n")
}

/// The `output_text` (and refusal) of a message item.
fn content_text(item: &Value) -> String {
    let parts = item.get("content").and_then(Value::as_array);
    parts
        .into_iter()
        .flatten()
        .filter_map(|p| {
            p.get("text")
                .or_else(|| p.get("refusal"))
                .and_then(Value::as_str)
        })
        .collect()
}

fn texts(parts: Option<&Value>) -> Vec<&str> {
    parts
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|p| p.get("text").and_then(Value::as_str))
        .filter(|t| !t.is_empty())
        .collect()
}

/// One stream event. Only the fields this decoder reads; the frequent
/// deltas borrow from the frame.
#[derive(Deserialize)]
struct Event<'a> {
    #[serde(rename = "type", borrow, default, deserialize_with = "borrowed_str")]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "borrowed_str")]
    delta: Option<Cow<'a, str>>,
    #[serde(borrow, default, deserialize_with = "borrowed_str")]
    item_id: Option<Cow<'a, str>>,
    #[serde(default)]
    summary_index: Option<u32>,
    #[serde(default)]
    arguments: Option<String>,
    #[serde(default)]
    item: Option<Value>,
    #[serde(default)]
    response: Option<Value>,
    #[serde(default)]
    code: Option<String>,
    #[serde(default)]
    message: Option<String>,
    #[serde(default)]
    error: Option<Value>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::decode_frames;

    fn decoder() -> ResponsesDecoder {
        ResponsesDecoder::new("openai-responses", "o4-mini", false, &[])
    }

    #[test]
    fn waits_named_in_messages() {
        assert_eq!(
            wait_in_message("Rate limit reached. Please try again in 1.5s. Visit ..."),
            Some(Duration::from_millis(1_500))
        );
        assert_eq!(
            wait_in_message("Please try again in 250ms."),
            Some(Duration::from_millis(250))
        );
        assert_eq!(wait_in_message("slow down"), None);
    }

    #[test]
    fn errors_by_code() {
        let e = |code: &str| {
            response_error(
                &serde_json::json!({"code": code, "message": "m. Please try again in 2s"}),
            )
        };
        assert!(matches!(
            e("context_length_exceeded"),
            ProviderError::ContextOverflow { .. }
        ));
        let limited = e("rate_limit_exceeded");
        assert_eq!(limited.retry_after(), Some(Duration::from_secs(2)));
        assert!(matches!(
            e("invalid_prompt"),
            ProviderError::BadRequest { .. }
        ));
        assert!(matches!(
            e("insufficient_quota"),
            ProviderError::Other { .. }
        ));
        assert!(e("whatever").is_transient());
    }

    #[test]
    fn whole_reply_in_one_frame() {
        let whole = serde_json::json!({"id": "resp_1", "object": "response", "status": "completed",
            "output": [
                {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "Think."}], "encrypted_content": "enc"},
                {"type": "message", "id": "msg_1", "role": "assistant", "content": [{"type": "output_text", "text": "Hi"}]}
            ],
            "usage": {"input_tokens": 5, "output_tokens": 7}});
        let (events, end) = decode_frames(&mut decoder(), &[&whole.to_string()]);
        end.unwrap();
        assert_eq!(
            events[0],
            TurnEvent::ReasoningDelta {
                text: "Think.".into()
            }
        );
        assert!(
            matches!(&events[1], TurnEvent::Native(n) if n.value["encrypted_content"] == "enc")
        );
        assert_eq!(events[2], TurnEvent::TextDelta { text: "Hi".into() });
        assert_eq!(
            events.last(),
            Some(&TurnEvent::End {
                stop: StopReason::EndTurn
            })
        );
    }

    #[test]
    fn a_cut_stream_and_a_typeless_frame_are_errors() {
        let (_, end) = decode_frames(
            &mut decoder(),
            &[r#"{"type":"response.output_text.delta","delta":"Hi"}"#],
        );
        assert!(end.unwrap_err().is_transient());
        let (_, end) = decode_frames(&mut decoder(), &[r#"{"hello": 1}"#]);
        assert!(matches!(end, Err(ProviderError::Protocol { .. })));
    }
}
