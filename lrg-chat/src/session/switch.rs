//! Switching models: as a new chat ([`ChatSession::switch_model`]), or by
//! carrying the conversation over ([`ChatSession::carry_over`]) when the
//! person explicitly asks for it. A conversation is never handed to another
//! model silently: a cloud model would receive what was kept on this
//! machine, and another provider's thinking blocks and signatures (its
//! native parts) are no history to continue from, so a carry-over drops
//! them and says so with a numbered `model_switched` event.

use std::sync::{Arc, RwLock};

use futures::future::BoxFuture;
use lrg_providers::{ChatModel, ModelInfo, ModelLocation, ProviderError};

use super::persist::{self, Announce};
use super::{ChatSession, SessionError};
use crate::events::Event;
use crate::model_source::ModelSource;
use crate::store::{ModelBinding, without_native};

/// What switching to a model would mean, for the app to ask the person.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct SwitchCheck {
    /// The conversation so far would be left behind (a new chat starts).
    pub drops_history: bool,
    /// The new model sends the conversation to a cloud.
    pub to_cloud: bool,
}

impl SwitchCheck {
    /// Whether the person should confirm before the switch.
    pub fn needs_confirmation(&self) -> bool {
        self.drops_history || self.to_cloud
    }
}

/// A model source the app switches with [`ChatSession::switch_model`].
pub struct SwitchableModel(RwLock<Arc<dyn ChatModel>>);

impl SwitchableModel {
    /// A source starting on `model`.
    pub fn new(model: Arc<dyn ChatModel>) -> Self {
        Self(RwLock::new(model))
    }

    /// The model in use now.
    pub fn current(&self) -> Arc<dyn ChatModel> {
        lrg_providers::sync::read(&self.0).clone()
    }
}

impl std::fmt::Debug for SwitchableModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SwitchableModel({})", self.current().info().id())
    }
}

impl ModelSource for SwitchableModel {
    fn resolve(&self) -> BoxFuture<'_, Result<Arc<dyn ChatModel>, ProviderError>> {
        let model = self.current();
        Box::pin(async move { Ok(model) })
    }
}

impl ChatSession {
    /// What switching to `target` would mean; refused while a message is
    /// being worked on.
    pub fn switch_check(&self, target: &ModelInfo) -> Result<SwitchCheck, SessionError> {
        let state = self.shared.lock();
        if state.running.is_some() {
            return Err(SessionError::Busy);
        }
        Ok(SwitchCheck {
            drops_history: !state.history.is_empty(),
            to_cloud: target.location == ModelLocation::Cloud,
        })
    }

    /// Move `source` (this session's model source) to `model` as a new
    /// chat: the history is emptied (a `cleared` event) and grants "for this
    /// chat" are forgotten. Refused while a message is being worked on.
    /// Ask the person first when [`ChatSession::switch_check`] says so.
    pub fn switch_model(
        &self,
        source: &SwitchableModel,
        model: Arc<dyn ChatModel>,
    ) -> Result<(), SessionError> {
        let mut state = self.shared.lock();
        if state.running.is_some() {
            return Err(SessionError::Busy);
        }
        state.history = lrg_providers::Messages::new();
        // Replaced, not extended: the store rewrites it, estimates start over.
        state.generation += 1;
        state.user_seqs.clear();
        state.chat_allowed.clear();
        *lrg_providers::sync::write(&source.0) = model;
        // `cleared` once the emptied history is kept, as for a clear.
        state.announce.push(Announce::Cleared);
        drop(state);
        drop(self.keep_and_announce());
        Ok(())
    }

    /// Carry the conversation over to `model` (bound as `to`), in place: the
    /// history goes on without its native parts, grants "for this chat"
    /// stay, and a numbered `model_switched` event says so once the move is
    /// durable — a kept session's store then binds it to `to`
    /// ([`crate::store::SessionStore::rebind`]), so it is resumed there.
    /// Refused while a message is being worked on. The person's explicit
    /// choice: a cloud model receives the whole conversation (tell them
    /// where: [`ModelInfo::sends_to`]).
    pub async fn carry_over(
        &self,
        source: &SwitchableModel,
        model: Arc<dyn ChatModel>,
        to: ModelBinding,
    ) -> Result<(), SessionError> {
        {
            let mut state = self.shared.lock();
            if state.running.is_some() {
                return Err(SessionError::Busy);
            }
            if let Some(rows) = without_native(&state.history) {
                state.history = rows.into();
                // Changed, not extended: the store rewrites it.
                state.generation += 1;
            }
            let from = {
                let mut current = lrg_providers::sync::write(&source.0);
                let from = current.info().id();
                *current = model;
                from
            };
            state
                .announce
                .push(Announce::Events(vec![Event::ModelSwitched {
                    from,
                    to: to.model.clone(),
                }]));
        }
        if let Some(persister) = &self.shared.persister
            && let Err(e) = persister.store().rebind(persister.id(), &to).await
        {
            self.shared.publish(Event::Warning {
                message: format!(
                    "The kept chat still names its old model ({e}): it goes on with {} \
                     now, but is found on the old model when it is opened again.",
                    to.model
                ),
                retrying: false,
            });
        }
        persist::save_and_announce(&self.shared).await;
        Ok(())
    }
}
