//! Durable sessions: what a resumed chat needs, kept in a [`SessionStore`].
//!
//! A store keeps, per session, a [`SessionMeta`] (id, keys, the model binding
//! — `provider:model` and the connection's name, never a key), the history
//! exactly as the provider saw it (native parts included, so a Claude or
//! Gemini chat resumes with its signatures) and a [`SessionState`] (grants
//! "for this chat", usage so far).
//!
//! The session appends the new tail of its history, durably, *before* it
//! publishes the numbered event that shows it
//! ([`crate::session::ChatSessionBuilder::store`]): what a viewer saw, a
//! resume has. It rewrites the whole history after a clear, a retry or a
//! compaction. A resume keeps the whole conversation ([`RESUME_ROWS`]);
//! context fitting alone decides what a model sees. One process writes a
//! session at a time: [`SessionStore::create`] and [`SessionStore::resume`]
//! take the writer's place, which [`SessionStore::release`] gives back.
//!
//! A chat is never lost by reopening it: one on another model is either
//! moved there ([`SessionStore::rebind`], when the person carries the
//! conversation over) or archived ([`SessionStore::archive`]: kept with its
//! history and listed, its keys released for a new chat). Only
//! [`SessionStore::delete`] removes one.
//!
//! Two stores: [`JsonlStore`] (one file per session, the embedded default) and,
//! with the `postgres` feature, `PgStore`. Both pass one conformance suite
//! (`lrg-chat/tests/store.rs`).

mod jsonl;
mod jsonl_files;
mod jsonl_format;
mod jsonl_index;
mod keys;
#[cfg(feature = "postgres")]
mod postgres;
mod repair;
mod setup;
mod trim;

use std::path::PathBuf;

use futures::future::BoxFuture;
use lrg_providers::{Message, Usage};
use serde::{Deserialize, Serialize};

pub use jsonl::JsonlStore;
pub use keys::{KEY_RULE, KeyError, SessionKey, SessionKeys};
#[cfg(feature = "postgres")]
pub use postgres::PgStore;
pub use repair::INTERRUPTED_NOTE;
pub(crate) use repair::{loaded, open_call_results};
pub use setup::{ChatSetup, SetupOrigin};
pub use trim::trim_start;
pub(crate) use trim::without_native;

/// The format version written in each session's header; a store refuses to
/// read a newer one.
pub const FORMAT_VERSION: u32 = 1;

/// Default for how many history rows a resume keeps in the live file: all
/// of them. The store keeps the whole conversation; context fitting alone
/// decides what a model sees. A smaller bound (`--max-kept-rows`) moves the
/// older rows to an archive beside the session ([`SessionStore::resume`]),
/// never deletes them.
pub const RESUME_ROWS: usize = usize::MAX;

/// The owner of a session that names none ([`SessionMeta::owned_by`]).
pub const DEFAULT_OWNER: &str = "default";

/// A session's id: 32 lowercase hex digits, safe in a file name and a URL;
/// a sub-agent's is its parent's followed by `::sub::<n>`
/// ([`SessionId::sub_agent`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct SessionId(String);

/// What separates a parent's id from its sub-agent's number.
const SUB_MARK: &str = "::sub::";

