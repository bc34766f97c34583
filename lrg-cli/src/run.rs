//! `lrg run`: one message, run to completion.

use std::path::Path;

use lrg_chat::{OutputSchema, TurnOutcome};
use lrg_providers::ProviderError;

use crate::approve::Approver;
use crate::cli::RunArgs;
use crate::exit::{CliError, Exit};
use crate::input::{self, Lines};
use crate::printer::{Format, Printer, Running};
use crate::setup::{self, SessionFlags};
use crate::signals::CtrlC;
use crate::usage;

/// Run `args`' message and return how it ended.
pub async fn run(args: RunArgs) -> Result<Exit, CliError> {
    // A schema that cannot be used is bad usage, said before any model is
    // contacted (or the prompt read).
    let started = std::time::Instant::now();
    let schema = args.output_schema.as_deref().map(read_schema).transpose()?;
    // A run cannot ask anyone: a server's question is declined, unless the
    // script gave the answers.
    let answerer = match &args.answers {
        Some(path) => crate::questions::Answerer::File(std::sync::Arc::new(
            crate::questions::Answers::load(path)?,
        )),
        None => crate::questions::Answerer::Nobody,
    };
    let from_stdin = !matches!(args.prompt.as_deref(), Some(p) if p != "-");
    let prompt = input::prompt(args.prompt.clone()).await?;
    let ready = setup::session(SessionFlags {
        model: &args.model,
        tools: &args.tools,
        permissions: &args.permissions,
        system: args.system.as_deref(),
        max_steps: args.max_steps,
        record: args.record.as_ref(),
        strict_tools: true,
        saved: &args.saved,
        generation: args.generation.settings(),
        sub_agents: args.sub_agents,
        limits: args.limits,
        context: &args.context,
    })
    .await?;
    let session = ready.session.clone();
    let approver = if args.yes {
        Approver::Everyone
    } else if !from_stdin && input::interactive() {
        Approver::Person(std::sync::Arc::new(tokio::sync::Mutex::new(Lines::stdin())))
    } else {
        Approver::Nobody
    };
    let format = if args.json {
        Format::Json
    } else if schema.is_some() {
        // Stdout is the validated JSON's alone.
        Format::Typed
    } else {
        Format::Plain
    };
    let printer = Printer::new(format, session.clone(), approver).with_answerer(answerer);
    printer.header(&ready.info.id());
    let running = Running::start_after(printer, ready.shown);
    let ctrl_c = CtrlC::watch(session.clone(), Exit::Stopped);

    let sent = match schema {
        Some(schema) => session.send_output(prompt.as_str(), schema),
        None => session.send(prompt.as_str()),
    };
    let outcome = match sent {
        Ok(handle) => handle.await,
        Err(e) => TurnOutcome::Failed {
            error: ProviderError::Other {
                message: e.to_string(),
            },
        },
    };
    let outcome = if args.sub_agents {
        settle(&session, outcome).await
    } else {
        outcome
    };
    running.finish(&session).await;
    drop(ctrl_c);
    ready.host.shutdown().await;
    // On stderr, so stdout stays the reply's (or the events'): with --json
    // too. Not when stdout's reader left: the run was cut short, quietly.
    if !crate::out::stopped() {
        eprintln!(
            "{}",
            crate::prices::summary_line(&session.run_spend(), started.elapsed())
        );
    }

    let name = outcome_name(&outcome);
    let result = ended(&args, &ready, outcome);
    if args.json {
        let exit = result.as_ref().map_or_else(|e| e.exit, |exit| *exit);
        outcome_line(name, exit);
    }
    result
}

/// How the message ended, as `run` returns it.
fn ended(args: &RunArgs, ready: &setup::Ready, outcome: TurnOutcome) -> Result<Exit, CliError> {
    match outcome {
        TurnOutcome::Completed { text, json } => {
            // A typed answer is its JSON, on one line: on stdout (unless
            // the events are), and as the last message.
            let text = match json.map(|j| serde_json::to_string(&j)) {
                Some(Ok(line)) => {
                    if !args.json {
                        crate::out::line(&line);
                    }
                    line
                }
                _ => text,
            };
            if let Some(path) = &args.output_last_message {
                std::fs::write(path, &text)
                    .map_err(|e| usage!("--output-last-message {}: {e}", path.display()))?;
            }
            if let Some(replay) = &ready.replay {
                crate::resolve::check_replay_finished(replay)?;
            }
            Ok(Exit::Replied)
        }
        TurnOutcome::Invalid { text, errors } => {
            let file = args.output_schema.as_deref().unwrap_or(Path::new("?"));
            Err(CliError::failed(anyhow::anyhow!(
                "the answer never matched the JSON Schema in {}: {}\nits last answer: {}",
                file.display(),
                errors.join("; "),
                crate::style::clip(text.trim(), 500)
            )))
        }
        // The error was shown as an event (stderr, or a JSON line).
        TurnOutcome::Failed { .. } => Ok(Exit::Failed),
        _ => Ok(Exit::Stopped),
    }
}

/// The outcome's name on the last `--json` line.
fn outcome_name(outcome: &TurnOutcome) -> &'static str {
    match outcome {
        TurnOutcome::Completed { .. } => "completed",
        TurnOutcome::Invalid { .. } => "invalid_answer",
        TurnOutcome::Failed { .. } => "error",
        TurnOutcome::Stopped => "stopped",
        TurnOutcome::StepsExhausted => "gave_up",
        TurnOutcome::OverBudget { .. } => "over_budget",
        TurnOutcome::Blocked { .. } => "blocked",
        _ => "ended",
    }
}

/// The last line of `--json`: how the run ended and the exit code that
/// says so, e.g. `{"type":"outcome","outcome":"completed","exit_code":0}`.
fn outcome_line(outcome: &str, exit: Exit) {
    // A struct, not a map, so `type` comes first as in every event line.
    #[derive(serde::Serialize)]
    struct Outcome<'a> {
        r#type: &'static str,
        outcome: &'a str,
        exit_code: u8,
    }
    let line = Outcome {
        r#type: "outcome",
        outcome,
        exit_code: exit as u8,
    };
    crate::out::line(serde_json::to_string(&line).unwrap_or_default());
}

/// The answer schema in `path`: a usage error naming the file and the
/// problem when it cannot be read, is not JSON, or is not a JSON Schema
/// that can be used.
pub(crate) fn read_schema(path: &Path) -> Result<OutputSchema, CliError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| usage!("--output-schema {}: cannot read it: {e}", path.display()))?;
    let value: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| usage!("--output-schema {}: not JSON: {e}", path.display()))?;
    OutputSchema::new(value).map_err(|e| usage!("--output-schema {}: {e}", path.display()))
}

/// With sub-agents, the run ends when they have all answered and the model
/// has reacted to each: the final answer is the last reaction's.
async fn settle(session: &lrg_chat::ChatSession, outcome: TurnOutcome) -> TurnOutcome {
    session.wait_settled().await;
    let TurnOutcome::Completed { text, .. } = outcome else {
        return outcome;
    };
    let last = session
        .history()
        .iter()
        .rev()
        .find(|m| m.role == lrg_providers::Role::Assistant && m.tool_calls().next().is_none())
        .map(|m| m.text())
        .unwrap_or(text);
    TurnOutcome::Completed {
        text: last,
        json: None,
    }
}
