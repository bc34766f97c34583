//! The text formats of seed 003 that lrg lacked, each streamed from a fake
//! OpenAI-compatible server in deltas cut at awkward places: Llama 3.1's
//! `<function=NAME>{…}</function>` (read by the `llama3` format beside its
//! `<|python_tag|>` form) and Gemma's `tool_code` blocks (under `auto` for
//! Gemma models, whose request is snapshotted: the tools in the prompt, the
//! history as text, the family's sampling). Then the parser chain: a
//! family's format first, fenced JSON after it.
#![allow(clippy::unwrap_used, clippy::expect_used)] // helpers outside #[test] fns may panic: this is a test

use crate::common;

use lrg_providers::openai::{Dialect, OpenAiChat, OpenAiConfig};
use lrg_providers::text_tools::{TextToolParser, ToolFormat, ToolMode};
use lrg_providers::{
    AssistantTurn, GenerationSettings, Message, Part, Role, StopReason, ToolCall, ToolResult,
    ToolSpec, TurnEvent, TurnRequest,
};
use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

fn tools() -> Vec<ToolSpec> {
    vec![
        ToolSpec {
            name: "get_weather".into(),
            description: "Current weather for a city".into(),
            input_schema: json!({"type": "object", "properties": {
                "city": {"type": "string"}, "days": {"type": "integer"}},
                "required": ["city"]}),
            annotations: Default::default(),
            output_schema: None,
        },
        ToolSpec {
            name: "add".into(),
            description: "Add two integers".into(),
            input_schema: json!({"type": "object", "properties": {
                "a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]}),
            annotations: Default::default(),
            output_schema: None,
        },
    ]
}

/// A Chat Completions SSE body with one content delta per piece.
fn sse(pieces: &[&str]) -> String {
    let mut body = String::new();
    for content in pieces {
        let frame = json!({"choices": [{"index": 0, "delta": {"content": content}, "finish_reason": Value::Null}]});
        body.push_str(&format!("data: {frame}\n\n"));
    }
    body.push_str(&format!(
        "data: {}\n\ndata: [DONE]\n\n",
        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    ));
    body
}

async fn server_answering(pieces: &[&str]) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(ResponseTemplate::new(200).set_body_raw(sse(pieces), "text/event-stream"))
        .expect(1)
        .mount(&server)
        .await;
    server
}

/// One turn of `model` under `mode` against a server answering `pieces`,
/// and the body it was sent.
async fn answer(
    model: &str,
    mode: ToolMode,
    request: TurnRequest,
    pieces: &[&str],
) -> (AssistantTurn, Value) {
    let server = server_answering(pieces).await;
    let config = OpenAiConfig::new(Dialect::LLAMA_CPP, format!("{}/v1", server.uri()), model)
        .with_tool_mode(mode);
    let chat = OpenAiChat::new(config).unwrap();
    let turn = common::turn(&chat, request).await.unwrap();
    let body = common::bodies(&server).await.remove(0);
    (turn, body)
}

fn ask() -> TurnRequest {
    TurnRequest::new(vec![Message::user("Weather in Paris, and 2+3?")])
        .system("You are terse.")
        .tools(tools())
}

fn calls(turn: &AssistantTurn) -> Vec<(String, Value)> {
    turn.tool_calls()
        .iter()
        .map(|c| (c.name.clone(), c.arguments.clone()))
        .collect()
}

#[tokio::test]
async fn llama_function_tags_stream_into_calls_beside_the_python_tag_form() {
    let (turn, _) = answer(
        "meta-llama/Llama-3.1-8B-Instruct",
        ToolMode::Auto,
        ask(),
        &[
            "Checking.<",
            "func",
            "tion=get_wea",
            "ther>{\"city\": \"Pa",
            "ris\"}</func",
            "tion><function=add>{\"a\": 2, ",
            "\"b\": 3}<",
            "/function>",
        ],
    )
    .await;
    assert_eq!(turn.text(), "Checking.");
    assert_eq!(turn.stop, Some(StopReason::ToolCalls));
    assert_eq!(
        calls(&turn),
        [
            ("get_weather".to_string(), json!({"city": "Paris"})),
            ("add".to_string(), json!({"a": 2, "b": 3})),
        ]
    );
    // The same format still reads `<|python_tag|>`.
    let (turn, _) = turn_python_tag().await;
    assert_eq!(
        calls(&turn),
        [("get_weather".to_string(), json!({"city": "Oslo"}))]
    );
}

async fn turn_python_tag() -> (AssistantTurn, Value) {
    answer(
        "llama3.2:3b",
        ToolMode::Text(ToolFormat::Llama3),
        ask(),
        &[
            "<|python",
            "_tag|>{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Os",
            "lo\"}}<|eom_id|>",
        ],
    )
    .await
}

#[tokio::test]
async fn a_llama_function_tag_to_no_offered_tool_becomes_a_recovery_call() {
    let (turn, _) = answer(
        "llama3.1",
        ToolMode::Auto,
        ask(),
        &["<function=delete_all>{}</function>"],
    )
    .await;
    let calls = turn.tool_calls();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].name, lrg_providers::text_tools::RECOVERY_TOOL);
    assert!(
        calls[0].arguments["message"]
            .as_str()
            .unwrap()
            .contains("There is no tool named `delete_all`"),
        "{:?}",
        calls[0].arguments
    );
}

