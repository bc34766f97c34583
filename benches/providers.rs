//! Streaming throughput of the provider decoders, and of `OpenAiChat` end to
//! end against a local fake server streaming 100k deltas, side by side with
//! async-openai, genai and a floor ("read bytes, split SSE lines,
//! `serde_json::from_slice` each frame") on the very same stream.
//!
//! The Responses API decoder runs beside async-openai's Responses event
//! types and a floor on one Responses stream (`decode_responses_100k_deltas`).
//!
//! One tool call whose arguments stream in 100k fragments, written one HTTP
//! chunk per SSE event and in 16 KiB chunks: decoded alone
//! (`decode_tool_call_100k_fragments_*`) and end to end beside async-openai
//! and genai (`openai_tool_call_stream_*`), and the time to the first sign of
//! the call beside the whole stream (`openai_tool_call_first_sign_*`).
//!
//! Run: `cargo bench -p lrg-benches --bench providers`. The numbers to read
//! are the ratios between the lines of one group, not the absolute times.
#![allow(missing_docs)]
#![allow(clippy::unwrap_used, clippy::expect_used)] // a bench: a failure to set up should stop it loudly

use std::convert::Infallible;
use std::hint::black_box;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use futures::StreamExt as _;
use lrg_benches::{openai_chunk, openai_usage_chunk};
use lrg_providers::ollama::OllamaDecoder;
use lrg_providers::openai::{Dialect, OpenAiChat, OpenAiConfig, OpenAiDecoder};
use lrg_providers::responses::ResponsesDecoder;
use lrg_providers::wire::{Decoder, Frame, NdjsonFramer, SseFramer};
use lrg_providers::{ApiKey, ChatModel, Message, ToolSpec, TurnEvent, TurnRequest};
use serde::Deserialize;
use tokio_util::sync::CancellationToken;

/// Deltas per streamed answer.
const DELTAS: usize = 100_000;
/// Events per network write: a server flushing every few tokens.
const EVENTS_PER_WRITE: usize = 8;

const WORDS: &[&str] = &[
    " The",
    " model",
    " streams",
    " tokens",
    " one",
    " at",
    " a",
    " time",
    ",",
    " and",
    " each",
    " arrives",
    " as",
    " its",
    " own",
    " event",
    ".",
    "\n\n",
    " It",
    " may",
    " say",
    " \"quoted\"",
    " things",
    " or",
    " use",
    " émojis",
    " 🙂",
    " and",
    " tabs\t",
    " too",
    ":",
    " `code`",
    " {braces}",
];

fn word(i: usize) -> &'static str {
    WORDS[i % WORDS.len()]
}

/// The whole answer, in network-sized writes.
fn openai_stream() -> Vec<Bytes> {
    let mut events = Vec::with_capacity(DELTAS + 4);
    events.push(openai_chunk(
        &serde_json::json!({"role": "assistant", "content": "", "refusal": null}),
        None,
    ));
    for i in 0..DELTAS {
        events.push(openai_chunk(&serde_json::json!({"content": word(i)}), None));
    }
    events.push(openai_chunk(&serde_json::json!({}), Some("stop")));
    events.push(openai_usage_chunk(19, DELTAS));
    events.push("data: [DONE]\n\n".to_string());
    events
        .chunks(EVENTS_PER_WRITE)
        .map(|c| Bytes::from(c.concat()))
        .collect()
}

fn ollama_stream() -> Vec<Bytes> {
    let mut lines = Vec::with_capacity(DELTAS + 1);
    for i in 0..DELTAS {
        let line = serde_json::json!({
            "model": "qwen3:8b", "created_at": "2025-06-01T10:00:00.123456789Z",
            "message": {"role": "assistant", "content": word(i)}, "done": false
        });
        lines.push(format!("{line}\n"));
    }
    let done = serde_json::json!({
        "model": "qwen3:8b", "created_at": "2025-06-01T10:00:09.123456789Z", "message": {"role": "assistant", "content": ""},
        "done": true, "done_reason": "stop", "total_duration": 9_123_456_789_u64, "load_duration": 12_345_678,
        "prompt_eval_count": 19, "prompt_eval_duration": 23_456_789, "eval_count": DELTAS, "eval_duration": 9_000_000_000_u64
    });
    lines.push(format!("{done}\n"));
    lines
        .chunks(EVENTS_PER_WRITE)
        .map(|c| Bytes::from(c.concat()))
        .collect()
}

// ---- the floor: the least a client can do with such a stream ----

