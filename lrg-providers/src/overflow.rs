//! The one place that decides whether a server's error means "the
//! conversation does not fit the model's context window".
//!
//! That error is fatal (retrying the same request fails the same way) but
//! curable (fit the history tighter, or compact), so it must never be taken
//! for a transient failure. The server's error *code* decides first; the
//! phrase list is read only when the server gave no code of its own, or only
//! a generic category such as `invalid_request_error`.

use serde_json::Value;

/// Codes that name a context overflow:
/// - OpenAI (Chat Completions and Responses): `error.code`
///   `context_length_exceeded`;
/// - llama.cpp's server: `error.type` `exceed_context_size_error`.
///
/// Anthropic and Gemini have no dedicated code: Anthropic answers
/// `invalid_request_error` with "prompt is too long: N tokens > M maximum",
/// Gemini `INVALID_ARGUMENT` with "The input token count (N) exceeds the
/// maximum number of tokens allowed (M)"; the phrases below catch those.
const OVERFLOW_CODES: &[&str] = &["context_length_exceeded", "exceed_context_size_error"];

/// Codes that only say "your request was wrong", not what was wrong: with
/// one of these the message decides.
const GENERIC_CODES: &[&str] = &[
    "invalid_request_error",
    "invalid_request",
    "invalid_argument",
    "bad_request",
    "badrequest",
    "badrequesterror",
    "failed_precondition",
];

/// What servers write when the prompt does not fit (lower case).
const OVERFLOW_PHRASES: &[&str] = &[
    "context_length_exceeded",
    "context length",
    "context window",
    "context size",
    "context limit",
    "maximum context",
    "prompt is too long",
    "input is too long",
    "exceeds the context",
    "input token count",
    "exceeds the maximum number of tokens",
    "too many tokens",
];

/// Whether an error with this `code` (the server's machine-readable code or
/// type, when it gave one) and `message` is a context overflow.
pub(crate) fn is_context_overflow(code: Option<&str>, message: &str) -> bool {
    if let Some(code) = code.map(|c| c.trim().to_ascii_lowercase())
        && !code.is_empty()
    {
        if OVERFLOW_CODES.contains(&code.as_str()) {
            return true;
        }
        if !GENERIC_CODES.contains(&code.as_str()) {
            // The server named another failure (`rate_limit_exceeded`,
            // `overloaded_error`, ...): its message may well mention tokens.
            return false;
        }
    }
    let lower = message.to_ascii_lowercase();
    OVERFLOW_PHRASES.iter().any(|p| lower.contains(p))
}

/// The machine-readable code of an error object (`{"code": ..}`,
/// `{"type": ..}` or Gemini's `{"status": ..}`), or of a whole error body
/// holding one under `error`. Numeric codes are HTTP statuses, not codes.
pub(crate) fn error_code(v: &Value) -> Option<&str> {
    let inner = match v.get("error") {
        Some(e @ Value::Object(_)) => e,
        _ => v,
    };
    ["code", "type", "status"]
        .iter()
        .find_map(|k| inner.get(*k).and_then(Value::as_str))
        .filter(|c| *c != "error")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_code_decides_first() {
        assert!(is_context_overflow(
            Some("context_length_exceeded"),
            "Your input exceeds the context window of this model."
        ));
        assert!(is_context_overflow(
            Some("context_length_exceeded"),
            "no words we know"
        ));
        // A rate limit on tokens per minute mentions tokens but is not an
        // overflow.
        assert!(!is_context_overflow(
            Some("rate_limit_exceeded"),
            "Rate limit reached: too many tokens per min"
        ));
        assert!(!is_context_overflow(
            Some("overloaded_error"),
            "the context window is fine"
        ));
    }

    #[test]
    fn phrases_only_without_a_specific_code() {
        // Anthropic: a generic type, the message says it.
        assert!(is_context_overflow(
            Some("invalid_request_error"),
            "prompt is too long: 210000 tokens > 200000 maximum"
        ));
        // Gemini.
        assert!(is_context_overflow(
            Some("INVALID_ARGUMENT"),
            "The input token count (1200293) exceeds the maximum number of tokens allowed (1048576)."
        ));
        // An OpenAI-compatible server with no code at all.
        assert!(is_context_overflow(
            None,
            "Input is too long for requested model"
        ));
        assert!(is_context_overflow(
            None,
            "This model's maximum context length is 4096 tokens"
        ));
        assert!(!is_context_overflow(
            Some("invalid_request_error"),
            "messages: roles must alternate"
        ));
        assert!(!is_context_overflow(None, "model crashed"));
    }

    #[test]
    fn codes_are_read_from_each_api_shape() {
        let openai = json!({"error": {"message": "m", "type": "invalid_request_error", "code": "context_length_exceeded"}});
        assert_eq!(error_code(&openai), Some("context_length_exceeded"));
        let openai_null =
            json!({"error": {"message": "m", "type": "invalid_request_error", "code": null}});
        assert_eq!(error_code(&openai_null), Some("invalid_request_error"));
        let anthropic =
            json!({"type": "error", "error": {"type": "invalid_request_error", "message": "m"}});
        assert_eq!(error_code(&anthropic), Some("invalid_request_error"));
        let gemini = json!({"error": {"code": 400, "message": "m", "status": "INVALID_ARGUMENT"}});
        assert_eq!(error_code(&gemini), Some("INVALID_ARGUMENT"));
        assert_eq!(error_code(&json!({"error": "plain"})), None);
    }
}
