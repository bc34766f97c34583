//! Answering approval questions: everything (`--yes`), nobody (no terminal),
//! or the person, asked inline.

use std::io::Write as _;
use std::sync::Arc;

use lrg_chat::permissions::{Answer, ApprovalReason};
use lrg_chat::tools::ToolClass;
use serde_json::Value;
use tokio::sync::Mutex;

use crate::input::Lines;
use crate::printer::Style;

/// The note a denial carries when no one is there to answer.
pub const NON_INTERACTIVE_NOTE: &str = "no one can approve in a non-interactive run";

/// Who answers approval questions.
#[derive(Clone)]
pub enum Approver {
    /// `--yes`: every call runs once.
    Everyone,
    /// No terminal: every question is denied at once, so a run never waits
    /// for input that cannot come.
    Nobody,
    /// The person at the terminal, asked on stderr, answering on stdin.
    Person(Arc<Mutex<Lines>>),
}

/// One approval question.
pub struct Question<'a> {
    /// The tool's name.
    pub tool: &'a str,
    /// Its class.
    pub class: Option<ToolClass>,
    /// The call's arguments.
    pub arguments: &'a Value,
    /// Why it asks.
    pub reason: &'a ApprovalReason,
    /// Whether "always" is offered.
    pub offer_always: bool,
    /// The sub-agent that asks, when it is not the chat's own model.
    pub sub_agent: Option<&'a str>,
}

impl Approver {
    /// The answer to `question`. For a person, `None` when input ended.
    pub async fn answer(&self, question: &Question<'_>, style: Style) -> Answer {
        match self {
            Approver::Everyone => Answer::Once,
            Approver::Nobody => Answer::deny_with(NON_INTERACTIVE_NOTE),
            Approver::Person(lines) => ask(lines, question, style).await,
        }
    }
}

fn reason_text(reason: &ApprovalReason, class: Option<ToolClass>) -> String {
    let class = match class {
        Some(ToolClass::Read) => "read-only",
        Some(ToolClass::Change) => "changing",
        Some(ToolClass::Destructive) | None => "destructive",
    };
    match reason {
        ApprovalReason::Mode { mode } => {
            let mode = serde_json::to_value(mode)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string));
            format!(
                "mode {} asks before {class} tools",
                mode.unwrap_or_default()
            )
        }
        ApprovalReason::Rule => "a rule says ask for this tool".to_string(),
        ApprovalReason::Agent => "the agent asks before running it".to_string(),
        ApprovalReason::Hook {
            reason: Some(reason),
        } => format!("a hook asks: {reason}"),
        ApprovalReason::Hook { reason: None } => "a hook asks before running it".to_string(),
        ApprovalReason::Bulk { targets, limit } => {
            format!("it is aimed at {targets} items, more than the bulk limit of {limit}")
        }
    }
}

async fn ask(lines: &Mutex<Lines>, q: &Question<'_>, style: Style) -> Answer {
    let mut lines = lines.lock().await;
    let args = serde_json::to_string(q.arguments).unwrap_or_default();
    let always = if q.offer_always { "  [a] always" } else { "" };
    loop {
        {
            let mut err = std::io::stderr().lock();
            let who = q
                .sub_agent
                .map(|id| format!("sub-agent {id}: "))
                .unwrap_or_default();
            let _ = writeln!(
                err,
                "{}{} {}{} ({})",
                style.dim(&who),
                style.bold("? allow"),
                q.tool,
                style.dim(&format!(" {}", crate::printer::clip(&args, 300))),
                reason_text(q.reason, q.class),
            );
            let _ = write!(
                err,
                "  [y] once  [c] for this chat{always}  [n] deny (n NOTE: deny, telling the model why) > "
            );
            let _ = err.flush();
        }
        let Some(line) = lines.next().await else {
            eprintln!();
            return Answer::deny_with("the person's input ended before they answered");
        };
        let line = line.trim();
        let (word, note) = match line.split_once(char::is_whitespace) {
            Some((w, rest)) => (w, rest.trim().trim_start_matches(':').trim()),
            None => (line, ""),
        };
        match word.to_ascii_lowercase().as_str() {
            "y" | "yes" | "once" => return Answer::Once,
            "c" | "chat" => return Answer::ThisChat,
            "a" | "always" if q.offer_always => return Answer::Always,
            "n" | "no" | "deny" => {
                return if note.is_empty() {
                    Answer::deny()
                } else {
                    Answer::deny_with(note)
                };
            }
            _ => eprintln!(
                "  please answer y, c{}, or n",
                if q.offer_always { ", a" } else { "" }
            ),
        }
    }
}