#[derive(Deserialize)]
struct FloorChunk {
    #[serde(default)]
    choices: Vec<FloorChoice>,
}

#[derive(Deserialize)]
struct FloorChoice {
    #[serde(default)]
    delta: FloorDelta,
}

#[derive(Deserialize, Default)]
struct FloorDelta {
    #[serde(default)]
    content: Option<String>,
}

/// Splits SSE lines and parses each `data:` line into the smallest typed
/// struct that yields the text; returns the number of text deltas.
#[derive(Default)]
struct Floor {
    buf: Vec<u8>,
    deltas: usize,
}

impl Floor {
    fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
        let mut start = 0;
        while let Some(nl) = self.buf[start..].iter().position(|&b| b == b'\n') {
            let line = &self.buf[start..start + nl];
            if let Some(data) = line.strip_prefix(b"data: ")
                && data != b"[DONE]"
            {
                let chunk: FloorChunk = serde_json::from_slice(data).unwrap();
                for choice in chunk.choices {
                    if let Some(text) = choice.delta.content
                        && !text.is_empty()
                    {
                        black_box(text);
                        self.deltas += 1;
                    }
                }
            }
            start += nl + 1;
        }
        self.buf.drain(..start);
    }
}

// ---- decoders alone ----

fn count_text(events: &mut Vec<TurnEvent>) -> usize {
    let n = events
        .iter()
        .filter(|e| matches!(e, TurnEvent::TextDelta { .. }))
        .count();
    black_box(&events);
    events.clear();
    n
}

fn decode_openai(chunks: &[Bytes]) -> usize {
    let mut framer = SseFramer::default();
    let mut decoder = OpenAiDecoder::new(Dialect::OPENAI.reasoning_fields, &[]);
    let (mut frames, mut events, mut deltas) = (Vec::<Frame>::new(), Vec::new(), 0);
    for chunk in chunks {
        framer.push(chunk, &mut frames);
        for frame in frames.drain(..) {
            decoder.decode(&frame, &mut events).unwrap();
        }
        deltas += count_text(&mut events);
    }
    framer.finish(&mut frames);
    decoder.finish(&mut events).unwrap();
    deltas + count_text(&mut events)
}

fn decode_ollama(chunks: &[Bytes]) -> usize {
    let mut framer = NdjsonFramer::default();
    let mut decoder = OllamaDecoder::new(&[]);
    let (mut frames, mut events, mut deltas) = (Vec::<Frame>::new(), Vec::new(), 0);
    for chunk in chunks {
        framer.push(chunk, &mut frames);
        for frame in frames.drain(..) {
            decoder.decode(&frame, &mut events).unwrap();
        }
        deltas += count_text(&mut events);
    }
    framer.finish(&mut frames);
    decoder.finish(&mut events).unwrap();
    deltas + count_text(&mut events)
}

fn decoders(c: &mut Criterion) {
    let openai = openai_stream();
    let ollama = ollama_stream();
    assert_eq!(decode_openai(&openai), DELTAS);
    assert_eq!(decode_ollama(&ollama), DELTAS);
    let mut group = c.benchmark_group("decode_100k_deltas");
    group
        .sample_size(20)
        .measurement_time(Duration::from_secs(8))
        .throughput(Throughput::Elements(DELTAS as u64));
    group.bench_function("lrg_openai_sse", |b| {
        b.iter(|| decode_openai(black_box(&openai)))
    });
    group.bench_function("floor_sse_split_from_slice", |b| {
        b.iter(|| {
            let mut floor = Floor::default();
            for chunk in black_box(&openai) {
                floor.push(chunk);
            }
            assert_eq!(floor.deltas, DELTAS);
        })
    });
    group.bench_function("lrg_ollama_ndjson", |b| {
        b.iter(|| decode_ollama(black_box(&ollama)))
    });
    group.finish();
}

// ---- the Responses API: lrg's decoder, async-openai's types, a floor ----

/// One Responses event as api.openai.com writes it: its `event:` line, then
/// the JSON with its sequence number.
fn responses_event(seq: usize, mut event: serde_json::Value) -> String {
    event["sequence_number"] = serde_json::json!(seq);
    format!(
        "event: {}\ndata: {event}\n\n",
        event["type"].as_str().unwrap()
    )
}

