//! `GenerateContentResponse` chunks → [`TurnEvent`]s. Fed one SSE frame at a
//! time; a whole `generateContent` answer is one frame.

use std::borrow::Cow;

use reqwest::header::HeaderMap;
use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::{Value, json};

use super::PROVIDER;
use crate::model::whole_call_delta;
use crate::text::quote;
use crate::transport::status_error;
use crate::wire::{Decoder, Frame, borrowed_str};
use crate::{NativePart, ProviderError, StopReason, ToolCall, TurnEvent, Usage};

/// Decoder for one Gemini answer.
///
/// Gemini has no end-of-stream event: the chunk carrying a `finishReason` is
/// the last, so a body that ends without one was cut.
#[derive(Debug)]
pub struct GeminiDecoder {
    model: String,
    /// Prefix of generated call ids: the answer's `responseId` once seen, so
    /// ids are stable for an answer and unique across answers.
    id_prefix: Option<String>,
    generated: usize,
    saw_call: bool,
    /// Calls emitted in this answer (the next call's delta index).
    calls: u32,
    finish: Option<String>,
    usage: Option<Usage>,
    done: bool,
}

impl GeminiDecoder {
    /// A decoder for an answer from `model` (recorded on native parts).
    pub fn new(model: &str) -> Self {
        Self {
            model: model.to_string(),
            id_prefix: None,
            generated: 0,
            saw_call: false,
            calls: 0,
            finish: None,
            usage: None,
            done: false,
        }
    }

    fn native(&self, value: Value) -> TurnEvent {
        TurnEvent::Native(NativePart {
            provider: PROVIDER.to_string(),
            model: self.model.clone(),
            value,
        })
    }

    fn chunk(&mut self, v: &Value, out: &mut Vec<TurnEvent>) -> Result<(), ProviderError> {
        if let Some(error) = v.get("error") {
            return Err(stream_error(error, v));
        }
        if !v.is_object() {
            return Err(protocol(format!(
                "a chunk that is not an object: {}",
                quote(&v.to_string())
            )));
        }
        if self.id_prefix.is_none() {
            self.id_prefix = v
                .get("responseId")
                .and_then(Value::as_str)
                .map(id_safe)
                .filter(|p| !p.is_empty());
        }
        if let Some(meta) = v.get("usageMetadata") {
            self.usage = Some(read_usage(meta));
        }
        let candidate = v
            .get("candidates")
            .and_then(Value::as_array)
            .and_then(|c| c.first());
        let Some(candidate) = candidate else {
            if let Some(reason) = v
                .pointer("/promptFeedback/blockReason")
                .and_then(Value::as_str)
            {
                return Err(ProviderError::BadRequest {
                    message: format!("Gemini blocked the prompt ({reason})"),
                });
            }
            // Usage-only chunks exist.
            return Ok(());
        };
        let parts = candidate
            .pointer("/content/parts")
            .and_then(Value::as_array);
        for part in parts.into_iter().flatten() {
            self.part(part, out)?;
        }
        if let Some(reason) = candidate.get("finishReason").and_then(Value::as_str) {
            self.finish = Some(reason.to_string());
        }
        Ok(())
    }

    fn part(&mut self, part: &Value, out: &mut Vec<TurnEvent>) -> Result<(), ProviderError> {
        let fields = PartFields {
            thought: part.get("thought").and_then(Value::as_bool) == Some(true),
            text: part.get("text").and_then(Value::as_str),
            signature: part.get("thoughtSignature").and_then(Value::as_str),
            call: part.get("functionCall"),
        };
        if fields.is_unknown() {
            tracing::debug!(part = %quote(&part.to_string()), "gemini: ignored part");
        }
        self.apply_part(&fields, Some(part), out)
    }

