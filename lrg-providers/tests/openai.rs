//! OpenAiChat against fake Chat Completions servers: realistic streams,
//! request bodies (snapshotted) per dialect, tool calls across two turns, and
//! faults (cut streams, bad frames, 429/500/401, idle timeout, cancel), and a
//! check that the key never shows up where it should not.
#![allow(clippy::unwrap_used, clippy::expect_used)] // helpers outside #[test] fns may panic: this is a test

use crate::common;

use std::time::Duration;

use common::{bodies, events, turn};
use lrg_providers::openai::{Dialect, OpenAiChat, OpenAiConfig};
use lrg_providers::transport::TransportConfig;
use lrg_providers::typed::OutputMode;
use lrg_providers::{
    ApiKey, ChatModel, Image, Message, ModelLocation, NativePart, Part, ProviderError, Role,
    StopReason, ToolCall, ToolResult, ToolSpec, TurnEvent, TurnRequest, Usage,
};
use serde_json::{Value, json};
use wiremock::matchers::{header, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

const KEY: &str = "sk-test-openai-0123456789abcdef";

fn timeouts(idle: Duration) -> TransportConfig {
    TransportConfig::new(Duration::from_secs(2), idle)
}

fn openai(base: &str) -> OpenAiChat {
    let config = OpenAiConfig::new(Dialect::OPENAI, format!("{base}/v1"), "gpt-4.1")
        .with_api_key(ApiKey::new(KEY))
        .with_transport(timeouts(Duration::from_secs(5)));
    OpenAiChat::new(config).unwrap()
}

fn server_model(dialect: Dialect, base: &str) -> OpenAiChat {
    let config = OpenAiConfig::new(dialect, format!("{base}/v1"), "qwen3-8b")
        .with_temperature(0.2)
        .with_transport(timeouts(Duration::from_secs(5)));
    OpenAiChat::new(config).unwrap()
}

/// A `text/event-stream` body: one `data:` event per chunk, then `[DONE]`.
fn sse(chunks: &[Value]) -> String {
    let mut body: String = chunks.iter().map(|c| format!("data: {c}\n\n")).collect();
    body.push_str("data: [DONE]\n\n");
    body
}

fn chunk(delta: Value) -> Value {
    json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4.1",
           "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": null}]})
}

fn finish(reason: &str) -> Value {
    json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4.1",
           "choices": [{"index": 0, "delta": {}, "logprobs": null, "finish_reason": reason}]})
}

fn usage(prompt: u32, completion: u32) -> Value {
    json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4.1", "choices": [],
           "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}})
}

fn stream_ok(body: String) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_raw(body, "text/event-stream")
}

async fn mount(server: &MockServer, response: ResponseTemplate) {
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .and(common::Invariants {
            api: common::Api::OpenAi,
            key: Some(KEY),
        })
        .respond_with(response)
        .mount(server)
        .await;
}

fn ask(text: &str) -> TurnRequest {
    TurnRequest::new(vec![Message::user(text)])
        .system("You are terse.")
        .temperature(0.7)
}

fn png(tag: u8) -> Image {
    Image {
        mime: "image/png".into(),
        data: vec![0x89, b'P', b'N', b'G', tag].into(),
    }
}

fn weather_tool() -> ToolSpec {
    ToolSpec {
        name: "get_weather".into(),
        description: "Current weather for a city".into(),
        input_schema: json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
        annotations: Default::default(),
        output_schema: None,
    }
}

fn time_tool() -> ToolSpec {
    ToolSpec {
        name: "get_time".into(),
        description: String::new(),
        input_schema: json!({"type": "object", "properties": {"tz": {"type": "string"}}}),
        annotations: Default::default(),
        output_schema: None,
    }
}

#[tokio::test]
async fn openai_plain_text_with_usage() {
    let server = MockServer::start().await;
    let body = sse(&[
        chunk(json!({"role": "assistant", "content": ""})),
        chunk(json!({"content": "Hello"})),
        chunk(json!({"content": ", world"})),
        finish("stop"),
        usage(21, 4),
    ]);
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .and(header("authorization", format!("Bearer {KEY}").as_str()))
        .respond_with(stream_ok(body))
        .mount(&server)
        .await;
    let model = openai(&server.uri());
    let got = turn(&model, ask("Say hello")).await.unwrap();
    assert_eq!(got.text(), "Hello, world");
    assert_eq!(got.usage, Some(Usage::new(21, 4)));
    assert_eq!(got.stop, Some(StopReason::EndTurn));
    // OpenAI: max_completion_tokens, the cloud budget, and the temperature
    // (gpt-4.1 is no reasoning model).
    insta::assert_json_snapshot!("openai_plain_text_request", bodies(&server).await[0]);

    let info = model.info();
    assert_eq!(
        (info.provider.as_str(), info.location),
        ("openai", ModelLocation::Cloud)
    );
    assert_eq!(info.sends_to, None, "the fake server is on this machine");
}

