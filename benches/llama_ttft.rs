//! Time to first token on a 4,000-token conversation with the tiny model:
//! turn 1 evaluates the whole prompt, turn 2 (the same conversation plus the
//! answer and a tool result) only what is new. Goal: turn 2 under 10% of turn 1.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use futures::StreamExt;
use lrg_llama::testing::{
    AnswerCaps, TinyModelSpec, answer_schema, sample_tools, write_tiny_model,
};
use lrg_llama::{LlamaConfig, LlamaEngine};
use lrg_providers::local_chat::{EngineEvent, EngineMessage, EngineRole, EngineTurn, LocalEngine};
use tokio_util::sync::CancellationToken;

const TARGET_TOKENS: usize = 4000;

fn msg(role: EngineRole, content: String) -> EngineMessage {
    EngineMessage {
        role,
        content,
        images: Vec::new(),
    }
}

/// A tool-using conversation of at least `TARGET_TOKENS` prompt tokens.
fn conversation(engine: &LlamaEngine) -> Vec<EngineMessage> {
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
        if engine.tokenize_prompt(&messages).unwrap().len() >= TARGET_TOKENS {
            return messages;
        }
    }
}

/// Time from the request to the first text delta; the rest of the turn is
/// cancelled.
async fn first_token(
    engine: &LlamaEngine,
    messages: &[EngineMessage],
    schema: &serde_json::Value,
) -> Duration {
    let turn = EngineTurn {
        sequence: lrg_providers::local_chat::SequenceId(0),
        messages: messages.to_vec(),
        schema: schema.clone(),
        max_tokens: 1,
        temperature: 0.0,
        top_p: None,
        seed: Some(1),
    };
    let start = Instant::now();
    let mut stream = engine.generate(turn, CancellationToken::new());
    loop {
        match stream.next().await {
            Some(Ok(EngineEvent::Delta { .. })) => break,
            Some(Ok(EngineEvent::Done { .. })) | None => panic!("no token"),
            Some(Err(e)) => panic!("{e}"),
            // The prefill counts come before the first token.
            Some(Ok(_)) => {}
        }
    }
    let elapsed = start.elapsed();
    // Let the turn finish so the cache state is settled for the next one.
    while stream.next().await.is_some() {}
    elapsed
}

fn ttft(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tiny.gguf");
    write_tiny_model(&path, &TinyModelSpec::default()).unwrap();
    // One thread: the tiny model's arithmetic is negligible, so with more,
    // llama.cpp's thread barriers would dominate on a busy machine and hide
    // what skipping the shared prefix saves.
    let engine =
        LlamaEngine::load(LlamaConfig::new(&path).with_n_ctx(8192).with_n_threads(1)).unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let schema = answer_schema(&sample_tools(8, &AnswerCaps::DESIGN), &AnswerCaps::DESIGN);
    let turn1 = conversation(&engine);
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
    eprintln!(
        "turn 1 prompt: {} tokens, turn 2 prompt: {} tokens",
        engine.tokenize_prompt(&turn1).unwrap().len(),
        engine.tokenize_prompt(&turn2).unwrap().len()
    );

    let mut g = c.benchmark_group("ttft_4000_token_conversation");
    g.bench_function("turn_1_cold_cache", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    engine.clear_cache();
                    total += first_token(&engine, &turn1, &schema).await;
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
                    // Back to the state right after turn 1 (only its first
                    // token is re-evaluated), then time turn 2.
                    first_token(&engine, &turn1, &schema).await;
                    total += first_token(&engine, &turn2, &schema).await;
                    let s = engine.stats();
                    assert!(s.tokens_evaluated < 200, "{s:?}");
                }
                total
            })
        });
    });
    g.finish();
    let s = engine.stats();
    eprintln!(
        "last turn 2: reused {} evaluated {} tokens",
        s.tokens_reused, s.tokens_evaluated
    );
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(10).measurement_time(Duration::from_secs(10));
    targets = ttft
}
criterion_main!(benches);
