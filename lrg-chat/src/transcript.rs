//! A conversation as a client renders it: user messages, answers, and each
//! tool call as one row with its outcome — bounded, so a long chat never
//! makes a huge response.
//!
//! [`Transcript::of`] keeps the newest rows: at most [`MAX_ROWS`] within
//! [`MAX_BYTES`] (as JSON), each row's text clipped to [`ROW_BYTES`];
//! `truncated` says older rows were left out. Images are described, not
//! carried (a tool's images are served by the HTTP API at
//! `…/images/{call_id}/{index}`); provider-native parts are left out.
//!
//! It is the one rendering of a conversation for readers: `lrg sessions
//! show`, [`crate::registry::SessionRegistry::transcript`] and the HTTP
//! API's `GET …/transcript` all serve it.

use std::collections::HashMap;

use lrg_providers::{Image, Message, Part, Role, ToolResult};
use serde::{Deserialize, Serialize};

use crate::events::ImageDescriptor;

/// The most rows a transcript holds.
pub const MAX_ROWS: usize = 128;
/// The most bytes (as JSON) a transcript's rows take together.
pub const MAX_BYTES: usize = 192 * 1024;
/// The most bytes of text one row keeps; longer text is clipped with `…`.
pub const ROW_BYTES: usize = 8 * 1024;

/// How a tool call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ToolOutcome {
    /// It ran and succeeded.
    Ok,
    /// It ran and failed, or the session ended while it ran.
    Failed,
    /// The person (or a rule, or a hook) did not allow it.
    Denied,
    /// It was not run: a repeat of a call already made, or no such tool.
    Skipped,
    /// The person stopped before it ran.
    Stopped,
    /// No result yet: it is running now.
    Running,
}

/// One row of a [`Transcript`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum TranscriptRow {
    /// A message from the person.
    User {
        /// Its text.
        text: String,
        /// How many images came with it.
        #[serde(default, skip_serializing_if = "is_zero")]
        images: usize,
    },
    /// A model turn's visible text.
    Assistant {
        /// The answer text.
        text: String,
        /// Its visible reasoning.
        #[serde(default, skip_serializing_if = "String::is_empty")]
        reasoning: String,
    },
    /// One tool call and how it ended.
    ToolCall {
        /// The call's id.
        call_id: String,
        /// The tool.
        tool: String,
        /// The arguments, as compact JSON text.
        arguments: String,
        /// How it ended.
        outcome: ToolOutcome,
        /// Its text output (or why it did not run).
        output: String,
        /// The images it returned.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        images: Vec<ImageDescriptor>,
    },
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// A bounded rendering of a conversation. See the [module docs](self).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Transcript {
    /// The newest rows, oldest first.
    pub rows: Vec<TranscriptRow>,
    /// Older rows were left out to stay within the bounds.
    pub truncated: bool,
}

impl Transcript {
    /// The transcript of `history`, bounded ([`MAX_ROWS`], [`MAX_BYTES`]).
    pub fn of(history: &[Message]) -> Self {
        Self::within(history, MAX_ROWS, MAX_BYTES)
    }

    /// The transcript of the whole of `history`, for a reader on this
    /// machine (`lrg sessions show`): every row, each still clipped to
    /// [`ROW_BYTES`].
    pub fn whole(history: &[Message]) -> Self {
        Self::within(history, usize::MAX, usize::MAX)
    }

