//! One sidecar for every chat on a model: each chat (sequence) keeps its own
//! prompt cache across the others' turns, a released chat starts over, a
//! cache that cannot be trimmed (a bounded, rotating one) is restored from
//! the copy kept after the prompt instead of evaluated again, and five chats
//! through the engine pool start one sidecar, with load progress.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use lrg_mlx::MlxEngine;
use lrg_providers::catalog::{Connections, EngineLoader};
use lrg_providers::local_chat::{
    EngineMessage, EnginePool, EngineRole, EngineSettings, EngineTurn, LoadProgress, LocalEngine,
    PoolConfig, SequenceId,
};
use lrg_providers::{ChatModel, Message, ModelRef, Provider, ProviderError, TurnRequest};
use tokio_util::sync::CancellationToken;

use crate::common::{STEP, config, five_tool_schema, msg, run, start, tiny_model, turn};

const SYSTEM: &str = "You are a careful assistant. Answer with a tool call or a reply.\n\
Tools:\n- read_file(path, offset?)\n- list_directory(path, recursive?)";

/// An answer as another history could hold it.
const ANSWER: &str = r#"{"analysis":"none","reply":"No files."}"#;

fn on(sequence: u64, messages: Vec<EngineMessage>, seed: u32) -> EngineTurn {
    EngineTurn {
        sequence: SequenceId(sequence),
        ..turn(messages, five_tool_schema(), seed, 0.7, 3000)
    }
}

fn first(question: &str) -> Vec<EngineMessage> {
    vec![
        msg(EngineRole::System, SYSTEM),
        msg(EngineRole::User, question),
    ]
}

