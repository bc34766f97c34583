//! Where a conversation goes: the "local only" lock, checked at every model
//! turn (not just hidden in a menu), and the `sends_to` event, published
//! before the first turn that leaves this machine and whenever the
//! destination changes after that (back to this machine included). A chat
//! that never leaves the machine sends none.
//!
//! Both choices a person makes about where the chat goes last: the lock,
//! and the consent to send it to a provider's cloud (asked once per
//! provider by a front end, [`ChatSession::cloud_consented`]), are kept
//! with a stored chat and restored on resume; a consent "for every chat"
//! is kept in the permission settings instead.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use lrg_providers::{ModelInfo, ModelLocation, ProviderError};

use super::run::TurnFailure;
use super::{ChatSession, Shared, persist};
use crate::events::Event;
use crate::permissions::SaveStatus;

impl ChatSession {
    /// Whether the person agreed to send this conversation to
    /// `provider`'s cloud: in this chat (kept with it), or for every chat
    /// (the permission settings' `cloud_consent`, "don't ask again for
    /// PROVIDER"). A front end asks before the first message that would go
    /// to a provider for which this is false, and only then.
    pub fn cloud_consented(&self, provider: &str) -> bool {
        self.shared.lock().cloud_consent.contains(provider)
            || self
                .shared
                .permissions
                .settings()
                .cloud_consent
                .contains(provider)
    }

    /// The person agreed to send this conversation to `provider`'s cloud:
    /// remembered for this chat (and kept with it), and with `always` for
    /// every chat, in the permission settings. Returns how the settings
    /// were saved when `always`, else `None`.
    pub fn consent_to_cloud(&self, provider: &str, always: bool) -> Option<SaveStatus> {
        let added = self
            .shared
            .lock()
            .cloud_consent
            .insert(provider.to_string());
        if added {
            spawn_save(&self.shared);
        }
        always.then(|| {
            self.shared.permissions.update(|s| {
                s.cloud_consent.insert(provider.to_string());
            })
        })
    }

    /// Keep the state now, and wait until it is durable: what a caller
    /// awaits after [`ChatSession::set_local_only`] or
    /// [`ChatSession::consent_to_cloud`] when it must not answer before the
    /// choice is kept. Returns whether it is (always `true` for a chat that
    /// is not kept; `false` once a write has failed).
    pub async fn keep_state(&self) -> bool {
        persist::save_state(&self.shared).await
    }
}

/// Turn the lock on or off, and keep it (in the background: the setter is
/// not async; [`ChatSession::keep_state`] waits for it).
pub(super) fn set_local_only(shared: &Arc<Shared>, on: bool) {
    let was = shared.local_only.swap(on, Ordering::SeqCst);
    if was != on {
        spawn_save(shared);
    }
}

/// Save the state on the runtime, when there is one. A save that runs late
/// still writes the newest state (it is read at write time), so saves that
/// overtake one another end where the person left things.
fn spawn_save(shared: &Arc<Shared>) {
    if shared.persister.is_none() {
        return;
    }
    if let Ok(runtime) = tokio::runtime::Handle::try_current() {
        let shared = shared.clone();
        runtime.spawn(async move {
            persist::save_state(&shared).await;
        });
    }
}

/// Refuse `info` when the session is local only and it runs in a cloud;
/// otherwise announce its destination if it is a new one.
pub(super) fn check(shared: &Shared, info: &ModelInfo) -> Result<(), TurnFailure> {
    if shared.local_only.load(Ordering::SeqCst) && info.location == ModelLocation::Cloud {
        let host = info.sends_to.as_deref().unwrap_or(&info.provider);
        return Err(TurnFailure::LocalOnly(ProviderError::Config {
            message: format!(
                "this chat is local only, and {} would send it to {host}; \
                 choose a model on this machine or your own server",
                info.id()
            ),
        }));
    }
    let destination = info
        .sends_to
        .as_ref()
        .map(|host| (info.provider.clone(), host.clone()));
    let mut state = shared.lock();
    if state.sent_to == destination {
        return Ok(());
    }
    state.sent_to = destination;
    drop(state);
    shared.publish(Event::SendsTo {
        provider: info.provider.clone(),
        host: info.sends_to.clone(),
    });
    Ok(())
}
