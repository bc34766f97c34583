//! A local model on llama.cpp, in the app's own process, calling a Rust tool.
//!
//! The model is a tiny random-weight GGUF that `lrg_llama::testing` writes
//! into a temporary folder (about a megabyte, nothing downloaded), loaded by
//! `LlamaEngine` and wrapped in `LocalChatModel`, which constrains every
//! answer to lrg's format with a grammar: `{"analysis", "call": {tool:
//! arguments}}` or `{"analysis", "reply"}`, one branch per offered tool.
//! So even noise is either a reply or a call of a tool that exists, with
//! arguments its schema accepts: the session runs it like any other call.
//!
//! Random weights choose between calling and replying by chance. The
//! example sends the question with one sampling seed after another until
//! the model calls the tool (a seed is repeatable: the same seed, the same
//! answer), and prints what it wrote and what the tool returned. With a real
//! model, point `LlamaConfig::new` at its GGUF file and drop the seeds.
//!
//! Needs the `llama` feature (llama.cpp builds with cmake and libclang):
//! `cargo run -p lrg-examples --features llama --example local_llama`.

use std::sync::Arc;

use lrg_chat::events::Event;
use lrg_chat::{ChatSession, FixedModel, ToolHost, TurnOutcome};
use lrg_llama::testing::{TinyModelSpec, write_tiny_model};
use lrg_llama::{LlamaConfig, LlamaEngine};
use lrg_providers::local_chat::LocalChatModel;
use lrg_providers::{GenerationSettings, ToolAnnotations};
use schemars::JsonSchema;
use serde::Deserialize;

/// Seeds tried before giving up.
const SEEDS: u32 = 8;

#[derive(Debug, Deserialize, JsonSchema)]
struct Weather {
    /// The city.
    city: String,
}

fn tools() -> Result<ToolHost, lrg_chat::tools::AddToolError> {
    let host = ToolHost::new();
    let read_only = ToolAnnotations {
        read_only_hint: Some(true),
        ..Default::default()
    };
    host.add_fn(
        "get_weather",
        "Today's weather in a city",
        read_only,
        |args: Weather| async move {
            // The model's argument is whatever it sampled, capped by the
            // grammar: show a bounded piece of it.
            let city: String = args.city.chars().take(40).collect();
            Ok::<_, String>(format!("{city:?}: sunny, 21 °C"))
        },
    )?;
    Ok(host)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("tiny.gguf");
    write_tiny_model(&path, &TinyModelSpec::default())?;
    println!(
        "wrote a tiny random-weight model: {} ({} bytes)",
        path.display(),
        std::fs::metadata(&path)?.len()
    );
    // Loading blocks (seconds for a real model): on a blocking thread.
    let config = LlamaConfig::new(&path).with_n_ctx(4096);
    let engine = tokio::task::spawn_blocking(move || LlamaEngine::load(config)).await??;
    let model = Arc::new(FixedModel::new(LocalChatModel::new(
        "llama",
        Arc::new(engine),
    )));
    let tools = Arc::new(tools()?);

    for seed in 0..SEEDS {
        // A fresh chat per seed, on the same loaded engine.
        let session = ChatSession::builder(model.clone())
            .tools(tools.clone())
            // One turn to call, one to answer: random weights might call
            // forever otherwise.
            .max_steps(2)
            .build();
        let settings = GenerationSettings::new()
            .temperature(1.0)
            .max_tokens(1500)
            .seed(seed);
        let outcome = session
            .send_with("What is the weather in Paris?", settings)?
            .await;
        let mut called = false;
        for entry in session.events().entries() {
            match &entry.event {
                Event::AssistantTurn {
                    reasoning, text, ..
                } => {
                    let analysis: String = reasoning.chars().take(120).collect();
                    println!("seed {seed}: the model thought {analysis:?}…");
                    if !text.is_empty() {
                        let reply: String = text.chars().take(120).collect();
                        println!("seed {seed}: and replied {reply:?}");
                    }
                }
                Event::ToolCall {
                    tool, arguments, ..
                } => {
                    called = true;
                    let arguments = arguments.to_string();
                    let shown: String = arguments.chars().take(120).collect();
                    println!("seed {seed}: it called {tool} with {shown}");
                }
                Event::ToolDone { text, ok, .. } => {
                    println!(
                        "seed {seed}: the tool {}: {text}",
                        if *ok { "returned" } else { "failed" }
                    );
                }
                Event::Error { message, .. } => println!("seed {seed}: error: {message}"),
                _ => {}
            }
        }
        match outcome {
            TurnOutcome::Completed { .. } | TurnOutcome::StepsExhausted => {}
            other => return Err(format!("seed {seed}: the message ended with {other:?}").into()),
        }
        if called {
            println!("seed {seed}: a local model called a Rust tool, offline");
            return Ok(());
        }
        println!("seed {seed}: it replied without a call (random weights); another seed");
    }
    Err(format!("no seed of {SEEDS} made the tiny model call the tool").into())
}
