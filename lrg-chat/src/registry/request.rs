//! What an open asks for and how it went: [`OpenRequest`] (with its
//! [`OtherModel`] policy), [`Opened`] and [`OpenedHow`], and the registry's
//! tunables and errors.

use std::time::Duration;

use crate::session::{ChatSession, ChatSessionBuilder};
use crate::store::{KeyError, ModelBinding, SessionId, SessionKeys, StoreError};

/// Default for [`RegistryConfig::idle`]: 30 minutes.
pub const IDLE: Duration = Duration::from_secs(30 * 60);
/// Default for [`RegistryConfig::max_live`].
pub const MAX_LIVE: usize = 256;

/// Tunables of a [`SessionRegistry`](super::SessionRegistry).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RegistryConfig {
    /// How long a keyed session may sit idle before it is evicted.
    pub idle: Duration,
    /// How many sessions may be live at once.
    pub max_live: usize,
    /// How many history rows a resumed session keeps in its live file;
    /// `None` (the default): all of them. With a bound, the older rows move
    /// to an archive beside the session at resume ([`SessionStore::resume`](crate::store::SessionStore::resume)),
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
    /// The keys name a chat on another model, and the request's
    /// [`OtherModel`] policy is to refuse: nothing was changed.
    #[error(
        "the chat under these keys is on {stored_model}, not {asked_model}: open it on \
         {stored_model}, carry the conversation over to {asked_model}, or start a new chat \
         in its place (the old one is archived, not deleted)"
    )]
    OtherModel {
        /// The chat the keys name.
        id: SessionId,
        /// The model it is on, `provider:model`.
        stored_model: String,
        /// The model asked for.
        asked_model: String,
    },
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

/// What [`SessionRegistry::open`](super::SessionRegistry::open) does when the keys name a chat on
/// another model than the one asked for (another `provider:model`; another
/// connection to the same model is the same chat). No choice loses the
/// chat.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum OtherModel {
    /// Refuse with [`RegistryError::OtherModel`], changing nothing: a
    /// conversation is not handed to another model unasked (a cloud model
    /// would receive what was kept on this machine).
    #[default]
    Refuse,
    /// The person's explicit choice: the conversation moves to the new
    /// model, without the old model's native parts, the chat is bound to
    /// the new model in the store ([`SessionStore::rebind`](crate::store::SessionStore::rebind)) and a numbered
    /// `model_switched` event follows its history.
    CarryOver,
    /// A new chat under the keys; the old one is archived
    /// ([`SessionStore::archive`](crate::store::SessionStore::archive)): kept with its history, listed, found by
    /// its archive id, its keys released. A live old chat stays live.
    Replace,
}

/// What to open.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct OpenRequest {
    /// Keys for create-or-resume; `None` always creates.
    pub keys: Option<SessionKeys>,
    /// The model to run on. To resume a kept chat on the model it is on,
    /// look that up first ([`SessionRegistry::kept_model`](super::SessionRegistry::kept_model)).
    pub model: ModelBinding,
    /// Who it belongs to (kept with it, and listed by).
    pub owner: Option<String>,
    /// Whether it is kept in the registry's store (default yes).
    pub saved: bool,
    /// What to do when the keys name a chat on another model (default:
    /// refuse).
    pub other_model: OtherModel,
}

impl OpenRequest {
    /// A new unkeyed session on `model`.
    pub fn new(model: ModelBinding) -> Self {
        Self {
            keys: None,
            model,
            owner: None,
            saved: true,
            other_model: OtherModel::Refuse,
        }
    }

    /// Create-or-resume by `keys`; refused when they name a chat on another
    /// model (see [`Self::on_other_model`]).
    pub fn keyed(keys: SessionKeys, model: ModelBinding) -> Self {
        Self {
            keys: Some(keys),
            ..Self::new(model)
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

    /// The same request with another policy for keys that name a chat on
    /// another model.
    pub fn on_other_model(mut self, policy: OtherModel) -> Self {
        self.other_model = policy;
        self
    }
}

/// How [`SessionRegistry::open`](super::SessionRegistry::open) found its session.
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
    /// The keys named a chat on another model, and its conversation was
    /// carried over ([`OtherModel::CarryOver`]): the same chat, on the new
    /// model.
    CarriedOver {
        /// The model it was on.
        from: String,
        /// History rows it goes on with.
        rows: usize,
    },
    /// The keys named a chat on another model; it was archived (kept, with
    /// its history) and a new chat took the keys ([`OtherModel::Replace`]).
    Replaced {
        /// The old chat's archive id (its session id: see
        /// [`SessionMeta::archive_id`](crate::store::SessionMeta::archive_id)).
        archived: SessionId,
        /// The model it was on.
        old_model: String,
    },
}

/// An opened session.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Opened {
    /// Its id (for [`SessionRegistry::get`](super::SessionRegistry::get), URLs, the store).
    pub id: SessionId,
    /// The session.
    pub session: ChatSession,
    /// How it was found.
    pub how: OpenedHow,
}
