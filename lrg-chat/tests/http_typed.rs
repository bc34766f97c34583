//! Typed messages over HTTP: `POST …/messages {text, output_schema}` runs
//! the message typed (its `assistant_turn` carries the validated `json`); a
//! schema that cannot be used is a 400 naming the problem, before anything
//! is recorded; the body is still read strictly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::http_support;

use http_support::*;
use lrg_chat::events::Event;
use serde_json::{Value, json};

fn triage_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "label": {"enum": ["bug", "feature"]},
            "priority": {"type": "integer", "minimum": 1, "maximum": 5}
        },
        "required": ["label", "priority"],
        "additionalProperties": false
    })
}

/// A chat on a model that answers with `turns`, in order.
async fn chat(turns: Vec<lrg_providers::ScriptedTurn>) -> (Harness, Chat) {
    let h = start(
        models(vec![("script:first", scripted("first", turns))]),
        |c| c,
    )
    .await;
    let chat = h.open(json!({"model": "script:first"})).await;
    (h, chat)
}

/// The `user_message` events the chat's log holds.
fn user_messages(h: &Harness, chat: &Chat) -> usize {
    h.server
        .session(&chat.id)
        .unwrap()
        .events()
        .entries()
        .iter()
        .filter(|e| matches!(e.event, Event::UserMessage { .. }))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_typed_message_streams_its_answer_and_the_turn_carries_the_json() {
    let answer = r#"{"label": "bug", "priority": 2}"#;
    let (h, chat) = chat(vec![text(answer), text("Plain prose.")]).await;
    let mut events = h.events(&chat, 0).await;

    let (status, body) = h
        .post(
            &chat,
            "/messages",
            json!({"text": "Triage: the app crashes", "output_schema": triage_schema()}),
        )
        .await;
    // Acknowledged as a plain message is.
    assert_eq!(status, 202, "{body}");
    assert!(body["last_seq"].as_u64().is_some(), "{body}");

    let turn = events.until("assistant_turn", |_| true).await;
    assert_eq!(turn["text"], answer, "{turn}");
    assert_eq!(
        turn["json"],
        json!({"label": "bug", "priority": 2}),
        "{turn}"
    );
    events.idle().await;
    // The answer's text still streamed as deltas before the turn.
    let streamed: String = events
        .seen
        .iter()
        .filter(|e| e.data["type"] == "delta" && e.data["kind"] == "text")
        .map(|e| e.data["text"].as_str().unwrap())
        .collect();
    assert_eq!(streamed, answer);

    // The next message, sent plain, has no `json`.
    let (status, _) = h
        .post(&chat, "/messages", json!({"text": "And in words?"}))
        .await;
    assert_eq!(status, 202);
    let turn = events.until("assistant_turn", |_| true).await;
    assert_eq!(turn["text"], "Plain prose.");
    assert!(turn.get("json").is_none(), "{turn}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_typed_answer_that_never_validates_ends_in_an_invalid_answer_error() {
    let bad = r#"{"label": "bug", "priority": 7}"#;
    let (h, chat) = chat(vec![text(bad), text(bad), text(bad)]).await;
    let mut events = h.events(&chat, 0).await;
    let (status, body) = h
        .post(
            &chat,
            "/messages",
            json!({"text": "Triage", "output_schema": triage_schema()}),
        )
        .await;
    assert_eq!(status, 202, "{body}");
    let error = events.until("error", |_| true).await;
    assert_eq!(error["kind"], "invalid_answer", "{error}");
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("`priority`: 7 is greater than the maximum of 5"),
        "{error}"
    );
    events.idle().await;
    // The kept answer is the model's last, with no `json`.
    let turns: Vec<&Value> = events
        .seen
        .iter()
        .map(|e| &e.data)
        .filter(|d| d["type"] == "assistant_turn")
        .collect();
    let last = turns.last().unwrap();
    assert_eq!(last["text"], bad);
    assert!(last.get("json").is_none(), "{last}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schema_that_cannot_be_used_is_refused_before_anything_is_recorded() {
    let (h, chat) = chat(vec![text("never sent")]).await;
    let huge = json!({
        "type": "object",
        "description": "x".repeat(300 * 1024),
    });
    let cases = [
        (json!(true), "must be a JSON object"),
        (json!("string"), "must be a JSON object"),
        (json!({"type": "strnig"}), "not a valid JSON Schema"),
        (huge, "the most taken is 262144"),
    ];
    for (schema, problem) in cases {
        let (status, body) = h
            .post(
                &chat,
                "/messages",
                json!({"text": "Triage", "output_schema": schema}),
            )
            .await;
        assert_eq!(status, 400, "{body}");
        assert_eq!(body["error"]["kind"], "bad_request", "{body}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.starts_with("`output_schema`: "), "{message}");
        assert!(message.contains(problem), "{problem}: {message}");
    }
    // `strnig` is named, with where it is.
    let (_, body) = h
        .post(
            &chat,
            "/messages",
            json!({"text": "Triage", "output_schema": {"type": "object", "properties": {"a": {"type": "strnig"}}}}),
        )
        .await;
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("strnig"), "{message}");
    assert_eq!(user_messages(&h, &chat), 0, "nothing was recorded");
    assert!(!h.server.session(&chat.id).unwrap().is_busy());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_message_body_is_still_read_strictly() {
    let (h, chat) = chat(vec![text("never sent")]).await;
    let bodies = [
        // A misspelt field, beside a good schema.
        (
            json!({"text": "hi", "output_schema": triage_schema(), "output_shema": {}}),
            "output_shema",
        ),
        (json!({"text": "hi", "schema": triage_schema()}), "schema"),
        // The body as an array of the fields in order.
        (json!(["hi", [], triage_schema()]), "sequence"),
    ];
    for (body, named) in bodies {
        let (status, answer) = h.post(&chat, "/messages", body).await;
        assert_eq!(status, 400, "{answer}");
        let message = answer["error"]["message"].as_str().unwrap();
        assert!(message.contains(named), "{named}: {message}");
    }
    assert_eq!(user_messages(&h, &chat), 0);
    // `null` is no schema: a plain message.
    let (status, _) = h
        .post(
            &chat,
            "/messages",
            json!({"text": "hi", "output_schema": null}),
        )
        .await;
    assert_eq!(status, 202);
}
