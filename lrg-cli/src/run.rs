//! `lrg run`: one message, run to completion.

use lrg_chat::TurnOutcome;
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
    } else {
        Format::Plain
    };
    let printer = Printer::new(format, session.clone(), approver);
    printer.header(&ready.info.id());
    let running = Running::start_after(printer, ready.shown);
    let ctrl_c = CtrlC::watch(session.clone(), Exit::Stopped);

    let outcome = match session.send(prompt.as_str()) {
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

    match outcome {
        TurnOutcome::Completed { text } => {
            if let Some(path) = &args.output_last_message {
                std::fs::write(path, &text)
                    .map_err(|e| usage!("--output-last-message {}: {e}", path.display()))?;
            }
            if let Some(replay) = &ready.replay {
                crate::resolve::check_replay_finished(replay)?;
            }
            Ok(Exit::Replied)
        }
        // The error was shown as an event (stderr, or a JSON line).
        TurnOutcome::Failed { .. } => Ok(Exit::Failed),
        _ => Ok(Exit::Stopped),
    }
}

/// With sub-agents, the run ends when they have all answered and the model
/// has reacted to each: the final answer is the last reaction's.
async fn settle(session: &lrg_chat::ChatSession, outcome: TurnOutcome) -> TurnOutcome {
    session.wait_settled().await;
    let TurnOutcome::Completed { text } = outcome else {
        return outcome;
    };
    let last = session
        .history()
        .iter()
        .rev()
        .find(|m| m.role == lrg_providers::Role::Assistant && m.tool_calls().next().is_none())
        .map(|m| m.text())
        .unwrap_or(text);
    TurnOutcome::Completed { text: last }
}
