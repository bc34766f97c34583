//! Showing a session's events. Each output format is a type of its own
//! ([`JsonLines`], [`Human`]) behind the [`Output`] trait; the [`Printer`]
//! feeds one of them and answers approval questions, whatever the format.

use std::collections::HashMap;
use std::io::Write as _;

use lrg_chat::events::{DeltaKind, EVENTS_SCHEMA_VERSION, Event, LogEntry};
use lrg_chat::tools::ToolClass;
use lrg_chat::{ApprovalRequest, ChatSession};

use crate::approve::Approver;
use crate::out;
use crate::style::{Style, clip};

/// Output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// The reply on stdout, everything else on stderr.
    Plain,
    /// Every event as a JSON line on stdout.
    Json,
    /// As [`Plain`](Self::Plain), but the reply as it is written goes to
    /// stderr: stdout is left to the command (`run --output-schema` prints
    /// the validated JSON there, alone).
    Typed,
}

/// The tool names of the calls seen so far, by id: the events after a
/// `tool_call` name only its id, and a person reads the tool's name.
/// (Approval questions carry their call: they need nothing from here.)
#[derive(Default)]
struct Calls(HashMap<String, String>);

impl Calls {
    fn track(&mut self, event: &Event) {
        if let Event::ToolCall { call_id, tool, .. } = event {
            self.0.insert(call_id.clone(), tool.clone());
        }
    }

    fn tool_name(&self, call_id: &str) -> String {
        self.0
            .get(call_id)
            .map_or_else(|| call_id.to_string(), Clone::clone)
    }
}

/// One output format.
trait Output: Send {
    /// What to print before the first event.
    fn header(&self, _model: &str) {}

    /// Show one event.
    fn show(&mut self, entry: &LogEntry, calls: &Calls);

    /// End whatever line is open.
    fn finish_line(&mut self) {}
}

/// `--json`: a header line, then every event as a JSON line on stdout.
struct JsonLines;

impl Output for JsonLines {
    fn header(&self, model: &str) {
        // A struct, not a map, so `type` comes first as in every event line.
        #[derive(serde::Serialize)]
        struct Header<'a> {
            r#type: &'static str,
            version: u32,
            model: &'a str,
        }
        let header = Header {
            r#type: "lrg_events",
            version: EVENTS_SCHEMA_VERSION,
            model,
        };
        out::line(serde_json::to_string(&header).unwrap_or_default());
    }

    fn show(&mut self, entry: &LogEntry, _calls: &Calls) {
        if let Ok(line) = serde_json::to_string(entry) {
            out::line(line);
        }
    }
}

/// For a person: the reply streamed on stdout, tool activity on stderr.
struct Human {
    err: Style,
    /// Whether stdout is at the start of a line.
    out_at_line_start: bool,
    /// Whether reasoning (or a typed reply) is being streamed on stderr
    /// (needs a newline after).
    reasoning_open: bool,
    /// Whether the reply is streamed on stdout (else on stderr).
    reply_on_stdout: bool,
    /// Whether the open stderr line is the reply's (not reasoning).
    reply_open: bool,
    /// The reply as styled Markdown, block by block (stdout a terminal).
    markdown: Option<crate::markdown::Blocks>,
    /// Which `tool_progress` events get a line.
    progress: crate::questions::ProgressLines,
    /// A local model's reload before a turn.
    loading: crate::load_bar::LoadBar,
}

/// Prints events and answers approval questions as they arrive.
pub struct Printer {
    output: Box<dyn Output>,
    session: ChatSession,
    approver: Approver,
    /// Who answers tool servers' questions (default: nobody, declined).
    answerer: crate::questions::Answerer,
    err: Style,
    calls: Calls,
}

