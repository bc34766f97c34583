//! Throughput of the text tool-call parsers (`lrg_providers::text_tools`), in
//! MB/s, on a 1 MB answer per format (prose with a call every ~1 KB) fed in
//! 1-byte, 64-byte and 16 KiB chunks, side by side with the OpenAI SSE
//! decoder (framer + decoder) on a 1 MB stream in the same chunks: the
//! parsers' goal is linear time and within 2× of the SSE decoder per byte.

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use lrg_providers::openai::{Dialect, OpenAiDecoder};
use lrg_providers::text_tools::{TextToolParser, ToolFormat, render_call};
use lrg_providers::wire::{Decoder, Frame, SseFramer};
use lrg_providers::{ToolSpec, TurnEvent};
use serde_json::json;

const SIZE: usize = 1 << 20;
const CHUNKS: [usize; 3] = [1, 64, 16 * 1024];

const PROSE: &str = "The weather in Paris is mild today, with a light breeze from the west; \
    temperatures stay near 18 °C until the evening. Ünïcödé and <angle> [brackets] {braces} \
    appear in ordinary text too, as do `code` and \"quotes\". ";

fn tools() -> Vec<ToolSpec> {
    vec![ToolSpec {
        name: "get_weather".into(),
        description: "Current weather".into(),
        input_schema: json!({"type": "object", "properties": {"city": {"type": "string"}}}),
        annotations: Default::default(),
        output_schema: None,
    }]
}

/// About 1 MB of answer in `format`: prose, and a call after every ~1 KB.
/// Formats that take a call only at the start of an answer (bare JSON,
/// Python lists) get one call there and prose after it.
fn answer(format: ToolFormat) -> String {
    let call = render_call(format, "get_weather", &json!({"city": "São Paulo"}));
    let start_only = matches!(format, ToolFormat::Llama3 | ToolFormat::Pythonic);
    let mut text = String::with_capacity(SIZE + 2048);
    if start_only {
        text.push_str(&call);
    }
    while text.len() < SIZE {
        for _ in 0..4 {
            text.push_str(PROSE);
        }
        if !start_only {
            text.push_str(&call);
        }
    }
    text
}

/// Feed `text` in `chunk`-byte pieces (on character boundaries).
fn parse(format: ToolFormat, tools: &[ToolSpec], text: &str, chunk: usize) -> usize {
    let mut parser = TextToolParser::new(format, tools);
    let mut out = Vec::new();
    let (mut at, mut calls) = (0, 0);
    while at < text.len() {
        let mut end = (at + chunk).min(text.len());
        while !text.is_char_boundary(end) {
            end += 1;
        }
        parser.feed(&text[at..end], &mut out);
        calls += count_calls(&mut out);
        at = end;
    }
    parser.finish(&mut out);
    calls + count_calls(&mut out)
}

fn count_calls(events: &mut Vec<TurnEvent>) -> usize {
    let n = events
        .iter()
        .filter(|e| matches!(e, TurnEvent::ToolCall(_)))
        .count();
    black_box(&events);
    events.clear();
    n
}

/// About 1 MB of OpenAI SSE: the same prose as content deltas of a few words.
fn sse_stream() -> Vec<u8> {
    let words: Vec<&str> = PROSE.split_inclusive(' ').collect();
    let mut body = String::with_capacity(SIZE + 4096);
    let mut i = 0;
    while body.len() < SIZE {
        let chunk = json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1,
            "model": "qwen3-8b", "choices": [{"index": 0, "delta": {"content": words[i % words.len()]},
            "finish_reason": null}]});
        body.push_str(&format!("data: {chunk}\n\n"));
        i += 1;
    }
    body.push_str("data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n");
    body.into_bytes()
}

fn decode_sse(body: &[u8], chunk: usize) -> usize {
    let mut framer = SseFramer::default();
    let mut decoder = OpenAiDecoder::new(Dialect::LLAMA_CPP.reasoning_fields, &[]);
    let (mut frames, mut events, mut n) = (Vec::<Frame>::new(), Vec::new(), 0);
    for piece in body.chunks(chunk) {
        framer.push(piece, &mut frames);
        for frame in frames.drain(..) {
            decoder.decode(&frame, &mut events).unwrap_or_default();
        }
        n += events.len();
        events.clear();
    }
    framer.finish(&mut frames);
    decoder.finish(&mut events).unwrap_or_default();
    n + events.len()
}

fn parsers(c: &mut Criterion) {
    let tools = tools();
    let sse = sse_stream();
    let answers: Vec<(ToolFormat, String)> = ToolFormat::ALL
        .into_iter()
        .map(|f| (f, answer(f)))
        .collect();
    for (format, text) in &answers {
        assert!(
            parse(*format, &tools, text, 64) > 0,
            "{format}: no call read"
        );
    }
    for chunk in CHUNKS {
        let mut group = c.benchmark_group(format!("text_tools_1MB_in_{chunk}B_chunks"));
        group
            .sample_size(10)
            .warm_up_time(Duration::from_millis(500))
            .measurement_time(Duration::from_secs(2));
        group.throughput(Throughput::Bytes(sse.len() as u64));
        group.bench_function("baseline_openai_sse_decoder", |b| {
            b.iter(|| decode_sse(black_box(&sse), chunk))
        });
        for (format, text) in &answers {
            group.throughput(Throughput::Bytes(text.len() as u64));
            group.bench_function(format.name(), |b| {
                b.iter(|| parse(*format, &tools, black_box(text), chunk))
            });
        }
        group.finish();
    }
}

criterion_group!(benches, parsers);
criterion_main!(benches);
