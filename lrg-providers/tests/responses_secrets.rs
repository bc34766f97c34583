//! The Responses API key never shows up in a log line (captured at TRACE),
//! an error, a Debug print, a request body or a recording. Alone in its own
//! test binary: a tracing subscriber scoped to one test is only reliable when
//! no other test registers the same callsites at once.
#![allow(clippy::unwrap_used, clippy::expect_used)] // helpers outside #[test] fns may panic: this is a test

use crate::common;

use std::time::Duration;

use common::LogBuffer;
use lrg_providers::record::RecordingModel;
use lrg_providers::responses::{ResponsesChat, ResponsesConfig, ResponsesHost};
use lrg_providers::transport::TransportConfig;
use lrg_providers::{ApiKey, ChatModel, Message, TurnRequest, collect_turn};
use serde_json::json;
use tokio_util::sync::CancellationToken;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

const KEY: &str = "xai-test-secret-0123456789abcdef";

#[tokio::test]
async fn the_key_is_never_logged_sent_in_a_body_recorded_or_shown_in_an_error() {
    let logs = LogBuffer::global();

    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/responses"))
        .respond_with(ResponseTemplate::new(401).set_body_json(
            json!({"error": {"message": format!("Incorrect API key provided: {KEY}"), "code": "invalid_api_key"}}),
        ))
        .up_to_n_times(1)
        .mount(&server)
        .await;
    let done = json!({"type": "response.completed", "response": {"id": "resp_1", "status": "completed", "output": [],
        "usage": {"input_tokens": 1, "output_tokens": 1}}});
    let delta = json!({"type": "response.output_text.delta", "item_id": "m", "delta": "ok"});
    Mock::given(method("POST"))
        .and(path("/v1/responses"))
        .respond_with(ResponseTemplate::new(200).set_body_raw(
            format!("data: {delta}\n\ndata: {done}\n\n"),
            "text/event-stream",
        ))
        .mount(&server)
        .await;
    let transport = TransportConfig::new(Duration::from_secs(2), Duration::from_secs(5));
    let config = ResponsesConfig::new(ResponsesHost::XAI, format!("{}/v1", server.uri()), "grok-4")
        .with_api_key(ApiKey::new(KEY))
        .with_transport(transport);
    let model = ResponsesChat::new(config).unwrap();
    let mut texts = vec![format!("{:?}", model.config()), format!("{model:?}")];
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("rec.json");
    let recording = RecordingModel::create(model, &file).unwrap();
    let request = TurnRequest::new(vec![Message::user("hi")]);
    let turn = |request: TurnRequest| {
        let stream = recording.turn(request, CancellationToken::new());
        tokio::time::timeout(Duration::from_secs(10), collect_turn(stream))
    };
    let err = turn(request.clone()).await.unwrap().unwrap_err();
    assert_eq!(err.kind().as_str(), "auth");
    texts.push(format!("{err} {err:?}"));
    assert_eq!(turn(request).await.unwrap().unwrap().text(), "ok");

    let logged = logs.text();
    assert!(
        logged.contains("responses turn"),
        "the subscriber captured nothing: {logged}"
    );
    texts.push(std::fs::read_to_string(&file).unwrap());
    for text in texts.iter().chain([&logged]) {
        assert!(!text.contains(KEY), "the key leaked: {text}");
    }
    for request in server.received_requests().await.unwrap() {
        assert!(
            !String::from_utf8_lossy(&request.body).contains(KEY),
            "the key is in a request body"
        );
        assert_eq!(
            request.headers.get("authorization").unwrap(),
            format!("Bearer {KEY}").as_str()
        );
    }
}