fn next(mut history: Vec<EngineMessage>, answer: &str) -> Vec<EngineMessage> {
    history.push(msg(EngineRole::Assistant, answer));
    history.push(msg(
        EngineRole::User,
        "Result of list_directory: {\"entries\":[\"a.txt\"]}",
    ));
    history
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_chat_keeps_its_own_prompt_cache_across_the_others_turns() {
    let Some((python, dir)) = tiny_model() else {
        return;
    };
    let engine = start(config(&python, &dir)).await.unwrap();
    let a1 = first("List the files in /tmp.");
    let b1 = first("Read the file notes.txt, please, all of it.");
    let out_a1 = run(&engine, on(1, a1.clone(), 1)).await.unwrap();
    let prompt_a1 = engine.stats().prompt_tokens;
    let out_b1 = run(&engine, on(2, b1.clone(), 2)).await.unwrap();
    assert_eq!(out_b1.kv.unwrap().kept, 0, "another chat starts fresh");

    // A's second turn finds its whole first prompt in its own cache, though
    // B's turn ran in between.
    let a2 = next(a1, &out_a1.text);
    let out_a2 = run(&engine, on(1, a2, 3)).await.unwrap();
    let kv = out_a2.kv.unwrap();
    assert!(kv.kept >= prompt_a1, "{kv:?} vs {prompt_a1}");
    assert_eq!((kv.restored, kv.dropped), (0, false));
    assert_eq!(out_a2.usage.cached_prompt_tokens, Some(kv.kept));

    // Released, B's cache is gone: its next turn evaluates everything.
    engine.release(SequenceId(2));
    tokio::time::sleep(Duration::from_millis(200)).await;
    let b2 = next(b1, &out_b1.text);
    let out_b2 = run(&engine, on(2, b2, 4)).await.unwrap();
    let kv = out_b2.kv.unwrap();
    assert_eq!(kv.kept, 0, "{kv:?}");
    assert_eq!(kv.prefilled, out_b2.usage.prompt_tokens);
    assert_eq!(engine.stats().starts, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cache_that_cannot_be_trimmed_is_restored_from_the_copy_after_the_prompt() {
    let Some((python, dir)) = tiny_model() else {
        return;
    };
    // A rotating cache of 48 tokens: full after turn 1's prompt, so it
    // cannot be trimmed back to it (as a sliding-window model's).
    let engine = start(config(&python, &dir).with_env("LRG_MLX_MAX_KV_SIZE", "48"))
        .await
        .unwrap();
    let t1 = first("List the files in /tmp, and tell me which are large.");
    let out1 = run(&engine, on(1, t1.clone(), 1)).await.unwrap();
    let prompt1 = engine.stats().prompt_tokens;
    assert!(
        prompt1 > 48,
        "the prompt must overflow the window: {prompt1}"
    );
    // Not the answer as generated (a history kept elsewhere re-serializes
    // it): the cache must go back to turn 1's prompt, which a full rotating
    // cache cannot.
    assert_ne!(out1.text, ANSWER);
    let out2 = run(&engine, on(1, next(t1, ANSWER), 2)).await.unwrap();
    let kv = out2.kv.unwrap();
    // Turn 1's prompt came back from the copy; only the rest was evaluated.
    assert_eq!((kv.kept, kv.restored), (0, prompt1), "{kv:?}");
    assert_eq!(kv.prefilled, out2.usage.prompt_tokens - prompt1);
    assert_eq!(out2.usage.cached_prompt_tokens, Some(prompt1));
}

/// Starts MLX engines on the test's Python, keeping each for a look.
struct Loader {
    python: PathBuf,
    started: Arc<Mutex<Vec<Arc<MlxEngine>>>>,
}

impl EngineLoader for Loader {
    fn load(
        &self,
        path: PathBuf,
        settings: &EngineSettings,
        progress: LoadProgress,
    ) -> BoxFuture<'static, Result<Arc<dyn LocalEngine>, ProviderError>> {
        let config = config(&self.python, &path).with_settings(settings);
        let started = Arc::clone(&self.started);
        Box::pin(async move {
            let engine = Arc::new(MlxEngine::start_with_progress(config, progress).await?);
            started.lock().unwrap().push(Arc::clone(&engine));
            Ok(engine as Arc<dyn LocalEngine>)
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_chats_through_the_pool_run_on_one_sidecar() {
    let Some((python, dir)) = tiny_model() else {
        return;
    };
    let pool = EnginePool::new(PoolConfig::default());
    let started = Arc::new(Mutex::new(Vec::new()));
    let loader = Arc::new(Loader {
        python,
        started: Arc::clone(&started),
    });
    let connections = Connections::new()
        .with_engine(Provider::Mlx, loader)
        .with_engine_pool(pool.clone())
        .with_engine_settings(EngineSettings::new().with_parallel(2));
    let mut progress = pool.subscribe();
    let id: ModelRef = format!("mlx:{}", dir.display()).parse().unwrap();
    let chats = tokio::time::timeout(
        STEP,
        futures::future::join_all((0..5).map(|_| connections.connect(&id))),
    )
    .await
    .unwrap();
    let chats: Vec<Arc<dyn ChatModel>> = chats.into_iter().map(Result::unwrap).collect();
    let reports: Vec<f32> = std::iter::from_fn(|| progress.try_recv().ok())
        .map(|e| e.progress)
        .collect();
    assert_eq!(reports.first(), Some(&0.0), "{reports:?}");
    assert_eq!(reports.last(), Some(&1.0), "{reports:?}");
    assert!(reports.windows(2).all(|w| w[0] <= w[1]), "{reports:?}");
    assert!(reports.len() >= 4, "the sidecar's load steps: {reports:?}");

    // A turn each, all at once: they queue on the one sidecar.
    let turns = chats.iter().enumerate().map(|(i, chat)| {
        let mut request = TurnRequest::new(vec![Message::user(format!("hello {i}"))]);
        request.settings.max_tokens = Some(8);
        lrg_providers::collect_turn(chat.turn(request, CancellationToken::new()))
    });
    let done = tokio::time::timeout(STEP, futures::future::join_all(turns))
        .await
        .unwrap();
    assert!(done.iter().all(Result::is_ok), "{done:?}");

    let started = started.lock().unwrap().clone();
    assert_eq!(started.len(), 1, "one load for five chats");
    assert_eq!(started[0].stats().starts, 1, "one sidecar");
    assert_eq!(started[0].slots(), 2);
    assert_eq!(pool.loaded()[0].chats, 5);
}
