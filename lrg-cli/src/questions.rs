//! Answering tool servers' questions (MCP elicitation, `question` events):
//! nobody (declined: `lrg run` cannot ask anyone), a file of answers a
//! script expects to give (`lrg run --answers FILE`), or the person at the
//! terminal, asked field by field (`lrg chat`). And how questions, server
//! log lines and progress are shown.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::Path;
use std::sync::Arc;

use lrg_chat::events::Event;
use lrg_chat::tools::elicitation::{Field, FieldKind, Form};
use lrg_chat::{ChatSession, QuestionAnswer, QuestionError, QuestionMode};
use serde_json::{Map, Value};
use tokio::sync::Mutex;

use crate::exit::CliError;
use crate::input::Lines;
use crate::style::{Style, clip};
use crate::usage;

/// The reason a question gets when no one can answer it.
pub const NON_INTERACTIVE: &str = "no one can answer in a non-interactive run";

/// What `--answers FILE` holds: for each server, the field values to
/// answer its form questions with (fields left out take the form's
/// default), or `"decline"` / `"cancel"`.
#[derive(Debug, Clone, Default)]
pub struct Answers(BTreeMap<String, Value>);

impl Answers {
    /// Read `path`: a JSON object, server name → an object of field values,
    /// `"decline"` or `"cancel"`.
    pub fn load(path: &Path) -> Result<Self, CliError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| usage!("--answers {}: {e}", path.display()))?;
        let value: Value = serde_json::from_str(&text)
            .map_err(|e| usage!("--answers {}: not JSON: {e}", path.display()))?;
        let Value::Object(map) = value else {
            return Err(usage!(
                "--answers {}: expected an object of server name → field values",
                path.display()
            ));
        };
        for (server, answer) in &map {
            match answer {
                Value::Object(_) => {}
                Value::String(s) if s == "decline" || s == "cancel" => {}
                _ => {
                    return Err(usage!(
                        "--answers {}: the answer for server \"{server}\" must be an object of \
                         field values, \"decline\" or \"cancel\"",
                        path.display()
                    ));
                }
            }
        }
        Ok(Self(map.into_iter().collect()))
    }
}

/// Who answers questions.
#[derive(Clone, Default)]
pub enum Answerer {
    /// Every question is declined at once, saying why.
    #[default]
    Nobody,
    /// The answers a script gave; a question of another server is declined.
    File(Arc<Answers>),
    /// The person at the terminal, asked on stderr, answering on stdin.
    Person(Arc<Mutex<Lines>>),
}

/// A `question` event, read.
pub struct Asked<'a> {
    id: u64,
    server: &'a str,
    mode: QuestionMode,
    schema: Option<&'a Value>,
    url: Option<&'a str>,
}

impl<'a> Asked<'a> {
    /// The question `event` asks, if it is one.
    pub fn from_event(event: &'a Event) -> Option<Self> {
        match event {
            Event::Question {
                question_id,
                server,
                mode,
                requested_schema,
                url,
                ..
            } => Some(Self {
                id: *question_id,
                server,
                mode: *mode,
                schema: requested_schema.as_ref(),
                url: url.as_deref(),
            }),
            _ => None,
        }
    }

    /// The question's number.
    pub fn id(&self) -> u64 {
        self.id
    }
}

impl Answerer {
    /// Answer `q` in `session` (a refused answer is asked again, or for a
    /// file's, declined with the reason).
    pub async fn answer(&self, session: &ChatSession, q: &Asked<'_>, style: Style) {
        let answer = match self {
            Answerer::Nobody => decline(NON_INTERACTIVE),
            Answerer::File(answers) => match from_file(answers, q) {
                Ok(answer) => answer,
                Err(why) => {
                    eprintln!("{} {why}", style.bold("warning:"));
                    decline(&why)
                }
            },
            Answerer::Person(lines) => {
                let mut lines = lines.lock().await;
                ask(&mut lines, q, style).await
            }
        };
        match session.answer_question(q.id, answer) {
            Ok(()) | Err(QuestionError::NoSuchQuestion(_)) => {}
            Err(e) => {
                // Checked field by field already; a file's answer may not fit.
                eprintln!("{} {e}; the question is declined", style.bold("warning:"));
                let _ = session.answer_question(q.id, decline(&e.to_string()));
            }
        }
    }
}

