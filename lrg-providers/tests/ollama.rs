//! OllamaChat against a fake Ollama server: NDJSON streams with thinking,
//! whole tool calls and usage; request bodies (snapshotted); tool results
//! paired with their calls across two turns; model list with context lengths;
//! and faults. (Ollama has no API key, so there is none to leak.)
#![allow(clippy::unwrap_used, clippy::expect_used)] // helpers outside #[test] fns may panic: this is a test

use crate::common;

use std::time::Duration;

use common::{ask, bodies, turn};
use futures::StreamExt as _;
use lrg_providers::ollama::{OllamaChat, OllamaConfig};
use lrg_providers::transport::TransportConfig;
use lrg_providers::{
    ChatModel, Image, Message, ModelLocation, NativePart, Part, ProviderError, StopReason,
    ToolCall, ToolResult, ToolSpec, TurnEvent, Usage,
};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use wiremock::matchers::{body_partial_json, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

const WAIT: Duration = Duration::from_secs(10);
const MODEL: &str = "qwen3:8b";

fn chat_with(base: &str, idle: Duration) -> OllamaChat {
    let transport = TransportConfig::new(Duration::from_secs(2), idle);
    OllamaChat::new(
        OllamaConfig::new(base, MODEL)
            .with_temperature(0.6)
            .with_transport(transport),
    )
    .unwrap()
}

fn chat(base: &str) -> OllamaChat {
    chat_with(base, Duration::from_secs(5))
}

fn ndjson(lines: &[Value]) -> String {
    lines.iter().map(|l| format!("{l}\n")).collect()
}

fn line(message: Value) -> Value {
    json!({"model": MODEL, "created_at": "2025-06-01T10:00:00.000Z", "message": message, "done": false})
}

fn text(content: &str) -> Value {
    line(json!({"role": "assistant", "content": content}))
}

fn done(reason: &str, prompt: u32, completion: u32) -> Value {
    json!({"model": MODEL, "created_at": "2025-06-01T10:00:01.000Z", "message": {"role": "assistant", "content": ""},
           "done": true, "done_reason": reason, "total_duration": 912345678, "load_duration": 1234567,
           "prompt_eval_count": prompt, "prompt_eval_duration": 2345678, "eval_count": completion, "eval_duration": 3456789})
}

fn stream_ok(body: String) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_raw(body, "application/x-ndjson")
}

async fn mount(server: &MockServer, response: ResponseTemplate) {
    Mock::given(method("POST"))
        .and(path("/api/chat"))
        .and(common::Invariants {
            api: common::Api::Ollama,
            key: None,
        })
        .respond_with(response)
        .mount(server)
        .await;
}

fn tool(name: &str, property: &str) -> ToolSpec {
    ToolSpec {
        name: name.into(),
        description: format!("The {property}"),
        input_schema: json!({"type": "object", "properties": {property: {"type": "string"}}, "required": [property]}),
        annotations: Default::default(),
        output_schema: None,
    }
}

#[tokio::test]
async fn thinking_then_text_with_usage() {
    let server = MockServer::start().await;
    mount(
        &server,
        stream_ok(ndjson(&[
            line(json!({"role": "assistant", "content": "", "thinking": "Greet"})),
            line(json!({"role": "assistant", "content": "", "thinking": " briefly."})),
            text("Hello"),
            text("!"),
            done("stop", 26, 12),
        ])),
    )
    .await;
    let model = chat(&server.uri());
    let got = turn(&model, {
        let mut request = ask("hi");
        request.settings.temperature = None;
        request
    })
    .await
    .unwrap();
    assert_eq!(
        got.parts,
        vec![Part::reasoning("Greet briefly."), Part::text("Hello!")]
    );
    assert_eq!(got.usage, Some(Usage::new(26, 12)));
    assert_eq!(got.stop, Some(StopReason::EndTurn));
    // num_predict: the server budget; the config's temperature.
    insta::assert_json_snapshot!("plain_text_request", bodies(&server).await[0]);
    let info = model.info();
    assert_eq!(
        (info.provider.as_str(), info.location, info.sends_to),
        ("ollama", ModelLocation::Server, None)
    );
}