    /// One part, whichever path read it. `raw` is the part as it came, needed
    /// only when [`PartFields::needs_raw`]; the fast path never passes such a part.
    fn apply_part(
        &mut self,
        part: &PartFields<'_>,
        raw: Option<&Value>,
        out: &mut Vec<TurnEvent>,
    ) -> Result<(), ProviderError> {
        let text = part.text.filter(|t| !t.is_empty());
        if part.needs_raw() {
            // A signed thought or a bare signed part goes back as it came.
            if let Some(t) = text.filter(|_| part.thought) {
                out.push(TurnEvent::ReasoningDelta {
                    text: t.to_string(),
                });
            }
            let raw = raw.cloned().unwrap_or_else(|| {
                json!({"text": part.text.unwrap_or_default(), "thought": part.thought, "thoughtSignature": part.signature})
            });
            out.push(self.native(json!({"part": raw})));
            return Ok(());
        }
        if part.thought {
            if let Some(t) = text {
                out.push(TurnEvent::ReasoningDelta {
                    text: t.to_string(),
                });
            }
        } else if let Some(call) = part.call {
            // Gemini sends each call whole: its one delta, then the call.
            let call = self.call(call)?;
            out.push(whole_call_delta(self.calls, &call));
            self.calls += 1;
            out.push(TurnEvent::ToolCall(call));
            if let Some(s) = part.signature {
                out.push(self.native(json!({"thoughtSignature": s, "on": "functionCall"})));
            }
        } else if let Some(t) = text {
            out.push(TurnEvent::TextDelta {
                text: t.to_string(),
            });
            if let Some(s) = part.signature {
                out.push(self.native(json!({"thoughtSignature": s, "on": "text"})));
            }
        }
        Ok(())
    }

    /// The common chunk (text, thoughts, calls, usage) read straight into
    /// borrowed fields. `None`: not such a chunk; the general path takes it.
    fn fast_chunk(
        &mut self,
        data: &str,
        out: &mut Vec<TurnEvent>,
    ) -> Option<Result<(), ProviderError>> {
        let chunk: FastChunk<'_> = serde_json::from_str(data).ok()?;
        if chunk.error.is_some() || chunk.prompt_feedback.is_some() || chunk.candidates.is_empty() {
            return None;
        }
        let parts = chunk
            .candidates
            .first()
            .and_then(|c| c.content.as_ref())
            .map(|c| c.parts.as_slice())
            .unwrap_or_default();
        // Read twice rather than collected: no allocation per chunk.
        let fields = || parts.iter().map(FastPart::fields);
        if fields().any(|f| f.needs_raw() || f.is_unknown()) {
            return None;
        }
        if self.id_prefix.is_none() {
            self.id_prefix = chunk
                .response_id
                .as_deref()
                .map(id_safe)
                .filter(|p| !p.is_empty());
        }
        if let Some(meta) = &chunk.usage_metadata {
            self.usage = Some(meta.usage());
        }
        for part in fields() {
            if let Err(e) = self.apply_part(&part, None, out) {
                return Some(Err(e));
            }
        }
        if let Some(reason) = chunk
            .candidates
            .first()
            .and_then(|c| c.finish_reason.as_deref())
        {
            self.finish = Some(reason.to_string());
        }
        Some(Ok(()))
    }

    fn call(&mut self, call: &Value) -> Result<ToolCall, ProviderError> {
        let name = call
            .get("name")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
            .ok_or_else(|| {
                protocol(format!(
                    "a functionCall without a name: {}",
                    quote(&call.to_string())
                ))
            })?;
        let arguments = match call.get("args") {
            None | Some(Value::Null) => json!({}),
            Some(args) => args.clone(),
        };
        let id = match call
            .get("id")
            .and_then(Value::as_str)
            .filter(|i| !i.is_empty())
        {
            Some(id) => id.to_string(),
            None => {
                self.generated += 1;
                let prefix = self.id_prefix.get_or_insert_with(random_prefix);
                format!("call_{prefix}_{}", self.generated)
            }
        };
        self.saw_call = true;
        Ok(ToolCall {
            id,
            name: name.to_string(),
            arguments,
        })
    }
}

impl Decoder for GeminiDecoder {
    fn decode(&mut self, frame: &Frame, out: &mut Vec<TurnEvent>) -> Result<(), ProviderError> {
        if self.done {
            return Ok(());
        }
        if let Some(result) = self.fast_chunk(&frame.data, out) {
            return result;
        }
        let v: Value = serde_json::from_str(&frame.data).map_err(|e| {
            if e.is_eof() {
                return ProviderError::transient(format!(
                    "the Gemini stream was cut in the middle of a chunk: {}",
                    quote(&frame.data)
                ));
            }
            protocol(format!(
                "a chunk that is not valid JSON ({e}): {}",
                quote(&frame.data)
            ))
        })?;
        // `streamGenerateContent` without `alt=sse` answers one JSON array.
        match &v {
            Value::Array(chunks) => chunks.iter().try_for_each(|c| self.chunk(c, out)),
            _ => self.chunk(&v, out),
        }
    }

