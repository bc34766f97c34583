//! The HTTP API over real loopback HTTP (and, where exact bytes or an
//! unread body matter, through the router directly): every route and status,
//! the uniform 403, limits, and the event stream's replay rules.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::http_support;

use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_support::*;
use lrg_chat::http::Limits;
use lrg_providers::ScriptedTurn;
use reqwest::Method;
use serde_json::{Value, json};
use tower::ServiceExt as _;

/// A chat on `script:first` with the test MCP server.
async fn chat_with(turns: Vec<ScriptedTurn>) -> (Harness, Chat) {
    let h = start(
        models(vec![
            ("script:first", scripted("first", turns)),
            (
                "script:second",
                scripted("second", vec![text("I am the second model.")]),
            ),
        ]),
        |c| c,
    )
    .await;
    let chat = h
        .open(json!({"model": "script:first", "mcpServers": test_mcp()}))
        .await;
    (h, chat)
}

/// Status, every header, and the body: what "byte for byte" compares.
async fn raw(
    router: &axum::Router,
    req: Request<Body>,
) -> (StatusCode, Vec<(String, Vec<u8>)>, Vec<u8>) {
    let res = router.clone().oneshot(req).await.unwrap();
    let status = res.status();
    let mut headers: Vec<_> = res
        .headers()
        .iter()
        .map(|(k, v)| (k.to_string(), v.as_bytes().to_vec()))
        .collect();
    headers.sort();
    let body = axum::body::to_bytes(res.into_body(), 1 << 20)
        .await
        .unwrap()
        .to_vec();
    (status, headers, body)
}

fn req(
    method: &str,
    uri: &str,
    token: Option<&str>,
    origin: Option<&str>,
    body: Option<Value>,
) -> Request<Body> {
    let mut b = Request::builder().method(method).uri(uri);
    if let Some(t) = token {
        b = b.header("authorization", format!("Bearer {t}"));
    }
    if let Some(o) = origin {
        b = b.header("origin", o);
    }
    match body {
        Some(v) => b
            .header("content-type", "application/json")
            .body(Body::from(v.to_string()))
            .unwrap(),
        None => b.body(Body::empty()).unwrap(),
    }
}

