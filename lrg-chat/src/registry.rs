//! [`SessionRegistry`]: the live sessions of an app, by id, over an optional
//! [`SessionStore`].
//!
//! - [`SessionRegistry::open`] with both keys is create-or-resume: a live
//!   session answers itself, a stored one is rebuilt under the same id, and
//!   nothing known creates a new one. Asked for on another model, a session
//!   is rebuilt on it only when it is the same `provider:model` (another
//!   connection); any other model starts a new chat under the keys — a
//!   conversation is never handed to a different model.
//! - Bounded: a keyed session idle longer than [`RegistryConfig::idle`] is
//!   evicted to the store ([`SessionRegistry::evict_idle`], or a sweeper
//!   task); when [`RegistryConfig::max_live`] sessions are live, the
//!   longest-idle keyed one makes room. Unkeyed sessions are never evicted
//!   (they cannot be found again), so a registry full of them refuses.
//! - Sessions are built by the registry's factory ([`SessionRegistry::open`])
//!   or, when building one takes async work (starting tool servers),
//!   by the caller of [`SessionRegistry::open_with`], which is asked only
//!   when a session must be built (never for a live one).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use crate::events::Event;
use crate::session::{ChatSession, ChatSessionBuilder};
use crate::store::{
    KeyError, ModelBinding, RESUME_ROWS, SessionId, SessionKeys, SessionMeta, SessionStore,
    StoreError, relock,
};
use crate::transcript::Transcript;

/// Default for [`RegistryConfig::idle`]: 30 minutes.
pub const IDLE: Duration = Duration::from_secs(30 * 60);
/// Default for [`RegistryConfig::max_live`].
pub const MAX_LIVE: usize = 256;

/// Tunables of a [`SessionRegistry`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RegistryConfig {
    /// How long a keyed session may sit idle before it is evicted.
    pub idle: Duration,
    /// How many sessions may be live at once.
    pub max_live: usize,
    /// How many history rows a resumed session keeps in its live file;
    /// `None` (the default): all of them. With a bound, the older rows move
    /// to an archive beside the session at resume ([`SessionStore::resume`]),
    /// never deleted. What a model sees is decided by context fitting
    /// either way.
    pub max_kept_rows: Option<usize>,
}

impl Default for RegistryConfig {
    fn default() -> Self {
        Self {
            idle: IDLE,
            max_live: MAX_LIVE,
            max_kept_rows: None,
        }
    }
}

impl RegistryConfig {
    /// The same config with another idle limit.
    pub fn idle(mut self, idle: Duration) -> Self {
        self.idle = idle;
        self
    }

    /// The same config with another cap on live sessions.
    pub fn max_live(mut self, max_live: usize) -> Self {
        self.max_live = max_live;
        self
    }

    /// The same config with a bound on the rows a resumed session keeps
    /// live (`None`: all; see [`RegistryConfig::max_kept_rows`]).
    pub fn max_kept_rows(mut self, rows: Option<usize>) -> Self {
        self.max_kept_rows = rows;
        self
    }
}

/// Why the registry refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RegistryError {
    /// Bad keys (a usage error: HTTP 400).
    #[error(transparent)]
    Keys(#[from] KeyError),
    /// Every live session is unkeyed or busy: none can be evicted.
    #[error(
        "too many live sessions ({0}) and none can be evicted (unkeyed or busy); \
         end one or raise the limit"
    )]
    Full(usize),
    /// The session works on a message and cannot move to another model now.
    #[error("session `{0}` is busy with a message: stop it or wait, then open it again")]
    Busy(SessionId),
    /// No such session, live or stored.
    #[error("no session `{0}`")]
    NotFound(SessionId),
    /// The app could not build a session for that model.
    #[error("cannot start a session on {model}: {reason}")]
    Model {
        /// `provider:model`.
        model: String,
        /// Why.
        reason: String,
    },
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Builds a session (model source, tools, permissions, prompt) for a model
/// binding; the registry adds the store and the resumed history.
pub type SessionFactory =
    dyn Fn(&ModelBinding) -> Result<ChatSessionBuilder, RegistryError> + Send + Sync;

/// What to open.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct OpenRequest {
    /// Keys for create-or-resume; `None` always creates.
    pub keys: Option<SessionKeys>,
    /// The model to run on.
    pub model: ModelBinding,
    /// Who it belongs to (kept with it, and listed by).
    pub owner: Option<String>,
    /// Whether it is kept in the registry's store (default yes).
    pub saved: bool,
}

impl OpenRequest {
    /// A new unkeyed session on `model`.
    pub fn new(model: ModelBinding) -> Self {
        Self {
            keys: None,
            model,
            owner: None,
            saved: true,
        }
    }