#[tokio::test]
async fn tool_calls_get_ids_and_results_go_back_paired() {
    let server = MockServer::start().await;
    common::mount_checked(
        &server,
        "/api/chat",
        common::Invariants::new(common::Api::Ollama, None),
        stream_ok(ndjson(&[
            line(json!({"role": "assistant", "content": "", "thinking": "Two lookups."})),
            line(json!({"role": "assistant", "content": "", "tool_calls": [
                {"function": {"name": "get_weather", "arguments": {"city": "Paris"}}},
                {"function": {"index": 1, "name": "get_time", "arguments": {"tz": "Europe/Paris"}}}
            ]})),
            done("stop", 140, 31),
        ])),
        1,
    )
    .await;
    let model = chat(&server.uri());
    let first =
        ask("Weather and time?").tools(vec![tool("get_weather", "city"), tool("get_time", "tz")]);
    let all = common::ok_events(common::events(&model, first.clone()).await);
    // Ollama sends calls whole: one delta each, before its call.
    assert_eq!(
        common::call_deltas(&all, 0),
        (
            Some(("call_1".into(), "get_weather".into())),
            r#"{"city":"Paris"}"#.into()
        )
    );
    assert_eq!(
        common::call_deltas(&all, 1),
        (
            Some(("call_2".into(), "get_time".into())),
            r#"{"tz":"Europe/Paris"}"#.into()
        )
    );
    let answer = common::fold(&all);
    assert_eq!(answer.stop, Some(StopReason::ToolCalls));
    let calls: Vec<ToolCall> = answer.tool_calls().into_iter().cloned().collect();
    assert_eq!(
        calls,
        vec![
            ToolCall {
                id: "call_1".into(),
                name: "get_weather".into(),
                arguments: json!({"city": "Paris"})
            },
            ToolCall {
                id: "call_2".into(),
                name: "get_time".into(),
                arguments: json!({"tz": "Europe/Paris"})
            },
        ]
    );
    insta::assert_json_snapshot!("one_turn_with_tools_request", bodies(&server).await[0]);

    let mut history = first.messages.clone();
    let mut assistant = answer.into_message();
    assistant.parts.push(Part::Native(NativePart {
        provider: "gemini".into(),
        model: "gemini-x".into(),
        value: json!({"thoughtSignature": "c2lnbmF0dXJl"}),
    }));
    history.push(assistant);
    let png = Image {
        mime: "image/png".into(),
        data: vec![0x89, b'P', b'N', b'G'].into(),
    };
    history.push(Message::tool_results([
        ToolResult {
            call_id: "call_1".into(),
            name: "get_weather".into(),
            parts: vec![Part::text("18°C"), Part::Image(png)],
            is_error: false,
        },
        ToolResult::text(&calls[1], "12:00", false),
    ]));
    server.verify().await;
    server.reset().await;
    common::mount_checked(
        &server,
        "/api/chat",
        common::Invariants::new(common::Api::Ollama, None),
        stream_ok(ndjson(&[
            line(json!({"role": "assistant", "content": "", "tool_calls": [
            {"function": {"name": "get_weather", "arguments": {"city": "Lyon"}}}]})),
            done("stop", 200, 9),
        ])),
        1,
    )
    .await;
    let mut second = first;
    second.messages = history;
    let again = turn(&model, second).await.unwrap();
    // Ids stay unique across the conversation.
    assert_eq!(again.tool_calls()[0].id, "call_3");
    let body = bodies(&server).await.remove(0);
    assert!(
        !body.to_string().contains("thoughtSignature"),
        "a foreign native part was sent"
    );
    insta::assert_json_snapshot!("second_turn_request", body);
    server.verify().await;
}

#[tokio::test]
async fn stream_cut_before_done_is_transient() {
    let server = MockServer::start().await;
    mount(
        &server,
        stream_ok(format!(
            "{}\n{{\"model\":\"qwen3:8b\",\"message\":{{\"content\":\"wo",
            text("Hel")
        )),
    )
    .await;
    let all: Vec<_> = tokio::time::timeout(
        WAIT,
        chat(&server.uri())
            .turn(ask("hi"), CancellationToken::new())
            .collect::<Vec<_>>(),
    )
    .await
    .unwrap();
    assert_eq!(all[0], Ok(TurnEvent::TextDelta { text: "Hel".into() }));
    assert!(
        all.last().unwrap().clone().unwrap_err().is_transient(),
        "{all:?}"
    );

    server.reset().await;
    mount(&server, stream_ok(ndjson(&[text("Hel")]))).await;
    let err = turn(&chat(&server.uri()), ask("hi")).await.unwrap_err();
    assert!(
        err.is_transient() && err.to_string().contains("done"),
        "{err}"
    );
}

#[tokio::test]
async fn malformed_line_is_a_protocol_error() {
    let server = MockServer::start().await;
    mount(
        &server,
        stream_ok(format!("{}\n{{\"message\": nope}}\n", text("a"))),
    )
    .await;
    let err = turn(&chat(&server.uri()), ask("hi")).await.unwrap_err();
    assert!(matches!(err, ProviderError::Protocol { .. }), "{err:?}");
}

