//! [`SessionRegistry`]: the live sessions of an app, by id, over an optional
//! [`SessionStore`].
//!
//! - [`SessionRegistry::open`] with both keys is create-or-resume: a live
//!   session answers itself, a stored one is rebuilt under the same id, and
//!   nothing known creates a new one. The same `provider:model` on another
//!   connection is the same chat. Keys that name a chat on another model
//!   are never silently handed to it, and never lose it: the request's
//!   [`OtherModel`] policy refuses (the default, changing nothing), carries
//!   the conversation over (the person's explicit choice), or replaces it
//!   with a new chat and archives the old one ([`SessionStore::archive`]:
//!   kept with its history, listed, its keys released). To resume a chat on
//!   whatever model it is on, ask [`SessionRegistry::kept_model`] first.
//! - Nothing here deletes a stored chat but [`SessionRegistry::end`], the
//!   explicit removal.
//! - Bounded: a keyed session idle longer than [`RegistryConfig::idle`] is
//!   evicted to the store ([`SessionRegistry::evict_idle`], or a sweeper
//!   task); when [`RegistryConfig::max_live`] sessions are live, the
//!   longest-idle keyed one makes room. A saved session of an owner
//!   ([`OpenRequest::owner`]) is put away the same way, keyed or not: its
//!   owner's list finds it again ([`SessionRegistry::owned`],
//!   [`SessionRegistry::open_stored`]). Other unkeyed sessions are never
//!   evicted (they cannot be found again), so a registry full of them
//!   refuses.
//! - Sessions are built by the registry's factory ([`SessionRegistry::open`])
//!   or, when building one takes async work (starting tool servers),
//!   by the caller of [`SessionRegistry::open_with`], which is asked only
//!   when a session must be built (never for a live one, nor for a refused
//!   open).

mod other_model;
mod owned;
mod request;

use other_model::opened_how;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use lrg_providers::ChatModel;
use lrg_providers::sync::lock;

use crate::events::Event;
use crate::session::{ChatSession, ChatSessionBuilder, SwitchableModel};
use crate::store::{
    ModelBinding, RESUME_ROWS, SessionId, SessionKeys, SessionMeta, SessionState, SessionStore,
    StoreError, StoredSession, without_native,
};
use crate::transcript::Transcript;

pub use owned::OwnedChat;
pub use request::{
    IDLE, MAX_LIVE, OpenRequest, Opened, OpenedHow, OtherModel, RegistryConfig, RegistryError,
    SessionFactory,
};

struct Entry {
    session: ChatSession,
    meta: SessionMeta,
    last_used: Instant,
    /// Kept in the store (created or resumed there).
    saved: bool,
}