impl Printer {
    /// A printer for `session`'s events.
    pub fn new(format: Format, session: ChatSession, approver: Approver) -> Self {
        use std::io::IsTerminal as _;
        let err = Style {
            ansi: std::io::stderr().is_terminal(),
        };
        let output: Box<dyn Output> = match format {
            Format::Json => Box::new(JsonLines),
            Format::Plain | Format::Typed => Box::new(Human {
                err,
                out_at_line_start: true,
                reasoning_open: false,
                reply_on_stdout: format == Format::Plain,
                reply_open: false,
                markdown: (format == Format::Plain && crate::markdown::wanted())
                    .then(crate::markdown::Blocks::default),
                progress: Default::default(),
                loading: Default::default(),
            }),
        };
        Self {
            output,
            session,
            approver,
            answerer: crate::questions::Answerer::default(),
            err,
            calls: Calls::default(),
        }
    }

    /// Answer tool servers' questions with `answerer`.
    pub fn with_answerer(mut self, answerer: crate::questions::Answerer) -> Self {
        self.answerer = answerer;
        self
    }

    /// Print what comes before the first event (the JSON header line).
    pub fn header(&self, model: &str) {
        self.output.header(model);
    }

    /// Show one event; answer it when it is an approval question.
    pub async fn handle(&mut self, entry: &LogEntry) {
        self.calls.track(&entry.event);
        self.output.show(entry, &self.calls);
        if out::stopped() {
            // Nobody reads the output any more: stop the work, as Ctrl-C
            // does, so that it ends the way a stop always ends. Repeated on
            // every event, as a stop before the turn started stops nothing.
            self.session.stop_with_sub_agents();
            return;
        }
        if let Some(question) = ApprovalRequest::from_event(&entry.event) {
            let call_id = question.call_id.as_str();
            // A stop withdraws the question (the session denies it): stop
            // asking then, or a person would be left answering nothing.
            tokio::select! {
                answer = self.approver.answer(&question, self.err) => {
                    let _ = self.session.answer_approval(call_id, answer);
                }
                () = withdrawn(&self.session, call_id, entry.seq.unwrap_or(0)) => {
                    eprintln!("{}", self.err.dim("(question withdrawn: the turn was stopped)"));
                }
            }
        }
        if let Some(question) = crate::questions::Asked::from_event(&entry.event) {
            // A stop or the timeout cancels it: stop asking then.
            let id = question.id();
            tokio::select! {
                () = self.answerer.answer(&self.session, &question, self.err) => {}
                () = question_closed(&self.session, id, entry.seq.unwrap_or(0)) => {
                    eprintln!("{}", self.err.dim("(question withdrawn)"));
                }
            }
        }
    }

    /// End the reply's last line, if it is open.
    pub fn finish_line(&mut self) {
        self.output.finish_line();
    }
}

impl Output for Human {
    fn finish_line(&mut self) {
        self.close_reasoning();
        if let Some(rest) = self.markdown.as_mut().map(crate::markdown::Blocks::finish) {
            self.print_reply(&rest);
        }
        if !self.out_at_line_start {
            out::line("");
            self.out_at_line_start = true;
        }
    }

