//! `lrg chat`: an interactive chat in the terminal.

use std::collections::VecDeque;
use std::io::{IsTerminal as _, Write as _};
use std::sync::Arc;

use lrg_chat::store::ModelBinding;
use lrg_chat::{SessionError, TurnHandle, TurnOutcome};
use tokio::sync::Mutex;

use crate::approve::Approver;
use crate::cli::ChatArgs;
use crate::exit::{CliError, Exit};
use crate::input::{self, Lines, Message};
use crate::line_editor::Completions;
use crate::printer::{Format, Printer, Running};
use crate::setup::{self, SessionFlags};
use crate::signals::CtrlC;
use crate::style::Style;

/// The chat's commands: `/help` lists them, Tab completes them.
const COMMANDS: &[(&str, &str)] = &[
    ("/retry", "answer the last message again"),
    ("/clear", "start over with an empty conversation"),
    (
        "/compact",
        "replace the conversation with a summary (frees context)",
    ),
    ("/models", "list the models reachable now (also /model)"),
    (
        "/model PROVIDER:MODEL",
        "carry the chat over to another model (or start a new one)",
    ),
    (
        "/prompt SERVER/NAME key=value …",
        "send a tool server's prompt, expanded (`lrg prompts` lists them)",
    ),
    ("/help", "show this help"),
    ("/quit", "leave (or Ctrl-D)"),
];

/// The slash commands the chat's agent (an ACP agent as the model) last
/// said it takes; none for other models.
fn agent_commands(session: &lrg_chat::ChatSession) -> Vec<lrg_chat::events::AgentCommand> {
    session
        .events()
        .entries()
        .iter()
        .rev()
        .find_map(|e| match &e.event {
            lrg_chat::events::Event::AgentCommands { commands } => Some(commands.clone()),
            _ => None,
        })
        .unwrap_or_default()
}

/// Whether `line` (`/name args`) names one of the agent's commands.
fn is_agent_command(session: &lrg_chat::ChatSession, line: &str) -> bool {
    let Some(name) = line
        .strip_prefix('/')
        .and_then(|l| l.split_whitespace().next())
    else {
        return false;
    };
    agent_commands(session).iter().any(|c| c.name == name)
}

/// What `/help` prints.
fn help(editor: bool) -> String {
    let mut text = String::from("Type a message and press Enter. Commands:\n");
    for (command, what) in COMMANDS {
        text.push_str(&format!("  {command:<8}  {what}\n"));
    }
    if editor {
        text.push_str(
            "Alt+Enter (or a trailing \\) starts a new line; Up/Down and Ctrl-R search \
             earlier messages; Tab completes commands and tool names. What you type while \
             the model answers is held and sent after its reply.\n",
        );
    }
    text.push_str("Ctrl-C stops the model's turn; a second Ctrl-C (or one at the prompt) quits.");
    text
}

