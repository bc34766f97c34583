//! `lrg chat --session KEY` on a kept chat: the last exchanges again, so
//! the person sees where they were.

use lrg_providers::{Message, Role};

use crate::style::{Style, clip};

/// How many exchanges (a message and its reply) are shown again.
pub const EXCHANGES: usize = 3;
/// Longest a shown message or reply gets, in characters.
const CLIP: usize = 300;
/// Most lines of one shown message or reply.
const LINES: usize = 6;

/// The last [`EXCHANGES`] exchanges of `history`, clipped, for stderr;
/// `None` when nothing was said yet.
pub fn recap(history: &[Message], style: Style) -> Option<String> {
    let exchanges = exchanges(history);
    if exchanges.is_empty() {
        return None;
    }
    let shown = &exchanges[exchanges.len().saturating_sub(EXCHANGES)..];
    let heading = if shown.len() == exchanges.len() {
        format!(
            "── resumed; what was said ({}) ──",
            plural(shown.len(), "exchange")
        )
    } else {
        format!(
            "── resumed; the last {} of {} ──",
            shown.len(),
            plural(exchanges.len(), "exchange")
        )
    };
    let mut out = format!("{}\n", style.dim(&heading));
    for (said, reply) in shown {
        out.push_str(&format!("{} {}\n", style.bold(">"), short(said)));
        match reply {
            Some(reply) => out.push_str(&format!("{}\n", short(reply))),
            None => out.push_str(&format!("{}\n", style.dim("(no reply)"))),
        }
    }
    out.push_str(&format!("{}\n", style.dim("──")));
    Some(out)
}

/// "1 exchange", "3 exchanges".
fn plural(n: usize, word: &str) -> String {
    if n == 1 {
        format!("{n} {word}")
    } else {
        format!("{n} {word}s")
    }
}

/// Each message the person sent, with the model's last words after it
/// (its text between the tool calls is left out).
fn exchanges(history: &[Message]) -> Vec<(String, Option<String>)> {
    let mut out: Vec<(String, Option<String>)> = Vec::new();
    for message in history {
        match message.role {
            Role::User => {
                let text = message.text();
                let text = if text.trim().is_empty() {
                    "(an image)".to_string()
                } else {
                    text
                };
                out.push((text, None));
            }
            Role::Assistant => {
                let text = message.text();
                if let Some(last) = out.last_mut()
                    && !text.trim().is_empty()
                {
                    last.1 = Some(text);
                }
            }
            Role::Tool => {}
        }
    }
    out
}

/// `text` trimmed to [`LINES`] lines and [`CLIP`] characters.
fn short(text: &str) -> String {
    let text = text.trim();
    let lines: Vec<&str> = text.lines().collect();
    let mut kept = lines[..lines.len().min(LINES)].join("\n");
    if lines.len() > LINES {
        kept.push_str(" …");
    }
    clip(&kept, CLIP)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(text: &str) -> Message {
        Message::user(text)
    }

    fn assistant(text: &str) -> Message {
        Message::assistant(text)
    }

    #[test]
    fn the_last_three_exchanges_clipped() {
        let long = "x".repeat(400);
        let history = vec![
            user("one"),
            assistant("first"),
            user("two"),
            assistant("second"),
            user("three"),
            assistant(&long),
            user("four"),
        ];
        let out = recap(&history, Style { ansi: false }).unwrap();
        assert_eq!(
            out,
            format!(
                "── resumed; the last 3 of 4 exchanges ──\n> two\nsecond\n> three\n{}…\n> four\n(no reply)\n──\n",
                "x".repeat(300)
            )
        );
        assert_eq!(recap(&[], Style { ansi: false }), None);
        assert!(
            recap(&history[..2], Style { ansi: false })
                .unwrap()
                .starts_with("── resumed; what was said (1 exchange) ──\n")
        );
    }
}