fn decline(why: &str) -> QuestionAnswer {
    QuestionAnswer::decline_with(why)
}

/// The file's answer to `q`.
fn from_file(answers: &Answers, q: &Asked<'_>) -> Result<QuestionAnswer, String> {
    let Some(given) = answers.0.get(q.server) else {
        return Err(format!(
            "--answers has nothing for server \"{}\"; its question is declined",
            q.server
        ));
    };
    match given {
        Value::String(s) if s == "cancel" => return Ok(QuestionAnswer::cancel()),
        Value::String(_) => return Ok(QuestionAnswer::decline()),
        _ => {}
    }
    if q.mode == QuestionMode::Url {
        return Err(format!(
            "server \"{}\" asks to open a page, which a script cannot do; declined",
            q.server
        ));
    }
    let form = q
        .schema
        .map(Form::parse)
        .transpose()
        .map_err(|e| e.to_string())?
        .ok_or("the question has no form")?;
    let mut content = given.as_object().cloned().unwrap_or_default();
    for field in &form.fields {
        if let (false, Some(default)) = (content.contains_key(&field.name), &field.default) {
            content.insert(field.name.clone(), default.clone());
        }
    }
    form.check(&Value::Object(content.clone())).map_err(|e| {
        format!(
            "the --answers values for server \"{}\" do not fit its form: {e}",
            q.server
        )
    })?;
    Ok(QuestionAnswer::accept(Value::Object(content)))
}

/// Ask the person, field by field; each value is checked as it is typed.
async fn ask(lines: &mut Lines, q: &Asked<'_>, style: Style) -> QuestionAnswer {
    let say = |text: String| {
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "{text}");
        let _ = err.flush();
    };
    if q.mode == QuestionMode::Url {
        say(format!(
            "  open this page in your browser (lrg does not open it): {}\n  [y] done  [n] decline  [c] cancel > ",
            q.url.unwrap_or("?")
        ));
        return match lines.next().await.as_deref().map(str::trim) {
            Some("y" | "yes" | "done") => QuestionAnswer::Accept { content: None },
            Some("c" | "cancel") | None => QuestionAnswer::cancel(),
            Some(_) => QuestionAnswer::decline(),
        };
    }
    let form = match q.schema.map(Form::parse) {
        Some(Ok(form)) => form,
        _ => return QuestionAnswer::decline(),
    };
    say(format!(
        "  {}\n",
        style.dim("answer each field (Enter keeps the default or skips an optional one; !decline or !cancel to refuse)")
    ));
    let mut content = Map::new();
    for field in &form.fields {
        loop {
            say(format!("  {} > ", prompt_of(field, style)));
            let Some(line) = lines.next().await else {
                eprintln!();
                return QuestionAnswer::cancel();
            };
            let line = line.trim();
            match line {
                "!decline" => return QuestionAnswer::decline(),
                "!cancel" => return QuestionAnswer::cancel(),
                "" => match &field.default {
                    Some(default) => {
                        content.insert(field.name.clone(), default.clone());
                        break;
                    }
                    None if !field.required => break,
                    None => say(format!("    {}\n", style.red("this field is required"))),
                },
                typed => match field.parse_input(typed) {
                    Ok(value) => {
                        content.insert(field.name.clone(), value);
                        break;
                    }
                    Err(why) => say(format!("    {}\n", style.red(&why))),
                },
            }
        }
    }
    QuestionAnswer::accept(Value::Object(content))
}

