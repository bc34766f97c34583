//! AnthropicChat against fake Messages API servers: realistic streams, request
//! bodies (snapshotted), native thinking blocks across turns, and faults.
#![allow(clippy::unwrap_used)] // helpers outside #[test] fns may panic: this is a test

use crate::common;

use std::time::Duration;

use common::{LogBuffer, ask, bodies, events, turn};
use lrg_providers::anthropic::{AnthropicChat, AnthropicConfig};
use lrg_providers::transport::TransportConfig;
use lrg_providers::typed::OutputMode;
use lrg_providers::{
    ApiKey, ChatModel, Image, Message, NativePart, Part, ProviderError, Role, StopReason, ToolCall,
    ToolResult, ToolSpec, TurnEvent, TurnRequest, Usage,
};
use serde_json::{Value, json};
use wiremock::matchers::{header, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

const KEY: &str = "sk-ant-test-0123456789abcdef";
const MODEL: &str = "claude-test-1";

fn config(base: &str) -> AnthropicConfig {
    AnthropicConfig::new(MODEL, ApiKey::new(KEY))
        .with_base_url(base)
        .with_transport(TransportConfig::new(
            Duration::from_secs(2),
            Duration::from_secs(5),
        ))
}

fn chat(base: &str) -> AnthropicChat {
    AnthropicChat::new(config(base)).unwrap()
}

/// An SSE body from `(event, data)` pairs, as Anthropic writes it.
fn sse(events: &[Value]) -> String {
    events
        .iter()
        .map(|e| {
            format!(
                "event: {}\ndata: {}\n\n",
                e["type"].as_str().unwrap_or("message"),
                e
            )
        })
        .collect()
}

fn message_start(input: u64, cache_read: u64) -> Value {
    json!({"type": "message_start", "message": {
        "id": "msg_01", "type": "message", "role": "assistant", "model": MODEL, "content": [],
        "stop_reason": null, "stop_sequence": null,
        "usage": {"input_tokens": input, "cache_creation_input_tokens": 0, "cache_read_input_tokens": cache_read, "output_tokens": 1}
    }})
}

fn block_start(index: u32, block: Value) -> Value {
    json!({"type": "content_block_start", "index": index, "content_block": block})
}

fn delta(index: u32, delta: Value) -> Value {
    json!({"type": "content_block_delta", "index": index, "delta": delta})
}

fn text_delta(index: u32, text: &str) -> Value {
    delta(index, json!({"type": "text_delta", "text": text}))
}

fn block_stop(index: u32) -> Value {
    json!({"type": "content_block_stop", "index": index})
}

fn message_end(stop: &str, output: u64) -> [Value; 2] {
    [
        json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null}, "usage": {"output_tokens": output}}),
        json!({"type": "message_stop"}),
    ]
}

fn text_stream(parts: &[&str]) -> Vec<Value> {
    let mut events = vec![
        message_start(20, 0),
        block_start(0, json!({"type": "text", "text": ""})),
    ];
    events.push(json!({"type": "ping"}));
    events.extend(parts.iter().map(|p| text_delta(0, p)));
    events.push(block_stop(0));
    events.extend(message_end("end_turn", 7));
    events
}

fn sse_response(body: String) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_raw(body, "text/event-stream")
}

async fn serve(server: &MockServer, body: String) {
    Mock::given(method("POST"))
        .and(path("/v1/messages"))
        .and(header("x-api-key", KEY))
        .and(header("anthropic-version", "2023-06-01"))
        .and(common::Invariants {
            api: common::Api::Anthropic,
            key: Some(KEY),
        })
        .respond_with(sse_response(body))
        .mount(server)
        .await;
}

fn tool(name: &str) -> ToolSpec {
    ToolSpec {
        name: name.into(),
        description: format!("The {name} tool."),
        input_schema: json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}),
        annotations: Default::default(),
        output_schema: None,
    }
}

fn native(value: Value) -> NativePart {
    NativePart {
        provider: "anthropic".into(),
        model: MODEL.into(),
        value,
    }
}