    fn show(&mut self, entry: &LogEntry, calls: &Calls) {
        let err = self.err;
        match &entry.event {
            Event::Delta {
                kind: DeltaKind::Text,
                text,
            } if !self.reply_on_stdout => {
                if !self.reply_open {
                    self.close_reasoning();
                }
                let mut e = std::io::stderr().lock();
                let _ = write!(e, "{text}");
                let _ = e.flush();
                if !text.is_empty() {
                    self.reasoning_open = true;
                    self.reply_open = true;
                }
            }
            Event::Delta {
                kind: DeltaKind::Text,
                text,
            } => {
                self.close_reasoning();
                let text = match &mut self.markdown {
                    Some(blocks) => &blocks.push(text),
                    None => text,
                };
                self.print_reply(text);
            }
            Event::Delta {
                kind: DeltaKind::Reasoning,
                text,
            } => {
                if !self.out_at_line_start {
                    out::line("");
                    self.out_at_line_start = true;
                }
                let mut e = std::io::stderr().lock();
                let _ = write!(e, "{}", err.dim(text));
                let _ = e.flush();
                self.reasoning_open = !text.is_empty() || self.reasoning_open;
            }
            Event::AssistantTurn { .. } => self.finish_line(),
            Event::ToolCall {
                tool,
                class,
                arguments,
                ..
            } => {
                self.finish_line();
                let args = serde_json::to_string(arguments).unwrap_or_default();
                eprintln!(
                    "{} {tool} {} {}",
                    err.bold("→"),
                    err.dim(&clip(&args, 200)),
                    err.dim(&format!("[{}]", class_name(*class)))
                );
            }
            Event::SubtaskStart {
                sub_session_id,
                description,
                ..
            } => {
                self.finish_line();
                eprintln!(
                    "{} sub-agent {} {}",
                    err.bold("⇉"),
                    err.dim(sub_session_id),
                    description
                );
            }
            // Its start is the line above; how it ended is worth one.
            Event::SubtaskStatus {
                sub_session_id,
                status,
            } if status.is_finished() => {
                self.finish_line();
                eprintln!(
                    "{} sub-agent {} {}",
                    err.bold("⇇"),
                    err.dim(sub_session_id),
                    status.as_str()
                );
            }
            Event::ApprovalAnswered { call_id, answer } => {
                let answer = serde_json::to_value(answer).ok();
                let kind = answer
                    .as_ref()
                    .and_then(|a| a["kind"].as_str())
                    .unwrap_or("?");
                eprintln!(
                    "  {} {}: {kind}",
                    err.dim("approval"),
                    calls.tool_name(call_id)
                );
            }
            Event::ToolDone {
                call_id,
                ok,
                text,
                images,
                resources,
                ..
            } => {
                let mark = if *ok { "✓" } else { "✗" };
                let first = text.lines().next().unwrap_or_default();
                let more = if text.lines().nth(1).is_some() {
                    " …"
                } else {
                    ""
                };
                let images = if !images.is_empty() {
                    format!(" (+{} image(s))", images.len())
                } else {
                    String::new()
                };
                let line = format!(
                    "{mark} {} {}{more}{images}",
                    calls.tool_name(call_id),
                    clip(first, 200)
                );
                eprintln!("{}", if *ok { err.dim(&line) } else { err.red(&line) });
                // Links the person may want to open (`lrg resources --read`).
                for r in resources.iter().take(10) {
                    let name = r.name.as_deref().unwrap_or(&r.uri);
                    let how = if r.embedded { "embedded" } else { "link" };
                    eprintln!(
                        "{}",
                        err.dim(&format!(
                            "  ↳ {how}: {} <{}> ({})",
                            clip(name, 80),
                            r.uri,
                            r.server
                        ))
                    );
                }
            }
            Event::ResourceUpdated { server, uri } => {
                self.finish_line();
                eprintln!(
                    "{} {}",
                    err.dim("↻"),
                    err.dim(&format!("resource updated: {uri} ({server})"))
                );
            }
            Event::ToolSkipped {
                call_id,
                reason,
                note,
            } => {
                let why = reason.describe();
                let note = note
                    .as_deref()
                    .map(|n| format!(" ({n})"))
                    .unwrap_or_default();
                eprintln!(
                    "{} {} skipped: {why}{note}",
                    err.red("⊘"),
                    calls.tool_name(call_id)
                );
            }
            Event::Warning { message, retrying } => {
                self.finish_line();
                let again = if *retrying {
                    " (retrying; the text above is dropped)"
                } else {
                    ""
                };
                eprintln!("{} {message}{again}", err.bold("warning:"));
            }
            Event::Error { message, .. } => {
                self.finish_line();
                eprintln!("{} {message}", err.red("error:"));
            }
            Event::Stopped => {
                self.finish_line();
                eprintln!("{}", err.dim("stopped"));
            }
            Event::Compacted { summary } => {
                self.finish_line();
                eprintln!(
                    "{}\n{}",
                    err.dim("conversation compacted; the summary:"),
                    err.dim(summary)
                );
            }
            Event::Cleared => eprintln!("{}", err.dim("conversation cleared")),
            Event::HookDecision {
                hook,
                event,
                decision,
                reason,
                call_id,
            } => {
                self.finish_line();
                let about = call_id
                    .as_deref()
                    .map(|id| format!(" on {}", calls.tool_name(id)))
                    .unwrap_or_default();
                let reason = reason
                    .as_deref()
                    .map(|r| format!(": {}", clip(r, 300)))
                    .unwrap_or_default();
                let line = format!(
                    "hook {hook} ({}) {}{about}{reason}",
                    event.as_str(),
                    decision.as_str()
                );
                let refused = matches!(
                    decision,
                    lrg_chat::hooks::HookDecisionKind::Deny
                        | lrg_chat::hooks::HookDecisionKind::Block
                );
                eprintln!(
                    "{} {}",
                    err.bold("⚑"),
                    if refused {
                        err.red(&line)
                    } else {
                        err.dim(&line)
                    }
                );
            }
            Event::ModelLoading { model, progress } => {
                self.finish_line();
                self.loading.update(model, *progress);
            }
            event @ (Event::Question { .. }
            | Event::QuestionAnswered { .. }
            | Event::ServerLog { .. }
            | Event::ToolProgress { .. })
                if self.progress.worth_showing(event) =>
            {
                self.finish_line();
                let name = |id: &str| calls.tool_name(id);
                if let Some(line) = crate::questions::render(event, err, &name) {
                    eprintln!("{line}");
                }
            }
            Event::SamplingRequest {
                server,
                model,
                messages,
                max_tokens,
                ..
            } => {
                self.finish_line();
                let last = messages
                    .last()
                    .map(|m| clip(&m.text, 120))
                    .unwrap_or_default();
                eprintln!(
                    "{} {} {}",
                    err.bold("⇢"),
                    err.dim(&format!(
                        "{server} asks {model} ({} message(s), up to {max_tokens} tokens):",
                        messages.len()
                    )),
                    err.dim(&format!("\"{last}\""))
                );
            }
            Event::SamplingDone {
                outcome,
                text,
                usage,
                reason,
                ..
            } => {
                self.finish_line();
                let mut line = format!("sampling {}", outcome.as_str());
                if let Some(text) = text {
                    line.push_str(&format!(": \"{}\"", clip(text, 120)));
                }
                if let Some(u) = usage {
                    line.push_str(&format!(
                        " ({} + {} tokens)",
                        u.prompt_tokens, u.completion_tokens
                    ));
                }
                if let Some(reason) = reason {
                    line.push_str(&format!(": {reason}"));
                }
                let answered = *outcome == lrg_chat::session::sampling::SamplingOutcome::Answered;
                eprintln!(
                    "{} {}",
                    err.bold("⇠"),
                    if answered {
                        err.dim(&line)
                    } else {
                        err.red(&line)
                    }
                );
            }
            Event::ToolsFound { query, names } => {
                self.finish_line();
                let what = match query {
                    Some(q) => format!("tool search \"{}\"", clip(q, 120)),
                    None => "tools for this message".to_owned(),
                };
                let found = if names.is_empty() {
                    "nothing found".to_owned()
                } else {
                    names.join(", ")
                };
                eprintln!("{} {}", err.dim("⌕"), err.dim(&format!("{what}: {found}")));
            }
            Event::ModelSwitched { from, to } => {
                self.finish_line();
                eprintln!(
                    "{}",
                    err.dim(&format!("── switched from {from} to {to} ──"))
                );
            }
            Event::AgentCommands { commands } => {
                self.finish_line();
                eprintln!("{}", err.dim(&agent_commands_line(commands)));
            }
            Event::Plan { entries } => {
                self.finish_line();
                eprintln!("{}", err.bold("plan:"));
                for entry in entries {
                    let mark = match entry.status {
                        lrg_chat::events::PlanStatus::Completed => "✓",
                        lrg_chat::events::PlanStatus::InProgress => "▸",
                        _ => "○",
                    };
                    eprintln!("  {mark} {}", clip(&entry.content, 200));
                }
            }
            Event::Permissions {
                saved: false,
                save_error,
                ..
            } => {
                self.finish_line();
                let why = match save_error {
                    Some(e) => format!("the permission settings could not be saved: {e}"),
                    None => "the permission settings changed for this run only (not saved)".into(),
                };
                eprintln!("{} {why}", err.bold("note:"));
            }
            _ => {}
        }
    }
}

