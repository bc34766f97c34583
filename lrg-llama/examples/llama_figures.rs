//! Quick figures without criterion (the criterion benches are
//! `benches/llama_constraint.rs` and `benches/llama_ttft.rs`): constraint cost
//! per token and grammar construction for 40 tools on a synthetic 128k
//! vocabulary, and time to first token of turn 2 against turn 1 on a
//! 4,000-token conversation with the tiny model.
//!
//! `cargo run -p lrg-llama --example llama_figures`

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use futures::StreamExt;
use lrg_llama::testing::{
    AnswerCaps, TinyModelSpec, answer_schema, sample_answer, sample_tools, synthetic_tok_env,
    write_tiny_model,
};
use lrg_llama::{ConstraintCompiler, LlamaConfig, LlamaEngine};
use lrg_providers::local_chat::{EngineEvent, EngineMessage, EngineRole, EngineTurn, LocalEngine};
use tokio_util::sync::CancellationToken;

fn msg(role: EngineRole, content: String) -> EngineMessage {
    EngineMessage {
        role,
        content,
        images: Vec::new(),
    }
}

fn constraint_figures() {
    let env = synthetic_tok_env(128_000, 1);
    let compiler = ConstraintCompiler::new(&env).unwrap();
    let schema = answer_schema(&sample_tools(40, &AnswerCaps::DESIGN), &AnswerCaps::DESIGN);
    let tokens = env.tokenize_bytes(sample_answer().as_bytes());
    let (mut per_token, mut steps) = (Duration::ZERO, 0u32);
    let (mut build, mut builds) = (Duration::ZERO, 0u32);
    for _ in 0..20 {
        let start = Instant::now();
        let mut c = compiler.compile(&schema).unwrap();
        build += start.elapsed();
        builds += 1;
        for &t in &tokens {
            let start = Instant::now();
            let mask = c.allowed_tokens().unwrap();
            assert!(mask.is_allowed(t));
            c.commit(t).unwrap();
            per_token += start.elapsed();
            steps += 1;
        }
    }
    let fresh = compiler.compile(&schema).unwrap();
    let start = Instant::now();
    for _ in 0..100 {
        std::hint::black_box(fresh.clone());
    }
    let reuse = start.elapsed() / 100;
    println!(
        "constraint, 40 tools, 128k vocab: {:?} per token (mask + commit, {} tokens/walk), \
         {:?} per grammar compiled, {:?} per grammar reused (same schema)",
        per_token / steps,
        tokens.len(),
        build / builds,
        reuse
    );
}

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
    let mut elapsed = None;
    while let Some(ev) = stream.next().await {
        if let EngineEvent::Delta { .. } = ev.unwrap() {
            elapsed.get_or_insert_with(|| start.elapsed());
        }
    }
    elapsed.unwrap()
}

async fn ttft_figures() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tiny.gguf");
    write_tiny_model(&path, &TinyModelSpec::default()).unwrap();
    // One thread: the tiny model's arithmetic is negligible, so with more,
    // llama.cpp's thread barriers would dominate on a busy machine and hide
    // what skipping the shared prefix saves.
    let engine =
        LlamaEngine::load(LlamaConfig::new(&path).with_n_ctx(8192).with_n_threads(1)).unwrap();
    let schema = answer_schema(&sample_tools(8, &AnswerCaps::DESIGN), &AnswerCaps::DESIGN);
    let mut turn1 = vec![msg(
        EngineRole::System,
        "You are a careful assistant with tools.".repeat(4),
    )];
    let mut i = 0;
    while engine.tokenize_prompt(&turn1).unwrap().len() < 4000 {
        turn1.push(msg(
            EngineRole::User,
            format!("Please look at file number {i} and summarize it."),
        ));
        turn1.push(msg(
            EngineRole::Assistant,
            format!("{{\"analysis\":\"need it\",\"call\":{{\"read_file\":{{\"path\":\"/data/f{i}.txt\"}}}}}}"),
        ));
        turn1.push(msg(
            EngineRole::User,
            format!("Result of read_file: {{\"text\":\"line {i}\"}}"),
        ));
        i += 1;
    }
    let mut turn2 = turn1.clone();
    turn2.push(msg(
        EngineRole::Assistant,
        "{\"analysis\":\"list\",\"call\":{\"list_directory\":{\"path\":\"/data\"}}}".into(),
    ));
    turn2.push(msg(
        EngineRole::User,
        "Result of list_directory: {\"entries\":[\"f0.txt\"]}".into(),
    ));
    let (mut t1, mut t2) = (Duration::ZERO, Duration::ZERO);
    let runs = 5;
    for _ in 0..runs {
        engine.clear_cache();
        t1 += first_token(&engine, &turn1, &schema).await;
        t2 += first_token(&engine, &turn2, &schema).await;
    }
    let s = engine.stats();
    println!(
        "ttft, {}-token conversation: turn 1 {:?}, turn 2 {:?} ({:.1}%; turn 2 reused {} and evaluated {} tokens)",
        s.prompt_tokens,
        t1 / runs,
        t2 / runs,
        100.0 * t2.as_secs_f64() / t1.as_secs_f64(),
        s.tokens_reused,
        s.tokens_evaluated
    );
}

#[tokio::main]
async fn main() {
    constraint_figures();
    ttft_figures().await;
}