#[tokio::test]
async fn plain_text_streams_with_usage() {
    let server = MockServer::start().await;
    serve(&server, sse(&text_stream(&["Hello", ", ", "world."]))).await;
    let model = chat(&server.uri());
    let got = events(&model, ask("Say hello")).await;
    let got: Vec<TurnEvent> = got.into_iter().map(Result::unwrap).collect();
    assert_eq!(
        got,
        vec![
            TurnEvent::TextDelta {
                text: "Hello".into()
            },
            TurnEvent::TextDelta { text: ", ".into() },
            TurnEvent::TextDelta {
                text: "world.".into()
            },
            // The API reports both cache counts, here as zero.
            TurnEvent::Usage(
                Usage::new(20, 7)
                    .with_cached_prompt_tokens(0)
                    .with_cache_write_tokens(0)
            ),
            TurnEvent::End {
                stop: StopReason::EndTurn
            },
        ]
    );
    insta::assert_json_snapshot!("plain_text_request", bodies(&server).await[0]);
}

#[tokio::test]
async fn cache_reads_and_writes_count_as_prompt_tokens() {
    let server = MockServer::start().await;
    let mut events = text_stream(&["ok"]);
    events[0] = message_start(3, 1_500);
    events[0]["message"]["usage"]["cache_creation_input_tokens"] = json!(200);
    serve(&server, sse(&events)).await;
    let got = turn(&chat(&server.uri()), ask("x")).await.unwrap();
    // `input_tokens` leaves both out; `prompt_tokens` counts them.
    assert_eq!(
        got.usage,
        Some(
            Usage::new(1_703, 7)
                .with_cached_prompt_tokens(1_500)
                .with_cache_write_tokens(200)
        )
    );
}

fn thinking_then_text() -> Vec<Value> {
    let mut events = vec![
        message_start(40, 0),
        block_start(
            0,
            json!({"type": "thinking", "thinking": "", "signature": ""}),
        ),
        delta(
            0,
            json!({"type": "thinking_delta", "thinking": "The user greets me. "}),
        ),
        delta(
            0,
            json!({"type": "thinking_delta", "thinking": "Answer briefly."}),
        ),
        delta(
            0,
            json!({"type": "signature_delta", "signature": "EqQBCkYIARgCIkD+sig=="}),
        ),
        block_stop(0),
        block_start(1, json!({"type": "text", "text": ""})),
        text_delta(1, "Hi!"),
        block_stop(1),
    ];
    events.extend(message_end("end_turn", 30));
    events
}

#[tokio::test]
async fn reasoning_with_text_keeps_the_signed_thinking_block() {
    let server = MockServer::start().await;
    serve(&server, sse(&thinking_then_text())).await;
    let model = AnthropicChat::new(config(&server.uri()).with_thinking_budget(2_000)).unwrap();
    let got = turn(&model, ask("hello")).await.unwrap();
    assert_eq!(
        got.parts,
        vec![
            Part::reasoning("The user greets me. Answer briefly."),
            Part::Native(native(json!({
                "type": "thinking", "thinking": "The user greets me. Answer briefly.", "signature": "EqQBCkYIARgCIkD+sig=="
            }))),
            Part::text("Hi!"),
        ]
    );
    let body = &bodies(&server).await[0];
    assert_eq!(
        body["thinking"],
        json!({"type": "enabled", "budget_tokens": 2000})
    );
    assert_eq!(body["max_tokens"], 8192 + 2000);
}

fn tool_use(index: u32, id: &str, name: &str, fragments: &[&str]) -> Vec<Value> {
    let mut events = vec![block_start(
        index,
        json!({"type": "tool_use", "id": id, "name": name, "input": {}}),
    )];
    events.extend(fragments.iter().map(|f| {
        delta(
            index,
            json!({"type": "input_json_delta", "partial_json": f}),
        )
    }));
    events.push(block_stop(index));
    events
}

#[tokio::test]
async fn one_tool_call_is_assembled_from_fragments() {
    let server = MockServer::start().await;
    let mut events = vec![
        message_start(50, 0),
        block_start(0, json!({"type": "text", "text": ""})),
        text_delta(0, "Reading it."),
        block_stop(0),
    ];
    events.extend(tool_use(
        1,
        "toolu_01A",
        "read_file",
        &["", "{\"pa", "th\": \"src/", "main.rs\"}"],
    ));
    events.extend(message_end("tool_use", 25));
    serve(&server, sse(&events)).await;
    let request = ask("show main.rs").tools(vec![tool("read_file")]);
    let all = common::ok_events(common::events(&chat(&server.uri()), request).await);
    // Named when its block starts, then each input_json_delta as it came.
    assert_eq!(
        common::call_deltas(&all, 0),
        (
            Some(("toolu_01A".into(), "read_file".into())),
            r#"{"path": "src/main.rs"}"#.into()
        )
    );
    let got = common::fold(&all);
    assert_eq!(got.text(), "Reading it.");
    assert_eq!(
        got.tool_calls(),
        vec![&ToolCall {
            id: "toolu_01A".into(),
            name: "read_file".into(),
            arguments: json!({"path": "src/main.rs"}),
        }]
    );
    assert_eq!(got.stop, Some(StopReason::ToolCalls));
    insta::assert_json_snapshot!("one_tool_call_request", bodies(&server).await[0]);
}

