//! The engine pool over a counting fake engine: chats on one model share one
//! load (concurrent first connects too), each has its own sequence, an idle
//! engine unloads after keep-alive and the next turn reloads it with live
//! progress, nothing unloads under a running turn, a chat that goes releases
//! its sequence, `max_loaded_models` unloads the least recently used, and
//! the catalog says which models are loaded.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt as _;
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use lrg_providers::catalog::{Connections, EngineLoader};
use lrg_providers::local_chat::{
    EngineEvent, EnginePool, EngineSettings, EngineStop, EngineTurn, KvReuse, LoadProgress,
    LocalEngine, PoolConfig, SequenceId,
};
use lrg_providers::{
    ChatModel, Message, ModelRef, Provider, ProviderError, StopReason, TurnEvent, TurnRequest,
    Usage, collect_turn,
};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

/// Every wait is bounded: a hang fails instead of stalling CI.
const BOUND: Duration = Duration::from_secs(20);

/// What every fake engine of one loader saw.
#[derive(Default)]
pub struct Seen {
    /// Loads started.
    pub loads: AtomicUsize,
    /// Engines dropped (unloaded).
    pub dropped: AtomicUsize,
    /// The sequence of each turn, in order.
    pub turns: Mutex<Vec<SequenceId>>,
    /// Sequences released.
    pub released: Mutex<Vec<SequenceId>>,
}

/// An engine that answers every turn with a reply, after a permit of
/// `gate` when it has one (so a test holds a turn running).
pub struct FakeEngine {
    seen: Arc<Seen>,
    gate: Option<Arc<Semaphore>>,
    name: String,
}

impl Drop for FakeEngine {
    fn drop(&mut self) {
        self.seen.dropped.fetch_add(1, Ordering::SeqCst);
    }
}

impl LocalEngine for FakeEngine {
    fn model_name(&self) -> String {
        self.name.clone()
    }

    fn context_window(&self) -> u32 {
        4096
    }

    fn generate(
        &self,
        turn: EngineTurn,
        _cancel: CancellationToken,
    ) -> BoxStream<'static, Result<EngineEvent, ProviderError>> {
        self.seen.turns.lock().unwrap().push(turn.sequence);
        let gate = self.gate.clone();
        Box::pin(async_stream::stream! {
            yield Ok(EngineEvent::Prefill { kv: KvReuse::new(0, 0, 10) });
            if let Some(gate) = gate {
                let _permit = gate.acquire().await;
            }
            yield Ok(EngineEvent::Delta { text: r#"{"analysis":"ok","reply":"hi"}"#.into() });
            yield Ok(EngineEvent::Done { usage: Usage::new(10, 5), stop: EngineStop::Done });
        })
    }

    fn release(&self, sequence: SequenceId) {
        self.seen.released.lock().unwrap().push(sequence);
    }
}

/// Loads [`FakeEngine`]s, counting, taking `delay` and reporting halfway.
pub struct CountingLoader {
    pub seen: Arc<Seen>,
    pub delay: Duration,
    pub gate: Option<Arc<Semaphore>>,
}

impl CountingLoader {
    pub fn new(delay: Duration) -> Arc<Self> {
        Arc::new(Self {
            seen: Arc::default(),
            delay,
            gate: None,
        })
    }
}

impl EngineLoader for CountingLoader {
    fn load(
        &self,
        path: PathBuf,
        _settings: &EngineSettings,
        progress: LoadProgress,
    ) -> BoxFuture<'static, Result<Arc<dyn LocalEngine>, ProviderError>> {
        let seen = Arc::clone(&self.seen);
        let gate = self.gate.clone();
        let delay = self.delay;
        seen.loads.fetch_add(1, Ordering::SeqCst);
        Box::pin(async move {
            tokio::time::sleep(delay / 2).await;
            progress.report(0.5);
            tokio::time::sleep(delay / 2).await;
            let name = path.file_stem().map(|s| s.to_string_lossy().into_owned());
            Ok(Arc::new(FakeEngine {
                seen,
                gate,
                name: name.unwrap_or_default(),
            }) as Arc<dyn LocalEngine>)
        })
    }
}

fn connections(pool: &EnginePool, loader: Arc<CountingLoader>) -> Connections {
    Connections::new()
        .with_engine(Provider::Llama, loader)
        .with_engine_pool(pool.clone())
}

