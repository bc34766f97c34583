//! Where a conversation goes: the "local only" lock, checked at every model
//! turn (not just hidden in a menu), and the `sends_to` event, published
//! before the first turn that leaves this machine and whenever the
//! destination changes after that (back to this machine included). A chat
//! that never leaves the machine sends none.

use lrg_providers::{ModelInfo, ModelLocation, ProviderError};

use super::Shared;
use super::run::TurnFailure;
use crate::events::Event;

/// Refuse `info` when the session is local only and it runs in a cloud;
/// otherwise announce its destination if it is a new one.
pub(super) fn check(shared: &Shared, info: &ModelInfo) -> Result<(), TurnFailure> {
    if shared.local_only.load(std::sync::atomic::Ordering::SeqCst)
        && info.location == ModelLocation::Cloud
    {
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
