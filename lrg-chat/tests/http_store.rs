//! Keyed chats over HTTP, over a real JSONL store: create-or-resume by
//! `client_key`/`context_key` (across a server restart too), `DELETE`
//! wiping the stored copy, bad keys, another model, idle chats put away —
//! and the "local only" lock through the routes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::http_support;

use std::sync::Arc;
use std::time::Duration;

use http_support::*;
use lrg_chat::store::JsonlStore;
use lrg_providers::{
    ChatModel, ModelInfo, ModelLocation, ScriptedModel, ScriptedTurn, TurnRequest, TurnStream,
};
use reqwest::Method;
use serde_json::{Value, json};
use tempfile::TempDir;
use tokio_util::sync::CancellationToken;

/// The scripted chat every keyed test holds: a read tool call, then a reply.
fn script() -> Vec<ScriptedTurn> {
    vec![
        call("echo", json!({"text": "kept"})),
        text("It said kept."),
        text("Still here."),
    ]
}

/// A server keeping chats in `dir`, on `script:first` (playing `turns`)
/// and `script:second`.
async fn server(dir: &TempDir, turns: Vec<ScriptedTurn>) -> Harness {
    let store = Arc::new(JsonlStore::new(dir.path()));
    start(
        models(vec![
            ("script:first", scripted("first", turns)),
            ("script:second", scripted("second", vec![text("second")])),
        ]),
        move |c| c.store(store),
    )
    .await
}

fn keyed(model: &str) -> Value {
    json!({
        "model": model,
        "mcpServers": test_mcp(),
        "client_key": "alice@example.com",
        "context_key": "doc:42",
    })
}

/// What a page draws of a conversation, from its numbered events.
fn drawn(events: &[SseEvent]) -> Vec<Value> {
    events
        .iter()
        .filter(|e| e.id.is_some())
        .filter_map(|e| {
            let d = &e.data;
            match d["type"].as_str()? {
                "user_message" => Some(json!(["user", d["text"]])),
                "assistant_turn" if d["text"] != "" => Some(json!(["assistant", d["text"]])),
                "tool_call" => Some(json!(["call", d["call_id"], d["tool"], d["arguments"]])),
                "tool_done" => Some(json!(["done", d["call_id"], d["ok"], d["text"]])),
                _ => None,
            }
        })
        .collect()
}

async fn say(h: &Harness, chat: &Chat, events: &mut Events, text: &str) {
    let (s, v) = h.post(chat, "/messages", json!({"text": text})).await;
    assert_eq!(s, 202, "{v}");
    events.until("busy", |e| e["busy"] == true).await;
    events.idle().await;
}

/// Read numbered events until `n` of them that a page draws have come.
async fn read_drawn(events: &mut Events, n: usize) -> Vec<Value> {
    while drawn(&events.seen).len() < n {
        events.next().await.expect("the stream ended early");
    }
    drawn(&events.seen)
}

