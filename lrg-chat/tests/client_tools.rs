//! Tools the client runs (`lrg_chat::tools::client`): in Rust, a call comes
//! on the tool's stream and is answered with `submit_tool_result`; it times
//! out with an error result; a stop cancels it; a tool that ends the turn
//! makes its result the outcome. Over HTTP: `client_tools` when opening, a
//! `tool_call` with `runs_on: "client"`, `POST …/tool_results/{call_id}`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::http_support;
use crate::session_support;

use std::sync::Arc;
use std::time::Duration;

use lrg_chat::events::Event;
use lrg_chat::tools::{ToolHost, ToolOutput};
use lrg_chat::{ChatSession, FixedModel, SessionConfig, SessionError, TurnOutcome};
use lrg_providers::{Role, ScriptedModel, ScriptedTurn, ToolAnnotations, ToolSpec};
use serde_json::json;
use session_support::{calls, finish, reply, wait_for};

fn show_map() -> ToolSpec {
    ToolSpec {
        name: "show_map".into(),
        description: "Show a place on the map in the app.".into(),
        input_schema: json!({"type": "object", "properties": {"place": {"type": "string"}},
            "required": ["place"]}),
        annotations: ToolAnnotations {
            read_only_hint: Some(true),
            ..Default::default()
        },
        output_schema: None,
    }
}

fn open(
    host: &Arc<ToolHost>,
    turns: Vec<ScriptedTurn>,
    timeout: Duration,
) -> (ChatSession, ScriptedModel) {
    let model = ScriptedModel::new(turns);
    let session = ChatSession::builder(Arc::new(FixedModel::new(model.clone())))
        .config(SessionConfig {
            client_tool_timeout: timeout,
            ..SessionConfig::default()
        })
        .tools(host.clone())
        .build();
    (session, model)
}

fn last_result(model: &ScriptedModel) -> String {
    let requests = model.requests();
    let request = requests.last().unwrap();
    request
        .messages
        .iter()
        .rev()
        .find(|m| m.role == Role::Tool)
        .map(|m| format!("{:?}", m.parts))
        .unwrap_or_default()
}

#[tokio::test]
async fn the_app_answers_a_call_from_its_stream() {
    let host = Arc::new(ToolHost::new());
    let mut stream = host.add_client_tool(show_map()).unwrap();
    let (session, model) = open(
        &host,
        vec![
            calls(&[("show_map", json!({"place": "Lisbon"}))]),
            reply("There it is."),
        ],
        Duration::from_secs(10),
    );
    let session = Arc::new(session);
    let answering = session.clone();
    let app = tokio::spawn(async move {
        let call = stream.next().await.unwrap();
        assert_eq!(call.tool, "show_map");
        assert_eq!(call.arguments, json!({"place": "Lisbon"}));
        answering
            .submit_tool_result(&call.call_id, ToolOutput::text("the map shows Lisbon"))
            .unwrap();
        call.call_id
    });
    let outcome = finish(session.send("where is Lisbon?").unwrap()).await;
    assert!(
        matches!(outcome, TurnOutcome::Completed { .. }),
        "{outcome:?}"
    );
    let call_id = app.await.unwrap();
    assert!(last_result(&model).contains("the map shows Lisbon"));
    let announced = session
        .events()
        .entries()
        .iter()
        .find(|e| matches!(e.event, Event::ToolCall { .. }))
        .map(|e| serde_json::to_value(e.as_ref()).unwrap())
        .unwrap();
    assert_eq!(announced["runs_on"], "client");
    assert_eq!(
        session.submit_tool_result(&call_id, ToolOutput::text("again")),
        Err(SessionError::NoSuchClientCall(call_id)),
        "an answered call takes no second answer"
    );
}

