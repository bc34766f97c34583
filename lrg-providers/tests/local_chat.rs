//! LocalChatModel against a fake engine: the prompt and answer schema it sends,
//! and how it turns a streamed JSON answer back into turn events.
//!
//! Test data lists every object's keys alphabetically: serde_json keeps maps
//! sorted by default but in insertion order when another crate of the build
//! enables `preserve_order` (lrg-llama's dependencies do, in a workspace
//! build), and the snapshots must read the same either way.

// Helpers outside #[test] functions are test code too.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt as _;
use futures::stream::{self, BoxStream};
use lrg_providers::local_chat::{
    ANALYSIS_MAX_CHARS, AnswerDecoder, EngineEvent, EngineMessage, EngineStop, EngineTurn,
    IMAGE_SLOT, LocalChatModel, LocalEngine, REPLY_MAX_CHARS, answer_schema, parse_answer,
};
use lrg_providers::{
    AssistantTurn, ChatModel, GenerationSettings, Image, Message, ModelLocation, NativePart, Part,
    ProviderError, Role, StopReason, ToolAnnotations, ToolCall, ToolResult, ToolSpec, TurnEvent,
    TurnRequest, Usage, collect_turn,
};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

// ---------------------------------------------------------------- fake engine

/// A scripted engine: records every turn it is given and streams `events`,
/// then (optionally) never ends, like an engine still generating.
struct FakeEngine {
    events: Vec<Result<EngineEvent, ProviderError>>,
    hang_at_end: bool,
    turns: Mutex<Vec<EngineTurn>>,
    /// Whether it reports that it sees images (true unless built `blind`).
    vision: bool,
}

impl FakeEngine {
    /// Streams `answer` cut at the given chunk sizes (in chars, cycled), then
    /// `Done` with `stop`.
    fn answering(answer: &str, sizes: &[usize], stop: EngineStop) -> Arc<Self> {
        let mut events: Vec<_> = chunks(answer, sizes)
            .into_iter()
            .map(|text| Ok(EngineEvent::Delta { text }))
            .collect();
        events.push(Ok(EngineEvent::Done {
            usage: usage(),
            stop,
        }));
        Self::scripted(events, false)
    }

    fn scripted(events: Vec<Result<EngineEvent, ProviderError>>, hang_at_end: bool) -> Arc<Self> {
        Arc::new(Self {
            events,
            hang_at_end,
            turns: Mutex::new(Vec::new()),
            vision: true,
        })
    }

    /// An engine that cannot see images and answers `answer` in one piece.
    fn blind(answer: &str) -> Arc<Self> {
        let events = vec![
            Ok(EngineEvent::Delta {
                text: answer.into(),
            }),
            Ok(EngineEvent::Done {
                usage: usage(),
                stop: EngineStop::Done,
            }),
        ];
        Arc::new(Self {
            events,
            hang_at_end: false,
            turns: Mutex::new(Vec::new()),
            vision: false,
        })
    }

    fn last_turn(&self) -> EngineTurn {
        self.turns
            .lock()
            .unwrap()
            .last()
            .cloned()
            .expect("the engine received no turn")
    }
}

impl LocalEngine for FakeEngine {
    fn model_name(&self) -> String {
        "tiny-test".into()
    }

    fn context_window(&self) -> u32 {
        8192
    }

    fn vision(&self) -> bool {
        self.vision
    }

    fn generate(
        &self,
        turn: EngineTurn,
        _cancel: CancellationToken,
    ) -> BoxStream<'static, Result<EngineEvent, ProviderError>> {
        self.turns.lock().unwrap().push(turn);
        let events = stream::iter(self.events.clone());
        if self.hang_at_end {
            events.chain(stream::pending()).boxed()
        } else {
            events.boxed()
        }
    }
}

fn usage() -> Usage {
    Usage::new(321, 45)
}

/// `text` cut into pieces of `sizes` chars (cycled).
fn chunks(text: &str, sizes: &[usize]) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut at = 0;
    for &size in sizes.iter().cycle() {
        if at >= chars.len() {
            break;
        }
        let end = (at + size.max(1)).min(chars.len());
        out.push(chars[at..end].iter().collect());
        at = end;
    }
    out
}

async fn run(model: &LocalChatModel, request: TurnRequest) -> Result<AssistantTurn, ProviderError> {
    tokio::time::timeout(
        Duration::from_secs(10),
        collect_turn(model.turn(request, CancellationToken::new())),
    )
    .await
    .expect("turn timed out")
}

fn model(engine: Arc<FakeEngine>) -> LocalChatModel {
    LocalChatModel::new("llama", engine)
}

// ---------------------------------------------------------------- a realistic tool set

fn tool(name: &str, description: &str, input_schema: Value) -> ToolSpec {
    ToolSpec {
        name: name.into(),
        description: description.into(),
        input_schema,
        annotations: ToolAnnotations::default(),
        output_schema: None,
    }
}

fn path_argument() -> Value {
    json!({"description": "Path relative to the project root.", "type": "string"})
}

