//! Answering approval questions: everything (`--yes`), nobody (no terminal),
//! or the person, asked inline.

use std::io::Write as _;
use std::sync::Arc;

use lrg_chat::ApprovalRequest;
use lrg_chat::permissions::{Answer, AnswerKind, ApprovalReason};
use lrg_chat::tools::ToolClass;
use tokio::sync::Mutex;

use crate::input::Lines;
use crate::style::Style;

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

impl Approver {
    /// The answer to `question` (what its `approval_needed` event asks).
    /// From a person whose input ended, a denial saying so.
    pub async fn answer(&self, question: &ApprovalRequest, style: Style) -> Answer {
        match self {
            Approver::Everyone => Answer::Once,
            Approver::Nobody => Answer::deny_with(NON_INTERACTIVE_NOTE),
            Approver::Person(lines) => ask(lines, question, style).await,
        }
    }
}

fn reason_text(reason: &ApprovalReason, class: ToolClass) -> String {
    let class = match class {
        ToolClass::Read => "read-only",
        ToolClass::Change => "changing",
        ToolClass::Destructive => "destructive",
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
        ApprovalReason::Sampling { mode } => {
            let mode = serde_json::to_value(mode)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string));
            format!(
                "mode {} asks before a tool server uses the model",
                mode.unwrap_or_default()
            )
        }
    }
}

async fn ask(lines: &Mutex<Lines>, q: &ApprovalRequest, style: Style) -> Answer {
    let mut lines = lines.lock().await;
    let args = serde_json::to_string(&q.arguments).unwrap_or_default();
    let offer_always = q.offers(AnswerKind::Always);
    let always = if offer_always { "  [a] always" } else { "" };
    loop {
        {
            let mut err = std::io::stderr().lock();
            let who = q
                .sub_agent
                .as_ref()
                .map(|ask| format!("sub-agent {}: ", ask.sub_session_id))
                .unwrap_or_default();
            let _ = writeln!(
                err,
                "{}{} {}{} ({})",
                style.dim(&who),
                style.bold("? allow"),
                q.tool,
                style.dim(&format!(" {}", crate::style::clip(&args, 300))),
                reason_text(&q.reason, q.class),
            );
            for warning in &q.warnings {
                let _ = writeln!(err, "  {} {warning}", style.bold("note:"));
            }
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
            "a" | "always" if offer_always => return Answer::Always,
            "n" | "no" | "deny" => {
                return if note.is_empty() {
                    Answer::deny()
                } else {
                    Answer::deny_with(note)
                };
            }
            _ => eprintln!(
                "  please answer y, c{}, or n",
                if offer_always { ", a" } else { "" }
            ),
        }
    }
}
