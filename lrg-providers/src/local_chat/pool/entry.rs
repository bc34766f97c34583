//! One pooled model: its engine while loaded, the load in flight, the turns
//! running on it (leases) and the chats bound to it.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

use futures::FutureExt as _;
use futures::future::{BoxFuture, Shared};

use super::{LoadingEvent, PoolShared};
use crate::ProviderError;
use crate::catalog::{EngineLoader, Provider};
use crate::local_chat::engine::{EngineSettings, LoadProgress, LocalEngine, SequenceId};
use crate::sync::lock;

/// How many times a turn starts a load again when the engine it waited for
/// was unloaded before it could take it (another model's load evicted it).
const LOAD_ATTEMPTS: usize = 3;

/// How long a freshly loaded engine waits for the turns that waited for it
/// before keep-alive counts.
const LOAD_GRACE: Duration = Duration::from_secs(2);

/// What the pool keys a loaded engine by: the same file loaded with other
/// settings, or by a loader configured otherwise, is another engine.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct PoolKey {
    pub(crate) provider: Provider,
    pub(crate) path: PathBuf,
    pub(crate) settings: EngineSettings,
    /// [`EngineLoader::fingerprint`]: load options outside `settings`.
    pub(crate) loader: String,
}

/// What a chat shows of its model, learned at the first load and kept over
/// unloads so a chat's info never changes while it waits for a reload.
#[derive(Debug, Clone)]
pub(crate) struct Facts {
    pub(crate) name: String,
    pub(crate) window: u32,
    pub(crate) vision: bool,
}

type LoadFuture = Shared<BoxFuture<'static, Result<(), ProviderError>>>;

#[derive(Default)]
struct State {
    engine: Option<Arc<dyn LocalEngine>>,
    loading: Option<LoadFuture>,
    /// Turns running on the engine: while any does it is never unloaded.
    leases: usize,
    /// Chats bound to this model (live [`ChatSlot`]s).
    chats: usize,
    last_used: Option<Instant>,
    /// Bumped at every lease taken or given back and every load, so a
    /// keep-alive timer set before a later use does nothing.
    epoch: u64,
}

/// One model in the pool.
pub(crate) struct Entry {
    pub(crate) key: PoolKey,
    /// `provider:path`, as events and listings name it.
    pub(crate) id: String,
    loader: Arc<dyn EngineLoader>,
    pool: Weak<PoolShared>,
    state: Mutex<State>,
    facts: OnceLock<Facts>,
}

/// Why the pool did not unload a model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum UnloadRefused {
    /// A turn is running on it; it is unloaded once idle.
    #[error("a turn is running on the model; it is unloaded when idle")]
    Busy,
    /// It is not loaded.
    #[error("the model is not loaded")]
    NotLoaded,
}

impl Entry {
    pub(crate) fn new(key: PoolKey, loader: Arc<dyn EngineLoader>, pool: Weak<PoolShared>) -> Self {
        let id = format!("{}:{}", key.provider, key.path.display());
        Self {
            key,
            id,
            loader,
            pool,
            state: Mutex::new(State::default()),
            facts: OnceLock::new(),
        }
    }

    /// The facts of the first load (set before any chat is handed out).
    pub(crate) fn facts(&self) -> Option<&Facts> {
        self.facts.get()
    }

    pub(crate) fn is_loaded(&self) -> bool {
        lock(&self.state).engine.is_some()
    }

    /// The engine, when loaded now: for listings, never for a turn.
    pub(crate) fn engine_now(&self) -> Option<Arc<dyn LocalEngine>> {
        lock(&self.state).engine.clone()
    }

    pub(crate) fn chats(&self) -> usize {
        lock(&self.state).chats
    }

    pub(crate) fn busy(&self) -> bool {
        lock(&self.state).leases > 0
    }

    pub(crate) fn last_used(&self) -> Option<Instant> {
        lock(&self.state).last_used
    }

