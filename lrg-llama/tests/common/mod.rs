//! Shared helpers: the tiny model written once per test binary, engines on it,
//! and running a turn to completion with a timeout.

#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Duration;

use futures::StreamExt;
use lrg_llama::testing::{TinyModelSpec, write_tiny_model};
use lrg_llama::{LlamaConfig, LlamaEngine};
use lrg_providers::local_chat::{
    EngineEvent, EngineMessage, EngineRole, EngineStop, EngineTurn, LocalEngine,
};
use lrg_providers::{ProviderError, Usage};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

/// The tiny model's path, written on first use into a directory kept for the
/// life of the test process.
pub fn tiny_model() -> PathBuf {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    let dir = DIR.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        write_tiny_model(&dir.path().join("tiny.gguf"), &TinyModelSpec::default()).unwrap();
        dir
    });
    dir.path().join("tiny.gguf")
}

/// An engine on the tiny model with a `n_ctx` context and single-threaded
/// llama.cpp (tests already run in parallel).
pub fn engine(n_ctx: u32) -> LlamaEngine {
    // llama.cpp's logs, through tracing, shown with a failing test (RUST_LOG=debug).
    let _ = tracing_subscriber::fmt()
        .with_test_writer()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .try_init();
    LlamaEngine::load(
        LlamaConfig::new(tiny_model())
            .with_n_ctx(n_ctx)
            .with_n_threads(1)
            .with_n_batch(256),
    )
    .unwrap()
}

pub fn msg(role: EngineRole, content: &str) -> EngineMessage {
    EngineMessage {
        role,
        content: content.to_string(),
        images: Vec::new(),
    }
}

pub fn turn(
    messages: Vec<EngineMessage>,
    schema: Value,
    seed: u32,
    temperature: f32,
    max_tokens: u32,
) -> EngineTurn {
    EngineTurn {
        sequence: lrg_providers::local_chat::SequenceId(0),
        messages,
        schema,
        max_tokens,
        temperature,
        top_p: None,
        seed: Some(seed),
    }
}

/// What a finished turn produced.
#[derive(Debug)]
pub struct Outcome {
    pub deltas: Vec<String>,
    pub text: String,
    pub usage: Usage,
    pub stop: EngineStop,
}

/// Runs a turn to its `Done` event (fails the test after 60 s).
pub async fn run(engine: &LlamaEngine, turn: EngineTurn) -> Result<Outcome, ProviderError> {
    tokio::time::timeout(Duration::from_secs(60), async {
        let mut stream = engine.generate(turn, CancellationToken::new());
        let mut deltas = Vec::new();
        while let Some(ev) = stream.next().await {
            match ev? {
                EngineEvent::Delta { text } => deltas.push(text),
                EngineEvent::Done { usage, stop } => {
                    assert!(stream.next().await.is_none(), "events after Done");
                    let text = deltas.concat();
                    return Ok(Outcome {
                        deltas,
                        text,
                        usage,
                        stop,
                    });
                }
                // Prefill counts: the KV-reuse tests read them themselves.
                _ => {}
            }
        }
        panic!("stream ended without Done");
    })
    .await
    .expect("turn timed out")
}

/// Longest common prefix of two token lists.
pub fn common_prefix(a: &[i32], b: &[i32]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}
