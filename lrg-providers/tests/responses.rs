//! ResponsesChat against fake Responses API servers: realistic semantic event
//! streams, request bodies (snapshotted), reasoning items with their
//! encrypted content round-tripped across tool calls, `previous_response_id`,
//! and the fault matrix (cut streams, bad events, failed responses, 429/500/
//! 401, idle timeout, cancel).
#![allow(clippy::unwrap_used, clippy::expect_used)] // helpers outside #[test] fns may panic: this is a test

use crate::common;

use std::time::Duration;

use common::{bodies, events, turn};
use lrg_providers::responses::{ResponsesChat, ResponsesConfig, ResponsesDecoder, ResponsesHost};
use lrg_providers::transport::TransportConfig;
use lrg_providers::{
    ApiKey, ChatModel, Image, Message, ModelLocation, NativePart, Part, ProviderError, Role,
    StopReason, ToolCall, ToolResult, ToolSpec, TurnEvent, TurnRequest, Usage,
};
use serde_json::{Value, json};
use wiremock::matchers::{header, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

const KEY: &str = "sk-test-responses-0123456789abcdef";

fn timeouts(idle: Duration) -> TransportConfig {
    TransportConfig::new(Duration::from_secs(2), idle)
}

fn config(base: &str, model: &str) -> ResponsesConfig {
    ResponsesConfig::new(ResponsesHost::OPENAI, format!("{base}/v1"), model)
        .with_api_key(ApiKey::new(KEY))
        .with_transport(timeouts(Duration::from_secs(5)))
}

fn model(base: &str, name: &str) -> ResponsesChat {
    ResponsesChat::new(config(base, name)).unwrap()
}

/// A `text/event-stream` body: each event with its `event:` line, as OpenAI
/// sends them, numbered.
fn sse(events: &[Value]) -> String {
    events
        .iter()
        .enumerate()
        .map(|(n, e)| {
            let mut e = e.clone();
            e["sequence_number"] = json!(n);
            format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap())
        })
        .collect()
}

fn stream_ok(body: String) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_raw(body, "text/event-stream")
}

async fn mount(server: &MockServer, response: ResponseTemplate) {
    Mock::given(method("POST"))
        .and(path("/v1/responses"))
        .respond_with(response)
        .mount(server)
        .await;
}

fn created(id: &str) -> Value {
    json!({"type": "response.created", "response": {"id": id, "object": "response", "status": "in_progress", "output": [], "usage": null}})
}

fn text_delta(item: &str, delta: &str) -> Value {
    json!({"type": "response.output_text.delta", "item_id": item, "output_index": 0, "content_index": 0, "delta": delta, "logprobs": []})
}

fn message_done(item: &str, text: &str) -> Value {
    json!({"type": "response.output_item.done", "output_index": 0, "item": {
        "id": item, "type": "message", "status": "completed", "role": "assistant",
        "content": [{"type": "output_text", "annotations": [], "text": text}]}})
}

/// A reasoning item streamed as its summary deltas, then done with its
/// encrypted content.
fn reasoning(item: &str, summary: &[&str], encrypted: &str) -> Vec<Value> {
    let mut events = vec![
        json!({"type": "response.output_item.added", "output_index": 0,
        "item": {"id": item, "type": "reasoning", "summary": []}}),
    ];
    for (i, part) in summary.iter().enumerate() {
        events.push(json!({"type": "response.reasoning_summary_part.added", "item_id": item, "output_index": 0, "summary_index": i, "part": {"type": "summary_text", "text": ""}}));
        for word in part.split_inclusive(' ') {
            events.push(json!({"type": "response.reasoning_summary_text.delta", "item_id": item, "output_index": 0, "summary_index": i, "delta": word}));
        }
        events.push(json!({"type": "response.reasoning_summary_text.done", "item_id": item, "output_index": 0, "summary_index": i, "text": part}));
    }
    let summary: Vec<Value> = summary
        .iter()
        .map(|t| json!({"type": "summary_text", "text": t}))
        .collect();
    events.push(
        json!({"type": "response.output_item.done", "output_index": 0, "item": {
        "id": item, "type": "reasoning", "summary": summary, "encrypted_content": encrypted}}),
    );
    events
}

