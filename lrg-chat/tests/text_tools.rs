//! Tool calls written as text, end to end: a fake OpenAI-compatible server
//! answering in Hermes text, the OpenAI adapter in `auto` tool mode, the
//! session loop, and a real MCP tool (`lrg-test-mcp` over stdio). Also the
//! recovery path: an unreadable call gets a result that restates the format
//! and the expected arguments, and a warning.
#![allow(clippy::unwrap_used, clippy::expect_used)] // helpers outside #[test] fns may panic: this is a test

use std::sync::Arc;
use std::time::Duration;

use lrg_chat::events::Event;
use lrg_chat::tools::{McpServerConfig, StdioServerConfig, ToolHost};
use lrg_chat::{ChatSession, FixedModel, TurnOutcome};
use lrg_providers::openai::{Dialect, OpenAiChat, OpenAiConfig};
use lrg_providers::text_tools::ToolMode;
use lrg_providers::{Part, Role};
use serde_json::{Value, json};
use wiremock::matchers::{body_string_contains, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

const WAIT: Duration = Duration::from_secs(60);

/// An SSE answer whose content is `text`, in small deltas.
fn sse(text: &str) -> ResponseTemplate {
    let chars: Vec<char> = text.chars().collect();
    let mut body = String::new();
    for piece in chars.chunks(4) {
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

async fn session(server: &MockServer) -> ChatSession {
    let host = Arc::new(ToolHost::new());
    host.add_mcp_server(
        "test",
        McpServerConfig::Stdio(StdioServerConfig::new(env!("CARGO_BIN_EXE_lrg-test-mcp"))),
    )
    .await
    .expect("test server starts");
    let config = OpenAiConfig::new(Dialect::GENERIC, format!("{}/v1", server.uri()), "qwen3-8b")
        .with_tool_mode(ToolMode::Auto);
    let model = OpenAiChat::new(config).unwrap();
    ChatSession::builder(Arc::new(FixedModel::new(model)))
        .tools(host)
        .build()
}

/// Answer requests in order: the i-th request that contains `after[i].0`
/// (and not yet a later marker) gets `after[i].1`.
async fn answers(server: &MockServer, first: &str, then: &[(&str, &str)]) {
    for (marker, text) in then.iter().rev() {
        Mock::given(method("POST"))
            .and(path("/v1/chat/completions"))
            .and(body_string_contains(*marker))
            .respond_with(sse(text))
            .expect(1)
            .up_to_n_times(1)
            .mount(server)
            .await;
    }
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(sse(first))
        .expect(1)
        .up_to_n_times(1)
        .mount(server)
        .await;
}

fn tool_results(session: &ChatSession) -> Vec<String> {
    session
        .history()
        .iter()
        .filter(|m| m.role == Role::Tool)
        .flat_map(|m| m.parts.iter())
        .filter_map(|p| match p {
            Part::ToolResult(r) => Some(r.text_content()),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_hermes_text_call_runs_the_mcp_tool_and_the_model_replies() {
    let server = MockServer::start().await;
    answers(
        &server,
        "<think>Echo it.</think><tool_call>\n{\"name\": \"TEST__ECHO\", \"arguments\": {\"text\": \"héllo \\\"there\\\"\"}}\n</tool_call>",
        &[("\"role\":\"tool\"", "The tool said: héllo \"there\".")],
    )
    .await;
    let session = session(&server).await;
    let outcome = tokio::time::timeout(WAIT, session.send("echo héllo").unwrap())
        .await
        .unwrap();
    assert_eq!(
        outcome,
        TurnOutcome::Completed {
            text: "The tool said: héllo \"there\".".into(),
            json: None,
        }
    );
    assert_eq!(tool_results(&session), ["héllo \"there\""]);
}

#[tokio::test]
async fn an_unreadable_call_gets_a_recovery_result_and_a_warning() {
    let server = MockServer::start().await;
    answers(
        &server,
        "<tool_call>\n{\"name\": \"echo\", \"arguments\": {\"text\": [}\n</tool_call>",
        &[
            ("could not be read", "<tool_call>\n{\"name\": \"echo\", \"arguments\": {\"text\": \"ok\"}}\n</tool_call>"),
            ("\"content\":\"ok\"", "Done."),
        ],
    )
    .await;
    let session = session(&server).await;
    let outcome = tokio::time::timeout(WAIT, session.send("echo ok").unwrap())
        .await
        .unwrap();
    assert_eq!(
        outcome,
        TurnOutcome::Completed {
            text: "Done.".into(),
            json: None,
        }
    );
    let results = tool_results(&session);
    assert_eq!(results.len(), 2, "{results:?}");
    assert!(results[0].contains("could not be read"), "{}", results[0]);
    assert!(
        results[0].contains("<tool_call>\n{\"name\":"),
        "one example in the family's format: {}",
        results[0]
    );
    assert!(
        results[0].contains("The arguments of"),
        "the expected arguments: {}",
        results[0]
    );
    assert_eq!(results[1], "ok");
    let warned = session.events().entries().iter().any(|e| {
        matches!(&e.event, Event::Warning { message, .. } if message.contains("could not be used"))
    });
    assert!(warned, "a warning event");
}