    fn finish(&mut self, out: &mut Vec<TurnEvent>) -> Result<(), ProviderError> {
        if self.done {
            return Ok(());
        }
        self.done = true;
        let Some(reason) = self.finish.as_deref() else {
            return Err(ProviderError::transient(
                "the Gemini stream ended before its finishReason",
            ));
        };
        let stop = match reason {
            "STOP" if self.saw_call => StopReason::ToolCalls,
            "STOP" => StopReason::EndTurn,
            "MAX_TOKENS" => StopReason::MaxTokens,
            // The model wrote a call Gemini could not parse: a retry may not.
            "MALFORMED_FUNCTION_CALL" => {
                return Err(ProviderError::transient(
                    "Gemini could not parse the model's function call",
                ));
            }
            other => StopReason::Other(other.to_ascii_lowercase()),
        };
        if let Some(usage) = self.usage {
            out.push(TurnEvent::Usage(usage));
        }
        out.push(TurnEvent::End { stop });
        Ok(())
    }
}

/// What decides how a part is decoded.
struct PartFields<'a> {
    thought: bool,
    text: Option<&'a str>,
    signature: Option<&'a str>,
    call: Option<&'a Value>,
}

impl PartFields<'_> {
    /// A signature on a thought, or on a part with neither text nor a call:
    /// the whole part must be kept to go back as it came.
    fn needs_raw(&self) -> bool {
        self.signature.is_some()
            && (self.thought || (self.call.is_none() && self.text.is_none_or(str::is_empty)))
    }

    /// Neither text nor a call (inline data, code execution, ...): skipped.
    fn is_unknown(&self) -> bool {
        self.text.is_none() && self.call.is_none() && self.signature.is_none()
    }
}

/// A streamed chunk, borrowed from the frame where it can be.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct FastChunk<'a> {
    #[serde(borrow, default)]
    candidates: Vec<FastCandidate<'a>>,
    #[serde(default)]
    usage_metadata: Option<FastUsage>,
    #[serde(borrow, default, deserialize_with = "borrowed_str")]
    response_id: Option<Cow<'a, str>>,
    #[serde(default)]
    error: Option<IgnoredAny>,
    #[serde(default)]
    prompt_feedback: Option<IgnoredAny>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct FastCandidate<'a> {
    #[serde(borrow, default)]
    content: Option<FastContent<'a>>,
    #[serde(borrow, default, deserialize_with = "borrowed_str")]
    finish_reason: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct FastContent<'a> {
    #[serde(borrow, default)]
    parts: Vec<FastPart<'a>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct FastPart<'a> {
    #[serde(borrow, default, deserialize_with = "borrowed_str")]
    text: Option<Cow<'a, str>>,
    #[serde(default)]
    thought: Option<bool>,
    #[serde(borrow, default, deserialize_with = "borrowed_str")]
    thought_signature: Option<Cow<'a, str>>,
    #[serde(default)]
    function_call: Option<Value>,
}

impl FastPart<'_> {
    fn fields(&self) -> PartFields<'_> {
        PartFields {
            thought: self.thought == Some(true),
            text: self.text.as_deref(),
            signature: self.thought_signature.as_deref(),
            call: self.function_call.as_ref(),
        }
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct FastUsage {
    #[serde(default)]
    prompt_token_count: u64,
    #[serde(default)]
    tool_use_prompt_token_count: u64,
    #[serde(default)]
    candidates_token_count: u64,
    #[serde(default)]
    thoughts_token_count: Option<u64>,
    #[serde(default)]
    cached_content_token_count: Option<u64>,
}

impl FastUsage {
    fn usage(&self) -> Usage {
        gemini_usage(
            self.prompt_token_count + self.tool_use_prompt_token_count,
            self.candidates_token_count,
            self.thoughts_token_count,
            self.cached_content_token_count,
        )
    }
}

fn read_usage(meta: &Value) -> Usage {
    let n = |f: &str| meta.get(f).and_then(Value::as_u64);
    let prompt = n("promptTokenCount").unwrap_or(0) + n("toolUsePromptTokenCount").unwrap_or(0);
    gemini_usage(
        prompt,
        n("candidatesTokenCount").unwrap_or(0),
        n("thoughtsTokenCount"),
        n("cachedContentTokenCount"),
    )
}

