//! GeminiChat against fake Gemini API servers: realistic streams, request
//! bodies (snapshotted), thought signatures across turns, and faults.
#![allow(clippy::unwrap_used)] // helpers outside #[test] fns may panic: this is a test

use crate::common;

use std::time::Duration;

use common::{LogBuffer, ask, bodies, events, turn};
use lrg_providers::gemini::{GeminiChat, GeminiConfig};
use lrg_providers::transport::TransportConfig;
use lrg_providers::typed::OutputMode;
use lrg_providers::{
    ApiKey, ChatModel, Image, Message, NativePart, Part, ProviderError, Role, StopReason, ToolCall,
    ToolResult, ToolSpec, TurnEvent, TurnRequest, Usage,
};
use serde_json::{Value, json};
use wiremock::matchers::{header, method, path, query_param};
use wiremock::{Mock, MockServer, ResponseTemplate};

const KEY: &str = "AIzaSyTest0123456789abcdefghij";
const MODEL: &str = "gemini-2.5-flash";
const STREAM_PATH: &str = "/v1beta/models/gemini-2.5-flash:streamGenerateContent";

fn config(base: &str) -> GeminiConfig {
    GeminiConfig::new(MODEL, ApiKey::new(KEY))
        .with_base_url(base)
        .with_transport(TransportConfig::new(
            Duration::from_secs(2),
            Duration::from_secs(5),
        ))
}

fn chat(base: &str) -> GeminiChat {
    GeminiChat::new(config(base)).unwrap()
}

/// An SSE body from chunks, as Gemini writes it (`\r\n` line ends).
fn sse(chunks: &[Value]) -> String {
    chunks
        .iter()
        .map(|c| format!("data: {c}\r\n\r\n"))
        .collect()
}

fn chunk(parts: Value) -> Value {
    json!({
        "candidates": [{"content": {"role": "model", "parts": parts}, "index": 0}],
        "usageMetadata": {"promptTokenCount": 12, "totalTokenCount": 12},
        "modelVersion": MODEL,
        "responseId": "r3sp0nse",
    })
}

fn last_chunk(parts: Value, thoughts: u64) -> Value {
    json!({
        "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": 12, "candidatesTokenCount": 9, "thoughtsTokenCount": thoughts, "totalTokenCount": 21 + thoughts},
        "modelVersion": MODEL,
        "responseId": "r3sp0nse",
    })
}

fn text_stream(texts: &[&str]) -> String {
    let (last, rest) = texts.split_last().unwrap();
    let mut chunks: Vec<Value> = rest.iter().map(|t| chunk(json!([{"text": t}]))).collect();
    chunks.push(last_chunk(json!([{"text": last}]), 0));
    sse(&chunks)
}

fn sse_response(body: String) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_raw(body, "text/event-stream")
}