fn responses_stream() -> Vec<Bytes> {
    let item = "msg_68b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5";
    let response = |status: &str, usage: serde_json::Value| {
        serde_json::json!({"id": "resp_68b1c2d3e4f5", "object": "response", "created_at": 1_756_000_000,
            "status": status, "model": "o4-mini-2025-04-16", "output": [], "usage": usage})
    };
    let message = |status: &str, text: &str| {
        serde_json::json!({"id": item, "type": "message", "status": status, "role": "assistant",
            "content": if text.is_empty() { serde_json::json!([]) } else {
                serde_json::json!([{"type": "output_text", "annotations": [], "logprobs": [], "text": text}]) }})
    };
    let mut events = vec![
        serde_json::json!({"type": "response.created", "response": response("in_progress", serde_json::Value::Null)}),
        serde_json::json!({"type": "response.output_item.added", "output_index": 0, "item": message("in_progress", "")}),
        serde_json::json!({"type": "response.content_part.added", "item_id": item, "output_index": 0, "content_index": 0,
            "part": {"type": "output_text", "annotations": [], "logprobs": [], "text": ""}}),
    ];
    for i in 0..DELTAS {
        events.push(serde_json::json!({"type": "response.output_text.delta", "item_id": item, "output_index": 0,
            "content_index": 0, "delta": word(i), "logprobs": [], "obfuscation": "k2Xr"}));
    }
    events.push(serde_json::json!({"type": "response.output_item.done", "output_index": 0, "item": message("completed", "(the story)")}));
    let usage = serde_json::json!({"input_tokens": 19, "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": DELTAS, "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": DELTAS + 19});
    events.push(
        serde_json::json!({"type": "response.completed", "response": response("completed", usage)}),
    );
    let events: Vec<String> = events
        .into_iter()
        .enumerate()
        .map(|(seq, e)| responses_event(seq, e))
        .collect();
    events
        .chunks(EVENTS_PER_WRITE)
        .map(|c| Bytes::from(c.concat()))
        .collect()
}

fn decode_responses(chunks: &[Bytes]) -> usize {
    let mut framer = SseFramer::default();
    let mut decoder = ResponsesDecoder::new("openai-responses", "o4-mini", false, &[]);
    let (mut frames, mut events, mut deltas) = (Vec::<Frame>::new(), Vec::new(), 0);
    for chunk in chunks {
        framer.push(chunk, &mut frames);
        for frame in frames.drain(..) {
            decoder.decode(&frame, &mut events).unwrap();
        }
        deltas += count_text(&mut events);
    }
    framer.finish(&mut frames);
    decoder.finish(&mut events).unwrap();
    deltas + count_text(&mut events)
}

/// async-openai's `ResponseStreamEvent` on the same frames (lrg's SSE
/// framer for both, so only the event decoding differs).
fn decode_responses_async_openai(chunks: &[Bytes]) -> usize {
    use async_openai::types::responses::ResponseStreamEvent;
    let mut framer = SseFramer::default();
    let (mut frames, mut deltas) = (Vec::<Frame>::new(), 0);
    for chunk in chunks {
        framer.push(chunk, &mut frames);
        for frame in frames.drain(..) {
            let event: ResponseStreamEvent = serde_json::from_str(&frame.data).unwrap();
            if let ResponseStreamEvent::ResponseOutputTextDelta(delta) = event
                && !delta.delta.is_empty()
            {
                black_box(delta.delta);
                deltas += 1;
            }
        }
    }
    deltas
}

#[derive(Deserialize)]
struct FloorEvent {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    delta: Option<String>,
}

/// The floor for the Responses stream: split lines, parse each `data:` line
/// into the smallest struct that yields a text delta.
fn decode_responses_floor(chunks: &[Bytes]) -> usize {
    let (mut buf, mut deltas) = (Vec::<u8>::new(), 0);
    for chunk in chunks {
        buf.extend_from_slice(chunk);
        let mut start = 0;
        while let Some(nl) = buf[start..].iter().position(|&b| b == b'\n') {
            if let Some(data) = buf[start..start + nl].strip_prefix(b"data: ") {
                let event: FloorEvent = serde_json::from_slice(data).unwrap();
                if event.kind == "response.output_text.delta"
                    && let Some(text) = event.delta.filter(|t| !t.is_empty())
                {
                    black_box(text);
                    deltas += 1;
                }
            }
            start += nl + 1;
        }
        buf.drain(..start);
    }
    deltas
}