impl SessionId {
    /// A new random id.
    pub fn random() -> Self {
        let bytes: [u8; 16] = rand::random();
        Self(bytes.iter().map(|b| format!("{b:02x}")).collect())
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The id of this session's sub-agent number `n`: `{self}::sub::{n}`.
    /// Sub-agents are one level deep, so the id of a sub-agent's sub-agent
    /// is its parent's.
    pub fn sub_agent(&self, n: u64) -> Self {
        let top = self.parent().unwrap_or_else(|| self.clone());
        Self(format!("{top}{SUB_MARK}{n}"))
    }

    /// The session that spawned this one, when it is a sub-agent.
    pub fn parent(&self) -> Option<SessionId> {
        let (parent, _) = self.0.split_once(SUB_MARK)?;
        Some(Self(parent.to_string()))
    }

    /// Its number among its parent's sub-agents (the `n` of
    /// [`SessionId::sub_agent`]), when it is a sub-agent.
    pub fn sub_agent_number(&self) -> Option<u64> {
        let (_, n) = self.0.split_once(SUB_MARK)?;
        n.parse().ok()
    }

    /// The id as part of a file name: the `::` of a sub-agent's id, which
    /// some file systems refuse, become `.`.
    pub fn file_stem(&self) -> String {
        self.0.replace("::", ".")
    }
}

impl std::fmt::Display for SessionId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::str::FromStr for SessionId {
    type Err = StoreError;

    fn from_str(s: &str) -> Result<Self, StoreError> {
        // Only what `random` and `sub_agent` make: an id also names a file.
        let top = |t: &str| {
            t.len() == 32
                && t.bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        };
        let ok = match s.split_once(SUB_MARK) {
            None => top(s),
            Some((parent, n)) => {
                top(parent)
                    && !n.is_empty()
                    && n.len() <= 20
                    && n.bytes().all(|b| b.is_ascii_digit())
            }
        };
        if ok {
            Ok(Self(s.to_string()))
        } else {
            Err(StoreError::BadId(s.chars().take(80).collect()))
        }
    }
}

impl TryFrom<String> for SessionId {
    type Error = StoreError;

    fn try_from(s: String) -> Result<Self, StoreError> {
        s.parse()
    }
}

impl From<SessionId> for String {
    fn from(id: SessionId) -> String {
        id.0
    }
}

/// Which model a session is bound to: a conversation is not handed to
/// another model unless the person carries it over
/// ([`SessionStore::rebind`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ModelBinding {
    /// `provider:model`, e.g. `openai:gpt-4.1`.
    pub model: String,
    /// The name of the connection (server, account) it runs on, if the app
    /// has several; never a key or a URL with credentials.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connection: Option<String>,
}

impl ModelBinding {
    /// A binding to `model` (`provider:model`) on the default connection.
    pub fn new(model: impl Into<String>) -> Self {
        Self {
            model: model.into(),
            connection: None,
        }
    }

    /// The same binding on the named connection.
    pub fn with_connection(mut self, connection: impl Into<String>) -> Self {
        self.connection = Some(connection.into());
        self
    }
}

/// What is fixed for the life of a session (the JSONL header line).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct SessionMeta {
    /// The session's id.
    pub id: SessionId,
    /// Who the session belongs to (an app, a token's owner), if anyone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// Its client and context keys, when it is keyed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keys: Option<SessionKeys>,
    /// The model it runs on (changed only by [`SessionStore::rebind`],
    /// when the person carries the conversation over to another model).
    pub model: ModelBinding,
    /// When it was created, in milliseconds since the Unix epoch.
    pub created_ms: u64,
    /// Archived ([`SessionStore::archive`]): kept with its history and
    /// listed, but its keys are released, so [`SessionStore::find`] never
    /// finds it and a new chat may take them. Its archive id is its session
    /// id ([`SessionMeta::archive_id`]). Absent (false) in files from
    /// before archiving, which load as they are.
    #[serde(default, skip_serializing_if = "is_false")]
    pub archived: bool,
    /// The name a person gave the chat ([`SessionStore::rename`]), shown
    /// as its title in a chat list. Absent in files from before names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The task of a sub-agent ([`SessionId::sub_agent`]): what it was
    /// spawned to do, so a listing after a restart can tell
    /// ([`crate::sub_agents::stored`]). Absent in every other session, and
    /// in sub-agents kept before it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sub_agent: Option<crate::sub_agents::SubAgentTask>,
    /// The folder the chat was made for, when a front end says (an ACP
    /// editor's session folder), so `session/list` can offer it there again.
    /// Absent in chats made elsewhere, and in those kept before it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<PathBuf>,
}