impl Human {
    /// Reply text on stdout.
    fn print_reply(&mut self, text: &str) {
        if !text.is_empty() {
            out::print(text);
            self.out_at_line_start = text.ends_with('\n');
        }
    }

    fn close_reasoning(&mut self) {
        if self.reasoning_open {
            eprintln!();
            self.reasoning_open = false;
        }
        self.reply_open = false;
    }
}

/// Resolves once `call_id` no longer waits for an answer: woken by the
/// session's events after the question (numbered `asked`), not by polling.
async fn withdrawn(session: &ChatSession, call_id: &str, asked: u64) {
    let mut events = session.subscribe(asked);
    loop {
        // Checked after subscribing, so no change can slip in between.
        if !session.pending_approvals().iter().any(|id| id == call_id) {
            return;
        }
        if events.next().await.is_none() {
            return;
        }
    }
}

/// Resolves once question `id` is no longer open (see [`withdrawn`]).
async fn question_closed(session: &ChatSession, id: u64, asked: u64) {
    let mut events = session.subscribe(asked);
    loop {
        if !session.pending_questions().contains(&id) {
            return;
        }
        if events.next().await.is_none() {
            return;
        }
    }
}

fn class_name(class: ToolClass) -> &'static str {
    match class {
        ToolClass::Read => "read",
        ToolClass::Change => "change",
        ToolClass::Destructive => "destructive",
    }
}

