//! Heap allocations per streamed delta, counted by a global allocator: text
//! deltas and tool-call argument fragments through the framer and each
//! streaming decoder must stay at 5 or fewer per delta (issue 18's budget).
//!
//! One test in this binary, so no other test's allocations are counted.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use lrg_providers::TurnEvent;
use lrg_providers::anthropic::AnthropicDecoder;
use lrg_providers::openai::{OpenAiDecoder, ReasoningField};
use lrg_providers::responses::ResponsesDecoder;
use lrg_providers::wire::{Decoder, Frame, Framer, Framing};
use serde_json::json;

struct Counting;

static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every method forwards to the system allocator unchanged and only
// counts on an atomic.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Deltas per stream: enough that the per-turn setup is noise, and whole
/// cycles of [`fragment`]'s tokens, so that the arguments are valid JSON.
const DELTAS: usize = 14 * 143;
/// The budget.
const MAX_PER_DELTA: f64 = 5.0;

fn sse(events: &[String]) -> Vec<u8> {
    events
        .iter()
        .map(|e| format!("data: {e}\n\n"))
        .collect::<String>()
        .into_bytes()
}

/// Frame and decode `body`, fed in 4 KiB network reads, the way the transport
/// does (frames and events drained after each read); returns allocations per
/// delta and the events.
fn per_delta(body: &[u8], mut decoder: impl Decoder) -> (f64, Vec<TurnEvent>) {
    let mut framer = Framer::new(Framing::Sse);
    let mut frames: Vec<Frame> = Vec::new();
    let mut out: Vec<TurnEvent> = Vec::new();
    let mut kept: Vec<TurnEvent> = Vec::with_capacity(4 * DELTAS);
    let before = ALLOCATIONS.load(Ordering::Relaxed);
    for read in body.chunks(4_096) {
        framer.push(read, &mut frames);
        for frame in frames.drain(..) {
            decoder.decode(&frame, &mut out).unwrap();
        }
        kept.append(&mut out);
    }
    framer.finish(&mut frames);
    for frame in frames.drain(..) {
        decoder.decode(&frame, &mut out).unwrap();
    }
    decoder.finish(&mut out).unwrap();
    kept.append(&mut out);
    let used = ALLOCATIONS.load(Ordering::Relaxed) - before;
    (used as f64 / DELTAS as f64, kept)
}

/// Fragment `i` of a call writing a file: token-sized pieces, as servers
/// stream them (a quote, a key, a word of the content, an escaped newline).
fn fragment(i: usize) -> String {
    const TOKENS: &[&str] = &[
        "\"", "line", "\": \"", " fn", " main", "()", " {\\n", "   ", " println", "!(\\\"", "hi",
        "\\\");", "\\n}", "\", ",
    ];
    TOKENS[i % TOKENS.len()].to_string()
}

fn joined_arguments(events: &[TurnEvent]) -> String {
    events
        .iter()
        .filter_map(|e| match e {
            TurnEvent::ToolCallDelta {
                arguments_fragment, ..
            } => Some(arguments_fragment.as_str()),
            _ => None,
        })
        .collect()
}

fn openai_text() -> Vec<u8> {
    let mut events: Vec<String> = (0..DELTAS)
        .map(|i| json!({"choices": [{"index": 0, "delta": {"content": format!(" word{i}")}, "finish_reason": null}]}).to_string())
        .collect();
    events
        .push(json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}).to_string());
    events.push("[DONE]".into());
    sse(&events)
}

fn openai_call() -> (Vec<u8>, String) {
    let mut events = vec![json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "call_1",
        "type": "function", "function": {"name": "write_file", "arguments": "{"}}]}, "finish_reason": null}]})
    .to_string()];
    let mut arguments = String::from("{");
    for i in 0..DELTAS {
        let f = fragment(i);
        arguments.push_str(&f);
        events.push(
            json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0,
            "function": {"arguments": f}}]}, "finish_reason": null}]})
            .to_string(),
        );
    }
    events.push(
        json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0,
        "function": {"arguments": "\"end\": 1}"}}]}, "finish_reason": "tool_calls"}]})
        .to_string(),
    );
    arguments.push_str("\"end\": 1}");
    events.push("[DONE]".into());
    (sse(&events), arguments)
}

