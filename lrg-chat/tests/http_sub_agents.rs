//! Sub-agents over HTTP: `POST /v1/chat/sessions {sub_agents}` (and the
//! server's default), `GET …/sub_agents`, each sub-agent's own stream
//! `GET …/sub_agents/{n}/events` under the chat's token, its approvals
//! answered on the chat, its release once its result is in, and what the
//! store keeps of it for after a restart. The models are ScriptedModels
//! behind a router that picks a script by the conversation's first message
//! (a sub-agent's prompt, else the parent's); the tools are the test MCP
//! server's (`delete_items` asks before it runs).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::http_support;

use std::sync::Arc;

use crate::sub_agents::Router;
use http_support::*;
use lrg_chat::http::ChatSpec;
use lrg_chat::store::{JsonlStore, ModelBinding, SessionId, SessionMeta, SessionStore};
use lrg_chat::sub_agents::{SubAgentStatus, SubAgentTask};
use lrg_providers::{ChatModel, ScriptedModel, ScriptedTurn};
use serde_json::{Value, json};

/// The sub-agent tests' router model (see `sub_agents.rs`), under
/// `script:first` (a model of the test menu): the parent's script, and each
/// sub-agent's by name (its prompt is `task NAME`). Also the browser test's
/// (`http_browser_sub_agents.rs`).
pub(crate) fn router(parent: Vec<ScriptedTurn>, subs: Vec<(&str, Vec<ScriptedTurn>)>) -> Models {
    let router = Router {
        parent: ScriptedModel::named("parent", parent),
        subs: subs
            .into_iter()
            .map(|(name, turns)| (format!("task {name}"), ScriptedModel::named(name, turns)))
            .collect(),
    };
    models(vec![(
        "script:first",
        Arc::new(router) as Arc<dyn ChatModel>,
    )])
}

/// `spawn_sub_agent` with one task per name (`find NAME`, prompt `task NAME`).
pub(crate) fn spawn(names: &[&str]) -> ScriptedTurn {
    let tasks: Vec<Value> = names
        .iter()
        .map(|n| json!({"description": format!("find {n}"), "prompt": format!("task {n}")}))
        .collect();
    call("spawn_sub_agent", json!({ "tasks": tasks }))
}

fn store_in(dir: &tempfile::TempDir) -> Arc<dyn SessionStore> {
    Arc::new(JsonlStore::new(dir.path()))
}

/// Every event of `events` until its stream ends (bounded).
async fn to_the_end(events: &mut Events) -> Vec<Value> {
    tokio::time::timeout(WAIT, async {
        let mut seen = Vec::new();
        while let Some(e) = events.next().await {
            seen.push(e.data);
        }
        seen
    })
    .await
    .expect("the sub-agent's stream did not end")
}

fn types(events: &[Value]) -> Vec<&str> {
    events.iter().map(|e| e["type"].as_str().unwrap()).collect()
}