#[tokio::test]
async fn opening_a_chat_takes_the_agent_token() {
    let h = start(
        models(vec![("script:first", scripted("first", vec![]))]),
        |c| c,
    )
    .await;
    for token in [None, Some("wrong"), Some(&AGENT[1..])] {
        let mut r = h
            .client
            .post(h.url("/v1/chat/sessions"))
            .json(&json!({"model": "script:first"}));
        if let Some(t) = token {
            r = r.bearer_auth(t);
        }
        assert_eq!(r.send().await.unwrap().status(), 403, "{token:?}");
    }
    let r = h
        .client
        .post(h.url("/v1/chat/sessions"))
        .bearer_auth(AGENT)
        .json(&json!({"model": "script:first"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let v: Value = r.json().await.unwrap();
    let (id, token) = (
        v["session"].as_str().unwrap(),
        v["chat_token"].as_str().unwrap(),
    );
    assert!(token.len() >= 22, "at least 128 bits: {token}");
    assert_eq!(
        v["page_url"],
        format!("/v1/ui/chat#session={id}&token={token}"),
        "the token travels in the fragment only"
    );
    assert_eq!(h.server.chat_count(), 1);
}

#[tokio::test]
async fn every_refusal_is_the_same_403_byte_for_byte() {
    let (h, chat) = chat_with(vec![]).await;
    let ended = h.open(json!({"model": "script:first"})).await;
    let (s, _) = h.call(&ended, Method::DELETE, "", None).await;
    assert_eq!(s, 200);
    let foreign = Some("http://evil.example");
    let own = Some(h.base.as_str());
    let t = |c: &Chat| format!("/v1/chat/sessions/{}/transcript", c.id);
    let cases = vec![
        (
            "wrong chat token",
            req("GET", &t(&chat), Some("nope"), None, None),
        ),
        ("no token", req("GET", &t(&chat), None, None, None)),
        (
            "another chat's token",
            req("GET", &t(&chat), Some(&ended.token), None, None),
        ),
        (
            "right token, foreign origin",
            req("GET", &t(&chat), Some(&chat.token), foreign, None),
        ),
        (
            "ended chat, its own token",
            req("GET", &t(&ended), Some(&ended.token), own, None),
        ),
        (
            "unknown chat",
            req(
                "GET",
                "/v1/chat/sessions/0000/transcript",
                Some(&chat.token),
                None,
                None,
            ),
        ),
        (
            "message with a wrong token",
            req(
                "POST",
                &format!("/v1/chat/sessions/{}/messages", chat.id),
                Some("x"),
                None,
                Some(json!({"text": "hi"})),
            ),
        ),
        (
            "events from a foreign origin",
            req(
                "GET",
                &format!("/v1/chat/sessions/{}/events", chat.id),
                Some(&chat.token),
                foreign,
                None,
            ),
        ),
        (
            "approval on an ended chat",
            req(
                "POST",
                &format!("/v1/chat/sessions/{}/approvals/c1", ended.id),
                Some(&ended.token),
                None,
                Some(json!({"answer": "once"})),
            ),
        ),
        (
            "open with a wrong agent token",
            req(
                "POST",
                "/v1/chat/sessions",
                Some("wrong"),
                None,
                Some(json!({})),
            ),
        ),
        (
            "open from a foreign origin",
            req(
                "POST",
                "/v1/chat/sessions",
                Some(AGENT),
                foreign,
                Some(json!({})),
            ),
        ),
        (
            "delete an ended chat",
            req(
                "DELETE",
                &format!("/v1/chat/sessions/{}", ended.id),
                Some(&ended.token),
                None,
                None,
            ),
        ),
    ];
    let mut first = None;
    for (what, request) in cases {
        let got = raw(&h.router, request).await;
        assert_eq!(got.0, StatusCode::FORBIDDEN, "{what}");
        match &first {
            None => first = Some(got),
            Some(f) => assert_eq!(&got, f, "{what}: not the same 403"),
        }
    }
    let (_, headers, body) = first.unwrap();
    let body: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(body["error"]["kind"], "forbidden");
    assert!(headers.iter().any(|(k, _)| k == "cache-control"));

    // Over real HTTP too (the server adds only `date`).
    let over_http = |token: &str, origin: Option<&str>, c: &Chat| {
        let mut r = h.client.get(h.url(&t(c))).bearer_auth(token);
        if let Some(o) = origin {
            r = r.header("origin", o);
        }
        async move {
            let r = r.send().await.unwrap();
            let mut headers: Vec<_> = r
                .headers()
                .iter()
                .filter(|(k, _)| k.as_str() != "date")
                .map(|(k, v)| (k.to_string(), v.as_bytes().to_vec()))
                .collect();
            headers.sort();
            (r.status(), headers, r.bytes().await.unwrap())
        }
    };
    let a = over_http("nope", None, &chat).await;
    let b = over_http(&chat.token, foreign, &chat).await;
    let c = over_http(&ended.token, None, &ended).await;
    assert_eq!(a.0, 403);
    assert_eq!(a, b);
    assert_eq!(a, c);
}

#[tokio::test]
async fn a_chat_through_every_route() {
    let (h, chat) = chat_with(vec![
        ScriptedTurn {
            reasoning: Some("The user greets.".into()),
            text: Some("Hello there.".into()),
            ..Default::default()
        },
        call("delete_items", json!({"ids": [1, 2]})),
        call("image", json!({})),
        text("Deleted, and here is a picture."),
        text("Hello again."),
        text("We said hello."),
    ])
    .await;
    let mut events = h.events(&chat, 0).await;

    // A message: 202, streamed, then idle.
    let (s, v) = h.post(&chat, "/messages", json!({"text": "hi"})).await;
    assert_eq!(s, 202, "{v}");
    let turn = events.until("assistant_turn", |_| true).await;
    assert_eq!(turn["text"], "Hello there.");
    assert_eq!(turn["reasoning"], "The user greets.");
    assert!(
        events
            .seen
            .iter()
            .any(|e| e.data["type"] == "delta" && e.id.is_none())
    );
    events.idle().await;

    // A destructive call asks; a second message meanwhile is busy.
    let (s, _) = h
        .post(&chat, "/messages", json!({"text": "delete 1 and 2"}))
        .await;
    assert_eq!(s, 202);
    let asked = events.until("approval_needed", |_| true).await;
    let call_id = asked["call_id"].as_str().unwrap().to_string();
    assert_eq!(asked["offer_always"], true);
    let (s, v) = h.post(&chat, "/messages", json!({"text": "again"})).await;
    assert_eq!((s, v["error"]["kind"].as_str()), (409, Some("busy")));
    let (s, _) = h.post(&chat, "/retry", json!({})).await;
    assert_eq!(s, 409);
    let (s, v) = h
        .post(&chat, "/approvals/nope", json!({"answer": "once"}))
        .await;
    assert_eq!((s, v["error"]["kind"].as_str()), (404, Some("not_found")));
    let (s, v) = h
        .post(
            &chat,
            &format!("/approvals/{call_id}"),
            json!({"answer": "once"}),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    let done = events
        .until("tool_done", |e| e["call_id"] == call_id.as_str())
        .await;
    assert_eq!(done["text"], "trashed 2 items");
    // The read tool runs without asking and returns an image.
    let pic = events.until("tool_done", |e| e["images"].is_array()).await;
    assert_eq!(pic["images"][0]["mime"], "image/png");
    assert_eq!(pic["images"][0]["index"], 0);
    let pic_id = pic["call_id"].as_str().unwrap().to_string();
    events.idle().await;

    // The image, from the tokened route.
    let r = h
        .client
        .get(h.url(&format!("/v1/chat/sessions/{}/images/{pic_id}/0", chat.id)))
        .bearer_auth(&chat.token)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-type"], "image/png");
    let bytes = r.bytes().await.unwrap();
    assert!(bytes.starts_with(b"\x89PNG"));
    assert_eq!(pic["images"][0]["bytes"], bytes.len());
    let (s, _) = h.get(&chat, &format!("/images/{pic_id}/1")).await;
    assert_eq!(s, 404);
    let (s, v) = h.get(&chat, &format!("/images/{pic_id}/x")).await;
    assert_eq!(s, 400);
    assert!(v["error"]["message"].as_str().unwrap().contains("`n`"));

    // The transcript as rendered: each tool call one row with its outcome,
    // images described.
    let (s, t) = h.get(&chat, "/transcript").await;
    assert_eq!(s, 200);
    let rows: Vec<&str> = t["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        rows,
        [
            "user",
            "assistant",
            "user",
            "tool_call",
            "tool_call",
            "assistant"
        ]
    );
    assert_eq!(t["truncated"], false);
    assert_eq!(t["rows"][1]["reasoning"], "The user greets.");
    assert_eq!(t["rows"][3]["outcome"], "ok");
    let pic_row = &t["rows"][4];
    assert_eq!(pic_row["call_id"], pic_id.as_str());
    assert_eq!(pic_row["images"][0]["mime"], "image/png");
    assert_eq!(pic_row["images"][0]["bytes"], bytes.len());

    // Retry, compact, clear, stop when idle.
    let (s, _) = h.post(&chat, "/retry", json!({})).await;
    assert_eq!(s, 202);
    events.until("rewound", |_| true).await;
    assert_eq!(
        events.until("assistant_turn", |_| true).await["text"],
        "Hello again."
    );
    events.idle().await;
    let (s, _) = h.post(&chat, "/compact", json!({})).await;
    assert_eq!(s, 202);
    assert_eq!(
        events.until("compacted", |_| true).await["summary"],
        "We said hello."
    );
    events.idle().await;
    let (s, _) = h.post(&chat, "/clear", json!({})).await;
    assert_eq!(s, 200);
    events.until("cleared", |_| true).await;
    let (s, v) = h.post(&chat, "/compact", json!({})).await;
    assert_eq!((s, v["error"]["kind"].as_str()), (409, Some("conflict")));
    let (s, v) = h.post(&chat, "/stop", json!({})).await;
    assert_eq!((s, &v), (200, &json!({"stopped": false})));

    // Permissions: read, change, told as an event.
    let (s, p) = h.get(&chat, "/permissions").await;
    assert_eq!(s, 200);
    assert_eq!(
        (
            p["mode"].as_str(),
            p["bulk_limit"].as_u64(),
            p["saved"].as_bool()
        ),
        (Some("auto_read"), Some(200), Some(false))
    );
    assert!(
        p["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "delete_items" && t["class"] == "destructive")
    );
    let (s, p) = h
        .call(
            &chat,
            Method::PUT,
            "/permissions",
            Some(json!({"mode": "ask_all", "rules": {"echo": "block"}, "bulk_limit": 5})),
        )
        .await;
    assert_eq!(s, 200, "{p}");
    assert_eq!(
        (p["mode"].as_str(), p["bulk_limit"].as_u64()),
        (Some("ask_all"), Some(5))
    );
    assert_eq!(p["rules"], json!({"echo": "block"}));
    events
        .until("permissions", |e| e["settings"]["mode"] == "ask_all")
        .await;

    // The model menu, grouped, with the current model marked.
    let (s, m) = h.get(&chat, "/models").await;
    assert_eq!(s, 200);
    assert_eq!(m["current"]["id"], "script:first");
    let groups: Vec<&str> = m["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["provider"].as_str().unwrap())
        .collect();
    assert_eq!(groups, ["script", "openai", "anthropic"]);
    assert_eq!(m["groups"][0]["models"][0]["current"], true);
    assert_eq!(m["groups"][2]["models"][0]["available"], false);
    assert_eq!(
        m["groups"][2]["models"][0]["reason"],
        "no key: set ANTHROPIC_API_KEY"
    );

    // Switching opens a new chat beside this one, which goes on.
    let (s, v) = h
        .post(&chat, "/model", json!({"model": "nope:x", "confirm": true}))
        .await;
    assert_eq!(s, 400);
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("`model`"),
        "{v}"
    );
    let (s, v) = h
        .post(&chat, "/model", json!({"model": "script:second"}))
        .await;
    assert_eq!(s, 201, "{v}");
    let next = Chat {
        id: v["session"].as_str().unwrap().into(),
        token: v["chat_token"].as_str().unwrap().into(),
    };
    assert_ne!(next.id, chat.id);
    // The old chat is not ended: its token still works.
    let (s, _) = h.get(&chat, "/transcript").await;
    assert_eq!(s, 200);
    drop(events);
    // The new chat has the same connections and settings, and no history.
    let (_, p) = h.get(&next, "/permissions").await;
    assert_eq!(p["mode"], "ask_all");
    assert!(
        p["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "delete_items")
    );
    let (_, t) = h.get(&next, "/transcript").await;
    assert_eq!(t["rows"], json!([]));
    let (_, m) = h.get(&next, "/models").await;
    assert_eq!(m["current"]["id"], "script:second");
    assert_eq!(h.server.chat_count(), 2);

    // End them.
    let (s, _) = h.call(&next, Method::DELETE, "", None).await;
    assert_eq!(s, 200);
    let (s, _) = h.call(&next, Method::DELETE, "", None).await;
    assert_eq!(s, 403);
    let (s, _) = h.call(&chat, Method::DELETE, "", None).await;
    assert_eq!(s, 200);
    assert_eq!(h.server.chat_count(), 0);
}

#[tokio::test]
async fn unknown_routes_and_methods_are_json_errors() {
    let (h, chat) = chat_with(vec![]).await;
    let r = h.client.get(h.url("/v1/nothing")).send().await.unwrap();
    assert_eq!(r.status(), 404);
    assert_eq!(
        r.json::<Value>().await.unwrap()["error"]["kind"],
        "not_found"
    );
    let (s, v) = h.call(&chat, Method::GET, "/messages", None).await;
    assert_eq!(
        (s, v["error"]["kind"].as_str()),
        (405, Some("method_not_allowed"))
    );
}

#[tokio::test]
async fn bad_input_is_a_400_that_names_the_field() {
    let (h, chat) = chat_with(vec![]).await;
    let cases = [
        ("/messages", json!({"text": 5}), "text"),
        ("/messages", json!({"txt": "hi"}), "txt"),
        ("/messages", json!({"text": "  "}), "text"),
        (
            "/messages",
            json!({"text": "a", "images": [{"mime": "text/html", "data": ""}]}),
            "images[0].mime",
        ),
        (
            "/messages",
            json!({"text": "a", "images": [{"mime": "image/png", "data": "%%"}]}),
            "images[0].data",
        ),
        ("/approvals/c1", json!({"answer": "maybe"}), "answer"),
        (
            "/approvals/c1",
            json!({"answer": "once", "note": "x"}),
            "note",
        ),
        ("/model", json!({"confirm": true}), "model"),
    ];
    for (route, body, field) in cases {
        let (s, v) = h.post(&chat, route, body.clone()).await;
        let message = v["error"]["message"].as_str().unwrap_or_default();
        assert_eq!(
            (s, v["error"]["kind"].as_str()),
            (400, Some("bad_request")),
            "{route} {body}: {v}"
        );
        assert!(
            message.contains(&format!("`{field}`")) || message.contains(field),
            "{route} {body}: {message}"
        );
        assert!(
            !message.contains("panicked") && !message.contains(".rs"),
            "{message}"
        );
    }
    let (s, v) = h
        .call(
            &chat,
            Method::PUT,
            "/permissions",
            Some(json!({"mode": "sometimes"})),
        )
        .await;
    assert_eq!(s, 400);
    assert!(
        v["error"]["message"].as_str().unwrap().contains("mode"),
        "{v}"
    );
    let r = h
        .client
        .get(h.url(&format!("/v1/chat/sessions/{}/events?after=abc", chat.id)))
        .bearer_auth(&chat.token)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    assert!(r.text().await.unwrap().contains("`after`"));
    let r = h
        .client
        .post(h.url(&format!("/v1/chat/sessions/{}/messages", chat.id)))
        .bearer_auth(&chat.token)
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    for (body, field) in [
        (json!({"model": "nope:x"}), "`model`"),
        (
            json!({"model": "script:first", "mcpServers": {"bad": {}}}),
            "`mcpServers`",
        ),
        (
            json!({"model": "script:first", "permissions": {"mode": "x"}}),
            "permissions.mode",
        ),
        (json!({"modle": "script:first"}), "modle"),
    ] {
        let r = h
            .client
            .post(h.url("/v1/chat/sessions"))
            .bearer_auth(AGENT)
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 400, "{body}");
        let v: Value = r.json().await.unwrap();
        assert!(
            v["error"]["message"].as_str().unwrap().contains(field),
            "{body}: {v}"
        );
    }
}

#[tokio::test]
async fn limits_are_clear_413s_and_429s() {
    let h = start(
        models(vec![("script:first", scripted("first", vec![]))]),
        |c| {
            c.limits({
                let mut l = Limits::default();
                l.body_bytes = 2_000;
                l.message_chars = 100;
                l.chats = 2;
                l.subscribers_per_chat = 1;
                l
            })
        },
    )
    .await;
    let chat = h.open(json!({"model": "script:first"})).await;
    let (s, v) = h
        .post(&chat, "/messages", json!({"text": "x".repeat(5_000)}))
        .await;
    assert_eq!((s, v["error"]["kind"].as_str()), (413, Some("too_large")));
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("2000 bytes"),
        "{v}"
    );
    let (s, v) = h
        .post(&chat, "/messages", json!({"text": "é".repeat(101)}))
        .await;
    assert_eq!((s, v["error"]["kind"].as_str()), (413, Some("too_large")));
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("at most 100"),
        "{v}"
    );

    let _events = h.events(&chat, 0).await;
    let r = h
        .client
        .get(h.url(&format!("/v1/chat/sessions/{}/events", chat.id)))
        .bearer_auth(&chat.token)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 429);
    assert_eq!(
        r.json::<Value>().await.unwrap()["error"]["kind"],
        "too_many"
    );

    h.open(json!({"model": "script:first"})).await;
    let r = h
        .client
        .post(h.url("/v1/chat/sessions"))
        .bearer_auth(AGENT)
        .json(&json!({"model": "script:first"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 429);
    assert!(r.text().await.unwrap().contains("2 chats are open"));
}

#[tokio::test]
async fn reconnecting_with_after_rebuilds_the_same_log() {
    let (h, chat) = chat_with(vec![
        text("One."),
        call("echo", json!({"text": "x"})),
        text("Two."),
    ])
    .await;
    let mut live = h.events(&chat, 0).await;
    h.post(&chat, "/messages", json!({"text": "a"})).await;
    live.idle().await;
    h.post(&chat, "/messages", json!({"text": "b"})).await;
    live.idle().await;
    let numbered: Vec<SseEvent> = live
        .seen
        .iter()
        .filter(|e| e.id.is_some())
        .cloned()
        .collect();
    let last = numbered.last().unwrap().id.unwrap();
    assert_eq!(
        numbered.iter().map(|e| e.id.unwrap()).collect::<Vec<_>>(),
        (1..=last).collect::<Vec<_>>()
    );

    for after in [0, 3, last - 1] {
        let mut again = h.events(&chat, after).await;
        let mut replay = Vec::new();
        while replay.len() < (last - after) as usize {
            replay.push(again.next().await.unwrap());
        }
        assert_eq!(replay, numbered[after as usize..], "after={after}");
    }
    // Last-Event-ID works as `after` does.
    let r = h
        .client
        .get(h.url(&format!("/v1/chat/sessions/{}/events", chat.id)))
        .bearer_auth(&chat.token)
        .header("last-event-id", (last - 1).to_string())
        .send()
        .await
        .unwrap();
    let mut buf = String::new();
    let mut s = r.bytes_stream();
    use futures::StreamExt as _;
    while !buf.contains("\n\n") {
        buf.push_str(
            std::str::from_utf8(
                &tokio::time::timeout(WAIT, s.next())
                    .await
                    .unwrap()
                    .unwrap()
                    .unwrap(),
            )
            .unwrap(),
        );
    }
    assert!(buf.contains(&format!("\nid: {last}\n")), "{buf}");
}

/// A subscriber that reads nothing falls behind while the chat goes on; past
/// 1,024 events it is told `resync` and its stream ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscriber_past_the_lag_limit_is_told_to_resync() {
    let words = "word ".repeat(3_000);
    let (h, chat) = chat_with(vec![text(&words)]).await;
    // Through the router: the body is not polled at all until the chat is done.
    let res = h
        .router
        .clone()
        .oneshot(req(
            "GET",
            &format!("/v1/chat/sessions/{}/events", chat.id),
            Some(&chat.token),
            None,
            None,
        ))
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let mut watcher = h.events(&chat, 0).await;
    let (s, _) = h.post(&chat, "/messages", json!({"text": "talk"})).await;
    assert_eq!(s, 202);
    // The chat is not held back by the subscriber that reads nothing.
    watcher.idle().await;
    let body = axum::body::to_bytes(res.into_body(), 64 << 20);
    let body = tokio::time::timeout(WAIT, body)
        .await
        .expect("the stream ends")
        .unwrap();
    let text = String::from_utf8(body.to_vec()).unwrap();
    let last = text.trim_end().lines().last().unwrap();
    assert_eq!(last, r#"data: {"type":"resync"}"#);
    assert!(
        text.matches("data:").count() <= 1_026,
        "at most the lag limit, then resync"
    );
}

/// A connection that never reads its stream does not stall the chat.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_subscriber_never_stalls_the_chat() {
    use tokio::io::AsyncWriteExt as _;
    let words = "lorem ipsum ".repeat(20_000);
    let (h, chat) = chat_with(vec![text(&words)]).await;
    let mut slow = tokio::net::TcpStream::connect(h.base.trim_start_matches("http://"))
        .await
        .unwrap();
    slow.write_all(
        format!(
            "GET /v1/chat/sessions/{}/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\n\r\n",
            chat.id, chat.token
        )
        .as_bytes(),
    )
    .await
    .unwrap();
    let mut watcher = h.events(&chat, 0).await;
    // Wait until the slow stream is registered, then talk.
    tokio::time::sleep(Duration::from_millis(100)).await;
    h.post(&chat, "/messages", json!({"text": "talk"})).await;
    let turn = watcher.until("assistant_turn", |_| true).await;
    assert_eq!(turn["text"].as_str().unwrap().trim_end(), words.trim_end());
    watcher.idle().await;
    drop(slow);
}

#[tokio::test]
async fn the_page_allows_nothing_from_outside() {
    let h = start(models(vec![]), |c| c).await;
    let get = || async { h.client.get(h.url("/v1/ui/chat")).send().await.unwrap() };
    let (a, b) = (get().await, get().await);
    assert_eq!(a.status(), 200);
    let headers = a.headers().clone();
    assert_eq!(headers["content-type"], "text/html; charset=utf-8");
    assert_eq!(headers["x-content-type-options"], "nosniff");
    assert_eq!(headers["referrer-policy"], "no-referrer");
    assert_eq!(headers["cache-control"], "no-store");
    let csp = headers["content-security-policy"]
        .to_str()
        .unwrap()
        .to_string();
    assert!(csp.starts_with("default-src 'none'; "), "{csp}");
    let nonce = csp
        .split("'nonce-")
        .nth(1)
        .unwrap()
        .split('\'')
        .next()
        .unwrap()
        .to_string();
    let html = a.text().await.unwrap();
    assert!(html.contains(&format!("<script nonce=\"{nonce}\">")));
    assert!(html.contains(&format!("<style nonce=\"{nonce}\">")));
    assert_eq!(html.matches("<script").count(), 1, "one inline script");
    assert!(!html.contains("{{NONCE}}"));
    for outside in [
        "src=\"http",
        "href=\"http",
        "url(http",
        "@import",
        "src=\"//",
    ] {
        assert!(
            !html.contains(outside),
            "the page loads nothing from outside: {outside}"
        );
    }
    let other = b.headers()["content-security-policy"].to_str().unwrap();
    assert_ne!(other, csp, "a fresh nonce per response");
}

/// Shutting the server down (what Ctrl-C does in `lrg serve`) ends every
/// chat: a running tool finishes and its result is recorded, streams close.
#[tokio::test]
async fn shutdown_lets_a_running_tool_finish_and_records_it() {
    let (h, chat) = chat_with(vec![
        call("slow", json!({"seconds": 0.5})),
        text("never asked"),
    ])
    .await;
    let mut events = h.events(&chat, 0).await;
    h.post(&chat, "/messages", json!({"text": "take your time"}))
        .await;
    events.until("tool_running", |_| true).await;
    let live = h.server.clone();
    tokio::time::timeout(WAIT, live.shutdown())
        .await
        .expect("shutdown ends");
    let done = events.until("tool_done", |_| true).await;
    assert_eq!(done["ok"], true, "{done}");
    events.until("stopped", |_| true).await;
    assert!(
        tokio::time::timeout(WAIT, async { while events.next().await.is_some() {} })
            .await
            .is_ok(),
        "the stream closes"
    );
    assert_eq!(h.server.chat_count(), 0);
    let (s, _) = h.get(&chat, "/transcript").await;
    assert_eq!(s, 403);
}

/// Issue 24 §1 at the library's boundary: a chat token switches only to an
/// available model of its menu, and the resolver is not even asked for
/// another; the agent token opens a model that names a program or a path
/// only when the menu offers it or the server allows model specs.
#[tokio::test]
async fn models_a_request_may_name() {
    let asked = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let seen = asked.clone();
    let opener = std::sync::Arc::new(lrg_chat::http::StandardOpener::new(move |id: &str| {
        seen.lock().unwrap().push(id.to_string());
        let model = match id {
            "script:first" | "acp:agent" => Ok(scripted("first", vec![text("hi")])),
            _ => Err(lrg_providers::ProviderError::Config {
                message: format!("cannot read {id}: the secret text of the file"),
            }),
        };
        Box::pin(async move { model })
    }));
    let menu = std::sync::Arc::new(lrg_chat::http::StaticMenu(vec![
        lrg_chat::http::MenuEntry::available(
            "script",
            "first",
            lrg_providers::ModelLocation::Local,
        ),
        lrg_chat::http::MenuEntry::unavailable(
            "script",
            "off",
            lrg_providers::ModelLocation::Local,
            "not now",
        ),
    ]));
    let server = |allow: bool| {
        lrg_chat::http::ChatServer::new(
            lrg_chat::http::HttpConfig::try_new(AGENT)
                .unwrap()
                .allow_model_specs(allow),
            opener.clone(),
            menu.clone(),
        )
    };
    let strict = server(false);
    let app = strict.router();
    tokio::spawn(async move { axum::serve(listener, app).await });
    let client = reqwest::Client::new();
    let open = |body: Value| {
        client
            .post(format!("{base}/v1/chat/sessions"))
            .bearer_auth(AGENT)
            .json(&body)
            .send()
    };
    let r = open(json!({"model": "script:first"})).await.unwrap();
    assert_eq!(r.status(), 201);
    let chat = Chat::of(&r.json().await.unwrap());
    for model in [
        "acp:agent",
        "script:off",
        "script:/etc/passwd",
        "llama:x.gguf",
    ] {
        let r = open(json!({"model": model})).await.unwrap();
        assert_eq!(r.status(), 400, "{model}");
        let v: Value = r.json().await.unwrap();
        assert!(
            v["error"]["message"]
                .as_str()
                .unwrap()
                .contains("--allow-model-specs"),
            "{v}"
        );
    }
    for model in [
        "acp:agent",
        "script:off",
        "script:/etc/passwd",
        "openai:gpt-4.1",
    ] {
        let r = client
            .post(format!("{base}/v1/chat/sessions/{}/model", chat.id))
            .bearer_auth(&chat.token)
            .json(&json!({"model": model, "confirm": true}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 400, "{model}");
        let v: Value = r.json().await.unwrap();
        assert!(
            v["error"]["message"]
                .as_str()
                .unwrap()
                .starts_with("`model`: not one of this chat's models"),
            "{v}"
        );
    }
    assert_eq!(
        *asked.lock().unwrap(),
        ["script:first"],
        "nothing else was resolved"
    );

    // Allowed, the agent opens what it names; a failure is one fixed answer.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let app = server(true).router();
    tokio::spawn(async move { axum::serve(listener, app).await });
    let open = |body: Value| {
        client
            .post(format!("{base}/v1/chat/sessions"))
            .bearer_auth(AGENT)
            .json(&body)
            .send()
    };
    assert_eq!(
        open(json!({"model": "acp:agent"})).await.unwrap().status(),
        201
    );
    let a = open(json!({"model": "script:/a"})).await.unwrap();
    assert_eq!(a.status(), 400);
    let a = a.text().await.unwrap();
    let b = open(json!({"model": "replay:/b"}))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(a, b);
    assert!(!a.contains("secret"), "{a}");
    // A weak token is refused by `try_new`.
    let weak = lrg_chat::http::HttpConfig::try_new("a").unwrap_err();
    assert!(weak.to_string().contains("openssl rand -hex 16"), "{weak}");
    // Long enough, but one character repeated, or two: no random secret.
    for repetitive in ["a".repeat(64), "ab".repeat(20)] {
        assert!(lrg_chat::http::HttpConfig::try_new(repetitive).is_err());
    }
}
