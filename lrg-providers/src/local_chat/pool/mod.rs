//! The engine pool: one loaded engine per model (and load settings), shared
//! by every chat on it.
//!
//! [`crate::catalog::Connections::connect`] goes through the pool for
//! in-process engines, so sessions, sub-agents, the HTTP registry, `lrg acp`
//! and `lrg serve` all share it:
//!
//! - The first connect of a model loads it; a second one waits for no load,
//!   and connects made while it loads share that load.
//! - Each connect returns its own [`LocalChatModel`] with its own
//!   [`SequenceId`]; dropping it (the chat ended, or switched to another
//!   model) calls [`LocalEngine::release`].
//! - A chat holds the pool's entry, never the engine: an idle engine is
//!   unloaded after [`PoolConfig::keep_alive`] and its next turn loads it
//!   again (live progress as [`crate::TurnEvent::Loading`]).
//! - A turn holds a lease on the engine while it runs: nothing unloads an
//!   engine under a running turn, neither keep-alive nor
//!   [`EnginePool::unload`] nor making room for another model.
//! - At most [`PoolConfig::max_loaded_models`] are loaded; loading another
//!   unloads the least recently used idle one first.

mod entry;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use serde::Serialize;
use tokio::sync::broadcast;

use entry::PoolKey;
pub use entry::UnloadRefused;
pub(crate) use entry::{ChatSlot, Entry, Facts, Lease};

use super::LocalChatModel;
use super::engine::EngineSettings;
#[cfg(doc)]
use super::engine::LocalEngine;
use crate::ProviderError;
use crate::catalog::{EngineLoader, Provider};
use crate::sync::lock;

#[cfg(doc)]
use super::engine::SequenceId;

/// How long an idle engine stays loaded by default: 5 minutes, as Ollama.
pub const DEFAULT_KEEP_ALIVE: Duration = Duration::from_secs(5 * 60);

/// Loading events kept for a slow subscriber before it misses some.
const LOADING_EVENTS: usize = 64;

/// When the pool unloads engines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct PoolConfig {
    /// How long an engine stays loaded with no turn running on it: `Some(0)`
    /// unloads after each turn, `None` never unloads. Default
    /// [`DEFAULT_KEEP_ALIVE`].
    pub keep_alive: Option<Duration>,
    /// The most engines loaded at once (`None`: no limit, the default).
    /// Loading one more first unloads the least recently used idle one; when
    /// every loaded engine is running a turn the load goes ahead over the
    /// limit rather than wait.
    pub max_loaded_models: Option<usize>,
}

impl Default for PoolConfig {
    fn default() -> Self {
        Self {
            keep_alive: Some(DEFAULT_KEEP_ALIVE),
            max_loaded_models: None,
        }
    }
}

impl PoolConfig {
    /// The defaults: 5 minutes keep-alive, no limit on loaded models.
    pub fn new() -> Self {
        Self::default()
    }

    /// With this keep-alive (`None`: never unload).
    pub fn with_keep_alive(mut self, keep_alive: Option<Duration>) -> Self {
        self.keep_alive = keep_alive;
        self
    }

    /// With at most `max` models loaded at once (`None`: no limit; 0 is
    /// taken as 1).
    pub fn with_max_loaded_models(mut self, max: Option<usize>) -> Self {
        self.max_loaded_models = max.map(|m| m.max(1));
        self
    }
}

/// A model being loaded: how far it got (live, for progress bars).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LoadingEvent {
    /// The model, `provider:path`.
    pub model: String,
    /// Fraction done, 0.0 to 1.0 (1.0 once loaded).
    pub progress: f32,
}

/// A model the pool holds now, as [`EnginePool::loaded`] lists it.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct LoadedModel {
    /// `provider:path`, as the model's id.
    pub id: String,
    /// Its provider (`llama`, `mlx`).
    pub provider: Provider,
    /// The model file or directory.
    pub path: PathBuf,
    /// What it was loaded with.
    pub settings: EngineSettings,
    /// Chats bound to it.
    pub chats: usize,
    /// Whether a turn is running on it now.
    pub busy: bool,
    /// Its sequence slots ([`LocalEngine::slots`]).
    pub slots: usize,
    /// Bytes it holds, when the engine knows ([`LocalEngine::resident_bytes`]).
    pub resident_bytes: Option<u64>,
    /// How long it has been idle (`None` while busy).
    pub idle_for: Option<Duration>,
}

