//! The child of the kill -9 test (`tests/store_crash.rs`): opens the keyed
//! session `crash:test` in the JSONL store at `argv[1]` (resuming it when it
//! exists) and chats with a scripted model that calls two tools per step,
//! forever, printing `done <rows>` after each message. The test kills it at
//! random moments and checks what the store kept.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::io::Write as _;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt as _;
use lrg_chat::registry::{OpenRequest, RegistryConfig, SessionRegistry};
use lrg_chat::store::{JsonlStore, ModelBinding, SessionKeys};
use lrg_chat::tools::ToolHost;
use lrg_chat::{ChatSession, FixedModel, TurnOutcome};
use lrg_providers::{
    ChatModel, ModelInfo, ScriptedCall, ScriptedModel, ScriptedTurn, ToolAnnotations, TurnEvent,
    TurnRequest, TurnStream,
};
use serde_json::json;
use tokio_util::sync::CancellationToken;

/// The script with call ids unique to this process, as a real provider's
/// are (the script numbers them from 1 in every process).
struct UniqueIds(ScriptedModel, String);

impl ChatModel for UniqueIds {
    fn info(&self) -> ModelInfo {
        self.0.info()
    }

    fn turn(&self, request: TurnRequest, cancel: CancellationToken) -> TurnStream {
        let prefix = self.1.clone();
        Box::pin(self.0.turn(request, cancel).map(move |event| match event {
            Ok(TurnEvent::ToolCall(mut call)) => {
                call.id = format!("{prefix}_{}", call.id);
                Ok(TurnEvent::ToolCall(call))
            }
            other => other,
        }))
    }
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Args {
    /// Anything.
    n: u64,
}

fn script() -> Vec<ScriptedTurn> {
    let mut turns = Vec::new();
    for i in 0..5_000u64 {
        turns.push(ScriptedTurn {
            calls: vec![
                ScriptedCall {
                    name: "look".into(),
                    arguments: json!({"n": i}),
                },
                ScriptedCall {
                    name: "note".into(),
                    arguments: json!({"n": i}),
                },
            ],
            delay_ms: Some(1),
            ..Default::default()
        });
        if i % 2 == 1 {
            turns.push(ScriptedTurn {
                text: Some(format!("step {i} done")),
                delay_ms: Some(1),
                ..Default::default()
            });
        }
    }
    turns
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let dir = std::env::args()
        .nth(1)
        .expect("usage: store_crash_child DIR");
    let host = Arc::new(ToolHost::new());
    let all = ToolAnnotations {
        read_only_hint: Some(true),
        ..Default::default()
    };
    for name in ["look", "note"] {
        host.add_fn(name, "A tool.", all.clone(), |a: Args| async move {
            tokio::time::sleep(Duration::from_millis(a.n % 3)).await;
            Ok::<_, String>(format!("result {}", a.n))
        })
        .unwrap();
    }
    let model = Arc::new(UniqueIds(
        ScriptedModel::new(script()),
        format!("p{}", std::process::id()),
    ));
    let registry = SessionRegistry::new(
        move |_: &ModelBinding| {
            Ok(ChatSession::builder(Arc::new(FixedModel(model.clone()))).tools(host.clone()))
        },
        RegistryConfig::default(),
    )
    .with_store(Arc::new(JsonlStore::new(dir)));
    let keys = SessionKeys::new("crash", "test").unwrap();
    let opened = registry
        .open(OpenRequest::keyed(
            keys,
            ModelBinding::new("script:scripted"),
        ))
        .await
        .unwrap_or_else(|e| {
            eprintln!("open failed: {e}");
            std::process::exit(3)
        });
    let mut out = std::io::stdout();
    writeln!(out, "ready {}", opened.session.history().len()).unwrap();
    for i in 0.. {
        let outcome = opened.session.send(format!("message {i}")).unwrap().await;
        if !matches!(outcome, TurnOutcome::Completed { .. }) {
            eprintln!("message {i}: {outcome:?}");
            std::process::exit(4);
        }
        writeln!(out, "done {}", opened.session.history().len()).unwrap();
        out.flush().unwrap();
    }
}