#[tokio::test]
async fn server_dialects_send_max_tokens_and_temperature() {
    for (name, dialect) in [
        ("lmstudio", Dialect::LMSTUDIO),
        ("vllm", Dialect::VLLM),
        ("llama_cpp", Dialect::LLAMA_CPP),
    ] {
        let server = MockServer::start().await;
        mount(
            &server,
            stream_ok(sse(&[chunk(json!({"content": "ok"})), finish("stop")])),
        )
        .await;
        let model = server_model(dialect, &server.uri());
        let mut request = ask("hi");
        request.settings.temperature = None; // the config's 0.2 applies
        turn(&model, request).await.unwrap();
        let body = bodies(&server).await.remove(0);
        assert_eq!(body["max_tokens"], 2048, "{name}");
        assert_eq!(
            body["temperature"].as_f64().map(|t| (t * 10.0).round()),
            Some(2.0),
            "{name}"
        );
        assert!(body.get("max_completion_tokens").is_none(), "{name}");
        let request = server.received_requests().await.unwrap().remove(0);
        assert!(
            request.headers.get("authorization").is_none(),
            "{name}: no key configured, none sent"
        );
        assert_eq!(model.info().location, ModelLocation::Server);
    }
    let server = MockServer::start().await;
    mount(
        &server,
        stream_ok(sse(&[chunk(json!({"content": "ok"})), finish("stop")])),
    )
    .await;
    let model = server_model(Dialect::LMSTUDIO, &server.uri());
    turn(&model, ask("hi").max_tokens(300)).await.unwrap();
    insta::assert_json_snapshot!("lmstudio_request", bodies(&server).await[0]);
}

#[tokio::test]
async fn reasoning_then_text() {
    let server = MockServer::start().await;
    mount(
        &server,
        stream_ok(sse(&[
            chunk(json!({"role": "assistant", "content": null, "reasoning_content": "The user"})),
            chunk(json!({"reasoning_content": " wants a greeting."})),
            chunk(json!({"content": "Hi!"})),
            finish("stop"),
            usage(10, 9),
        ])),
    )
    .await;
    let got = turn(&server_model(Dialect::VLLM, &server.uri()), ask("hi"))
        .await
        .unwrap();
    assert_eq!(
        got.parts,
        vec![
            Part::reasoning("The user wants a greeting."),
            Part::text("Hi!")
        ]
    );
}

#[tokio::test]
async fn one_tool_call_streamed_in_fragments() {
    let server = MockServer::start().await;
    mount(
        &server,
        stream_ok(sse(&[
            chunk(json!({"role": "assistant", "content": null, "tool_calls": [
                {"index": 0, "id": "call_Abc123", "type": "function", "function": {"name": "get_weather", "arguments": ""}}]})),
            chunk(json!({"tool_calls": [{"index": 0, "function": {"arguments": "{\"ci"}}]})),
            chunk(json!({"tool_calls": [{"index": 0, "function": {"arguments": "ty\": \"Par"}}]})),
            chunk(json!({"tool_calls": [{"index": 0, "function": {"arguments": "is\"}"}}]})),
            finish("tool_calls"),
            usage(80, 17),
        ])),
    )
    .await;
    let request = ask("Weather in Paris?").tools(vec![weather_tool()]);
    let all = common::ok_events(events(&openai(&server.uri()), request).await);
    // The call streams as it is written: named on its first delta, then its
    // fragments as they came, all before the whole call.
    assert_eq!(
        common::call_deltas(&all, 0),
        (
            Some(("call_Abc123".into(), "get_weather".into())),
            r#"{"city": "Paris"}"#.into()
        )
    );
    assert!(matches!(all[0], TurnEvent::ToolCallDelta { .. }));
    let whole: Vec<TurnEvent> = all
        .into_iter()
        .filter(|e| !matches!(e, TurnEvent::ToolCallDelta { .. }))
        .collect();
    assert_eq!(
        whole,
        vec![
            TurnEvent::ToolCall(ToolCall {
                id: "call_Abc123".into(),
                name: "get_weather".into(),
                arguments: json!({"city": "Paris"})
            }),
            TurnEvent::Usage(Usage::new(80, 17)),
            TurnEvent::End {
                stop: StopReason::ToolCalls
            },
        ]
    );
    insta::assert_json_snapshot!("one_tool_call_request", bodies(&server).await[0]);
}