/// Gemini's `candidatesTokenCount` leaves thoughts out: they are added back,
/// so the completion counts every token written. Its `promptTokenCount`
/// already includes the cached part.
fn gemini_usage(prompt: u64, candidates: u64, thoughts: Option<u64>, cached: Option<u64>) -> Usage {
    let completion = candidates.saturating_add(thoughts.unwrap_or(0));
    Usage::new(clamp(prompt), clamp(completion))
        .with_cached_prompt_tokens(cached.map(clamp))
        .with_reasoning_tokens(thoughts.map(clamp))
}

/// An error payload inside a 200 stream, classified like the same HTTP status.
fn stream_error(error: &Value, whole: &Value) -> ProviderError {
    let code = error
        .get("code")
        .and_then(Value::as_u64)
        .and_then(|c| u16::try_from(c).ok());
    match code {
        Some(code) if (400..600).contains(&code) => {
            status_error(code, &HeaderMap::new(), &whole.to_string(), None)
        }
        _ => {
            let message = error
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("no message");
            ProviderError::transient(format!("Gemini reported an error mid-answer: {message}"))
        }
    }
}

fn id_safe(raw: &str) -> String {
    raw.chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
        .take(32)
        .collect()
}

fn random_prefix() -> String {
    format!("{:08x}", rand::random::<u32>())
}

fn protocol(message: String) -> ProviderError {
    ProviderError::Protocol {
        message: format!("Gemini stream: {message}"),
    }
}