/// Chat until the person quits.
pub async fn chat(args: ChatArgs) -> Result<Exit, CliError> {
    let ready = setup::session(SessionFlags {
        model: &args.model,
        tools: &args.tools,
        permissions: &args.permissions,
        system: args.system.as_deref(),
        max_steps: args.max_steps,
        record: args.record.as_ref(),
        strict_tools: false,
        saved: &args.saved,
        generation: args.generation.settings(),
        sub_agents: args.sub_agents,
        limits: args.limits,
        context: &args.context,
    })
    .await?;
    let session = ready.session.clone();
    // Chosen by name on the command line (and said where it goes): no
    // question for the provider the chat starts on.
    if ready.info.location == lrg_providers::ModelLocation::Cloud {
        session.consent_to_cloud(&ready.info.provider, false);
    }
    let completions = Completions {
        commands: COMMANDS
            .iter()
            .map(|(c, _)| c.split(' ').next().unwrap_or(c).to_string())
            .collect(),
        tools: ready
            .host
            .tools()
            .into_iter()
            .map(|t| t.spec.name)
            .collect(),
        prompts: prompt_names(&ready.host).await,
    };
    let lines = Arc::new(Mutex::new(Lines::terminal(completions)));
    let holder = lines.lock().await.holder();
    let editor = holder.is_some();
    let approver = if args.yes {
        Approver::Everyone
    } else if input::interactive() {
        Approver::Person(lines.clone())
    } else {
        Approver::Nobody
    };
    // The person answers tool servers' questions field by field.
    let answerer = if input::interactive() {
        crate::questions::Answerer::Person(lines.clone())
    } else {
        crate::questions::Answerer::Nobody
    };
    let style = Style {
        ansi: std::io::stderr().is_terminal(),
    };
    let tools = ready.host.tools().len();
    eprintln!(
        "{}",
        style.dim(&format!(
            "lrg chat — {}, {tools} tool(s). /help for commands, Ctrl-D to quit.",
            ready.info.id()
        ))
    );
    if ready.shown > 0
        && let Some(recap) = crate::recap::recap(&session.history(), style)
    {
        eprint!("{recap}");
    }
    let mut running = Running::start_after(
        Printer::new(Format::Plain, session.clone(), approver).with_answerer(answerer),
        ready.shown,
    );
    let ctrl_c = CtrlC::watch(session.clone(), Exit::Replied);
    // Messages typed while a reply streamed, sent in turn after it; and the
    // line left unfinished, to go on with at the prompt.
    let mut queued: VecDeque<String> = VecDeque::new();
    let mut initial = String::new();

    loop {
        let line = if let Some(line) = queued.pop_front() {
            eprintln!("{} {line} {}", style.bold(">"), style.dim("(queued)"));
            line
        } else {
            if !editor {
                eprint!("{} ", style.bold(">"));
                let _ = std::io::stderr().flush();
            }
            let read = lines
                .lock()
                .await
                .message("> ", &std::mem::take(&mut initial))
                .await;
            match read {
                Message::Line(line) => line,
                Message::End => {
                    eprintln!();
                    break;
                }
                // Ctrl-C at the prompt: stop what runs on its own (a
                // reaction to a sub-agent), else quit.
                Message::Interrupted if session.is_busy() => {
                    session.stop_with_sub_agents();
                    eprintln!("{}", style.dim("stopping"));
                    continue;
                }
                Message::Interrupted => break,
            }
        };
        let line = line.trim();
        let started: Result<TurnHandle, SessionError> = match line {
            "" => continue,
            "/help" | "/?" => {
                eprintln!("{}", help(editor));
                let commands = agent_commands(&session);
                if !commands.is_empty() {
                    eprintln!("The agent's own commands (sent to it as typed):");
                    for c in &commands {
                        let name = match &c.hint {
                            Some(hint) => format!("/{} {hint}", c.name),
                            None => format!("/{}", c.name),
                        };
                        eprintln!("  {name:<8}  {}", c.description);
                    }
                }
                continue;
            }
            "/quit" | "/exit" | "/q" => break,
            "/model" | "/models" => {
                eprint!("{}", crate::models::catalog_table(&args.model, false).await);
                continue;
            }
            cmd if cmd.starts_with("/model ") => {
                let target = cmd.trim_start_matches("/model").trim();
                if let Err(e) = switch(&args, &ready, &lines, target).await {
                    eprintln!("{}", style.red(&e));
                }
                continue;
            }
            cmd if cmd == "/prompt" || cmd.starts_with("/prompt ") => {
                let rest = cmd.trim_start_matches("/prompt").trim();
                match crate::mcp_prompts::expand(&ready.host, rest).await {
                    Ok(input) => {
                        eprintln!("{} {}", style.dim("prompt:"), input.text);
                        session.send(input)
                    }
                    Err(e) => {
                        eprintln!("{}", style.red(&e));
                        continue;
                    }
                }
            }
            "/retry" => session.retry_last(),
            // An agent that has a compact command of its own does it.
            "/compact" if agent_commands(&session).iter().any(|c| c.name == "compact") => {
                send_after_reactions(&session, line).await
            }
            "/compact" => session.compact(),
            "/clear" => {
                if let Err(e) = session.clear() {
                    eprintln!("{}", style.red(&e.to_string()));
                }
                continue;
            }
            // The agent's own commands pass through as they were typed.
            cmd if is_agent_command(&session, cmd) => send_after_reactions(&session, cmd).await,
            cmd if cmd.starts_with('/') && !cmd.contains(char::is_whitespace) => {
                eprintln!("unknown command {cmd}; /help lists them");
                continue;
            }
            text => send_after_reactions(&session, text).await,
        };
        let handle = match started {
            Ok(h) => h,
            Err(e) => {
                eprintln!("{}", style.red(&e.to_string()));
                continue;
            }
        };
        ctrl_c.rearm();
        if let Some(holder) = &holder {
            holder.hold();
        }
        let outcome = handle.await;
        running.caught_up(session.events().last_seq()).await;
        if let Some(holder) = &holder {
            let held = holder.release().await;
            if matches!(outcome, TurnOutcome::Stopped) {
                // Nothing typed is sent unasked after a stop: it waits at
                // the prompt.
                let mut back: Vec<String> = queued.drain(..).chain(held.queued).collect();
                if !back.is_empty() {
                    eprintln!(
                        "{}",
                        style.dim("(what you typed during the turn is back at the prompt)")
                    );
                }
                back.push(held.partial);
                back.retain(|l| !l.is_empty());
                initial = back.join("\n");
            } else {
                queued.extend(held.queued);
                initial = held.partial;
            }
        }
        if crate::out::stopped() {
            // The printer stopped the turn: nobody reads the replies.
            break;
        }
        if let TurnOutcome::StepsExhausted = outcome {
            eprintln!(
                "{}",
                style.dim("(the step limit ran out before a final answer; say how to go on)")
            );
        }
    }
    // Sub-agents still at work answer, and the model reacts, before the chat
    // ends (Ctrl-C stops them).
    if args.sub_agents {
        session.wait_settled().await;
    }
    running.finish(&session).await;
    drop(ctrl_c);
    ready.host.shutdown().await;
    Ok(Exit::Replied)
}