#[tokio::test]
async fn a_sub_agent_is_listed_streamed_asks_on_the_chat_and_is_released_once_its_result_is_in() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_in(&dir);
    let models = router(
        vec![spawn(&["a"]), text("Started."), text("a is in.")],
        vec![(
            "a",
            vec![call("delete_items", json!({"ids": [1]})), text("answer a")],
        )],
    );
    let kept = store.clone();
    let h = start(models, move |c| c.store(kept)).await;
    let chat = h
        .open(json!({"model": "script:first", "sub_agents": true, "mcpServers": test_mcp()}))
        .await;
    let mut events = h.events(&chat, 0).await;
    let (status, _) = h
        .post(
            &chat,
            "/messages",
            json!({"text": "find a in the background"}),
        )
        .await;
    assert_eq!(status, 202);

    let start = events.until("subtask_start", |_| true).await;
    let sub_id = start["sub_session_id"].as_str().unwrap().to_string();
    assert_eq!(sub_id, format!("{}::sub::1", chat.id));
    let spawn_call = start["call_id"].as_str().unwrap().to_string();
    let running = events.until("subtask_status", |_| true).await;
    assert_eq!(running["sub_session_id"], sub_id.as_str());
    assert_eq!(running["status"], "running");

    // Its question reaches the chat, with what it wants to run.
    let asked = events
        .until("approval_needed", |e| e.get("sub_agent").is_some())
        .await;
    let call_id = asked["call_id"].as_str().unwrap().to_string();
    assert!(call_id.starts_with(&format!("{sub_id}::")), "{asked}");
    assert_eq!(asked["sub_agent"]["tool"], "delete_items");

    let (status, list) = h.get(&chat, "/sub_agents").await;
    assert_eq!(status, 200, "{list}");
    let row = &list["sub_agents"][0];
    assert_eq!(list["sub_agents"].as_array().unwrap().len(), 1, "{list}");
    assert_eq!(row["n"], 1);
    assert_eq!(row["id"], sub_id.as_str());
    assert_eq!(row["description"], "find a");
    assert_eq!(row["status"], "running");
    assert_eq!(row["call_id"], spawn_call.as_str());
    assert!(row["started_at"].as_str().unwrap().ends_with('Z'), "{row}");
    assert!(row["ended_at"].is_null(), "{row}");

    // Its own stream, under the chat's token: its prompt, its call, its
    // question under its own call id.
    let mut sub = h.sub_agent_events(&chat, 1, 0).await;
    let first = sub.until("user_message", |_| true).await;
    assert_eq!(first["text"], "task a");
    assert_eq!(first["seq"], 1);
    let own = sub.until("approval_needed", |_| true).await;
    assert_eq!(
        format!("{sub_id}::{}", own["call_id"].as_str().unwrap()),
        call_id
    );

    // Answered on the chat, as any other question.
    let (status, body) = h
        .post(
            &chat,
            &format!("/approvals/{call_id}"),
            json!({"answer": "once"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let done = sub.until("tool_done", |_| true).await;
    assert_eq!(done["ok"], true, "{done}");
    assert_eq!(done["text"], "trashed 1 items");
    sub.until("assistant_turn", |e| e["text"] == "answer a")
        .await;
    // Its stream ends once it has.
    to_the_end(&mut sub).await;

    let ended = events
        .until("subtask_status", |e| e["status"] != "running")
        .await;
    assert_eq!(ended["status"], "done");
    let result = events
        .until("tool_call", |e| e["tool"] == "sub_agent_result")
        .await;
    assert_eq!(result["arguments"]["sub_session_id"], sub_id.as_str());
    events
        .until("assistant_turn", |e| e["text"] == "a is in.")
        .await;
    events.idle().await;

    let (_, list) = h.get(&chat, "/sub_agents").await;
    let row = &list["sub_agents"][0];
    assert_eq!(row["status"], "done", "{list}");
    assert!(row["ended_at"].as_str().unwrap().ends_with('Z'), "{row}");

    // Released: its session is gone from memory, its transcript is in the
    // store, and its stream is that transcript, from 1, then its end.
    let session = h.server.session(&chat.id).unwrap();
    assert!(session.sub_agent(&sub_id).is_none(), "still in memory");
    assert_eq!(session.sub_agents()[0].status, SubAgentStatus::Done);
    let mut replay = h.sub_agent_events(&chat, 1, 0).await;
    let replayed = to_the_end(&mut replay).await;
    assert_eq!(
        types(&replayed),
        [
            "user_message",
            "assistant_turn",
            "tool_call",
            "tool_done",
            "assistant_turn"
        ],
        "{replayed:?}"
    );
    assert_eq!(replayed[0]["seq"], 1);
    assert_eq!(replayed[3]["text"], "trashed 1 items");
    assert_eq!(replayed[4]["text"], "answer a");

    // A client that followed it live and comes back is told to start over.
    let raw = h
        .client
        .get(h.url(&format!(
            "/v1/chat/sessions/{}/sub_agents/1/events?after=4",
            chat.id
        )))
        .bearer_auth(&chat.token)
        .send()
        .await
        .unwrap();
    assert_eq!(raw.status(), 200);
    assert_eq!(raw.headers()["content-type"], "text/event-stream");
    assert_eq!(raw.text().await.unwrap(), "data: {\"type\":\"resync\"}\n\n");

    // What the store keeps: its task, and how and when it ended.
    let kept = store.load(&sub_id.parse().unwrap()).await.unwrap();
    let task = kept.meta.sub_agent.as_ref().unwrap();
    assert_eq!(task.description, "find a");
    assert_eq!(task.call_id, spawn_call);
    let end = kept.state.sub_agent_end.unwrap();
    assert_eq!(end.status, SubAgentStatus::Done);
    assert!(end.ended_ms >= kept.meta.created_ms);
    assert_eq!(kept.rows.last().unwrap().text(), "answer a");
}

#[tokio::test]
async fn after_a_restart_the_list_and_the_streams_come_from_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_in(&dir);
    let keys = json!({"client_key": "app", "context_key": "doc-1"});
    let models = router(
        vec![spawn(&["b"]), text("Started."), text("b is in.")],
        vec![("b", vec![text("answer b")])],
    );
    let kept = store.clone();
    let first = start(models, move |c| c.store(kept)).await;
    let mut open = json!({"model": "script:first", "sub_agents": true});
    open.as_object_mut()
        .unwrap()
        .extend(keys.as_object().unwrap().clone());
    let chat = first.open(open).await;
    let mut events = first.events(&chat, 0).await;
    first
        .post(&chat, "/messages", json!({"text": "find b"}))
        .await;
    events
        .until("assistant_turn", |e| e["text"] == "b is in.")
        .await;
    events.idle().await;
    first.server.shutdown().await;

    // One the process was cut off in: started, and no end kept.
    let parent: SessionId = chat.id.parse().unwrap();
    let mut cut = SessionMeta::new(ModelBinding::new("script:first"));
    cut.id = parent.sub_agent(7);
    cut.sub_agent = Some(SubAgentTask::new("find c", "call_9"));
    store.create(&cut).await.unwrap();
    store.release(&cut.id).await;

    let kept = store.clone();
    let second = start(router(Vec::new(), Vec::new()), move |c| c.store(kept)).await;
    let (status, opened) = second.open_raw(keys).await;
    assert_eq!(status, 201, "{opened}");
    assert_eq!(opened["opened"], "resumed");
    let chat = Chat::of(&opened);
    let (status, list) = second.get(&chat, "/sub_agents").await;
    assert_eq!(status, 200, "{list}");
    let rows = list["sub_agents"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "{list}");
    assert_eq!(rows[0]["n"], 1);
    assert_eq!(rows[0]["description"], "find b");
    assert_eq!(rows[0]["status"], "done");
    assert!(rows[0]["started_at"].is_string() && rows[0]["ended_at"].is_string());
    assert_eq!(rows[1]["n"], 7);
    assert_eq!(rows[1]["description"], "find c");
    assert_eq!(rows[1]["call_id"], "call_9");
    assert_eq!(rows[1]["status"], "interrupted");
    assert!(rows[1]["ended_at"].is_null(), "{list}");

    let mut replay = second.sub_agent_events(&chat, 1, 0).await;
    let replayed = to_the_end(&mut replay).await;
    assert_eq!(types(&replayed), ["user_message", "assistant_turn"]);
    assert_eq!(replayed[0]["text"], "task b");
    assert_eq!(replayed[1]["text"], "answer b");
    let (status, body) = second.get(&chat, "/sub_agents/2/events").await;
    assert_eq!(status, 404, "{body}");
}

#[tokio::test]
async fn sub_agents_follow_the_open_or_the_server_default_and_the_routes_refuse_what_is_wrong() {
    let names = ["q1", "q2", "q3", "q4", "q5"];
    let asks = || vec![call("delete_items", json!({"ids": [1]})), text("answer")];
    let models = router(
        vec![
            spawn(&["x"]),
            text("No helpers here."),
            spawn(&names),
            text("Five asked for."),
        ],
        names.iter().map(|n| (*n, asks())).collect(),
    );
    // `lrg serve --sub-agents`: on unless an open says otherwise.
    let h = start(models, |c| c.defaults(ChatSpec::new().sub_agents(true))).await;

    let off = h
        .open(json!({"model": "script:first", "sub_agents": false}))
        .await;
    let mut events = h.events(&off, 0).await;
    h.post(&off, "/messages", json!({"text": "one"})).await;
    let skipped = events.until("tool_skipped", |_| true).await;
    assert_eq!(skipped["reason"], "unknown_tool", "{skipped}");
    events.idle().await;
    assert!(!events.raw.contains("subtask_start"));
    let (status, list) = h.get(&off, "/sub_agents").await;
    assert_eq!((status, list), (200, json!({"sub_agents": []})));
    let (status, body) = h.get(&off, "/sub_agents/1/events").await;
    assert_eq!(status, 404, "{body}");

    let on = h
        .open(json!({"model": "script:first", "mcpServers": test_mcp()}))
        .await;
    let mut events = h.events(&on, 0).await;
    h.post(&on, "/messages", json!({"text": "five"})).await;
    for _ in 0..4 {
        events
            .until("approval_needed", |e| e.get("sub_agent").is_some())
            .await;
    }
    let (_, list) = h.get(&on, "/sub_agents").await;
    let statuses: Vec<&str> = list["sub_agents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["status"].as_str().unwrap())
        .collect();
    assert_eq!(
        statuses,
        ["running", "running", "running", "running", "queued"]
    );
    assert!(list["sub_agents"][4]["started_at"].is_null(), "{list}");
    let (status, body) = h.get(&on, "/sub_agents/5/events").await;
    assert_eq!(status, 409, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("has not started yet"),
        "{body}"
    );
    let (status, body) = h.get(&on, "/sub_agents/five/events").await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body["error"]["message"].as_str().unwrap().contains("`n`"),
        "{body}"
    );

    // Another chat's token, or none, is the uniform 403.
    let other = Chat {
        id: on.id.clone(),
        token: off.token.clone(),
    };
    assert_eq!(h.get(&other, "/sub_agents").await.0, 403);
    assert_eq!(h.get(&other, "/sub_agents/1/events").await.0, 403);
    // The owner's token works them as the chat's own does (the owner
    // routes have no copies of the chat routes: they take this token).
    let minted: Value = h
        .client
        .post(h.url("/v1/owners/default/tokens"))
        .bearer_auth(AGENT)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let owned = Chat {
        id: on.id.clone(),
        token: minted["token"].as_str().unwrap().into(),
    };
    let (status, list) = h.get(&owned, "/sub_agents").await;
    assert_eq!(status, 200, "{list}");
    assert_eq!(list["sub_agents"].as_array().unwrap().len(), 5);

    let (status, _) = h.call(&on, reqwest::Method::DELETE, "", None).await;
    assert_eq!(status, 200);
}
