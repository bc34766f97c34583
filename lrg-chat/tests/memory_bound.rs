//! A live chat's memory stays bounded however long it runs: the event log
//! keeps only its newest events (by count and by bytes), a viewer that asks
//! for forgotten ones is told to `resync`, and the conversation itself is
//! still there to rebuild from (the transcript).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::http_support;

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt as _;
use http_support::{AGENT, Chat, WAIT, models};
use lrg_chat::events::{DEFAULT_MAX_KEPT_EVENT_BYTES, Event};
use lrg_chat::http::{ChatServer, HttpConfig, MenuEntry, StandardOpener, StaticMenu};
use lrg_chat::session::SessionConfig;
use lrg_chat::transcript::{Transcript, TranscriptRow};
use lrg_chat::{ChatSession, FixedModel};
use lrg_providers::{ModelLocation, ProviderError, ScriptedModel, ScriptedTurn};
use serde_json::json;

const MIB: usize = 1024 * 1024;

/// An answer of about `bytes` bytes that starts with its number (two words:
/// the scripted model streams it as a few deltas, not millions).
fn answer(i: usize, bytes: usize) -> String {
    let head = format!("answer {i} ");
    format!("{head}{}", "x".repeat(bytes.saturating_sub(head.len())))
}

fn turns(n: usize, bytes: usize) -> Vec<ScriptedTurn> {
    (0..n)
        .map(|i| ScriptedTurn {
            text: Some(answer(i, bytes)),
            ..Default::default()
        })
        .collect()
}

fn session(turns: Vec<ScriptedTurn>, config: SessionConfig) -> ChatSession {
    ChatSession::builder(Arc::new(FixedModel::new(ScriptedModel::new(turns))))
        .config(config)
        .build()
}

async fn talk(session: &ChatSession, n: usize) {
    for i in 0..n {
        let outcome = tokio::time::timeout(WAIT, session.send(format!("question {i}")).unwrap())
            .await
            .expect("the answer comes in time");
        assert!(
            matches!(outcome, lrg_chat::TurnOutcome::Completed { .. }),
            "message {i}: {outcome:?}"
        );
    }
}

#[tokio::test]
async fn the_event_log_keeps_at_most_its_bound_and_a_stale_subscriber_resyncs() {
    let bound = 4 * MIB;
    let config = SessionConfig {
        max_kept_event_bytes: bound,
        ..SessionConfig::default()
    };
    let s = session(turns(50, MIB), config);
    talk(&s, 50).await;

    let log = s.events();
    assert!(
        log.retained_bytes() <= bound,
        "the log keeps {} bytes, over its bound of {bound}",
        log.retained_bytes()
    );
    let first = log.first_kept_seq();
    assert!(first > 1, "older events were forgotten");
    let kept = log.entries();
    assert_eq!(kept.first().and_then(|e| e.seq), Some(first));
    assert_eq!(kept.last().and_then(|e| e.seq), Some(log.last_seq()));
    assert_eq!(kept.len() as u64, log.last_seq() - first + 1, "no gap");

    // A viewer from the start cannot be rebuilt from the log: resync, end.
    let mut stale = s.subscribe(0);
    let e = tokio::time::timeout(WAIT, stale.next()).await.unwrap();
    assert_eq!(e.map(|e| e.event.clone()), Some(Event::Resync));
    assert!(
        tokio::time::timeout(WAIT, stale.next())
            .await
            .unwrap()
            .is_none()
    );
    // One that saw up to just before the oldest kept event catches up.
    let mut fresh = s.subscribe(first - 1);
    let e = tokio::time::timeout(WAIT, fresh.next())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(e.seq, Some(first));

    // The conversation is whole: every question and every answer.
    let t = Transcript::whole(&s.history());
    assert_eq!(t.rows.len(), 100);
    for (i, pair) in t.rows.chunks(2).enumerate() {
        let [
            TranscriptRow::User { text: q, .. },
            TranscriptRow::Assistant { text: a, .. },
        ] = pair
        else {
            panic!("row pair {i}: {pair:?}");
        };
        assert_eq!(q, &format!("question {i}"));
        assert!(a.starts_with(&format!("answer {i} ")), "answer {i}");
    }
}

#[tokio::test]
async fn the_event_log_is_bounded_by_count_too() {
    let config = SessionConfig {
        max_kept_events: 10,
        ..SessionConfig::default()
    };
    let s = session(turns(20, 10), config);
    talk(&s, 20).await;
    assert_eq!(s.events().entries().len(), 10);
    assert_eq!(s.events().first_kept_seq(), s.events().last_seq() - 9);
}

/// This process's resident memory, as Linux reports it (informational).
fn rss() -> String {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .map(|l| l["VmRSS:".len()..].trim().to_string())
        })
        .unwrap_or_else(|| "n/a".into())
}

