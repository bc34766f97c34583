//! Errors that teach (issue 30 §4), end to end against a fake
//! OpenAI-compatible server in native tool mode and Rust tools: a tool's own
//! runtime error goes back with the tool's expected arguments and one line
//! on what to try (snapshotted), and not where the arguments are not the
//! question; a close-but-wrong name in a native call runs the one tool it
//! fits, with a warning; a name that fits several is not guessed.
#![allow(clippy::unwrap_used, clippy::expect_used)] // helpers outside #[test] fns may panic: this is a test

use std::sync::Arc;
use std::time::Duration;

use lrg_chat::events::{Event, SkipReason};
use lrg_chat::tools::{NoArgs, ToolHost};
use lrg_chat::{ChatSession, FixedModel, TurnOutcome};
use lrg_providers::openai::{Dialect, OpenAiChat, OpenAiConfig};
use lrg_providers::{Part, Role, ToolAnnotations};
use serde_json::{Value, json};
use wiremock::matchers::{body_string_contains, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

const WAIT: Duration = Duration::from_secs(60);

/// An SSE answer that calls `name` natively with `arguments`.
fn native_call(name: &str, arguments: Value) -> ResponseTemplate {
    let chunk = |delta: Value, finish: Value| json!({"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
    let body = format!(
        "data: {}\n\ndata: {}\n\ndata: [DONE]\n\n",
        chunk(
            json!({"tool_calls": [{"index": 0, "id": "call_a", "type": "function",
                "function": {"name": name, "arguments": arguments.to_string()}}]}),
            Value::Null
        ),
        chunk(json!({}), json!("tool_calls")),
    );
    ResponseTemplate::new(200).set_body_raw(body, "text/event-stream")
}

/// An SSE answer of plain text.
fn reply(text: &str) -> ResponseTemplate {
    let body = format!(
        "data: {}\n\ndata: {}\n\ndata: [DONE]\n\n",
        json!({"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": Value::Null}]}),
        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
    );
    ResponseTemplate::new(200).set_body_raw(body, "text/event-stream")
}

/// The first request gets `first`; the one after a tool result, `"Done."`.
async fn server(first: ResponseTemplate) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .and(body_string_contains("\"role\":\"tool\""))
        .respond_with(reply("Done."))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(first)
        .expect(1)
        .up_to_n_times(1)
        .mount(&server)
        .await;
    server
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Weather {
    /// The city.
    city: String,
    /// Days ahead, 0 for today.
    #[allow(dead_code)] // read by the schema only
    days: Option<u32>,
    /// Units.
    #[allow(dead_code)] // read by the schema only
    units: Option<Units>,
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
#[allow(dead_code)] // read by the schema only
enum Units {
    Metric,
    Imperial,
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Query {
    /// What to look for.
    query: String,
}

fn read_only() -> ToolAnnotations {
    ToolAnnotations {
        read_only_hint: Some(true),
        ..Default::default()
    }
}

fn host() -> Arc<ToolHost> {
    let host = ToolHost::new();
    host.add_fn(
        "get_weather",
        "The weather in a city",
        read_only(),
        |args: Weather| async move {
            if args.city == "Atlantis" {
                Err(format!("no weather station in `{}`", args.city))
            } else {
                Ok(format!("Sunny in {}", args.city))
            }
        },
    )
    .unwrap();
    for name in ["github__search", "gitlab__search"] {
        host.add_fn(name, "Search", read_only(), |args: Query| async move {
            Ok::<_, String>(format!("found {}", args.query))
        })
        .unwrap();
    }
    host.add_fn("ping", "Ping", read_only(), |_: NoArgs| async move {
        Err::<String, _>("the network is down")
    })
    .unwrap();
    Arc::new(host)
}

fn session(server: &MockServer) -> ChatSession {
    let config = OpenAiConfig::new(Dialect::VLLM, format!("{}/v1", server.uri()), "qwen3-8b");
    let model = OpenAiChat::new(config).unwrap();
    ChatSession::builder(Arc::new(FixedModel::new(model)))
        .tools(host())
        .build()
}

/// Run one message to its end; the tool results it kept, and the session.
async fn run(first: ResponseTemplate) -> (Vec<String>, ChatSession) {
    let server = server(first).await;
    let session = session(&server);
    let outcome = tokio::time::timeout(WAIT, session.send("go").unwrap())
        .await
        .unwrap();
    assert_eq!(
        outcome,
        TurnOutcome::Completed {
            text: "Done.".into(),
            json: None
        }
    );
    let results = session
        .history()
        .iter()
        .filter(|m| m.role == Role::Tool)
        .flat_map(|m| m.parts.iter())
        .filter_map(|p| match p {
            Part::ToolResult(r) => Some(r.text_content()),
            _ => None,
        })
        .collect();
    (results, session)
}

fn warnings(session: &ChatSession) -> Vec<String> {
    session
        .events()
        .entries()
        .iter()
        .filter_map(|e| match &e.event {
            Event::Warning { message, .. } => Some(message.clone()),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_runtime_error_goes_back_with_the_expected_arguments_and_what_to_try() {
    let (results, _) = run(native_call("get_weather", json!({"city": "Atlantis"}))).await;
    assert_eq!(results.len(), 1);
    insta::assert_snapshot!("runtime_error_teaching", results[0]);
    assert!(
        results[0].len() < 200 + lrg_chat::tools::TEACH_CAP,
        "capped: {}",
        results[0]
    );
}

#[tokio::test]
async fn errors_the_arguments_cannot_fix_or_that_already_teach_are_left_alone() {
    // A tool without arguments: nothing to correct.
    let (results, _) = run(native_call("ping", json!({}))).await;
    assert_eq!(results, ["the network is down"]);
    // The argument check's own message says what is expected, once.
    let (results, _) = run(native_call("get_weather", json!({"days": 2}))).await;
    assert_eq!(
        results[0].matches("Expected arguments").count(),
        1,
        "{}",
        results[0]
    );
    assert!(
        results[0].starts_with("Invalid arguments"),
        "{}",
        results[0]
    );
}

#[tokio::test]
async fn a_close_native_name_runs_the_tool_it_fits_with_a_warning() {
    for written in [
        "functions.get_weather",
        "Get_Weather",
        "weather__get_weather",
    ] {
        let (results, session) = run(native_call(written, json!({"city": "Paris"}))).await;
        assert_eq!(results, ["Sunny in Paris"], "{written}");
        let warnings = warnings(&session);
        assert_eq!(
            warnings,
            [format!(
                "the model called `{written}`, which is no tool's name; ran `get_weather`, the one offered tool it matches"
            )],
            "{written}"
        );
        let ran = session
            .events()
            .entries()
            .iter()
            .any(|e| matches!(&e.event, Event::ToolCall { tool, .. } if tool == "get_weather"));
        assert!(
            ran,
            "{written}: the tool_call event names the tool that runs"
        );
    }
}

#[tokio::test]
async fn a_name_that_fits_several_tools_is_not_guessed() {
    let (results, session) = run(native_call("functions.search", json!({"query": "x"}))).await;
    assert_eq!(
        results,
        [
            "There is no tool named `functions.search`, and it fits several: github__search, \
          gitlab__search. Call the one you mean by its exact name."
        ]
    );
    assert!(warnings(&session).is_empty());
    let skipped = session.events().entries().iter().any(|e| {
        matches!(
            &e.event,
            Event::ToolSkipped {
                reason: SkipReason::UnknownTool,
                ..
            }
        )
    });
    assert!(skipped);
}
