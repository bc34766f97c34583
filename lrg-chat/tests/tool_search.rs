//! Tool search over a real (in-process) MCP server with 300 tools: the first
//! request carries at most 40 tools with `search_tools` among them, a
//! search finds `get_weather`, the next request carries it and the call
//! runs; the message itself is searched before its first turn; a deferred
//! tool called by name still runs; recall@5 over 50 labelled tasks. And the
//! per-server config: `tools.allow`/`deny`, `trust`, `autoApprove`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::session_support;
use crate::tool_search_support;

use std::sync::Arc;
use std::sync::atomic::Ordering;

use lrg_chat::events::Event;
use lrg_chat::permissions::{Mode, PermissionSettings};
use lrg_chat::tools::search::{SEARCH_TOOL, ToolIndex, ToolSearch};
use lrg_chat::tools::{McpConfig, ServerPolicy, ToolHost, Tools as _};
use lrg_chat::{ChatSession, FixedModel, Permissions, SessionConfig, TurnOutcome};
use lrg_providers::{ScriptedModel, ScriptedTurn};
use serde_json::json;
use session_support::{calls, finish, next_approval, reply};
use tool_search_support::{ManyTools, TASKS};

async fn many_tools() -> (Arc<ToolHost>, ManyTools) {
    let host = Arc::new(ToolHost::new());
    let server = ManyTools::default();
    let made = server.clone();
    host.add_in_process("many", move || made.clone())
        .await
        .unwrap();
    (host, server)
}

fn open(
    host: &Arc<ToolHost>,
    turns: Vec<ScriptedTurn>,
    mode: Mode,
    search: ToolSearch,
) -> (ChatSession, ScriptedModel) {
    let model = ScriptedModel::new(turns);
    let config = SessionConfig {
        tool_search: search,
        ..SessionConfig::default()
    };
    let session = ChatSession::builder(Arc::new(FixedModel::new(model.clone())))
        .config(config)
        .tools(host.clone())
        .permissions(Arc::new(Permissions::new(PermissionSettings {
            mode,
            ..Default::default()
        })))
        .build();
    (session, model)
}

fn names(request: &lrg_providers::TurnRequest) -> Vec<String> {
    request.tools.iter().map(|t| t.name.clone()).collect()
}