/// Turn 1 of the two-turn test: redacted and signed thinking, text, two calls.
fn thinking_and_two_calls() -> Vec<Value> {
    let mut events = vec![
        message_start(60, 0),
        block_start(
            0,
            json!({"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT"}),
        ),
        block_stop(0),
        block_start(
            1,
            json!({"type": "thinking", "thinking": "", "signature": ""}),
        ),
        delta(
            1,
            json!({"type": "thinking_delta", "thinking": "Two files to read."}),
        ),
        delta(
            1,
            json!({"type": "signature_delta", "signature": "sig-part-1"}),
        ),
        delta(
            1,
            json!({"type": "signature_delta", "signature": "+part-2"}),
        ),
        block_stop(1),
        block_start(2, json!({"type": "text", "text": "Looking."})),
        block_stop(2),
    ];
    events.extend(tool_use(
        3,
        "toolu_A",
        "read_file",
        &["{\"path\": \"a.txt\"}"],
    ));
    events.extend(tool_use(
        4,
        "toolu_B",
        "read_file",
        &["{\"path\":", " \"b.png\"}"],
    ));
    events.extend(message_end("tool_use", 80));
    events
}

#[tokio::test]
async fn two_turns_send_thinking_back_unchanged_and_pair_every_result() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/messages"))
        .and(common::Invariants::new(common::Api::Anthropic, Some(KEY)))
        .respond_with(sse_response(sse(&thinking_and_two_calls())))
        .up_to_n_times(1)
        .with_priority(1)
        .expect(1)
        .mount(&server)
        .await;
    common::mount_checked(
        &server,
        "/v1/messages",
        common::Invariants::new(common::Api::Anthropic, Some(KEY)),
        sse_response(sse(&text_stream(&["a.txt says hi; b.png is a dot."]))),
        1,
    )
    .await;
    let model = AnthropicChat::new(config(&server.uri()).with_thinking_budget(1_024)).unwrap();

    let mut request = ask("read a.txt and b.png").tools(vec![tool("read_file")]);
    let first = turn(&model, request.clone()).await.unwrap();
    let redacted = json!({"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT"});
    let signed = json!({"type": "thinking", "thinking": "Two files to read.", "signature": "sig-part-1+part-2"});
    assert_eq!(first.parts[0], Part::Native(native(redacted.clone())));
    assert_eq!(first.parts[1], Part::reasoning("Two files to read."));
    assert_eq!(first.parts[2], Part::Native(native(signed.clone())));
    let calls: Vec<ToolCall> = first.tool_calls().into_iter().cloned().collect();
    assert_eq!(calls.len(), 2);

    // The session records results in its own order; B's holds an image.
    let dot = Image {
        mime: "image/png".into(),
        data: vec![0x89, b'P', b'N', b'G'].into(),
    };
    let result_b = ToolResult {
        call_id: calls[1].id.clone(),
        name: calls[1].name.clone(),
        parts: vec![Part::text("a 1x1 image"), Part::Image(dot)],
        is_error: false,
    };
    let result_a = ToolResult::text(&calls[0], "hi", false);
    request.messages.push(first.into_message());
    request
        .messages
        .push(Message::tool_results([result_b, result_a]));
    let second = turn(&model, request).await.unwrap();
    assert_eq!(second.text(), "a.txt says hi; b.png is a dot.");

    let sent = bodies(&server).await;
    let assistant = &sent[1]["messages"][1];
    assert_eq!(assistant["role"], "assistant");
    assert_eq!(
        assistant["content"][0], redacted,
        "redacted thinking goes back first, unchanged"
    );
    assert_eq!(
        assistant["content"][1], signed,
        "signed thinking goes back unchanged"
    );
    assert_eq!(
        assistant["content"][2],
        json!({"type": "text", "text": "Looking."})
    );
    let results = &sent[1]["messages"][2]["content"];
    assert_eq!(results[0]["tool_use_id"], "toolu_A");
    assert_eq!(results[1]["tool_use_id"], "toolu_B");
    assert_eq!(
        results[1]["content"][1]["type"], "image",
        "images go inside tool_result"
    );
    insta::assert_json_snapshot!("second_turn_request", sent[1]);
    server.verify().await;
}