/// A function call streamed as argument deltas, then done.
fn function_call(item: &str, call_id: &str, name: &str, arguments: &str) -> Vec<Value> {
    let mut events = vec![
        json!({"type": "response.output_item.added", "output_index": 1, "item": {
        "id": item, "type": "function_call", "status": "in_progress", "arguments": "", "call_id": call_id, "name": name}}),
    ];
    let mid = arguments.len() / 2;
    for delta in [&arguments[..mid], &arguments[mid..]] {
        events.push(json!({"type": "response.function_call_arguments.delta", "item_id": item, "output_index": 1, "delta": delta}));
    }
    events.push(json!({"type": "response.function_call_arguments.done", "item_id": item, "output_index": 1, "arguments": arguments}));
    events.push(json!({"type": "response.output_item.done", "output_index": 1, "item": {
        "id": item, "type": "function_call", "status": "completed", "arguments": arguments, "call_id": call_id, "name": name}}));
    events
}

fn completed(id: &str, input: u32, cached: u32, output: u32, reasoning: u32) -> Value {
    json!({"type": "response.completed", "response": {"id": id, "object": "response", "status": "completed",
        "incomplete_details": null, "output": [],
        "usage": {"input_tokens": input, "input_tokens_details": {"cached_tokens": cached},
                  "output_tokens": output, "output_tokens_details": {"reasoning_tokens": reasoning},
                  "total_tokens": input + output}}})
}

fn ask(text: &str) -> TurnRequest {
    common::ask(text).temperature(0.7)
}

/// `request` with `messages` as its conversation.
fn with_messages(
    mut request: TurnRequest,
    messages: impl Into<lrg_providers::Messages>,
) -> TurnRequest {
    request.messages = messages.into();
    request
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

fn text_stream(id: &str, words: &[&str]) -> String {
    let mut events = vec![created(id)];
    events.extend(words.iter().map(|w| text_delta("msg_1", w)));
    events.push(message_done("msg_1", &words.concat()));
    events.push(completed(id, 21, 0, 4, 0));
    sse(&events)
}

#[tokio::test]
async fn plain_text_with_usage() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/responses"))
        .and(header("authorization", format!("Bearer {KEY}").as_str()))
        .respond_with(stream_ok(text_stream("resp_1", &["Hello", ", world"])))
        .mount(&server)
        .await;
    let model = model(&server.uri(), "gpt-4.1");
    let got = turn(&model, ask("Say hello")).await.unwrap();
    assert_eq!(got.text(), "Hello, world");
    // Reported as zero, which is not the same as unreported.
    assert_eq!(
        got.usage,
        Some(
            Usage::new(21, 4)
                .with_cached_prompt_tokens(0)
                .with_reasoning_tokens(0)
        )
    );
    assert_eq!(got.stop, Some(StopReason::EndTurn));
    assert_eq!(
        got.parts,
        vec![Part::text("Hello, world")],
        "no native part without reasoning"
    );
    // Not a reasoning model: a temperature, no reasoning settings.
    insta::assert_json_snapshot!("plain_text_request", bodies(&server).await[0]);

    let info = model.info();
    assert_eq!(
        (info.provider.as_str(), info.location),
        ("openai-responses", ModelLocation::Cloud)
    );
    assert_eq!(info.sends_to, None, "the fake server is on this machine");
}

/// The stream of a reasoning model's first turn: reasoning, then two calls.
fn two_calls_stream() -> String {
    let mut events = vec![created("resp_1")];
    events.extend(reasoning(
        "rs_1",
        &["Need weather and time.", "Call both."],
        "ENC-ONE",
    ));
    events.extend(function_call(
        "fc_1",
        "call_w",
        "get_weather",
        r#"{"city":"Paris"}"#,
    ));
    events.extend(function_call(
        "fc_2",
        "call_t",
        "get_time",
        r#"{"tz":"Europe/Paris"}"#,
    ));
    events.push(completed("resp_1", 80, 64, 30, 18));
    sse(&events)
}