/// A printer working through a session's events on a task of its own.
pub struct Running {
    task: tokio::task::JoinHandle<Printer>,
    printed: tokio::sync::watch::Receiver<u64>,
    stop: tokio::sync::watch::Sender<bool>,
}

impl Running {
    /// Print the events of `printer`'s session after `after` (a resumed
    /// chat's history is not printed again).
    pub fn start_after(mut printer: Printer, after: u64) -> Self {
        let mut events = printer.session.subscribe(after);
        let (tx, printed) = tokio::sync::watch::channel(after);
        let (stop, mut stop_rx) = tokio::sync::watch::channel(false);
        let task = tokio::spawn(async move {
            loop {
                tokio::select! {
                    biased;
                    entry = events.next() => {
                        let Some(entry) = entry else { break };
                        printer.handle(&entry).await;
                        if let Some(seq) = entry.seq {
                            let _ = tx.send(seq);
                        }
                    }
                    _ = stop_rx.changed() => break,
                }
            }
            printer
        });
        Self {
            task,
            printed,
            stop,
        }
    }

    /// Wait until every numbered event up to `seq` has been shown.
    pub async fn caught_up(&mut self, seq: u64) {
        // An error means the printer ended (the log is gone): nothing more
        // will be shown anyway.
        let _ = self.printed.wait_for(|printed| *printed >= seq).await;
    }

    /// Wait until everything published so far has been shown, then stop.
    pub async fn finish(mut self, session: &ChatSession) {
        self.caught_up(session.events().last_seq()).await;
        let _ = self.stop.send(true);
        if let Ok(mut printer) = self.task.await {
            printer.finish_line();
        }
    }
}

/// The line that tells the agent's slash commands (also what `/help` in
/// `lrg chat` lists).
pub(crate) fn agent_commands_line(commands: &[lrg_chat::events::AgentCommand]) -> String {
    if commands.is_empty() {
        return "the agent takes no slash commands".to_owned();
    }
    let names: Vec<String> = commands.iter().map(|c| format!("/{}", c.name)).collect();
    format!("the agent takes: {}", names.join(", "))
}