#[tokio::test]
async fn another_models_thinking_is_not_sent() {
    let server = MockServer::start().await;
    serve(&server, sse(&text_stream(&["ok"]))).await;
    let foreign = |provider: &str, model: &str| {
        Part::Native(NativePart {
            provider: provider.into(),
            model: model.into(),
            value: json!({"type": "thinking", "thinking": "x", "signature": "s"}),
        })
    };
    let earlier = Message {
        role: Role::Assistant,
        parts: vec![
            foreign("anthropic", "claude-other"),
            foreign("gemini", MODEL),
            Part::reasoning("secret musings"),
            Part::text("Earlier answer."),
        ],
    };
    let request = TurnRequest::new(vec![Message::user("q1"), earlier, Message::user("q2")]);
    turn(&chat(&server.uri()), request).await.unwrap();
    let body = &bodies(&server).await[0];
    assert_eq!(
        body["messages"][1]["content"],
        json!([{"type": "text", "text": "Earlier answer."}])
    );
    assert!(
        !body.to_string().contains("secret musings"),
        "reasoning is never sent as text"
    );
}

#[tokio::test]
async fn only_the_newest_four_images_stay_attached() {
    let server = MockServer::start().await;
    serve(&server, sse(&text_stream(&["ok"]))).await;
    let image = |n: u8| {
        Part::Image(Image {
            mime: "image/jpeg".into(),
            data: vec![n].into(),
        })
    };
    let request = TurnRequest::new(vec![
        Message {
            role: Role::User,
            parts: vec![image(1), image(2), Part::text("first")],
        },
        Message::assistant("seen"),
        Message {
            role: Role::User,
            parts: vec![image(3), image(4), image(5), image(6), Part::text("more")],
        },
    ]);
    turn(&chat(&server.uri()), request).await.unwrap();
    let body = &bodies(&server).await[0];
    assert_eq!(
        body["messages"][0]["content"][0],
        json!({"type": "text", "text": "[image omitted]"})
    );
    assert_eq!(
        body["messages"][0]["content"][1],
        json!({"type": "text", "text": "[image omitted]"})
    );
    let last: Vec<&str> = body["messages"][2]["content"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["type"].as_str().unwrap())
        .collect();
    assert_eq!(last, ["image", "image", "image", "image", "text"]);
}

#[tokio::test]
async fn overloaded_error_event_is_transient() {
    let server = MockServer::start().await;
    let events = vec![
        message_start(5, 0),
        block_start(0, json!({"type": "text", "text": ""})),
        text_delta(0, "Par"),
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
    ];
    serve(&server, sse(&events)).await;
    let got = events_of(&server).await;
    assert_eq!(
        got[0].as_ref().unwrap(),
        &TurnEvent::TextDelta { text: "Par".into() }
    );
    let err = got.last().unwrap().as_ref().unwrap_err();
    assert!(err.is_transient(), "{err}");
    assert!(err.to_string().contains("Overloaded"), "{err}");
}

async fn events_of(server: &MockServer) -> Vec<Result<TurnEvent, ProviderError>> {
    events(&chat(&server.uri()), ask("x")).await
}

#[tokio::test]
async fn stream_cut_mid_event_is_transient() {
    let server = MockServer::start().await;
    let mut body = sse(&text_stream(&["Hello", " there"]));
    let cut = body.find("\" there\"").unwrap();
    body.truncate(cut);
    serve(&server, body).await;
    let got = events_of(&server).await;
    assert_eq!(
        got[0].as_ref().unwrap(),
        &TurnEvent::TextDelta {
            text: "Hello".into()
        }
    );
    let err = got.last().unwrap().as_ref().unwrap_err();
    assert!(err.is_transient(), "{err}");
}