#[tokio::test]
async fn tool_call_parse_error_then_success() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/api/chat"))
        .respond_with(ResponseTemplate::new(500).set_body_json(json!({"error": "error parsing tool call: raw='{\"city\": Par', err=invalid character 'P'"})))
        .up_to_n_times(1)
        .mount(&server)
        .await;
    mount(
        &server,
        stream_ok(ndjson(&[text("ok"), done("stop", 1, 1)])),
    )
    .await;
    let model = chat(&server.uri());
    let err = turn(&model, ask("hi")).await.unwrap_err();
    assert!(
        err.is_transient() && err.to_string().contains("error parsing tool call"),
        "{err}"
    );
    assert_eq!(turn(&model, ask("hi")).await.unwrap().text(), "ok");
}

#[tokio::test]
async fn busy_with_retry_after_then_success() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/api/chat"))
        .respond_with(ResponseTemplate::new(429).insert_header("retry-after", "2").set_body_json(json!({"error": "server busy, please try again.  maximum pending requests exceeded"})))
        .up_to_n_times(1)
        .mount(&server)
        .await;
    mount(
        &server,
        stream_ok(ndjson(&[text("ok"), done("stop", 1, 1)])),
    )
    .await;
    let model = chat(&server.uri());
    let err = turn(&model, ask("hi")).await.unwrap_err();
    assert_eq!(err.retry_after(), Some(Duration::from_secs(2)), "{err:?}");
    assert_eq!(turn(&model, ask("hi")).await.unwrap().text(), "ok");
}

#[tokio::test]
async fn unknown_model_is_fatal() {
    let server = MockServer::start().await;
    mount(
        &server,
        ResponseTemplate::new(404)
            .set_body_json(json!({"error": "model \"qwen3:8b\" not found, try pulling it first"})),
    )
    .await;
    let err = turn(&chat(&server.uri()), ask("hi")).await.unwrap_err();
    assert!(
        matches!(err, ProviderError::ModelNotFound { .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("try pulling it first"), "{err}");
}

#[tokio::test]
async fn idle_timeout() {
    let server = MockServer::start().await;
    mount(
        &server,
        stream_ok(ndjson(&[done("stop", 1, 1)])).set_delay(Duration::from_secs(3)),
    )
    .await;
    let err = turn(
        &chat_with(&server.uri(), Duration::from_millis(300)),
        ask("hi"),
    )
    .await
    .unwrap_err();
    assert!(err.is_transient(), "{err:?}");
}

#[tokio::test]
async fn cancel_mid_stream_ends_at_once() {
    let first = format!("{}\n", text("Hel"));
    let base = common::stalling_server("application/x-ndjson", first).await;
    let model = chat_with(&base, Duration::from_secs(30));
    common::assert_cancel_ends_at_once(&model, ask("hi"), "Hel").await;
}

#[tokio::test]
async fn model_list_with_context_lengths_survives_a_failed_show() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/api/tags"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"models": [
            {"name": "qwen3:8b", "model": "qwen3:8b", "size": 5_225_387_923_u64, "details": {"family": "qwen3"}},
            {"name": "llava:7b", "model": "llava:7b", "size": 4_733_363_377_u64},
            {"name": "broken:latest", "model": "broken:latest"}
        ]})))
        .mount(&server)
        .await;
    let show = |model: &str, info: Value| {
        Mock::given(method("POST"))
            .and(path("/api/show"))
            .and(body_partial_json(json!({"model": model})))
            .respond_with(
                ResponseTemplate::new(200)
                    .set_body_json(json!({"modelfile": "FROM x", "model_info": info})),
            )
    };
    show(
        "qwen3:8b",
        json!({"general.architecture": "qwen3", "qwen3.context_length": 40960}),
    )
    .mount(&server)
    .await;
    show("llava:7b", json!({"general.architecture": "llama", "llama.context_length": 32768, "clip.context_length": 77}))
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/api/show"))
        .and(body_partial_json(json!({"model": "broken:latest"})))
        .respond_with(
            ResponseTemplate::new(500).set_body_json(json!({"error": "unable to load model"})),
        )
        .mount(&server)
        .await;
    let model = chat(&server.uri());
    let listed = model.list_models().await.unwrap();
    let got: Vec<_> = listed
        .iter()
        .map(|m| (m.model.as_str(), m.context_window))
        .collect();
    assert_eq!(
        got,
        [
            ("qwen3:8b", Some(40960)),
            ("llava:7b", Some(32768)),
            ("broken:latest", None)
        ]
    );
    assert!(
        listed
            .iter()
            .all(|m| m.provider == "ollama" && m.location == ModelLocation::Server)
    );
    assert!(model.reachable().await);
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    assert!(!chat(&format!("http://{closed}")).reachable().await);
}