#[tokio::test]
async fn an_unanswered_call_times_out_and_a_stop_cancels_one() {
    let host = Arc::new(ToolHost::new());
    let _stream = host.add_client_tool(show_map()).unwrap();
    let (session, model) = open(
        &host,
        vec![
            calls(&[("show_map", json!({"place": "Oslo"}))]),
            reply("The app did not answer."),
        ],
        Duration::from_millis(200),
    );
    finish(session.send("show Oslo").unwrap()).await;
    assert!(last_result(&model).contains("did not answer this call within 0.2 s"));

    let (session, _model) = open(
        &host,
        vec![
            calls(&[("show_map", json!({"place": "Rome"}))]),
            reply("never"),
        ],
        Duration::from_secs(30),
    );
    let mut sub = session.subscribe(0);
    let handle = session.send("show Rome").unwrap();
    wait_for(&mut sub, |e| matches!(e, Event::ToolRunning { .. })).await;
    assert_eq!(session.pending_client_calls().len(), 1);
    session.stop();
    assert_eq!(finish(handle).await, TurnOutcome::Stopped);
    assert!(session.pending_client_calls().is_empty());
    let history = session.history();
    let result = history.iter().rev().find(|m| m.role == Role::Tool).unwrap();
    assert!(format!("{:?}", result.parts).contains("stopped before the app answered"));
}

#[tokio::test]
async fn a_tool_that_ends_the_turn_makes_its_result_the_outcome() {
    let host = Arc::new(ToolHost::new());
    host.add_fn(
        "final_report",
        "Hand in the report; this ends the task.",
        ToolAnnotations {
            read_only_hint: Some(true),
            ..Default::default()
        },
        |_: lrg_chat::tools::NoArgs| async { Ok::<_, String>("report filed: #12") },
    )
    .unwrap();
    host.set_ends_turn("final_report", true);
    let (session, model) = open(
        &host,
        vec![calls(&[("final_report", json!({}))]), reply("never asked")],
        Duration::from_secs(10),
    );
    let outcome = finish(session.send("file the report").unwrap()).await;
    assert_eq!(
        outcome,
        TurnOutcome::Completed {
            text: "report filed: #12".into(),
            json: None
        }
    );
    assert_eq!(model.turns_played(), 1, "no model turn after it");
}

#[tokio::test]
async fn over_http_a_client_tool_round_trips() {
    use http_support::*;
    let models = models(vec![(
        "script:first",
        scripted(
            "first",
            vec![call("show_map", json!({"place": "Paris"})), text("Shown.")],
        ),
    )]);
    let h = start(models, |c| c).await;
    let (status, bad) = h
        .open_raw(json!({"model": "script:first", "client_tools": [{"name": "bad name"}]}))
        .await;
    assert_eq!(status, 400, "{bad}");
    let chat = h
        .open(json!({"model": "script:first", "client_tools": [{
            "name": "show_map", "description": "Show a place on the map.",
            "input_schema": {"type": "object", "properties": {"place": {"type": "string"}}},
            "annotations": {"readOnlyHint": true}}]}))
        .await;
    let mut events = h.events(&chat, 0).await;
    let (status, _) = h
        .post(&chat, "/messages", json!({"text": "show Paris"}))
        .await;
    assert_eq!(status, 202);
    let announced = events.until("tool_call", |_| true).await;
    assert_eq!(announced["runs_on"], "client", "{announced}");
    let call_id = announced["call_id"].as_str().unwrap().to_owned();
    let route = format!("/tool_results/{call_id}");
    let (status, v) = h.post(&chat, &route, json!({"content": 7})).await;
    assert_eq!(status, 400, "{v}");
    let (status, v) = h
        .post(
            &chat,
            &route,
            json!({"content": [{"type": "text", "text": "Paris is on screen"}]}),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    let (status, _) = h.post(&chat, &route, json!({"content": "again"})).await;
    assert_eq!(status, 404);
    let done = events.until("tool_done", |_| true).await;
    assert_eq!(done["text"], "Paris is on screen");
    events.idle().await;
}