#[tokio::test]
async fn stream_ending_without_message_stop_is_transient() {
    let server = MockServer::start().await;
    let mut events = text_stream(&["Hello"]);
    events.truncate(events.len() - 2);
    serve(&server, sse(&events)).await;
    let err = events_of(&server).await.pop().unwrap().unwrap_err();
    assert!(err.is_transient(), "{err}");
    assert!(err.to_string().contains("message_stop"), "{err}");
}

#[tokio::test]
async fn malformed_json_frame_is_a_protocol_error() {
    let server = MockServer::start().await;
    let body = format!(
        "{}event: content_block_delta\ndata: {{\"type\": \"content_block_delta\", \"index\": 0, delta: oops}}\n\n{}",
        sse(&text_stream(&["Hi"])[..3]),
        sse(&text_stream(&["Hi"])[3..])
    );
    serve(&server, body).await;
    let err = events_of(&server).await.pop().unwrap().unwrap_err();
    assert!(matches!(err, ProviderError::Protocol { .. }), "{err:?}");
    assert!(err.to_string().contains("content_block_delta"), "{err}");
}

#[tokio::test]
async fn rate_limit_carries_retry_after_and_a_second_call_succeeds() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(429).insert_header("retry-after", "3").set_body_json(json!({
            "type": "error", "error": {"type": "rate_limit_error", "message": "Number of request tokens has exceeded your per-minute rate limit"}
        })))
        .up_to_n_times(1)
        .with_priority(1)
        .mount(&server)
        .await;
    serve(&server, sse(&text_stream(&["ok"]))).await;
    let model = chat(&server.uri());
    let err = turn(&model, ask("x")).await.unwrap_err();
    assert!(err.is_transient(), "{err}");
    assert_eq!(err.retry_after(), Some(Duration::from_secs(3)));
    assert!(err.to_string().contains("rate limit"), "{err}");
    assert_eq!(turn(&model, ask("x")).await.unwrap().text(), "ok");
}

#[tokio::test]
async fn server_error_then_success() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(500).set_body_json(json!({"type": "error", "error": {"type": "api_error", "message": "Internal server error"}})))
        .up_to_n_times(1)
        .with_priority(1)
        .mount(&server)
        .await;
    serve(&server, sse(&text_stream(&["fine"]))).await;
    let model = chat(&server.uri());
    let err = turn(&model, ask("x")).await.unwrap_err();
    assert!(err.is_transient(), "{err}");
    assert_eq!(turn(&model, ask("x")).await.unwrap().text(), "fine");
}

#[tokio::test]
async fn unauthorized_is_fatal_with_a_clear_message() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(401).set_body_json(json!({
            "type": "error", "error": {"type": "authentication_error", "message": format!("invalid x-api-key {KEY}")}
        })))
        .mount(&server)
        .await;
    let err = turn(&chat(&server.uri()), ask("x")).await.unwrap_err();
    assert!(matches!(err, ProviderError::Auth { .. }), "{err:?}");
    assert!(!err.is_transient());
    let text = err.to_string();
    assert!(
        text.contains("invalid x-api-key") && text.contains("401"),
        "{text}"
    );
    assert!(
        !text.contains(KEY) && !format!("{err:?}").contains(KEY),
        "the key leaked: {text}"
    );
}

#[tokio::test]
async fn idle_timeout_is_transient() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(sse_response(sse(&text_stream(&["late"]))).set_delay(Duration::from_secs(3)))
        .mount(&server)
        .await;
    let mut cfg = config(&server.uri());
    cfg.transport.idle_timeout = Duration::from_millis(300);
    let model = AnthropicChat::new(cfg).unwrap();
    let started = std::time::Instant::now();
    let err = turn(&model, ask("x")).await.unwrap_err();
    assert!(err.is_transient(), "{err}");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "the timeout did not fire"
    );
}

#[tokio::test]
async fn cancel_mid_stream_stops_at_once() {
    let first = sse(&text_stream(&["Partial"])[..4]);
    let base = common::stalling_server("text/event-stream", first).await;
    let model = chat(&base);
    common::assert_cancel_ends_at_once(&model, ask("x"), "Partial").await;
}

