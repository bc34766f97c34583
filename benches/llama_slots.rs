//! One llama.cpp engine shared by many chats (issue 29), on generated models:
//!
//! - `decode_8_chats`: 8 chats decoding 32 tokens each, all at once (one
//!   batch per step) against one at a time. Goal: batched ≥ 2.5× the tokens/s.
//! - `interleaved_8_chats_4_slots`: time to first token of turn 1 (cold) and
//!   turn 2 of 8 chats taking turns on 4 slots, so every turn 2 restores its
//!   chat's saved state. Goal: turn 2 ≤ 0.15× turn 1.
//! - `saved_state_1000_tokens`: getting a 1,000-token prefix into the KV
//!   cache by restoring its saved state against prefilling it. Goal ≤ 0.2×.
//! - memory (summary.md): resident set with 8 chats on one ~200 MB model
//!   against 1 chat. Goal ≤ 1.3×.
//!
//! Figures are measured side by side in one process; on a loaded machine
//! the ratios hold better than the absolute times.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use futures::StreamExt;
use lrg_benches::figure_note;
use lrg_llama::testing::{TinyModelSpec, write_tiny_model};
use lrg_llama::{LlamaConfig, LlamaEngine};
use lrg_providers::local_chat::{
    EngineEvent, EngineMessage, EngineRole, EngineTurn, LocalEngine, SequenceId,
};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

const CHATS: u64 = 8;
const DECODE_TOKENS: u32 = 32;

fn msg(role: EngineRole, content: String) -> EngineMessage {
    EngineMessage {
        role,
        content,
        images: Vec::new(),
    }
}

/// A string the model must keep writing: every turn runs to `max_tokens`.
fn long_schema() -> Value {
    json!({
        "type": "object",
        "properties": {"note": {"type": "string", "minLength": 3000, "maxLength": 4000}},
        "required": ["note"],
        "additionalProperties": false
    })
}

fn turn(sequence: u64, messages: Vec<EngineMessage>, max_tokens: u32) -> EngineTurn {
    EngineTurn {
        sequence: SequenceId(sequence),
        messages,
        schema: long_schema(),
        max_tokens,
        temperature: 1.0,
        top_p: None,
        seed: Some(sequence as u32),
    }
}

/// Runs a turn to its end: (time to the first delta, the text).
async fn run(engine: &LlamaEngine, turn: EngineTurn) -> (Duration, String) {
    let start = Instant::now();
    let mut stream = engine.generate(turn, CancellationToken::new());
    let (mut first, mut text) = (None, String::new());
    while let Some(ev) = stream.next().await {
        match ev.unwrap() {
            EngineEvent::Delta { text: t } => {
                first.get_or_insert_with(|| start.elapsed());
                text.push_str(&t);
            }
            EngineEvent::Done { .. } => break,
            _ => {}
        }
    }
    (first.expect("no token"), text)
}

/// A chat whose first message is a distinct ~`tokens`-token document.
fn chat(i: u64, words: usize) -> Vec<EngineMessage> {
    let doc: Vec<String> = (0..words)
        .map(|w| format!("w{}", (w as u64 * 7919 + i * 104_729) % 10_007))
        .collect();
    vec![
        msg(EngineRole::System, "Answer with JSON.".into()),
        msg(
            EngineRole::User,
            format!("Summarize document {i}: {}", doc.join(" ")),
        ),
    ]
}

fn second_turn(mut messages: Vec<EngineMessage>, answer: &str) -> Vec<EngineMessage> {
    messages.push(msg(EngineRole::Assistant, answer.into()));
    messages.push(msg(
        EngineRole::User,
        "Result of read_file: {\"text\":\"one more line\"}".into(),
    ));
    messages
}

fn tiny(dir: &std::path::Path) -> std::path::PathBuf {
    let path = dir.join("tiny.gguf");
    write_tiny_model(&path, &TinyModelSpec::default()).unwrap();
    path
}

fn decode(c: &mut Criterion, rt: &tokio::runtime::Runtime, path: &std::path::Path) {
    // One thread: on 2 shared cores more would mostly measure thread barriers.
    let engine = LlamaEngine::load(
        LlamaConfig::new(path)
            .with_n_ctx(512 * CHATS as u32)
            .with_n_seq_max(CHATS as u32)
            .with_n_threads(1),
    )
    .unwrap();
    let prompt = |i: u64| vec![msg(EngineRole::User, format!("Write a long note, {i}."))];
    let mut g = c.benchmark_group("decode_8_chats");
    g.throughput(Throughput::Elements(CHATS * u64::from(DECODE_TOKENS)));
    g.bench_function("one_at_a_time", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let start = Instant::now();
                for _ in 0..iters {
                    for i in 0..CHATS {
                        run(&engine, turn(i, prompt(i), DECODE_TOKENS)).await;
                    }
                }
                start.elapsed()
            })
        });
    });
    g.bench_function("batched", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let start = Instant::now();
                for _ in 0..iters {
                    let turns = (0..CHATS).map(|i| run(&engine, turn(i, prompt(i), DECODE_TOKENS)));
                    futures::future::join_all(turns).await;
                }
                start.elapsed()
            })
        });
    });
    g.finish();
}