/// The process-wide registry of loaded engines (see the module docs).
/// Cheap to clone: clones share one pool.
#[derive(Clone)]
pub struct EnginePool {
    shared: Arc<PoolShared>,
}

pub(crate) struct PoolShared {
    config: Mutex<PoolConfig>,
    entries: Mutex<HashMap<PoolKey, Arc<Entry>>>,
    events: broadcast::Sender<LoadingEvent>,
    loads: AtomicU64,
}

impl std::fmt::Debug for EnginePool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ids: Vec<String> = lock(&self.shared.entries)
            .values()
            .map(|e| e.id.clone())
            .collect();
        f.debug_struct("EnginePool")
            .field("config", &self.config())
            .field("models", &ids)
            .finish()
    }
}

impl Default for EnginePool {
    fn default() -> Self {
        Self::new(PoolConfig::default())
    }
}

impl EnginePool {
    /// A pool of its own (the process shares [`EnginePool::global`]; a
    /// separate pool is for tests and for apps that keep models apart).
    pub fn new(config: PoolConfig) -> Self {
        Self {
            shared: Arc::new(PoolShared {
                config: Mutex::new(config),
                entries: Mutex::new(HashMap::new()),
                events: broadcast::channel(LOADING_EVENTS).0,
                loads: AtomicU64::new(0),
            }),
        }
    }

    /// The pool every [`crate::catalog::Connections`] uses unless given
    /// another.
    pub fn global() -> &'static EnginePool {
        static GLOBAL: OnceLock<EnginePool> = OnceLock::new();
        GLOBAL.get_or_init(EnginePool::default)
    }

    /// When it unloads engines.
    pub fn config(&self) -> PoolConfig {
        *lock(&self.shared.config)
    }

    /// Unload engines by `config` from now on (an idle engine's running
    /// keep-alive timer keeps the value it started with).
    pub fn set_config(&self, config: PoolConfig) {
        *lock(&self.shared.config) = config;
    }

    /// Every load's progress from now on, for whoever shows it (a progress
    /// bar, a page). A subscriber that falls behind misses events, never
    /// slows a load.
    pub fn subscribe(&self) -> broadcast::Receiver<LoadingEvent> {
        self.shared.events.subscribe()
    }

    /// How many loads this pool has started (a model unloaded and loaded
    /// again counts twice).
    pub fn loads(&self) -> u64 {
        self.shared.loads.load(Ordering::Relaxed)
    }

    /// A chat on the model at `path`, loaded by `loader` with `settings`:
    /// loaded now unless it is already (or being) loaded for another chat.
    /// The chat is reported as `provider`'s.
    pub async fn connect(
        &self,
        provider: Provider,
        path: PathBuf,
        settings: EngineSettings,
        loader: Arc<dyn EngineLoader>,
    ) -> Result<LocalChatModel, ProviderError> {
        let key = PoolKey {
            provider,
            path,
            settings,
            loader: loader.fingerprint(),
        };
        let entry =
            {
                let mut entries = lock(&self.shared.entries);
                Arc::clone(entries.entry(key.clone()).or_insert_with(|| {
                    Arc::new(Entry::new(key, loader, Arc::downgrade(&self.shared)))
                }))
            };
        // Bound before the load, so a failed load drops an unused entry.
        let slot = ChatSlot::new(entry);
        drop(slot.entry.lease().await?);
        Ok(LocalChatModel::pooled(provider.as_str(), slot))
    }

    /// The models loaded now, least recently used first.
    pub fn loaded(&self) -> Vec<LoadedModel> {
        let entries: Vec<Arc<Entry>> = lock(&self.shared.entries).values().cloned().collect();
        let mut loaded: Vec<(Option<std::time::Instant>, LoadedModel)> = entries
            .iter()
            .filter_map(|e| {
                let engine = e.engine_now()?;
                let busy = e.busy();
                let last_used = e.last_used();
                Some((
                    last_used,
                    LoadedModel {
                        id: e.id.clone(),
                        provider: e.key.provider,
                        path: e.key.path.clone(),
                        settings: e.key.settings.clone(),
                        chats: e.chats(),
                        busy,
                        slots: engine.slots(),
                        resident_bytes: engine.resident_bytes(),
                        idle_for: (!busy).then(|| last_used.map(|t| t.elapsed())).flatten(),
                    },
                ))
            })
            .collect();
        loaded.sort_by_key(|(used, _)| *used);
        loaded.into_iter().map(|(_, m)| m).collect()
    }

    /// Whether the model at `path` is loaded now (with any settings).
    pub fn is_loaded(&self, provider: Provider, path: &Path) -> bool {
        lock(&self.shared.entries)
            .values()
            .any(|e| e.key.provider == provider && e.key.path == path && e.is_loaded())
    }

    /// Unload the model at `path` now (with every settings it was loaded
    /// with); its chats load it again at their next turn. Refused while a
    /// turn runs on it. Returns how many engines were unloaded.
    pub fn unload(&self, provider: Provider, path: &Path) -> Result<usize, UnloadRefused> {
        let matching: Vec<Arc<Entry>> = lock(&self.shared.entries)
            .values()
            .filter(|e| e.key.provider == provider && e.key.path == path && e.is_loaded())
            .cloned()
            .collect();
        if matching.is_empty() {
            return Err(UnloadRefused::NotLoaded);
        }
        if matching.iter().any(|e| e.busy()) {
            return Err(UnloadRefused::Busy);
        }
        let mut unloaded = 0;
        for entry in &matching {
            match entry.unload() {
                Ok(()) => unloaded += 1,
                // Gone between the look and the unload: not an error.
                Err(UnloadRefused::NotLoaded) => {}
                Err(busy) => return Err(busy),
            }
            self.shared.forget_if_unused(&entry.key);
        }
        Ok(unloaded)
    }
}