#[tokio::test]
async fn a_keyed_chat_is_create_or_resume_across_a_restart() {
    let dir = TempDir::new().unwrap();
    let h = server(&dir, script()).await;
    let (s, v) = h.open_raw(keyed("script:first")).await;
    assert_eq!((s, v["opened"].as_str()), (201, Some("created")), "{v}");
    let chat = Chat::of(&v);

    // Live: the same chat answers, with the same token.
    let (s, again) = h.open_raw(keyed("script:first")).await;
    assert_eq!(
        (s, again["opened"].as_str()),
        (200, Some("live")),
        "{again}"
    );
    assert_eq!(Chat::of(&again).id, chat.id);
    assert_eq!(Chat::of(&again).token, chat.token);
    assert_eq!(h.server.chat_count(), 1);

    let mut events = h.events(&chat, 0).await;
    say(&h, &chat, &mut events, "echo kept").await;
    let before = drawn(&events.seen);
    assert_eq!(before.len(), 4, "{before:?}");
    let (s, transcript) = h.get(&chat, "/transcript").await;
    assert_eq!(s, 200);
    assert_eq!(transcript["rows"][1]["outcome"], "ok", "{transcript}");

    // A restart: a new server on the same directory.
    tokio::time::timeout(WAIT, h.server.shutdown())
        .await
        .expect("shutdown ends");
    drop(h);
    let h = server(&dir, vec![text("Still here.")]).await;
    let (s, v) = h.open_raw(keyed("script:first")).await;
    assert_eq!((s, v["opened"].as_str()), (201, Some("resumed")), "{v}");
    let resumed = Chat::of(&v);
    assert_eq!(resumed.id, chat.id, "rebuilt under the same id");
    assert_ne!(resumed.token, chat.token, "tokens are never stored");
    let (s, _) = h.get(&chat, "/transcript").await;
    assert_eq!(s, 403, "the old token died with the old server");

    // The same transcript, and a page rebuilds the conversation from after=0.
    let (s, after) = h.get(&resumed, "/transcript").await;
    assert_eq!(s, 200);
    assert_eq!(after, transcript);
    let mut replay = h.events(&resumed, 0).await;
    assert_eq!(read_drawn(&mut replay, before.len()).await, before);
    assert_eq!(replay.seen[0].id, Some(1), "numbered from the start");

    // It goes on where it was.
    say(&h, &resumed, &mut replay, "still there?").await;
    let (_, t) = h.get(&resumed, "/transcript").await;
    let rows = t["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 5, "{t}");
    assert_eq!(rows[4]["text"], "Still here.");
    h.server.shutdown().await;
}

#[tokio::test]
async fn delete_wipes_the_stored_chat_and_the_keys_open_a_new_one() {
    let dir = TempDir::new().unwrap();
    let h = server(&dir, script()).await;
    let (_, v) = h.open_raw(keyed("script:first")).await;
    let chat = Chat::of(&v);
    let mut events = h.events(&chat, 0).await;
    say(&h, &chat, &mut events, "echo kept").await;
    let file = dir.path().join(format!("{}.jsonl", chat.id));
    assert!(file.exists(), "kept in the store: {}", file.display());

    let (s, _) = h.call(&chat, Method::DELETE, "", None).await;
    assert_eq!(s, 200);
    assert!(!file.exists(), "DELETE wipes the stored copy");
    let (s, _) = h.get(&chat, "/transcript").await;
    assert_eq!(s, 403);

    let (s, v) = h.open_raw(keyed("script:first")).await;
    assert_eq!((s, v["opened"].as_str()), (201, Some("created")), "{v}");
    let fresh = Chat::of(&v);
    assert_ne!(fresh.id, chat.id);
    let (_, t) = h.get(&fresh, "/transcript").await;
    assert_eq!(t["rows"], json!([]));
    h.server.shutdown().await;
}

#[tokio::test]
async fn bad_keys_are_a_400_naming_the_rule() {
    let dir = TempDir::new().unwrap();
    let h = server(&dir, vec![]).await;
    let cases = [
        (
            json!({"client_key": "a b", "context_key": "doc"}),
            "client_key",
        ),
        (
            json!({"client_key": "me", "context_key": "..."}),
            "context_key",
        ),
        (
            json!({"client_key": "me", "context_key": "x".repeat(65)}),
            "context_key",
        ),
        (
            json!({"client_key": "", "context_key": "doc"}),
            "client_key",
        ),
    ];
    for (keys, which) in cases {
        let mut body = json!({"model": "script:first"});
        body.as_object_mut()
            .unwrap()
            .extend(keys.as_object().unwrap().clone());
        let (s, v) = h.open_raw(body.clone()).await;
        let message = v["error"]["message"].as_str().unwrap();
        assert_eq!((s, v["error"]["kind"].as_str()), (400, Some("bad_request")));
        assert!(message.contains(which), "{body}: {message}");
        assert!(
            message.contains("1 to 64 bytes of A-Z a-z 0-9 . _ : @ -"),
            "{body}: {message}"
        );
    }
    let (s, v) = h
        .open_raw(json!({"model": "script:first", "context_key": "doc"}))
        .await;
    assert_eq!(s, 400);
    assert_eq!(
        v["error"]["message"],
        "give both client_key and context_key, or neither (only context_key was given)"
    );
    assert_eq!(h.server.chat_count(), 0);
}

/// The keys with another model: 409 with the stored model and nothing
/// changed, unless the body says what to do: `replace` archives the old
/// chat (kept, live, listed) and starts a new one, `carry_over` moves the
/// conversation to the model. Naming no model resumes on the stored one.
#[tokio::test]
async fn the_keys_on_another_model_are_refused_replaced_or_carried_over() {
    let dir = TempDir::new().unwrap();
    let h = server(&dir, script()).await;
    let (_, v) = h.open_raw(keyed("script:first")).await;
    let first = Chat::of(&v);
    let mut events = h.events(&first, 0).await;
    say(&h, &first, &mut events, "echo kept").await;
    let file = dir.path().join(format!("{}.jsonl", first.id));
    let kept = std::fs::read(&file).unwrap();

    let (s, v) = h.open_raw(keyed("script:second")).await;
    assert_eq!(
        (s, v["error"]["kind"].as_str()),
        (409, Some("other_model")),
        "{v}"
    );
    assert_eq!(v["stored_model"], "script:first", "{v}");
    let message = v["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("carry_over") && message.contains("replace"),
        "{message}"
    );
    assert_eq!(std::fs::read(&file).unwrap(), kept, "nothing changed");
    let (s, _) = h.get(&first, "/transcript").await;
    assert_eq!(s, 200, "the chat goes on");
    assert_eq!(h.server.chat_count(), 1);

    // No model: the kept chat, on its own model.
    let mut no_model = keyed("script:first");
    no_model.as_object_mut().unwrap().remove("model");
    let (s, v) = h.open_raw(no_model).await;
    assert_eq!((s, v["opened"].as_str()), (200, Some("live")), "{v}");
    assert_eq!(Chat::of(&v).id, first.id);

    // Both ways at once, or without keys: refused, naming the field.
    let mut both = keyed("script:second");
    both["replace"] = json!(true);
    both["carry_over"] = json!(true);
    let (s, v) = h.open_raw(both).await;
    assert_eq!(s, 400, "{v}");
    let (s, v) = h
        .open_raw(json!({"model": "script:second", "replace": true}))
        .await;
    assert_eq!(s, 400, "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("`replace`"),
        "{v}"
    );

    // Replace: a new chat; the old one archived, still live and kept.
    let mut replace = keyed("script:second");
    replace["replace"] = json!(true);
    let (s, v) = h.open_raw(replace).await;
    assert_eq!((s, v["opened"].as_str()), (201, Some("replaced")), "{v}");
    let second = Chat::of(&v);
    assert_ne!(second.id, first.id);
    let (_, t) = h.get(&second, "/transcript").await;
    assert_eq!(t["rows"], json!([]), "no conversation is handed over");
    let (s, t) = h.get(&first, "/transcript").await;
    assert_eq!(s, 200, "the old chat is not ended");
    assert_eq!(t["rows"].as_array().unwrap().len(), 3, "{t}");
    let header = std::fs::read_to_string(&file).unwrap();
    assert!(
        header.lines().next().unwrap().contains("\"archived\":true"),
        "{header}"
    );
    assert_eq!(h.server.chat_count(), 2);

    // Carry over: the keys' chat (now the new one) moves to script:first,
    // rebuilt under its id, with a model_switched after its history.
    let mut carry = keyed("script:first");
    carry["carry_over"] = json!(true);
    let (s, v) = h.open_raw(carry).await;
    assert_eq!(
        (s, v["opened"].as_str()),
        (201, Some("carried_over")),
        "{v}"
    );
    let carried = Chat::of(&v);
    assert_eq!(carried.id, second.id);
    let (_, m) = h.get(&carried, "/models").await;
    assert_eq!(m["current"]["id"], "script:first");
    let mut log = h.events(&carried, 0).await;
    let switched = log.until("model_switched", |_| true).await;
    assert_eq!(
        (switched["from"].as_str(), switched["to"].as_str()),
        (Some("script:second"), Some("script:first"))
    );
    let (s, _) = h.get(&second, "/transcript").await;
    assert_eq!(s, 403, "the rebuilt chat has a token of its own");
    let (s, v) = h.open_raw(keyed("script:first")).await;
    assert_eq!((s, v["opened"].as_str()), (200, Some("live")), "{v}");
    h.server.shutdown().await;
}

/// `POST …/model`: without `carry_over`, a new chat (201, as an open
/// answers) while the old one stays live and kept (archived: the keys go
/// to the new chat); with it, the same chat goes on on the model (200).
#[tokio::test]
async fn switching_models_opens_a_new_chat_or_carries_this_one_over() {
    let dir = TempDir::new().unwrap();
    let h = server(&dir, script()).await;
    let (_, v) = h.open_raw(keyed("script:first")).await;
    let first = Chat::of(&v);
    let mut events = h.events(&first, 0).await;
    say(&h, &first, &mut events, "echo kept").await;
    let file = dir.path().join(format!("{}.jsonl", first.id));

    let (s, v) = h
        .post(&first, "/model", json!({"model": "script:second"}))
        .await;
    assert_eq!(s, 201, "{v}");
    assert_eq!(v["opened"], "created", "{v}");
    let next = Chat::of(&v);
    assert_ne!(next.id, first.id);
    let (_, t) = h.get(&next, "/transcript").await;
    assert_eq!(t["rows"], json!([]));
    let (s, t) = h.get(&first, "/transcript").await;
    assert_eq!(s, 200, "the old chat is not ended");
    assert_eq!(t["rows"].as_array().unwrap().len(), 3, "{t}");
    let header = std::fs::read_to_string(&file).unwrap();
    assert!(header.lines().next().unwrap().contains("\"archived\":true"));
    // The keys open the new chat.
    let (s, v) = h.open_raw(keyed("script:second")).await;
    assert_eq!((s, v["opened"].as_str()), (200, Some("live")), "{v}");
    assert_eq!(Chat::of(&v).id, next.id);

    // Carried over: 200, the same chat and token, on the new model.
    let (s, v) = h
        .post(
            &first,
            "/model",
            json!({"model": "script:second", "carry_over": true}),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["opened"], "carried_over", "{v}");
    assert_eq!(Chat::of(&v).id, first.id);
    assert_eq!(Chat::of(&v).token, first.token);
    let switched = events.until("model_switched", |_| true).await;
    assert_eq!(
        (switched["from"].as_str(), switched["to"].as_str()),
        (Some("script:first"), Some("script:second"))
    );
    let (_, m) = h.get(&first, "/models").await;
    assert_eq!(m["current"]["id"], "script:second");
    let header = std::fs::read_to_string(&file).unwrap();
    assert!(
        header
            .lines()
            .next()
            .unwrap()
            .contains("\"model\":\"script:second\""),
        "{header}"
    );
    // The conversation goes on, on the new model.
    say(&h, &first, &mut events, "and now?").await;
    let (_, t) = h.get(&first, "/transcript").await;
    let rows = t["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 5, "{t}");
    assert_eq!(rows[4]["text"], "second");
    h.server.shutdown().await;
}

/// How long a chat may be idle in the eviction test.
const IDLE: Duration = Duration::from_millis(200);

#[tokio::test]
async fn an_idle_keyed_chat_is_put_away_unless_a_page_watches_it() {
    let dir = TempDir::new().unwrap();
    let store = Arc::new(JsonlStore::new(dir.path()));
    let h = start(
        models(vec![("script:first", scripted("first", script()))]),
        move |c| {
            c.store(store)
                .idle(IDLE)
                .heartbeat(Duration::from_millis(50))
        },
    )
    .await;
    let (_, v) = h.open_raw(keyed("script:first")).await;
    let chat = Chat::of(&v);
    let unkeyed = h.open(json!({"model": "script:first"})).await;
    // Kept and its owner's, it would be put away idle too: a page watches it.
    let _watching = h.events(&unkeyed, 0).await;
    let mut events = h.events(&chat, 0).await;
    say(&h, &chat, &mut events, "echo kept").await;
    tokio::time::sleep(IDLE * 2).await;
    assert_eq!(h.server.evict_idle().await, 0, "a page watches it");
    drop(events);

    // The stream is closed on the server side a moment later.
    let put_away = async {
        while h.server.evict_idle().await == 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    tokio::time::timeout(WAIT, put_away)
        .await
        .expect("put away");
    let (s, _) = h.get(&chat, "/transcript").await;
    assert_eq!(s, 403);
    let (s, _) = h.get(&unkeyed, "/transcript").await;
    assert_eq!(s, 200, "a watched chat is never put away");
    let (s, v) = h.open_raw(keyed("script:first")).await;
    assert_eq!((s, v["opened"].as_str()), (201, Some("resumed")), "{v}");
    assert_eq!(Chat::of(&v).id, chat.id);
    h.server.shutdown().await;
}

/// A scripted model that says it runs in a cloud.
struct Cloud(ScriptedModel);

impl ChatModel for Cloud {
    fn info(&self) -> ModelInfo {
        ModelInfo::new("openai", "gpt-4.1", ModelLocation::Cloud)
            .sends_to(Some("api.openai.com".into()))
    }

    fn turn(&self, request: TurnRequest, cancel: CancellationToken) -> TurnStream {
        self.0.turn(request, cancel)
    }
}

#[tokio::test]
async fn a_local_only_chat_refuses_a_cloud_model_through_the_routes() {
    let cloud = ScriptedModel::new(vec![text("never sent")]);
    let h = start(
        models(vec![
            ("script:first", scripted("first", vec![])),
            ("openai:gpt-4.1", Arc::new(Cloud(cloud.clone()))),
        ]),
        |c| c,
    )
    .await;

    // Opening on a cloud model with the lock on: a 400 naming the model.
    let (s, v) = h
        .open_raw(json!({"model": "openai:gpt-4.1", "local_only": true}))
        .await;
    assert_eq!(s, 400, "{v}");
    let message = v["error"]["message"].as_str().unwrap();
    assert!(message.starts_with("`model`"), "{message}");
    assert!(
        message.contains("local only") && message.contains("api.openai.com"),
        "{message}"
    );

    // Switching a local-only chat to a cloud model: refused, the chat stays.
    let (_, v) = h
        .open_raw(json!({"model": "script:first", "local_only": true}))
        .await;
    let local = Chat::of(&v);
    let (_, p) = h.get(&local, "/permissions").await;
    assert_eq!(p["local_only"], true);
    let (s, v) = h
        .post(
            &local,
            "/model",
            json!({"model": "openai:gpt-4.1", "confirm": true}),
        )
        .await;
    assert_eq!(s, 400, "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("local only")
    );
    let (s, _) = h.get(&local, "/transcript").await;
    assert_eq!(s, 200);

    // Turned on while on a cloud model: the next message is refused in the
    // loop, with an error event, and nothing reaches the model.
    let (_, v) = h.open_raw(json!({"model": "openai:gpt-4.1"})).await;
    let chat = Chat::of(&v);
    let (s, p) = h
        .call(
            &chat,
            Method::PUT,
            "/permissions",
            Some(json!({"local_only": true})),
        )
        .await;
    assert_eq!((s, &p["local_only"]), (200, &json!(true)), "{p}");
    let mut events = h.events(&chat, 0).await;
    let (s, _) = h.post(&chat, "/messages", json!({"text": "hello"})).await;
    assert_eq!(s, 202);
    let error = events.until("error", |_| true).await;
    assert_eq!(error["kind"], "local_only", "{error}");
    assert!(
        error["message"].as_str().unwrap().contains("local only"),
        "{error}"
    );
    events.idle().await;
    assert_eq!(cloud.turns_played(), 0, "nothing was sent to the cloud");
    assert!(
        !events.seen.iter().any(|e| e.data["type"] == "sends_to"),
        "it never said the chat went anywhere"
    );
}

#[tokio::test]
async fn a_chat_another_server_holds_is_a_409_and_unkeyed_chats_are_stored_too() {
    let dir = TempDir::new().unwrap();
    let a = server(&dir, script()).await;
    let (s, v) = a.open_raw(keyed("script:first")).await;
    assert_eq!(s, 201, "{v}");
    let held = Chat::of(&v);
    let mut events = a.events(&held, 0).await;
    say(&a, &held, &mut events, "echo kept").await;

    // A second server on the same directory: one writer per chat.
    let b = server(&dir, vec![]).await;
    let (s, v) = b.open_raw(keyed("script:first")).await;
    assert_eq!(
        (s, v["error"]["kind"].as_str()),
        (409, Some("conflict")),
        "{v}"
    );
    let message = v["error"]["message"].as_str().unwrap();
    assert!(message.contains("open in another process"), "{message}");
    assert!(
        !message.contains(dir.path().to_str().unwrap()),
        "no internal path: {message}"
    );
    assert_eq!(b.server.chat_count(), 0);

    // Unkeyed chats are kept too (issue 28 §6): their owner's list finds
    // them again after a restart.
    let unkeyed = a.open(json!({"model": "script:first"})).await;
    let mut events = a.events(&unkeyed, 0).await;
    say(&a, &unkeyed, &mut events, "hello").await;
    let mut files: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".jsonl"))
        .collect();
    files.sort();
    let mut expected = vec![
        format!("{}.jsonl", held.id),
        format!("{}.jsonl", unkeyed.id),
    ];
    expected.sort();
    assert_eq!(files, expected);
    a.server.shutdown().await;
}

/// A JSONL store that cannot write, as a full or read-only disk: chats are
/// created (their files exist) but nothing is appended or rewritten.
#[derive(Debug)]
struct Unwritable(JsonlStore);

fn disk_full() -> lrg_chat::store::StoreError {
    lrg_chat::store::StoreError::Io {
        path: "/full/disk.jsonl".into(),
        source: std::io::Error::from_raw_os_error(28),
    }
}

impl lrg_chat::store::SessionStore for Unwritable {
    fn create<'a>(
        &'a self,
        meta: &'a lrg_chat::store::SessionMeta,
    ) -> futures::future::BoxFuture<'a, Result<(), lrg_chat::store::StoreError>> {
        self.0.create(meta)
    }
    fn resume<'a>(
        &'a self,
        id: &'a lrg_chat::store::SessionId,
        max_rows: usize,
    ) -> futures::future::BoxFuture<
        'a,
        Result<lrg_chat::store::StoredSession, lrg_chat::store::StoreError>,
    > {
        self.0.resume(id, max_rows)
    }
    fn append<'a>(
        &'a self,
        _: &'a lrg_chat::store::SessionId,
        _: &'a [lrg_providers::Message],
        _: &'a lrg_chat::store::SessionState,
    ) -> futures::future::BoxFuture<'a, Result<(), lrg_chat::store::StoreError>> {
        Box::pin(async { Err(disk_full()) })
    }
    fn rewrite<'a>(
        &'a self,
        _: &'a lrg_chat::store::SessionId,
        _: &'a [lrg_providers::Message],
        _: &'a lrg_chat::store::SessionState,
    ) -> futures::future::BoxFuture<'a, Result<(), lrg_chat::store::StoreError>> {
        Box::pin(async { Err(disk_full()) })
    }
    fn load<'a>(
        &'a self,
        id: &'a lrg_chat::store::SessionId,
    ) -> futures::future::BoxFuture<
        'a,
        Result<lrg_chat::store::StoredSession, lrg_chat::store::StoreError>,
    > {
        self.0.load(id)
    }
    fn list<'a>(
        &'a self,
        filter: &'a lrg_chat::store::ListFilter,
    ) -> futures::future::BoxFuture<
        'a,
        Result<Vec<lrg_chat::store::SessionSummary>, lrg_chat::store::StoreError>,
    > {
        self.0.list(filter)
    }
    fn delete<'a>(
        &'a self,
        id: &'a lrg_chat::store::SessionId,
    ) -> futures::future::BoxFuture<'a, Result<bool, lrg_chat::store::StoreError>> {
        self.0.delete(id)
    }
    fn release<'a>(
        &'a self,
        id: &'a lrg_chat::store::SessionId,
    ) -> futures::future::BoxFuture<'a, ()> {
        self.0.release(id)
    }
}