fn llama(path: &str) -> ModelRef {
    format!("llama:{path}").parse().unwrap()
}

fn hello() -> TurnRequest {
    TurnRequest::new(vec![Message::user("hello")])
}

/// Every event of one turn, within [`BOUND`].
async fn turn_events(model: &dyn ChatModel) -> Vec<TurnEvent> {
    let stream = model.turn(hello(), CancellationToken::new());
    tokio::time::timeout(BOUND, stream.map(Result::unwrap).collect::<Vec<_>>())
        .await
        .unwrap()
}

async fn until(what: &str, mut done: impl FnMut() -> bool) {
    tokio::time::timeout(BOUND, async {
        while !done() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("timed out waiting for {what}"));
}

#[tokio::test]
async fn two_chats_share_one_engine_each_with_its_own_sequence() {
    let pool = EnginePool::new(PoolConfig::default());
    let loader = CountingLoader::new(Duration::from_millis(20));
    let c = connections(&pool, loader.clone());
    let a = c.connect(&llama("/m/tiny.gguf")).await.unwrap();
    let b = c.connect(&llama("/m/tiny.gguf")).await.unwrap();
    assert_eq!(loader.seen.loads.load(Ordering::SeqCst), 1);
    assert_eq!(pool.loads(), 1);
    assert_eq!(a.info().model, "tiny");
    for model in [&a, &b] {
        let turn = collect_turn(model.turn(hello(), CancellationToken::new()))
            .await
            .unwrap();
        assert_eq!(turn.text(), "hi");
        // What the engine kept is what the usage says was cached.
        assert_eq!(turn.usage.unwrap().cached_prompt_tokens, Some(0));
    }
    let turns = loader.seen.turns.lock().unwrap().clone();
    assert_eq!(turns.len(), 2);
    assert_ne!(turns[0], turns[1], "two chats, two sequences");
    let loaded = pool.loaded();
    assert_eq!(loaded.len(), 1);
    assert_eq!((loaded[0].chats, loaded[0].busy), (2, false));
    assert!(pool.is_loaded(Provider::Llama, Path::new("/m/tiny.gguf")));
}

#[tokio::test]
async fn concurrent_first_connects_share_one_load() {
    let pool = EnginePool::new(PoolConfig::default());
    let loader = CountingLoader::new(Duration::from_millis(200));
    let c = connections(&pool, loader.clone());
    let id = llama("/m/tiny.gguf");
    let models = tokio::time::timeout(
        BOUND,
        futures::future::join_all((0..5).map(|_| c.connect(&id))),
    )
    .await
    .unwrap();
    assert!(models.iter().all(Result::is_ok));
    assert_eq!(loader.seen.loads.load(Ordering::SeqCst), 1);
    // Other settings are another load.
    let more_slots = c
        .clone()
        .with_engine_settings(EngineSettings::new().with_parallel(8));
    more_slots.connect(&id).await.unwrap();
    assert_eq!(loader.seen.loads.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn an_idle_engine_unloads_after_keep_alive_and_the_next_turn_reloads_it_with_progress() {
    let pool = EnginePool::new(PoolConfig::new().with_keep_alive(Some(Duration::from_millis(150))));
    let loader = CountingLoader::new(Duration::from_millis(100));
    let c = connections(&pool, loader.clone());
    let mut progress = pool.subscribe();
    let model = c.connect(&llama("/m/tiny.gguf")).await.unwrap();
    // The connect's load was reported to the pool's subscribers.
    let first: Vec<f32> = std::iter::from_fn(|| progress.try_recv().ok())
        .map(|e| {
            assert_eq!(e.model, "llama:/m/tiny.gguf");
            e.progress
        })
        .collect();
    assert_eq!(first, [0.0, 0.5, 1.0]);

    turn_events(model.as_ref()).await;
    until("the idle unload", || pool.loaded().is_empty()).await;
    assert_eq!(
        loader.seen.dropped.load(Ordering::SeqCst),
        1,
        "the engine was freed"
    );

    // The chat survived the unload: its next turn loads again, live.
    let events = turn_events(model.as_ref()).await;
    let loading: Vec<f32> = events
        .iter()
        .filter_map(|e| match e {
            TurnEvent::Loading { progress } => Some(*progress),
            _ => None,
        })
        .collect();
    assert_eq!(loading, [0.0, 0.5, 1.0], "{events:?}");
    assert!(matches!(
        events.last(),
        Some(TurnEvent::End {
            stop: StopReason::EndTurn
        })
    ));
    assert_eq!(loader.seen.loads.load(Ordering::SeqCst), 2);
    // Same chat, same sequence across the reload.
    let turns = loader.seen.turns.lock().unwrap().clone();
    assert_eq!(turns[0], turns[1]);
}

#[tokio::test]
async fn nothing_unloads_under_a_running_turn() {
    let pool = EnginePool::new(PoolConfig::new().with_keep_alive(Some(Duration::ZERO)));
    let gate = Arc::new(Semaphore::new(0));
    let loader = Arc::new(CountingLoader {
        seen: Arc::default(),
        delay: Duration::from_millis(10),
        gate: Some(gate.clone()),
    });
    let c = connections(&pool, loader.clone());
    let path = Path::new("/m/tiny.gguf");
    let model = c.connect(&llama("/m/tiny.gguf")).await.unwrap();
    // Keep-alive 0: unloaded right after the connect's load.
    assert!(!pool.is_loaded(Provider::Llama, path));

    let running = tokio::spawn({
        let model = Arc::clone(&model);
        async move { turn_events(model.as_ref()).await }
    });
    until("the turn to start generating", || {
        loader.seen.turns.lock().unwrap().len() == 1
    })
    .await;
    assert_eq!(
        pool.unload(Provider::Llama, path),
        Err(lrg_providers::local_chat::pool::UnloadRefused::Busy)
    );
    assert!(pool.is_loaded(Provider::Llama, path));
    assert!(pool.loaded()[0].busy);
    assert_eq!(loader.seen.dropped.load(Ordering::SeqCst), 1);

    gate.add_permits(1);
    let events = tokio::time::timeout(BOUND, running).await.unwrap().unwrap();
    assert!(
        events
            .iter()
            .any(|e| matches!(e, TurnEvent::TextDelta { .. }))
    );
    // The turn over, keep-alive 0 unloads it.
    until("the unload after the turn", || {
        !pool.is_loaded(Provider::Llama, path)
    })
    .await;
    assert_eq!(loader.seen.dropped.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn a_chat_that_goes_or_switches_model_releases_its_sequence() {
    let pool = EnginePool::new(PoolConfig::default());
    let loader = CountingLoader::new(Duration::from_millis(10));
    let c = connections(&pool, loader.clone());
    let a = c.connect(&llama("/m/a.gguf")).await.unwrap();
    let stays = c.connect(&llama("/m/a.gguf")).await.unwrap();
    turn_events(a.as_ref()).await;
    let seq = loader.seen.turns.lock().unwrap()[0];
    // A switch: the chat's model becomes another one and the old is dropped.
    let mut current = a;
    current = {
        let next = c.connect(&llama("/m/b.gguf")).await.unwrap();
        drop(current);
        next
    };
    assert_eq!(*loader.seen.released.lock().unwrap(), [seq]);
    assert_eq!(current.info().model, "b");
    // The other chat keeps the engine.
    assert!(pool.is_loaded(Provider::Llama, Path::new("/m/a.gguf")));
    drop(stays);
    assert_eq!(loader.seen.released.lock().unwrap().len(), 2);
}

#[tokio::test]
async fn loading_past_max_loaded_models_unloads_the_least_recently_used_idle_one() {
    let pool = EnginePool::new(PoolConfig::new().with_max_loaded_models(Some(1)));
    let loader = CountingLoader::new(Duration::from_millis(10));
    let c = connections(&pool, loader.clone());
    let a = c.connect(&llama("/m/a.gguf")).await.unwrap();
    let _b = c.connect(&llama("/m/b.gguf")).await.unwrap();
    let loaded: Vec<String> = pool.loaded().into_iter().map(|m| m.id).collect();
    assert_eq!(loaded, ["llama:/m/b.gguf"]);
    // The evicted model's chat reloads it (and evicts b in turn).
    let events = turn_events(a.as_ref()).await;
    assert!(
        events
            .iter()
            .any(|e| matches!(e, TurnEvent::Loading { .. }))
    );
    let loaded: Vec<String> = pool.loaded().into_iter().map(|m| m.id).collect();
    assert_eq!(loaded, ["llama:/m/a.gguf"]);
    assert_eq!(loader.seen.loads.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn a_failed_load_is_reported_and_tried_again_by_the_next_connect() {
    struct Failing(AtomicUsize);
    impl EngineLoader for Failing {
        fn load(
            &self,
            _: PathBuf,
            _: &EngineSettings,
            _: LoadProgress,
        ) -> BoxFuture<'static, Result<Arc<dyn LocalEngine>, ProviderError>> {
            self.0.fetch_add(1, Ordering::SeqCst);
            Box::pin(async {
                Err(ProviderError::Config {
                    message: "no such file (give the path of a .gguf model)".into(),
                })
            })
        }
    }
    let pool = EnginePool::new(PoolConfig::default());
    let loader = Arc::new(Failing(AtomicUsize::new(0)));
    let c = Connections::new()
        .with_engine(Provider::Llama, loader.clone())
        .with_engine_pool(pool.clone());
    for _ in 0..2 {
        let err = c.connect(&llama("/m/missing.gguf")).await.err().unwrap();
        assert!(err.to_string().contains("no such file"), "{err}");
    }
    assert_eq!(loader.0.load(Ordering::SeqCst), 2);
    assert!(pool.loaded().is_empty());
}

#[tokio::test]
async fn the_catalog_says_which_models_are_loaded_now() {
    use lrg_providers::catalog::ModelCatalog;
    use lrg_providers::catalog::gguf::fixture::{Value as G, gguf_bytes};
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tiny.gguf");
    std::fs::write(
        &file,
        gguf_bytes(&[("general.architecture", G::Str("llama".into()))]),
    )
    .unwrap();
    let pool = EnginePool::new(PoolConfig::default());
    let loader = CountingLoader::new(Duration::from_millis(10));
    let c = connections(&pool, loader).with_model_dir(dir.path());
    let catalog = ModelCatalog::new(c.clone());
    let tiny = |listing: &[lrg_providers::catalog::ProviderModels]| {
        listing
            .iter()
            .flat_map(|g| &g.models)
            .find(|m| m.provider == Provider::Llama)
            .cloned()
            .unwrap()
    };
    let before = tiny(&catalog.list().await);
    assert!(!before.loaded);
    assert!(!serde_json::to_string(&before).unwrap().contains("loaded"));
    let _chat = c.connect(&before.id.parse().unwrap()).await.unwrap();
    // The cached listing is marked again: loading is newer than the cache.
    let after = tiny(&catalog.list().await);
    assert!(after.loaded);
    assert!(
        serde_json::to_string(&after)
            .unwrap()
            .contains(r#""loaded":true"#)
    );
    pool.unload(Provider::Llama, &file).unwrap();
    assert!(!tiny(&catalog.list().await).loaded);
}

#[tokio::test]
async fn turns_of_one_chat_at_once_never_share_a_sequence() {
    // Sub-agents share their parent's model: their turns overlap.
    let pool = EnginePool::new(PoolConfig::default());
    let gate = Arc::new(Semaphore::new(0));
    let loader = Arc::new(CountingLoader {
        seen: Arc::default(),
        delay: Duration::from_millis(10),
        gate: Some(gate.clone()),
    });
    let c = connections(&pool, loader.clone());
    let model = c.connect(&llama("/m/tiny.gguf")).await.unwrap();
    let running: Vec<_> = (0..3)
        .map(|_| {
            let model = Arc::clone(&model);
            tokio::spawn(async move { turn_events(model.as_ref()).await })
        })
        .collect();
    until("three turns generating", || {
        loader.seen.turns.lock().unwrap().len() == 3
    })
    .await;
    let mut at_once = loader.seen.turns.lock().unwrap().clone();
    at_once.sort();
    at_once.dedup();
    assert_eq!(at_once.len(), 3, "three sequences: {at_once:?}");
    gate.add_permits(3);
    for turn in running {
        tokio::time::timeout(BOUND, turn).await.unwrap().unwrap();
    }
    // One at a time again: the chat's own sequence (the first), and the
    // spares kept for the next overlap; all released with the chat.
    gate.add_permits(1);
    turn_events(model.as_ref()).await;
    let turns = loader.seen.turns.lock().unwrap().clone();
    assert!(at_once.contains(&turns[3]));
    drop(model);
    let mut released = loader.seen.released.lock().unwrap().clone();
    released.sort();
    assert_eq!(released, at_once);
}