impl Entry {
    /// Whether it may be put away (idle, or to make room): a keyed session
    /// is found again by its keys, a saved one of an owner by its owner's
    /// list; any other could never be found again.
    fn evictable(&self) -> bool {
        self.meta.keys.is_some() || (self.saved && self.meta.owner.is_some())
    }
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
            .field("live", &lock(&self.live).len())
            .field("store", &self.store)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Drop for SessionRegistry {
    fn drop(&mut self) {
        // Another registry (or process) may take these sessions over now.
        if let Some(store) = &self.store {
            for id in lock(&self.live).keys() {
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
    /// once, and only when a session must be built (not for a live one,
    /// nor for an open that is refused). Whatever it returns besides the
    /// builder comes back with the session (`None` when the session was
    /// live).
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
        let refused = |id: &SessionId, stored: &ModelBinding| RegistryError::OtherModel {
            id: id.clone(),
            stored_model: stored.model.clone(),
            asked_model: request.model.model.clone(),
        };
        let live = {
            let mut live = lock(&self.live);
            live.iter_mut()
                .find(|(_, e)| e.meta.live_keys() == Some(&keys))
                .map(|(id, e)| {
                    e.last_used = Instant::now();
                    (id.clone(), e.session.clone(), e.meta.model.clone())
                })
        };
        // Kept in memory only (no store): a carried-over conversation comes
        // from the live session itself.
        let mut in_memory = None;
        if let Some((id, session, model)) = live {
            if model == request.model {
                let opened = Opened {
                    id,
                    session,
                    how: OpenedHow::Live,
                };
                return Ok((opened, None));
            }
            let other = model.model != request.model.model;
            if other && request.other_model == OtherModel::Refuse {
                return Err(refused(&id, &model));
            }
            if session.is_busy() {
                return Err(RegistryError::Busy(id));
            }
            if other && request.other_model == OtherModel::Replace {
                self.make_room().await?;
                // Built before anything is changed: a model that cannot be
                // had leaves the old chat as it was.
                let (builder, extra) = build(&request.model).await?;
                self.archive_locked(&id).await?;
                let how = OpenedHow::Replaced {
                    archived: id,
                    old_model: model.model,
                };
                return self
                    .create(&request, how, builder, store)
                    .await
                    .map(|o| (o, Some(extra)));
            }
            if store.is_none() {
                in_memory = Some((id.clone(), model.clone(), session.history()));
            }
            // Rebuilt below from what is kept of it, on the model asked for.
            self.evict(&id).await;
        }
        self.make_room().await?;
        let Some(store) = store else {
            let (builder, extra) = build(&request.model).await?;
            let Some((id, from, rows)) = in_memory else {
                return self
                    .create(&request, OpenedHow::Created, builder, None)
                    .await
                    .map(|o| (o, Some(extra)));
            };
            let opened = self.rebuild_in_memory(&request, id, from, rows, builder);
            return Ok((opened, Some(extra)));
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
            let (builder, extra) = build(&request.model).await?;
            return self
                .create(&request, OpenedHow::Created, builder, Some(store))
                .await
                .map(|o| (o, Some(extra)));
        };
        let id = found.meta.id.clone();
        let from = found.meta.model;
        let carry = from.model != request.model.model;
        if carry {
            match request.other_model {
                OtherModel::CarryOver => {}
                OtherModel::Replace => {
                    let (builder, extra) = build(&request.model).await?;
                    store.archive(&id).await?;
                    let how = OpenedHow::Replaced {
                        archived: id,
                        old_model: from.model,
                    };
                    return self
                        .create(&request, how, builder, Some(store))
                        .await
                        .map(|o| (o, Some(extra)));
                }
                _ => return Err(refused(&id, &from)),
            }
        }
        let (builder, extra) = build(&request.model).await?;
        let max_rows = self.config.max_kept_rows.unwrap_or(RESUME_ROWS);
        let mut stored = match store.resume(&id, max_rows).await {
            Ok(stored) => stored,
            Err(e) => {
                if e.is_damage() {
                    tracing::error!("the stored chat of these keys cannot be resumed: {e}");
                }
                return Err(e.into());
            }
        };
        if carry && let Err(e) = carry_stored(store.as_ref(), &mut stored, &request.model).await {
            // What was not moved stays as it was, on its model.
            store.release(&id).await;
            return Err(e.into());
        }
        let mut meta = stored.meta.clone();
        meta.model = request.model.clone();
        let rows = stored.rows.len();
        let session = builder
            .store(store.clone(), id.clone())
            .resumed(stored)
            .build();
        // Durable by now when carried: the store holds the chat on its new model.
        let how = opened_how(&session, carry, from, &request, rows);
        self.insert(meta, session.clone(), true);
        let opened = Opened { id, session, how };
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
        let mut saved = false;
        if let Some(store) = store {
            match store.create(&meta).await {
                Ok(()) => {
                    builder = builder.store(store.clone(), meta.id.clone());
                    saved = true;
                }
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
        self.insert(meta, session.clone(), saved);
        Ok(Opened { id, session, how })
    }

    fn insert(&self, meta: SessionMeta, session: ChatSession, saved: bool) {
        lock(&self.live).insert(
            meta.id.clone(),
            Entry {
                session,
                meta,
                last_used: Instant::now(),
                saved,
            },
        );
    }

    /// Evict the longest-idle session that may be put away
    /// ([`Entry::evictable`]) and is not busy when the registry is full.
    async fn make_room(&self) -> Result<(), RegistryError> {
        let victim = {
            let live = lock(&self.live);
            if live.len() < self.config.max_live {
                return Ok(());
            }
            live.iter()
                .filter(|(_, e)| e.evictable() && e.session.is_settled())
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
        let removed = lock(&self.live).remove(id).is_some();
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
        lock(&self.live).contains_key(id)
    }

    /// The live session `id`; counts as a use (for idle eviction).
    pub fn get(&self, id: &SessionId) -> Option<ChatSession> {
        let mut live = lock(&self.live);
        let entry = live.get_mut(id)?;
        entry.last_used = Instant::now();
        Some(entry.session.clone())
    }

    /// End session `id`: stop it, forget it, and delete it from the store.
    /// Returns whether it existed (live or stored).
    pub async fn end(&self, id: &SessionId) -> Result<bool, RegistryError> {
        let entry = lock(&self.live).remove(id);
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
        lock(&self.live).len()
    }

    /// Whether no session is live.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Evict every keyed session idle longer than [`RegistryConfig::idle`]
    /// (busy ones, and ones whose sub-agents are at work, are not idle); returns how many.
    pub async fn evict_idle(&self) -> usize {
        let now = Instant::now();
        let idle: Vec<SessionId> = lock(&self.live)
            .iter()
            .filter(|(_, e)| {
                e.evictable()
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

/// Move a stored chat, resumed by this handle, to `model`: bound to it in
/// the store first (a store that cannot do that refuses before anything
/// changes), then its history rewritten without the old model's native
/// parts.
async fn carry_stored(
    store: &dyn SessionStore,
    stored: &mut StoredSession,
    model: &ModelBinding,
) -> Result<(), StoreError> {
    let id = stored.meta.id.clone();
    store.rebind(&id, model).await?;
    stored.meta.model = model.clone();
    if let Some(rows) = without_native(&stored.rows) {
        stored.rows = rows;
        store.rewrite(&id, &stored.rows, &stored.state).await?;
    }
    Ok(())
}
