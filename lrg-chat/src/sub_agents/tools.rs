//! The three built-in tools (`spawn_sub_agent`, `list_sub_agents`,
//! `read_sub_agent`) and the name of the synthetic `sub_agent_result` call.

use lrg_providers::{ToolAnnotations, ToolSpec};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{Agent, Manager, SubAgentInfo, SubAgentStatus};
use crate::events::Event;
use crate::session::Shared;
use crate::store::SessionId;
use crate::tools::ToolOutput;
use crate::transcript::Transcript;

/// Starts sub-agents.
pub const SPAWN_SUB_AGENT: &str = "spawn_sub_agent";
/// Lists this session's sub-agents.
pub const LIST_SUB_AGENTS: &str = "list_sub_agents";
/// Reads a page of one sub-agent's transcript.
pub const READ_SUB_AGENT: &str = "read_sub_agent";
/// The synthetic call a finished sub-agent's answer enters the parent's
/// history with (never offered as a tool).
pub const SUB_AGENT_RESULT: &str = "sub_agent_result";

/// Rows of a transcript page when the model asks for none, and the most it
/// may ask for.
const DEFAULT_LIMIT: usize = 20;
const MAX_LIMIT: usize = 50;

/// Whether `name` is one of the built-in tools.
pub(crate) fn is_own(name: &str) -> bool {
    [SPAWN_SUB_AGENT, LIST_SUB_AGENTS, READ_SUB_AGENT].contains(&name)
}

/// `specs` with the three tools added (a tool of the same name from elsewhere
/// gives way: the model could not tell them apart).
pub(crate) fn with_own(mut specs: Vec<ToolSpec>) -> Vec<ToolSpec> {
    specs.retain(|s| !is_own(&s.name));
    // Spawning changes nothing by itself: every call a sub-agent makes is
    // checked by the same permissions, so asking here would only ask twice.
    let read_only = ToolAnnotations {
        read_only_hint: Some(true),
        ..Default::default()
    };
    specs.push(ToolSpec {
        name: SPAWN_SUB_AGENT.into(),
        description: "Delegate self-contained tasks to sub-agents that work in the background, \
            in parallel. Use it when the request has independent parts; do small things \
            yourself. Each sub-agent starts with only its prompt (none of this conversation), \
            has the same tools as you, and cannot spawn sub-agents. The call returns at once; \
            each sub-agent's final answer comes to you later as a `sub_agent_result`, so do not \
            wait or poll for it."
            .into(),
        input_schema: json!({
            "type": "object",
            "properties": {
                "tasks": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "properties": {
                            "description": {
                                "type": "string",
                                "description": "A few words naming the task, for the user."
                            },
                            "prompt": {
                                "type": "string",
                                "description": "Everything the sub-agent needs to do the task: it sees nothing else."
                            }
                        },
                        "required": ["description", "prompt"]
                    }
                }
            },
            "required": ["tasks"]
        }),
        annotations: read_only.clone(),
        output_schema: None,
    });
    specs.push(ToolSpec {
        name: LIST_SUB_AGENTS.into(),
        description: "List the sub-agents you spawned, with their status.".into(),
        input_schema: json!({"type": "object", "properties": {}}),
        annotations: read_only.clone(),
        output_schema: None,
    });
    specs.push(ToolSpec {
        name: READ_SUB_AGENT.into(),
        description: "Read one of your sub-agents' transcripts (its prompt, answers and tool \
            calls), a page of rows at a time."
            .into(),
        input_schema: json!({
            "type": "object",
            "properties": {
                "id": {"type": "string", "description": "The sub-agent's id."},
                "offset": {"type": "integer", "minimum": 0, "description": "First row (default 0)."},
                "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "description": "Rows (default 20)."}
            },
            "required": ["id"]
        }),
        annotations: read_only,
        output_schema: None,
    });
    specs
}

#[derive(Deserialize)]
struct Task {
    description: String,
    prompt: String,
}