fn responses_decoders(c: &mut Criterion) {
    let stream = responses_stream();
    assert_eq!(decode_responses(&stream), DELTAS, "lrg");
    assert_eq!(
        decode_responses_async_openai(&stream),
        DELTAS,
        "async-openai"
    );
    assert_eq!(decode_responses_floor(&stream), DELTAS, "floor");
    let mut group = c.benchmark_group("decode_responses_100k_deltas");
    group
        .sample_size(20)
        .measurement_time(Duration::from_secs(8))
        .throughput(Throughput::Elements(DELTAS as u64));
    group.bench_function("lrg_responses_sse", |b| {
        b.iter(|| decode_responses(black_box(&stream)))
    });
    group.bench_function("async_openai_response_stream_event", |b| {
        b.iter(|| decode_responses_async_openai(black_box(&stream)))
    });
    group.bench_function("floor_sse_split_from_slice", |b| {
        b.iter(|| decode_responses_floor(black_box(&stream)))
    });
    group.finish();
}

// ---- end to end against a local fake server ----

/// Serves the recorded stream at `/v1/chat/completions` on its own runtime
/// and thread, so the server does not share the clients' executor.
fn fake_server(chunks: Vec<Bytes>) -> SocketAddr {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            tx.send(listener.local_addr().unwrap()).unwrap();
            let app = axum::Router::new().route(
                "/v1/chat/completions",
                axum::routing::post(move || {
                    let chunks = chunks.clone();
                    async move {
                        let body = axum::body::Body::from_stream(futures::stream::iter(
                            chunks.into_iter().map(Ok::<_, Infallible>),
                        ));
                        ([("content-type", "text/event-stream")], body)
                    }
                }),
            );
            axum::serve(listener, app).await.unwrap();
        });
    });
    rx.recv().unwrap()
}

async fn via_lrg(model: &OpenAiChat) -> usize {
    let request = TurnRequest::new(vec![Message::user("Write a long story.")]);
    let mut stream = model.turn(request, CancellationToken::new());
    let mut deltas = 0;
    while let Some(event) = stream.next().await {
        if let TurnEvent::TextDelta { text } = event.unwrap() {
            black_box(text);
            deltas += 1;
        }
    }
    deltas
}

async fn via_floor(client: &reqwest::Client, url: &str) -> usize {
    let body = serde_json::json!({"model": "gpt-4.1", "stream": true, "messages": [{"role": "user", "content": "Write a long story."}]});
    let response = client
        .post(url)
        .bearer_auth("sk-bench")
        .json(&body)
        .send()
        .await
        .unwrap();
    let mut bytes = response.bytes_stream();
    let mut floor = Floor::default();
    while let Some(chunk) = bytes.next().await {
        floor.push(&chunk.unwrap());
    }
    floor.deltas
}

async fn via_async_openai(
    client: &async_openai::Client<async_openai::config::OpenAIConfig>,
) -> usize {
    use async_openai::types::chat::{
        ChatCompletionRequestUserMessageArgs, CreateChatCompletionRequestArgs,
    };
    let request = CreateChatCompletionRequestArgs::default()
        .model("gpt-4.1")
        .messages([ChatCompletionRequestUserMessageArgs::default()
            .content("Write a long story.")
            .build()
            .unwrap()
            .into()])
        .build()
        .unwrap();
    let mut stream = client.chat().create_stream(request).await.unwrap();
    let mut deltas = 0;
    while let Some(chunk) = stream.next().await {
        for choice in chunk.unwrap().choices {
            if let Some(text) = choice.delta.content
                && !text.is_empty()
            {
                black_box(text);
                deltas += 1;
            }
        }
    }
    deltas
}

async fn via_genai(client: &genai::Client) -> usize {
    use genai::chat::{ChatMessage, ChatRequest, ChatStreamEvent};
    let request = ChatRequest::new(vec![ChatMessage::user("Write a long story.")]);
    let response = client
        .exec_chat_stream("gpt-4.1", request, None)
        .await
        .unwrap();
    let mut stream = response.stream;
    let mut deltas = 0;
    while let Some(event) = stream.next().await {
        if let ChatStreamEvent::Chunk(chunk) = event.unwrap()
            && !chunk.content.is_empty()
        {
            black_box(chunk.content);
            deltas += 1;
        }
    }
    deltas
}

fn genai_client(base: &str) -> genai::Client {
    use genai::adapter::AdapterKind;
    use genai::resolver::{AuthData, Endpoint, ServiceTargetResolver};
    use genai::{ModelIden, ServiceTarget};
    let endpoint = format!("{base}/");
    let resolver = ServiceTargetResolver::from_resolver_fn(
        move |target: ServiceTarget| -> Result<ServiceTarget, genai::resolver::Error> {
            Ok(ServiceTarget {
                endpoint: Endpoint::from_owned(endpoint.clone()),
                auth: AuthData::from_single("sk-bench"),
                model: ModelIden::new(AdapterKind::OpenAI, target.model.model_name),
            })
        },
    );
    genai::Client::builder()
        .with_service_target_resolver(resolver)
        .build()
        .unwrap()
}