impl PoolShared {
    pub(crate) fn keep_alive(&self) -> Option<Duration> {
        lock(&self.config).keep_alive
    }

    pub(crate) fn report(&self, event: LoadingEvent) {
        // Nobody subscribed is not an error.
        let _ = self.events.send(event);
    }

    pub(crate) fn count_load(&self) {
        self.loads.fetch_add(1, Ordering::Relaxed);
    }

    /// `loading` starts a load: unload least recently used idle engines
    /// until it fits under `max_loaded_models`.
    pub(crate) fn make_room(&self, loading: &Arc<Entry>) {
        let Some(max) = lock(&self.config).max_loaded_models else {
            return;
        };
        let others: Vec<Arc<Entry>> = lock(&self.entries)
            .values()
            .filter(|e| !Arc::ptr_eq(e, loading))
            .cloned()
            .collect();
        let mut holding: Vec<&Arc<Entry>> = others.iter().filter(|e| e.holds_memory()).collect();
        // This load is one of the `max`.
        let mut over = (holding.len() + 1).saturating_sub(max);
        if over == 0 {
            return;
        }
        holding.sort_by_key(|e| e.last_used());
        for entry in holding {
            if over == 0 {
                break;
            }
            if entry.unload().is_ok() {
                tracing::info!(model = %entry.id, for_model = %loading.id, "unloaded to make room (max loaded models)");
                over -= 1;
                self.forget_if_unused(&entry.key);
            }
        }
        if over > 0 {
            tracing::warn!(model = %loading.id, max, "every loaded model is running a turn: loading one more than --max-loaded-models");
        }
    }

    /// Drop `key`'s entry when nothing is loaded and no chat is bound.
    pub(crate) fn forget_if_unused(&self, key: &PoolKey) {
        let mut entries = lock(&self.entries);
        if entries.get(key).is_some_and(|e| e.unused()) {
            entries.remove(key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_defaults_and_zero_loaded_models_is_one() {
        let c = PoolConfig::default();
        assert_eq!(c.keep_alive, Some(DEFAULT_KEEP_ALIVE));
        assert_eq!(c.max_loaded_models, None);
        assert_eq!(c.with_max_loaded_models(Some(0)).max_loaded_models, Some(1));
    }
}