/// `/model PROVIDER:MODEL`: connect it, then ask what to do with the
/// conversation: carry it over to the new model, or (for a chat that is not
/// kept) leave it behind and start a new one. A kept chat is never emptied
/// here: a new chat under its key is `lrg chat --session KEY --replace`,
/// which archives the old one.
async fn switch(
    args: &ChatArgs,
    ready: &setup::Ready,
    lines: &Mutex<Lines>,
    target: &str,
) -> Result<(), String> {
    // An external agent (`acp:`) is not a provider: resolved as --model is.
    let model = if target.starts_with("acp:") {
        let mut model_args = args.model.clone();
        model_args.model = Some(target.to_string());
        let resolved = crate::resolve::resolve(&model_args, None)
            .await
            .map_err(|e| e.to_string())?;
        resolved.model
    } else {
        let model_ref: lrg_providers::ModelRef = target.parse().map_err(|e| format!("{e}"))?;
        if args.model.local_only && model_ref.provider.is_cloud() {
            return Err(format!(
                "--local-only: {model_ref} would send the conversation to a cloud"
            ));
        }
        crate::providers::connect(&model_ref, &args.model)
            .await
            .map_err(|e| e.to_string())?
    };
    let info = model.info();
    let check = ready
        .session
        .switch_check(&info)
        .map_err(|e| e.to_string())?;
    let kept = ready.session.store_id().is_some();
    let cloud = info.sends_to.as_ref().filter(|_| check.to_cloud);
    let always = match cloud {
        Some(host) if !ready.session.cloud_consented(&info.provider) => {
            Some(ask_cloud(lines, &info, host).await?)
        }
        _ => None,
    };
    let choice = if check.drops_history || kept {
        let to_cloud = cloud.map_or_else(String::new, |host| format!(" (it is sent to {host})"));
        if kept {
            eprint!(
                "Carry this kept conversation over to {}{to_cloud}? \
                 [c = carry over, Enter = keep the current model] \
                 (for a new chat under this key instead: lrg chat --session KEY --replace --model {}) ",
                info.id(),
                info.id()
            );
        } else {
            eprint!(
                "Carry this conversation over to {}{to_cloud}, or start a new chat on it \
                 (this one is left behind)? [c = carry over, n = new chat, Enter = keep the \
                 current model] ",
                info.id()
            );
        }
        let _ = std::io::stderr().flush();
        let answer = lines.lock().await.next().await.unwrap_or_default();
        match answer.trim().to_ascii_lowercase().as_str() {
            "c" | "carry" => Switch::CarryOver,
            "n" | "new" if !kept => Switch::NewChat,
            _ => return Err("kept the current model".into()),
        }
    } else {
        // Nothing said yet and no cloud: nothing to lose and nowhere new it goes.
        Switch::NewChat
    };
    match choice {
        Switch::CarryOver => {
            ready
                .session
                .carry_over(&ready.source, model, ModelBinding::new(info.id()))
                .await
                .map_err(|e| e.to_string())?;
            eprintln!("Carried over to {}.", info.id());
        }
        Switch::NewChat => {
            ready
                .session
                .switch_model(&ready.source, model)
                .map_err(|e| e.to_string())?;
            eprintln!("New chat on {}.", info.id());
        }
    }
    if let Some(always) = always {
        consent(ready, &info.provider, always);
    }
    if let Some(host) = &info.sends_to {
        eprintln!("This conversation is sent to {host}");
    }
    Ok(())
}