fn end_to_end(c: &mut Criterion) {
    let addr = fake_server(openai_stream());
    let base = format!("http://{addr}/v1");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();

    let lrg = OpenAiChat::new(
        OpenAiConfig::new(Dialect::OPENAI, &base, "gpt-4.1").with_api_key(ApiKey::new("sk-bench")),
    )
    .unwrap();
    let floor_client = reqwest::Client::new();
    let floor_url = format!("{base}/chat/completions");
    let async_openai = async_openai::Client::with_config(
        async_openai::config::OpenAIConfig::new()
            .with_api_base(&base)
            .with_api_key("sk-bench"),
    );
    let genai = genai_client(&base);

    // Every contender must see every delta, or the comparison means nothing.
    rt.block_on(async {
        assert_eq!(via_lrg(&lrg).await, DELTAS, "lrg");
        assert_eq!(via_floor(&floor_client, &floor_url).await, DELTAS, "floor");
        assert_eq!(
            via_async_openai(&async_openai).await,
            DELTAS,
            "async-openai"
        );
        assert_eq!(via_genai(&genai).await, DELTAS, "genai");
    });

    let mut group = c.benchmark_group("openai_stream_100k_deltas");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(10))
        .throughput(Throughput::Elements(DELTAS as u64));
    group.bench_function("floor_reqwest_split_from_slice", |b| {
        b.to_async(&rt)
            .iter(|| via_floor(&floor_client, &floor_url))
    });
    group.bench_function("lrg_OpenAiChat", |b| b.to_async(&rt).iter(|| via_lrg(&lrg)));
    group.bench_function("async_openai", |b| {
        b.to_async(&rt).iter(|| via_async_openai(&async_openai))
    });
    group.bench_function("genai", |b| b.to_async(&rt).iter(|| via_genai(&genai)));
    group.finish();
}

// ---- one tool call streamed in 100k argument fragments (issue 18) ----

/// The tool the streamed call is to.
const TOOL: &str = "write_file";

/// A Chat Completions answer that is one call to [`TOOL`] whose arguments
/// (a long file's content) come in [`DELTAS`] fragments, one event each.
fn tool_call_events() -> Vec<String> {
    let mut events = Vec::with_capacity(DELTAS + 4);
    events.push(openai_chunk(
        &serde_json::json!({"role": "assistant", "content": null, "refusal": null, "tool_calls": [
            {"index": 0, "id": "call_Qx8b1Yt0aZ5fXg3E7h2kLmNo", "type": "function",
             "function": {"name": TOOL, "arguments": ""}}]}),
        None,
    ));
    for i in 0..DELTAS {
        // The word as JSON string content, without its quotes.
        let escaped = serde_json::to_string(word(i)).unwrap();
        let mut fragment = escaped[1..escaped.len() - 1].to_string();
        if i == 0 {
            fragment.insert_str(0, r#"{"path": "story.md", "content": ""#);
        }
        if i == DELTAS - 1 {
            fragment.push_str(r#""}"#);
        }
        events.push(openai_chunk(
            &serde_json::json!({"tool_calls": [{"index": 0, "function": {"arguments": fragment}}]}),
            None,
        ));
    }
    events.push(openai_chunk(&serde_json::json!({}), Some("tool_calls")));
    events.push(openai_usage_chunk(19, DELTAS));
    events.push("data: [DONE]\n\n".to_string());
    events
}

/// How the server writes the stream: one HTTP chunk per SSE event, or 16 KiB
/// writes.
#[derive(Clone, Copy)]
enum Writes {
    PerEvent,
    Chunks16K,
}

impl Writes {
    const ALL: [Writes; 2] = [Writes::PerEvent, Writes::Chunks16K];

    fn name(self) -> &'static str {
        match self {
            Writes::PerEvent => "one_chunk_per_event",
            Writes::Chunks16K => "16KiB_chunks",
        }
    }

    fn split(self, events: &[String]) -> Vec<Bytes> {
        match self {
            Writes::PerEvent => events.iter().map(|e| Bytes::from(e.clone())).collect(),
            Writes::Chunks16K => events
                .concat()
                .into_bytes()
                .chunks(16 * 1024)
                .map(Bytes::copy_from_slice)
                .collect(),
        }
    }
}

/// The arguments a contender joined, read once at the end, as every
/// contender must; checks they are the whole call.
fn check_arguments(arguments: &str) {
    let value: serde_json::Value = serde_json::from_str(arguments).unwrap();
    assert_eq!(value["path"], "story.md");
    black_box(value);
}

#[derive(Deserialize)]
struct FloorToolChunk {
    #[serde(default)]
    choices: Vec<FloorToolChoice>,
}

#[derive(Deserialize)]
struct FloorToolChoice {
    #[serde(default)]
    delta: FloorToolDelta,
}

#[derive(Deserialize, Default)]
struct FloorToolDelta {
    #[serde(default)]
    tool_calls: Vec<FloorCallDelta>,
}

#[derive(Deserialize)]
struct FloorCallDelta {
    #[serde(default)]
    function: Option<FloorFunction>,
}

#[derive(Deserialize)]
struct FloorFunction {
    #[serde(default)]
    arguments: Option<String>,
}

/// The floor for a streamed call: split SSE lines, parse each `data:` line
/// into the smallest struct that yields an argument fragment, join them.
#[derive(Default)]
struct ToolFloor {
    buf: Vec<u8>,
    arguments: String,
    fragments: usize,
}

impl ToolFloor {
    fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
        let mut start = 0;
        while let Some(nl) = self.buf[start..].iter().position(|&b| b == b'\n') {
            let line = &self.buf[start..start + nl];
            if let Some(data) = line.strip_prefix(b"data: ")
                && data != b"[DONE]"
            {
                let chunk: FloorToolChunk = serde_json::from_slice(data).unwrap();
                for call in chunk.choices.into_iter().flat_map(|c| c.delta.tool_calls) {
                    if let Some(fragment) = call.function.and_then(|f| f.arguments)
                        && !fragment.is_empty()
                    {
                        self.arguments.push_str(&fragment);
                        black_box(fragment);
                        self.fragments += 1;
                    }
                }
            }
            start += nl + 1;
        }
        self.buf.drain(..start);
    }

    fn finish(self) -> usize {
        check_arguments(&self.arguments);
        self.fragments
    }
}

