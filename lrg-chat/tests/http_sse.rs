//! The event stream's bytes: each event framed as it always was (`data:`
//! line, then `id:` when numbered), events already queued sent together in
//! one body chunk, and heartbeats on an idle stream.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::http_support;

use std::time::Duration;

use axum::body::{Body, BodyDataStream};
use axum::http::Request;
use futures::StreamExt as _;
use http_support::*;
use lrg_chat::events::{DeltaKind, Event, LogEntry};
use serde_json::json;
use tower::ServiceExt as _;

/// A chat on a model that answers one message with `answer`, the server's
/// heartbeat every `heartbeat`.
async fn chat(answer: &str, heartbeat: Duration) -> (Harness, Chat) {
    let h = start(
        models(vec![(
            "script:first",
            scripted("first", vec![text(answer)]),
        )]),
        |c| c.heartbeat(heartbeat),
    )
    .await;
    let chat = h.open(json!({"model": "script:first"})).await;
    (h, chat)
}

/// The chat's stream from after `after`, through the router, as body chunks.
async fn stream(h: &Harness, chat: &Chat, after: u64) -> BodyDataStream {
    let req = Request::builder()
        .uri(format!(
            "/v1/chat/sessions/{}/events?after={after}",
            chat.id
        ))
        .header("authorization", format!("Bearer {}", chat.token))
        .body(Body::empty())
        .unwrap();
    let res = h.router.clone().oneshot(req).await.unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(res.headers()["content-type"], "text/event-stream");
    assert_eq!(res.headers()["cache-control"], "no-store");
    assert_eq!(res.headers()["x-accel-buffering"], "no");
    res.into_body().into_data_stream()
}

async fn chunk(body: &mut BodyDataStream) -> String {
    let bytes = tokio::time::timeout(WAIT, body.next())
        .await
        .expect("a chunk in time")
        .expect("the stream goes on")
        .unwrap();
    String::from_utf8(bytes.to_vec()).unwrap()
}

/// `entry` framed the way the stream has always framed it.
fn framed(entry: &LogEntry) -> String {
    let data = serde_json::to_string(entry).unwrap();
    match entry.seq {
        Some(seq) => format!("data: {data}\nid: {seq}\n\n"),
        None => format!("data: {data}\n\n"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replay_goes_out_in_one_chunk_framed_as_before() {
    let (h, chat) = chat("Hello there.", Duration::from_secs(3600)).await;
    let mut watcher = h.events(&chat, 0).await;
    let (s, _) = h.post(&chat, "/messages", json!({"text": "hi"})).await;
    assert_eq!(s, 202);
    watcher.idle().await;
    let log = h.server.session(&chat.id).unwrap().events().entries();
    assert!(log.len() >= 4, "user message, busy, turn, idle: {log:?}");

    let mut body = stream(&h, &chat, 0).await;
    let expected: String = log.iter().map(|e| framed(e)).collect();
    assert_eq!(chunk(&mut body).await, expected);

    // From after a seq: the rest only, still in one chunk.
    let mut body = stream(&h, &chat, 2).await;
    let expected: String = log[2..].iter().map(|e| framed(e)).collect();
    assert_eq!(chunk(&mut body).await, expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_stream_sends_heartbeats_then_live_events() {
    let (h, chat) = chat("unused", Duration::from_millis(50)).await;
    let session = h.server.session(&chat.id).unwrap();
    let after = session.events().last_seq();
    let mut body = stream(&h, &chat, after).await;
    assert_eq!(chunk(&mut body).await, ":\n\n");
    assert_eq!(chunk(&mut body).await, ":\n\n", "and again while idle");

    let delta = Event::Delta {
        kind: DeltaKind::Text,
        text: "line one\nline \"two\"\r".into(),
    };
    session.events().publish_live(delta.clone());
    let warning = Event::Warning {
        message: "numbered".into(),
        retrying: false,
    };
    let seq = session.events().publish(warning.clone());
    let expected = framed(&LogEntry {
        seq: None,
        event: delta,
    }) + &framed(&LogEntry {
        seq: Some(seq),
        event: warning,
    });
    // One chunk or two, as the stream happens to be woken; heartbeats may
    // come between them.
    let mut got = String::new();
    while got.len() < expected.len() {
        let next = chunk(&mut body).await;
        if next != ":\n\n" {
            got.push_str(&next);
        }
    }
    assert_eq!(got, expected);
    assert_eq!(
        got.matches("data: ").count(),
        2,
        "a newline in text stays escaped"
    );
}