    /// Create-or-resume by `keys`.
    pub fn keyed(keys: SessionKeys, model: ModelBinding) -> Self {
        Self {
            keys: Some(keys),
            model,
            owner: None,
            saved: true,
        }
    }

    /// The same request for an owner.
    pub fn owner(mut self, owner: impl Into<String>) -> Self {
        self.owner = Some(owner.into());
        self
    }

    /// The same request kept in memory only, even when the registry has a
    /// store: for an unkeyed session that nothing can find again after a
    /// restart, a stored copy would only pile up.
    pub fn unsaved(mut self) -> Self {
        self.saved = false;
        self
    }
}

/// How [`SessionRegistry::open`] found its session.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum OpenedHow {
    /// Nothing was known: a new session.
    Created,
    /// It was live.
    Live,
    /// It was rebuilt from the store (`rows` history rows kept).
    Resumed {
        /// History rows it resumed with.
        rows: usize,
    },
    /// The keys named a chat on another model; that chat was ended and a
    /// new one started.
    Replaced {
        /// The chat that was ended.
        old: SessionId,
        /// The model it was on.
        old_model: String,
    },
}

/// An opened session.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Opened {
    /// Its id (for [`SessionRegistry::get`], URLs, the store).
    pub id: SessionId,
    /// The session.
    pub session: ChatSession,
    /// How it was found.
    pub how: OpenedHow,
}

struct Entry {
    session: ChatSession,
    meta: SessionMeta,
    last_used: Instant,
}

/// Live sessions by id. See the [module docs](self).
pub struct SessionRegistry {
    /// `None`: sessions are built by the callers of `open_with`.
    factory: Option<Arc<SessionFactory>>,
    store: Option<Arc<dyn SessionStore>>,
    config: RegistryConfig,
    live: Mutex<HashMap<SessionId, Entry>>,
    /// One open at a time, so two requests with the same keys never make
    /// two sessions.
    opening: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for SessionRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionRegistry")
            .field("live", &relock(&self.live).len())
            .field("store", &self.store)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Drop for SessionRegistry {
    fn drop(&mut self) {
        // Another registry (or process) may take these sessions over now.
        if let Some(store) = &self.store {
            for id in relock(&self.live).keys() {
                // The place is given back at once here (the future is
                // dropped): a store that needs more does it on its own.
                drop(store.release(id));
            }
        }
    }
}

impl SessionRegistry {
    /// A registry that builds sessions with `factory`, in memory only.
    pub fn new(
        factory: impl Fn(&ModelBinding) -> Result<ChatSessionBuilder, RegistryError>
        + Send
        + Sync
        + 'static,
        config: RegistryConfig,
    ) -> Self {
        let mut registry = Self::without_factory(config);
        registry.factory = Some(Arc::new(factory));
        registry
    }

    /// A registry whose sessions are built by the callers of
    /// [`Self::open_with`]; [`Self::open`] refuses on it.
    pub fn without_factory(config: RegistryConfig) -> Self {
        Self {
            factory: None,
            store: None,
            config,
            live: Mutex::default(),
            opening: tokio::sync::Mutex::new(()),
        }
    }

    /// The same registry keeping its sessions in `store`.
    pub fn with_store(mut self, store: Arc<dyn SessionStore>) -> Self {
        self.store = Some(store);
        self
    }

    /// The store, if any.
    pub fn store(&self) -> Option<&Arc<dyn SessionStore>> {
        self.store.as_ref()
    }

    /// Open a session: create-or-resume with keys, create without. The
    /// session is built by the registry's factory.
    pub async fn open(&self, request: OpenRequest) -> Result<Opened, RegistryError> {
        let factory = self.factory.clone();
        let build = |model: &ModelBinding| {
            let built = match &factory {
                Some(factory) => factory(model).map(|builder| (builder, ())),
                None => Err(RegistryError::Model {
                    model: model.model.clone(),
                    reason: "this registry has no session factory: open with `open_with`".into(),
                }),
            };
            std::future::ready(built)
        };
        self.open_with(request, build)
            .await
            .map(|(opened, _)| opened)
    }

