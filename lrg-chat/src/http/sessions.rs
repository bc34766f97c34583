//! The live chats of a server: id → session, token and what it was opened
//! with. Small and private on purpose: the session registry takes its place
//! once it lands.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use lrg_providers::ModelInfo;
use tokio_util::sync::CancellationToken;

use super::auth;
use super::error::ApiError;
use super::opener::{ChatSpec, OpenedChat};
use crate::session::ChatSession;
use crate::tools::ToolHost;

/// How long ending a chat waits for a running tool to finish and be
/// recorded before its tool servers are stopped anyway.
const END_GRACE: Duration = Duration::from_secs(30);

/// One live chat.
pub(crate) struct LiveChat {
    pub(crate) id: String,
    token: String,
    pub(crate) session: ChatSession,
    /// What it was opened with (holds MCP secrets: never sent anywhere).
    pub(crate) spec: ChatSpec,
    pub(crate) model: ModelInfo,
    pub(crate) host: Option<Arc<ToolHost>>,
    /// Cancelled when the chat ends: its event streams close.
    pub(crate) ended: CancellationToken,
    subscribers: AtomicUsize,
}

impl LiveChat {
    pub(crate) fn new(opened: OpenedChat, spec: ChatSpec) -> Arc<Self> {
        Arc::new(Self {
            id: auth::new_id(),
            token: auth::new_token(),
            session: opened.session,
            spec,
            model: opened.model,
            host: opened.host,
            ended: CancellationToken::new(),
            subscribers: AtomicUsize::new(0),
        })
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
    map: Mutex<HashMap<String, Arc<LiveChat>>>,
}

impl Chats {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, Arc<LiveChat>>> {
        // Inserts and removes only: a panic cannot leave it half changed.
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Add a chat, unless `limit` chats are open.
    pub(crate) fn insert(&self, chat: Arc<LiveChat>, limit: usize) -> Result<(), ApiError> {
        let mut map = self.lock();
        if map.len() >= limit {
            return Err(ApiError::too_many(format!(
                "{limit} chats are open, the most this server allows: end one first"
            )));
        }
        map.insert(chat.id.clone(), chat);
        Ok(())
    }

    /// Put `chat` in place of the chat `old`; returns the old one, or
    /// `None` (and adds nothing) when it had ended meanwhile.
    pub(crate) fn replace(&self, old: &str, chat: Arc<LiveChat>) -> Option<Arc<LiveChat>> {
        let mut map = self.lock();
        let previous = map.remove(old)?;
        map.insert(chat.id.clone(), chat);
        Some(previous)
    }

    pub(crate) fn get(&self, id: &str) -> Option<Arc<LiveChat>> {
        self.lock().get(id).cloned()
    }

    pub(crate) fn remove(&self, id: &str) -> Option<Arc<LiveChat>> {
        self.lock().remove(id)
    }

    pub(crate) fn drain(&self) -> Vec<Arc<LiveChat>> {
        self.lock().drain().map(|(_, chat)| chat).collect()
    }

    pub(crate) fn len(&self) -> usize {
        self.lock().len()
    }
}