async fn serve(server: &MockServer, body: String) {
    Mock::given(method("POST"))
        .and(path(STREAM_PATH))
        .and(query_param("alt", "sse"))
        .and(header("x-goog-api-key", KEY))
        .and(common::Invariants {
            api: common::Api::Gemini,
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

fn native(value: Value) -> Part {
    Part::Native(NativePart {
        provider: "gemini".into(),
        model: MODEL.into(),
        value,
    })
}

#[tokio::test]
async fn plain_text_streams_with_usage() {
    let server = MockServer::start().await;
    serve(&server, text_stream(&["Hello", ", world."])).await;
    let got: Vec<TurnEvent> = events(&chat(&server.uri()), ask("Say hello"))
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    assert_eq!(
        got,
        vec![
            TurnEvent::TextDelta {
                text: "Hello".into()
            },
            TurnEvent::TextDelta {
                text: ", world.".into()
            },
            // Thoughts reported, as none.
            TurnEvent::Usage(Usage::new(12, 9).with_reasoning_tokens(0)),
            TurnEvent::End {
                stop: StopReason::EndTurn
            },
        ]
    );
    let request = &server.received_requests().await.unwrap()[0];
    assert!(
        !request.url.as_str().contains(KEY),
        "the key goes in a header, never in the URL"
    );
    insta::assert_json_snapshot!("plain_text_request", bodies(&server).await[0]);
}

#[tokio::test]
async fn reasoning_with_text_and_a_trailing_signature() {
    let server = MockServer::start().await;
    let body = sse(&[
        chunk(json!([{"text": "**Greeting** The user says hi.", "thought": true}])),
        chunk(json!([{"text": "Hi"}])),
        chunk(json!([{"text": " there!"}])),
        last_chunk(
            json!([{"text": "", "thoughtSignature": "CiQBVKhc7sig=="}]),
            15,
        ),
    ]);
    serve(&server, body).await;
    let got = turn(&chat(&server.uri()), ask("hi")).await.unwrap();
    assert_eq!(
        got.parts,
        vec![
            Part::reasoning("**Greeting** The user says hi."),
            Part::text("Hi there!"),
            native(json!({"part": {"text": "", "thoughtSignature": "CiQBVKhc7sig=="}})),
        ]
    );
    // `candidatesTokenCount` leaves the thoughts out: they are added back.
    assert_eq!(
        got.usage,
        Some(Usage::new(12, 24).with_reasoning_tokens(15))
    );
    assert_eq!(
        bodies(&server).await[0]["generationConfig"]["thinkingConfig"],
        json!({"includeThoughts": true})
    );
}

#[tokio::test]
async fn one_tool_call_with_its_id_and_signature() {
    let server = MockServer::start().await;
    let body = sse(&[last_chunk(
        json!([{"functionCall": {"id": "fc-7", "name": "read_file", "args": {"path": "src/main.rs"}}, "thoughtSignature": "SIG1"}]),
        20,
    )]);
    serve(&server, body).await;
    let request = ask("show main.rs").tools(vec![tool("read_file")]);
    let all = common::ok_events(events(&chat(&server.uri()), request).await);
    // Gemini sends the call whole: one delta holding all of it, first.
    assert_eq!(
        common::call_deltas(&all, 0),
        (
            Some(("fc-7".into(), "read_file".into())),
            r#"{"path":"src/main.rs"}"#.into()
        )
    );
    assert!(matches!(all[0], TurnEvent::ToolCallDelta { .. }));
    let got = common::fold(&all);
    assert_eq!(
        got.parts,
        vec![
            Part::ToolCall(ToolCall {
                id: "fc-7".into(),
                name: "read_file".into(),
                arguments: json!({"path": "src/main.rs"})
            }),
            native(json!({"thoughtSignature": "SIG1", "on": "functionCall"})),
        ]
    );
    assert_eq!(
        got.stop,
        Some(StopReason::ToolCalls),
        "Gemini says STOP after calls"
    );
    insta::assert_json_snapshot!("one_tool_call_request", bodies(&server).await[0]);
}

#[tokio::test]
async fn several_calls_without_ids_get_stable_distinct_ones() {
    let server = MockServer::start().await;
    let body = sse(&[
        chunk(json!([{"functionCall": {"name": "read_file", "args": {"path": "a"}}}])),
        last_chunk(
            json!([{"functionCall": {"name": "read_file", "args": {"path": "b"}}}, {"functionCall": {"name": "list_dir"}}]),
            0,
        ),
    ]);
    serve(&server, body).await;
    let got = turn(&chat(&server.uri()), ask("go")).await.unwrap();
    let ids: Vec<&str> = got.tool_calls().iter().map(|c| c.id.as_str()).collect();
    assert_eq!(
        ids,
        ["call_r3sp0nse_1", "call_r3sp0nse_2", "call_r3sp0nse_3"]
    );
    assert_eq!(got.tool_calls()[2].arguments, json!({}));
}

/// Turn 1 of the two-turn test, Gemini 3 style: a signed text part, a signed
/// first call, an unsigned parallel call, and a trailing signed empty part.
fn checking_two_files() -> String {
    sse(&[
        chunk(json!([{"text": "Two files.", "thought": true}])),
        chunk(json!([{"text": "Let me check.", "thoughtSignature": "S-text"}])),
        last_chunk(
            json!([
                {"functionCall": {"id": "fc-a", "name": "read_file", "args": {"path": "a.txt"}}, "thoughtSignature": "S-call"},
                {"functionCall": {"id": "fc-b", "name": "read_file", "args": {"path": "b.png"}}},
                {"text": "", "thoughtSignature": "S-end"},
            ]),
            30,
        ),
    ])
}

#[tokio::test]
async fn two_turns_send_signatures_back_on_their_parts_and_pair_every_response() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(STREAM_PATH))
        .and(common::Invariants::new(common::Api::Gemini, Some(KEY)))
        .respond_with(sse_response(checking_two_files()))
        .up_to_n_times(1)
        .with_priority(1)
        .expect(1)
        .mount(&server)
        .await;
    common::mount_checked(
        &server,
        STREAM_PATH,
        common::Invariants::new(common::Api::Gemini, Some(KEY)),
        sse_response(text_stream(&["a.txt says hi; b.png is a dot."])),
        1,
    )
    .await;
    let model = chat(&server.uri());

    let mut request = ask("read a.txt and b.png").tools(vec![tool("read_file")]);
    let first = turn(&model, request.clone()).await.unwrap();
    let calls: Vec<ToolCall> = first.tool_calls().into_iter().cloned().collect();
    assert_eq!(calls.len(), 2);

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
    let model_turn = &sent[1]["contents"][1];
    assert_eq!(model_turn["role"], "model");
    assert_eq!(
        model_turn["parts"],
        json!([
            {"text": "Let me check.", "thoughtSignature": "S-text"},
            {"functionCall": {"id": "fc-a", "name": "read_file", "args": {"path": "a.txt"}}, "thoughtSignature": "S-call"},
            {"functionCall": {"id": "fc-b", "name": "read_file", "args": {"path": "b.png"}}},
            {"text": "", "thoughtSignature": "S-end"},
        ]),
        "every signature on the part it came with; the thought itself is not sent"
    );
    let answers = &sent[1]["contents"][2]["parts"];
    assert_eq!(answers[0]["functionResponse"]["id"], "fc-a");
    assert_eq!(answers[0]["functionResponse"]["name"], "read_file");
    assert_eq!(answers[1]["functionResponse"]["id"], "fc-b");
    assert_eq!(
        answers[1]["functionResponse"]["parts"][0]["inlineData"]["mimeType"],
        "image/png"
    );
    insta::assert_json_snapshot!("second_turn_request", sent[1]);
    server.verify().await;
}

#[tokio::test]
async fn another_models_signatures_are_not_sent() {
    let server = MockServer::start().await;
    serve(&server, text_stream(&["ok"])).await;
    let earlier = Message {
        role: Role::Assistant,
        parts: vec![
            Part::reasoning("secret musings"),
            Part::text("Earlier answer."),
            Part::Native(NativePart {
                provider: "gemini".into(),
                model: "gemini-3-pro".into(),
                value: json!({"thoughtSignature": "X", "on": "text"}),
            }),
            Part::Native(NativePart {
                provider: "anthropic".into(),
                model: MODEL.into(),
                value: json!({"type": "thinking", "thinking": "t", "signature": "s"}),
            }),
        ],
    };
    let request = TurnRequest::new(vec![Message::user("q1"), earlier, Message::user("q2")]);
    turn(&chat(&server.uri()), request).await.unwrap();
    let body = &bodies(&server).await[0];
    assert_eq!(
        body["contents"][1]["parts"],
        json!([{"text": "Earlier answer."}])
    );
    assert!(!body.to_string().contains("secret musings"));
}

#[tokio::test]
async fn only_the_newest_four_images_stay_attached() {
    let server = MockServer::start().await;
    serve(&server, text_stream(&["ok"])).await;
    let image = |n: u8| {
        Part::Image(Image {
            mime: "image/jpeg".into(),
            data: vec![n].into(),
        })
    };
    let request = TurnRequest::new(vec![Message {
        role: Role::User,
        parts: vec![
            image(1),
            image(2),
            image(3),
            image(4),
            image(5),
            Part::text("five"),
        ],
    }]);
    turn(&chat(&server.uri()), request).await.unwrap();
    let parts = bodies(&server).await[0]["contents"][0]["parts"].clone();
    assert_eq!(parts[0], json!({"text": "[image omitted]"}));
    assert_eq!(parts[1]["inlineData"]["mimeType"], "image/jpeg");
    assert_eq!(parts.as_array().unwrap().len(), 6);
}

#[tokio::test]
async fn whole_answers_decode_through_the_same_decoder() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1beta/models/gemini-2.5-flash:generateContent"))
        .and(header("x-goog-api-key", KEY))
        .respond_with(ResponseTemplate::new(200).set_body_json(last_chunk(
            json!([{"text": "pondering", "thought": true}, {"text": "Whole answer."}]),
            3,
        )))
        .mount(&server)
        .await;
    let model = GeminiChat::new(config(&server.uri()).with_streaming(false)).unwrap();
    let got = turn(&model, ask("x")).await.unwrap();
    assert_eq!(
        got.parts,
        vec![Part::reasoning("pondering"), Part::text("Whole answer.")]
    );
    assert_eq!(got.stop, Some(StopReason::EndTurn));
}

