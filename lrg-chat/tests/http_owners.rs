//! Owners over HTTP, over a real JSONL store: owner tokens minted by the
//! agent token; an owner's chats created, listed newest first with their
//! titles, opened again after a restart, renamed (kept across it) and
//! deleted; an owner token working its own chats' routes and refused, with
//! the uniform 403, on everyone else's.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::http_support;

use std::sync::Arc;
use std::time::Duration;

use http_support::*;
use lrg_chat::store::JsonlStore;
use lrg_providers::ScriptedTurn;
use reqwest::Method;
use serde_json::{Value, json};
use tempfile::TempDir;

fn replies() -> Vec<ScriptedTurn> {
    (1..=20).map(|n| text(&format!("Reply {n}."))).collect()
}

/// A server keeping chats in `dir`, on `script:first`.
async fn server(dir: &TempDir) -> Harness {
    let store = Arc::new(JsonlStore::new(dir.path()));
    start(
        models(vec![("script:first", scripted("first", replies()))]),
        move |c| {
            c.store(store)
                .defaults(lrg_chat::http::ChatSpec::new().model("script:first"))
        },
    )
    .await
}

/// `method path` with `token` (if any) and `body` (if any): status, body
/// text.
async fn raw(
    h: &Harness,
    method: Method,
    path: &str,
    token: Option<&str>,
    body: Option<Value>,
) -> (u16, String) {
    let mut req = h.client.request(method, h.url(path));
    if let Some(token) = token {
        req = req.bearer_auth(token);
    }
    if let Some(body) = body {
        req = req.json(&body);
    }
    let r = req.send().await.unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

async fn request(
    h: &Harness,
    method: Method,
    path: &str,
    token: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let (s, text) = raw(h, method, path, Some(token), body).await;
    (s, serde_json::from_str(&text).unwrap_or(Value::Null))
}

async fn mint(h: &Harness, owner: &str) -> String {
    let (s, v) = request(
        h,
        Method::POST,
        &format!("/v1/owners/{owner}/tokens"),
        AGENT,
        None,
    )
    .await;
    assert_eq!(s, 201, "{v}");
    assert_eq!(v["owner"], owner);
    v["token"].as_str().unwrap().to_string()
}

async fn list(h: &Harness, owner: &str, token: &str) -> Vec<Value> {
    let (s, v) = request(
        h,
        Method::GET,
        &format!("/v1/owners/{owner}/chats"),
        token,
        None,
    )
    .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["owner"], owner);
    v["chats"].as_array().unwrap().clone()
}

async fn create(h: &Harness, owner: &str, token: &str) -> Chat {
    let (s, v) = request(
        h,
        Method::POST,
        &format!("/v1/owners/{owner}/chats"),
        token,
        Some(json!({"model": "script:first"})),
    )
    .await;
    assert_eq!(s, 201, "{v}");
    assert_eq!(v["model"], "script:first");
    Chat::of(&v)
}

/// Send `text` as the chat's token (or an owner's: `chat.token`) and wait
/// for the answer.
async fn say(h: &Harness, chat: &Chat, text: &str) {
    let mut events = h.events(chat, 0).await;
    let (s, v) = h.post(chat, "/messages", json!({"text": text})).await;
    assert_eq!(s, 202, "{v}");
    events.until("busy", |e| e["busy"] == true).await;
    events.idle().await;
}

fn column<'a>(chats: &'a [Value], field: &str) -> Vec<&'a Value> {
    chats.iter().map(|c| &c[field]).collect()
}

/// The body of the uniform 403, as a chat route gives it.
async fn forbidden_body(h: &Harness) -> String {
    let (s, body) = raw(
        h,
        Method::GET,
        "/v1/chat/sessions/00000000000000000000000000000000/transcript",
        Some("nobody"),
        None,
    )
    .await;
    assert_eq!(s, 403);
    body
}

