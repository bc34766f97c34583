//! Which models can be used now, and how each is reached.
//!
//! - The provider table ([`Provider`], [`ProviderSpec`]): one row per
//!   provider, the source of ids, help, listing and connecting.
//! - [`Connections`]: keys, base URLs, model directories and linked-in
//!   engines, set by the application or read from the environment (never
//!   from a page), and [`Connections::connect`] to build a model by id.
//! - [`ModelCatalog`]: every model reachable now, grouped by provider, with
//!   locality, availability, context window, vision, native tool support,
//!   how a typed answer is obtained and where a conversation goes. Providers are probed concurrently, each
//!   within a timeout (2 s by default), so listing costs the slowest probe,
//!   not the sum; the result is cached briefly.
//!
//! ```no_run
//! # async fn demo() {
//! use lrg_providers::catalog::{Connections, ModelCatalog};
//!
//! let catalog = ModelCatalog::new(Connections::from_env());
//! for group in catalog.list().await.iter() {
//!     println!("{} ({:?}): {:?}", group.provider, group.locality, group.availability);
//!     for m in &group.models {
//!         println!("  {} {} tokens", m.id, m.context_window);
//!     }
//! }
//! # }
//! ```

mod agents;
mod connections;
mod files;
pub mod gguf;
mod probe;
mod table;

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;

pub use agents::{ACP_AGENT_PRESETS, AcpAgentPreset, FoundAgent, agents_on_path};
pub use connections::{Connections, DEFAULT_PROBE_TIMEOUT, Endpoint, EngineLoader};
pub use files::default_models_dir;
pub use table::{Access, EngineFiles, Provider, ProviderSpec, WindowProbe};

use crate::typed::OutputMode;
use crate::{ChatModel, ModelLocation, ModelRef, ProviderError};

/// The context window assumed when nothing reports one (the reference
/// design's figure); [`CatalogModel::window_assumed`] says so.
pub const ASSUMED_CONTEXT_WINDOW: u32 = 32_768;

/// How long a listing is reused before providers are probed again.
pub const DEFAULT_CACHE_TTL: Duration = Duration::from_secs(10);

/// One model in the catalog.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct CatalogModel {
    /// The id to run it with, `provider:model`.
    pub id: String,
    /// Its provider.
    pub provider: Provider,
    /// The provider's name for it (a path for local model files).
    pub model: String,
    /// A name to show, when it has one besides `model` (a GGUF's own name).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Where it runs.
    pub locality: ModelLocation,
    /// Context window in tokens: reported by the server or file, else
    /// [`ASSUMED_CONTEXT_WINDOW`].
    pub context_window: u32,
    /// Whether `context_window` was assumed because nothing reported one.
    pub window_assumed: bool,
    /// Whether it sees images (`None`: nothing says).
    pub vision: Option<bool>,
    /// Whether it calls tools through its API's own tool calls (`None`:
    /// nothing says; local engines call tools through constrained JSON).
    pub native_tools: Option<bool>,
    /// The host a conversation goes to when it leaves this machine.
    pub sends_to: Option<String>,
    /// How a typed answer is obtained from it (`grammar` for local model
    /// files, which the engines constrain; see [`crate::typed`]).
    pub output_mode: OutputMode,
    /// Bytes on disk, for local model files.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub size_bytes: Option<u64>,
    /// The architecture a local model file names.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub architecture: Option<String>,
    /// Whether an in-process engine holds it loaded now (the engine pool).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub loaded: bool,
}

/// Whether a provider can be used now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(into = "AvailabilityWire")]
#[non_exhaustive]
pub enum Availability {
    /// It answered (or its files were read).
    Available,
    /// It cannot be used; the reason says why and what to do (it never holds
    /// a key or a full path).
    Unavailable {
        /// Why.
        reason: String,
    },
}

impl Availability {
    /// Whether it can be used now.
    pub fn is_available(&self) -> bool {
        matches!(self, Availability::Available)
    }

    /// Why not, when it cannot be used.
    pub fn reason(&self) -> Option<&str> {
        match self {
            Availability::Available => None,
            Availability::Unavailable { reason } => Some(reason),
        }
    }
}

/// On the wire: `"available": bool` and, when not, `"reason"`.
#[derive(Serialize)]
struct AvailabilityWire {
    available: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
}

impl From<Availability> for AvailabilityWire {
    fn from(a: Availability) -> Self {
        match a {
            Availability::Available => Self {
                available: true,
                reason: None,
            },
            Availability::Unavailable { reason } => Self {
                available: false,
                reason: Some(reason),
            },
        }
    }
}

/// One provider's group in the catalog.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct ProviderModels {
    /// The provider.
    pub provider: Provider,
    /// Its name for people.
    pub name: &'static str,
    /// Where its models run.
    pub locality: ModelLocation,
    /// Whether it can be used now.
    #[serde(flatten)]
    pub availability: Availability,
    /// Its models: empty when it is unavailable, except model files found
    /// for an engine this program lacks.
    pub models: Vec<CatalogModel>,
}