#[tokio::test]
async fn the_key_never_shows_in_requests_errors_or_logs() {
    // The process's one capture: other tests' logs land here too, which
    // only widens the check.
    let logs = LogBuffer::global();

    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(400).set_body_string(format!("bad request from key {KEY}")),
        )
        .up_to_n_times(1)
        .with_priority(1)
        .mount(&server)
        .await;
    serve(&server, sse(&text_stream(&["ok"]))).await;
    Mock::given(method("GET"))
        .and(path("/v1/models"))
        .respond_with(ResponseTemplate::new(403).set_body_string(format!("forbidden: {KEY}")))
        .mount(&server)
        .await;
    let model = chat(&server.uri());
    let err = turn(&model, ask("x")).await.unwrap_err();
    let ok = turn(&model, ask("x")).await.unwrap();
    let list_err = model.list_models().await.unwrap_err();
    tracing::info!("done");

    for shown in [
        err.to_string(),
        format!("{err:?}"),
        list_err.to_string(),
        format!("{model:?}"),
        format!("{ok:?}"),
    ] {
        assert!(!shown.contains(KEY), "key in {shown}");
    }
    for request in server.received_requests().await.unwrap() {
        assert!(!request.url.as_str().contains(KEY));
        assert!(!String::from_utf8_lossy(&request.body).contains(KEY));
        assert_eq!(
            request.headers.get("x-api-key").unwrap(),
            KEY,
            "the key goes in its header only"
        );
    }
    let logs = logs.text();
    assert!(logs.contains("anthropic turn"), "the capture works: {logs}");
    assert!(!logs.contains(KEY), "key in the logs");
}

#[tokio::test]
async fn lists_models_across_pages() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/v1/models"))
        .and(wiremock::matchers::query_param("after_id", "claude-b"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "data": [{"type": "model", "id": "claude-c", "display_name": "C"}], "has_more": false, "last_id": "claude-c"
        })))
        .with_priority(1)
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/v1/models"))
        .and(header("x-api-key", KEY))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "data": [{"type": "model", "id": "claude-a"}, {"type": "model", "id": "claude-b"}], "has_more": true, "last_id": "claude-b"
        })))
        .mount(&server)
        .await;
    let models = chat(&server.uri()).list_models().await.unwrap();
    let ids: Vec<&str> = models.iter().map(|m| m.model.as_str()).collect();
    assert_eq!(ids, ["claude-a", "claude-b", "claude-c"]);
    assert!(chat(&server.uri()).reachable().await);
}

#[test]
fn missing_key_names_the_variable() {
    let mut cfg = AnthropicConfig::new(MODEL, ApiKey::new("x"));
    cfg.api_key = None;
    let err = AnthropicChat::new(cfg).unwrap_err();
    assert!(err.to_string().contains("ANTHROPIC_API_KEY"), "{err}");
}

#[test]
fn info_says_where_the_conversation_goes() {
    let model =
        AnthropicChat::new(AnthropicConfig::new("claude-sonnet-4-5", ApiKey::new("x"))).unwrap();
    let info = model.info();
    assert_eq!(info.sends_to.as_deref(), Some("api.anthropic.com"));
    assert_eq!(info.context_window, Some(200_000));
    assert_eq!(info.location, lrg_providers::ModelLocation::Cloud);
}

#[test]
fn any_chunking_of_a_stream_decodes_the_same() {
    let body = sse(&thinking_and_two_calls());
    common::assert_any_chunking_decodes_the_same(&body, || {
        lrg_providers::anthropic::AnthropicDecoder::new(MODEL)
    });
}

#[tokio::test]
async fn context_overflow_is_never_retried() {
    let overflow = json!({"type": "error", "error": {"type": "invalid_request_error",
        "message": "prompt is too long: 210000 tokens > 200000 maximum"}});
    let server = MockServer::start().await;
    common::assert_overflow_not_retried(
        &chat(&server.uri()),
        &server,
        "/v1/messages",
        ResponseTemplate::new(400).set_body_json(overflow.clone()),
    )
    .await;
    // The same error inside a 200 stream.
    let server = MockServer::start().await;
    common::assert_overflow_not_retried(
        &chat(&server.uri()),
        &server,
        "/v1/messages",
        sse_response(sse(&[overflow])),
    )
    .await;
}

/// A model with structured outputs (the test model, `claude-test-1`, has
/// none: its typed answers go through the answer tool).
fn structured(base: &str) -> AnthropicChat {
    let mut config = config(base);
    config.model = "claude-sonnet-4-5".into();
    AnthropicChat::new(config).unwrap()
}

