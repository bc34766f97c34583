//! Rust functions as tools, and approvals answered by the app: reads run on
//! their own, a change waits for a yes on stdin.
//!
//! The tools are plain async functions over an in-memory file table
//! (`ToolHost::add_fn`, with the input schema derived from the argument
//! struct). Their MCP-style annotations decide the permission class:
//! `list_files` is read-only, so the default mode (`auto_read`) runs it;
//! `write_file` changes things, so the session publishes `approval_needed`
//! and waits. The app answers from the session's own events: it subscribes,
//! matches `approval_needed`, asks on stdin, and calls `answer_approval`.
//! The end of stdin is a denial, so the example finishes by itself when run
//! with stdin closed (`</dev/null`, as CI does).
//!
//! The model is scripted (offline); with a real one, put its `ChatModel`
//! where the `ScriptedModel` is.
//!
//! Run it with `cargo run -p lrg-examples --example session_tools_approval`.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};

use lrg_chat::events::Event;
use lrg_chat::tools::{NoArgs, ToolHost};
use lrg_chat::{Answer, ChatSession, FixedModel, TurnOutcome};
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

/// Ask the person about one call; `None` when stdin has ended.
async fn ask(
    lines: &mut tokio::io::Lines<BufReader<tokio::io::Stdin>>,
    tool: &str,
    arguments: &serde_json::Value,
) -> Option<bool> {
    println!("approve {tool} {arguments}? [y/N]");
    match lines.next_line().await {
        Ok(Some(line)) => Some(matches!(line.trim(), "y" | "Y" | "yes")),
        // End of stdin, or stdin unreadable: nobody can answer.
        Ok(None) | Err(_) => None,
    }
}

/// Print what the session does, and answer its approval questions.
async fn watch(session: ChatSession) {
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    // `approval_needed` names only the call; its tool and arguments came
    // with the `tool_call` event before it.
    let mut calls: HashMap<String, (String, serde_json::Value)> = HashMap::new();
    let mut events = session.subscribe(0);
    while let Some(entry) = events.next().await {
        match &entry.event {
            Event::UserMessage { text, .. } => println!("user: {text}"),
            Event::ToolCall {
                call_id,
                tool,
                class,
                arguments,
                ..
            } => {
                println!("model calls {tool} ({class:?}) with {arguments}");
                calls.insert(call_id.clone(), (tool.clone(), arguments.clone()));
            }
            Event::ApprovalNeeded { call_id, .. } => {
                let (tool, arguments) = calls
                    .get(call_id)
                    .cloned()
                    .unwrap_or_else(|| ("an unknown tool".to_owned(), json!({})));
                let answer = match ask(&mut lines, &tool, &arguments).await {
                    Some(true) => Answer::Once,
                    Some(false) => Answer::Deny {
                        note: Some("the person said no".to_owned()),
                    },
                    None => {
                        println!("(end of stdin: denied)");
                        Answer::Deny {
                            note: Some("nobody was there to approve it".to_owned()),
                        }
                    }
                };
                // An error here means the question is gone (the turn was
                // stopped meanwhile): nothing left to answer.
                if let Err(e) = session.answer_approval(call_id, answer) {
                    println!("could not answer: {e}");
                }
            }
            Event::ToolDone { text, ok, .. } => {
                let how = if *ok { "result" } else { "failed" };
                println!("  {how}: {}", text.replace('\n', "; "));
            }
            Event::ToolSkipped { reason, note, .. } => {
                println!("  skipped ({reason:?}): {}", note.as_deref().unwrap_or(""));
            }
            Event::AssistantTurn { text, .. } if !text.is_empty() => println!("model: {text}"),
            Event::Busy { busy: false, .. } => break,
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
    let session = ChatSession::builder(Arc::new(FixedModel::new(model)))
        .tools(Arc::new(tools(&files)?))
        .build();

    let watcher = tokio::spawn(watch(session.clone()));
    let outcome = session
        .send("Look at my files and note that I must call the plumber.")?
        .await;
    watcher.await?;
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