fn anthropic_call() -> (Vec<u8>, String) {
    let mut events = vec![
        json!({"type": "message_start", "message": {"usage": {"input_tokens": 5}}}).to_string(),
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use",
            "id": "toolu_1", "name": "write_file", "input": {}}})
        .to_string(),
    ];
    let mut arguments = String::from("{");
    events.push(json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": "{"}}).to_string());
    for i in 0..DELTAS {
        let f = fragment(i);
        arguments.push_str(&f);
        events.push(json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": f}}).to_string());
    }
    events.push(json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": "\"end\": 1}"}}).to_string());
    arguments.push_str("\"end\": 1}");
    events.push(json!({"type": "content_block_stop", "index": 0}).to_string());
    events.push(json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 9}}).to_string());
    events.push(json!({"type": "message_stop"}).to_string());
    (sse(&events), arguments)
}

fn responses_call() -> (Vec<u8>, String) {
    let mut events = vec![json!({"type": "response.output_item.added", "output_index": 0, "item": {
        "id": "fc_1", "type": "function_call", "arguments": "", "call_id": "call_1", "name": "write_file"}})
    .to_string()];
    let mut arguments = String::from("{");
    events.push(json!({"type": "response.function_call_arguments.delta", "item_id": "fc_1", "output_index": 0, "delta": "{"}).to_string());
    for i in 0..DELTAS {
        let f = fragment(i);
        arguments.push_str(&f);
        events.push(json!({"type": "response.function_call_arguments.delta", "item_id": "fc_1", "output_index": 0, "delta": f}).to_string());
    }
    events.push(json!({"type": "response.function_call_arguments.delta", "item_id": "fc_1", "output_index": 0, "delta": "\"end\": 1}"}).to_string());
    arguments.push_str("\"end\": 1}");
    events.push(json!({"type": "response.output_item.done", "output_index": 0, "item": {
        "id": "fc_1", "type": "function_call", "arguments": arguments, "call_id": "call_1", "name": "write_file"}}).to_string());
    events.push(
        json!({"type": "response.completed", "response": {"id": "resp_1", "status": "completed",
        "output": [], "usage": {"input_tokens": 5, "output_tokens": 9}}})
        .to_string(),
    );
    (sse(&events), arguments)
}

#[test]
fn five_or_fewer_allocations_per_delta() {
    const FIELDS: &[ReasoningField] = &[ReasoningField::ReasoningContent];
    let mut report = Vec::new();

    let (n, events) = per_delta(&openai_text(), OpenAiDecoder::new(FIELDS, &[]));
    assert!(events.len() > DELTAS);
    report.push(("openai text", n));

    let (body, arguments) = openai_call();
    let (n, events) = per_delta(&body, OpenAiDecoder::new(FIELDS, &[]));
    assert_eq!(joined_arguments(&events), arguments);
    report.push(("openai tool call", n));

    let (body, arguments) = anthropic_call();
    let (n, events) = per_delta(&body, AnthropicDecoder::new("m"));
    assert_eq!(joined_arguments(&events), arguments);
    report.push(("anthropic tool call", n));

    let (body, arguments) = responses_call();
    let (n, events) = per_delta(&body, ResponsesDecoder::new("openai", "m", false, &[]));
    assert_eq!(joined_arguments(&events), arguments);
    report.push(("responses tool call", n));

    // Printed for the bench notes; the assert is the budget.
    eprintln!("allocations per delta: {report:?}");
    for (what, n) in report {
        assert!(
            n <= MAX_PER_DELTA,
            "{what}: {n:.2} allocations per delta (budget {MAX_PER_DELTA})"
        );
    }
}
