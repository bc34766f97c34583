//! When keys name a chat on another model: the stored model looked up,
//! the old chat archived, or the conversation carried over — never deleted.

use super::*;

impl SessionRegistry {
    /// A session kept in memory only, rebuilt on the model `request` asks
    /// for from its live `rows` (the same model on another connection, or a
    /// carry-over from `from`).
    pub(super) fn rebuild_in_memory(
        &self,
        request: &OpenRequest,
        id: SessionId,
        from: ModelBinding,
        rows: Vec<lrg_providers::Message>,
        builder: ChatSessionBuilder,
    ) -> Opened {
        let carry = from.model != request.model.model;
        let rows = if carry {
            without_native(&rows).unwrap_or(rows)
        } else {
            rows
        };
        let mut meta = SessionMeta::new(request.model.clone());
        meta.id = id.clone();
        meta.keys = request.keys.clone();
        meta.owner = request.owner.clone();
        let count = rows.len();
        let stored = StoredSession {
            meta: meta.clone(),
            state: SessionState::default(),
            rows,
            warnings: Vec::new(),
        };
        let session = builder.resumed(stored).build();
        let how = opened_how(&session, carry, from, request, count);
        self.insert(meta, session.clone(), false);
        Opened { id, session, how }
    }

    /// The model the chat under `keys` is on — live, else stored — or
    /// `None` when there is none: what an app opens with to resume a kept
    /// chat on its own model when the person named none. A damaged chat
    /// under the keys is an error, as for [`Self::open`].
    pub async fn kept_model(
        &self,
        keys: &SessionKeys,
    ) -> Result<Option<ModelBinding>, RegistryError> {
        let live = lock(&self.live)
            .values()
            .find(|e| e.meta.live_keys() == Some(keys))
            .map(|e| e.meta.model.clone());
        if live.is_some() {
            return Ok(live);
        }
        let Some(store) = &self.store else {
            return Ok(None);
        };
        Ok(store.find(keys).await?.map(|found| found.meta.model))
    }

    /// Archive session `id` ([`SessionStore::archive`]): it is kept with
    /// its history and listed, but its keys are released, so no open finds
    /// it by them again. A live session stays live (its page goes on), and
    /// is put away like any other when idle. Returns whether it existed.
    pub async fn archive(&self, id: &SessionId) -> Result<bool, RegistryError> {
        let _opening = self.opening.lock().await;
        self.archive_locked(id).await
    }

    pub(super) async fn archive_locked(&self, id: &SessionId) -> Result<bool, RegistryError> {
        // The store first: when it refuses, nothing has changed.
        let stored = match &self.store {
            Some(store) => store.archive(id).await?,
            None => false,
        };
        let live = match lock(&self.live).get_mut(id) {
            Some(entry) => {
                entry.meta.archived = true;
                true
            }
            None => false,
        };
        Ok(stored || live)
    }

    /// Carry the live session `id`'s conversation over to `model` (bound
    /// as `to`), in place: see [`ChatSession::carry_over`]. `source` is the
    /// session's model source. Its keys, if any, open it on `to` from now
    /// on.
    pub async fn carry_over(
        &self,
        id: &SessionId,
        source: &SwitchableModel,
        model: Arc<dyn ChatModel>,
        to: ModelBinding,
    ) -> Result<(), RegistryError> {
        let _opening = self.opening.lock().await;
        let session = self
            .get(id)
            .ok_or_else(|| RegistryError::NotFound(id.clone()))?;
        session
            .carry_over(source, model, to.clone())
            .await
            .map_err(|_| RegistryError::Busy(id.clone()))?;
        if let Some(entry) = lock(&self.live).get_mut(id) {
            entry.meta.model = to;
        }
        Ok(())
    }
}

/// How a rebuilt session was opened: carried over from `from` (said with a
/// `model_switched` event) or resumed, with `rows` history rows.
pub(super) fn opened_how(
    session: &ChatSession,
    carry: bool,
    from: ModelBinding,
    request: &OpenRequest,
    rows: usize,
) -> OpenedHow {
    if !carry {
        return OpenedHow::Resumed { rows };
    }
    session.events().publish(Event::ModelSwitched {
        from: from.model.clone(),
        to: request.model.model.clone(),
    });
    OpenedHow::CarriedOver {
        from: from.model,
        rows,
    }
}
