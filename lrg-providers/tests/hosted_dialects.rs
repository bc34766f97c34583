//! The hosted OpenAI-compatible APIs (OpenRouter, Groq, Together, DeepSeek,
//! Mistral) as `Dialect` rows: each sends its own key, asks for usage where
//! the host accepts it, reads reasoning from the field the host streams it
//! in, and reports itself as a cloud model.
#![allow(clippy::unwrap_used, clippy::expect_used)] // helpers outside #[test] fns may panic: this is a test

use crate::common;

use std::time::Duration;

use common::{bodies, turn};
use lrg_providers::openai::{Dialect, OpenAiChat, OpenAiConfig};
use lrg_providers::transport::TransportConfig;
use lrg_providers::{ApiKey, ChatModel, ModelLocation, Part, ProviderError};
use serde_json::json;
use wiremock::matchers::{header, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

const KEY: &str = "hosted-test-key-0123456789";

/// A stream with reasoning in both fields hosts use, then text.
fn stream() -> String {
    let chunks = [
        json!({"choices": [{"index": 0, "delta": {"reasoning": "R-field. ", "reasoning_content": "RC-field. "}}]}),
        json!({"choices": [{"index": 0, "delta": {"content": "Hi"}, "finish_reason": "stop"}]}),
    ];
    let mut body: String = chunks.iter().map(|c| format!("data: {c}\n\n")).collect();
    body.push_str("data: [DONE]\n\n");
    body
}

fn model(dialect: Dialect, base: &str) -> OpenAiChat {
    let config = OpenAiConfig::new(dialect, format!("{base}/v1"), "some/model")
        .with_api_key(ApiKey::new(KEY))
        .with_transport(TransportConfig::new(
            Duration::from_secs(2),
            Duration::from_secs(5),
        ));
    OpenAiChat::new(config).unwrap()
}

#[tokio::test]
async fn each_hosted_row_sends_its_key_and_reads_its_reasoning_field() {
    let expected_reasoning = [
        ("openrouter", "R-field. "),
        ("groq", "R-field. "),
        ("together", "RC-field. "),
        ("deepseek", "RC-field. "),
        ("mistral", "RC-field. "),
    ];
    assert_eq!(Dialect::HOSTED.len(), expected_reasoning.len());
    for (dialect, (provider, reasoning)) in Dialect::HOSTED.iter().zip(expected_reasoning) {
        assert_eq!(dialect.provider, provider);
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path("/v1/chat/completions"))
            .and(header("authorization", format!("Bearer {KEY}").as_str()))
            .respond_with(ResponseTemplate::new(200).set_body_raw(stream(), "text/event-stream"))
            .mount(&server)
            .await;
        let model = model(*dialect, &server.uri());
        let got = turn(&model, common::ask("hi")).await.unwrap();
        assert_eq!(
            got.parts,
            vec![Part::reasoning(reasoning), Part::text("Hi")],
            "{provider}"
        );
        let body = bodies(&server).await.remove(0);
        assert_eq!(body["max_tokens"], 8192, "{provider}");
        assert_eq!(
            body.get("stream_options").is_some(),
            provider != "mistral",
            "{provider}: {body}"
        );
        let info = model.info();
        assert_eq!(
            (info.provider.as_str(), info.location),
            (provider, ModelLocation::Cloud)
        );
    }
}

#[test]
fn hosted_rows_need_their_own_key_never_openais() {
    for dialect in Dialect::HOSTED {
        assert!(dialect.key_required, "{}", dialect.name);
        assert!(
            !dialect.key_env.contains(&"OPENAI_API_KEY"),
            "{}",
            dialect.name
        );
        let url = dialect.default_base_url.unwrap();
        let err = OpenAiChat::new(OpenAiConfig::new(*dialect, url, "m")).unwrap_err();
        assert!(
            matches!(err, ProviderError::Config { .. })
                && err.to_string().contains(dialect.key_env[0]),
            "{err}"
        );
    }
}

#[tokio::test]
async fn openrouter_request_body() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(ResponseTemplate::new(200).set_body_raw(stream(), "text/event-stream"))
        .mount(&server)
        .await;
    turn(
        &model(Dialect::OPENROUTER, &server.uri()),
        common::ask("hi"),
    )
    .await
    .unwrap();
    insta::assert_json_snapshot!("openrouter_request", bodies(&server).await[0]);
}