async fn events_of(server: &MockServer) -> Vec<Result<TurnEvent, ProviderError>> {
    events(&chat(&server.uri()), ask("x")).await
}

#[tokio::test]
async fn an_error_payload_in_the_stream_is_an_error() {
    let server = MockServer::start().await;
    let body = format!(
        "{}{}",
        sse(&[chunk(json!([{"text": "Par"}]))]),
        sse(&[
            json!({"error": {"code": 503, "message": "The model is overloaded. Please try again later.", "status": "UNAVAILABLE"}})
        ])
    );
    serve(&server, body).await;
    let got = events_of(&server).await;
    assert_eq!(
        got[0].as_ref().unwrap(),
        &TurnEvent::TextDelta { text: "Par".into() }
    );
    let err = got.last().unwrap().as_ref().unwrap_err();
    assert!(err.is_transient(), "{err}");
    assert!(err.to_string().contains("overloaded"), "{err}");
}

#[tokio::test]
async fn stream_cut_mid_event_is_transient() {
    let server = MockServer::start().await;
    let mut body = text_stream(&["Hello", " there"]);
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
    assert!(got.last().unwrap().as_ref().unwrap_err().is_transient());
}

#[tokio::test]
async fn stream_ending_without_finish_reason_is_transient() {
    let server = MockServer::start().await;
    serve(&server, sse(&[chunk(json!([{"text": "Hello"}]))])).await;
    let err = events_of(&server).await.pop().unwrap().unwrap_err();
    assert!(err.is_transient(), "{err}");
    assert!(err.to_string().contains("finishReason"), "{err}");
}

