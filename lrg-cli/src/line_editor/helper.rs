//! What the line editor knows of lrg chat: completion of `/commands` and
//! tool names, and a trailing `\` that continues the message on a new line.

use rustyline::completion::{Completer, Pair};
use rustyline::highlight::Highlighter;
use rustyline::hint::Hinter;
use rustyline::validate::{ValidationContext, ValidationResult, Validator};
use rustyline::{Context, Helper};

/// The words Tab completes.
#[derive(Debug, Clone, Default)]
pub struct Completions {
    /// The chat's commands, with their `/`.
    pub commands: Vec<String>,
    /// The tools the model is offered (completed anywhere in a message, to
    /// name one).
    pub tools: Vec<String>,
    /// Prompt names, completed after `/prompt ` once lrg has MCP prompts
    /// to offer; empty until then.
    pub prompts: Vec<String>,
}

/// The rustyline helper of `lrg chat`.
pub struct ChatHelper {
    completions: Completions,
}

impl ChatHelper {
    /// A helper completing `completions`.
    pub fn new(completions: Completions) -> Self {
        Self { completions }
    }

    /// The start of the word to complete in `line` before `pos`, and the
    /// candidates for it.
    pub fn candidates(&self, line: &str, pos: usize) -> (usize, Vec<String>) {
        let before = &line[..pos];
        let start = before.rfind(char::is_whitespace).map_or(0, |i| {
            i + before[i..].chars().next().map_or(1, char::len_utf8)
        });
        let word = &before[start..];
        let matching = |words: &[String]| -> Vec<String> {
            words
                .iter()
                .filter(|w| w.starts_with(word) && w.as_str() != word)
                .cloned()
                .collect()
        };
        if start == 0 && word.starts_with('/') {
            return (start, matching(&self.completions.commands));
        }
        if before.trim_start().starts_with("/prompt ") && before[..start].trim() == "/prompt" {
            return (start, matching(&self.completions.prompts));
        }
        if word.is_empty() {
            return (start, Vec::new());
        }
        (start, matching(&self.completions.tools))
    }
}

impl Completer for ChatHelper {
    type Candidate = Pair;

    fn complete(
        &self,
        line: &str,
        pos: usize,
        _ctx: &Context<'_>,
    ) -> rustyline::Result<(usize, Vec<Pair>)> {
        let (start, words) = self.candidates(line, pos);
        let pairs = words
            .into_iter()
            .map(|w| Pair {
                display: w.clone(),
                replacement: w,
            })
            .collect();
        Ok((start, pairs))
    }
}

impl Hinter for ChatHelper {
    type Hint = String;
}

impl Highlighter for ChatHelper {}

impl Validator for ChatHelper {
    fn validate(&self, ctx: &mut ValidationContext<'_>) -> rustyline::Result<ValidationResult> {
        Ok(if continues(ctx.input()) {
            ValidationResult::Incomplete
        } else {
            ValidationResult::Valid(None)
        })
    }
}

impl Helper for ChatHelper {}

/// Whether `input` ends in a single `\`: Enter then starts a new line of
/// the same message (`\\` is a backslash at the end).
fn continues(input: &str) -> bool {
    let trailing = input.chars().rev().take_while(|c| *c == '\\').count();
    trailing % 2 == 1
}

/// The message typed, less the `\` that continued each line.
pub fn joined(input: &str) -> String {
    input.replace("\\\n", "\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn helper() -> ChatHelper {
        ChatHelper::new(Completions {
            commands: vec!["/clear".into(), "/compact".into(), "/help".into()],
            tools: vec!["list_notes".into(), "add_note".into()],
            prompts: vec![],
        })
    }

    #[test]
    fn commands_complete_at_the_start_and_tools_anywhere() {
        let h = helper();
        assert_eq!(
            h.candidates("/c", 2),
            (0, vec!["/clear".into(), "/compact".into()])
        );
        assert_eq!(h.candidates("/he", 3), (0, vec!["/help".into()]));
        assert_eq!(
            h.candidates("please use li", 13),
            (11, vec!["list_notes".into()])
        );
        assert_eq!(h.candidates("say /c", 6), (4, vec![]));
        assert_eq!(h.candidates("", 0), (0, vec![]));
        assert_eq!(h.candidates("/prompt ", 8), (8, vec![]));
    }

    #[test]
    fn a_trailing_backslash_continues_the_message() {
        assert!(continues("first line \\"));
        assert!(!continues("a path C:\\\\"));
        assert!(!continues("done"));
        assert_eq!(joined("one \\\ntwo"), "one \ntwo");
    }
}