fn typed(text: &str) -> TurnRequest {
    ask(text).output(common::triage_schema())
}

const ANSWER: &str = r#"{"label":"bug","priority":2,"note":null}"#;

#[tokio::test]
async fn structured_outputs_carry_the_strict_schema_in_output_config() {
    let server = MockServer::start().await;
    serve(&server, sse(&text_stream(&[ANSWER]))).await;
    let model = structured(&server.uri());
    assert_eq!(model.info().output_mode, OutputMode::NativeStrict);
    let got = turn(&model, typed("Triage: it crashes")).await.unwrap();
    assert_eq!(got.text(), ANSWER);
    turn(
        &model,
        typed("Triage: it crashes").tools(vec![tool("read_file")]),
    )
    .await
    .unwrap();
    let sent = bodies(&server).await;
    for body in &sent {
        let format = &body["output_config"]["format"];
        assert_eq!(format["type"], "json_schema");
        assert_eq!(format["schema"]["additionalProperties"], false);
        assert!(body.get("tool_choice").is_none(), "{body:#}");
    }
    assert_eq!(sent[1]["tools"].as_array().map(Vec::len), Some(1));
    insta::assert_json_snapshot!("structured_output_request", sent[0]);
    insta::assert_json_snapshot!("structured_output_with_tools_request", sent[1]);
}

/// The answer tool's call, streamed in fragments, after a line of text.
fn answer_tool_stream(name: &str) -> Vec<Value> {
    let mut events = vec![
        message_start(30, 0),
        block_start(0, json!({"type": "text", "text": ""})),
        text_delta(0, "Here it is."),
        block_stop(0),
    ];
    events.extend(tool_use(
        1,
        "toolu_answer",
        name,
        &["", "{\"label\": \"bug\",", " \"priority\": 2}"],
    ));
    events.extend(message_end("tool_use", 12));
    events
}

#[tokio::test]
async fn the_forced_answer_tool_comes_out_as_text_and_never_goes_back_as_a_call() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/messages"))
        .and(common::Invariants::new(common::Api::Anthropic, Some(KEY)))
        .respond_with(sse_response(sse(&answer_tool_stream("final_answer"))))
        .up_to_n_times(1)
        .with_priority(1)
        .expect(1)
        .mount(&server)
        .await;
    common::mount_checked(
        &server,
        "/v1/messages",
        common::Invariants::new(common::Api::Anthropic, Some(KEY)),
        sse_response(sse(&text_stream(&[ANSWER]))),
        1,
    )
    .await;
    let model = chat(&server.uri());
    assert_eq!(model.info().output_mode, OutputMode::ForcedTool);
    let mut request = typed("Triage: it crashes");
    let all = common::ok_events(common::events(&model, request.clone()).await);
    assert_eq!(
        all,
        vec![
            TurnEvent::TextDelta {
                text: "Here it is.".into()
            },
            TurnEvent::TextDelta {
                text: "{\"label\": \"bug\",".into()
            },
            TurnEvent::TextDelta {
                text: " \"priority\": 2}".into()
            },
            TurnEvent::Usage(
                Usage::new(30, 12)
                    .with_cached_prompt_tokens(0)
                    .with_cache_write_tokens(0)
            ),
            TurnEvent::End {
                stop: StopReason::EndTurn
            },
        ],
        "the answer tool's input is text: no call, no native part, and the turn is over"
    );
    let first = common::fold(&all);
    assert!(first.tool_calls().is_empty());
    assert_eq!(
        common::triage_schema().check(&first.text()).unwrap(),
        json!({"label": "bug", "priority": 2})
    );

    // A repair turn: the answer goes back as text, never as a `tool_use`
    // without its result (the invariants matcher would fail the request).
    request.messages.push(first.into_message());
    request
        .messages
        .push(Message::user("Your answer does not match: answer again."));
    turn(&model, request).await.unwrap();
    let sent = bodies(&server).await;
    assert_eq!(
        sent[0]["tool_choice"],
        json!({"type": "tool", "name": "final_answer"})
    );
    insta::assert_json_snapshot!("answer_tool_forced_request", sent[0]);
    let assistant = &sent[1]["messages"][1];
    assert_eq!(assistant["role"], "assistant");
    assert_eq!(
        assistant["content"],
        json!([{"type": "text", "text": "Here it is.{\"label\": \"bug\", \"priority\": 2}"}])
    );
    server.verify().await;
}