/// `label (what it takes) [default]`.
fn prompt_of(field: &Field, style: Style) -> String {
    let what = match &field.kind {
        FieldKind::Text {
            format: Some(f), ..
        } => f.as_str().to_owned(),
        FieldKind::Text { .. } => "text".to_owned(),
        FieldKind::Number { integer: true, .. } => "whole number".to_owned(),
        FieldKind::Number { .. } => "number".to_owned(),
        FieldKind::Boolean => "y/n".to_owned(),
        FieldKind::Choice { options } | FieldKind::Choices { options, .. } => {
            let shown: Vec<String> = options
                .iter()
                .enumerate()
                .map(|(i, o)| format!("{} {}", i + 1, o.title.as_deref().unwrap_or(&o.value)))
                .collect();
            let several = if matches!(field.kind, FieldKind::Choices { .. }) {
                "pick several, comma-separated: "
            } else {
                ""
            };
            format!("{several}{}", shown.join(", "))
        }
        _ => "value".to_owned(),
    };
    let required = if field.required { "*" } else { "" };
    let default = field
        .default
        .as_ref()
        .map(|d| format!(" [{}]", clip(&d.to_string(), 60)))
        .unwrap_or_default();
    let about = field
        .description
        .as_deref()
        .map(|d| format!(" — {}", clip(d, 120)))
        .unwrap_or_default();
    format!(
        "{}{required}{} ({what}){default}",
        style.bold(field.label()),
        style.dim(&about)
    )
}

/// The lines a person sees for `event` (questions, their answers, server
/// logs, progress); `None` for other events.
pub fn render(event: &Event, style: Style, tool_name: &dyn Fn(&str) -> String) -> Option<String> {
    match event {
        Event::Question {
            question_id,
            server,
            message,
            ..
        } => Some(format!(
            "{} {server} asks (question {question_id}): {}",
            style.bold("?"),
            clip(message, 600)
        )),
        Event::QuestionAnswered {
            question_id,
            action,
            reason,
            ..
        } => {
            let why = reason
                .as_deref()
                .map(|r| format!(" ({r})"))
                .unwrap_or_default();
            Some(style.dim(&format!(
                "  question {question_id}: {}{why}",
                action.as_str()
            )))
        }
        Event::ServerLog {
            server,
            level,
            message,
            ..
        } => Some(format!(
            "{} {}",
            style.bold(&format!("{server} {level}:")),
            clip(message, 300)
        )),
        Event::ToolProgress {
            call_id,
            progress,
            total,
            message,
        } => {
            let bar = match total {
                Some(t) if *t > 0.0 => {
                    let share = (progress / t).clamp(0.0, 1.0);
                    let filled = (share * 20.0).round() as usize;
                    format!(
                        "[{}{}] {:>3.0}%",
                        "#".repeat(filled),
                        "-".repeat(20 - filled),
                        share * 100.0
                    )
                }
                _ => format!("{progress}"),
            };
            let message = message
                .as_deref()
                .map(|m| format!(" {}", clip(m, 80)))
                .unwrap_or_default();
            Some(style.dim(&format!("  … {} {bar}{message}", tool_name(call_id))))
        }
        _ => None,
    }
}

/// Which progress lines a person sees: one per tenth of the way (or each
/// report when the total is unknown, at most one a second), so a long call
/// shows a bar that moves without filling the terminal.
#[derive(Default)]
pub struct ProgressLines(std::collections::HashMap<String, (i64, std::time::Instant)>);

impl ProgressLines {
    /// Whether `event` (a `tool_progress`) is worth a line now.
    pub fn worth_showing(&mut self, event: &Event) -> bool {
        let Event::ToolProgress {
            call_id,
            progress,
            total,
            ..
        } = event
        else {
            return true;
        };
        let step = match total {
            Some(t) if *t > 0.0 => ((progress / t) * 10.0).floor() as i64,
            _ => -1,
        };
        let now = std::time::Instant::now();
        match self.0.get(call_id) {
            Some((last, at))
                if (step >= 0 && *last == step)
                    || (step < 0 && now.duration_since(*at).as_secs() < 1) =>
            {
                false
            }
            _ => {
                self.0.insert(call_id.clone(), (step, now));
                true
            }
        }
    }
}