#[derive(Deserialize)]
struct SpawnArgs {
    tasks: Vec<Task>,
}

#[derive(Deserialize)]
struct ReadArgs {
    id: String,
    #[serde(default)]
    offset: usize,
    #[serde(default)]
    limit: Option<usize>,
}

/// Run the built-in tool `name` with `arguments`, as the parent's call
/// `call_id`.
pub(crate) async fn call(
    manager: &Manager,
    name: &str,
    call_id: &str,
    arguments: &Value,
) -> ToolOutput {
    let Some(shared) = manager.parent.upgrade() else {
        return ToolOutput::error("The chat that spawns sub-agents has ended.");
    };
    match name {
        SPAWN_SUB_AGENT => spawn(manager, &shared, call_id, arguments).await,
        LIST_SUB_AGENTS => list(manager),
        READ_SUB_AGENT => read(manager, &shared, arguments).await,
        other => ToolOutput::error(format!("`{other}` is not a sub-agent tool.")),
    }
}

/// The arguments, or the refusal to return (what was wrong, and what was
/// expected).
fn parse<T: for<'de> Deserialize<'de>>(arguments: &Value, expected: &str) -> Result<T, String> {
    serde_json::from_value(arguments.clone())
        .map_err(|e| format!("Invalid arguments: {e}. Expected {expected}."))
}

async fn spawn(manager: &Manager, shared: &Shared, call_id: &str, arguments: &Value) -> ToolOutput {
    let expected = r#"{"tasks": [{"description": "...", "prompt": "..."}]}"#;
    let args: SpawnArgs = match parse(arguments, expected) {
        Ok(args) => args,
        Err(refusal) => return ToolOutput::error(refusal),
    };
    let config = &manager.config;
    if args.tasks.is_empty() {
        return ToolOutput::error(format!(
            "No sub-agent spawned: `tasks` is empty. Expected {expected}."
        ));
    }
    if let Some(i) = args
        .tasks
        .iter()
        .position(|t| t.description.trim().is_empty() || t.prompt.trim().is_empty())
    {
        return ToolOutput::error(format!(
            "No sub-agent spawned: task {} has an empty description or prompt; give each task both.",
            i + 1
        ));
    }
    if args.tasks.len() > config.max_per_call {
        return ToolOutput::error(format!(
            "No sub-agent spawned: {} tasks in one call, and the limit is {}. Spawn fewer, or \
             combine tasks.",
            args.tasks.len(),
            config.max_per_call
        ));
    }
    let first = first_number(manager, shared).await;
    let messages = crate::session::user_message_count(shared);
    let mut agents = manager.lock();
    if agents.per_message.0 != messages {
        agents.per_message = (messages, 0);
    }
    let used = agents.per_message.1;
    if used + args.tasks.len() > config.max_per_message {
        return ToolOutput::error(format!(
            "No sub-agent spawned: {used} already spawned for this message, and the limit is {} \
             per message. Do the rest yourself, or spawn at most {} more.",
            config.max_per_message,
            config.max_per_message.saturating_sub(used)
        ));
    }
    agents.per_message.1 += args.tasks.len();
    let mut last = agents.last.unwrap_or(first).max(first);
    let mut spawned = Vec::new();
    for task in args.tasks {
        last += 1;
        let id = manager.parent_id.sub_agent(last).to_string();
        spawned.push((id.clone(), task.description.clone()));
        agents.list.push(Agent {
            n: last,
            info: SubAgentInfo {
                id: id.clone(),
                n: last,
                description: task.description,
                status: SubAgentStatus::Queued,
                call_id: call_id.to_string(),
                started_ms: None,
                ended_ms: None,
            },
            prompt: task.prompt,
            session: None,
            ended: tokio_util::sync::CancellationToken::new(),
            stored: false,
            history: None,
        });
        agents.queue.push_back(id);
    }
    agents.last = Some(last);
    let free = config.max_concurrent.max(1).saturating_sub(agents.running);
    drop(agents);
    for (id, description) in &spawned {
        crate::session::publish(
            shared,
            Event::SubtaskStart {
                call_id: call_id.to_string(),
                sub_session_id: id.clone(),
                description: description.clone(),
            },
        );
    }
    manager.start_queued();
    let names: Vec<String> = spawned
        .iter()
        .map(|(id, d)| format!("{id} ({d})"))
        .collect();
    let mut text = format!(
        "Spawned {} sub-agent{}: {}. They work in the background; each one's final answer will \
         come to you as a `sub_agent_result` when it finishes.",
        spawned.len(),
        if spawned.len() == 1 { "" } else { "s" },
        names.join(", ")
    );
    if spawned.len() > free {
        text.push_str(&format!(
            " {} run at a time: {} queued until others finish.",
            config.max_concurrent.max(1),
            spawned.len() - free
        ));
    }
    ToolOutput::text(text)
}