fn clamp(n: u64) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(frames: &[&str]) -> (Vec<TurnEvent>, Result<(), ProviderError>) {
        crate::wire::decode_frames(&mut GeminiDecoder::new("gemini-x"), frames)
    }

    #[test]
    fn whole_answer_in_one_frame_with_generated_ids() {
        let answer = json!({
            "candidates": [{"content": {"role": "model", "parts": [
                {"text": "plan", "thought": true},
                {"functionCall": {"name": "a", "args": {"x": 1}}, "thoughtSignature": "SIG"},
                {"functionCall": {"name": "b"}},
            ]}, "finishReason": "STOP"}],
            "usageMetadata": {"promptTokenCount": 10, "cachedContentTokenCount": 7, "candidatesTokenCount": 4, "thoughtsTokenCount": 6},
            "responseId": "resp/42",
        });
        let (events, r) = run(&[&answer.to_string()]);
        r.unwrap();
        let native = |value| {
            TurnEvent::Native(NativePart {
                provider: "gemini".into(),
                model: "gemini-x".into(),
                value,
            })
        };
        assert_eq!(
            events,
            vec![
                TurnEvent::ReasoningDelta {
                    text: "plan".into()
                },
                TurnEvent::ToolCallDelta {
                    index: 0,
                    id: Some("call_resp42_1".into()),
                    name: Some("a".into()),
                    arguments_fragment: r#"{"x":1}"#.into(),
                },
                TurnEvent::ToolCall(ToolCall {
                    id: "call_resp42_1".into(),
                    name: "a".into(),
                    arguments: json!({"x": 1})
                }),
                native(json!({"thoughtSignature": "SIG", "on": "functionCall"})),
                TurnEvent::ToolCallDelta {
                    index: 1,
                    id: Some("call_resp42_2".into()),
                    name: Some("b".into()),
                    arguments_fragment: "{}".into(),
                },
                TurnEvent::ToolCall(ToolCall {
                    id: "call_resp42_2".into(),
                    name: "b".into(),
                    arguments: json!({})
                }),
                // Thoughts are added to the candidates; the cached part
                // is already in the prompt count.
                TurnEvent::Usage(
                    Usage::new(10, 10)
                        .with_cached_prompt_tokens(7)
                        .with_reasoning_tokens(6)
                ),
                TurnEvent::End {
                    stop: StopReason::ToolCalls
                },
            ]
        );
    }

    /// The fast path must decode exactly as the general one.
    #[test]
    fn fast_and_general_paths_agree() {
        let frames = [
            r#"{"candidates":[{"content":{"role":"model","parts":[{"text":"a"},{"text":"b","thoughtSignature":"S"}]}}],"responseId":"r1","usageMetadata":{"promptTokenCount":3}}"#,
            r#"{"candidates":[{"content":{"parts":[{"text":"t","thought":true}]}}]}"#,
            r#"{"candidates":[{"content":{"parts":[{"functionCall":{"name":"f","args":{"x":[1]}},"thoughtSignature":"C"},{"functionCall":{"id":"i","name":"g"}}]}}]}"#,
            r#"{"candidates":[{"content":{"parts":[{"text":"","thoughtSignature":"E"}]},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":3,"cachedContentTokenCount":2,"candidatesTokenCount":4,"thoughtsTokenCount":2}}"#,
            r#"{"candidates":[{"content":{"parts":[{"text":"x","thought":true,"thoughtSignature":"T"}]}}]}"#,
            r#"{"candidates":[{"content":{"parts":[{"inlineData":{"mimeType":"image/png","data":"AA=="}}]}}]}"#,
            r#"{"candidates":[{"content":{}, "finishReason":"SAFETY"}]}"#,
        ];
        let mut fast = GeminiDecoder::new("m");
        let mut general = GeminiDecoder::new("m");
        let (mut a, mut b) = (Vec::new(), Vec::new());
        for f in frames {
            fast.decode(
                &Frame {
                    event: None,
                    data: f.to_string(),
                },
                &mut a,
            )
            .unwrap();
            general
                .chunk(&serde_json::from_str(f).unwrap(), &mut b)
                .unwrap();
        }
        fast.finish(&mut a).unwrap();
        general.finish(&mut b).unwrap();
        assert_eq!(a, b);
        assert!(a.len() > 8, "{a:?}");
    }

    #[test]
    fn error_payload_is_classified_by_its_code() {
        let (_, r) = run(&[
            r#"{"error":{"code":503,"message":"The model is overloaded.","status":"UNAVAILABLE"}}"#,
        ]);
        assert!(r.unwrap_err().is_transient());
        let (_, r) = run(&[
            r#"{"error":{"code":400,"message":"Invalid JSON payload","status":"INVALID_ARGUMENT"}}"#,
        ]);
        assert!(matches!(r.unwrap_err(), ProviderError::BadRequest { .. }));
        let (_, r) = run(&[
            r#"{"promptFeedback":{"blockReason":"SAFETY"},"usageMetadata":{"promptTokenCount":5}}"#,
        ]);
        let e = r.unwrap_err();
        assert!(
            matches!(e, ProviderError::BadRequest { .. }) && e.to_string().contains("SAFETY"),
            "{e}"
        );
    }

    #[test]
    fn unknown_finish_reasons_are_tolerated() {
        let (events, r) = run(&[
            r#"{"candidates":[{"content":{"parts":[{"text":"x"}]},"finishReason":"SOMETHING_NEW"}]}"#,
        ]);
        r.unwrap();
        assert_eq!(
            events.last(),
            Some(&TurnEvent::End {
                stop: StopReason::Other("something_new".into())
            })
        );
        let (_, r) = run(&[
            r#"{"candidates":[{"content":{"parts":[]},"finishReason":"MALFORMED_FUNCTION_CALL"}]}"#,
        ]);
        assert!(r.unwrap_err().is_transient());
    }

    #[test]
    fn garbage_frames_give_errors_not_panics() {
        let garbage = [
            "",
            "{",
            "null",
            "[]",
            "[1,2]",
            "42",
            "\"x\"",
            "{}",
            r#"{"error":null}"#,
            r#"{"error":{"code":99999}}"#,
            r#"{"candidates":5}"#,
            r#"{"candidates":[null]}"#,
            r#"{"candidates":[{"content":{"parts":[null,5,"x"]}}]}"#,
            r#"{"candidates":[{"content":{"parts":[{"functionCall":null}]}}]}"#,
            r#"{"candidates":[{"content":{"parts":[{"functionCall":{"name":5}}]}}]}"#,
            r#"{"candidates":[{"content":{"parts":[{"text":5,"thought":"yes","thoughtSignature":7}]}}]}"#,
            r#"{"candidates":[{"finishReason":7}],"usageMetadata":{"promptTokenCount":-1}}"#,
            r#"{"promptFeedback":{"blockReason":"SAFETY"}}"#,
            "\u{0}\u{ffff}",
        ];
        for g in garbage {
            let _ = run(&[g]);
            let _ = run(&[
                g,
                r#"{"candidates":[{"content":{"parts":[{"text":"ok"}]},"finishReason":"STOP"}]}"#,
            ]);
        }
        let (_, r) = run(&["{"]);
        assert!(
            r.unwrap_err().is_transient(),
            "a chunk cut short is a cut stream"
        );
        let (_, r) = run(&["{nope}"]);
        assert!(matches!(r.unwrap_err(), ProviderError::Protocol { .. }));
        let (_, r) = run(&[r#"{"candidates":[{"content":{"parts":[{"text":"half"}]}}]}"#]);
        assert!(r.unwrap_err().is_transient(), "no finishReason: cut");
    }
}
