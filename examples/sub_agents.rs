//! A parent delegating three tasks to sub-agents that run at the same time,
//! and reacting to each answer as it comes back.
//!
//! `ChatSessionBuilder::sub_agents` offers the model `spawn_sub_agent`: the
//! parent's model hands out one task per module of a small code base
//! (count its open TODOs). Each task runs as a session of its own, with the
//! parent's model, tools and permissions and a history of its prompt only;
//! the spawn returns at once, so the parent answers while they work. Each
//! sub-agent's final answer comes back into the parent's history as a
//! `sub_agent_result` call with its result, and the parent gets a turn of
//! its own (`busy` with `autonomous: true`) to react, one per answer, in
//! the order they finish. `wait_settled` waits until nothing is left to do.
//!
//! The models are scripted (offline): one script for the parent and one per
//! sub-agent, picked by the conversation's first message (a sub-agent's
//! conversation starts with its task's prompt). With a real model, put its
//! `ChatModel` where the router is: parent and sub-agents share it.
//!
//! Run it with `cargo run -p lrg-examples --example sub_agents`.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use lrg_chat::events::{Event, LogEntry};
use lrg_chat::sub_agents::SubAgents;
use lrg_chat::{ChatSession, FixedModel, ToolHost};
use lrg_providers::{
    ChatModel, ModelInfo, ModelLocation, ScriptedCall, ScriptedModel, ScriptedTurn,
    ToolAnnotations, TurnRequest, TurnStream,
};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use tokio_util::sync::CancellationToken;

/// The modules the tasks are about, and their sources.
fn sources() -> BTreeMap<String, String> {
    BTreeMap::from([
        (
            "api.rs".to_owned(),
            "fn list() {} // TODO: paginate\nfn get() {} // TODO: 404 on a missing id".to_owned(),
        ),
        (
            "store.rs".to_owned(),
            "fn save() {} // TODO: fsync the folder too".to_owned(),
        ),
        ("ui.rs".to_owned(), "fn draw() {}".to_owned()),
    ])
}

#[derive(Debug, Deserialize, JsonSchema)]
struct ReadFile {
    /// The file's name, e.g. `api.rs`.
    path: String,
}

fn tools() -> Result<ToolHost, lrg_chat::tools::AddToolError> {
    let host = ToolHost::new();
    let files = Arc::new(sources());
    let read_only = ToolAnnotations {
        read_only_hint: Some(true),
        ..Default::default()
    };
    host.add_fn(
        "read_file",
        "Read a source file",
        read_only,
        move |args: ReadFile| {
            let files = files.clone();
            async move {
                files
                    .get(&args.path)
                    .cloned()
                    .ok_or_else(|| format!("no file {}", args.path))
            }
        },
    )?;
    Ok(host)
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

fn reply(text: &str) -> ScriptedTurn {
    ScriptedTurn {
        text: Some(text.to_owned()),
        ..Default::default()
    }
}

/// The prompt of the sub-agent for `file`: what starts its conversation.
fn task_prompt(file: &str) -> String {
    format!("Count the TODO comments in {file} and list them.")
}

/// Sends each turn to the script of the conversation's first message: a
/// sub-agent's task prompt, or else the parent's.
struct Router {
    parent: ScriptedModel,
    sub_agents: HashMap<String, ScriptedModel>,
}

impl ChatModel for Router {
    fn info(&self) -> ModelInfo {
        ModelInfo::new("script", "router", ModelLocation::Local)
    }

    fn turn(&self, request: TurnRequest, cancel: CancellationToken) -> TurnStream {
        let first = request
            .messages
            .first()
            .map(|m| m.text())
            .unwrap_or_default();
        self.sub_agents
            .get(&first)
            .unwrap_or(&self.parent)
            .turn(request, cancel)
    }
}

fn router() -> Router {
    let tasks: Vec<serde_json::Value> = ["api.rs", "store.rs", "ui.rs"]
        .iter()
        .map(|file| json!({"description": format!("TODOs in {file}"), "prompt": task_prompt(file)}))
        .collect();
    let parent = ScriptedModel::named(
        "parent",
        vec![
            call("spawn_sub_agent", json!({ "tasks": tasks })),
            reply("Three helpers are counting, one per module."),
            // One turn per answer, in the order they come back.
            reply("One module done."),
            reply("Two modules done."),
            reply("All three are in: api.rs has 2 TODOs, store.rs 1, ui.rs none."),
        ],
    );
    let sub_agent = |file: &str, answer: &str| {
        (
            task_prompt(file),
            ScriptedModel::named(
                file,
                vec![call("read_file", json!({ "path": file })), reply(answer)],
            ),
        )
    };
    Router {
        parent,
        sub_agents: HashMap::from([
            sub_agent("api.rs", "api.rs: 2 TODOs (paginate; 404 on a missing id)"),
            sub_agent("store.rs", "store.rs: 1 TODO (fsync the folder too)"),
            sub_agent("ui.rs", "ui.rs: no TODOs"),
        ]),
    }
}

/// Print one numbered event of the parent's stream.
fn show(entry: &LogEntry, results: &mut HashMap<String, String>) {
    match &entry.event {
        Event::UserMessage { text, .. } => println!("user: {text}"),
        Event::SubtaskStart {
            sub_session_id,
            description,
            ..
        } => println!("  spawned {sub_session_id}: {description}"),
        // A sub-agent's answer enters the parent's history as a call of
        // `sub_agent_result`, done at once with the answer as its result.
        Event::ToolCall {
            call_id,
            tool,
            arguments,
            ..
        } if tool == lrg_chat::sub_agents::SUB_AGENT_RESULT => {
            let what = arguments["description"].as_str().unwrap_or("?");
            results.insert(call_id.clone(), what.to_owned());
        }
        Event::ToolCall { tool, .. } => println!("  parent calls {tool}"),
        Event::ToolDone { call_id, text, .. } => match results.get(call_id) {
            Some(what) => println!("  answer for \"{what}\": {text}"),
            None => {
                let first: String = text.chars().take(72).collect();
                println!("  done: {first}…");
            }
        },
        Event::Busy {
            busy: true,
            autonomous: true,
            ..
        } => println!("(the parent takes a turn to react)"),
        Event::AssistantTurn { text, .. } if !text.is_empty() => println!("parent: {text}"),
        _ => {}
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let session = ChatSession::builder(Arc::new(FixedModel::new(router())))
        .tools(Arc::new(tools()?))
        .sub_agents(SubAgents::default())
        .build();

    let mut events = session.subscribe(0);
    let mut results = HashMap::new();
    let mut last = 0;
    session.send("How many TODOs are left in each module?")?;
    // Print the parent's events as they come, until nothing is left to do:
    // the message, the three sub-agents, and a reaction to each answer.
    let mut settled = std::pin::pin!(session.wait_settled());
    loop {
        tokio::select! {
            biased;
            Some(entry) = events.next() => {
                if let Some(seq) = entry.seq {
                    last = seq;
                    show(&entry, &mut results);
                }
            }
            () = &mut settled => break,
        }
    }
    for entry in session.events().since(last) {
        show(&entry, &mut results);
    }

    println!("sub-agents:");
    for agent in session.sub_agents() {
        println!("  {} ({:?}): {}", agent.id, agent.status, agent.description);
    }
    if results.len() != 3 {
        return Err(format!("expected three answers, got {}", results.len()).into());
    }
    Ok(())
}
