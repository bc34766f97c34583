//! The API key never shows up in a log line (captured at TRACE, the HTTP
//! client's own logs included), an error, a Debug print or a request body.
//! Alone in its own test binary: a tracing subscriber scoped to one test is
//! only reliable when no other test registers the same callsites at once.
#![allow(clippy::unwrap_used, clippy::expect_used)] // helpers outside #[test] fns may panic: this is a test

use crate::common;

use std::time::Duration;

use common::LogBuffer;
use lrg_providers::openai::{Dialect, OpenAiChat, OpenAiConfig};
use lrg_providers::transport::TransportConfig;
use lrg_providers::{
    ApiKey, AssistantTurn, ChatModel, Message, ProviderError, TurnRequest, collect_turn,
};
use serde_json::json;
use tokio_util::sync::CancellationToken;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

const KEY: &str = "sk-test-openai-0123456789abcdef";

fn openai(base: &str) -> OpenAiChat {
    let transport = TransportConfig::new(Duration::from_secs(2), Duration::from_secs(5));
    let config = OpenAiConfig::new(Dialect::OPENAI, format!("{base}/v1"), "gpt-4.1")
        .with_api_key(ApiKey::new(KEY))
        .with_transport(transport);
    OpenAiChat::new(config).unwrap()
}

fn stream_ok() -> ResponseTemplate {
    let chunk =
        json!({"choices": [{"index": 0, "delta": {"content": "ok"}, "finish_reason": "stop"}]});
    ResponseTemplate::new(200).set_body_raw(
        format!("data: {chunk}\n\ndata: [DONE]\n\n"),
        "text/event-stream",
    )
}

async fn turn(model: &OpenAiChat) -> Result<AssistantTurn, ProviderError> {
    let request = TurnRequest::new(vec![Message::user("hi")]);
    tokio::time::timeout(
        Duration::from_secs(10),
        collect_turn(model.turn(request, CancellationToken::new())),
    )
    .await
    .expect("the turn did not end in time")
}

#[tokio::test]
async fn the_key_is_never_logged_sent_in_a_body_or_shown_in_an_error() {
    let logs = LogBuffer::global();

    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(ResponseTemplate::new(401).set_body_string(format!("bad key {KEY}")))
        .up_to_n_times(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(stream_ok())
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/v1/models"))
        .respond_with(ResponseTemplate::new(403).set_body_string(format!(
            "{{\"error\":{{\"message\":\"key {KEY} lacks access\"}}}}"
        )))
        .mount(&server)
        .await;
    let model = openai(&server.uri());
    let mut texts = vec![format!("{:?}", model.config()), format!("{model:?}")];
    let err = turn(&model).await.unwrap_err();
    texts.push(format!("{err} {err:?}"));
    turn(&model).await.unwrap();
    let err = model.list_models().await.unwrap_err();
    assert!(matches!(err, ProviderError::Auth { .. }), "{err:?}");
    texts.push(format!("{err} {err:?}"));

    let logged = logs.text();
    assert!(
        logged.contains("chat completions turn"),
        "the subscriber captured nothing: {logged}"
    );
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