/// lrg's decoder on the stream; with `first_sign`, only until its first
/// sign of the call. The fragments it streamed.
fn decode_tool_call(chunks: &[Bytes], first_sign: bool) -> usize {
    let mut framer = SseFramer::default();
    let mut decoder = OpenAiDecoder::new(Dialect::OPENAI.reasoning_fields, &[]);
    let (mut frames, mut events, mut fragments) = (Vec::<Frame>::new(), Vec::new(), 0);
    let mut whole = None;
    for chunk in chunks {
        framer.push(chunk, &mut frames);
        for frame in frames.drain(..) {
            decoder.decode(&frame, &mut events).unwrap();
        }
        for event in events.drain(..) {
            match event {
                TurnEvent::ToolCallDelta {
                    arguments_fragment, ..
                } => {
                    if first_sign {
                        return 1;
                    }
                    if !arguments_fragment.is_empty() {
                        fragments += 1;
                    }
                    black_box(arguments_fragment);
                }
                TurnEvent::ToolCall(call) => whole = Some(call),
                other => {
                    black_box(other);
                }
            }
        }
    }
    framer.finish(&mut frames);
    decoder.finish(&mut events).unwrap();
    let call = whole.expect("lrg: no whole call");
    assert_eq!(call.arguments["path"], "story.md");
    fragments
}

/// async-openai's stream chunk type on the same frames (lrg's SSE framer for
/// both, so only the decoding differs), joining the fragments as its users must.
fn decode_tool_call_async_openai(chunks: &[Bytes]) -> usize {
    use async_openai::types::chat::CreateChatCompletionStreamResponse;
    let mut framer = SseFramer::default();
    let (mut frames, mut fragments, mut arguments) = (Vec::<Frame>::new(), 0, String::new());
    for chunk in chunks {
        framer.push(chunk, &mut frames);
        for frame in frames.drain(..) {
            if frame.data == "[DONE]" {
                continue;
            }
            let chunk: CreateChatCompletionStreamResponse =
                serde_json::from_str(&frame.data).unwrap();
            for choice in chunk.choices {
                for call in choice.delta.tool_calls.into_iter().flatten() {
                    if let Some(fragment) = call.function.and_then(|f| f.arguments)
                        && !fragment.is_empty()
                    {
                        arguments.push_str(&fragment);
                        black_box(fragment);
                        fragments += 1;
                    }
                }
            }
        }
    }
    check_arguments(&arguments);
    fragments
}

