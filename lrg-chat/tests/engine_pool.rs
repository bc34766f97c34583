//! Sessions on a pooled local engine (a fake engine behind a counting
//! loader, through `Connections::connect` as every front end connects): ten
//! sub-agents on the parent's local model load it once and never share a
//! sequence at once, and a reload before a turn streams `model_loading`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt as _;
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use lrg_chat::events::Event;
use lrg_chat::sub_agents::{SubAgentStatus, SubAgents};
use lrg_chat::{ChatSession, FixedModel, Permissions};
use lrg_providers::catalog::{Connections, EngineLoader};
use lrg_providers::local_chat::{
    EngineEvent, EnginePool, EngineRole, EngineSettings, EngineStop, EngineTurn, LoadProgress,
    LocalEngine, PoolConfig, SequenceId,
};
use lrg_providers::{ModelRef, Provider, ProviderError, Usage};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::session_support::{WAIT, finish};

/// What the engine saw.
#[derive(Default)]
struct Seen {
    loads: AtomicUsize,
    /// Sequences with a turn running now.
    running: Mutex<HashSet<SequenceId>>,
    /// Set when a turn started on a sequence that had one running.
    shared: Mutex<Vec<SequenceId>>,
    sequences: Mutex<HashSet<SequenceId>>,
}

/// Answers as the parent (spawn ten sub-agents, then reply) or as a
/// sub-agent (reply), each turn taking a few milliseconds so they overlap.
struct Engine(Arc<Seen>);

impl LocalEngine for Engine {
    fn model_name(&self) -> String {
        "tiny".into()
    }

    fn context_window(&self) -> u32 {
        8192
    }

    fn generate(
        &self,
        turn: EngineTurn,
        _cancel: CancellationToken,
    ) -> BoxStream<'static, Result<EngineEvent, ProviderError>> {
        let seen = Arc::clone(&self.0);
        let sequence = turn.sequence;
        if !seen.running.lock().unwrap().insert(sequence) {
            seen.shared.lock().unwrap().push(sequence);
        }
        seen.sequences.lock().unwrap().insert(sequence);
        let users: Vec<&str> = turn
            .messages
            .iter()
            .filter(|m| m.role == EngineRole::User)
            .map(|m| m.content.as_str())
            .collect();
        let answer = if users.first() == Some(&"delegate") && users.len() == 1 {
            let tasks: Vec<_> = (0..10)
                .map(|n| json!({"description": format!("part {n}"), "prompt": format!("task {n}")}))
                .collect();
            json!({"analysis": "", "call": {"spawn_sub_agent": {"tasks": tasks}}})
        } else {
            json!({"analysis": "", "reply": "done"})
        };
        Box::pin(
            futures::stream::once(async move {
                tokio::time::sleep(Duration::from_millis(20)).await;
                seen.running.lock().unwrap().remove(&sequence);
                futures::stream::iter(vec![
                    Ok(EngineEvent::Delta {
                        text: answer.to_string(),
                    }),
                    Ok(EngineEvent::Done {
                        usage: Usage::new(20, 10),
                        stop: EngineStop::Done,
                    }),
                ])
            })
            .flatten(),
        )
    }
}

struct Loader(Arc<Seen>);

impl EngineLoader for Loader {
    fn load(
        &self,
        _: PathBuf,
        _: &EngineSettings,
        progress: LoadProgress,
    ) -> BoxFuture<'static, Result<Arc<dyn LocalEngine>, ProviderError>> {
        self.0.loads.fetch_add(1, Ordering::SeqCst);
        let seen = Arc::clone(&self.0);
        Box::pin(async move {
            tokio::time::sleep(Duration::from_millis(20)).await;
            progress.report(0.5);
            Ok(Arc::new(Engine(seen)) as Arc<dyn LocalEngine>)
        })
    }
}

async fn pooled(pool: &EnginePool, seen: &Arc<Seen>) -> Arc<dyn lrg_providers::ChatModel> {
    let connections = Connections::new()
        .with_engine(Provider::Llama, Arc::new(Loader(Arc::clone(seen))))
        .with_engine_pool(pool.clone());
    let id: ModelRef = "llama:/models/tiny.gguf".parse().unwrap();
    connections.connect(&id).await.unwrap()
}

#[tokio::test]
async fn ten_sub_agents_on_a_local_model_load_it_once_and_never_share_a_sequence() {
    let seen = Arc::new(Seen::default());
    let pool = EnginePool::new(PoolConfig::default());
    let model = pooled(&pool, &seen).await;
    let session = ChatSession::builder(Arc::new(FixedModel(model)))
        .permissions(Arc::new(Permissions::default()))
        .sub_agents(SubAgents::default().max_concurrent(10).max_per_call(10))
        .build();
    finish(session.send("delegate").unwrap()).await;
    tokio::time::timeout(WAIT, async {
        while session.sub_agents().len() < 10
            || session
                .sub_agents()
                .iter()
                .any(|a| a.status != SubAgentStatus::Done)
        {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .unwrap_or_else(|_| {
        panic!(
            "the sub-agents did not finish: {:#?}\n{:#?}",
            session.sub_agents(),
            crate::session_support::log(&session)
        )
    });
    tokio::time::timeout(WAIT, session.wait_settled())
        .await
        .unwrap();
    assert_eq!(seen.loads.load(Ordering::SeqCst), 1, "one load for all");
    assert_eq!(pool.loads(), 1);
    assert!(
        seen.shared.lock().unwrap().is_empty(),
        "two turns on one sequence"
    );
    // They ran at once, so on sequences of their own.
    assert!(seen.sequences.lock().unwrap().len() > 1);
}

#[tokio::test]
async fn a_reload_before_a_turn_streams_model_loading() {
    let seen = Arc::new(Seen::default());
    // Keep-alive 0: unloaded after each turn (and after the connect).
    let pool = EnginePool::new(PoolConfig::new().with_keep_alive(Some(Duration::ZERO)));
    let model = pooled(&pool, &seen).await;
    let session = ChatSession::builder(Arc::new(FixedModel(model)))
        .permissions(Arc::new(Permissions::default()))
        .build();
    let mut events = session.subscribe(0);
    finish(session.send("hello").unwrap()).await;
    let mut shown = Vec::new();
    tokio::time::timeout(WAIT, async {
        while let Some(entry) = events.next().await {
            let done = matches!(entry.event, Event::AssistantTurn { .. });
            if matches!(
                entry.event,
                Event::ModelLoading { .. } | Event::AssistantTurn { .. }
            ) {
                shown.push(serde_json::to_value(entry.as_ref()).unwrap());
            }
            if done {
                break;
            }
        }
    })
    .await
    .unwrap();
    crate::snapshot!(shown);
    assert_eq!(
        seen.loads.load(Ordering::SeqCst),
        2,
        "connect, then the turn"
    );
}
