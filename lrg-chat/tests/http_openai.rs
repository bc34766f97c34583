//! A whole chat over HTTP on a fake OpenAI-compatible server: the model's
//! tool call runs a real MCP tool (the `lrg-test-mcp` binary) after an
//! approval answered through the route, and no configured secret ever shows
//! up in any response.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::http_support;

use std::sync::Arc;

use http_support::*;
use lrg_providers::openai::{Dialect, OpenAiChat, OpenAiConfig};
use lrg_providers::{ApiKey, ChatModel};
use serde_json::{Value, json};
use wiremock::matchers::{body_string_contains, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

const API_KEY: &str = "sk-test-http-0123456789abcdef";
const ENV_SECRET: &str = "mcp-env-secret-5f1e2d3c4b5a";
const HEADER_SECRET: &str = "Bearer mcp-header-secret-9a8b7c6d";

fn sse(chunks: &[Value]) -> ResponseTemplate {
    let mut body: String = chunks.iter().map(|c| format!("data: {c}\n\n")).collect();
    body.push_str("data: [DONE]\n\n");
    ResponseTemplate::new(200).set_body_raw(body, "text/event-stream")
}

fn chunk(delta: Value, finish: Option<&str>) -> Value {
    json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4.1",
           "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
}

#[tokio::test]
async fn a_whole_chat_with_a_real_tool_and_an_approval_leaks_no_secret() {
    let fake = MockServer::start().await;
    // Second turn (the request carries the tool result): the answer.
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .and(body_string_contains("trashed 3 items"))
        .respond_with(sse(&[
            chunk(json!({"role": "assistant", "content": "Deleted "}), None),
            chunk(json!({"content": "3 items."}), None),
            chunk(json!({}), Some("stop")),
        ]))
        .expect(1)
        .with_priority(1)
        .mount(&fake)
        .await;
    // First turn: a destructive call.
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(sse(&[
            chunk(
                json!({"role": "assistant", "tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                        "function": {"name": "delete_items", "arguments": "{\"ids\": [1, 2, 3]}"}}]}),
                None,
            ),
            chunk(json!({}), Some("tool_calls")),
        ]))
        .expect(1)
        .with_priority(2)
        .mount(&fake)
        .await;

    let config = OpenAiConfig::new(Dialect::OPENAI, format!("{}/v1", fake.uri()), "gpt-4.1")
        .with_api_key(ApiKey::new(API_KEY));
    let model: Arc<dyn ChatModel> = Arc::new(OpenAiChat::new(config).unwrap());
    let h = start(models(vec![("openai:gpt-4.1", model)]), |c| c).await;

    let mut bodies: Vec<String> = Vec::new();
    let open = h
        .client
        .post(h.url("/v1/chat/sessions"))
        .bearer_auth(AGENT)
        .json(&json!({
            "model": "openai:gpt-4.1",
            "mcpServers": {
                "test": {"command": env!("CARGO_BIN_EXE_lrg-test-mcp"), "env": {"LRG_TEST_SECRET": ENV_SECRET}},
                "remote": {"url": "http://127.0.0.1:1/mcp", "headers": {"Authorization": HEADER_SECRET}}
            },
            "system": "You delete things."
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(open.status(), 201);
    let text = open.text().await.unwrap();
    let v: Value = serde_json::from_str(&text).unwrap();
    bodies.push(text);
    let chat = Chat {
        id: v["session"].as_str().unwrap().into(),
        token: v["chat_token"].as_str().unwrap().into(),
    };

    let mut events = h.events(&chat, 0).await;
    let (s, v) = h
        .post(&chat, "/messages", json!({"text": "delete 1, 2 and 3"}))
        .await;
    assert_eq!(s, 202);
    bodies.push(v.to_string());
    let asked = events.until("approval_needed", |_| true).await;
    assert_eq!(asked["call_id"], "call_1");
    let (s, v) = h
        .post(&chat, "/approvals/call_1", json!({"answer": "chat"}))
        .await;
    assert_eq!(s, 200, "{v}");
    bodies.push(v.to_string());
    let done = events.until("tool_done", |_| true).await;
    assert_eq!(done["text"], "trashed 3 items", "the real MCP tool ran");
    let turn = events.until("assistant_turn", |e| e["text"] != "").await;
    assert_eq!(turn["text"], "Deleted 3 items.");
    events.idle().await;
    // The server that could not start was reported, without its header.
    assert!(
        events.seen.iter().any(|e| e.data["type"] == "warning"
            && e.data["message"].as_str().unwrap().contains("remote"))
    );

    for route in ["/transcript", "/permissions", "/models"] {
        let (s, v) = h.get(&chat, route).await;
        assert_eq!(s, 200, "{route}");
        bodies.push(v.to_string());
    }
    let (s, v) = h
        .post(&chat, "/model", json!({"model": "openai:gpt-4.1"}))
        .await;
    assert_eq!(s, 201, "a new chat beside this one: {v}");
    bodies.push(v.to_string());
    bodies.push(events.raw.clone());
    let page = h.client.get(h.url("/v1/ui/chat")).send().await.unwrap();
    bodies.push(page.text().await.unwrap());

    let everything = bodies.join("\n");
    for secret in [
        API_KEY,
        ENV_SECRET,
        HEADER_SECRET,
        "mcp-header-secret",
        AGENT,
    ] {
        assert!(
            !everything.contains(secret),
            "a response holds the secret {secret}"
        );
    }
    // The key went where it belongs: to the model's server.
    let requests = fake.received_requests().await.unwrap();
    assert_eq!(requests.len(), 2);
    assert_eq!(
        requests[0].headers["authorization"],
        format!("Bearer {API_KEY}")
    );
}