fn tool_call_decoders(c: &mut Criterion) {
    let events = tool_call_events();
    for writes in Writes::ALL {
        let stream = writes.split(&events);
        assert_eq!(decode_tool_call(&stream, false), DELTAS, "lrg");
        assert_eq!(
            decode_tool_call_async_openai(&stream),
            DELTAS,
            "async-openai"
        );
        let floor = |stream: &[Bytes]| {
            let mut floor = ToolFloor::default();
            for chunk in stream {
                floor.push(chunk);
            }
            floor.finish()
        };
        assert_eq!(floor(&stream), DELTAS, "floor");
        let mut group =
            c.benchmark_group(format!("decode_tool_call_100k_fragments_{}", writes.name()));
        group
            .sample_size(20)
            .measurement_time(Duration::from_secs(8))
            .throughput(Throughput::Elements(DELTAS as u64));
        group.bench_function("floor_sse_split_from_slice", |b| {
            b.iter(|| floor(black_box(&stream)))
        });
        group.bench_function("lrg_openai_sse", |b| {
            b.iter(|| decode_tool_call(black_box(&stream), false))
        });
        group.bench_function("async_openai", |b| {
            b.iter(|| decode_tool_call_async_openai(black_box(&stream)))
        });
        // Issue 18's second row: decoding up to the call's first sign.
        group.bench_function("lrg_first_tool_call_delta", |b| {
            b.iter(|| decode_tool_call(black_box(&stream), true))
        });
        group.finish();
    }
}

fn tool_request() -> TurnRequest {
    let tool = ToolSpec {
        name: TOOL.into(),
        description: "Write a file".into(),
        input_schema: serde_json::json!({"type": "object", "properties": {
            "path": {"type": "string"}, "content": {"type": "string"}}}),
        annotations: Default::default(),
        output_schema: None,
    };
    TurnRequest::new(vec![Message::user("Write a long story to story.md.")]).tools(vec![tool])
}

/// lrg end to end; with `first_sign`, only until the first
/// [`TurnEvent::ToolCallDelta`] (the rest of the stream is dropped).
async fn via_lrg_tool(model: &OpenAiChat, first_sign: bool) -> usize {
    let mut stream = model.turn(tool_request(), CancellationToken::new());
    let (mut fragments, mut whole) = (0, false);
    while let Some(event) = stream.next().await {
        match event.unwrap() {
            TurnEvent::ToolCallDelta {
                arguments_fragment, ..
            } => {
                if first_sign {
                    return 1;
                }
                if !arguments_fragment.is_empty() {
                    fragments += 1;
                }
                black_box(arguments_fragment);
            }
            TurnEvent::ToolCall(call) => {
                assert_eq!(call.arguments["path"], "story.md");
                whole = true;
            }
            other => {
                black_box(other);
            }
        }
    }
    assert!(whole, "lrg: no whole call");
    fragments
}

async fn via_floor_tool(client: &reqwest::Client, url: &str) -> usize {
    let body = serde_json::json!({"model": "gpt-4.1", "stream": true, "messages": [{"role": "user", "content": "Write a long story to story.md."}]});
    let response = client
        .post(url)
        .bearer_auth("sk-bench")
        .json(&body)
        .send()
        .await
        .unwrap();
    let mut bytes = response.bytes_stream();
    let mut floor = ToolFloor::default();
    while let Some(chunk) = bytes.next().await {
        floor.push(&chunk.unwrap());
    }
    floor.finish()
}

async fn via_async_openai_tool(
    client: &async_openai::Client<async_openai::config::OpenAIConfig>,
    first_sign: bool,
) -> usize {
    use async_openai::types::chat::{
        ChatCompletionRequestUserMessageArgs, CreateChatCompletionRequestArgs,
    };
    let request = CreateChatCompletionRequestArgs::default()
        .model("gpt-4.1")
        .messages([ChatCompletionRequestUserMessageArgs::default()
            .content("Write a long story to story.md.")
            .build()
            .unwrap()
            .into()])
        .build()
        .unwrap();
    let mut stream = client.chat().create_stream(request).await.unwrap();
    let (mut fragments, mut arguments) = (0, String::new());
    while let Some(chunk) = stream.next().await {
        for choice in chunk.unwrap().choices {
            for call in choice.delta.tool_calls.into_iter().flatten() {
                if first_sign {
                    return 1;
                }
                if let Some(fragment) = call.function.and_then(|f| f.arguments)
                    && !fragment.is_empty()
                {
                    arguments.push_str(&fragment);
                    black_box(fragment);
                    fragments += 1;
                }
            }
        }
    }
    check_arguments(&arguments);
    fragments
}

