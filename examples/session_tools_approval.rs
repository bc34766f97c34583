//! Rust functions as tools, and an approver callback: reads run, a change
//! waits for a yes on stdin.
//!
//! The tools are plain async functions over an in-memory file table
//! (`ToolHost::add_fn`, with the input schema derived from the argument
//! struct). Their MCP-style annotations decide the permission class:
//! `list_files` is read-only, `write_file` changes things. The session asks
//! about every call (mode `ask_all`) and its `Approver`
//! (`ChatSessionBuilder::approver`) answers: a read is allowed at once, a
//! change is put to the person on stdin. The approver gets everything the
//! question is about (tool, class, arguments, why it asks, warnings, the
//! answers allowed) in its `ApprovalRequest`: nothing to look up in earlier
//! events. The session takes care of the rest: a stop withdraws the
//! question, and one nobody answers within the approval timeout is denied.
//! The end of stdin is a denial, so the example finishes by itself when run
//! with stdin closed (`</dev/null`, as CI does).
//!
//! The model is scripted (offline); with a real one, put its `ChatModel`
//! where the `ScriptedModel` is.
//!
//! Run it with `cargo run -p lrg-examples --example session_tools_approval`.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::future::BoxFuture;
use lrg_chat::events::Event;
use lrg_chat::tools::{NoArgs, ToolClass};
use lrg_chat::{
    Answer, ApprovalRequest, Approver, ChatSession, FixedModel, Mode, PermissionSettings,
    Permissions, ToolHost, TurnOutcome,
};
use lrg_providers::{ScriptedCall, ScriptedModel, ScriptedTurn, ToolAnnotations};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use tokio::io::{AsyncBufReadExt as _, BufReader};

/// The app's own data: file name → text.
type Files = Arc<Mutex<BTreeMap<String, String>>>;

/// The arguments of `write_file`; the doc comments become the argument
/// descriptions the model sees.
#[derive(Debug, Deserialize, JsonSchema)]
struct Write {
    /// The file's name.
    path: String,
    /// Its new text.
    text: String,
}

fn call(name: &str, arguments: serde_json::Value) -> ScriptedTurn {
    ScriptedTurn {
        calls: vec![ScriptedCall {
            name: name.to_owned(),
            arguments,
        }],
        ..Default::default()
    }
}

fn tools(files: &Files) -> Result<ToolHost, lrg_chat::tools::AddToolError> {
    let host = ToolHost::new();
    let read_only = ToolAnnotations {
        read_only_hint: Some(true),
        ..Default::default()
    };
    let listed = files.clone();
    host.add_fn(
        "list_files",
        "List the files and their sizes",
        read_only,
        move |_: NoArgs| {
            let files = listed.clone();
            async move {
                let files = files.lock().unwrap_or_else(PoisonError::into_inner);
                let lines: Vec<String> = files
                    .iter()
                    .map(|(name, text)| format!("{name} ({} bytes)", text.len()))
                    .collect();
                Ok::<_, String>(lines.join("\n"))
            }
        },
    )?;
    // Not read-only, not destructive: the `change` class, which asks.
    let change = ToolAnnotations {
        read_only_hint: Some(false),
        destructive_hint: Some(false),
        ..Default::default()
    };
    let written = files.clone();
    host.add_fn("write_file", "Write a file", change, move |args: Write| {
        let files = written.clone();
        async move {
            files
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(args.path.clone(), args.text);
            Ok::<_, String>(format!("wrote {}", args.path))
        }
    })?;
    Ok(host)
}

/// Allows reads; asks the person on stdin about anything else.
struct StdinApprover {
    lines: tokio::sync::Mutex<tokio::io::Lines<BufReader<tokio::io::Stdin>>>,
}

impl Approver for StdinApprover {
    fn approve<'a>(&'a self, request: &'a ApprovalRequest) -> BoxFuture<'a, Answer> {
        Box::pin(async move {
            if request.class == ToolClass::Read {
                println!("approver: {} only reads: allowed", request.label());
                return Answer::Once;
            }
            println!(
                "approve {} {} ({:?})? [y/N]",
                request.label(),
                request.arguments,
                request.class
            );
            for warning in &request.warnings {
                println!("  note: {warning}");
            }
            // One question at a time on the terminal.
            let mut lines = self.lines.lock().await;
            match lines.next_line().await {
                Ok(Some(line)) if matches!(line.trim(), "y" | "Y" | "yes") => Answer::Once,
                Ok(Some(_)) => Answer::deny_with("the person said no"),
                // End of stdin, or stdin unreadable: nobody can answer.
                Ok(None) | Err(_) => {
                    println!("(end of stdin: denied)");
                    Answer::deny_with("nobody was there to approve it")
                }
            }
        })
    }
}

/// Print what happened to each call, from the session's events.
fn report(session: &ChatSession) {
    for entry in session.events().entries() {
        match &entry.event {
            Event::ToolCall {
                tool, arguments, ..
            } => println!("model called {tool} with {arguments}"),
            Event::ToolDone { text, ok, .. } => {
                let how = if *ok { "result" } else { "failed" };
                println!("  {how}: {}", text.replace('\n', "; "));
            }
            Event::ToolSkipped { reason, note, .. } => {
                println!(
                    "  not run ({}): {}",
                    reason.describe(),
                    note.as_deref().unwrap_or("")
                );
            }
            Event::AssistantTurn { text, .. } if !text.is_empty() => println!("model: {text}"),
            _ => {}
        }
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let files: Files = Arc::new(Mutex::new(BTreeMap::from([(
        "todo.txt".to_owned(),
        "buy milk".to_owned(),
    )])));
    let model = ScriptedModel::new(vec![
        call("list_files", json!({})),
        call(
            "write_file",
            json!({"path": "notes.txt", "text": "call the plumber"}),
        ),
        ScriptedTurn {
            text: Some("I looked at your files and asked to add notes.txt.".to_owned()),
            ..Default::default()
        },
    ]);
    let approver = StdinApprover {
        lines: tokio::sync::Mutex::new(BufReader::new(tokio::io::stdin()).lines()),
    };
    let session = ChatSession::builder(Arc::new(FixedModel::new(model)))
        .tools(Arc::new(tools(&files)?))
        // Ask about every call: the approver decides what runs by itself.
        .permissions(Arc::new(Permissions::new(PermissionSettings {
            mode: Mode::AskAll,
            ..Default::default()
        })))
        .approver(Arc::new(approver))
        // Nobody at the terminal for two minutes: the call is denied.
        .approval_timeout(Duration::from_secs(120))
        .build();

    let outcome = session
        .send("Look at my files and note that I must call the plumber.")?
        .await;
    report(&session);
    match outcome {
        TurnOutcome::Completed { .. } => {}
        other => return Err(format!("the message did not complete: {other:?}").into()),
    }
    let names: Vec<String> = files
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .keys()
        .cloned()
        .collect();
    println!("files now: {}", names.join(", "));
    Ok(())
}