fn is_false(b: &bool) -> bool {
    !*b
}

impl SessionMeta {
    /// A new session with a random id, created now.
    pub fn new(model: ModelBinding) -> Self {
        Self {
            id: SessionId::random(),
            owner: None,
            keys: None,
            model,
            created_ms: now_ms(),
            archived: false,
            name: None,
            sub_agent: None,
            cwd: None,
        }
    }

    /// The id an archived session is shown and removed by (`lrg sessions
    /// show ID`): its session id, which is unique and never changes, so an
    /// archive id is valid for as long as the chat is kept. `None` while the
    /// session is not archived.
    pub fn archive_id(&self) -> Option<&SessionId> {
        self.archived.then_some(&self.id)
    }

    /// The keys it holds: its keys unless it is archived (an archived
    /// session has released them).
    pub fn live_keys(&self) -> Option<&SessionKeys> {
        self.keys.as_ref().filter(|_| !self.archived)
    }

    /// The same session with keys.
    pub fn with_keys(mut self, keys: SessionKeys) -> Self {
        self.keys = Some(keys);
        self
    }

    /// The same session with an owner.
    pub fn with_owner(mut self, owner: impl Into<String>) -> Self {
        self.owner = Some(owner.into());
        self
    }

    /// Whether it belongs to `owner`; a session without an owner belongs
    /// to [`DEFAULT_OWNER`].
    pub fn owned_by(&self, owner: &str) -> bool {
        self.owner.as_deref().unwrap_or(DEFAULT_OWNER) == owner
    }
}

/// What changes as a session goes on, besides its history.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct SessionState {
    /// Tools the person allowed "for this chat", sorted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub granted: Vec<String>,
    /// Tokens used so far, summed over every model turn.
    #[serde(default)]
    pub usage: Usage,
    /// When the session last changed, in milliseconds since the Unix epoch.
    #[serde(default)]
    pub updated_ms: u64,
    /// The "local only" lock ([`crate::ChatSession::set_local_only`]), kept
    /// so a resumed chat is as locked as it was. Absent (off) in sessions
    /// from before the lock was kept, which load as they are.
    #[serde(default, skip_serializing_if = "is_false")]
    pub local_only: bool,
    /// Providers the person agreed, in this chat, to send the conversation
    /// to ([`crate::ChatSession::consent_to_cloud`]), sorted, so a resumed
    /// chat does not ask again.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cloud_consent: Vec<String>,
    /// What the chat has cost so far, summed over every model turn
    /// (sub-agents' included); absent in sessions from before costs were
    /// kept, whose cost is then unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<lrg_providers::pricing::Cost>,
    /// How a sub-agent ended, and when: written once, as its last state,
    /// when it ends. Absent while it works (so one that is absent in a
    /// sub-agent that is not running was cut off), in every other session,
    /// and in sub-agents kept before it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sub_agent_end: Option<crate::sub_agents::SubAgentEnd>,
    /// How the chat was set up for its first message
    /// ([`crate::ChatSession::keep_setup`]), for turning it into a test;
    /// absent in chats kept before setups were, or by an app that keeps
    /// none. Shared, not copied, by the state written after every step.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "setup::shared"
    )]
    pub setup: Option<std::sync::Arc<ChatSetup>>,
}

/// A session as read back from a store.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct StoredSession {
    /// Its fixed part.
    pub meta: SessionMeta,
    /// The latest state written.
    pub state: SessionState,
    /// The history, every tool call with its result.
    pub rows: Vec<Message>,
    /// What was repaired or dropped on the way in (a torn last line, calls
    /// left without a result by a crash), for a `warning` event.
    pub warnings: Vec<String>,
}