/// The number after which new sub-agents are numbered: past any this
/// parent already has in the store (a resumed chat keeps its sub-agents).
async fn first_number(manager: &Manager, shared: &Shared) -> u64 {
    if let Some(last) = manager.lock().last {
        return last;
    }
    let Some((store, parent)) = crate::session::store_of(shared) else {
        return 0;
    };
    let listed = store
        .list(&crate::store::ListFilter::all())
        .await
        .unwrap_or_default();
    listed
        .iter()
        .filter(|s| s.meta.id.parent().as_ref() == Some(&parent))
        .filter_map(|s| s.meta.id.sub_agent_number())
        .max()
        .unwrap_or(0)
}

fn list(manager: &Manager) -> ToolOutput {
    let agents = manager.list();
    if agents.is_empty() {
        return ToolOutput::text("You have not spawned any sub-agents in this chat.");
    }
    let rows: Vec<Value> = agents
        .iter()
        .map(|a| json!({"id": a.id, "description": a.description, "status": a.status}))
        .collect();
    ToolOutput::text(Value::Array(rows).to_string())
}

async fn read(manager: &Manager, shared: &Shared, arguments: &Value) -> ToolOutput {
    let args: ReadArgs = match parse(arguments, r#"{"id": "...", "offset"?: 0, "limit"?: 20}"#) {
        Ok(args) => args,
        Err(refusal) => return ToolOutput::error(refusal),
    };
    let known = manager.list().into_iter().find(|a| a.id == args.id);
    let history = match manager.history(&args.id) {
        Some(history) => Some(history),
        // Released once its result came in, or one of an earlier run of
        // this chat: in the store.
        None => stored_history(shared, &args.id).await,
    };
    let Some(history) = history else {
        let ids: Vec<String> = manager.list().into_iter().map(|a| a.id).collect();
        let known = if ids.is_empty() {
            "You have none.".to_string()
        } else {
            format!("Yours: {}.", ids.join(", "))
        };
        return ToolOutput::error(format!(
            "There is no sub-agent `{}` of yours. {known}",
            args.id
        ));
    };
    let rows = Transcript::of(&history).rows;
    let limit = args.limit.unwrap_or(DEFAULT_LIMIT).clamp(1, MAX_LIMIT);
    let page: Vec<_> = rows.iter().skip(args.offset).take(limit).collect();
    let end = args.offset.saturating_add(page.len());
    let mut out = json!({
        "id": args.id,
        "status": known.as_ref().map(|a| a.status),
        "total_rows": rows.len(),
        "offset": args.offset,
        "rows": page,
    });
    if end < rows.len() {
        out["next_offset"] = json!(end);
    }
    ToolOutput::text(out.to_string())
}

/// The stored history of `id` when it is a sub-agent of this parent.
async fn stored_history(shared: &Shared, id: &str) -> Option<Vec<lrg_providers::Message>> {
    let (store, parent) = crate::session::store_of(shared)?;
    let id: SessionId = id.parse().ok()?;
    if id.parent().as_ref() != Some(&parent) {
        return None;
    }
    store.load(&id).await.ok().map(|s| s.rows)
}