/// Ask whether the conversation may go to `info`'s cloud at `host`: once
/// per provider, as the page asks. `Ok(true)`: "don't ask again" for the
/// provider; an `Err` keeps the current model.
async fn ask_cloud(
    lines: &Mutex<Lines>,
    info: &lrg_providers::ModelInfo,
    host: &str,
) -> Result<bool, String> {
    let provider = &info.provider;
    eprint!(
        "{} runs in {provider}'s cloud: this conversation would be sent to {host}. Send it \
         there? [y = yes, a = yes and don't ask again for {provider}, Enter = no] ",
        info.id()
    );
    let _ = std::io::stderr().flush();
    let answer = lines.lock().await.next().await.unwrap_or_default();
    match answer.trim().to_ascii_lowercase().as_str() {
        "y" | "yes" => Ok(false),
        "a" | "always" => Ok(true),
        _ => Err("kept the current model".into()),
    }
}

/// Remember the consent: for this chat, and with `always` in the
/// permission settings (said when they could not be written).
fn consent(ready: &setup::Ready, provider: &str, always: bool) {
    match ready.session.consent_to_cloud(provider, always) {
        Some(lrg_chat::permissions::SaveStatus::Failed(e)) => {
            eprintln!("lrg: warning: could not save \"don't ask again for {provider}\": {e}");
        }
        Some(lrg_chat::permissions::SaveStatus::NotBound) => {
            eprintln!(
                "(\"don't ask again for {provider}\" lasts until lrg chat ends: permissions are not saved)"
            );
        }
        _ => {}
    }
}

/// What `/model` does with the conversation.
enum Switch {
    /// Moves it to the new model (native parts dropped).
    CarryOver,
    /// Leaves it behind (a chat that is not kept only).
    NewChat,
}

/// Send `text`, after any turn the model is taking on its own to react to a
/// sub-agent's answer (the person's own messages are awaited in the loop, so
/// that is the only work that can be running here).
/// `SERVER/NAME` of every MCP prompt, for Tab after `/prompt `; a server
/// slow to list them does not hold the chat up (its prompts still work,
/// typed out).
async fn prompt_names(host: &lrg_chat::ToolHost) -> Vec<String> {
    match tokio::time::timeout(std::time::Duration::from_secs(5), host.prompts()).await {
        Ok(listing) => listing
            .items
            .iter()
            .map(|p| format!("{}/{}", p.server, p.name))
            .collect(),
        Err(_) => Vec::new(),
    }
}

async fn send_after_reactions(
    session: &lrg_chat::ChatSession,
    text: &str,
) -> Result<TurnHandle, SessionError> {
    loop {
        match session.send(text) {
            Err(SessionError::Busy) => session.wait_idle().await,
            other => return other,
        }
    }
}