/// Two turns: the model calls two tools at once; their results (one with an
/// image) go back paired with their calls, the image in a user message after
/// the tool messages, and a foreign model's native part is left out.
#[tokio::test]
async fn several_tool_calls_then_results_go_back_paired() {
    let server = MockServer::start().await;
    let checked = || common::Invariants::new(common::Api::OpenAi, Some(KEY));
    common::mount_checked(
        &server,
        "/v1/chat/completions",
        checked(),
        stream_ok(sse(&[
            chunk(json!({"content": "Checking both."})),
            chunk(json!({"tool_calls": [{"index": 0, "id": "call_w", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":"}}]})),
            chunk(json!({"tool_calls": [{"index": 1, "id": "call_t", "type": "function", "function": {"name": "get_time", "arguments": "{\"tz\":\"Europe/Paris\"}"}}]})),
            chunk(json!({"tool_calls": [{"index": 0, "function": {"arguments": "\"Paris\"}"}}]})),
            finish("tool_calls"),
        ])),
        1,
    )
    .await;
    let model = openai(&server.uri());
    let tools = vec![weather_tool(), time_tool()];
    let first = ask("Weather and time in Paris?").tools(tools.clone());
    let answer = turn(&model, first.clone()).await.unwrap();
    let calls: Vec<ToolCall> = answer.tool_calls().into_iter().cloned().collect();
    assert_eq!(
        calls.iter().map(|c| c.id.as_str()).collect::<Vec<_>>(),
        ["call_w", "call_t"]
    );
    assert_eq!(calls[0].arguments, json!({"city": "Paris"}));

    let mut history = first.messages.clone();
    let mut assistant = answer.into_message();
    // What another provider left in the history must not reach OpenAI.
    assistant.parts.insert(
        0,
        Part::Native(NativePart {
            provider: "anthropic".into(),
            model: "claude-x".into(),
            value: json!({"type": "thinking", "signature": "sig"}),
        }),
    );
    history.push(assistant);
    history.push(Message::tool_results([
        ToolResult {
            call_id: "call_w".into(),
            name: "get_weather".into(),
            parts: vec![Part::text("18°C, clear"), Part::Image(png(1))],
            is_error: false,
        },
        ToolResult::text(&calls[1], "clock unavailable", true),
    ]));
    server.verify().await;
    server.reset().await;
    common::mount_checked(
        &server,
        "/v1/chat/completions",
        checked(),
        stream_ok(sse(&[
            chunk(json!({"content": "18°C and clear."})),
            finish("stop"),
        ])),
        1,
    )
    .await;
    let mut second = first;
    second.messages = history;
    assert_eq!(
        turn(&model, second).await.unwrap().text(),
        "18°C and clear."
    );
    let body = bodies(&server).await.remove(0);
    assert!(
        !body.to_string().contains("signature"),
        "a foreign native part was sent"
    );
    let roles: Vec<&str> = body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(
        roles,
        ["system", "user", "assistant", "tool", "tool", "user"]
    );
    insta::assert_json_snapshot!("second_turn_request", body);
    server.verify().await;
}

