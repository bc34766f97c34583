//! What the three stream-json parsers share: reading one output line, the
//! end of a turn, and sorting a CLI's error text into a [`ProviderError`].

use serde_json::Value;

use super::prompt::session_part;
use crate::text::{quote, truncate};
use crate::wire::Frame;
use crate::{ProviderError, StopReason, TurnEvent, Usage};

/// One output line as JSON. A line that is not JSON at all (a banner, a
/// notice) is skipped; one that starts as JSON and breaks is an error.
pub(crate) fn json_line(frame: &Frame) -> Result<Option<Value>, ProviderError> {
    let line = frame.data.trim();
    if !line.starts_with('{') {
        if !line.is_empty() {
            tracing::debug!(line = %quote(line), "skipped a non-JSON line of a CLI's output");
        }
        return Ok(None);
    }
    serde_json::from_str(line)
        .map(Some)
        .map_err(|e| ProviderError::Protocol {
            message: format!("malformed output line ({e}): {}", quote(line)),
        })
}

/// A number at `pointer` in `v`, 0 when absent.
pub(crate) fn count(v: &Value, pointer: &str) -> u64 {
    v.pointer(pointer).and_then(Value::as_u64).unwrap_or(0)
}

/// A number at `pointer` in `v`, clamped, or `None` when the line lacks it.
pub(crate) fn part_count(v: &Value, pointer: &str) -> Option<u32> {
    v.pointer(pointer).and_then(Value::as_u64).map(clamp)
}

/// Token totals, clamped (add a breakdown with [`Usage`]'s `with_*`).
pub(crate) fn usage(prompt: u64, completion: u64) -> Usage {
    Usage::new(clamp(prompt), clamp(completion))
}

fn clamp(n: u64) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// What every parser tracks: the session id it learnt, whether the turn
/// ended, and the text already shown (to separate messages).
#[derive(Debug, Default)]
pub(crate) struct TurnState {
    pub session: Option<String>,
    pub ended: bool,
    pub wrote_text: bool,
}

impl TurnState {
    /// Text of a new whole message: a blank line from the previous one.
    pub fn text(&mut self, text: &str, out: &mut Vec<TurnEvent>) {
        if text.is_empty() {
            return;
        }
        let text = if self.wrote_text {
            format!("\n\n{text}")
        } else {
            text.to_string()
        };
        self.wrote_text = true;
        out.push(TurnEvent::TextDelta { text });
    }

    /// The turn is over: its session (kept for the next turn) and `End`.
    pub fn end(&mut self, provider: &str, model: &str, out: &mut Vec<TurnEvent>) {
        if let Some(id) = &self.session {
            out.push(TurnEvent::Native(session_part(provider, model, id)));
        }
        out.push(TurnEvent::End {
            stop: StopReason::EndTurn,
        });
        self.ended = true;
    }

    /// The parser's `finish`: fine once ended, else the output stopped early.
    pub fn finish(&self, name: &str) -> Result<(), ProviderError> {
        if self.ended {
            return Ok(());
        }
        Err(ProviderError::transient(format!(
            "{name}'s output ended before its final result"
        )))
    }
}

/// A failure a CLI reported, sorted by what its text says.
pub(crate) fn cli_error(name: &str, message: &str) -> ProviderError {
    let lower = message.to_ascii_lowercase();
    let has = |words: &[&str]| words.iter().any(|w| lower.contains(w));
    let message = format!("{name}: {}", truncate(message.trim(), 2_000));
    // A CLI gives no error code: its text is all there is.
    if crate::overflow::is_context_overflow(None, &lower) {
        ProviderError::ContextOverflow { message }
    } else if has(&[
        "rate limit",
        "rate_limit",
        "overloaded",
        "429",
        "529",
        "503",
        "try again",
        "timed out",
    ]) {
        ProviderError::Transient {
            message,
            retry_after: None,
        }
    } else if has(&[
        "log in",
        "login",
        "/login",
        "api key",
        "unauthorized",
        "401",
        "not authenticated",
        "authentication",
    ]) {
        ProviderError::Auth {
            message: format!("{message} (log the CLI in on this machine)"),
        }
    } else {
        ProviderError::Other { message }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_by_their_text() {
        assert!(matches!(
            cli_error("Claude Code", "Invalid API key · Please run /login"),
            ProviderError::Auth { .. }
        ));
        assert!(cli_error("Codex CLI", "stream error: 429 Too Many Requests").is_transient());
        assert!(matches!(
            cli_error("Claude Code", "Prompt is too long"),
            ProviderError::ContextOverflow { .. }
        ));
        assert!(matches!(
            cli_error("Gemini CLI", "something odd"),
            ProviderError::Other { .. }
        ));
    }

    #[test]
    fn lines_that_are_not_json_are_skipped_broken_json_is_not() {
        let frame = |s: &str| Frame {
            event: None,
            data: s.into(),
        };
        assert_eq!(
            json_line(&frame("Loaded cached credentials.")).unwrap(),
            None
        );
        assert!(json_line(&frame("{\"type\": ")).is_err());
        assert!(json_line(&frame("{\"type\": \"x\"}")).unwrap().is_some());
    }
}