#[tokio::test]
async fn malformed_json_frame_is_a_protocol_error() {
    let server = MockServer::start().await;
    let body = format!(
        "{}data: {{\"candidates\": oops}}\r\n\r\n{}",
        sse(&[chunk(json!([{"text": "Hi"}]))]),
        text_stream(&["more"])
    );
    serve(&server, body).await;
    let err = events_of(&server).await.pop().unwrap().unwrap_err();
    assert!(matches!(err, ProviderError::Protocol { .. }), "{err:?}");
}

#[tokio::test]
async fn rate_limit_carries_retry_delay_and_a_second_call_succeeds() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(429).insert_header("retry-after", "2").set_body_json(json!({"error": {
            "code": 429, "message": "Resource has been exhausted (e.g. check quota).", "status": "RESOURCE_EXHAUSTED",
            "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "9s"}]
        }})))
        .up_to_n_times(1)
        .with_priority(1)
        .mount(&server)
        .await;
    serve(&server, text_stream(&["ok"])).await;
    let model = chat(&server.uri());
    let err = turn(&model, ask("x")).await.unwrap_err();
    assert!(err.is_transient(), "{err}");
    assert_eq!(
        err.retry_after(),
        Some(Duration::from_secs(2)),
        "the header wins over the body"
    );
    assert!(err.to_string().contains("exhausted"), "{err}");
    assert_eq!(turn(&model, ask("x")).await.unwrap().text(), "ok");
}