/// A history the API would refuse is repaired: a call without a result gets
/// one saying so, a result without its call goes as text; tool schemas are
/// shaped (refs inlined, no top-level oneOf).
#[tokio::test]
async fn unpaired_history_is_repaired_and_schemas_are_portable() {
    let server = MockServer::start().await;
    mount(
        &server,
        stream_ok(sse(&[chunk(json!({"content": "ok"})), finish("stop")])),
    )
    .await;
    let call = |id: &str| ToolCall {
        id: id.into(),
        name: "get_time".into(),
        arguments: json!({}),
    };
    let messages = vec![
        Message::user("time?"),
        Message {
            role: Role::Assistant,
            parts: vec![
                Part::ToolCall(call("call_a")),
                Part::ToolCall(call("call_b")),
            ],
        },
        Message::tool_results([ToolResult::text(&call("call_b"), "12:00", false)]),
        Message::tool_results([ToolResult::text(&call("call_gone"), "11:00", false)]),
        Message::user("and now?"),
    ];
    let tool = ToolSpec {
        name: "touch".into(),
        description: "Touch photos by set or ids".into(),
        input_schema: json!({
            "type": "object",
            "properties": {"set": {"$ref": "#/$defs/set"}, "ids": {"type": "array", "items": {"type": "integer"}}},
            "oneOf": [{"required": ["set"]}, {"required": ["ids"]}],
            "$defs": {"set": {"type": "string", "enum": ["all", "picked"]}}
        }),
        annotations: Default::default(),
        output_schema: None,
    };
    let request = TurnRequest::new(messages).tools(vec![tool]);
    turn(&openai(&server.uri()), request).await.unwrap();
    let body = bodies(&server).await.remove(0);
    let text = body.to_string();
    assert!(!text.contains("$ref") && !text.contains("oneOf"), "{text}");
    insta::assert_json_snapshot!("repaired_history_request", body);
}

#[tokio::test]
async fn openai_keeps_only_the_newest_four_images() {
    let server = MockServer::start().await;
    mount(
        &server,
        stream_ok(sse(&[chunk(json!({"content": "ok"})), finish("stop")])),
    )
    .await;
    let images = |tags: &[u8]| Message {
        role: Role::User,
        parts: tags.iter().map(|t| Part::Image(png(*t))).collect(),
    };
    let request = TurnRequest::new(vec![
        images(&[1, 2, 3]),
        Message::assistant("seen"),
        images(&[4, 5, 6]),
    ]);
    turn(&openai(&server.uri()), request.clone()).await.unwrap();
    let body = bodies(&server).await.remove(0).to_string();
    assert_eq!(body.matches("data:image/png;base64").count(), 4);
    assert_eq!(body.matches("[image omitted]").count(), 2);
    // A server the user runs keeps them all.
    let server = MockServer::start().await;
    mount(
        &server,
        stream_ok(sse(&[chunk(json!({"content": "ok"})), finish("stop")])),
    )
    .await;
    turn(&server_model(Dialect::LMSTUDIO, &server.uri()), request)
        .await
        .unwrap();
    assert_eq!(
        bodies(&server)
            .await
            .remove(0)
            .to_string()
            .matches("data:image/png;base64")
            .count(),
        6
    );
}

#[tokio::test]
async fn stream_cut_mid_event_is_transient() {
    let server = MockServer::start().await;
    let body = format!(
        "data: {}\n\ndata: {{\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"wor",
        chunk(json!({"content": "Hello"}))
    );
    mount(&server, stream_ok(body)).await;
    let all = events(&openai(&server.uri()), ask("hi")).await;
    assert_eq!(
        all[0],
        Ok(TurnEvent::TextDelta {
            text: "Hello".into()
        })
    );
    let err = all.last().unwrap().clone().unwrap_err();
    assert!(err.is_transient(), "{err:?}");

    // Whole events, but the stream stops before finish_reason and [DONE].
    server.reset().await;
    mount(
        &server,
        stream_ok(format!("data: {}\n\n", chunk(json!({"content": "Hel"})))),
    )
    .await;
    let err = turn(&openai(&server.uri()), ask("hi")).await.unwrap_err();
    assert!(
        err.is_transient() && err.to_string().contains("ended before"),
        "{err}"
    );
}

#[tokio::test]
async fn malformed_json_frame_is_a_protocol_error() {
    let server = MockServer::start().await;
    mount(
        &server,
        stream_ok("data: {\"choices\": [oops]}\n\ndata: [DONE]\n\n".to_string()),
    )
    .await;
    let err = turn(&openai(&server.uri()), ask("hi")).await.unwrap_err();
    assert!(matches!(err, ProviderError::Protocol { .. }), "{err:?}");
    assert!(
        err.to_string().contains("oops"),
        "the frame is quoted: {err}"
    );
}