/// genai without `capture_tool_calls`: each `ToolCallChunk` holds one
/// fragment, joined here (genai's own capture joins with `format!` per
/// fragment, quadratic in the call's length).
async fn via_genai_tool(client: &genai::Client, first_sign: bool) -> usize {
    use genai::chat::{ChatMessage, ChatRequest, ChatStreamEvent};
    let request = ChatRequest::new(vec![ChatMessage::user("Write a long story to story.md.")]);
    let response = client
        .exec_chat_stream("gpt-4.1", request, None)
        .await
        .unwrap();
    let mut stream = response.stream;
    let (mut fragments, mut arguments) = (0, String::new());
    while let Some(event) = stream.next().await {
        if let ChatStreamEvent::ToolCallChunk(chunk) = event.unwrap() {
            if first_sign {
                return 1;
            }
            if let Some(fragment) = chunk.tool_call.fn_arguments.as_str()
                && !fragment.is_empty()
            {
                arguments.push_str(fragment);
                fragments += 1;
            }
            black_box(chunk);
        }
    }
    check_arguments(&arguments);
    fragments
}

/// End to end over HTTP, at each way of writing the stream: the whole call,
/// then (issue 18's second row) the time to its first sign beside the whole
/// stream, the baseline of that group.
fn tool_call_end_to_end(c: &mut Criterion) {
    let events = tool_call_events();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    for writes in Writes::ALL {
        let addr = fake_server(writes.split(&events));
        let base = format!("http://{addr}/v1");
        let lrg = OpenAiChat::new(
            OpenAiConfig::new(Dialect::OPENAI, &base, "gpt-4.1")
                .with_api_key(ApiKey::new("sk-bench")),
        )
        .unwrap();
        let floor_client = reqwest::Client::new();
        let floor_url = format!("{base}/chat/completions");
        let async_openai = async_openai::Client::with_config(
            async_openai::config::OpenAIConfig::new()
                .with_api_base(&base)
                .with_api_key("sk-bench"),
        );
        let genai = genai_client(&base);
        rt.block_on(async {
            assert_eq!(via_lrg_tool(&lrg, false).await, DELTAS, "lrg");
            assert_eq!(
                via_floor_tool(&floor_client, &floor_url).await,
                DELTAS,
                "floor"
            );
            assert_eq!(
                via_async_openai_tool(&async_openai, false).await,
                DELTAS,
                "async-openai"
            );
            assert_eq!(via_genai_tool(&genai, false).await, DELTAS, "genai");
        });

        let mut group = c.benchmark_group(format!("openai_tool_call_stream_{}", writes.name()));
        group
            .sample_size(10)
            .measurement_time(Duration::from_secs(10))
            .throughput(Throughput::Elements(DELTAS as u64));
        group.bench_function("floor_reqwest_split_from_slice", |b| {
            b.to_async(&rt)
                .iter(|| via_floor_tool(&floor_client, &floor_url))
        });
        group.bench_function("lrg_OpenAiChat", |b| {
            b.to_async(&rt).iter(|| via_lrg_tool(&lrg, false))
        });
        group.bench_function("async_openai", |b| {
            b.to_async(&rt)
                .iter(|| via_async_openai_tool(&async_openai, false))
        });
        group.bench_function("genai", |b| {
            b.to_async(&rt).iter(|| via_genai_tool(&genai, false))
        });
        group.finish();

        // No throughput here: the ratio to read is first sign / whole stream.
        let mut group = c.benchmark_group(format!("openai_tool_call_first_sign_{}", writes.name()));
        group
            .sample_size(10)
            .measurement_time(Duration::from_secs(5));
        group.bench_function("baseline_lrg_whole_stream", |b| {
            b.to_async(&rt).iter(|| via_lrg_tool(&lrg, false))
        });
        group.bench_function("lrg_first_tool_call_delta", |b| {
            b.to_async(&rt).iter(|| via_lrg_tool(&lrg, true))
        });
        group.bench_function("async_openai_first_tool_call_chunk", |b| {
            b.to_async(&rt)
                .iter(|| via_async_openai_tool(&async_openai, true))
        });
        group.bench_function("genai_first_tool_call_chunk", |b| {
            b.to_async(&rt).iter(|| via_genai_tool(&genai, true))
        });
        group.finish();
    }
}

criterion_group!(
    benches,
    decoders,
    responses_decoders,
    end_to_end,
    tool_call_decoders,
    tool_call_end_to_end
);
criterion_main!(benches);