    /// Loading progress of this model while it is not loaded (`None` when
    /// it is, or the pool is gone): subscribed before a lease starts the
    /// load, so its first report is heard.
    pub(crate) fn loading_events(&self) -> Option<tokio::sync::broadcast::Receiver<LoadingEvent>> {
        if self.is_loaded() {
            return None;
        }
        self.pool.upgrade().map(|pool| pool.events.subscribe())
    }

    /// Loaded or loading: what counts against `max_loaded_models`.
    pub(crate) fn holds_memory(&self) -> bool {
        let state = lock(&self.state);
        state.engine.is_some() || state.loading.is_some()
    }

    /// The engine for one turn, loading it first when it is not loaded (one
    /// load however many turns wait for it). The lease keeps it loaded
    /// until dropped.
    pub(crate) async fn lease(self: &Arc<Self>) -> Result<Lease, ProviderError> {
        for _ in 0..LOAD_ATTEMPTS {
            let mut started = false;
            let load = {
                let mut state = lock(&self.state);
                if let Some(engine) = &state.engine {
                    let engine = Arc::clone(engine);
                    state.leases += 1;
                    state.epoch += 1;
                    return Ok(Lease {
                        entry: Arc::clone(self),
                        engine,
                    });
                }
                match &state.loading {
                    Some(load) => load.clone(),
                    None => {
                        let load = self.start_load();
                        state.loading = Some(load.clone());
                        started = true;
                        load
                    }
                }
            };
            // Outside this entry's lock: making room locks the others.
            if started && let Some(pool) = self.pool.upgrade() {
                pool.make_room(self);
            }
            load.await?;
        }
        Err(ProviderError::transient(format!(
            "{} was unloaded again each time it finished loading (too many models for --max-loaded-models?)",
            self.id
        )))
    }

    /// Start loading on its own task, so a load finishes (and is not
    /// wasted) even when every turn waiting for it is stopped.
    fn start_load(self: &Arc<Self>) -> LoadFuture {
        let pool = self.pool.upgrade();
        let progress = {
            let pool = self.pool.clone();
            let model = self.id.clone();
            LoadProgress::new(move |progress| {
                if let Some(pool) = pool.upgrade() {
                    pool.report(LoadingEvent {
                        model: model.clone(),
                        progress,
                    });
                }
            })
        };
        if let Some(pool) = &pool {
            pool.count_load();
        }
        progress.report(0.0);
        let loading = self
            .loader
            .load(self.key.path.clone(), &self.key.settings, progress.clone());
        let entry = Arc::clone(self);
        let task = tokio::spawn(async move {
            let started = Instant::now();
            let result = loading.await;
            let mut state = lock(&entry.state);
            state.loading = None;
            let engine = result?;
            entry.facts.get_or_init(|| Facts {
                name: engine.model_name(),
                window: engine.context_window(),
                vision: engine.vision(),
            });
            state.engine = Some(engine);
            state.epoch += 1;
            state.last_used = Some(Instant::now());
            let epoch = state.epoch;
            drop(state);
            progress.report(1.0);
            tracing::info!(model = %entry.id, secs = started.elapsed().as_secs_f32(), "model loaded");
            // Loaded for turns that may have been stopped meanwhile: idle
            // from now on unless a lease is taken, with a grace for the
            // waiting turns to take theirs (keep-alive 0 would unload the
            // engine before any of them could).
            entry.unload_after(
                entry
                    .keep_alive()
                    .map_or(Duration::MAX, |k| k.max(LOAD_GRACE)),
                epoch,
            );
            Ok(())
        });
        let id = self.id.clone();
        async move {
            match task.await {
                Ok(result) => result,
                Err(e) => Err(ProviderError::Config {
                    message: format!("loading {id} failed: {e}"),
                }),
            }
        }
        .boxed()
        .shared()
    }

    /// A lease was given back.
    fn returned(self: &Arc<Self>) {
        let epoch = {
            let mut state = lock(&self.state);
            state.leases = state.leases.saturating_sub(1);
            state.epoch += 1;
            state.last_used = Some(Instant::now());
            if state.leases > 0 {
                return;
            }
            state.epoch
        };
        self.idle_from(epoch);
    }