fn found(session: &ChatSession) -> Vec<(Option<String>, Vec<String>)> {
    session
        .events()
        .entries()
        .iter()
        .filter_map(|e| match &e.event {
            Event::ToolsFound { query, names } => Some((query.clone(), names.clone())),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_search_finds_a_tool_that_the_next_turn_offers_and_runs() {
    let (host, server) = many_tools().await;
    let (session, model) = open(
        &host,
        vec![
            calls(&[(SEARCH_TOOL, json!({"query": "weather forecast"}))]),
            calls(&[("get_weather", json!({"id": "Paris"}))]),
            reply("Sunny in Paris."),
        ],
        Mode::AutoRead,
        ToolSearch::Auto,
    );
    let outcome = finish(session.send("Help me plan my day").unwrap()).await;
    assert!(
        matches!(outcome, TurnOutcome::Completed { .. }),
        "{outcome:?}"
    );
    let requests = model.requests();
    let first = names(&requests[0]);
    assert!(first.len() <= 40, "{} tools offered first", first.len());
    assert!(first.contains(&SEARCH_TOOL.to_owned()), "{first:?}");
    assert!(!first.contains(&"get_weather".to_owned()), "{first:?}");
    let second = names(&requests[1]);
    assert!(second.contains(&"get_weather".to_owned()), "{second:?}");
    assert_eq!(server.calls.load(Ordering::SeqCst), 1, "get_weather ran");
    let searched = found(&session);
    let (query, tools) = searched.last().unwrap();
    assert_eq!(query.as_deref(), Some("weather forecast"));
    assert_eq!(tools[0], "get_weather", "{tools:?}");
    // A tool the chat used stays offered for its next message.
    finish(session.send("thanks").unwrap()).await;
    let later = model.requests();
    assert!(names(&later[3]).contains(&"get_weather".to_owned()));
}

#[tokio::test]
async fn the_message_itself_is_searched_before_its_first_turn() {
    let (host, _server) = many_tools().await;
    let (session, model) = open(
        &host,
        vec![reply("Let me check.")],
        Mode::AutoRead,
        ToolSearch::Auto,
    );
    finish(
        session
            .send("What's the weather forecast for Lisbon tomorrow?")
            .unwrap(),
    )
    .await;
    let first = names(&model.requests()[0]);
    assert!(first.contains(&"get_weather".to_owned()), "{first:?}");
    assert!(first.len() <= 40);
    assert_eq!(found(&session)[0].0, None, "the up-front pass has no query");
}

#[tokio::test]
async fn a_deferred_tool_called_by_name_runs_and_off_offers_all() {
    let (host, server) = many_tools().await;
    let (session, model) = open(
        &host,
        vec![
            calls(&[("count_invoice", json!({}))]),
            reply("12 invoices."),
        ],
        Mode::AutoRead,
        ToolSearch::Auto,
    );
    finish(session.send("hi").unwrap()).await;
    assert_eq!(server.calls.load(Ordering::SeqCst), 1);
    assert!(!names(&model.requests()[0]).contains(&"count_invoice".to_owned()));

    let (session, model) = open(&host, vec![reply("ok")], Mode::AutoRead, ToolSearch::Off);
    finish(session.send("hi").unwrap()).await;
    assert_eq!(model.requests()[0].tools.len(), 300);
}

#[tokio::test]
async fn recall_at_5_over_50_labelled_tasks_is_at_least_0_9() {
    let (host, _server) = many_tools().await;
    let specs = host.list().await.unwrap();
    assert_eq!(specs.len(), 300);
    let index = ToolIndex::new(&specs);
    let mut missed = Vec::new();
    for (task, tool) in TASKS {
        if !index.search(task, 5).contains(&tool) {
            missed.push((task, tool, index.search(task, 5)));
        }
    }
    let recall = 1.0 - missed.len() as f64 / TASKS.len() as f64;
    eprintln!(
        "tool search recall@5 over {} tasks: {recall:.2}",
        TASKS.len()
    );
    assert!(recall >= 0.9, "recall@5 {recall:.2}; missed: {missed:#?}");
}

#[tokio::test]
async fn server_config_filters_and_trust_map_onto_the_rules() {
    let config = McpConfig::from_json(
        r#"{"mcpServers": {"many": {"command": "x", "tools": {"deny": ["delete_*"], "always": ["get_weather"]},
            "trust": "ask", "autoApprove": ["count_song"]}}}"#,
    )
    .unwrap();
    let policy: ServerPolicy = config.policies["many"].clone();
    let (host, server) = many_tools().await;
    host.set_server_policy("many", policy);
    let specs = host.list().await.unwrap();
    assert_eq!(specs.len(), 270, "the 30 delete_* tools are never offered");
    assert_eq!(host.held_back().len(), 30);
    assert!(host.policy("get_weather").always_offer);

    // trust "ask": even a read tool asks under auto_read; autoApprove runs.
    let (session, model) = open(
        &host,
        vec![
            calls(&[
                ("count_song", json!({})),
                ("get_weather", json!({"id": "Oslo"})),
            ]),
            reply("done"),
        ],
        Mode::AutoRead,
        ToolSearch::Auto,
    );
    let mut sub = session.subscribe(0);
    let handle = session.send("hello there").unwrap();
    let asked = next_approval(&mut sub).await;
    assert!(asked.ends_with("_2"), "the second call asks: {asked}");
    assert_eq!(
        server.calls.load(Ordering::SeqCst),
        1,
        "count_song ran unasked"
    );
    session
        .answer_approval(&asked, lrg_chat::Answer::Once)
        .unwrap();
    finish(handle).await;
    assert_eq!(server.calls.load(Ordering::SeqCst), 2);
    // `always` is offered while search holds the rest back.
    assert!(names(&model.requests()[0]).contains(&"get_weather".to_owned()));

    let bad = McpConfig::from_json(r#"{"mcpServers": {"s": {"command": "x", "trust": "yes"}}}"#)
        .unwrap_err()
        .to_string();
    assert!(bad.contains("`s`") && bad.contains("trust"), "{bad}");
}