    fn within(history: &[Message], max_rows: usize, max_bytes: usize) -> Self {
        let results: HashMap<&str, &ToolResult> = history
            .iter()
            .filter(|m| m.role == Role::Tool)
            .flat_map(|m| m.parts.iter())
            .filter_map(|p| match p {
                Part::ToolResult(r) => Some((r.call_id.as_str(), r)),
                _ => None,
            })
            .collect();
        let mut all = Vec::new();
        for message in history {
            match message.role {
                Role::User => {
                    let images = message
                        .parts
                        .iter()
                        .filter(|p| matches!(p, Part::Image(_)))
                        .count();
                    all.push(TranscriptRow::User {
                        text: clip(&message.text(), ROW_BYTES),
                        images,
                    });
                }
                Role::Assistant => {
                    let text = message.text();
                    let reasoning: String = message
                        .parts
                        .iter()
                        .filter_map(|p| match p {
                            Part::Reasoning { text } => Some(text.as_str()),
                            _ => None,
                        })
                        .collect();
                    if !text.is_empty() || !reasoning.is_empty() {
                        let text = clip(&text, ROW_BYTES);
                        let reasoning = clip(&reasoning, ROW_BYTES - text.len());
                        all.push(TranscriptRow::Assistant { text, reasoning });
                    }
                    for call in message.tool_calls() {
                        let result = results.get(call.id.as_str());
                        let arguments = clip(&call.arguments.to_string(), ROW_BYTES / 4);
                        let output = result.map(|r| r.text_content()).unwrap_or_default();
                        all.push(TranscriptRow::ToolCall {
                            call_id: call.id.clone(),
                            tool: call.name.clone(),
                            outcome: result.map_or(ToolOutcome::Running, |r| outcome_of(r)),
                            output: clip(&output, ROW_BYTES - arguments.len()),
                            images: result
                                .map(|r| ImageDescriptor::of_parts(&r.parts))
                                .unwrap_or_default(),
                            arguments,
                        });
                    }
                }
                Role::Tool => {}
            }
        }
        let mut kept = Vec::new();
        let mut bytes: usize = 0;
        for row in all.iter().rev() {
            let size = serde_json::to_string(row).map_or(ROW_BYTES, |s| s.len());
            if kept.len() == max_rows || bytes.saturating_add(size) > max_bytes {
                break;
            }
            bytes += size;
            kept.push(row.clone());
        }
        kept.reverse();
        Self {
            truncated: kept.len() < all.len(),
            rows: kept,
        }
    }
}

/// Image `n` (from 0) of the result of tool call `call_id` in `history`.
pub(crate) fn tool_image<'a>(history: &'a [Message], call_id: &str, n: usize) -> Option<&'a Image> {
    history
        .iter()
        .flat_map(|m| m.parts.iter())
        .find_map(|p| match p {
            Part::ToolResult(r) if r.call_id == call_id => Some(r),
            _ => None,
        })?
        .parts
        .iter()
        .filter_map(|p| match p {
            Part::Image(image) => Some(image),
            _ => None,
        })
        .nth(n)
}

/// `text` cut to at most `max` bytes at a character boundary, with `…` when
/// cut.
fn clip(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let ellipsis = '…';
    let mut end = max.saturating_sub(ellipsis.len_utf8());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let mut out = text[..end].to_string();
    out.push(ellipsis);
    out
}

/// How a call ended, read from its result: the loop writes a fixed text for
/// each way a call can end without running (see `session/calls.rs`; the
/// transcript tests drive each one through a real session).
pub fn outcome_of(result: &ToolResult) -> ToolOutcome {
    if !result.is_error {
        return ToolOutcome::Ok;
    }
    let text = result.text_content();
    if text.starts_with("Not run: the user stopped") {
        ToolOutcome::Stopped
    } else if text.starts_with("Not run: the user did not allow")
        || text.starts_with("Not run: the user turned the tool")
        || text.starts_with(crate::hooks::DENIED_PREFIX)
    {
        ToolOutcome::Denied
    } else if text.starts_with("Not run: you already made this exact call")
        || text.starts_with("There is no tool named")
    {
        ToolOutcome::Skipped
    } else {
        ToolOutcome::Failed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clip_keeps_char_boundaries() {
        assert_eq!(clip("abc", 3), "abc");
        let s = "é".repeat(10);
        let c = clip(&s, 8);
        assert!(c.len() <= 8 && c.ends_with('…'), "{c}");
    }

    #[test]
    fn bounded_by_rows_and_bytes() {
        let history: Vec<Message> = (0..300).map(|i| Message::user(format!("m{i}"))).collect();
        let t = Transcript::of(&history);
        assert_eq!(t.rows.len(), MAX_ROWS);
        assert!(t.truncated);
        assert_eq!(
            t.rows.last(),
            Some(&TranscriptRow::User {
                text: "m299".into(),
                images: 0
            })
        );
        let big: Vec<Message> = (0..100)
            .map(|_| Message::user("x".repeat(20_000)))
            .collect();
        let t = Transcript::of(&big);
        let size: usize = t
            .rows
            .iter()
            .map(|r| serde_json::to_string(r).unwrap().len())
            .sum();
        assert!(size <= MAX_BYTES, "{size}");
        assert!(t.truncated);
        for row in &t.rows {
            let TranscriptRow::User { text, .. } = row else {
                panic!()
            };
            assert!(text.len() <= ROW_BYTES);
        }
        let short = Transcript::of(&history[..5]);
        assert!(!short.truncated);
    }
}
