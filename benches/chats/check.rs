//! Is a chat's history what the fake model asked for: three model turns,
//! two `lookup` calls, each with its (successful) result, then the reply?

use std::collections::HashSet;
use std::sync::Arc;

use lrg_chat::events::{Event, LogEntry};
use lrg_providers::{Message, Part, Role};

use crate::fake_openai::{TOOL, reply_text};

/// What is wrong with a history after one message, if anything.
pub fn history_problem(history: &[Message]) -> Option<String> {
    let turns = history.iter().filter(|m| m.role == Role::Assistant).count();
    if turns != 3 {
        return Some(format!("{turns} model turns, expected 3"));
    }
    let mut calls = HashSet::new();
    let mut results = HashSet::new();
    for part in history.iter().flat_map(|m| &m.parts) {
        match part {
            Part::ToolCall(call) if call.name == TOOL => {
                calls.insert(call.id.as_str());
            }
            Part::ToolCall(call) => return Some(format!("a call to `{}`", call.name)),
            Part::ToolResult(result) if result.is_error => {
                return Some(format!(
                    "call {} failed: {:?}",
                    result.call_id, result.parts
                ));
            }
            Part::ToolResult(result) if !results.insert(result.call_id.as_str()) => {
                return Some(format!("call {} has two results", result.call_id));
            }
            _ => {}
        }
    }
    if calls.len() != 2 || calls != results {
        return Some(format!("calls {calls:?} but results {results:?}"));
    }
    let last = history.last().filter(|m| m.role == Role::Assistant);
    let text: String = last
        .into_iter()
        .flat_map(|m| &m.parts)
        .filter_map(|p| match p {
            Part::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    (text != reply_text()).then(|| format!("the last turn says {text:?}"))
}

/// The error and warning events of a chat's numbered log.
#[derive(Debug, Default)]
pub struct Trouble {
    /// `error` events' messages.
    pub errors: Vec<String>,
    /// `warning` events' messages (a retried model turn, ...).
    pub warnings: Vec<String>,
}

impl Trouble {
    /// Note `entry` if it is an error or a warning.
    pub fn note(&mut self, entry: &LogEntry) {
        match &entry.event {
            Event::Error { message, .. } => self.errors.push(message.clone()),
            Event::Warning { message, .. } => self.warnings.push(message.clone()),
            _ => {}
        }
    }

    /// Every entry of `log`.
    pub fn of(log: &[Arc<LogEntry>]) -> Self {
        let mut t = Self::default();
        for entry in log {
            t.note(entry);
        }
        t
    }

    /// Another chat's trouble, added to this.
    pub fn add(&mut self, other: Trouble) {
        self.errors.extend(other.errors);
        self.warnings.extend(other.warnings);
    }
}