#[tokio::test]
async fn context_overflow_is_never_retried() {
    let server = MockServer::start().await;
    common::assert_overflow_not_retried(
        &chat(&server.uri()),
        &server,
        "/api/chat",
        stream_ok(ndjson(&[
            json!({"error": "the input length exceeds the context length"}),
        ])),
    )
    .await;
    let server = MockServer::start().await;
    common::assert_overflow_not_retried(
        &chat(&server.uri()),
        &server,
        "/api/chat",
        ResponseTemplate::new(400)
            .set_body_json(json!({"error": "the input length exceeds the context length"})),
    )
    .await;
}

#[tokio::test]
async fn with_a_tool_format_tools_go_as_text_and_hermes_text_becomes_calls() {
    use lrg_providers::text_tools::{ToolFormat, ToolMode};
    let server = MockServer::start().await;
    mount(
        &server,
        stream_ok(ndjson(&[
            text("Checking.<tool_"),
            text("call>\n{\"name\": \"get_weather\", \"arguments\": "),
            text("{\"city\": \"Paris\"}}\n</tool_call>"),
            done("stop", 50, 20),
        ])),
    )
    .await;
    let model = OllamaChat::new(
        OllamaConfig::new(server.uri(), MODEL).with_tool_mode(ToolMode::Text(ToolFormat::Hermes)),
    )
    .unwrap();
    let earlier = ToolCall {
        id: "call_1".into(),
        name: "get_time".into(),
        arguments: json!({"tz": "UTC"}),
    };
    let mut request = ask("Time, then weather in Paris?")
        .tools(vec![tool("get_weather", "city"), tool("get_time", "tz")]);
    request.messages.push(Message {
        role: lrg_providers::Role::Assistant,
        parts: vec![Part::ToolCall(earlier.clone())],
    });
    request
        .messages
        .push(Message::tool_results([ToolResult::text(
            &earlier, "12:00", false,
        )]));
    let all = common::ok_events(common::events(&model, request).await);
    let answer = common::fold(&all);
    assert_eq!(answer.text(), "Checking.");
    assert_eq!(answer.stop, Some(StopReason::ToolCalls));
    let calls = answer.tool_calls();
    assert_eq!(calls.len(), 1);
    assert_eq!(
        (calls[0].name.as_str(), &calls[0].arguments),
        ("get_weather", &json!({"city": "Paris"}))
    );
    assert_ne!(calls[0].id, "call_1", "a new id, not one from the history");
    // The server was never told about tools: they are in the system prompt,
    // the earlier call and its result are text.
    let body = bodies(&server).await.remove(0);
    assert!(body.get("tools").is_none(), "{body}");
    let messages = body["messages"].as_array().unwrap();
    let roles: Vec<&str> = messages
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["system", "user", "assistant", "user"]);
    let system = messages[0]["content"].as_str().unwrap();
    assert!(system.contains("<tool_call>"), "{system}");
    assert!(
        messages[2]["content"]
            .as_str()
            .unwrap()
            .contains("\"get_time\""),
        "{body}"
    );
    assert!(
        messages[3]["content"]
            .as_str()
            .unwrap()
            .contains("<tool_response>\n12:00\n</tool_response>"),
        "{body}"
    );
}

#[tokio::test]
async fn a_typed_answer_goes_in_format_unless_tools_are_offered() {
    use lrg_providers::typed::OutputMode;
    let server = MockServer::start().await;
    mount(
        &server,
        stream_ok(ndjson(&[
            text("{\"label\":\"bug\",\"priority\":2}"),
            done("stop", 9, 5),
        ])),
    )
    .await;
    let model = chat(&server.uri());
    assert_eq!(model.info().output_mode, OutputMode::Native);
    let typed = ask("Triage: it crashes").output(common::triage_schema());
    let got = turn(&model, typed.clone()).await.unwrap();
    assert_eq!(got.text(), r#"{"label":"bug","priority":2}"#);
    turn(&model, typed.tools(vec![tool("read_file", "path")]))
        .await
        .unwrap();
    let sent = bodies(&server).await;
    assert_eq!(sent[0]["format"]["required"], json!(["label", "priority"]));
    assert!(sent[0]["format"].get("$schema").is_none());
    assert_eq!(sent[0]["messages"][0]["content"], "You are terse.");
    insta::assert_json_snapshot!("typed_request", sent[0]);
    // Under `format` Ollama's model could no longer call a tool.
    assert!(sent[1].get("format").is_none(), "{:#}", sent[1]);
    let system = sent[1]["messages"][0]["content"].as_str().unwrap();
    assert!(system.starts_with("You are terse.\n\n"), "{system}");
    assert!(
        system.ends_with(&common::triage_schema().instructions()),
        "{system}"
    );
    insta::assert_json_snapshot!("typed_with_tools_request", sent[1]);
}