#[tokio::test]
async fn error_inside_the_stream() {
    let server = MockServer::start().await;
    let body = format!(
        "data: {}\n\ndata: {}\n\n",
        chunk(json!({"content": "Hi"})),
        json!({"error": {"message": "error parsing tool call: raw='{\"city\": Par'", "type": "server_error", "code": 500}})
    );
    mount(&server, stream_ok(body)).await;
    let err = turn(&server_model(Dialect::OLLAMA_V1, &server.uri()), ask("hi"))
        .await
        .unwrap_err();
    assert!(
        err.is_transient() && err.to_string().contains("error parsing tool call"),
        "{err}"
    );
}

#[tokio::test]
async fn rate_limited_with_retry_after_then_success() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(
            ResponseTemplate::new(429)
                .insert_header("retry-after", "7")
                .set_body_json(json!({"error": {"message": "Rate limit reached for gpt-4.1", "type": "requests", "code": "rate_limit_exceeded"}})),
        )
        .up_to_n_times(1)
        .mount(&server)
        .await;
    mount(
        &server,
        stream_ok(sse(&[chunk(json!({"content": "ok"})), finish("stop")])),
    )
    .await;
    let model = openai(&server.uri());
    let err = turn(&model, ask("hi")).await.unwrap_err();
    assert!(err.is_transient(), "{err:?}");
    assert_eq!(err.retry_after(), Some(Duration::from_secs(7)));
    assert!(err.to_string().contains("Rate limit reached"), "{err}");
    // The adapter does not retry; the caller's second call succeeds.
    assert_eq!(turn(&model, ask("hi")).await.unwrap().text(), "ok");
}

#[tokio::test]
async fn server_error_then_success() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(ResponseTemplate::new(500).set_body_string("upstream connect error"))
        .up_to_n_times(1)
        .mount(&server)
        .await;
    mount(
        &server,
        stream_ok(sse(&[chunk(json!({"content": "ok"})), finish("stop")])),
    )
    .await;
    let model = openai(&server.uri());
    let err = turn(&model, ask("hi")).await.unwrap_err();
    assert!(
        err.is_transient() && err.to_string().contains("upstream connect error"),
        "{err}"
    );
    assert_eq!(err.retry_after(), None);
    assert_eq!(turn(&model, ask("hi")).await.unwrap().text(), "ok");
}

#[tokio::test]
async fn unauthorized_is_fatal_with_a_clear_message_and_no_key() {
    let server = MockServer::start().await;
    let echo = format!(
        "Incorrect API key provided: {KEY}. You can find your API key at https://platform.openai.com/account/api-keys."
    );
    mount(
        &server,
        ResponseTemplate::new(401).set_body_json(json!({"error": {"message": echo, "type": "invalid_request_error", "code": "invalid_api_key"}})),
    )
    .await;
    let err = turn(&openai(&server.uri()), ask("hi")).await.unwrap_err();
    assert!(matches!(err, ProviderError::Auth { .. }), "{err:?}");
    assert!(!err.is_transient());
    let text = err.to_string();
    assert!(
        text.contains("Incorrect API key provided") && text.contains("401"),
        "{text}"
    );
    assert!(
        !text.contains(KEY) && !format!("{err:?}").contains(KEY),
        "{text}"
    );
}

#[tokio::test]
async fn unknown_model_and_context_overflow_are_fatal() {
    let server = MockServer::start().await;
    mount(
        &server,
        ResponseTemplate::new(404).set_body_json(json!({"error": {"message": "The model `gpt-9` does not exist or you do not have access to it.", "code": "model_not_found"}})),
    )
    .await;
    let err = turn(&openai(&server.uri()), ask("hi")).await.unwrap_err();
    assert!(
        matches!(err, ProviderError::ModelNotFound { .. }),
        "{err:?}"
    );
    server.reset().await;
    mount(
        &server,
        ResponseTemplate::new(400).set_body_json(json!({"error": {"message": "This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens.", "code": "context_length_exceeded"}})),
    )
    .await;
    let err = turn(&openai(&server.uri()), ask("hi")).await.unwrap_err();
    assert!(
        matches!(err, ProviderError::ContextOverflow { .. }),
        "{err:?}"
    );
}

#[tokio::test]
async fn idle_timeout_when_the_server_does_not_answer() {
    let server = MockServer::start().await;
    mount(
        &server,
        stream_ok(sse(&[finish("stop")])).set_delay(Duration::from_secs(3)),
    )
    .await;
    let config = OpenAiConfig::new(Dialect::VLLM, format!("{}/v1", server.uri()), "m")
        .with_transport(timeouts(Duration::from_millis(300)));
    let err = turn(&OpenAiChat::new(config).unwrap(), ask("hi"))
        .await
        .unwrap_err();
    assert!(err.is_transient(), "{err:?}");
}