fn tools() -> Vec<ToolSpec> {
    vec![
        tool(
            "read_file",
            "Read a text file.",
            json!({
                "properties": {
                    "max_lines": {"description": "Stop after this many lines.", "minimum": 1, "type": "integer"},
                    "path": path_argument()
                },
                "required": ["path"],
                "type": "object"
            }),
        ),
        tool(
            "write_file",
            "Create or replace a text file.",
            json!({
                "properties": {
                    "content": {"description": "The whole new content.", "type": "string"},
                    "path": path_argument()
                },
                "required": ["path", "content"],
                "type": "object"
            }),
        ),
        tool(
            "list_dir",
            "List a directory.",
            json!({
                "properties": {
                    "path": path_argument(),
                    "recursive": {"default": false, "description": "Include subdirectories.", "type": "boolean"}
                },
                "required": ["path"],
                "type": "object"
            }),
        ),
        tool(
            "search",
            "Search the project's files, by words or by a regular expression.",
            json!({
                "oneOf": [{"required": ["query"]}, {"required": ["pattern"]}],
                "properties": {
                    "path": path_argument(),
                    "pattern": {"description": "A regular expression.", "format": "regex", "type": "string"},
                    "query": {"description": "Words to look for.", "type": "string"}
                },
                "type": "object"
            }),
        ),
        tool(
            "delete_files",
            "Delete files by id.",
            json!({
                "properties": {
                    "ids": {
                        "description": "Ids of the files, as list_dir\n   shows them.",
                        "items": {"type": "string"},
                        "minItems": 1,
                        "type": "array"
                    }
                },
                "required": ["ids"],
                "type": "object"
            }),
        ),
        tool(
            "get_weather",
            "Current weather for a city.",
            json!({
                "$defs": {"unit": {"description": "Temperature unit.", "enum": ["celsius", "fahrenheit"], "type": "string"}},
                "properties": {
                    "city": {"description": "City name, e.g. Paris.", "type": "string"},
                    "unit": {"$ref": "#/$defs/unit"}
                },
                "required": ["city"],
                "type": "object"
            }),
        ),
    ]
}

fn image(tag: u8) -> Part {
    Part::Image(Image {
        mime: "image/png".into(),
        data: vec![tag; 3].into(),
    })
}

fn call(id: &str, name: &str, arguments: Value) -> Part {
    Part::ToolCall(ToolCall {
        id: id.into(),
        name: name.into(),
        arguments,
    })
}

fn result(id: &str, name: &str, text: &str, is_error: bool) -> ToolResult {
    ToolResult {
        call_id: id.into(),
        name: name.into(),
        parts: vec![Part::text(text)],
        is_error,
    }
}

fn conversation() -> Vec<Message> {
    vec![
        Message::user("What is in src? Then tell me the weather in Paris."),
        Message {
            role: Role::Assistant,
            parts: vec![
                Part::reasoning("List src first."),
                call(
                    "call_1",
                    "list_dir",
                    json!({"path": "src", "recursive": false}),
                ),
            ],
        },
        Message::tool_results([result(
            "call_1",
            "list_dir",
            "{\n  \"count\": 2,\n  \"entries\": [\n    \"lib.rs\",\n    \"main.rs\"\n  ]\n}",
            false,
        )]),
        Message {
            role: Role::Assistant,
            parts: vec![
                Part::reasoning("Now the weather."),
                call(
                    "call_2",
                    "get_weather",
                    json!({"city": "Paris", "unit": "celsius"}),
                ),
            ],
        },
        Message::tool_results([result(
            "call_2",
            "get_weather",
            "weather service unavailable",
            true,
        )]),
        Message {
            role: Role::Assistant,
            parts: vec![
                Part::reasoning("Report both; quote \"down\"."),
                Part::text("src has lib.rs and main.rs.\nThe weather service is \"down\"."),
            ],
        },
        Message {
            role: Role::User,
            parts: vec![
                Part::text("Here are three photos."),
                image(1),
                image(2),
                image(3),
            ],
        },
        Message {
            role: Role::Assistant,
            parts: vec![
                Part::Native(NativePart {
                    provider: "anthropic".into(),
                    model: "claude".into(),
                    value: json!({"signature": "abc", "type": "thinking"}),
                }),
                Part::text("Nice photos."),
            ],
        },
        Message::user("Delete the old ones."),
    ]
}

fn request() -> TurnRequest {
    TurnRequest::new(conversation())
        .system("You are a careful assistant working in the user's project.")
        .tools(tools())
}

/// The rendered conversation as readable text.
fn show(messages: &[EngineMessage]) -> String {
    let mut out = String::new();
    for m in messages {
        out.push_str(&format!("===== {:?}", m.role));
        if !m.images.is_empty() {
            let tags: Vec<u8> = m.images.iter().map(|i| i.data[0]).collect();
            out.push_str(&format!(" (images {tags:?})"));
        }
        out.push('\n');
        // The slot character is invisible in a snapshot; show where it is.
        out.push_str(&m.content.replace(IMAGE_SLOT, "<image slot>"));
        out.push('\n');
    }
    out
}

// ---------------------------------------------------------------- prompt and schema