#[tokio::test]
async fn retry_delay_alone_is_read_from_the_body() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(429).set_body_json(json!({"error": {
            "code": 429, "message": "quota", "status": "RESOURCE_EXHAUSTED",
            "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "9s"}]
        }})))
        .mount(&server)
        .await;
    let err = turn(&chat(&server.uri()), ask("x")).await.unwrap_err();
    assert_eq!(err.retry_after(), Some(Duration::from_secs(9)));
}

#[tokio::test]
async fn server_error_then_success() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(500).set_body_json(json!({"error": {"code": 500, "message": "An internal error has occurred.", "status": "INTERNAL"}})))
        .up_to_n_times(1)
        .with_priority(1)
        .mount(&server)
        .await;
    serve(&server, text_stream(&["fine"])).await;
    let model = chat(&server.uri());
    assert!(turn(&model, ask("x")).await.unwrap_err().is_transient());
    assert_eq!(turn(&model, ask("x")).await.unwrap().text(), "fine");
}

#[tokio::test]
async fn a_bad_key_is_fatal_with_a_clear_message() {
    let server = MockServer::start().await;
    // Gemini answers a wrong key with 400 INVALID_ARGUMENT / API_KEY_INVALID.
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(400).set_body_json(json!({"error": {
            "code": 400, "message": format!("API key not valid. Please pass a valid API key. ({KEY})"), "status": "INVALID_ARGUMENT",
            "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID"}]
        }})))
        .mount(&server)
        .await;
    let err = turn(&chat(&server.uri()), ask("x")).await.unwrap_err();
    assert!(matches!(err, ProviderError::Auth { .. }), "{err:?}");
    assert!(err.to_string().contains("API key not valid"), "{err}");
    assert!(!err.to_string().contains(KEY) && !format!("{err:?}").contains(KEY));
}

#[tokio::test]
async fn unauthorized_is_fatal() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(401).set_body_json(json!({"error": {"code": 401, "message": "Request had invalid authentication credentials.", "status": "UNAUTHENTICATED"}})))
        .mount(&server)
        .await;
    let err = turn(&chat(&server.uri()), ask("x")).await.unwrap_err();
    assert!(matches!(err, ProviderError::Auth { .. }), "{err:?}");
    assert!(
        err.to_string()
            .contains("invalid authentication credentials"),
        "{err}"
    );
}

#[tokio::test]
async fn idle_timeout_is_transient() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(sse_response(text_stream(&["late"])).set_delay(Duration::from_secs(3)))
        .mount(&server)
        .await;
    let mut cfg = config(&server.uri());
    cfg.transport.idle_timeout = Duration::from_millis(300);
    let started = std::time::Instant::now();
    let err = turn(&GeminiChat::new(cfg).unwrap(), ask("x"))
        .await
        .unwrap_err();
    assert!(err.is_transient(), "{err}");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "the timeout did not fire"
    );
}