#[tokio::test]
async fn reasoning_summary_and_two_calls_in_one_turn() {
    let server = MockServer::start().await;
    mount(&server, stream_ok(two_calls_stream())).await;
    let request = ask("Weather and time in Paris?").tools(vec![weather_tool(), time_tool()]);
    let all: Vec<TurnEvent> = events(&model(&server.uri(), "o4-mini"), request)
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    let reasoning: String = all
        .iter()
        .filter_map(|e| match e {
            TurnEvent::ReasoningDelta { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(reasoning, "Need weather and time.\n\nCall both.");
    // Each call streams before it comes whole, its fragments as sent.
    assert_eq!(
        common::call_deltas(&all, 0),
        (
            Some(("call_w".into(), "get_weather".into())),
            r#"{"city":"Paris"}"#.into()
        )
    );
    assert_eq!(
        common::call_deltas(&all, 1),
        (
            Some(("call_t".into(), "get_time".into())),
            r#"{"tz":"Europe/Paris"}"#.into()
        )
    );
    let rest: Vec<&TurnEvent> = all
        .iter()
        .filter(|e| {
            !matches!(
                e,
                TurnEvent::ReasoningDelta { .. } | TurnEvent::ToolCallDelta { .. }
            )
        })
        .collect();
    assert_eq!(
        rest,
        [
            &TurnEvent::Native(NativePart {
                provider: "openai-responses".into(),
                model: "o4-mini".into(),
                value: json!({"id": "rs_1", "type": "reasoning", "summary": [
                    {"type": "summary_text", "text": "Need weather and time."},
                    {"type": "summary_text", "text": "Call both."}], "encrypted_content": "ENC-ONE"}),
            }),
            &TurnEvent::ToolCall(ToolCall {
                id: "call_w".into(),
                name: "get_weather".into(),
                arguments: json!({"city": "Paris"})
            }),
            &TurnEvent::ToolCall(ToolCall {
                id: "call_t".into(),
                name: "get_time".into(),
                arguments: json!({"tz": "Europe/Paris"})
            }),
            // The cached part of the input, the reasoning part of the output.
            &TurnEvent::Usage(
                Usage::new(80, 30)
                    .with_cached_prompt_tokens(64)
                    .with_reasoning_tokens(18)
            ),
            &TurnEvent::End {
                stop: StopReason::ToolCalls
            },
        ]
    );
    // A reasoning model: no temperature, store off, encrypted reasoning asked for.
    insta::assert_json_snapshot!("reasoning_tools_request", bodies(&server).await[0]);
}

/// Two turns with tool calls, then the answer: each turn's reasoning item
/// goes back unchanged (encrypted content included, server id left out)
/// before its calls, results pair with their calls, an image result goes as
/// an input image, and another provider's native part stays out.
#[tokio::test]
async fn reasoning_items_round_trip_across_two_tool_turns() {
    let server = MockServer::start().await;
    let model = model(&server.uri(), "o4-mini");
    let tools = vec![weather_tool(), time_tool()];
    common::mount_checked(
        &server,
        "/v1/responses",
        common::Invariants::new(common::Api::Responses, Some(KEY)),
        stream_ok(two_calls_stream()),
        1,
    )
    .await;
    let first = ask("Weather and time in Paris, then Rome's weather?").tools(tools.clone());
    let answer = turn(&model, first.clone()).await.unwrap();
    let calls: Vec<ToolCall> = answer.tool_calls().into_iter().cloned().collect();
    let mut history = first.messages.clone();
    let mut assistant = answer.into_message();
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

    // Second turn: more reasoning and one more call.
    server.verify().await;
    server.reset().await;
    let mut events = vec![created("resp_2")];
    events.extend(reasoning("rs_2", &["Now Rome."], "ENC-TWO"));
    events.extend(function_call(
        "fc_3",
        "call_r",
        "get_weather",
        r#"{"city":"Rome"}"#,
    ));
    events.push(completed("resp_2", 120, 80, 20, 10));
    common::mount_checked(
        &server,
        "/v1/responses",
        common::Invariants::new(common::Api::Responses, Some(KEY)),
        stream_ok(sse(&events)),
        1,
    )
    .await;
    let second = with_messages(first.clone(), history);
    let answer = turn(&model, second.clone()).await.unwrap();
    assert_eq!(answer.tool_calls()[0].id, "call_r");
    let body = bodies(&server).await.remove(0);
    assert!(
        !body.to_string().contains("signature"),
        "a foreign native part was sent"
    );
    insta::assert_json_snapshot!("second_turn_request", body);

    let mut history = second.messages;
    history.push(answer.into_message());
    history.push(Message::tool_results([ToolResult::text(
        &ToolCall {
            id: "call_r".into(),
            name: "get_weather".into(),
            arguments: json!({"city": "Rome"}),
        },
        "22°C, sunny",
        false,
    )]));

    // Third turn: the answer.
    server.verify().await;
    server.reset().await;
    common::mount_checked(
        &server,
        "/v1/responses",
        common::Invariants::new(common::Api::Responses, Some(KEY)),
        stream_ok(text_stream("resp_3", &["Paris 18°C; ", "Rome 22°C."])),
        1,
    )
    .await;
    let third = with_messages(first, history);
    assert_eq!(
        turn(&model, third).await.unwrap().text(),
        "Paris 18°C; Rome 22°C."
    );
    let body = bodies(&server).await.remove(0);
    let types: Vec<&str> = body["input"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["type"].as_str().or(i["role"].as_str()).unwrap())
        .collect();
    assert_eq!(
        types,
        [
            "user",
            "reasoning",
            "function_call",
            "function_call",
            "function_call_output",
            "function_call_output",
            "reasoning",
            "function_call",
            "function_call_output"
        ]
    );
    let encrypted: Vec<&str> = body["input"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|i| i["encrypted_content"].as_str())
        .collect();
    assert_eq!(encrypted, ["ENC-ONE", "ENC-TWO"]);
    assert!(
        !body.to_string().contains("\"rs_1\""),
        "no server ids without store"
    );
    server.verify().await;
}

#[tokio::test]
async fn previous_response_id_sends_only_the_new_tail() {
    let server = MockServer::start().await;
    mount(&server, stream_ok(two_calls_stream())).await;
    let model =
        ResponsesChat::new(config(&server.uri(), "o4-mini").with_previous_response_id(true))
            .unwrap();
    let first = ask("Weather and time in Paris?").tools(vec![weather_tool(), time_tool()]);
    let answer = turn(&model, first.clone()).await.unwrap();
    assert!(
        answer
            .parts
            .iter()
            .any(|p| matches!(p, Part::Native(n) if n.value["id"] == "resp_1")),
        "{answer:?}"
    );
    let calls: Vec<ToolCall> = answer.tool_calls().into_iter().cloned().collect();
    let mut history = first.messages.clone();
    history.push(answer.into_message());
    history.push(Message::tool_results(
        calls.iter().map(|c| ToolResult::text(c, "ok", false)),
    ));
    server.reset().await;
    mount(&server, stream_ok(text_stream("resp_2", &["Done."]))).await;
    turn(&model, with_messages(first, history)).await.unwrap();
    let body = bodies(&server).await.remove(0);
    assert_eq!(body["previous_response_id"], "resp_1");
    assert_eq!(body["store"], true);
    assert!(body.get("include").is_none(), "{body}");
    insta::assert_json_snapshot!("previous_response_id_request", body["input"]);
}

#[tokio::test]
async fn out_of_output_tokens_is_max_tokens() {
    let server = MockServer::start().await;
    let body = sse(&[
        created("resp_1"),
        text_delta("msg_1", "Once upon"),
        json!({"type": "response.incomplete", "response": {"id": "resp_1", "status": "incomplete",
            "incomplete_details": {"reason": "max_output_tokens"}, "output": [],
            "usage": {"input_tokens": 9, "output_tokens": 16}}}),
    ]);
    mount(&server, stream_ok(body)).await;
    let got = turn(&model(&server.uri(), "gpt-4.1"), ask("story"))
        .await
        .unwrap();
    assert_eq!(got.text(), "Once upon");
    assert_eq!(got.stop, Some(StopReason::MaxTokens));
}

#[tokio::test]
async fn xai_host_speaks_the_same_api() {
    let server = MockServer::start().await;
    let mut events = vec![created("resp_x")];
    events.push(
        json!({"type": "response.output_item.done", "output_index": 0, "item": {
        "id": "rs_x", "type": "reasoning", "summary": [], "encrypted_content": "GROK-ENC"}}),
    );
    events.push(text_delta("msg_1", "Hi"));
    events.push(completed("resp_x", 3, 0, 5, 4));
    mount(&server, stream_ok(sse(&events))).await;
    let config = ResponsesConfig::new(ResponsesHost::XAI, format!("{}/v1", server.uri()), "grok-4")
        .with_api_key(ApiKey::new(KEY));
    let model = ResponsesChat::new(config).unwrap();
    let got = turn(&model, ask("hi")).await.unwrap();
    assert_eq!(got.text(), "Hi");
    assert!(
        matches!(&got.parts[0], Part::Native(n) if n.provider == "xai" && n.value["encrypted_content"] == "GROK-ENC")
    );
    let body = bodies(&server).await.remove(0);
    assert_eq!(body["include"], json!(["reasoning.encrypted_content"]));
    assert!(
        body.get("reasoning").is_none(),
        "Grok has no summary: {body}"
    );
    assert!(body.get("temperature").is_none(), "grok-4 reasons: {body}");
    assert_eq!(model.info().provider, "xai");
}

#[test]
fn missing_keys_name_the_env_var() {
    for (host, var) in [
        (ResponsesHost::OPENAI, "OPENAI_API_KEY"),
        (ResponsesHost::XAI, "XAI_API_KEY"),
    ] {
        let err = ResponsesChat::new(ResponsesConfig::new(host, "https://h/v1", "m")).unwrap_err();
        assert!(
            matches!(err, ProviderError::Config { .. }) && err.to_string().contains(var),
            "{err}"
        );
    }
}

#[test]
fn any_chunking_decodes_the_same() {
    common::assert_any_chunking_decodes_the_same(&two_calls_stream(), || {
        ResponsesDecoder::new("openai-responses", "o4-mini", false, &[])
    });
}

#[tokio::test]
async fn stream_cut_mid_event_is_transient() {
    let server = MockServer::start().await;
    let body = format!(
        "{}data: {{\"type\":\"response.output_text.delta\",\"delta\":\"wor",
        sse(&[created("resp_1"), text_delta("msg_1", "Hello")])
    );
    mount(&server, stream_ok(body)).await;
    let all = events(&model(&server.uri(), "gpt-4.1"), ask("hi")).await;
    assert_eq!(
        all[0],
        Ok(TurnEvent::TextDelta {
            text: "Hello".into()
        })
    );
    let err = all.last().unwrap().clone().unwrap_err();
    assert!(err.is_transient(), "{err:?}");

    // Whole events, but the stream stops before response.completed.
    server.reset().await;
    mount(
        &server,
        stream_ok(sse(&[created("resp_1"), text_delta("msg_1", "Hel")])),
    )
    .await;
    let err = turn(&model(&server.uri(), "gpt-4.1"), ask("hi"))
        .await
        .unwrap_err();
    assert!(
        err.is_transient() && err.to_string().contains("ended before"),
        "{err}"
    );
}

#[tokio::test]
async fn malformed_event_is_a_protocol_error() {
    let server = MockServer::start().await;
    mount(
        &server,
        stream_ok("event: response.output_text.delta\ndata: {\"type\": oops}\n\n".to_string()),
    )
    .await;
    let err = turn(&model(&server.uri(), "gpt-4.1"), ask("hi"))
        .await
        .unwrap_err();
    assert!(matches!(err, ProviderError::Protocol { .. }), "{err:?}");
    assert!(
        err.to_string().contains("oops"),
        "the frame is quoted: {err}"
    );
}

#[tokio::test]
async fn failed_responses_and_error_events_by_code() {
    let failed = |code: &str, message: &str| {
        sse(&[
            created("resp_1"),
            json!({"type": "response.failed", "response": {"id": "resp_1", "status": "failed",
                "error": {"code": code, "message": message}, "output": []}}),
        ])
    };
    let server = MockServer::start().await;
    let model = model(&server.uri(), "o4-mini");
    mount(
        &server,
        stream_ok(failed(
            "context_length_exceeded",
            "Your input exceeds the context window of this model.",
        )),
    )
    .await;
    let err = turn(&model, ask("hi")).await.unwrap_err();
    assert!(
        matches!(err, ProviderError::ContextOverflow { .. }) && !err.is_transient(),
        "an overflow is never retried: {err:?}"
    );

    server.reset().await;
    mount(
        &server,
        stream_ok(failed(
            "rate_limit_exceeded",
            "Rate limit reached for o4-mini. Please try again in 1.5s.",
        )),
    )
    .await;
    let err = turn(&model, ask("hi")).await.unwrap_err();
    assert!(err.is_transient(), "{err:?}");
    assert_eq!(err.retry_after(), Some(Duration::from_millis(1_500)));

    server.reset().await;
    mount(
        &server,
        stream_ok(sse(&[
            created("resp_1"),
            json!({"type": "error", "code": "server_error", "message": "The server had an error", "param": null}),
        ])),
    )
    .await;
    let err = turn(&model, ask("hi")).await.unwrap_err();
    assert!(
        err.is_transient() && err.to_string().contains("The server had an error"),
        "{err}"
    );
}

#[tokio::test]
async fn rate_limited_with_retry_after_then_success() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/responses"))
        .respond_with(
            ResponseTemplate::new(429)
                .insert_header("retry-after", "7")
                .set_body_json(json!({"error": {"message": "Rate limit reached for o4-mini", "type": "requests", "code": "rate_limit_exceeded"}})),
        )
        .up_to_n_times(1)
        .mount(&server)
        .await;
    mount(&server, stream_ok(text_stream("resp_1", &["ok"]))).await;
    let model = model(&server.uri(), "o4-mini");
    let err = turn(&model, ask("hi")).await.unwrap_err();
    assert!(err.is_transient(), "{err:?}");
    assert_eq!(err.retry_after(), Some(Duration::from_secs(7)));
    assert_eq!(turn(&model, ask("hi")).await.unwrap().text(), "ok");
}

#[tokio::test]
async fn server_error_then_success() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/responses"))
        .respond_with(ResponseTemplate::new(502).set_body_string("bad gateway"))
        .up_to_n_times(1)
        .mount(&server)
        .await;
    mount(&server, stream_ok(text_stream("resp_1", &["ok"]))).await;
    let model = model(&server.uri(), "gpt-4.1");
    let err = turn(&model, ask("hi")).await.unwrap_err();
    assert!(
        err.is_transient() && err.to_string().contains("bad gateway"),
        "{err}"
    );
    assert_eq!(turn(&model, ask("hi")).await.unwrap().text(), "ok");
}

#[tokio::test]
async fn unauthorized_and_overflow_are_fatal_and_never_show_the_key() {
    let server = MockServer::start().await;
    mount(
        &server,
        ResponseTemplate::new(401).set_body_json(json!({"error": {"message": format!("Incorrect API key provided: {KEY}."), "type": "invalid_request_error", "code": "invalid_api_key"}})),
    )
    .await;
    let err = turn(&model(&server.uri(), "gpt-4.1"), ask("hi"))
        .await
        .unwrap_err();
    assert!(matches!(err, ProviderError::Auth { .. }), "{err:?}");
    let text = format!("{err} {err:?}");
    assert!(
        text.contains("Incorrect API key provided") && !text.contains(KEY),
        "{text}"
    );

    server.reset().await;
    mount(
        &server,
        ResponseTemplate::new(400).set_body_json(json!({"error": {"message": "Your input exceeds the context window of this model.", "type": "invalid_request_error", "code": "context_length_exceeded"}})),
    )
    .await;
    let err = turn(&model(&server.uri(), "gpt-4.1"), ask("hi"))
        .await
        .unwrap_err();
    assert!(
        matches!(err, ProviderError::ContextOverflow { .. }),
        "{err:?}"
    );
}

#[tokio::test]
async fn idle_timeout_before_and_during_the_answer() {
    let server = MockServer::start().await;
    mount(
        &server,
        stream_ok(text_stream("resp_1", &["late"])).set_delay(Duration::from_secs(3)),
    )
    .await;
    let slow =
        config(&server.uri(), "gpt-4.1").with_transport(timeouts(Duration::from_millis(300)));
    let err = turn(&ResponsesChat::new(slow).unwrap(), ask("hi"))
        .await
        .unwrap_err();
    assert!(err.is_transient(), "{err:?}");

    let base = common::stalling_server(
        "text/event-stream",
        sse(&[created("resp_1"), text_delta("msg_1", "Hel")]),
    )
    .await;
    let stalled = config(&base, "gpt-4.1").with_transport(timeouts(Duration::from_millis(300)));
    let all = events(&ResponsesChat::new(stalled).unwrap(), ask("hi")).await;
    assert_eq!(all[0], Ok(TurnEvent::TextDelta { text: "Hel".into() }));
    let err = all[1].clone().unwrap_err();
    assert!(
        err.is_transient() && err.to_string().contains("silent"),
        "{err}"
    );
}

#[tokio::test]
async fn cancel_mid_stream_ends_at_once() {
    let base = common::stalling_server(
        "text/event-stream",
        sse(&[created("resp_1"), text_delta("msg_1", "Hel")]),
    )
    .await;
    let config = config(&base, "gpt-4.1").with_transport(timeouts(Duration::from_secs(30)));
    let model = ResponsesChat::new(config).unwrap();
    common::assert_cancel_ends_at_once(&model, ask("hi"), "Hel").await;
}

#[tokio::test]
async fn model_list() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/v1/models"))
        .and(header("authorization", format!("Bearer {KEY}").as_str()))
        .respond_with(
            ResponseTemplate::new(200).set_body_json(json!({"object": "list", "data": [
            {"id": "o4-mini", "object": "model", "created": 2, "owned_by": "system"}]})),
        )
        .mount(&server)
        .await;
    let listed = model(&server.uri(), "o4-mini").list_models().await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(
        (
            listed[0].provider.as_str(),
            listed[0].model.as_str(),
            listed[0].location
        ),
        ("openai-responses", "o4-mini", ModelLocation::Cloud)
    );
}