/// One line of [`SessionStore::list`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct SessionSummary {
    /// Its fixed part.
    pub meta: SessionMeta,
    /// How many history rows it holds (lines in the file, for JSONL).
    pub rows: usize,
    /// When it last changed, in milliseconds since the Unix epoch.
    pub updated_ms: u64,
    /// The text of its first user message, clipped to [`TITLE_CHARS`]
    /// characters (what a chat list shows when it has no name); `None`
    /// when it has none (or the store does not tell).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_message: Option<String>,
}

/// How many characters of a chat's first user message
/// [`SessionSummary::first_message`] keeps.
pub const TITLE_CHARS: usize = 80;

/// The first user message of `rows` with text, clipped to [`TITLE_CHARS`]
/// characters (an ellipsis when cut), whitespace runs made one space.
pub fn first_message(rows: &[Message]) -> Option<String> {
    rows.iter()
        .filter(|m| m.role == lrg_providers::Role::User)
        .map(Message::text)
        .find(|t| !t.trim().is_empty())
        .map(|t| clip_title(&t))
}

/// `text` on one line, cut to [`TITLE_CHARS`] characters with `…` when cut.
pub(crate) fn clip_title(text: &str) -> String {
    let line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    lrg_providers::text::clip(&line, TITLE_CHARS)
}

/// A session a store cannot read ([`SessionStore::damaged`]); it is left
/// as it is, for a person to repair or remove.
#[derive(Debug)]
#[non_exhaustive]
pub struct DamagedSession {
    /// The file (or table and id) that holds it.
    pub file: PathBuf,
    /// Its id, when the file name or header tells it.
    pub id: Option<SessionId>,
    /// Its keys, when what is left of the header (or the session's lock
    /// file) tells them.
    pub keys: Option<SessionKeys>,
    /// What is wrong, naming the file and line.
    pub error: StoreError,
}

/// Which sessions [`SessionStore::list`] returns; empty fields match all.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ListFilter {
    /// Only this owner's.
    pub owner: Option<String>,
    /// Only this client's.
    pub client_key: Option<String>,
    /// Only sessions about this context.
    pub context_key: Option<String>,
}

impl ListFilter {
    /// Every session.
    pub fn all() -> Self {
        Self::default()
    }

    /// The sessions with exactly these keys.
    pub fn keys(keys: &SessionKeys) -> Self {
        Self {
            owner: None,
            client_key: Some(keys.client().as_str().to_string()),
            context_key: Some(keys.context().as_str().to_string()),
        }
    }

    /// Whether `meta` passes.
    pub fn matches(&self, meta: &SessionMeta) -> bool {
        let keys = meta.keys.as_ref();
        self.owner
            .as_ref()
            .is_none_or(|o| meta.owner.as_ref() == Some(o))
            && self
                .client_key
                .as_ref()
                .is_none_or(|c| keys.is_some_and(|k| k.client().as_str() == c))
            && self
                .context_key
                .as_ref()
                .is_none_or(|c| keys.is_some_and(|k| k.context().as_str() == c))
    }
}

/// Why a store refused or failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// Not a session id.
    #[error(
        "`{0}` is not a session id (32 lowercase hex digits, or a sub-agent's: that and `::sub::<n>`)"
    )]
    BadId(String),
    /// No session with that id.
    #[error("no stored session `{0}`")]
    NotFound(SessionId),
    /// A session with that id exists already.
    #[error("a stored session `{0}` exists already")]
    Exists(SessionId),
    /// Another process (or another handle in this one) writes the session.
    #[error(
        "session `{id}` is open in another process (lock held on {}); close it there first",
        lock.display()
    )]
    Locked {
        /// The session.
        id: SessionId,
        /// The lock file (or lock name).
        lock: PathBuf,
    },
    /// This process does not hold the writer's place for the session
    /// (never created or resumed here, released, or deleted).
    #[error("session `{0}` is not open for writing here (released or deleted)")]
    NotOpen(SessionId),
    /// A stored file or row could not be read; nothing was changed.
    #[error("{}:{line}: {reason}; the file was left as it is", file.display())]
    Corrupt {
        /// The file (or table and session id).
        file: PathBuf,
        /// The line (or row number), from 1.
        line: usize,
        /// What is wrong with it.
        reason: String,
    },
    /// Written by a newer lrg.
    #[error(
        "{}: written by a newer lrg (format version {found} is newer than this lrg reads, \
         {FORMAT_VERSION}); upgrade lrg to open it. The file was left as it is",
        file.display()
    )]
    FutureVersion {
        /// The file.
        file: PathBuf,
        /// The version it says.
        found: u32,
    },
    /// Reading or writing failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// What was being read or written.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// The database failed.
    #[error("session database: {0}")]
    Database(String),
    /// The store does not do this (a store written before the operation
    /// was added to [`SessionStore`]); nothing was changed.
    #[error("this session store cannot {0}; nothing was changed")]
    Unsupported(&'static str),
}