/// The figure: 20 answers at the answer cap (4 MiB) with the default bound.
/// Before the bound the log held a copy of every one (80 MiB).
#[tokio::test]
async fn twenty_answers_at_the_cap_keep_at_most_the_default_bound() {
    let s = session(turns(20, 4 * MIB - 1024), SessionConfig::default());
    talk(&s, 20).await;
    let retained = s.events().retained_bytes();
    let published: usize = 20 * (4 * MIB - 1024);
    println!(
        "figure: 20 answers of 4 MiB: the event log keeps {:.1} MiB of {:.1} MiB published \
         (events {}..={}); process RSS {}",
        retained as f64 / MIB as f64,
        published as f64 / MIB as f64,
        s.events().first_kept_seq(),
        s.events().last_seq(),
        rss()
    );
    assert!(retained <= DEFAULT_MAX_KEPT_EVENT_BYTES, "{retained}");
}

/// Over HTTP, as the page drives it: `after=0` on a chat whose log forgot
/// its start gets `resync` and the stream ends; the transcript says where
/// to follow from, and following from there works.
#[tokio::test]
async fn over_http_a_forgotten_after_gets_resync_and_the_transcript_says_where_to_go_on() {
    let config = SessionConfig {
        max_kept_event_bytes: 256 * 1024,
        ..SessionConfig::default()
    };
    let model: Arc<dyn lrg_providers::ChatModel> =
        Arc::new(ScriptedModel::named("first", turns(30, 32 * 1024)));
    let found = models(vec![("script:first", model)]);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let opener = StandardOpener::new(move |id: &str| {
        let found = found.lock().unwrap().get(id).cloned();
        let id = id.to_string();
        Box::pin(async move {
            found.ok_or(ProviderError::Config {
                message: format!("unknown model {id}"),
            })
        })
    })
    .session_config(config);
    let menu = StaticMenu(vec![MenuEntry::available(
        "script",
        "first",
        ModelLocation::Local,
    )]);
    let server = ChatServer::new(
        HttpConfig::new(AGENT).allow_origin(base.clone()),
        Arc::new(opener),
        Arc::new(menu),
    );
    let app = server.router();
    tokio::spawn(async move { axum::serve(listener, app).await });
    lrg_providers::transport::ensure_tls_provider();
    let client = reqwest::Client::new();

    let r = client
        .post(format!("{base}/v1/chat/sessions"))
        .bearer_auth(AGENT)
        .json(&json!({"model": "script:first"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let chat = Chat::of(&r.json().await.unwrap());
    let url = |path: &str| format!("{base}/v1/chat/sessions/{}{path}", chat.id);
    let session = server.session(&chat.id).unwrap();
    for i in 0..30 {
        let r = client
            .post(url("/messages"))
            .bearer_auth(&chat.token)
            .json(&json!({"text": format!("question {i}")}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 202, "message {i}");
        tokio::time::timeout(WAIT, session.wait_idle())
            .await
            .expect("the answer comes in time");
    }
    let log = session.events();
    assert!(log.retained_bytes() <= 256 * 1024);
    let first = log.first_kept_seq();
    assert!(first > 1);

    // after=0: resync, then the stream ends.
    let r = client
        .get(url("/events?after=0"))
        .bearer_auth(&chat.token)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let body = tokio::time::timeout(WAIT, r.text())
        .await
        .expect("the stream ends")
        .unwrap();
    assert_eq!(body, "data: {\"type\":\"resync\"}\n\n");

    // The transcript: the conversation, and where its events go on.
    let r = client
        .get(url("/transcript"))
        .bearer_auth(&chat.token)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let header = |name: &str| -> u64 { r.headers()[name].to_str().unwrap().parse().unwrap() };
    assert_eq!(header("lrg-last-seq"), log.last_seq());
    assert_eq!(header("lrg-first-kept-seq"), first);
    let t: serde_json::Value = r.json().await.unwrap();
    let rows = t["rows"].as_array().unwrap();
    let last = rows.last().unwrap();
    assert_eq!(last["type"], "assistant");
    assert!(last["text"].as_str().unwrap().starts_with("answer 29 "));

    // Following from the oldest kept event works as before.
    let r = client
        .get(url(&format!("/events?after={}", first - 1)))
        .bearer_auth(&chat.token)
        .send()
        .await
        .unwrap();
    let mut stream = r.bytes_stream();
    let mut buf = String::new();
    while !buf.contains("\n\n") {
        let chunk = tokio::time::timeout(Duration::from_secs(20), stream.next())
            .await
            .expect("an event in time")
            .expect("the stream goes on")
            .unwrap();
        buf.push_str(std::str::from_utf8(&chunk).unwrap());
    }
    assert!(buf.contains(&format!("\nid: {first}\n")), "{buf}");
    assert!(!buf.contains("resync"), "{buf}");
}