    /// [`Self::open`], with the session built by `build` — asked at most
    /// once, and only when a session must be built (not for a live one).
    /// Whatever it returns besides the builder comes back with the session
    /// (`None` when the session was live).
    pub async fn open_with<T, F, Fut>(
        &self,
        request: OpenRequest,
        build: F,
    ) -> Result<(Opened, Option<T>), RegistryError>
    where
        F: FnOnce(&ModelBinding) -> Fut,
        Fut: std::future::Future<Output = Result<(ChatSessionBuilder, T), RegistryError>>,
    {
        let _opening = self.opening.lock().await;
        let store = self.store.as_ref().filter(|_| request.saved);
        let Some(keys) = request.keys.clone() else {
            self.make_room().await?;
            let (builder, extra) = build(&request.model).await?;
            return self
                .create(&request, OpenedHow::Created, builder, store)
                .await
                .map(|o| (o, Some(extra)));
        };
        let live = {
            let mut live = relock(&self.live);
            live.iter_mut()
                .find(|(_, e)| e.meta.keys.as_ref() == Some(&keys))
                .map(|(id, e)| {
                    e.last_used = Instant::now();
                    (id.clone(), e.session.clone(), e.meta.model.clone())
                })
        };
        let mut replaced = None;
        if let Some((id, session, model)) = live {
            if model == request.model {
                let opened = Opened {
                    id,
                    session,
                    how: OpenedHow::Live,
                };
                return Ok((opened, None));
            }
            if session.is_busy() {
                return Err(RegistryError::Busy(id));
            }
            // Rebuilt below from the store, on the model asked for.
            self.evict(&id).await;
            replaced = Some(OpenedHow::Replaced {
                old: id,
                old_model: model.model,
            });
        }
        self.make_room().await?;
        // Built before anything stored is changed: a model that cannot be
        // had leaves the old chat as it was.
        let (builder, extra) = build(&request.model).await?;
        let Some(store) = store else {
            let how = replaced.unwrap_or(OpenedHow::Created);
            return self
                .create(&request, how, builder, None)
                .await
                .map(|o| (o, Some(extra)));
        };
        // A store that cannot even be searched cannot save either: the
        // chat starts unsaved and says so (see `create`).
        let found = match store.find(&keys).await {
            Ok(found) => found,
            // A damaged chat under these keys is refused, never replaced
            // by a new one: a second chat for one key is what must not be.
            Err(e) if e.is_damage() => {
                tracing::error!("the stored chat of these keys cannot be read: {e}");
                return Err(e.into());
            }
            Err(e) => {
                tracing::warn!("session store search failed: {e}");
                None
            }
        };
        let Some(found) = found else {
            return self
                .create(&request, OpenedHow::Created, builder, Some(store))
                .await
                .map(|o| (o, Some(extra)));
        };
        let id = found.meta.id.clone();
        if found.meta.model.model != request.model.model {
            crate::store::delete_sub_agents(store.as_ref(), &id).await?;
            store.delete(&id).await?;
            let how = OpenedHow::Replaced {
                old: id,
                old_model: found.meta.model.model,
            };
            return self
                .create(&request, how, builder, Some(store))
                .await
                .map(|o| (o, Some(extra)));
        }
        let max_rows = self.config.max_kept_rows.unwrap_or(RESUME_ROWS);
        let stored = match store.resume(&id, max_rows).await {
            Ok(stored) => stored,
            Err(e) => {
                if e.is_damage() {
                    tracing::error!("the stored chat of these keys cannot be resumed: {e}");
                }
                return Err(e.into());
            }
        };
        let mut meta = stored.meta.clone();
        meta.model = request.model.clone();
        let rows = stored.rows.len();
        let session = builder
            .store(store.clone(), id.clone())
            .resumed(stored)
            .build();
        self.insert(meta, session.clone());
        let opened = Opened {
            id,
            session,
            how: OpenedHow::Resumed { rows },
        };
        Ok((opened, Some(extra)))
    }

    async fn create(
        &self,
        request: &OpenRequest,
        how: OpenedHow,
        mut builder: ChatSessionBuilder,
        store: Option<&Arc<dyn SessionStore>>,
    ) -> Result<Opened, RegistryError> {
        let mut meta = SessionMeta::new(request.model.clone());
        meta.keys = request.keys.clone();
        meta.owner = request.owner.clone();
        let mut unsaved = None;
        if let Some(store) = store {
            match store.create(&meta).await {
                Ok(()) => builder = builder.store(store.clone(), meta.id.clone()),
                Err(e) => unsaved = Some(e),
            }
        }
        let session = builder.build();
        if let Some(e) = unsaved {
            session.events().publish(Event::Warning {
                message: format!(
                    "This chat is not being saved: {e}. It goes on in memory only \
                     and is lost when the program ends."
                ),
                retrying: false,
            });
        }
        let id = meta.id.clone();
        self.insert(meta, session.clone());
        Ok(Opened { id, session, how })
    }

    fn insert(&self, meta: SessionMeta, session: ChatSession) {
        relock(&self.live).insert(
            meta.id.clone(),
            Entry {
                session,
                meta,
                last_used: Instant::now(),
            },
        );
    }