#[tokio::test]
async fn unpaired_history_is_repaired() {
    let server = MockServer::start().await;
    mount(&server, stream_ok(text_stream("resp_1", &["ok"]))).await;
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
    let request = TurnRequest::new(messages);
    turn(&model(&server.uri(), "gpt-4.1"), request)
        .await
        .unwrap();
    let body = bodies(&server).await.remove(0);
    insta::assert_json_snapshot!("repaired_history_request", body["input"]);
}

#[tokio::test]
async fn an_overflow_is_never_retried() {
    let server = MockServer::start().await;
    let response = ResponseTemplate::new(400).set_body_json(json!({"error": {
        "message": "Your input exceeds the context window of this model. Please adjust your input and try again.",
        "type": "invalid_request_error", "code": "context_length_exceeded"}}));
    common::assert_overflow_not_retried(
        &model(&server.uri(), "o4-mini"),
        &server,
        "/v1/responses",
        response,
    )
    .await;
}

#[tokio::test]
async fn a_typed_answer_carries_the_strict_schema_in_text_format() {
    use lrg_providers::typed::OutputMode;
    let server = MockServer::start().await;
    let answer = r#"{"label":"bug","priority":2,"note":null}"#;
    mount(
        &server,
        stream_ok(sse(&[
            created("resp_1"),
            text_delta("msg_1", answer),
            message_done("msg_1", answer),
            completed("resp_1", 30, 0, 9, 0),
        ])),
    )
    .await;
    let chat = model(&server.uri(), "gpt-4.1");
    assert_eq!(chat.info().output_mode, OutputMode::NativeStrict);
    let typed = ask("Triage: it crashes").output(common::triage_schema());
    let got = turn(&chat, typed.clone()).await.unwrap();
    assert_eq!(got.text(), answer);
    turn(&chat, typed.tools(vec![weather_tool()]))
        .await
        .unwrap();
    let sent = bodies(&server).await;
    for body in &sent {
        let format = &body["text"]["format"];
        assert_eq!(format["type"], "json_schema");
        assert_eq!(format["name"], "triage");
        assert_eq!(format["strict"], true);
        assert_eq!(format["schema"]["additionalProperties"], false);
    }
    insta::assert_json_snapshot!("typed_request", sent[0]);
    insta::assert_json_snapshot!("typed_with_tools_request", sent[1]);
}