/// A server that answers with `first` and then goes silent, keeping the
/// connection open: the way a stalled model looks on the wire.
async fn stalling_server(first: String) -> String {
    let base = common::stalling_server("text/event-stream", first).await;
    format!("{base}/v1")
}

#[tokio::test]
async fn idle_timeout_mid_stream() {
    let base = stalling_server(format!("data: {}\n\n", chunk(json!({"content": "Hel"})))).await;
    let config = OpenAiConfig::new(Dialect::LLAMA_CPP, base, "m")
        .with_transport(timeouts(Duration::from_millis(300)));
    let all = events(&OpenAiChat::new(config).unwrap(), ask("hi")).await;
    assert_eq!(all[0], Ok(TurnEvent::TextDelta { text: "Hel".into() }));
    let err = all[1].clone().unwrap_err();
    assert!(
        err.is_transient() && err.to_string().contains("silent"),
        "{err}"
    );
}

#[tokio::test]
async fn cancel_mid_stream_ends_at_once() {
    let base = stalling_server(format!("data: {}\n\n", chunk(json!({"content": "Hel"})))).await;
    let config = OpenAiConfig::new(Dialect::LMSTUDIO, base, "m")
        .with_transport(timeouts(Duration::from_secs(30)));
    let model = OpenAiChat::new(config).unwrap();
    common::assert_cancel_ends_at_once(&model, ask("hi"), "Hel").await;
}

#[tokio::test]
async fn model_list_and_reachability() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/v1/models"))
        .and(header("authorization", format!("Bearer {KEY}").as_str()))
        .respond_with(
            ResponseTemplate::new(200).set_body_json(json!({"object": "list", "data": [
                {"id": "gpt-4.1", "object": "model", "created": 1, "owned_by": "system"},
                {"id": "o4-mini", "object": "model", "created": 2, "owned_by": "system"}
            ]})),
        )
        .mount(&server)
        .await;
    let model = openai(&server.uri());
    let listed = model.list_models().await.unwrap();
    assert_eq!(
        listed.iter().map(|m| m.model.as_str()).collect::<Vec<_>>(),
        ["gpt-4.1", "o4-mini"]
    );
    assert!(
        listed
            .iter()
            .all(|m| m.provider == "openai" && m.location == ModelLocation::Cloud)
    );
    assert!(model.reachable().await);

    // Any HTTP answer counts; nothing listening does not.
    let empty = MockServer::start().await;
    assert!(openai(&empty.uri()).reachable().await);
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    assert!(!openai(&format!("http://{closed}")).reachable().await);
}

#[test]
fn missing_key_names_the_env_var() {
    let err = OpenAiChat::new(OpenAiConfig::new(
        Dialect::OPENAI,
        "https://api.openai.com/v1",
        "gpt-4.1",
    ))
    .unwrap_err();
    assert!(
        matches!(err, ProviderError::Config { .. }) && err.to_string().contains("OPENAI_API_KEY"),
        "{err}"
    );
}

