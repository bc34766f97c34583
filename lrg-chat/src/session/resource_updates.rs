//! A subscribed resource's updates as `resource_updated` events: the
//! session listens to its tools' updates (when they have any, as
//! [`crate::tools::ToolHost`] does) for as long as it lives.

use std::sync::Arc;

use tokio::sync::broadcast::error::RecvError;

use super::Shared;
use crate::events::Event;

/// Start forwarding; nothing to do for tools without updates, or outside
/// a tokio runtime (a session built there cannot run a message either).
pub(super) fn forward(shared: &Arc<Shared>) {
    let Some(mut updates) = shared.tools.resource_updates() else {
        return;
    };
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        tracing::debug!("no tokio runtime: resource updates are not turned into events");
        return;
    };
    let session = Arc::downgrade(shared);
    runtime.spawn(async move {
        loop {
            match updates.recv().await {
                Ok(update) => {
                    // The session ended: stop listening.
                    let Some(shared) = session.upgrade() else {
                        break;
                    };
                    shared.publish(Event::ResourceUpdated {
                        server: update.server,
                        uri: update.uri,
                    });
                }
                Err(RecvError::Lagged(missed)) => {
                    tracing::warn!(
                        missed,
                        "resource updates came faster than they were published; some were dropped"
                    );
                }
                Err(RecvError::Closed) => break,
            }
        }
    });
}