fn interleaved(c: &mut Criterion, rt: &tokio::runtime::Runtime, path: &std::path::Path) {
    let engine = LlamaEngine::load(
        LlamaConfig::new(path)
            .with_n_ctx(4 * 2048)
            .with_n_seq_max(4)
            .with_n_threads(1),
    )
    .unwrap();
    let chats: Vec<_> = (0..CHATS).map(|i| chat(i, 700)).collect();
    figure_note(format!(
        "llama_slots: interleaved chats' turn 1 prompt: {} tokens",
        engine.tokenize_prompt(&chats[0]).unwrap().len()
    ));
    // Every chat's turn 1, from a cache holding nothing: (mean TTFT, answers).
    let turn_1 = || async {
        engine.clear_cache();
        let mut total = Duration::ZERO;
        let mut answers = Vec::new();
        for (i, messages) in chats.iter().enumerate() {
            let (ttft, text) = run(&engine, turn(i as u64, messages.clone(), 4)).await;
            total += ttft;
            answers.push(text);
        }
        (total / CHATS as u32, answers)
    };
    let mut g = c.benchmark_group("interleaved_8_chats_4_slots");
    g.bench_function("turn_1", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    total += turn_1().await.0;
                }
                total
            })
        });
    });
    g.bench_function("turn_2", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let (_, answers) = turn_1().await;
                    let mut sum = Duration::ZERO;
                    for (i, messages) in chats.iter().enumerate() {
                        let next = second_turn(messages.clone(), &answers[i]);
                        sum += run(&engine, turn(i as u64, next, 4)).await.0;
                        let s = engine.stats_of(SequenceId(i as u64)).unwrap();
                        assert!(s.tokens_restored > 0, "chat {i} was restored: {s:?}");
                    }
                    total += sum / CHATS as u32;
                }
                total
            })
        });
    });
    g.finish();
}

fn restore(c: &mut Criterion, rt: &tokio::runtime::Runtime, path: &std::path::Path) {
    let engine = LlamaEngine::load(
        LlamaConfig::new(path)
            .with_n_ctx(2048)
            .with_n_seq_max(1)
            .with_n_threads(1),
    )
    .unwrap();
    let a = chat(1, 900);
    let other = chat(2, 20);
    let n = engine.tokenize_prompt(&a).unwrap().len();
    figure_note(format!("llama_slots: saved-state prefix: {n} tokens"));
    let prefill_of = |sequence: u64| engine.stats_of(SequenceId(sequence)).unwrap().prefill;
    let mut g = c.benchmark_group("saved_state_1000_tokens");
    g.bench_function("fresh_prefill", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    engine.clear_cache();
                    run(&engine, turn(1, a.clone(), 1)).await;
                    total += prefill_of(1);
                }
                total
            })
        });
    });
    g.bench_function("restore", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    run(&engine, turn(1, a.clone(), 1)).await;
                    // Chat 2 takes the only slot: chat 1's state is saved.
                    run(&engine, turn(2, other.clone(), 1)).await;
                    run(&engine, turn(1, a.clone(), 1)).await;
                    let s = engine.stats_of(SequenceId(1)).unwrap();
                    assert!(s.tokens_restored as usize >= n - 1, "{s:?}");
                    total += s.prefill;
                }
                total
            })
        });
    });
    g.finish();
}

/// Resident set size of this process, from /proc (Linux; 0 elsewhere).
fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |pages| pages * 4096)
}

/// 8 chats on one ~200 MB model against 1: written to summary.md.
fn memory(rt: &tokio::runtime::Runtime, dir: &std::path::Path) {
    let path = dir.join("weights-200mb.gguf");
    let spec = TinyModelSpec {
        n_embd: 1024,
        n_head: 8,
        n_head_kv: 4,
        n_ff: 2816,
        n_layer: 4,
        ..TinyModelSpec::default()
    };
    write_tiny_model(&path, &spec).unwrap();
    let file = std::fs::metadata(&path).unwrap().len();
    let before = rss_bytes();
    let engine = LlamaEngine::load(
        LlamaConfig::new(&path)
            .with_n_ctx(4 * 1024)
            .with_n_seq_max(4)
            .with_n_threads(1),
    )
    .unwrap();
    let (one, eight, saved) = rt.block_on(async {
        run(&engine, turn(0, chat(0, 200), 8)).await;
        let one = rss_bytes() - before;
        for i in 1..CHATS {
            run(&engine, turn(i, chat(i, 200), 8)).await;
        }
        (one, rss_bytes() - before, engine.saved_state_bytes())
    });
    let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
    let ratio = eight as f64 / one.max(1) as f64;
    let md = format!(
        "Resident set of one engine (4 slots) on a {:.0} MiB generated model.\n\n\
         | figure | llama.cpp (`LlamaEngine`) | goal |\n\
         | --- | ---: | --- |\n\
         | resident, 1 chat | {:.1} MiB | |\n\
         | resident, 8 chats (4 saved states, {:.1} MiB) | {:.1} MiB | |\n\
         | resident, 8 chats over 1 chat | {ratio:.2} | ≤ 1.3 |\n",
        mib(file),
        mib(one),
        mib(saved),
        mib(eight),
    );
    println!("{md}");
    figure_note(format!(
        "llama_slots: resident 8 chats / 1 chat = {ratio:.2} ({:.1} / {:.1} MiB; engine's own estimate {:.1} MiB)",
        mib(eight),
        mib(one),
        mib(engine.resident_bytes().unwrap_or(0)),
    ));
    if let Ok(home) = std::env::var("CRITERION_HOME") {
        let out = std::path::Path::new(&home).join("summary.md");
        if let Err(e) = std::fs::create_dir_all(&home).and_then(|()| std::fs::write(&out, &md)) {
            eprintln!("llama_slots: cannot write {}: {e}", out.display());
        }
    }
}

fn slots(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let path = tiny(dir.path());
    let rt = tokio::runtime::Runtime::new().unwrap();
    memory(&rt, dir.path());
    decode(c, &rt, &path);
    interleaved(c, &rt, &path);
    restore(c, &rt, &path);
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(10).measurement_time(Duration::from_secs(10));
    targets = slots
}
criterion_main!(benches);