#[tokio::test]
async fn context_overflow_is_never_retried() {
    // In the stream of a 200, with no code: the phrase decides (this one was
    // once retried as a transient mid-answer failure).
    let server = MockServer::start().await;
    let body = format!(
        "data: {}\n\n",
        json!({"error": {"message": "Input is too long for requested model."}})
    );
    common::assert_overflow_not_retried(
        &server_model(Dialect::VLLM, &server.uri()),
        &server,
        "/v1/chat/completions",
        stream_ok(body),
    )
    .await;
    // As an HTTP error with OpenAI's code.
    let server = MockServer::start().await;
    common::assert_overflow_not_retried(
        &openai(&server.uri()),
        &server,
        "/v1/chat/completions",
        ResponseTemplate::new(400).set_body_json(json!({"error": {
            "message": "Your input exceeds the context window of this model.",
            "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}})),
    )
    .await;
}

/// A turn of `model` against a server that answers "ok", and the body sent.
async fn typed_body(model: impl FnOnce(&str) -> OpenAiChat, request: TurnRequest) -> Value {
    let server = MockServer::start().await;
    mount(
        &server,
        stream_ok(sse(&[
            chunk(json!({"content": "{\"label\":\"bug\",\"priority\":2}"})),
            finish("stop"),
        ])),
    )
    .await;
    let got = turn(&model(&server.uri()), request).await.unwrap();
    assert_eq!(got.text(), r#"{"label":"bug","priority":2}"#);
    bodies(&server).await.remove(0)
}

fn typed(text: &str) -> TurnRequest {
    ask(text).output(common::triage_schema())
}

#[tokio::test]
async fn openai_carries_the_schema_in_strict_response_format() {
    let model = openai("http://unused.invalid");
    assert_eq!(model.info().output_mode, OutputMode::NativeStrict);
    let body = typed_body(openai, typed("Triage: it crashes")).await;
    let format = &body["response_format"];
    assert_eq!(format["type"], "json_schema");
    assert_eq!(format["json_schema"]["name"], "triage");
    assert_eq!(format["json_schema"]["strict"], true);
    assert_eq!(
        body["messages"][0]["content"], "You are terse.",
        "no instructions: the API holds the answer to the schema"
    );
    insta::assert_json_snapshot!("openai_typed_request", body);
    // Beside tools too: OpenAI's answer without a call follows the schema.
    let body = typed_body(
        openai,
        typed("Triage: it crashes").tools(vec![weather_tool()]),
    )
    .await;
    assert_eq!(body["response_format"]["json_schema"]["strict"], true);
    insta::assert_json_snapshot!("openai_typed_with_tools_request", body);
}

#[tokio::test]
async fn servers_carry_the_schema_as_their_dialect_says() {
    let lmstudio = |base: &str| server_model(Dialect::LMSTUDIO, base);
    assert_eq!(
        lmstudio("http://x.invalid").info().output_mode,
        OutputMode::Native
    );
    let body = typed_body(lmstudio, typed("Triage: it crashes")).await;
    // The caller's own schema, without strictness.
    assert_eq!(
        body["response_format"]["json_schema"]["schema"]["required"],
        json!(["label", "priority"])
    );
    insta::assert_json_snapshot!("lmstudio_typed_request", body);
    // A grammar over the whole answer would forbid the calls: with tools
    // the schema goes in the instructions.
    let body = typed_body(
        lmstudio,
        typed("Triage: it crashes").tools(vec![weather_tool()]),
    )
    .await;
    assert!(body.get("response_format").is_none(), "{body:#}");
    let system = body["messages"][0]["content"].as_str().unwrap();
    assert!(system.starts_with("You are terse.\n\n"), "{system}");
    assert!(
        system.ends_with(&common::triage_schema().instructions()),
        "{system}"
    );
    insta::assert_json_snapshot!("lmstudio_typed_with_tools_request", body);

    // llama-server: its own `json_schema` field.
    let llama = |base: &str| server_model(Dialect::LLAMA_CPP, base);
    let body = typed_body(llama, typed("Triage: it crashes")).await;
    assert!(body.get("response_format").is_none(), "{body:#}");
    assert_eq!(body["json_schema"]["properties"]["priority"]["maximum"], 5);
    assert!(body["json_schema"].get("$schema").is_none());

    // DeepSeek's JSON mode takes no schema: prompted.
    let deepseek = |base: &str| {
        let config = OpenAiConfig::new(Dialect::DEEPSEEK, format!("{base}/v1"), "deepseek-chat")
            .with_api_key(ApiKey::new(KEY))
            .with_transport(timeouts(Duration::from_secs(5)));
        OpenAiChat::new(config).unwrap()
    };
    assert_eq!(
        deepseek("http://x.invalid").info().output_mode,
        OutputMode::Prompted
    );
    let body = typed_body(deepseek, typed("Triage: it crashes")).await;
    assert!(body.get("response_format").is_none(), "{body:#}");
    assert!(
        body["messages"][0]["content"]
            .as_str()
            .unwrap()
            .contains("JSON Schema of the answer (triage)")
    );
}

#[tokio::test]
async fn tools_as_text_make_the_answer_prompted() {
    use lrg_providers::text_tools::{ToolFormat, ToolMode};
    let text_tools = |base: &str| {
        let config = OpenAiConfig::new(Dialect::VLLM, format!("{base}/v1"), "qwen3-8b")
            .with_tool_mode(ToolMode::Text(ToolFormat::Hermes))
            .with_transport(timeouts(Duration::from_secs(5)));
        OpenAiChat::new(config).unwrap()
    };
    assert_eq!(
        text_tools("http://x.invalid").info().output_mode,
        OutputMode::Prompted
    );
    for request in [typed("Triage"), typed("Triage").tools(vec![weather_tool()])] {
        let body = typed_body(text_tools, request).await;
        assert!(body.get("response_format").is_none(), "{body:#}");
        assert!(
            body["messages"][0]["content"]
                .as_str()
                .unwrap()
                .contains(&common::triage_schema().instructions())
        );
    }
}

/// Matches a request whose JSON body has (or lacks) a top-level field.
struct HasField(&'static str, bool);

impl wiremock::Match for HasField {
    fn matches(&self, request: &wiremock::Request) -> bool {
        let body: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
        body.get(self.0).is_some() == self.1
    }
}

/// A server model of a name no other test uses: what it learns is kept for
/// the whole test process, and another test's fake server may get the same
/// port later.
fn refuser(base: &str) -> OpenAiChat {
    let config = OpenAiConfig::new(Dialect::GENERIC, format!("{base}/v1"), "refuses-schemas")
        .with_transport(timeouts(Duration::from_secs(5)));
    OpenAiChat::new(config).unwrap()
}

#[tokio::test]
async fn a_server_refusing_the_schema_is_asked_once_more_prompted_and_remembered() {
    let server = MockServer::start().await;
    let refused = json!({"error": {"message": "Unsupported response_format type: json_schema",
                                   "type": "invalid_request_error"}});
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .and(HasField("response_format", true))
        .respond_with(ResponseTemplate::new(400).set_body_json(refused))
        .expect(1)
        .mount(&server)
        .await;
    let answer = sse(&[
        chunk(json!({"content": "{\"label\":\"bug\",\"priority\":2}"})),
        finish("stop"),
    ]);
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .and(HasField("response_format", false))
        .and(common::Invariants {
            api: common::Api::OpenAi,
            key: Some(KEY),
        })
        .respond_with(stream_ok(answer))
        .expect(2)
        .mount(&server)
        .await;
    let model = refuser(&server.uri());
    assert_eq!(model.info().output_mode, OutputMode::Native);
    let got = turn(&model, typed("Triage: it crashes")).await.unwrap();
    assert_eq!(got.text(), r#"{"label":"bug","priority":2}"#);
    let sent = bodies(&server).await;
    assert_eq!(sent.len(), 2, "exactly one retry");
    assert!(sent[0].get("response_format").is_some());
    let retry_system = sent[1]["messages"][0]["content"].as_str().unwrap();
    assert!(
        retry_system.starts_with("You are terse.\n\n"),
        "{retry_system}"
    );
    assert!(retry_system.ends_with(&common::triage_schema().instructions()));

    // Learned for the process: prompted at once, by this adapter and by
    // another one for the same server and model.
    assert_eq!(model.info().output_mode, OutputMode::Prompted);
    let again = refuser(&server.uri());
    assert_eq!(again.info().output_mode, OutputMode::Prompted);
    turn(&again, typed("Triage: it hangs")).await.unwrap();
    let sent = bodies(&server).await;
    assert_eq!(sent.len(), 3, "no second refusal");
    assert!(sent[2].get("response_format").is_none());
    assert!(
        sent[2]["messages"][0]["content"]
            .as_str()
            .unwrap()
            .ends_with(&common::triage_schema().instructions())
    );
    // Another model on the same server has not refused anything.
    let config = OpenAiConfig::new(Dialect::GENERIC, format!("{}/v1", server.uri()), "other");
    assert_eq!(
        OpenAiChat::new(config).unwrap().info().output_mode,
        OutputMode::Native
    );
}

#[tokio::test]
async fn a_refusal_that_is_not_about_the_schema_is_not_learned() {
    let server = MockServer::start().await;
    let bad = json!({"error": {"message": "messages: too many images"}});
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(ResponseTemplate::new(400).set_body_json(bad))
        .expect(2)
        .mount(&server)
        .await;
    let model = server_model(Dialect::GENERIC, &server.uri());
    let err = turn(&model, typed("Triage")).await.unwrap_err();
    assert!(matches!(err, ProviderError::BadRequest { .. }), "{err}");
    assert!(err.to_string().contains("too many images"), "{err}");
    // The request without the schema failed the same way: nothing learned.
    assert_eq!(model.info().output_mode, OutputMode::Native);
}
