//! An owner's chats: listed (live and stored, newest first), opened again
//! by id from the store, and named. What a chat list (the page's sidebar)
//! stands on; who may ask is the caller's to check.

use super::*;
use crate::store::{ListFilter, first_message};

/// One chat of an owner ([`SessionRegistry::owned`]), live or stored.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct OwnedChat {
    /// Its meta (a live chat's as it is now: its model after a carry-over,
    /// its name after a rename).
    pub meta: SessionMeta,
    /// Its first user message, clipped (see [`first_message`]).
    pub first_message: Option<String>,
    /// When it last changed, in milliseconds since the Unix epoch (its
    /// creation when it was never stored).
    pub updated_ms: u64,
    /// A message is being answered now.
    pub running: bool,
    /// It is in memory now.
    pub live: bool,
}

impl SessionRegistry {
    /// The chats of `owner` (a chat without one is [`DEFAULT_OWNER`]'s,
    /// see [`SessionMeta::owned_by`]): the live ones and the stored ones,
    /// archived included, sub-agents left out, most recently changed
    /// first.
    ///
    /// [`DEFAULT_OWNER`]: crate::store::DEFAULT_OWNER
    pub async fn owned(&self, owner: &str) -> Result<Vec<OwnedChat>, RegistryError> {
        let mut stored = match &self.store {
            Some(store) => {
                // Chats kept before owners were recorded have none: the
                // default owner's list reads them all.
                let mut filter = ListFilter::all();
                if owner != crate::store::DEFAULT_OWNER {
                    filter.owner = Some(owner.to_string());
                }
                store.list(&filter).await?
            }
            None => Vec::new(),
        };
        stored.retain(|s| s.meta.owned_by(owner) && s.meta.id.parent().is_none());
        let live: Vec<(SessionMeta, ChatSession)> = lock(&self.live)
            .values()
            .filter(|e| e.meta.owned_by(owner) && e.meta.id.parent().is_none())
            .map(|e| (e.meta.clone(), e.session.clone()))
            .collect();
        let mut out: Vec<OwnedChat> = Vec::with_capacity(stored.len() + live.len());
        for (meta, session) in live {
            let kept = stored
                .iter()
                .position(|s| s.meta.id == meta.id)
                .map(|i| stored.swap_remove(i));
            out.push(OwnedChat {
                first_message: first_message(&session.history()),
                updated_ms: kept.map_or(meta.created_ms, |s| s.updated_ms),
                running: session.is_busy(),
                live: true,
                meta,
            });
        }
        out.extend(stored.into_iter().map(|s| OwnedChat {
            meta: s.meta,
            first_message: s.first_message,
            updated_ms: s.updated_ms,
            running: false,
            live: false,
        }));
        out.sort_by(|a, b| {
            b.updated_ms
                .cmp(&a.updated_ms)
                .then_with(|| b.meta.created_ms.cmp(&a.meta.created_ms))
                .then_with(|| a.meta.id.cmp(&b.meta.id))
        });
        Ok(out)
    }

    /// The meta of live session `id`, as it is now.
    pub fn live_meta(&self, id: &SessionId) -> Option<SessionMeta> {
        lock(&self.live).get(id).map(|e| e.meta.clone())
    }

    /// The meta of session `id` when `owner` owns it, live or stored
    /// (`None` for a sub-agent, or when there is no such chat of theirs).
    pub async fn owned_meta(
        &self,
        id: &SessionId,
        owner: &str,
    ) -> Result<Option<SessionMeta>, RegistryError> {
        if id.parent().is_some() {
            return Ok(None);
        }
        if let Some(meta) = self.live_meta(id) {
            return Ok(meta.owned_by(owner).then_some(meta));
        }
        let Some(store) = &self.store else {
            return Ok(None);
        };
        match store.load(id).await {
            Ok(stored) => Ok(stored.meta.owned_by(owner).then_some(stored.meta)),
            Err(StoreError::NotFound(_)) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Open chat `id` of `owner` by its id: the live session, else the
    /// stored one resumed on the model it is bound to, with its history
    /// ([`OpenedHow::Resumed`]). `build` is asked (at most once, with that
    /// model) only when a session must be built. Another owner's chat, a
    /// sub-agent's and an unknown one are all [`RegistryError::NotFound`].
    pub async fn open_stored<T, F, Fut>(
        &self,
        id: &SessionId,
        owner: &str,
        build: F,
    ) -> Result<(Opened, Option<T>), RegistryError>
    where
        F: FnOnce(&ModelBinding) -> Fut,
        Fut: std::future::Future<Output = Result<(ChatSessionBuilder, T), RegistryError>>,
    {
        let _opening = self.opening.lock().await;
        let not_found = || RegistryError::NotFound(id.clone());
        // Read first, without taking the writer's place: another owner's
        // chat is refused before anything about it changes.
        let meta = self.owned_meta(id, owner).await?.ok_or_else(not_found)?;
        if let Some(session) = self.get(id) {
            let opened = Opened {
                id: id.clone(),
                session,
                how: OpenedHow::Live,
            };
            return Ok((opened, None));
        }
        let store = self.store.clone().ok_or_else(not_found)?;
        self.make_room().await?;
        let (builder, extra) = build(&meta.model).await?;
        let max_rows = self.config.max_kept_rows.unwrap_or(RESUME_ROWS);
        let stored = store.resume(id, max_rows).await?;
        let meta = stored.meta.clone();
        let rows = stored.rows.len();
        let session = builder.store(store, id.clone()).resumed(stored).build();
        self.insert(meta, session.clone(), true);
        let opened = Opened {
            id: id.clone(),
            session,
            how: OpenedHow::Resumed { rows },
        };
        Ok((opened, Some(extra)))
    }

    /// Name session `id` (`None` or empty: no name), live or stored, kept
    /// in the store across restarts ([`SessionStore::rename`]); returns
    /// its meta as it is now, or `None` when there is no such session.
    pub async fn rename(
        &self,
        id: &SessionId,
        name: Option<&str>,
    ) -> Result<Option<SessionMeta>, RegistryError> {
        let name = name.filter(|n| !n.is_empty());
        let stored = match &self.store {
            Some(store) => store.rename(id, name).await?,
            None => false,
        };
        let live = lock(&self.live).get_mut(id).map(|entry| {
            entry.meta.name = name.map(str::to_string);
            entry.meta.clone()
        });
        if live.is_some() {
            return Ok(live);
        }
        if !stored {
            return Ok(None);
        }
        match &self.store {
            Some(store) => Ok(Some(store.load(id).await?.meta)),
            None => Ok(None),
        }
    }
}