    /// The engine went idle at `epoch`: unload it now (keep-alive 0) or
    /// after keep-alive, unless it is used again before.
    fn idle_from(self: &Arc<Self>, epoch: u64) {
        let Some(pool) = self.pool.upgrade() else {
            return;
        };
        match pool.keep_alive() {
            None => {}
            Some(keep) if keep.is_zero() => {
                self.unload_at(epoch);
            }
            Some(keep) => self.unload_after(keep, epoch),
        }
    }

    fn keep_alive(&self) -> Option<Duration> {
        self.pool.upgrade().and_then(|pool| pool.keep_alive())
    }

    fn unload_after(self: &Arc<Self>, keep: Duration, epoch: u64) {
        if keep == Duration::MAX {
            return;
        }
        // Without a runtime (a lease dropped at exit) nothing is timed: the
        // engine goes when the process does.
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let entry = Arc::downgrade(self);
        runtime.spawn(async move {
            tokio::time::sleep(keep).await;
            if let Some(entry) = entry.upgrade() {
                entry.unload_at(epoch);
            }
        });
    }

    /// Unload when nothing used the engine since `epoch`.
    fn unload_at(self: &Arc<Self>, epoch: u64) {
        let engine = {
            let mut state = lock(&self.state);
            if state.epoch != epoch || state.leases > 0 {
                return;
            }
            state.engine.take()
        };
        if let Some(engine) = engine {
            tracing::info!(model = %self.id, "idle model unloaded");
            // Dropped outside the lock: an engine may join its worker.
            drop(engine);
            if let Some(pool) = self.pool.upgrade() {
                pool.forget_if_unused(&self.key);
            }
        }
    }

    /// Unload now unless a turn runs on it.
    pub(crate) fn unload(self: &Arc<Self>) -> Result<(), UnloadRefused> {
        let engine = {
            let mut state = lock(&self.state);
            if state.leases > 0 {
                return Err(UnloadRefused::Busy);
            }
            state.epoch += 1;
            state.engine.take().ok_or(UnloadRefused::NotLoaded)?
        };
        tracing::info!(model = %self.id, "model unloaded");
        drop(engine);
        Ok(())
    }

    /// Whether the pool may drop this entry: nothing loaded or loading, no
    /// chat bound to it.
    pub(crate) fn unused(&self) -> bool {
        let state = lock(&self.state);
        state.engine.is_none() && state.loading.is_none() && state.chats == 0 && state.leases == 0
    }
}

/// One turn's hold on a loaded engine: while it lives the engine stays.
pub(crate) struct Lease {
    entry: Arc<Entry>,
    engine: Arc<dyn LocalEngine>,
}

impl Lease {
    pub(crate) fn engine(&self) -> &Arc<dyn LocalEngine> {
        &self.engine
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.entry.returned();
    }
}

/// A chat bound to a pooled model: its sequence, released in the engine
/// when the chat goes (dropped, or switched to another model).
pub(crate) struct ChatSlot {
    pub(crate) entry: Arc<Entry>,
    pub(crate) sequence: SequenceId,
}

impl ChatSlot {
    pub(crate) fn new(entry: Arc<Entry>) -> Self {
        lock(&entry.state).chats += 1;
        Self {
            entry,
            sequence: SequenceId::fresh(),
        }
    }
}

impl Drop for ChatSlot {
    fn drop(&mut self) {
        let engine = {
            let mut state = lock(&self.entry.state);
            state.chats = state.chats.saturating_sub(1);
            state.engine.clone()
        };
        // Turns hold the slot while they run, so none of this sequence runs.
        // An unloaded engine kept nothing of it.
        if let Some(engine) = engine {
            engine.release(self.sequence);
        }
        if let Some(pool) = self.entry.pool.upgrade() {
            pool.forget_if_unused(&self.entry.key);
        }
    }
}