/// A Gemma conversation with an earlier call and its result in the history.
fn gemma_request() -> TurnRequest {
    let mut request = ask();
    request.messages.push(Message {
        role: Role::Assistant,
        parts: vec![Part::ToolCall(ToolCall {
            id: "call_1".into(),
            name: "add".into(),
            arguments: json!({"a": 2, "b": 3}),
        })],
    });
    request.messages.push(Message {
        role: Role::Tool,
        parts: vec![Part::ToolResult(ToolResult {
            call_id: "call_1".into(),
            name: "add".into(),
            parts: vec![Part::Text { text: "5".into() }],
            is_error: false,
        })],
    });
    request
}

#[tokio::test]
async fn gemma_tool_code_blocks_under_auto_stream_into_calls() {
    let (turn, body) = answer(
        "gemma3:12b",
        ToolMode::Auto,
        gemma_request(),
        &[
            "I'll look.\n``",
            "`tool_co",
            "de\nget_weather(city=\"Pa",
            "ris\", days=2)\n`",
            "``",
        ],
    )
    .await;
    assert_eq!(turn.text(), "I'll look.\n");
    assert_eq!(
        calls(&turn),
        [(
            "get_weather".to_string(),
            json!({"city": "Paris", "days": 2})
        )]
    );
    // Gemma's servers do not parse its calls: the tools are in the prompt,
    // the earlier call a `tool_code` block, its result a `tool_output` one,
    // and the family's sampling (temperature 1.0, top_p 0.95, top_k 64),
    // since the request set none.
    assert!(body.get("tools").is_none(), "{body}");
    insta::assert_json_snapshot!("gemma_auto_request", body);
}

#[tokio::test]
async fn gemma_tool_code_reads_several_lines_and_print_wrappers() {
    let (turn, _) = answer(
        "google/gemma-3-4b-it",
        ToolMode::Text(ToolFormat::Gemma),
        ask(),
        &[
            "```tool_code\nprint(get_weather(city=\"Rome\"))\nadd(a=1,",
            " b=2)\n```",
        ],
    )
    .await;
    assert_eq!(
        calls(&turn),
        [
            ("get_weather".to_string(), json!({"city": "Rome"})),
            ("add".to_string(), json!({"a": 1, "b": 2})),
        ]
    );
    assert_eq!(turn.text(), "");
}

#[tokio::test]
async fn settings_the_request_sets_are_kept_over_the_familys() {
    let request = gemma_request().settings(GenerationSettings::new().temperature(0.2));
    let (_, body) = answer("gemma3:12b", ToolMode::Auto, request, &["Fine."]).await;
    assert_eq!(body["temperature"], json!(0.2));
    assert!(
        body.get("top_p").is_none() && body.get("top_k").is_none(),
        "{body}"
    );
}

#[tokio::test]
async fn the_chain_falls_back_to_fenced_json_after_the_familys_format() {
    // A Qwen model (Hermes format) that wrote a fenced JSON call instead.
    let (turn, _) = answer(
        "qwen3-8b",
        ToolMode::Auto,
        ask(),
        &[
            "Sure.\n`",
            "``js",
            "on\n{\"name\": \"get_weather\", \"argu",
            "ments\": {\"city\": \"Lyon\"}}\n``",
            "`",
        ],
    )
    .await;
    assert_eq!(
        calls(&turn),
        [("get_weather".to_string(), json!({"city": "Lyon"}))]
    );
    assert_eq!(turn.text(), "Sure.\n");
    // Gemma too: its own blocks first, fenced JSON after.
    let (turn, _) = answer(
        "gemma3:12b",
        ToolMode::Auto,
        ask(),
        &["```json\n{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 1}}\n```"],
    )
    .await;
    assert_eq!(calls(&turn), [("add".to_string(), json!({"a": 1, "b": 1}))]);
}

#[test]
fn fenced_json_that_calls_no_offered_tool_stays_text() {
    let text = "Example:\n```json\n{\"name\": \"other\", \"arguments\": {}}\n```";
    let mut parser = TextToolParser::chained(ToolFormat::Hermes.chain(), &tools());
    let mut out = Vec::new();
    for piece in text.as_bytes().chunks(3) {
        parser.feed(std::str::from_utf8(piece).unwrap(), &mut out);
    }
    parser.finish(&mut out);
    let shown: String = out
        .iter()
        .map(|e| match e {
            TurnEvent::TextDelta { text } => text.as_str(),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(shown, text);
    // Without the chain, the family's own parser leaves fenced JSON alone.
    let mut alone = TextToolParser::new(ToolFormat::Hermes, &tools());
    let mut out = Vec::new();
    alone.feed(
        "```json\n{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 1}}\n```",
        &mut out,
    );
    alone.finish(&mut out);
    assert!(
        out.iter().all(|e| matches!(e, TurnEvent::TextDelta { .. })),
        "{out:?}"
    );
}