#[test]
fn prompt_snapshot() {
    let engine = FakeEngine::answering("", &[1], EngineStop::Done);
    let turn = model(engine).engine_turn(&request());
    insta::assert_snapshot!(show(&turn.messages));
}

#[test]
fn answer_schema_snapshot() {
    let engine = FakeEngine::answering("", &[1], EngineStop::Done);
    let turn = model(engine).engine_turn(&request());
    assert_eq!(turn.schema, answer_schema(&tools()));
    // Sorted so the snapshot reads the same whether or not the build keeps map
    // insertion order; the order the engine sees is tested on its own below.
    insta::with_settings!({sort_maps => true}, {
        insta::assert_json_snapshot!(turn.schema);
    });
}

#[test]
fn engine_turn_carries_budget_temperature_and_seed() {
    let engine = FakeEngine::answering("", &[1], EngineStop::Done);
    let m = model(engine.clone())
        .with_seed(Some(7))
        .with_default_temperature(0.3);
    let turn = m.engine_turn(&request());
    assert_eq!(
        (turn.max_tokens, turn.temperature, turn.seed),
        (4096, 0.3, Some(7))
    );
    assert_eq!(turn.top_p, None);
    let turn = m.engine_turn(&request().max_tokens(99).temperature(0.9));
    assert_eq!((turn.max_tokens, turn.temperature), (99, 0.9));
    // The request's settings win over the model's defaults; a stop sequence
    // (which would cut the JSON answer) is not passed on.
    let settings = GenerationSettings::new()
        .top_p(0.8)
        .seed(11)
        .stop(["never"]);
    let turn = m.engine_turn(&request().settings(settings));
    assert_eq!((turn.top_p, turn.seed), (Some(0.8), Some(11)));
}

#[test]
fn model_info_reports_engine() {
    let info = LocalChatModel::new("mlx", FakeEngine::answering("", &[1], EngineStop::Done)).info();
    assert_eq!(
        (
            info.provider.as_str(),
            info.model.as_str(),
            info.location,
            info.context_window,
            info.sends_to
        ),
        ("mlx", "tiny-test", ModelLocation::Local, Some(8192), None)
    );
}

#[test]
fn without_tools_only_a_reply_is_possible() {
    let schema = answer_schema(&[]);
    let branches = schema["anyOf"].as_array().unwrap();
    assert_eq!(branches.len(), 1);
    assert!(branches[0]["properties"].get("reply").is_some());
    let engine = FakeEngine::answering("", &[1], EngineStop::Done);
    let turn = model(engine).engine_turn(&request().tools(vec![]));
    let system = &turn.messages[0].content;
    assert!(
        !system.contains("# Tools") && system.contains("\"reply\""),
        "{system}"
    );
}

/// Every branch lists `analysis` first, then `call` or `reply`, in the map the
/// engine receives and in the serialized text an engine may pass on.
#[test]
fn keys_are_ordered_analysis_call_reply() {
    let schema = answer_schema(&tools());
    let text = serde_json::to_string(&schema).unwrap();
    let reparsed: Value = serde_json::from_str(&text).unwrap();
    for schema in [&schema, &reparsed] {
        let branches = schema["anyOf"].as_array().unwrap();
        assert_eq!(branches.len(), 8, "5 tools + 2 search choices + reply");
        for branch in branches {
            let keys: Vec<&str> = branch["properties"]
                .as_object()
                .unwrap()
                .keys()
                .map(String::as_str)
                .collect();
            assert!(
                keys == ["analysis", "call"] || keys == ["analysis", "reply"],
                "{keys:?}"
            );
            assert_eq!(branch["required"], json!(keys));
            let branch_text = serde_json::to_string(branch).unwrap();
            let analysis = branch_text.find("\"analysis\":").unwrap();
            let second = branch_text
                .find("\"call\":")
                .or_else(|| branch_text.find("\"reply\":"))
                .unwrap();
            assert!(analysis < second, "{branch_text}");
            assert!(text.contains(&branch_text));
        }
    }
    // In the whole text too: the reply branch comes last and `analysis` opens it.
    let reply_branch = text.rfind("\"reply\":").unwrap();
    assert!(
        text[..reply_branch].rfind("\"analysis\":").unwrap() > text.rfind("\"call\":").unwrap()
    );
}

