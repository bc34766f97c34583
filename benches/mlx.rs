//! The MLX engine on the tiny random-weight model, through its sidecar:
//! - per-token cost with and without the answer constraint: decoding only,
//!   the time after the first delta over the tokens after the first (a
//!   random model without the constraint may stop early, so prefill must not
//!   be spread over its few tokens); the tokens per turn are noted;
//! - time to first token on a ~4,000-token conversation, turn 2 (only the
//!   new tokens evaluated) against turn 1 (cold cache); goal: under 10%;
//! - the sidecar round trip (one JSON line each way), the fixed cost each
//!   delta pays on top of the model.
//!
//! Needs `LRG_MLX_PYTHON` (or `python3`) with mlx-lm and llguidance; without
//! it the bench says so and measures nothing (`benches/run.sh` sets
//! `LRG_MLX_PYTHON` to `~/.lrg-mlx-venv/bin/python` when that exists). The
//! versions, the skip reason and turn 2's token counts are noted with
//! [`lrg_benches::figure_note`], so they land in RESULTS.md.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use futures::StreamExt;
use lrg_benches::figure_note;
use lrg_mlx::{MlxConfig, MlxEngine};
use lrg_providers::local_chat::{
    EngineEvent, EngineMessage, EngineRole, EngineStop, EngineTurn, LocalEngine,
};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

const TARGET_TOKENS: usize = 4000;
const NOTE_CHARS: u32 = 120;

fn msg(role: EngineRole, content: String) -> EngineMessage {
    EngineMessage {
        role,
        content,
        images: Vec::new(),
    }
}

fn turn(messages: Vec<EngineMessage>, schema: Value, max_tokens: u32) -> EngineTurn {
    EngineTurn {
        sequence: lrg_providers::local_chat::SequenceId(0),
        messages,
        schema,
        max_tokens,
        temperature: 0.0,
        top_p: None,
        seed: Some(1),
    }
}

/// Runs a turn to its end; the time from the request to the first delta,
/// and to the end.
async fn run(engine: &MlxEngine, turn: EngineTurn) -> (Duration, Duration) {
    let start = Instant::now();
    let mut first = None;
    let mut stream = engine.generate(turn, CancellationToken::new());
    while let Some(event) = stream.next().await {
        match event.unwrap() {
            EngineEvent::Delta { .. } => {
                first.get_or_insert_with(|| start.elapsed());
            }
            EngineEvent::Done { stop, .. } => {
                assert_ne!(stop, EngineStop::Cancelled);
            }
            _ => {}
        }
    }
    (first.expect("no delta"), start.elapsed())
}

/// A tool-using conversation of at least `TARGET_TOKENS` prompt tokens.
async fn conversation(engine: &MlxEngine) -> Vec<EngineMessage> {
    let mut messages = vec![msg(
        EngineRole::System,
        "You are a careful assistant with file and shell tools. Answer with JSON.".repeat(4),
    )];
    let mut i = 0;
    loop {
        messages.push(msg(
            EngineRole::User,
            format!("Please look at file number {i} and summarize it."),
        ));
        messages.push(msg(
            EngineRole::Assistant,
            format!("{{\"analysis\":\"need the file\",\"call\":{{\"read_file\":{{\"path\":\"/data/file{i}.txt\"}}}}}}"),
        ));
        messages.push(msg(
            EngineRole::User,
            format!("Result of read_file: {{\"text\":\"line one of file {i}\\nline two with the total {}\"}}", i * 7),
        ));
        i += 1;
        if engine.tokenize_prompt(&messages).await.unwrap().len() >= TARGET_TOKENS {
            return messages;
        }
    }
}

fn bench(c: &mut Criterion) {
    let python = match lrg_mlx::testing::python_with_mlx() {
        Ok(p) => p,
        Err(why) => {
            figure_note(format!("SKIPPED: the MLX benches: {why}"));
            return;
        }
    };
    let dir = tempfile::tempdir().unwrap();
    lrg_mlx::testing::write_tiny_model(&python, dir.path(), None).unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let engine = rt
        .block_on(MlxEngine::start(
            MlxConfig::new(dir.path()).with_python(&python),
        ))
        .unwrap();
    figure_note(format!("sidecar: {:?}", engine.info().versions));

    // A note of exactly NOTE_CHARS characters when constrained (about 24
    // tokens of the tiny model); unconstrained, the random model writes up to
    // the 60-token cap. Per-token figures count decoding only, so the two
    // compare; the tokens per turn are noted.
    let note = json!({"type": "object",
        "properties": {"note": {"type": "string", "minLength": NOTE_CHARS, "maxLength": NOTE_CHARS}},
        "required": ["note"], "additionalProperties": false});
    let short = vec![msg(EngineRole::User, "Write a note.".into())];
    let mut g = c.benchmark_group("mlx_per_token");
    for (name, schema) in [
        ("constrained", note.clone()),
        ("unconstrained", Value::Null),
    ] {
        let (mut turns, mut tokens) = (0u64, 0u64);
        g.bench_function(name, |b| {
            b.iter_custom(|iters| {
                rt.block_on(async {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        let (first, end) =
                            run(&engine, turn(short.clone(), schema.clone(), 60)).await;
                        let generated = engine.stats().tokens_generated;
                        turns += 1;
                        tokens += u64::from(generated);
                        // Decoding only: the first delta carries the prefill.
                        total += end.saturating_sub(first) / generated.saturating_sub(1).max(1);
                    }
                    total
                })
            });
        });
        figure_note(format!(
            "mlx_per_token/{name}: {:.1} tokens generated per turn on average ({turns} turns, at most 60)",
            tokens as f64 / turns.max(1) as f64
        ));
    }
    g.finish();

    let mut g = c.benchmark_group("mlx_sidecar");
    g.bench_function("round_trip", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    total += engine.ping().await.unwrap();
                }
                total
            })
        });
    });
    g.finish();

    let turn1 = rt.block_on(conversation(&engine));
    let mut turn2 = turn1.clone();
    turn2.push(msg(
        EngineRole::Assistant,
        "{\"analysis\":\"need the list\",\"call\":{\"list_directory\":{\"path\":\"/data\"}}}"
            .into(),
    ));
    turn2.push(msg(
        EngineRole::User,
        "Result of list_directory: {\"entries\":[\"file0.txt\",\"file1.txt\"]}".into(),
    ));
    let mut g = c.benchmark_group("mlx_ttft_4000_token_conversation");
    g.sample_size(10);
    g.bench_function("turn_1_cold_cache", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    engine.clear_cache().await.unwrap();
                    total += run(&engine, turn(turn1.clone(), note.clone(), 1)).await.0;
                }
                total
            })
        });
    });
    g.bench_function("turn_2_after_turn_1", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    // Back to the state right after turn 1, then time turn 2.
                    run(&engine, turn(turn1.clone(), note.clone(), 1)).await;
                    total += run(&engine, turn(turn2.clone(), note.clone(), 1)).await.0;
                    let s = engine.stats();
                    assert!(s.tokens_evaluated < 200, "{s:?}");
                }
                total
            })
        });
    });
    g.finish();
    let s = engine.stats();
    figure_note(format!(
        "turn 2: prompt {} tokens, reused {}, evaluated {}",
        s.prompt_tokens, s.tokens_reused, s.tokens_evaluated
    ));
    rt.block_on(engine.shutdown());
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(10).measurement_time(Duration::from_secs(5));
    targets = bench
}
criterion_main!(benches);