#[tokio::test]
async fn cancel_mid_stream_stops_at_once() {
    let base = common::stalling_server(
        "text/event-stream",
        sse(&[chunk(json!([{"text": "Partial"}]))]),
    )
    .await;
    let model = chat(&base);
    common::assert_cancel_ends_at_once(&model, ask("x"), "Partial").await;
}

#[tokio::test]
async fn the_key_never_shows_in_urls_bodies_errors_or_logs() {
    // The process's one capture: other tests' logs land here too, which
    // only widens the check.
    let logs = LogBuffer::global();

    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(400).set_body_string(format!("bad request, key={KEY}")))
        .up_to_n_times(1)
        .with_priority(1)
        .mount(&server)
        .await;
    serve(&server, text_stream(&["ok"])).await;
    Mock::given(method("GET"))
        .and(path("/v1beta/models"))
        .respond_with(ResponseTemplate::new(403).set_body_string(format!("forbidden: {KEY}")))
        .mount(&server)
        .await;
    let model = chat(&server.uri());
    let err = turn(&model, ask("x")).await.unwrap_err();
    let ok = turn(&model, ask("x")).await.unwrap();
    let list_err = model.list_models().await.unwrap_err();
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
        assert!(
            !request.url.as_str().contains(KEY),
            "key in {}",
            request.url
        );
        assert!(!String::from_utf8_lossy(&request.body).contains(KEY));
        assert_eq!(request.headers.get("x-goog-api-key").unwrap(), KEY);
    }
    let logs = logs.text();
    assert!(logs.contains("gemini turn"), "the capture works: {logs}");
    assert!(!logs.contains(KEY), "key in the logs");
}

#[tokio::test]
async fn lists_chat_models_across_pages() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/v1beta/models"))
        .and(query_param("pageToken", "next-1"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"models": [
            {"name": "models/gemini-2.5-pro", "inputTokenLimit": 1048576, "supportedGenerationMethods": ["generateContent"]}
        ]})))
        .with_priority(1)
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/v1beta/models"))
        .and(header("x-goog-api-key", KEY))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"models": [
            {"name": "models/gemini-2.5-flash", "inputTokenLimit": 1048576, "supportedGenerationMethods": ["generateContent", "countTokens"]},
            {"name": "models/text-embedding-004", "inputTokenLimit": 2048, "supportedGenerationMethods": ["embedContent"]}
        ], "nextPageToken": "next-1"})))
        .mount(&server)
        .await;
    let models = chat(&server.uri()).list_models().await.unwrap();
    let got: Vec<(&str, Option<u32>)> = models
        .iter()
        .map(|m| (m.model.as_str(), m.context_window))
        .collect();
    assert_eq!(
        got,
        [
            ("gemini-2.5-flash", Some(1_048_576)),
            ("gemini-2.5-pro", Some(1_048_576))
        ]
    );
    assert!(chat(&server.uri()).reachable().await);
}

#[test]
fn config_errors_name_what_to_fix() {
    let mut cfg = GeminiConfig::new(MODEL, ApiKey::new("x"));
    cfg.api_key = None;
    let err = GeminiChat::new(cfg).unwrap_err();
    assert!(
        err.to_string().contains("GEMINI_API_KEY") && err.to_string().contains("GOOGLE_API_KEY"),
        "{err}"
    );
    let err = GeminiChat::new(GeminiConfig::new("../evil?key=1", ApiKey::new("x"))).unwrap_err();
    assert!(err.to_string().contains("not a Gemini model name"), "{err}");
    let info = GeminiChat::new(GeminiConfig::new("models/gemini-2.5-pro", ApiKey::new("x")))
        .unwrap()
        .info();
    assert_eq!(info.model, "gemini-2.5-pro");
    assert_eq!(
        info.sends_to.as_deref(),
        Some("generativelanguage.googleapis.com")
    );
}