    /// Evict the longest-idle keyed session that is not busy when the
    /// registry is full.
    async fn make_room(&self) -> Result<(), RegistryError> {
        let victim = {
            let live = relock(&self.live);
            if live.len() < self.config.max_live {
                return Ok(());
            }
            live.iter()
                .filter(|(_, e)| e.meta.keys.is_some() && e.session.is_settled())
                .min_by_key(|(_, e)| e.last_used)
                .map(|(id, _)| id.clone())
        };
        match victim {
            Some(id) => {
                self.evict(&id).await;
                Ok(())
            }
            None => Err(RegistryError::Full(self.config.max_live)),
        }
    }

    /// Drop a live session (its store keeps it) and give back its writer's
    /// place.
    async fn evict(&self, id: &SessionId) -> bool {
        let removed = relock(&self.live).remove(id).is_some();
        if removed && let Some(store) = &self.store {
            store.release(id).await;
        }
        removed
    }

    /// Put the live session `id` away: it leaves the registry (its store
    /// keeps it, to be resumed by its keys) and its writer's place is given
    /// back. Returns whether it was live.
    pub async fn release(&self, id: &SessionId) -> bool {
        self.evict(id).await
    }

    /// Whether session `id` is live (without counting as a use).
    pub fn is_live(&self, id: &SessionId) -> bool {
        relock(&self.live).contains_key(id)
    }

    /// The live session `id`; counts as a use (for idle eviction).
    pub fn get(&self, id: &SessionId) -> Option<ChatSession> {
        let mut live = relock(&self.live);
        let entry = live.get_mut(id)?;
        entry.last_used = Instant::now();
        Some(entry.session.clone())
    }

    /// End session `id`: stop it, forget it, and delete it from the store.
    /// Returns whether it existed (live or stored).
    pub async fn end(&self, id: &SessionId) -> Result<bool, RegistryError> {
        let entry = relock(&self.live).remove(id);
        if let Some(entry) = &entry {
            entry.session.stop_with_sub_agents();
        }
        let stored = match &self.store {
            Some(store) => {
                // Its sub-agents' transcripts go with it.
                crate::store::delete_sub_agents(store.as_ref(), id).await?;
                store.delete(id).await?
            }
            None => false,
        };
        Ok(entry.is_some() || stored)
    }

    /// The transcript of session `id`, live or stored.
    pub async fn transcript(&self, id: &SessionId) -> Result<Transcript, RegistryError> {
        if let Some(session) = self.get(id) {
            return Ok(Transcript::of(&session.history()));
        }
        let Some(store) = &self.store else {
            return Err(RegistryError::NotFound(id.clone()));
        };
        match store.load(id).await {
            Ok(stored) => Ok(Transcript::of(&stored.rows)),
            Err(StoreError::NotFound(_)) => Err(RegistryError::NotFound(id.clone())),
            Err(e) => Err(e.into()),
        }
    }

    /// How many sessions are live.
    pub fn len(&self) -> usize {
        relock(&self.live).len()
    }

    /// Whether no session is live.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Evict every keyed session idle longer than [`RegistryConfig::idle`]
    /// (busy ones, and ones whose sub-agents are at work, are not idle); returns how many.
    pub async fn evict_idle(&self) -> usize {
        let now = Instant::now();
        let idle: Vec<SessionId> = relock(&self.live)
            .iter()
            .filter(|(_, e)| {
                e.meta.keys.is_some()
                    && e.session.is_settled()
                    && now.duration_since(e.last_used) >= self.config.idle
            })
            .map(|(id, _)| id.clone())
            .collect();
        for id in &idle {
            self.evict(id).await;
        }
        idle.len()
    }

    /// Run [`Self::evict_idle`] every `every` until the registry is dropped.
    pub fn spawn_sweeper(self: &Arc<Self>, every: Duration) -> tokio::task::JoinHandle<()> {
        every_while_alive(self, every, |registry| async move {
            registry.evict_idle().await;
        })
    }
}

/// Run `work` on `owner` every `every` (the first time one period from
/// now), until `owner` is dropped: the task holds it only while working.
pub(crate) fn every_while_alive<T, F, Fut>(
    owner: &Arc<T>,
    every: Duration,
    work: F,
) -> tokio::task::JoinHandle<()>
where
    T: Send + Sync + 'static,
    F: Fn(Arc<T>) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let weak = Arc::downgrade(owner);
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(every);
        tick.tick().await;
        loop {
            tick.tick().await;
            let Some(owner) = weak.upgrade() else {
                return;
            };
            work(owner).await;
        }
    })
}
