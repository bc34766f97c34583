//! The text tool-call parsers on documented examples of each family's format
//! (fixtures/text_tools/FORMAT/CASE.txt): the events, snapshotted; the same
//! events for any chunking; and, for every cut of the text, only whole calls
//! or clean failures, and never a call shown as text. A case named
//! `open_think*` is read as the answer to a template that opened `<think>`
//! in the prompt ([`TextToolParser::starting_in_reasoning`]).
#![allow(clippy::unwrap_used, clippy::expect_used)] // helpers outside #[test] fns may panic: this is a test

use crate::common;

use std::path::{Path, PathBuf};

use lrg_providers::openai::{Dialect, OpenAiDecoder};
use lrg_providers::text_tools::{
    RECOVERY_TOOL, TextToolDecoder, TextToolParser, ToolFormat, recovery::Recovery,
};
use lrg_providers::{ToolSpec, TurnEvent};
use serde_json::{Value, json};

fn tools() -> Vec<ToolSpec> {
    vec![
        ToolSpec {
            name: "get_weather".into(),
            description: "Current weather for a city".into(),
            input_schema: json!({"type": "object", "properties": {
                "city": {"type": "string"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
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

fn fixtures() -> Vec<(ToolFormat, String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/text_tools");
    let mut out = Vec::new();
    for dir in sorted(&root) {
        let format: ToolFormat = dir.file_name().unwrap().to_str().unwrap().parse().unwrap();
        for file in sorted(&dir) {
            let case = file.file_stem().unwrap().to_str().unwrap().to_string();
            out.push((format, case, std::fs::read_to_string(&file).unwrap()));
        }
    }
    assert!(out.len() >= 30, "fixtures missing: {}", out.len());
    out
}

fn sorted(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    v.sort();
    v
}

/// The parser for fixture `case` of `format`.
fn parser(format: ToolFormat, case: &str) -> TextToolParser {
    let parser = TextToolParser::new(format, &tools());
    if case.starts_with("open_think") {
        parser.starting_in_reasoning()
    } else {
        parser
    }
}

/// Parse `text` fed in pieces of the given sizes.
fn parse(
    format: ToolFormat,
    case: &str,
    text: &str,
    sizes: &mut dyn Iterator<Item = usize>,
) -> Vec<TurnEvent> {
    let mut parser = parser(format, case);
    let mut out = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        let mut n = sizes.next().unwrap_or(1).clamp(1, rest.len());
        while !rest.is_char_boundary(n) {
            n += 1;
        }
        let (chunk, tail) = rest.split_at(n);
        parser.feed(chunk, &mut out);
        rest = tail;
    }
    parser.finish(&mut out);
    merge(out)
}

/// Consecutive deltas of one kind joined: chunking may split them anywhere.
fn merge(events: Vec<TurnEvent>) -> Vec<TurnEvent> {
    let mut out: Vec<TurnEvent> = Vec::new();
    for e in events {
        match (out.last_mut(), e) {
            (Some(TurnEvent::TextDelta { text: a }), TurnEvent::TextDelta { text: b }) => {
                a.push_str(&b)
            }
            (
                Some(TurnEvent::ReasoningDelta { text: a }),
                TurnEvent::ReasoningDelta { text: b },
            ) => a.push_str(&b),
            (_, e) => out.push(e),
        }
    }
    out
}

fn whole(format: ToolFormat, case: &str, text: &str) -> Vec<TurnEvent> {
    parse(format, case, text, &mut std::iter::repeat(text.len()))
}

#[test]
fn documented_examples_parse_as_snapshotted() {
    for (format, case, text) in fixtures() {
        let events = whole(format, &case, &text);
        insta::assert_json_snapshot!(format!("{}__{case}", format.name()), events);
    }
}

#[test]
fn any_chunking_gives_the_same_events() {
    for (format, case, text) in fixtures() {
        let want = whole(format, &case, &text);
        for size in 1..=7 {
            assert_eq!(
                parse(format, &case, &text, &mut std::iter::repeat(size)),
                want,
                "{case}: {size}-byte chunks"
            );
        }
        for seed in 1..40u64 {
            let mut state = seed;
            let mut sizes = std::iter::from_fn(|| {
                state = state
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1_442_695_040_888_963_407);
                Some((state >> 33) as usize % 40 + 1)
            });
            assert_eq!(
                parse(format, &case, &text, &mut sizes),
                want,
                "{case}: seed {seed}"
            );
        }
    }
}

/// What a call looks like in each format, which text must never show.
fn markers(format: ToolFormat) -> &'static [&'static str] {
    match format {
        ToolFormat::Hermes | ToolFormat::Qwen3Coder => &["<tool_call>", "<function="],
        ToolFormat::Mistral => &["[TOOL_CALLS]"],
        ToolFormat::Llama3 => &["<|python_tag|>", "<function="],
        ToolFormat::Harmony => &["<|channel|>", "<|message|>", "<|call|>"],
        ToolFormat::Granite => &["<|tool_call|>", "<function_call>"],
        ToolFormat::DeepSeek => &["<｜tool▁calls▁begin｜>"],
        ToolFormat::Pythonic => &["<|python_start|>"],
        ToolFormat::Gemma => &["```tool_code"],
        _ => &[],
    }
}

#[test]
fn every_truncation_gives_whole_calls_or_clean_failures() {
    let names: Vec<String> = tools().into_iter().map(|t| t.name).collect();
    for (format, case, text) in fixtures() {
        for cut in (0..=text.len()).filter(|&i| text.is_char_boundary(i)) {
            let events = whole(format, &case, &text[..cut]);
            for e in &events {
                match e {
                    TurnEvent::ToolCall(call) if call.name == RECOVERY_TOOL => {
                        let r =
                            Recovery::from_arguments(&call.arguments).expect("recovery arguments");
                        assert!(!r.message.is_empty());
                    }
                    TurnEvent::ToolCall(call) => {
                        assert!(names.contains(&call.name), "{case}@{cut}: {call:?}");
                        assert!(call.arguments.is_object(), "{case}@{cut}: {call:?}");
                    }
                    TurnEvent::TextDelta { text: t } => {
                        // Tool-free fixtures may show their text; calls never.
                        if case.ends_with("text") || case == "other_block" {
                            continue;
                        }
                        for m in markers(format) {
                            assert!(!t.contains(m), "{case}@{cut}: call shown as text: {t:?}");
                        }
                    }
                    _ => {}
                }
            }
        }
    }
}

#[test]
fn call_ids_are_unique_and_avoid_the_history() {
    let history = vec![lrg_providers::Message {
        role: lrg_providers::Role::Assistant,
        parts: vec![lrg_providers::Part::ToolCall(lrg_providers::ToolCall {
            id: "call_0".into(),
            name: "add".into(),
            arguments: json!({}),
        })],
    }];
    let mut parser = TextToolParser::new(ToolFormat::Pythonic, &tools()).with_history(&history);
    let mut out = Vec::new();
    parser.feed("[add(a=1, b=2), add(a=3, b=4)]", &mut out);
    parser.finish(&mut out);
    let ids: Vec<&str> = out
        .iter()
        .filter_map(|e| match e {
            TurnEvent::ToolCall(c) => Some(c.id.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(ids.len(), 2);
    assert!(!ids.contains(&"call_0") && ids[0] != ids[1], "{ids:?}");
}

/// A Chat Completions SSE body whose content deltas are `text` in pieces.
fn sse_of(text: &str, piece: usize) -> String {
    let mut body = String::new();
    let chars: Vec<char> = text.chars().collect();
    for chunk in chars.chunks(piece) {
        let content: String = chunk.iter().collect();
        let frame = json!({"choices": [{"index": 0, "delta": {"content": content}, "finish_reason": Value::Null}]});
        body.push_str(&format!("data: {frame}\n\n"));
    }
    body.push_str(&format!(
        "data: {}\n\ndata: [DONE]\n\n",
        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    ));
    body
}

#[test]
fn through_the_openai_decoder_any_chunking_decodes_the_same() {
    for (format, case, text) in fixtures() {
        let body = sse_of(&text, 3);
        common::assert_any_chunking_decodes_the_same(&body, || {
            TextToolDecoder::new(
                OpenAiDecoder::new(Dialect::LLAMA_CPP.reasoning_fields, &[]),
                parser(format, &case),
            )
        });
    }
}

mod through_the_adapter {
    use super::*;
    use lrg_providers::openai::{OpenAiChat, OpenAiConfig};
    use lrg_providers::text_tools::ToolMode;
    use lrg_providers::{Message, Part, Role, StopReason, ToolCall, ToolResult, TurnRequest};
    use wiremock::matchers::{method, path};
    use wiremock::{Mock, MockServer, ResponseTemplate};

    async fn server_answering(text: &str) -> MockServer {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path("/v1/chat/completions"))
            .respond_with(
                ResponseTemplate::new(200).set_body_raw(sse_of(text, 5), "text/event-stream"),
            )
            .expect(1)
            .mount(&server)
            .await;
        server
    }

    fn model(server: &MockServer, name: &str, mode: ToolMode) -> OpenAiChat {
        let config = OpenAiConfig::new(Dialect::LLAMA_CPP, format!("{}/v1", server.uri()), name)
            .with_tool_mode(mode);
        OpenAiChat::new(config).unwrap()
    }

    fn request() -> TurnRequest {
        TurnRequest::new(vec![Message::user("Weather in Paris?")])
            .system("You are terse.")
            .tools(tools())
    }

    #[tokio::test]
    async fn auto_parses_hermes_text_into_a_call() {
        let server = server_answering(
            "<think>Need the tool.</think>Checking.<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
        )
        .await;
        let events = common::ok_events(
            common::events(&model(&server, "qwen3-8b", ToolMode::Auto), request()).await,
        );
        // A call read from text is known whole at the end: its one delta first.
        let (first, fragments) = common::call_deltas(&events, 0);
        assert_eq!(first.map(|(_, name)| name).as_deref(), Some("get_weather"));
        assert_eq!(fragments, r#"{"city":"Paris"}"#);
        let turn = common::fold(&events);
        assert_eq!(turn.text(), "Checking.");
        assert_eq!(turn.stop, Some(StopReason::ToolCalls));
        let calls = turn.tool_calls();
        assert_eq!(calls.len(), 1);
        assert_eq!(
            (calls[0].name.as_str(), &calls[0].arguments),
            ("get_weather", &json!({"city": "Paris"}))
        );
        // Qwen's servers parse tools themselves: auto still sends them natively.
        let body = &common::bodies(&server).await[0];
        assert_eq!(body["tools"].as_array().map(Vec::len), Some(2));
    }

    #[tokio::test]
    async fn text_mode_describes_tools_in_the_prompt_and_writes_history_as_text() {
        let server = server_answering("[get_weather(city=\"Oslo\")]").await;
        let mut req = request();
        req.messages.push(Message {
            role: Role::Assistant,
            parts: vec![Part::ToolCall(ToolCall {
                id: "call_1".into(),
                name: "add".into(),
                arguments: json!({"a": 1, "b": 2}),
            })],
        });
        req.messages.push(Message {
            role: Role::Tool,
            parts: vec![Part::ToolResult(ToolResult {
                call_id: "call_1".into(),
                name: "add".into(),
                parts: vec![Part::Text { text: "3".into() }],
                is_error: false,
            })],
        });
        // (Gemma under `auto` writes `tool_code` blocks: tests/text_tools_formats.rs.)
        let turn = common::turn(
            &model(&server, "gemma3:12b", ToolMode::Text(ToolFormat::Pythonic)),
            req,
        )
        .await
        .unwrap();
        assert_eq!(turn.tool_calls()[0].arguments, json!({"city": "Oslo"}));
        assert_ne!(turn.tool_calls()[0].id, "call_1");
        let body = &common::bodies(&server).await[0];
        assert!(body.get("tools").is_none(), "{body}");
        let messages = body["messages"].as_array().unwrap();
        let system = messages[0]["content"].as_str().unwrap();
        assert!(system.starts_with("You are terse.\n\n# Tools"), "{system}");
        assert!(
            system.contains("[get_weather(city=\"<city>\")]"),
            "{system}"
        );
        let roles: Vec<&str> = messages
            .iter()
            .map(|m| m["role"].as_str().unwrap())
            .collect();
        assert_eq!(roles, ["system", "user", "assistant", "user"]);
        assert_eq!(messages[2]["content"], "[add(a=1, b=2)]");
        assert!(
            body.to_string()
                .contains("<tool_response>\\n3\\n</tool_response>"),
            "{body}"
        );
    }

    fn reasoning(turn: &lrg_providers::AssistantTurn) -> String {
        turn.parts
            .iter()
            .filter_map(|p| match p {
                Part::Reasoning { text } => Some(text.as_str()),
                _ => None,
            })
            .collect()
    }

    #[tokio::test]
    async fn a_template_that_opened_think_streams_reasoning_until_the_closer() {
        let server = server_answering(
            "The user wants Paris.\n</think>\n\nChecking.<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
        )
        .await;
        let turn = common::turn(&model(&server, "qwq-32b", ToolMode::Auto), request())
            .await
            .unwrap();
        assert_eq!(reasoning(&turn), "The user wants Paris.\n");
        assert_eq!(turn.text(), "\n\nChecking.");
        assert_eq!(turn.tool_calls()[0].arguments, json!({"city": "Paris"}));
    }

    #[tokio::test]
    async fn a_server_that_separates_reasoning_leaves_the_answer_text() {
        // The server took the reasoning out into its own field: what comes in
        // `content` is the answer, even for a template that opened `<think>`.
        let server = MockServer::start().await;
        let chunk = |delta: Value| json!({"choices": [{"index": 0, "delta": delta, "finish_reason": Value::Null}]});
        let body = format!(
            "data: {}\n\ndata: {}\n\ndata: {}\n\ndata: [DONE]\n\n",
            chunk(json!({"reasoning": "The user wants Paris."})),
            chunk(json!({"content": "Sunny in Paris."})),
            json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
        );
        Mock::given(method("POST"))
            .respond_with(ResponseTemplate::new(200).set_body_raw(body, "text/event-stream"))
            .expect(1)
            .mount(&server)
            .await;
        let turn = common::turn(
            &model(
                &server,
                "deepseek-r1:14b",
                ToolMode::Text(ToolFormat::Hermes),
            ),
            request(),
        )
        .await
        .unwrap();
        assert_eq!(reasoning(&turn), "The user wants Paris.");
        assert_eq!(turn.text(), "Sunny in Paris.");
    }

    #[tokio::test]
    async fn a_native_call_wins_over_text() {
        let server = MockServer::start().await;
        let chunk = |delta: Value| json!({"choices": [{"index": 0, "delta": delta, "finish_reason": Value::Null}]});
        let body = format!(
            "data: {}\n\ndata: {}\n\ndata: {}\n\ndata: [DONE]\n\n",
            chunk(
                json!({"tool_calls": [{"index": 0, "id": "abc", "function": {"name": "add", "arguments": "{\"a\":1,\"b\":2}"}}]})
            ),
            chunk(json!({"content": "<tool_call>{\"name\": \"get_weather\"}</tool_call>"})),
            json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}),
        );
        Mock::given(method("POST"))
            .respond_with(ResponseTemplate::new(200).set_body_raw(body, "text/event-stream"))
            .expect(1)
            .mount(&server)
            .await;
        let turn = common::turn(&model(&server, "qwen3-8b", ToolMode::Auto), request())
            .await
            .unwrap();
        let names: Vec<&str> = turn.tool_calls().iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["add"]);
        // The text call was read (never shown as text), then dropped for the native one.
        assert_eq!(turn.text(), "");
    }
}
