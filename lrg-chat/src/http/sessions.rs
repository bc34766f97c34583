//! The live chats of a server as the HTTP side sees them: id → token, tool
//! host and what the chat was opened with. The sessions themselves live in
//! the server's [`crate::registry::SessionRegistry`] (keys, store, idle
//! eviction); a chat the registry no longer holds is ended here.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use lrg_providers::ModelInfo;
use tokio_util::sync::CancellationToken;

use super::auth;
use super::opener::ChatSpec;
use crate::session::{ChatSession, SwitchableModel};
use crate::store::{SessionId, SessionKeys};
use crate::tools::ToolHost;

/// How long ending a chat waits for a running tool to finish and be
/// recorded before its tool servers are stopped anyway.
const END_GRACE: Duration = Duration::from_secs(30);

/// One live chat.
pub(crate) struct LiveChat {
    pub(crate) id: SessionId,
    token: String,
    pub(crate) session: ChatSession,
    /// What it was opened with (holds MCP secrets: never sent anywhere).
    pub(crate) spec: ChatSpec,
    /// Its client and context keys, when it is keyed.
    pub(crate) keys: Option<SessionKeys>,
    /// Its model now (a carry-over changes it in place).
    model: Mutex<ModelInfo>,
    /// Its model source, when its conversation can be carried over to
    /// another model in place.
    pub(crate) source: Option<Arc<SwitchableModel>>,
    pub(crate) host: Option<Arc<ToolHost>>,
    /// Cancelled when the chat ends: its event streams close.
    pub(crate) ended: CancellationToken,
    subscribers: AtomicUsize,
}

impl LiveChat {
    pub(crate) fn new(
        id: SessionId,
        session: ChatSession,
        model: ModelInfo,
        host: Option<Arc<ToolHost>>,
        source: Option<Arc<SwitchableModel>>,
        spec: ChatSpec,
        keys: Option<SessionKeys>,
    ) -> Arc<Self> {
        Arc::new(Self {
            id,
            token: auth::new_token(),
            session,
            spec,
            keys,
            model: Mutex::new(model),
            source,
            host,
            ended: CancellationToken::new(),
            subscribers: AtomicUsize::new(0),
        })
    }

    /// The model it runs on now.
    pub(crate) fn model(&self) -> ModelInfo {
        lrg_providers::sync::lock(&self.model).clone()
    }

    /// The conversation was carried over to `model`.
    pub(crate) fn set_model(&self, model: ModelInfo) {
        *lrg_providers::sync::lock(&self.model) = model;
    }

    pub(crate) fn token(&self) -> &str {
        &self.token
    }

    pub(crate) fn token_matches(&self, given: &str) -> bool {
        auth::same_token(given, &self.token)
    }

    /// Take one event-stream slot, or `None` when `limit` are taken.
    pub(crate) fn subscribe_slot(self: &Arc<Self>, limit: usize) -> Option<SubscriberSlot> {
        self.subscribers
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < limit).then_some(n + 1)
            })
            .ok()
            .map(|_| SubscriberSlot(self.clone()))
    }

    /// End the chat: stop its message (a running tool finishes and its
    /// result is recorded), close its streams once viewers have seen that,
    /// then stop its tool servers.
    pub(crate) async fn end(&self) {
        self.session.stop();
        let settled = async {
            while self.session.is_busy() {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        };
        let _ = tokio::time::timeout(END_GRACE, settled).await;
        self.ended.cancel();
        if let Some(host) = &self.host {
            host.shutdown().await;
        }
    }
}

/// An event stream's hold on one of its chat's subscriber slots.
pub(crate) struct SubscriberSlot(Arc<LiveChat>);

impl Drop for SubscriberSlot {
    fn drop(&mut self) {
        self.0.subscribers.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The table of live chats.
#[derive(Default)]
pub(crate) struct Chats {
    map: Mutex<HashMap<SessionId, Arc<LiveChat>>>,
}

impl Chats {
    fn lock(&self) -> MutexGuard<'_, HashMap<SessionId, Arc<LiveChat>>> {
        // Inserts and removes only: a panic cannot leave it half changed.
        lrg_providers::sync::lock(&self.map)
    }

    /// Put `chat` in; returns the chat it took the place of (the same id
    /// rebuilt: a carry-over of a chat that was live).
    pub(crate) fn insert(&self, chat: Arc<LiveChat>) -> Option<Arc<LiveChat>> {
        self.lock().insert(chat.id.clone(), chat)
    }

    pub(crate) fn get(&self, id: &str) -> Option<Arc<LiveChat>> {
        let id: SessionId = id.parse().ok()?;
        self.lock().get(&id).cloned()
    }

    pub(crate) fn remove(&self, id: &SessionId) -> Option<Arc<LiveChat>> {
        self.lock().remove(id)
    }

    /// Take out every chat for which `gone` says so.
    pub(crate) fn take_where(&self, gone: impl Fn(&SessionId) -> bool) -> Vec<Arc<LiveChat>> {
        let mut map = self.lock();
        let ids: Vec<SessionId> = map.keys().filter(|id| gone(id)).cloned().collect();
        ids.iter().filter_map(|id| map.remove(id)).collect()
    }

    /// The chats a page (an event stream) watches now.
    pub(crate) fn watched(&self) -> Vec<Arc<LiveChat>> {
        self.lock()
            .values()
            .filter(|c| c.subscribers.load(Ordering::Acquire) > 0)
            .cloned()
            .collect()
    }

    pub(crate) fn drain(&self) -> Vec<Arc<LiveChat>> {
        self.lock().drain().map(|(_, chat)| chat).collect()
    }

    pub(crate) fn len(&self) -> usize {
        self.lock().len()
    }
}