#[tokio::test]
async fn beside_other_tools_the_answer_tool_is_offered_not_forced() {
    let server = MockServer::start().await;
    // The model calls a real tool and the answer tool in one message: the
    // real one is a call, the answer text, and the turn goes on.
    let mut events = vec![message_start(30, 0)];
    events.extend(tool_use(0, "toolu_1", "read_file", &["{\"path\": \"a\"}"]));
    events.extend(tool_use(
        1,
        "toolu_2",
        "final_answer",
        &["{\"label\": \"bug\"}"],
    ));
    events.extend(message_end("tool_use", 9));
    serve(&server, sse(&events)).await;
    let model = chat(&server.uri());
    let request = typed("Triage: read a first").tools(vec![tool("read_file")]);
    let got = turn(&model, request).await.unwrap();
    assert_eq!(got.text(), r#"{"label": "bug"}"#);
    assert_eq!(
        got.tool_calls()
            .iter()
            .map(|c| c.name.as_str())
            .collect::<Vec<_>>(),
        ["read_file"]
    );
    assert_eq!(got.stop, Some(StopReason::ToolCalls));
    let body = &bodies(&server).await[0];
    assert!(body.get("tool_choice").is_none(), "{body:#}");
    let names: Vec<&str> = body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["read_file", "final_answer"]);
    assert!(body["system"][0]["text"].as_str().unwrap().ends_with(
        "Give your final answer by calling the `final_answer` tool, after any other tool calls."
    ));
    insta::assert_json_snapshot!("answer_tool_with_tools_request", body);
}

#[tokio::test]
async fn with_thinking_on_the_answer_tool_is_not_forced_and_only_thinking_is_native() {
    let server = MockServer::start().await;
    let mut events = vec![
        message_start(30, 0),
        block_start(
            0,
            json!({"type": "thinking", "thinking": "", "signature": ""}),
        ),
        delta(0, json!({"type": "thinking_delta", "thinking": "A bug."})),
        delta(0, json!({"type": "signature_delta", "signature": "sig"})),
        block_stop(0),
    ];
    events.extend(tool_use(
        1,
        "toolu_a",
        "final_answer",
        &["{\"label\":\"bug\",\"priority\":1}"],
    ));
    events.extend(message_end("tool_use", 9));
    serve(&server, sse(&events)).await;
    let model = AnthropicChat::new(config(&server.uri()).with_thinking_budget(1_024)).unwrap();
    let got = turn(&model, typed("Triage: it crashes")).await.unwrap();
    assert_eq!(got.text(), r#"{"label":"bug","priority":1}"#);
    assert_eq!(got.stop, Some(StopReason::EndTurn));
    let natives: Vec<&Value> = got
        .parts
        .iter()
        .filter_map(|p| match p {
            Part::Native(n) => Some(&n.value),
            _ => None,
        })
        .collect();
    assert_eq!(
        natives,
        [&json!({"type": "thinking", "thinking": "A bug.", "signature": "sig"})]
    );
    let body = &bodies(&server).await[0];
    // The API refuses a forced tool with thinking on.
    assert!(body.get("tool_choice").is_none(), "{body:#}");
    assert_eq!(body["tools"][0]["name"], "final_answer");
}

#[test]
fn a_whole_reply_of_the_answer_tool_is_text_too() {
    use lrg_providers::anthropic::AnthropicDecoder;
    let reply = json!({
        "type": "message", "role": "assistant", "model": MODEL,
        "content": [{"type": "tool_use", "id": "toolu_1", "name": "final_answer", "input": {"label": "bug"}}],
        "stop_reason": "tool_use", "usage": {"input_tokens": 3, "output_tokens": 2}
    });
    let mut decoder = AnthropicDecoder::new(MODEL).with_answer_tool("final_answer");
    let mut out = Vec::new();
    let frame = lrg_providers::wire::Frame {
        event: None,
        data: reply.to_string(),
    };
    lrg_providers::wire::Decoder::decode(&mut decoder, &frame, &mut out).unwrap();
    assert_eq!(
        out,
        vec![
            TurnEvent::TextDelta {
                text: r#"{"label":"bug"}"#.into()
            },
            TurnEvent::Usage(Usage::new(3, 2)),
            TurnEvent::End {
                stop: StopReason::EndTurn
            },
        ]
    );
}
