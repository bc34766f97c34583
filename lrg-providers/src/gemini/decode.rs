//! `GenerateContentResponse` chunks → [`TurnEvent`]s. Fed one SSE frame at a
//! time; a whole `generateContent` answer is one frame.

use reqwest::header::HeaderMap;
use serde_json::{Value, json};

use super::PROVIDER;
use crate::transport::status_error;
use crate::wire::{Decoder, Frame};
use crate::{NativePart, ProviderError, StopReason, ToolCall, TurnEvent, Usage};

/// Longest piece of a bad frame quoted in an error.
const QUOTE: usize = 200;

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
        let signature = part.get("thoughtSignature").and_then(Value::as_str);
        let text = part.get("text").and_then(Value::as_str);
        if part.get("thought").and_then(Value::as_bool) == Some(true) {
            if let Some(t) = text.filter(|t| !t.is_empty()) {
                out.push(TurnEvent::ReasoningDelta {
                    text: t.to_string(),
                });
            }
            // Thoughts are not sent back, but a signed one must be: keep it whole.
            if signature.is_some() {
                out.push(self.native(json!({"part": part})));
            }
            return Ok(());
        }
        if let Some(call) = part.get("functionCall") {
            out.push(TurnEvent::ToolCall(self.call(call)?));
            if let Some(s) = signature {
                out.push(self.native(json!({"thoughtSignature": s, "on": "functionCall"})));
            }
            return Ok(());
        }
        match (text, signature) {
            (Some(t), sig) if !t.is_empty() => {
                out.push(TurnEvent::TextDelta {
                    text: t.to_string(),
                });
                if let Some(s) = sig {
                    out.push(self.native(json!({"thoughtSignature": s, "on": "text"})));
                }
            }
            // An empty-text (or otherwise bare) part carrying only a signature:
            // it goes back as it came.
            (_, Some(_)) => out.push(self.native(json!({"part": part}))),
            _ => {
                if text.is_none() {
                    tracing::debug!(part = %quote(&part.to_string()), "gemini: ignored part");
                }
            }
        }
        Ok(())
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

fn read_usage(meta: &Value) -> Usage {
    let n = |f: &str| meta.get(f).and_then(Value::as_u64).unwrap_or(0);
    let prompt = n("promptTokenCount") + n("toolUsePromptTokenCount");
    let completion = n("candidatesTokenCount") + n("thoughtsTokenCount");
    Usage {
        prompt_tokens: clamp(prompt),
        completion_tokens: clamp(completion),
    }
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

fn quote(data: &str) -> String {
    if data.len() <= QUOTE {
        return data.to_string();
    }
    let mut end = QUOTE;
    while !data.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &data[..end])
}

fn clamp(n: u64) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(frames: &[&str]) -> (Vec<TurnEvent>, Result<(), ProviderError>) {
        let mut d = GeminiDecoder::new("gemini-x");
        let mut out = Vec::new();
        for f in frames {
            if let Err(e) = d.decode(
                &Frame {
                    event: None,
                    data: (*f).to_string(),
                },
                &mut out,
            ) {
                return (out, Err(e));
            }
        }
        let r = d.finish(&mut out);
        (out, r)
    }

    #[test]
    fn whole_answer_in_one_frame_with_generated_ids() {
        let answer = json!({
            "candidates": [{"content": {"role": "model", "parts": [
                {"text": "plan", "thought": true},
                {"functionCall": {"name": "a", "args": {"x": 1}}, "thoughtSignature": "SIG"},
                {"functionCall": {"name": "b"}},
            ]}, "finishReason": "STOP"}],
            "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 4, "thoughtsTokenCount": 6},
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
                TurnEvent::ToolCall(ToolCall {
                    id: "call_resp42_1".into(),
                    name: "a".into(),
                    arguments: json!({"x": 1})
                }),
                native(json!({"thoughtSignature": "SIG", "on": "functionCall"})),
                TurnEvent::ToolCall(ToolCall {
                    id: "call_resp42_2".into(),
                    name: "b".into(),
                    arguments: json!({})
                }),
                TurnEvent::Usage(Usage {
                    prompt_tokens: 10,
                    completion_tokens: 10
                }),
                TurnEvent::End {
                    stop: StopReason::ToolCalls
                },
            ]
        );
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