#[test]
fn answer_schema_is_a_valid_schema_that_admits_answers_and_rejects_others() {
    let schema = answer_schema(&tools());
    jsonschema::meta::validate(&schema).expect("the answer schema is not a valid JSON Schema");
    let validator = jsonschema::validator_for(&schema).expect("the answer schema does not compile");

    let long_analysis = "a".repeat(ANALYSIS_MAX_CHARS as usize + 1);
    let long_reply = "r".repeat(REPLY_MAX_CHARS as usize + 1);
    let long_argument = "p".repeat(1001);
    let valid = [
        json!({"analysis": "", "reply": "hi"}),
        json!({"analysis": "read it", "call": {"read_file": {"path": "a.txt"}}}),
        json!({"analysis": "x", "call": {"read_file": {"max_lines": 3, "path": "a.txt"}}}),
        json!({"analysis": "x", "call": {"search": {"query": "fn main"}}}),
        json!({"analysis": "x", "call": {"search": {"path": "src", "pattern": "fn\\s+main"}}}),
        json!({"analysis": "x", "call": {"delete_files": {"ids": ["f1", "f2"]}}}),
        json!({"analysis": "x", "call": {"get_weather": {"city": "Paris", "unit": "fahrenheit"}}}),
        json!({"analysis": "a".repeat(ANALYSIS_MAX_CHARS as usize), "reply": "r".repeat(REPLY_MAX_CHARS as usize)}),
    ];
    for answer in &valid {
        assert!(validator.is_valid(answer), "should be valid: {answer}");
    }
    let invalid = [
        (
            "unknown tool",
            json!({"analysis": "x", "call": {"format_disk": {}}}),
        ),
        (
            "extra key",
            json!({"analysis": "x", "reply": "hi", "mood": "happy"}),
        ),
        (
            "extra argument",
            json!({"analysis": "x", "call": {"read_file": {"path": "a", "mode": "rb"}}}),
        ),
        (
            "too long analysis",
            json!({"analysis": long_analysis, "reply": "hi"}),
        ),
        (
            "too long reply",
            json!({"analysis": "", "reply": long_reply}),
        ),
        (
            "too long argument",
            json!({"analysis": "", "call": {"read_file": {"path": long_argument}}}),
        ),
        ("no analysis", json!({"reply": "hi"})),
        (
            "call and reply",
            json!({"analysis": "x", "call": {"list_dir": {"path": "."}}, "reply": "hi"}),
        ),
        (
            "two tools",
            json!({"analysis": "x", "call": {"list_dir": {"path": "."}, "read_file": {"path": "a"}}}),
        ),
        (
            "missing argument",
            json!({"analysis": "x", "call": {"write_file": {"path": "a"}}}),
        ),
        (
            "wrong argument type",
            json!({"analysis": "x", "call": {"read_file": {"max_lines": "3", "path": "a"}}}),
        ),
        (
            "both choices",
            json!({"analysis": "x", "call": {"search": {"pattern": "a", "query": "b"}}}),
        ),
        (
            "no choice",
            json!({"analysis": "x", "call": {"search": {"path": "src"}}}),
        ),
        (
            "enum",
            json!({"analysis": "x", "call": {"get_weather": {"city": "Oslo", "unit": "kelvin"}}}),
        ),
        (
            "ids not strings",
            json!({"analysis": "x", "call": {"delete_files": {"ids": [1]}}}),
        ),
    ];
    for (why, answer) in &invalid {
        assert!(
            !validator.is_valid(answer),
            "should be invalid ({why}): {answer}"
        );
    }
}

#[test]
fn a_tool_that_cannot_be_shaped_is_left_out_not_fatal() {
    let mut tools = tools();
    tools.push(tool(
        "broken",
        "Has a dangling reference.",
        json!({"properties": {"x": {"$ref": "#/$defs/missing"}}, "type": "object"}),
    ));
    let schema = answer_schema(&tools);
    assert!(!serde_json::to_string(&schema).unwrap().contains("broken"));
    assert_eq!(schema["anyOf"].as_array().unwrap().len(), 8);
    let turn = model(FakeEngine::answering("", &[1], EngineStop::Done))
        .engine_turn(&request().tools(tools));
    assert!(!turn.messages[0].content.contains("broken"));
}

#[test]
fn a_duplicate_tool_name_is_offered_once() {
    let mut tools = tools();
    tools.push(tool("read_file", "Another one.", json!({"type": "object"})));
    assert_eq!(answer_schema(&tools), answer_schema(&self::tools()));
}

// ---------------------------------------------------------------- history rendering