impl StoreError {
    /// Whether the session is damaged or foreign (a bad line, a corrupt
    /// header, a newer format): it was left as it is, and resuming it
    /// needs a person, not a retry.
    pub fn is_damage(&self) -> bool {
        matches!(self, Self::Corrupt { .. } | Self::FutureVersion { .. })
    }
}

/// Where sessions are kept. See the [module docs](self).
///
/// Every method is safe to call from several tasks at once; appends and
/// rewrites of one session are applied in the order they are called.
pub trait SessionStore: Send + Sync + std::fmt::Debug {
    /// Store a new, empty session and take the writer's place for it.
    fn create<'a>(&'a self, meta: &'a SessionMeta) -> BoxFuture<'a, Result<(), StoreError>>;

    /// Load a session and take the writer's place for it; returns its
    /// history. Damage other than a torn last line refuses the resume and
    /// leaves the session as it is. With `max_rows` below the history's
    /// length ([`RESUME_ROWS`], every row, is the default), the rows before
    /// [`trim_start`] move to an archive beside the session (never deleted)
    /// and the live history keeps the newest ones.
    fn resume<'a>(
        &'a self,
        id: &'a SessionId,
        max_rows: usize,
    ) -> BoxFuture<'a, Result<StoredSession, StoreError>>;

    /// Append rows (the new tail of the history) and the state after them,
    /// durably, before returning.
    fn append<'a>(
        &'a self,
        id: &'a SessionId,
        rows: &'a [Message],
        state: &'a SessionState,
    ) -> BoxFuture<'a, Result<(), StoreError>>;

    /// Replace the whole history and state (after a clear, retry or
    /// compaction), atomically.
    fn rewrite<'a>(
        &'a self,
        id: &'a SessionId,
        rows: &'a [Message],
        state: &'a SessionState,
    ) -> BoxFuture<'a, Result<(), StoreError>>;

    /// Read a session without writing it (for listings and transcripts).
    fn load<'a>(&'a self, id: &'a SessionId) -> BoxFuture<'a, Result<StoredSession, StoreError>>;

    /// The sessions that pass `filter`, most recently changed first. Files
    /// that cannot be read are left out (and logged at error level): see
    /// [`SessionStore::damaged`].
    fn list<'a>(
        &'a self,
        filter: &'a ListFilter,
    ) -> BoxFuture<'a, Result<Vec<SessionSummary>, StoreError>>;

    /// Delete a session, under the writer's lock, so that no late append
    /// brings it back. Returns whether it existed.
    fn delete<'a>(&'a self, id: &'a SessionId) -> BoxFuture<'a, Result<bool, StoreError>>;

    /// Archive a session: it stays in the store with its history and is
    /// listed ([`SessionMeta::archived`]), but its keys are released, so
    /// [`SessionStore::find`] never finds it again and a new chat may take
    /// them. Nothing is deleted. A session this handle writes is archived
    /// in place and may go on being written; any other is locked for the
    /// change ([`StoreError::Locked`] while another process writes it).
    /// Returns whether it existed. (Not to be confused with the row archive
    /// of a bounded resume, which keeps a live session's older rows.)
    ///
    /// The default refuses ([`StoreError::Unsupported`]), so a store that
    /// predates archiving never loses a chat to a half-done replace.
    fn archive<'a>(&'a self, id: &'a SessionId) -> BoxFuture<'a, Result<bool, StoreError>> {
        let _ = id;
        Box::pin(async { Err(StoreError::Unsupported("archive a chat")) })
    }

    /// Bind a session this handle writes ([`StoreError::NotOpen`]
    /// otherwise) to another model, durably: the person carried the
    /// conversation over, and a later open must find it on that model.
    ///
    /// The default refuses ([`StoreError::Unsupported`]).
    fn rebind<'a>(
        &'a self,
        id: &'a SessionId,
        model: &'a ModelBinding,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        let _ = (id, model);
        Box::pin(async { Err(StoreError::Unsupported("move a chat to another model")) })
    }

    /// Give session `id` a name (`None`, or an empty one, clears it),
    /// durably: kept in its meta ([`SessionMeta::name`]) across restarts.
    /// A session this handle writes is renamed in place and goes on being
    /// written; any other is locked for the change
    /// ([`StoreError::Locked`] while another process writes it). Returns
    /// whether it existed.
    ///
    /// The default refuses ([`StoreError::Unsupported`]).
    fn rename<'a>(
        &'a self,
        id: &'a SessionId,
        name: Option<&'a str>,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        let _ = (id, name);
        Box::pin(async { Err(StoreError::Unsupported("rename a chat")) })
    }

    /// Give back the writer's place (the session is evicted or ended here).
    /// This handle stops writing the session at once; the returned future
    /// completes when another process may take it (dropping it without
    /// awaiting leaves that to the store, as a crash would).
    fn release<'a>(&'a self, id: &'a SessionId) -> BoxFuture<'a, ()>;

    /// The sessions that cannot be read (a bad line, a corrupt header, a
    /// newer format, an empty file), with whatever could be told of them.
    /// A store that cannot be damaged this way has none (the default).
    fn damaged<'a>(&'a self) -> BoxFuture<'a, Result<Vec<DamagedSession>, StoreError>> {
        Box::pin(async { Ok(Vec::new()) })
    }

    /// The most recently changed session with exactly these keys that is
    /// not archived (an archived one has released its keys). A damaged
    /// session with these keys is an error ([`StoreError::Corrupt`] or
    /// [`StoreError::FutureVersion`]), even beside a readable one: never
    /// may a caller start a second chat under keys whose chat it cannot
    /// read.
    fn find<'a>(
        &'a self,
        keys: &'a SessionKeys,
    ) -> BoxFuture<'a, Result<Option<SessionSummary>, StoreError>> {
        Box::pin(async move {
            if let Some(damaged) = self
                .damaged()
                .await?
                .into_iter()
                .find(|d| d.keys.as_ref() == Some(keys))
            {
                return Err(damaged.error);
            }
            let filter = ListFilter::keys(keys);
            Ok(self
                .list(&filter)
                .await?
                .into_iter()
                .find(|s| !s.meta.archived))
        })
    }
}

/// Delete the stored sub-agents of session `parent` (see
/// [`SessionId::sub_agent`]); returns how many there were. Used when the
/// parent is cleared or deleted: a sub-agent's transcript is kept only as
/// long as its parent.
pub async fn delete_sub_agents(
    store: &dyn SessionStore,
    parent: &SessionId,
) -> Result<usize, StoreError> {
    let mut deleted = 0;
    for summary in store.list(&ListFilter::all()).await? {
        if summary.meta.id.parent().as_ref() == Some(parent)
            && store.delete(&summary.meta.id).await?
        {
            deleted += 1;
        }
    }
    Ok(deleted)
}

/// Milliseconds since the Unix epoch.
pub(crate) fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}
