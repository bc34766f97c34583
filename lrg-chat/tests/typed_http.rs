//! The typed-answer repair loop over HTTP: a fake OpenAI-compatible server
//! (wiremock) answering invalid, invalid, valid; and three invalid answers.
//! The request bodies are snapshots: the first offers the tools, each repair
//! carries the invalid answer and the repair message, and no `tools`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use lrg_chat::events::{ErrorKind, Event};
use lrg_chat::tools::ToolHost;
use lrg_chat::{ChatSession, FixedModel, TypedError};
use lrg_providers::ToolAnnotations;
use lrg_providers::openai::{Dialect, OpenAiChat, OpenAiConfig};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

const WAIT: Duration = Duration::from_secs(30);

const VALID: &str = r#"{"label": "bug", "priority": 2}"#;
const TOO_HIGH: &str = r#"{"label": "bug", "priority": 7}"#;
const NO_LABEL: &str = r#"Sure! {"priority": 3}"#;

fn triage_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "label": {"enum": ["bug", "feature", "question"]},
            "priority": {"type": "integer", "minimum": 1, "maximum": 5}
        },
        "required": ["label", "priority"],
        "additionalProperties": false
    })
}

/// An SSE answer whose content is `text`, in deltas of a few characters.
fn sse(text: &str) -> ResponseTemplate {
    let chars: Vec<char> = text.chars().collect();
    let mut body = String::new();
    for piece in chars.chunks(6) {
        let content: String = piece.iter().collect();
        let frame = json!({"choices": [{"index": 0, "delta": {"content": content}, "finish_reason": Value::Null}]});
        body.push_str(&format!("data: {frame}\n\n"));
    }
    body.push_str(&format!(
        "data: {}\n\ndata: [DONE]\n\n",
        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    ));
    ResponseTemplate::new(200).set_body_raw(body, "text/event-stream")
}

#[derive(Deserialize, JsonSchema)]
struct Query {
    /// What to look for.
    #[allow(dead_code)]
    text: String,
}

/// The server answers `answers` in order, one request each.
async fn server(answers: &[&str]) -> MockServer {
    let server = MockServer::start().await;
    for answer in answers {
        // Mounted first, matched first; each answers once.
        Mock::given(method("POST"))
            .and(path("/v1/chat/completions"))
            .respond_with(sse(answer))
            .up_to_n_times(1)
            .expect(1)
            .mount(&server)
            .await;
    }
    server
}

fn session(server: &MockServer) -> ChatSession {
    let host = Arc::new(ToolHost::new());
    host.add_fn(
        "search_issues",
        "Search the issue tracker.",
        ToolAnnotations {
            read_only_hint: Some(true),
            ..Default::default()
        },
        |_: Query| async { Ok::<_, String>("no issues".to_string()) },
    )
    .unwrap();
    let config = OpenAiConfig::new(Dialect::GENERIC, format!("{}/v1", server.uri()), "qwen3-8b");
    let model = OpenAiChat::new(config).unwrap();
    ChatSession::builder(Arc::new(FixedModel::new(model)))
        .tools(host)
        .system_prompt("You triage bug reports.")
        .build()
}

/// The request bodies the server received, as JSON.
async fn bodies(server: &MockServer) -> Vec<Value> {
    server
        .received_requests()
        .await
        .unwrap()
        .iter()
        .map(|r| serde_json::from_slice(&r.body).unwrap())
        .collect()
}

/// A body's messages but the system prompt (which says where the schema
/// goes: a server that cannot take it beside tools gets it in words).
fn conversation(body: &Value) -> Vec<Value> {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] != "system")
        .cloned()
        .collect()
}

/// Each repair body: no tools, and the invalid answer then the repair
/// message after the first request's messages.
fn assert_repairs(bodies: &[Value], wrong: &[&str]) {
    let first = conversation(&bodies[0]);
    assert!(
        bodies[0]["tools"].is_array(),
        "the first request offers tools"
    );
    for (repair, wrong) in bodies[1..].iter().zip(wrong) {
        assert!(repair.get("tools").is_none(), "{repair:#}");
        let messages = conversation(repair);
        assert_eq!(messages.len(), first.len() + 2);
        assert_eq!(&messages[..first.len()], &first[..]);
        let answer = &messages[first.len()];
        assert_eq!(answer["role"], "assistant");
        assert_eq!(answer["content"], *wrong);
        let ask = &messages[first.len() + 1];
        assert_eq!(ask["role"], "user");
        assert!(
            ask["content"]
                .as_str()
                .unwrap()
                .starts_with("Your answer does not match the required JSON Schema"),
            "{ask:#}"
        );
    }
}

macro_rules! snapshot {
    ($($args:tt)*) => {
        insta::with_settings!({ sort_maps => true }, { insta::assert_json_snapshot!($($args)*) })
    };
}

#[tokio::test]
async fn invalid_invalid_valid_over_http() {
    let server = server(&[TOO_HIGH, NO_LABEL, VALID]).await;
    let session = session(&server);
    let handle = session
        .send_with_schema("The app crashes at start.", triage_schema())
        .unwrap();
    let outcome = tokio::time::timeout(WAIT, handle).await.unwrap();
    assert_eq!(outcome, Ok(json!({"label": "bug", "priority": 2})));
    let bodies = bodies(&server).await;
    assert_eq!(bodies.len(), 3);
    assert_repairs(&bodies, &[TOO_HIGH, NO_LABEL]);
    assert_eq!(session.history().len(), 2);
    snapshot!(bodies);
}

#[tokio::test]
async fn three_invalid_answers_over_http() {
    let server = server(&[TOO_HIGH, NO_LABEL, TOO_HIGH]).await;
    let session = session(&server);
    let handle = session
        .send_with_schema("The app crashes at start.", triage_schema())
        .unwrap();
    let outcome = tokio::time::timeout(WAIT, handle).await.unwrap();
    assert_eq!(
        outcome,
        Err(TypedError::Invalid {
            last_text: TOO_HIGH.into(),
            errors: vec!["`priority`: 7 is greater than the maximum of 5".into()],
        })
    );
    let bodies = bodies(&server).await;
    assert_eq!(bodies.len(), 3);
    assert_repairs(&bodies, &[TOO_HIGH, NO_LABEL]);
    let history = session.history();
    assert_eq!(history.len(), 2);
    assert_eq!(history[1].text(), TOO_HIGH);
    assert!(session.events().entries().iter().any(|e| matches!(
        e.event,
        Event::Error {
            kind: ErrorKind::InvalidAnswer,
            ..
        }
    )));
    snapshot!(bodies);
}