/// Where the first local model is looked for when none is chosen: a model
/// file (when its engine is linked in), then Ollama, then LM Studio.
pub const LOCAL_DEFAULT_ORDER: &[Provider] =
    &[Provider::Llama, Provider::Ollama, Provider::LmStudio];

/// Every model reachable now, grouped by provider; see the module docs.
pub struct ModelCatalog {
    connections: Connections,
    ttl: Duration,
    cache: tokio::sync::Mutex<Option<(Instant, Arc<Vec<ProviderModels>>)>>,
}

impl std::fmt::Debug for ModelCatalog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelCatalog")
            .field("connections", &self.connections)
            .field("ttl", &self.ttl)
            .finish_non_exhaustive()
    }
}

impl ModelCatalog {
    /// A catalog of what `connections` reach.
    pub fn new(connections: Connections) -> Self {
        Self {
            connections,
            ttl: DEFAULT_CACHE_TTL,
            cache: tokio::sync::Mutex::new(None),
        }
    }

    /// With listings reused for `ttl` (zero: probe every time).
    pub fn with_cache_ttl(mut self, ttl: Duration) -> Self {
        self.ttl = ttl;
        self
    }

    /// The connections it lists.
    pub fn connections(&self) -> &Connections {
        &self.connections
    }

    /// Every listed provider (the table's order) with its models now, or why
    /// it cannot be used. Reuses a listing younger than the cache TTL;
    /// callers arriving during a probe wait for it instead of probing again.
    pub async fn list(&self) -> Arc<Vec<ProviderModels>> {
        let listing = {
            let mut cache = self.cache.lock().await;
            match cache.as_ref() {
                Some((at, listing)) if at.elapsed() < self.ttl => listing.clone(),
                _ => {
                    let listing = Arc::new(self.probe_all().await);
                    *cache = Some((Instant::now(), listing.clone()));
                    listing
                }
            }
        };
        self.mark_loaded(listing)
    }

    /// `listing` with [`CatalogModel::loaded`] as the engine pool says now
    /// (a cached listing's flags may be out of date).
    fn mark_loaded(&self, listing: Arc<Vec<ProviderModels>>) -> Arc<Vec<ProviderModels>> {
        let loaded = self.connections.engine_pool().loaded();
        let is_loaded = |m: &CatalogModel| {
            loaded
                .iter()
                .any(|l| l.provider == m.provider && l.path.as_os_str() == m.model.as_str())
        };
        if listing
            .iter()
            .flat_map(|g| &g.models)
            .all(|m| m.loaded == is_loaded(m))
        {
            return listing;
        }
        let mut marked = (*listing).clone();
        for model in marked.iter_mut().flat_map(|g| &mut g.models) {
            model.loaded = is_loaded(model);
        }
        Arc::new(marked)
    }

    /// Probe again now, whatever the cache holds.
    pub async fn refresh(&self) -> Arc<Vec<ProviderModels>> {
        *self.cache.lock().await = None;
        self.list().await
    }

    async fn probe_all(&self) -> Vec<ProviderModels> {
        let probes = Provider::ALL
            .iter()
            .filter(|p| p.spec().is_listed())
            .map(|p| probe::probe(&self.connections, *p));
        futures::future::join_all(probes).await
    }

    /// The catalog's entry for `id`, when it is listed now.
    pub async fn find(&self, id: &ModelRef) -> Option<CatalogModel> {
        let listing = self.list().await;
        let group = listing.iter().find(|g| g.provider == id.provider)?;
        group.models.iter().find(|m| m.model == id.model).cloned()
    }

    /// The first model that stays on this machine, in
    /// [`LOCAL_DEFAULT_ORDER`]; only those providers are probed (no cloud
    /// is asked). Without one, what each provider said.
    pub async fn first_local(&self) -> Result<CatalogModel, Vec<ProviderModels>> {
        let probes = LOCAL_DEFAULT_ORDER
            .iter()
            .map(|p| probe::probe(&self.connections, *p));
        let groups = futures::future::join_all(probes).await;
        groups
            .iter()
            .filter(|g| g.availability.is_available())
            .find_map(|g| g.models.first().cloned())
            .ok_or(groups)
    }

    /// The known ACP agents ([`ACP_AGENT_PRESETS`]) whose program is on
    /// the connections' search path ([`Connections::search_path`]). They are
    /// not providers of the table: each is a program lrg starts, run with
    /// its `acp:` id.
    pub fn agents(&self) -> Vec<FoundAgent> {
        agents_on_path(self.connections.search_path().as_deref())
    }

    /// The model `id` names, ready to take turns ([`Connections::connect`]).
    pub async fn connect(&self, id: &ModelRef) -> Result<Arc<dyn ChatModel>, ProviderError> {
        self.connections.connect(id).await
    }
}