#[test]
fn any_chunking_of_a_stream_decodes_the_same() {
    let body = checking_two_files();
    common::assert_any_chunking_decodes_the_same(&body, || {
        lrg_providers::gemini::GeminiDecoder::new(MODEL)
    });
}

#[tokio::test]
async fn context_overflow_is_never_retried() {
    let overflow = json!({"error": {"code": 400, "status": "INVALID_ARGUMENT",
        "message": "The input token count (1200293) exceeds the maximum number of tokens allowed (1048576)."}});
    let server = MockServer::start().await;
    common::assert_overflow_not_retried(
        &chat(&server.uri()),
        &server,
        STREAM_PATH,
        ResponseTemplate::new(400).set_body_json(overflow.clone()),
    )
    .await;
    let server = MockServer::start().await;
    common::assert_overflow_not_retried(
        &chat(&server.uri()),
        &server,
        STREAM_PATH,
        sse_response(sse(&[overflow])),
    )
    .await;
}

fn typed(text: &str) -> TurnRequest {
    ask(text).output(common::triage_schema())
}

#[tokio::test]
async fn a_typed_answer_carries_its_schema_unless_tools_are_offered() {
    let server = MockServer::start().await;
    serve(
        &server,
        text_stream(&["{\"label\":", "\"bug\",\"priority\":2}"]),
    )
    .await;
    let model = chat(&server.uri());
    assert_eq!(model.info().output_mode, OutputMode::Native);
    let got = turn(&model, typed("Triage: it crashes")).await.unwrap();
    assert_eq!(got.text(), r#"{"label":"bug","priority":2}"#);
    turn(
        &model,
        typed("Triage: it crashes").tools(vec![tool("read_file")]),
    )
    .await
    .unwrap();
    let sent = bodies(&server).await;

    let generation = &sent[0]["generationConfig"];
    assert_eq!(generation["responseMimeType"], "application/json");
    assert_eq!(
        generation["responseJsonSchema"]["properties"]["priority"]["maximum"],
        5
    );
    assert!(generation["responseJsonSchema"].get("$schema").is_none());
    assert_eq!(
        sent[0]["systemInstruction"]["parts"][0]["text"],
        "You are terse."
    );
    insta::assert_json_snapshot!("typed_request", sent[0]);

    // Gemini refuses a response schema beside function declarations: the
    // schema goes into the instructions.
    let generation = &sent[1]["generationConfig"];
    assert!(
        generation.get("responseMimeType").is_none(),
        "{generation:#}"
    );
    assert!(
        generation.get("responseJsonSchema").is_none(),
        "{generation:#}"
    );
    let system = sent[1]["systemInstruction"]["parts"][0]["text"]
        .as_str()
        .unwrap();
    assert!(system.starts_with("You are terse.\n\n"), "{system}");
    assert!(
        system.ends_with(&common::triage_schema().instructions()),
        "{system}"
    );
    insta::assert_json_snapshot!("typed_with_tools_request", sent[1]);
}

#[tokio::test]
async fn older_models_get_the_shaped_response_schema() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(
            "/v1beta/models/gemini-2.0-flash:streamGenerateContent",
        ))
        .respond_with(sse_response(text_stream(&[
            "{\"label\":\"bug\",\"priority\":2}",
        ])))
        .mount(&server)
        .await;
    let mut config = config(&server.uri());
    config.model = "gemini-2.0-flash".into();
    let model = GeminiChat::new(config).unwrap();
    turn(&model, typed("Triage: it crashes")).await.unwrap();
    let generation = bodies(&server).await.remove(0)["generationConfig"].clone();
    assert!(
        generation.get("responseJsonSchema").is_none(),
        "{generation:#}"
    );
    let schema = &generation["responseSchema"];
    // The OpenAPI subset: a nullable optional, its bound in the description.
    assert_eq!(schema["type"], "object");
    assert_eq!(schema["properties"]["note"]["nullable"], true);
    assert!(schema.get("additionalProperties").is_none(), "{schema:#}");
}