#[tokio::test]
async fn an_owners_chats_are_listed_opened_renamed_and_deleted_across_a_restart() {
    let dir = TempDir::new().unwrap();
    let a = server(&dir).await;
    let token = mint(&a, "default").await;

    let first = create(&a, "default", &token).await;
    let second = create(&a, "default", &token).await;
    let third = create(&a, "default", &token).await;
    // Apart in time, so their order is the messages' order.
    say(&a, &first, "How do tides work?").await;
    tokio::time::sleep(Duration::from_millis(20)).await;
    let long = "Tell me about ".to_string() + &"the sea ".repeat(20);
    say(&a, &second, &long).await;

    let chats = list(&a, "default", &token).await;
    assert_eq!(
        column(&chats, "session"),
        [&json!(second.id), &json!(first.id), &json!(third.id)],
        "newest first: {chats:#?}"
    );
    let clipped: String = long.split_whitespace().collect::<Vec<_>>().join(" ");
    let clipped = format!("{}…", clipped.chars().take(80).collect::<String>());
    assert_eq!(
        column(&chats, "title"),
        [
            &json!(clipped),
            &json!("How do tides work?"),
            &json!("New chat")
        ]
    );
    for chat in &chats {
        assert_eq!(chat["model"], "script:first");
        assert_eq!(chat["name"], Value::Null);
        assert_eq!(
            (&chat["live"], &chat["running"], &chat["archived"]),
            (&json!(true), &json!(false), &json!(false))
        );
        for time in ["created_at", "updated_at"] {
            let t = chat[time].as_str().unwrap();
            assert!(
                t.len() == 20 && t.ends_with('Z') && &t[10..11] == "T",
                "{time}: {t}"
            );
        }
    }

    // The owner token works the chats' own routes, as their tokens do.
    let as_owner = Chat {
        id: first.id.clone(),
        token: token.clone(),
    };
    say(&a, &as_owner, "And the moon?").await;
    let (s, t) = a.get(&as_owner, "/transcript").await;
    assert_eq!(s, 200, "{t}");
    assert_eq!(t["rows"].as_array().unwrap().len(), 4, "{t}");

    // Named, capped, and a name is one line.
    let path = format!("/v1/owners/default/chats/{}", first.id);
    let (s, v) = request(
        &a,
        Method::PATCH,
        &path,
        &token,
        Some(json!({"name": "Tides"})),
    )
    .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(
        (&v["title"], &v["name"]),
        (&json!("Tides"), &json!("Tides"))
    );
    assert_eq!(v["session"], first.id.as_str());
    let (s, v) = request(
        &a,
        Method::PATCH,
        &path,
        &token,
        Some(json!({"name": "x".repeat(201)})),
    )
    .await;
    assert_eq!(s, 400, "{v}");
    assert!(
        v["error"]["message"].as_str().unwrap().contains("`name`"),
        "{v}"
    );
    a.server.shutdown().await;
    drop(a);

    // A restart: tokens are forgotten, chats are not, but for an empty one
    // nobody named (nothing to come back to).
    let b = server(&dir).await;
    let (s, _) = raw(
        &b,
        Method::GET,
        "/v1/owners/default/chats",
        Some(&token),
        None,
    )
    .await;
    assert_eq!(s, 403, "an owner token lives as long as its server");
    let token = mint(&b, "default").await;
    let chats = list(&b, "default", &token).await;
    assert_eq!(
        column(&chats, "session"),
        [&json!(first.id), &json!(second.id)],
        "{chats:#?}"
    );
    assert!(!dir.path().join(format!("{}.jsonl", third.id)).exists());
    assert_eq!(column(&chats, "title")[0], "Tides", "the name was kept");
    assert!(chats.iter().all(|c| c["live"] == false));

    // Opened again from the store, on its own model, with a new token.
    let (s, v) = request(
        &b,
        Method::POST,
        &format!("/v1/owners/default/chats/{}/open", second.id),
        &token,
        None,
    )
    .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(
        (&v["session"], &v["model"]),
        (&json!(second.id), &json!("script:first"))
    );
    let reopened = Chat::of(&v);
    assert_ne!(reopened.token, second.token);
    let (s, t) = b.get(&reopened, "/transcript").await;
    assert_eq!(s, 200, "{t}");
    assert_eq!(t["rows"].as_array().unwrap().len(), 2, "{t}");
    let chats = list(&b, "default", &token).await;
    assert_eq!(chats[1]["live"], true, "{chats:#?}");

    // Deleted: gone from the list and the store.
    let (s, body) = raw(
        &b,
        Method::DELETE,
        &format!("/v1/owners/default/chats/{}", first.id),
        Some(&token),
        None,
    )
    .await;
    assert_eq!((s, body.as_str()), (204, ""));
    let chats = list(&b, "default", &token).await;
    assert_eq!(column(&chats, "session"), [&json!(second.id)]);
    assert!(!dir.path().join(format!("{}.jsonl", first.id)).exists());
    // A live chat deleted ends: its token stops working.
    let (s, _) = raw(
        &b,
        Method::DELETE,
        &format!("/v1/owners/default/chats/{}", second.id),
        Some(&token),
        None,
    )
    .await;
    assert_eq!(s, 204);
    let (s, _) = b.get(&reopened, "/transcript").await;
    assert_eq!(s, 403);
    assert!(list(&b, "default", &token).await.is_empty());
    b.server.shutdown().await;
}

