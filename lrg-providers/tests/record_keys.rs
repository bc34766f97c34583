//! A recording of a real adapter's turns never holds its key: requests
//! carry no key by design (the adapter adds the header), and this checks it
//! end to end against a fake server, including an error that quotes the key.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use lrg_providers::openai::{Dialect, OpenAiChat, OpenAiConfig};
use lrg_providers::record::RecordingModel;
use lrg_providers::{ApiKey, ChatModel, Message, TurnRequest, collect_turn};
use serde_json::json;
use tokio_util::sync::CancellationToken;
use wiremock::matchers::{header, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

const KEY: &str = "sk-rec-0123456789abcdef0123456789abcdef";

#[tokio::test]
async fn the_key_is_sent_but_never_recorded() {
    let server = MockServer::start().await;
    let chunk = json!({"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4.1",
                       "choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason": "stop"}]});
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .and(header("authorization", format!("Bearer {KEY}").as_str()))
        .respond_with(ResponseTemplate::new(200).set_body_raw(
            format!("data: {chunk}\n\ndata: [DONE]\n\n"),
            "text/event-stream",
        ))
        .up_to_n_times(1)
        .mount(&server)
        .await;
    // The second call is refused with the key quoted back, as some servers do.
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(ResponseTemplate::new(401).set_body_json(
            json!({"error": {"message": format!("Incorrect API key provided: {KEY}"), "code": "invalid_api_key"}}),
        ))
        .mount(&server)
        .await;
    let config = OpenAiConfig::new(Dialect::OPENAI, format!("{}/v1", server.uri()), "gpt-4.1")
        .with_api_key(ApiKey::new(KEY));
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("rec.json");
    let model = RecordingModel::create(OpenAiChat::new(config).unwrap(), &file).unwrap();
    let request = TurnRequest::new(vec![Message::user("hello")]);

    let turn = collect_turn(model.turn(request.clone(), CancellationToken::new()))
        .await
        .unwrap();
    assert_eq!(turn.text(), "hi");
    let err = collect_turn(model.turn(request, CancellationToken::new()))
        .await
        .unwrap_err();
    assert_eq!(err.kind().as_str(), "auth");

    let text = std::fs::read_to_string(&file).unwrap();
    assert_eq!(model.recording().exchanges.len(), 2);
    assert!(text.contains("\"kind\": \"auth\""), "{text}");
    assert!(
        !text.contains(KEY),
        "the key leaked into the recording:\n{text}"
    );
    assert!(!text.contains("Bearer"), "{text}");
    assert!(!text.contains("authorization"), "{text}");
}