#[test]
fn parallel_calls_are_interleaved_with_their_results() {
    let messages = vec![
        Message::user("Read a and b."),
        Message {
            role: Role::Assistant,
            parts: vec![
                Part::text("Reading both."),
                call("x1", "read_file", json!({"path": "a"})),
                call("x2", "read_file", json!({"path": "b"})),
            ],
        },
        Message::tool_results([
            result("x2", "read_file", "B", false),
            result("x1", "read_file", "A", false),
            result("zz", "list_dir", "stray", false),
        ]),
    ];
    let turn = model(FakeEngine::answering("", &[1], EngineStop::Done))
        .engine_turn(&TurnRequest::new(messages).tools(tools()));
    insta::assert_snapshot!(show(&turn.messages[1..]), @r#"
    ===== User
    Read a and b.
    ===== Assistant
    {"analysis":"Reading both.","call":{"read_file":{"path":"a"}}}
    ===== User
    Result of read_file: A
    ===== Assistant
    {"analysis":"","call":{"read_file":{"path":"b"}}}
    ===== User
    Result of read_file: B

    Result of list_dir: stray
    "#);
}

/// What the model produced, stored as the session stores it, renders back as
/// exactly the JSON it wrote.
#[tokio::test]
async fn earlier_turns_render_as_the_json_the_model_wrote() {
    let answers = [
        r#"{"analysis":"Look at \"src\" first.\n","call":{"list_dir":{"path":"src","recursive":true}}}"#,
        r#"{"analysis":"Done: 😀 é","reply":"Two files:\n\tlib.rs \\ main.rs"}"#,
    ];
    for answer in answers {
        let engine = FakeEngine::answering(answer, &[3, 1, 5], EngineStop::Done);
        let m = model(engine.clone());
        let mut messages = vec![Message::user("go")];
        let turn = run(&m, TurnRequest::new(messages.clone()).tools(tools()))
            .await
            .unwrap();
        messages.push(turn.into_message());
        let next = m.engine_turn(&TurnRequest::new(messages).tools(tools()));
        assert_eq!(next.messages.last().unwrap().content, answer);
    }
}

#[test]
fn newest_two_images_are_attached_older_ones_become_placeholders() {
    let messages = vec![
        Message {
            role: Role::User,
            parts: vec![image(1), Part::text("first")],
        },
        Message::tool_results([ToolResult {
            call_id: "c".into(),
            name: "snap".into(),
            parts: vec![Part::text("shot"), image(2)],
            is_error: false,
        }]),
        Message {
            role: Role::User,
            parts: vec![image(3), image(4)],
        },
    ];
    let turn = model(FakeEngine::answering("", &[1], EngineStop::Done))
        .engine_turn(&TurnRequest::new(messages));
    insta::assert_snapshot!(show(&turn.messages[1..]), @r"
    ===== User (images [3, 4])
    [image omitted]
    first

    Result of snap: shot
    [image omitted]

    <image slot>
    <image slot>
    ");
}

#[test]
fn images_keep_their_place_as_slots_and_slot_characters_in_text_are_dropped() {
    let messages = vec![Message {
        role: Role::User,
        parts: vec![
            Part::text("before \u{FFFC}"),
            image(1),
            Part::text("between"),
            image(2),
        ],
    }];
    let turn = model(FakeEngine::answering("", &[1], EngineStop::Done))
        .engine_turn(&TurnRequest::new(messages));
    let user = &turn.messages[1];
    assert_eq!(
        user.content,
        format!("before \n{IMAGE_SLOT}\nbetween\n{IMAGE_SLOT}")
    );
    assert_eq!(user.images.len(), 2);
}

#[tokio::test]
async fn a_blind_engine_gets_a_note_for_each_image_and_the_turn_succeeds() {
    let engine = FakeEngine::blind(r#"{"analysis":"","reply":"I cannot see it."}"#);
    let messages = vec![
        Message::user("What is in the screenshot?"),
        Message {
            role: Role::Assistant,
            parts: vec![call("call_1", "snap", json!({}))],
        },
        Message::tool_results([ToolResult {
            call_id: "call_1".into(),
            name: "snap".into(),
            parts: vec![Part::text("shot"), image(2)],
            is_error: false,
        }]),
    ];
    let m = model(engine.clone());
    assert!(!m.info().vision);
    let turn = tokio::time::timeout(
        Duration::from_secs(10),
        collect_turn(m.turn(TurnRequest::new(messages), CancellationToken::new())),
    )
    .await
    .expect("the turn hung")
    .unwrap();
    assert_eq!(turn.stop, Some(StopReason::EndTurn));
    let sent = engine.last_turn();
    assert!(sent.messages.iter().all(|m| m.images.is_empty()));
    assert!(
        sent.messages
            .iter()
            .all(|m| !m.content.contains(IMAGE_SLOT))
    );
    let last = &sent.messages.last().unwrap().content;
    assert!(
        last.contains("Result of snap: shot\n[image/png 3 bytes, not shown to this model]"),
        "{last}"
    );
}

// ---------------------------------------------------------------- streaming and parsing

const REPLY: &str = r#"{"analysis":"Quote \"x\", path C:\\tmp,\nemoji \uD83D\uDE00 😀, é\u00e9 \u4e2d中 \/ \b\f\r\t.","reply":"Héllo \"wörld\"\n\u2603 ☃ \uD834\uDD1E 𝄞 done\\"}"#;
const REPLY_ANALYSIS: &str = "Quote \"x\", path C:\\tmp,\nemoji 😀 😀, éé 中中 / \u{8}\u{c}\r\t.";
const REPLY_TEXT: &str = "Héllo \"wörld\"\n☃ ☃ 𝄞 𝄞 done\\";
const CALL: &str = r#"{"analysis":"Search for \"main\" in ü.","call":{"search":{"path":"src","query":"fn \"main\" \\ é 😀"}}}"#;

/// Feed `chunks`, return (reasoning, text) and check that no other event came.
fn decode(chunks: &[&str]) -> (String, String) {
    let mut decoder = AnswerDecoder::new();
    let mut turn = AssistantTurn::default();
    for chunk in chunks {
        for event in decoder.feed(chunk) {
            assert!(
                matches!(
                    event,
                    TurnEvent::ReasoningDelta { .. }
                        | TurnEvent::TextDelta { .. }
                        | TurnEvent::ToolCallDelta { .. }
                ),
                "{event:?}"
            );
            turn.push(event);
        }
    }
    assert_eq!(decoder.raw(), chunks.concat());
    let reasoning = turn.parts.iter().filter_map(|p| match p {
        Part::Reasoning { text } => Some(text.as_str()),
        _ => None,
    });
    (reasoning.collect(), turn.text())
}

#[test]
fn deltas_are_exact_for_every_split() {
    for (answer, analysis, reply) in [
        (REPLY, REPLY_ANALYSIS, REPLY_TEXT),
        (CALL, "Search for \"main\" in ü.", ""),
    ] {
        // The expectations themselves agree with a real JSON parser.
        let parsed: Value = serde_json::from_str(answer).unwrap();
        assert_eq!(parsed["analysis"], analysis);
        assert_eq!(
            parsed.get("reply").and_then(Value::as_str).unwrap_or(""),
            reply
        );

        let expected = (analysis.to_string(), reply.to_string());
        let boundaries: Vec<usize> = (0..=answer.len())
            .filter(|&i| answer.is_char_boundary(i))
            .collect();
        for &i in &boundaries {
            assert_eq!(
                decode(&[&answer[..i], &answer[i..]]),
                expected,
                "split at {i}"
            );
        }
        // Every pair of split points: 3 chunks, including empty ones.
        for (n, &i) in boundaries.iter().enumerate() {
            for &j in &boundaries[n..] {
                assert_eq!(
                    decode(&[&answer[..i], &answer[i..j], &answer[j..]]),
                    expected,
                    "split at {i}, {j}"
                );
            }
        }
        // One character per chunk, the narrowest an engine sends.
        let singles: Vec<String> = answer.chars().map(String::from).collect();
        let singles: Vec<&str> = singles.iter().map(String::as_str).collect();
        assert_eq!(decode(&singles), expected);
    }
}

/// While the answer is incomplete, what has been streamed is exactly what the
/// prefix holds so far, and the strict parse refuses it.
#[test]
fn partial_answers_stream_their_prefix_and_do_not_parse() {
    let full = decode(&[REPLY]);
    let mut longest = (0, 0);
    for i in (0..REPLY.len()).filter(|&i| REPLY.is_char_boundary(i)) {
        let (analysis, reply) = decode(&[&REPLY[..i]]);
        assert!(
            full.0.starts_with(&analysis) && full.1.starts_with(&reply),
            "prefix {i}"
        );
        assert!(
            analysis.len() >= longest.0 && reply.len() >= longest.1,
            "streamed text shrank at {i}"
        );
        longest = (analysis.len(), reply.len());
        assert!(parse_answer(&REPLY[..i]).is_err(), "prefix {i} parsed");
    }
    // Whatever was fed last, a full answer leaves nothing unstreamed.
    assert_eq!(longest.0, full.0.len());
}

#[tokio::test]
async fn a_reply_streams_reasoning_then_text_then_usage_and_end() {
    for sizes in [&[1][..], &[2, 7, 1], &[1000]] {
        let engine = FakeEngine::answering(REPLY, sizes, EngineStop::Done);
        let turn = run(&model(engine), request()).await.unwrap();
        assert_eq!(
            turn.parts,
            vec![Part::reasoning(REPLY_ANALYSIS), Part::text(REPLY_TEXT)],
            "chunk sizes {sizes:?}"
        );
        assert_eq!(
            (turn.usage, turn.stop),
            (Some(usage()), Some(StopReason::EndTurn))
        );
    }
}

#[tokio::test]
async fn a_call_becomes_one_tool_call_with_a_reproducible_id() {
    let engine = FakeEngine::answering(CALL, &[4, 1], EngineStop::Done);
    let m = model(engine.clone());
    let mut stream = m.turn(request(), CancellationToken::new());
    let mut events = Vec::new();
    while let Some(event) = tokio::time::timeout(Duration::from_secs(10), stream.next())
        .await
        .unwrap()
    {
        events.push(event.unwrap());
    }
    let tail: Vec<&TurnEvent> = events
        .iter()
        .skip_while(|e| {
            matches!(
                e,
                TurnEvent::ReasoningDelta { .. } | TurnEvent::ToolCallDelta { .. }
            )
        })
        .collect();
    // The call streamed before it came whole: named, with its id, on the
    // first delta, and its fragments are the arguments as written.
    let (first, fragments) = common::call_deltas(&events, 0);
    assert_eq!(first, Some(("call_3".into(), "search".into())));
    assert_eq!(fragments, r#"{"path":"src","query":"fn \"main\" \\ é 😀"}"#);
    // The conversation already holds call_1 and call_2.
    assert_eq!(
        tail,
        [
            &TurnEvent::ToolCall(ToolCall {
                id: "call_3".into(),
                name: "search".into(),
                arguments: json!({"path": "src", "query": "fn \"main\" \\ é 😀"}),
            }),
            &TurnEvent::Usage(usage()),
            &TurnEvent::End {
                stop: StopReason::ToolCalls
            },
        ]
    );
    assert!(events.len() > 3, "the analysis was streamed as it came");
    assert_eq!(engine.last_turn(), m.engine_turn(&request()));
}

#[tokio::test]
async fn call_ids_skip_ids_already_taken() {
    let engine = FakeEngine::answering(CALL, &[50], EngineStop::Done);
    let messages = vec![Message {
        role: Role::Assistant,
        parts: vec![
            call("call_2", "list_dir", json!({"path": "."})),
            call("call_3", "list_dir", json!({"path": "."})),
        ],
    }];
    let turn = run(&model(engine), TurnRequest::new(messages).tools(tools()))
        .await
        .unwrap();
    assert_eq!(turn.tool_calls()[0].id, "call_4");
}

#[tokio::test]
async fn calling_a_tool_not_offered_is_a_protocol_error() {
    let answer = r#"{"analysis":"","call":{"format_disk":{}}}"#;
    let engine = FakeEngine::answering(answer, &[5], EngineStop::Done);
    let err = run(&model(engine), request()).await.unwrap_err();
    assert_eq!(err.kind().as_str(), "protocol");
    assert!(
        err.to_string()
            .contains("`format_disk`, which was not offered (offered: read_file, write_file"),
        "{err}"
    );
}

#[tokio::test]
async fn a_malformed_finished_answer_is_a_protocol_error_quoting_its_end() {
    let answer = format!(
        r#"{{"analysis":"{}","reply":"ok"}} trailing"#,
        "x".repeat(400)
    );
    let engine = FakeEngine::answering(&answer, &[9], EngineStop::Done);
    let err = run(&model(engine), request()).await.unwrap_err();
    let message = err.to_string();
    assert_eq!(err.kind().as_str(), "protocol");
    assert!(
        message.contains("not valid JSON") && message.ends_with(r#"xxx","reply":"ok"} trailing"#),
        "{message}"
    );
    assert!(
        message.len() < 400,
        "the whole answer was quoted: {message}"
    );
}

#[tokio::test]
async fn running_out_of_tokens_keeps_the_streamed_text_and_makes_no_call() {
    let cut_reply = &REPLY[..REPLY.find("done").unwrap()];
    let engine = FakeEngine::answering(cut_reply, &[3], EngineStop::MaxTokens);
    let turn = run(&model(engine), request()).await.unwrap();
    assert_eq!(turn.stop, Some(StopReason::MaxTokens));
    assert_eq!(turn.text(), REPLY_TEXT[..REPLY_TEXT.find("done").unwrap()]);

    let cut_call = &CALL[..CALL.find("fn").unwrap()];
    let engine = FakeEngine::answering(cut_call, &[3], EngineStop::MaxTokens);
    let turn = run(&model(engine), request()).await.unwrap();
    assert_eq!(
        (turn.stop.clone(), turn.tool_calls().len()),
        (Some(StopReason::MaxTokens), 0)
    );
    assert_eq!(turn.usage, Some(usage()));

    // Complete exactly at the budget: a normal answer.
    let engine = FakeEngine::answering(CALL, &[3], EngineStop::MaxTokens);
    let turn = run(&model(engine), request()).await.unwrap();
    assert_eq!(
        (turn.stop.clone(), turn.tool_calls().len()),
        (Some(StopReason::ToolCalls), 1)
    );
}

#[tokio::test]
async fn an_engine_stream_that_just_ends_is_transient() {
    let engine = FakeEngine::scripted(
        vec![Ok(EngineEvent::Delta {
            text: r#"{"analysis":"hm"#.into(),
        })],
        false,
    );
    let err = run(&model(engine), request()).await.unwrap_err();
    assert!(err.is_transient(), "{err:?}");
    assert!(err.to_string().contains(r#"{"analysis":"hm"#), "{err}");
}

#[tokio::test]
async fn engine_errors_pass_through() {
    let overflow = ProviderError::ContextOverflow {
        message: "9000 tokens > 8192".into(),
    };
    let engine = FakeEngine::scripted(vec![Err(overflow.clone())], false);
    assert_eq!(run(&model(engine), request()).await.unwrap_err(), overflow);
}

#[tokio::test]
async fn cancelling_mid_answer_ends_promptly() {
    let engine = FakeEngine::scripted(
        vec![Ok(EngineEvent::Delta {
            text: r#"{"analysis":"thinking"#.into(),
        })],
        true,
    );
    let m = model(engine);
    let cancel = CancellationToken::new();
    let mut stream = m.turn(request(), cancel.clone());
    let first = tokio::time::timeout(Duration::from_secs(10), stream.next())
        .await
        .unwrap();
    assert_eq!(
        first.unwrap().unwrap(),
        TurnEvent::ReasoningDelta {
            text: "thinking".into()
        }
    );
    cancel.cancel();
    let rest: Vec<_> = tokio::time::timeout(Duration::from_secs(10), stream.collect::<Vec<_>>())
        .await
        .unwrap();
    assert_eq!(
        rest,
        vec![Ok(TurnEvent::End {
            stop: StopReason::Cancelled
        })]
    );
}

#[tokio::test]
async fn an_engine_reporting_cancelled_ends_cancelled_with_usage() {
    let engine = FakeEngine::answering(r#"{"analysis":"a"#, &[2], EngineStop::Cancelled);
    let turn = run(&model(engine), request()).await.unwrap();
    assert_eq!(
        (turn.stop, turn.usage),
        (Some(StopReason::Cancelled), Some(usage()))
    );
}

#[tokio::test]
async fn cancelled_before_starting_does_not_run_the_engine() {
    let engine = FakeEngine::answering(REPLY, &[2], EngineStop::Done);
    let cancel = CancellationToken::new();
    cancel.cancel();
    let events: Vec<_> = model(engine.clone())
        .turn(request(), cancel)
        .collect()
        .await;
    assert_eq!(
        events,
        vec![Ok(TurnEvent::End {
            stop: StopReason::Cancelled
        })]
    );
    assert!(engine.turns.lock().unwrap().is_empty());
}

/// Write `text` as a JSON string body, choosing at random for each character
/// among the ways JSON allows: as is, a short escape, or `\uXXXX` (a surrogate
/// pair beyond the BMP).
fn escape_randomly(text: &str, rng: &mut impl rand::Rng) -> String {
    let mut out = String::new();
    for c in text.chars() {
        let short = match c {
            '"' => Some("\\\""),
            '\\' => Some("\\\\"),
            '/' => Some("\\/"),
            '\n' => Some("\\n"),
            '\t' => Some("\\t"),
            '\r' => Some("\\r"),
            '\u{8}' => Some("\\b"),
            '\u{c}' => Some("\\f"),
            _ => None,
        };
        let must_escape = c == '"' || c == '\\' || c < ' ';
        match rng.random_range(0..3) {
            0 if !must_escape => out.push(c),
            1 if short.is_some() => out.push_str(short.unwrap_or_default()),
            _ => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    let hex = format!("{unit:04x}");
                    out.push_str("\\u");
                    out.push_str(&if rng.random_bool(0.5) {
                        hex.to_uppercase()
                    } else {
                        hex
                    });
                }
            }
        }
    }
    out
}

#[test]
fn random_texts_with_random_escapes_and_random_chunks_decode_exactly() {
    use rand::{Rng as _, SeedableRng as _};
    const POOL: &[char] = &[
        'a', 'z', ' ', '"', '\\', '/', '\n', '\t', '\r', '\u{8}', '\u{c}', '\u{1}', 'é', '中',
        '😀', '𝄞', '\u{FFFF}', '{', '}', ':', ',',
    ];
    let mut rng = rand::rngs::StdRng::seed_from_u64(0x10ca1);
    for round in 0..300 {
        let text = |rng: &mut rand::rngs::StdRng| -> String {
            let len = rng.random_range(0..40);
            (0..len)
                .map(|_| POOL[rng.random_range(0..POOL.len())])
                .collect()
        };
        let (analysis, reply) = (text(&mut rng), text(&mut rng));
        let answer = format!(
            r#"{{"analysis":"{}","reply":"{}"}}"#,
            escape_randomly(&analysis, &mut rng),
            escape_randomly(&reply, &mut rng)
        );
        let parsed: Value = serde_json::from_str(&answer).unwrap();
        assert_eq!(
            (parsed["analysis"].as_str(), parsed["reply"].as_str()),
            (Some(&*analysis), Some(&*reply))
        );

        let mut pieces = Vec::new();
        let mut rest = answer.as_str();
        while !rest.is_empty() {
            let mut cut = rng.random_range(0..=rest.len().min(12));
            while !rest.is_char_boundary(cut) {
                cut += 1;
            }
            let (piece, tail) = rest.split_at(cut);
            pieces.push(piece);
            rest = tail;
        }
        assert_eq!(
            decode(&pieces),
            (analysis.clone(), reply.clone()),
            "round {round}: {answer} in {pieces:?}"
        );
        assert_eq!(
            parse_answer(&answer).unwrap(),
            lrg_providers::local_chat::Answer::Reply { analysis, reply }
        );
    }
}

#[test]
fn tools_without_arguments_or_with_alternative_shapes_are_listed() {
    let tools = vec![
        tool("now", "", json!({"type": "object"})),
        tool(
            "open",
            "Open a file or a URL.",
            json!({"anyOf": [
                {"properties": {"file": {"description": "A path.", "type": "string"}}, "required": ["file"], "type": "object"},
                {"properties": {"url": {"type": "string"}}, "required": ["url"], "type": "object"}
            ]}),
        ),
    ];
    let schema = answer_schema(&tools);
    let validator = jsonschema::validator_for(&schema).unwrap();
    assert!(validator.is_valid(&json!({"analysis": "", "call": {"now": {}}})));
    assert!(!validator.is_valid(&json!({"analysis": "", "call": {"now": {"tz": "UTC"}}})));
    assert!(
        validator
            .is_valid(&json!({"analysis": "", "call": {"open": {"url": "https://example.com"}}}))
    );
    let turn = model(FakeEngine::answering("", &[1], EngineStop::Done))
        .engine_turn(&TurnRequest::default().tools(tools));
    let system = &turn.messages[0].content;
    let tools_section =
        &system[system.find("## now").unwrap()..system.find("# Answer format").unwrap()];
    insta::assert_snapshot!(tools_section, @r"
    ## now
    - (no arguments: call it with {})

    ## open
    Open a file or a URL.
    - file (string, choice): A path.
    - url (string, choice)
    Give exactly one of: file, url.
    ");
}

#[path = "local_chat_typed/mod.rs"]
mod typed;