#[tokio::test]
async fn an_acknowledgement_the_store_could_not_keep_says_saved_false() {
    // A working store first: no `saved` field at all.
    let dir = TempDir::new().unwrap();
    let h = server(&dir, vec![text("kept"), text("again")]).await;
    let chat = Chat::of(&h.open_raw(keyed("script:first")).await.1);
    let mut events = h.events(&chat, 0).await;
    let (s, v) = h.post(&chat, "/messages", json!({"text": "hello"})).await;
    assert_eq!(s, 202, "{v}");
    assert!(v.get("saved").is_none(), "{v}");
    events.idle().await;
    let (s, v) = h.post(&chat, "/clear", json!({})).await;
    assert_eq!(s, 200, "{v}");
    assert!(v.get("saved").is_none(), "{v}");
    h.server.shutdown().await;

    let dir = TempDir::new().unwrap();
    let store = Arc::new(Unwritable(JsonlStore::new(dir.path())));
    let h = start(
        models(vec![(
            "script:first",
            scripted("first", vec![text("lost")]),
        )]),
        move |c| c.store(store),
    )
    .await;
    let chat = Chat::of(&h.open_raw(keyed("script:first")).await.1);
    let mut events = h.events(&chat, 0).await;
    let (s, v) = h.post(&chat, "/messages", json!({"text": "hello"})).await;
    assert_eq!(s, 202, "the chat goes on in memory: {v}");
    assert_eq!(v["saved"], false, "{v}");
    let warning = events.until("warning", |_| true).await;
    assert!(
        warning["message"]
            .as_str()
            .unwrap()
            .contains("no longer being saved"),
        "{warning}"
    );
    events.idle().await;
    let (s, v) = h.post(&chat, "/retry", json!({})).await;
    assert_eq!((s, &v["saved"]), (202, &json!(false)), "{v}");
    events.idle().await;
    let (s, v) = h.post(&chat, "/clear", json!({})).await;
    assert_eq!((s, &v["saved"]), (200, &json!(false)), "{v}");
    h.server.shutdown().await;
}