#[tokio::test]
async fn an_owner_token_is_refused_on_everyone_elses_chats_with_the_uniform_403() {
    let dir = TempDir::new().unwrap();
    let h = server(&dir).await;
    let forbidden = forbidden_body(&h).await;
    let alice = mint(&h, "alice").await;
    let bob = mint(&h, "bob").await;
    let hers = create(&h, "alice", &alice).await;
    say(&h, &hers, "a secret").await;
    let bobs = create(&h, "bob", &bob).await;

    let refused = [
        (Method::GET, "/v1/owners/alice/chats".to_string(), None),
        (
            Method::POST,
            "/v1/owners/alice/chats".to_string(),
            Some(json!({})),
        ),
        (
            Method::GET,
            format!("/v1/chat/sessions/{}/transcript", hers.id),
            None,
        ),
        (
            Method::GET,
            format!("/v1/chat/sessions/{}/events", hers.id),
            None,
        ),
        (
            Method::POST,
            format!("/v1/chat/sessions/{}/messages", hers.id),
            Some(json!({"text": "hi"})),
        ),
        (
            Method::DELETE,
            format!("/v1/chat/sessions/{}", hers.id),
            None,
        ),
        // Her chat through bob's own routes: as unknown as no chat at all.
        (
            Method::POST,
            format!("/v1/owners/bob/chats/{}/open", hers.id),
            None,
        ),
        (
            Method::PATCH,
            format!("/v1/owners/bob/chats/{}", hers.id),
            Some(json!({"name": "mine"})),
        ),
        (
            Method::DELETE,
            format!("/v1/owners/bob/chats/{}", hers.id),
            None,
        ),
        (
            Method::POST,
            "/v1/owners/bob/chats/0123456789abcdef0123456789abcdef/open".to_string(),
            None,
        ),
        (
            Method::POST,
            "/v1/owners/bob/chats/not-an-id/open".to_string(),
            None,
        ),
    ];
    for (method, path, body) in refused {
        let (s, text) = raw(&h, method.clone(), &path, Some(&bob), body).await;
        assert_eq!((s, &text), (403, &forbidden), "{method} {path}");
    }
    // Minting takes the agent token: an owner token, or none, is refused.
    for token in [Some(alice.as_str()), None] {
        let (s, text) = raw(&h, Method::POST, "/v1/owners/alice/tokens", token, None).await;
        assert_eq!((s, &text), (403, &forbidden));
    }
    // Nothing of hers changed, and bob sees only his.
    let (s, t) = h.get(&hers, "/transcript").await;
    assert_eq!(s, 200);
    assert_eq!(t["rows"].as_array().unwrap().len(), 2);
    let his = list(&h, "bob", &bob).await;
    assert_eq!(column(&his, "session"), [&json!(bobs.id)]);

    // The agent token may list anyone's; a chat it opens names its owner,
    // or is the default owner's.
    assert_eq!(list(&h, "alice", AGENT).await.len(), 1);
    let (s, v) = h
        .open_raw(json!({"model": "script:first", "owner": "alice"}))
        .await;
    assert_eq!(s, 201, "{v}");
    assert_eq!(list(&h, "alice", &alice).await.len(), 2);
    let plain = h.open(json!({"model": "script:first"})).await;
    let default = mint(&h, "default").await;
    let theirs = list(&h, "default", &default).await;
    assert_eq!(column(&theirs, "session"), [&json!(plain.id)]);

    // Bad owner names are a 400 naming the field.
    for (path, says) in [
        ("/v1/owners/a%20b/tokens", "' '"),
        (
            &*format!("/v1/owners/{}/tokens", "x".repeat(65)),
            "65 characters",
        ),
    ] {
        let (s, v) = request(&h, Method::POST, path, AGENT, None).await;
        assert_eq!(s, 400, "{v}");
        let message = v["error"]["message"].as_str().unwrap();
        assert!(
            message.starts_with("`owner`: ") && message.contains(says),
            "{message}"
        );
    }
    let (s, v) = h
        .open_raw(json!({"model": "script:first", "owner": "no/slash"}))
        .await;
    assert_eq!(s, 400, "{v}");
    // An owner's new chat cannot be given tools or keys.
    let (s, v) = request(
        &h,
        Method::POST,
        "/v1/owners/alice/chats",
        &alice,
        Some(json!({"mcpServers": test_mcp()})),
    )
    .await;
    assert_eq!(s, 400, "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("`mcpServers`")
    );
    h.server.shutdown().await;
}

#[tokio::test]
async fn every_chat_is_kept_keyed_or_not_and_an_unkeyed_one_survives_a_restart() {
    let dir = TempDir::new().unwrap();
    let a = server(&dir).await;
    // As `lrg serve` opens its first chat: from the app, with no keys.
    let link = a
        .server
        .open_chat(lrg_chat::http::ChatSpec::new())
        .await
        .unwrap();
    let chat = Chat {
        id: link.session.clone(),
        token: link.chat_token.clone(),
    };
    say(&a, &chat, "Remember this").await;
    assert!(dir.path().join(format!("{}.jsonl", chat.id)).exists());
    a.server.shutdown().await;
    drop(a);

    let b = server(&dir).await;
    let token = b.server.owner_token("default").unwrap();
    let chats = list(&b, "default", &token).await;
    assert_eq!(column(&chats, "title"), [&json!("Remember this")]);
    let (s, v) = request(
        &b,
        Method::POST,
        &format!("/v1/owners/default/chats/{}/open", chat.id),
        &token,
        None,
    )
    .await;
    assert_eq!(s, 200, "{v}");
    let (s, t) = b.get(&Chat::of(&v), "/transcript").await;
    assert_eq!((s, t["rows"].as_array().unwrap().len()), (200, 2), "{t}");
    b.server.shutdown().await;
}
