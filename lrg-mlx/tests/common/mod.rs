//! Shared helpers: the tiny model written once per test binary, engines on
//! it, a realistic answer schema with small caps, and running a turn to the
//! end with a timeout.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

use futures::StreamExt;
use lrg_mlx::{MlxConfig, MlxEngine};
use lrg_providers::local_chat::{
    EngineEvent, EngineMessage, EngineRole, EngineStop, EngineTurn, KvReuse, LocalEngine,
};
use lrg_providers::{ProviderError, Usage};
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

/// Longest any one step of a test may take.
pub const STEP: Duration = Duration::from_secs(120);

/// The Python with mlx and the tiny model's directory, or `None` after a loud
/// notice when this machine has no such Python; under `CI` that is a failure.
pub fn tiny_model() -> Option<(PathBuf, PathBuf)> {
    static MODEL: OnceLock<Result<(PathBuf, tempfile::TempDir), String>> = OnceLock::new();
    let model = MODEL.get_or_init(|| {
        let python = lrg_mlx::testing::python_with_mlx()?;
        let dir = tempfile::tempdir().unwrap();
        lrg_mlx::testing::write_tiny_model(&python, dir.path(), None)?;
        Ok((python, dir))
    });
    match model {
        Ok((python, dir)) => Some((python.clone(), dir.path().to_path_buf())),
        Err(why) => {
            if std::env::var_os("CI").is_some() {
                panic!("the MLX tests need Python with mlx under CI: {why}");
            }
            eprintln!("SKIPPED: MLX engine test: {why}");
            None
        }
    }
}

/// An engine on the tiny model, or `None` (see [`tiny_model`]).
pub async fn engine() -> Option<MlxEngine> {
    let (python, dir) = tiny_model()?;
    Some(start(config(&python, &dir)).await.unwrap())
}

pub fn config(python: &Path, dir: &Path) -> MlxConfig {
    let _ = tracing_subscriber::fmt()
        .with_test_writer()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .try_init();
    MlxConfig::new(dir)
        .with_python(python)
        .with_startup_timeout(STEP)
        .with_read_timeout(STEP)
}

pub async fn start(config: MlxConfig) -> Result<MlxEngine, ProviderError> {
    tokio::time::timeout(STEP, MlxEngine::start(config))
        .await
        .expect("starting the engine took too long")
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

/// Caps small enough that the random model's answers stay short.
pub const ANALYSIS_CAP: u64 = 40;
pub const ARGUMENT_CAP: u64 = 24;
pub const REPLY_CAP: u64 = 60;

/// An answer schema in LocalChatModel's shape for five tools (a call branch
/// each, and a reply branch), every string capped with `maxLength`.
pub fn five_tool_schema() -> Value {
    let s = || json!({"type": "string", "maxLength": ARGUMENT_CAP});
    let tools: Vec<(&str, Value)> = vec![
        (
            "read_file",
            obj(
                &[("path", s())],
                &[("offset", json!({"type": "integer", "minimum": 0}))],
            ),
        ),
        ("write_file", obj(&[("path", s()), ("content", s())], &[])),
        (
            "list_directory",
            obj(
                &[("path", s())],
                &[("recursive", json!({"type": "boolean"}))],
            ),
        ),
        (
            "run_command",
            obj(
                &[("command", s())],
                &[("timeout_s", json!({"type": "number"}))],
            ),
        ),
        (
            "create_issue",
            obj(
                &[("title", s()), ("body", s())],
                &[(
                    "labels",
                    json!({"type": "array", "items": s(), "maxItems": 3}),
                )],
            ),
        ),
    ];
    let analysis = json!({"type": "string", "maxLength": ANALYSIS_CAP});
    let mut branches: Vec<Value> = tools
        .into_iter()
        .map(|(name, args)| {
            json!({"type": "object",
                   "properties": {"analysis": analysis,
                                  "call": {"type": "object", "properties": {(name): args},
                                           "required": [name], "additionalProperties": false}},
                   "required": ["analysis", "call"], "additionalProperties": false})
        })
        .collect();
    branches.push(json!({"type": "object",
        "properties": {"analysis": analysis, "reply": {"type": "string", "maxLength": REPLY_CAP}},
        "required": ["analysis", "reply"], "additionalProperties": false}));
    json!({"anyOf": branches})
}

fn obj(required: &[(&str, Value)], optional: &[(&str, Value)]) -> Value {
    let mut props = Map::new();
    for (k, v) in required.iter().chain(optional) {
        props.insert((*k).to_string(), v.clone());
    }
    let req: Vec<&str> = required.iter().map(|(k, _)| *k).collect();
    json!({"type": "object", "properties": props, "required": req, "additionalProperties": false})
}

/// What a finished turn produced.
#[derive(Debug)]
pub struct Outcome {
    pub deltas: Vec<String>,
    pub text: String,
    pub usage: Usage,
    pub stop: EngineStop,
    /// How the prompt got into the cache (`None`: cancelled during prefill).
    pub kv: Option<KvReuse>,
}

/// Runs `turn` to its end (or its first error) within [`STEP`].
pub async fn run(engine: &MlxEngine, turn: EngineTurn) -> Result<Outcome, ProviderError> {
    let mut stream = engine.generate(turn, CancellationToken::new());
    let mut deltas = Vec::new();
    let mut kv = None;
    let collect = async {
        while let Some(event) = stream.next().await {
            match event? {
                EngineEvent::Delta { text } => deltas.push(text),
                EngineEvent::Done { usage, stop } => {
                    return Ok(Outcome {
                        text: deltas.concat(),
                        deltas: deltas.clone(),
                        usage,
                        stop,
                        kv,
                    });
                }
                EngineEvent::Prefill { kv: counts } => kv = Some(counts),
                _ => {}
            }
        }
        panic!("the stream ended without Done");
    };
    tokio::time::timeout(STEP, collect)
        .await
        .expect("the turn took too long")
}

/// A schema whose only answer is a 300-character note: a long turn, for
/// cancelling and killing mid-way.
pub fn long_note_schema() -> Value {
    json!({"type": "object",
           "properties": {"note": {"type": "string", "minLength": 300, "maxLength": 300}},
           "required": ["note"], "additionalProperties": false})
}
