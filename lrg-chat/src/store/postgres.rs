//! [`PgStore`]: sessions in PostgreSQL, so they can move between nodes
//! behind a load balancer.
//!
//! Two tables, created by an embedded migration on first use:
//! `lrg_sessions` (one row per session: its meta and state as JSON, its keys
//! as columns with an index on `(owner, client_key, context_key)`) and
//! `lrg_session_rows` (one row per history row, numbered). An append is one
//! transaction. One writer per session: a session-level advisory lock held
//! on this store's connection from create/resume until release; the server
//! frees it when the connection ends, so a crashed node leaves no stale lock.
//!
//! A resume bounded below the history's length moves the older rows to
//! `lrg_session_archive` (never deletes them); a session that cannot be
//! read (a newer format, an unreadable meta) is listed by
//! [`SessionStore::damaged`] with the keys its columns hold, so it is never
//! replaced by a second chat under them.
//!
//! An archived session ([`SessionStore::archive`]) keeps its rows and its
//! key columns, and has `archived` set (in its meta and in a column of its
//! own): keyed lookups pass it by.
//!
//! One connection per store, used by one operation at a time.

mod meta;

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use lrg_providers::Message;
use lrg_providers::sync::lock;
use tokio::sync::{Mutex as AsyncMutex, MutexGuard as AsyncGuard, OnceCell};
use tokio_postgres::{Client, NoTls};

use super::{
    DamagedSession, FORMAT_VERSION, ListFilter, ModelBinding, SessionId, SessionKeys, SessionMeta,
    SessionState, SessionStore, SessionSummary, StoreError, StoredSession, loaded, trim_start,
};

const MIGRATION: &str = "
BEGIN;
SELECT pg_advisory_xact_lock(7261500000);
CREATE TABLE IF NOT EXISTS lrg_sessions (
    id          TEXT PRIMARY KEY,
    version     INTEGER NOT NULL,
    owner       TEXT,
    client_key  TEXT,
    context_key TEXT,
    meta        TEXT NOT NULL,
    state       TEXT NOT NULL,
    rows        BIGINT NOT NULL DEFAULT 0,
    updated_ms  BIGINT NOT NULL
);
ALTER TABLE lrg_sessions ADD COLUMN IF NOT EXISTS archived BOOLEAN NOT NULL DEFAULT false;
CREATE INDEX IF NOT EXISTS lrg_sessions_keys ON lrg_sessions (owner, client_key, context_key);
CREATE TABLE IF NOT EXISTS lrg_session_rows (
    session_id TEXT NOT NULL REFERENCES lrg_sessions (id) ON DELETE CASCADE,
    n          BIGINT NOT NULL,
    row        TEXT NOT NULL,
    PRIMARY KEY (session_id, n)
);
CREATE TABLE IF NOT EXISTS lrg_session_archive (
    session_id TEXT NOT NULL REFERENCES lrg_sessions (id) ON DELETE CASCADE,
    n          BIGINT NOT NULL,
    row        TEXT NOT NULL,
    PRIMARY KEY (session_id, n)
);
COMMIT;
";

/// Sessions in PostgreSQL, for sessions that move between nodes behind a load
/// balancer: a history row per table row, one transaction per append, and a
/// session-level advisory lock so one node at a time writes a session (freed
/// by the server when a crashed node's connection ends). Older rows cut off
/// by a bounded resume are archived, never deleted.
pub struct PgStore {
    config: tokio_postgres::Config,
    client: OnceCell<Arc<AsyncMutex<Client>>>,
    /// Sessions this store writes (holds the advisory lock of).
    open: Mutex<HashSet<SessionId>>,
}

impl std::fmt::Debug for PgStore {
    // Never the connection string: it may hold a password.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStore")
            .field("dbname", &self.config.get_dbname())
            .finish_non_exhaustive()
    }
}

fn db(e: tokio_postgres::Error) -> StoreError {
    StoreError::Database(e.to_string())
}

fn json_err(e: serde_json::Error) -> StoreError {
    StoreError::Database(format!("cannot encode a row: {e}"))
}

/// Where a bad row is, for errors (there is no file).
fn place(id: &SessionId) -> PathBuf {
    PathBuf::from(format!("postgres:lrg_sessions/{id}"))
}

fn lock_name(id: &SessionId) -> PathBuf {
    PathBuf::from(format!("postgres advisory lock of session {id}"))
}

const TRY_LOCK: &str = "SELECT pg_try_advisory_lock(hashtextextended($1, 7261))";
const UNLOCK: &str = "SELECT pg_advisory_unlock(hashtextextended($1, 7261))";

impl PgStore {
    /// A store on the database `url` names (`postgres://user@host/db`, or
    /// `host=/run/postgresql dbname=lrg`). It connects, and creates its
    /// tables, on first use.
    pub fn new(url: &str) -> Result<Self, StoreError> {
        let config: tokio_postgres::Config = url
            .parse()
            .map_err(|e| StoreError::Database(format!("bad connection string: {e}")))?;
        Ok(Self {
            config,
            client: OnceCell::new(),
            open: Mutex::default(),
        })
    }

    /// A store on `url`, connected now (so a wrong address fails here).
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        let store = Self::new(url)?;
        store.shared().await?;
        Ok(store)
    }

    async fn shared(&self) -> Result<Arc<AsyncMutex<Client>>, StoreError> {
        self.client
            .get_or_try_init(|| async {
                let (client, connection) = self.config.connect(NoTls).await.map_err(db)?;
                tokio::spawn(async move {
                    if let Err(e) = connection.await {
                        tracing::warn!("session database connection ended: {e}");
                    }
                });
                client.batch_execute(MIGRATION).await.map_err(db)?;
                Ok(Arc::new(AsyncMutex::new(client)))
            })
            .await
            .cloned()
    }

    async fn client(&self) -> Result<AsyncGuard<'_, Client>, StoreError> {
        // The guard borrows the Arc kept in the cell, which lives as long
        // as the store.
        let shared = self.shared().await?;
        drop(shared);
        match self.client.get() {
            Some(cell) => Ok(cell.lock().await),
            None => Err(StoreError::Database("not connected".into())),
        }
    }

    fn is_open(&self, id: &SessionId) -> bool {
        lock(&self.open).contains(id)
    }

    async fn take_lock(&self, client: &Client, id: &SessionId) -> Result<(), StoreError> {
        let locked = || StoreError::Locked {
            id: id.clone(),
            lock: lock_name(id),
        };
        if self.is_open(id) {
            return Err(locked());
        }
        let row = client
            .query_one(TRY_LOCK, &[&id.as_str()])
            .await
            .map_err(db)?;
        if row.get::<_, bool>(0) {
            Ok(())
        } else {
            Err(locked())
        }
    }

    async fn unlock(client: &Client, id: &SessionId) {
        if let Err(e) = client.execute(UNLOCK, &[&id.as_str()]).await {
            tracing::warn!("cannot free the lock of session {id}: {e}");
        }
    }
}

async fn read(client: &Client, id: &SessionId) -> Result<StoredSession, StoreError> {
    let Some(head) = client
        .query_opt(
            "SELECT version, meta, state FROM lrg_sessions WHERE id = $1",
            &[&id.as_str()],
        )
        .await
        .map_err(db)?
    else {
        return Err(StoreError::NotFound(id.clone()));
    };
    let version: i32 = head.get(0);
    if version > FORMAT_VERSION as i32 {
        return Err(StoreError::FutureVersion {
            file: place(id),
            found: u32::try_from(version).unwrap_or(u32::MAX),
        });
    }
    let corrupt = |line: usize, what: &str, e: serde_json::Error| StoreError::Corrupt {
        file: place(id),
        line,
        reason: format!("unreadable {what} ({e})"),
    };
    let meta: SessionMeta =
        serde_json::from_str(head.get::<_, &str>(1)).map_err(|e| corrupt(0, "meta", e))?;
    let state: SessionState =
        serde_json::from_str(head.get::<_, &str>(2)).map_err(|e| corrupt(0, "state", e))?;
    let mut rows = Vec::new();
    for row in client
        .query(
            "SELECT n, row FROM lrg_session_rows WHERE session_id = $1 ORDER BY n",
            &[&id.as_str()],
        )
        .await
        .map_err(db)?
    {
        let n: i64 = row.get(0);
        let message: Message = serde_json::from_str(row.get::<_, &str>(1))
            .map_err(|e| corrupt(usize::try_from(n + 1).unwrap_or(0), "row", e))?;
        rows.push(message);
    }
    Ok(loaded(meta, state, rows, Vec::new()))
}

/// Insert `rows` numbered from `first`, and set the state, in `tx`.
async fn put_rows(
    tx: &tokio_postgres::Transaction<'_>,
    id: &SessionId,
    first: i64,
    rows: &[Message],
    state: &SessionState,
) -> Result<(), StoreError> {
    insert_rows(tx, INSERT_ROWS, id, first, rows).await?;
    let state_text = serde_json::to_string(state).map_err(json_err)?;
    let total = first + i64::try_from(rows.len()).unwrap_or(i64::MAX);
    let updated = i64::try_from(state.updated_ms).unwrap_or(i64::MAX);
    tx.execute(
        "UPDATE lrg_sessions SET rows = $2, state = $3, updated_ms = $4 WHERE id = $1",
        &[&id.as_str(), &total, &state_text, &updated],
    )
    .await
    .map_err(db)?;
    Ok(())
}

const INSERT_ROWS: &str = "INSERT INTO lrg_session_rows (session_id, n, row) \
     SELECT $1, $2 + t.i - 1, t.r FROM unnest($3::TEXT[]) WITH ORDINALITY AS t(r, i)";
const INSERT_ARCHIVE: &str = "INSERT INTO lrg_session_archive (session_id, n, row) \
     SELECT $1, $2 + t.i - 1, t.r FROM unnest($3::TEXT[]) WITH ORDINALITY AS t(r, i)";

/// Insert `rows`, numbered from `first`, with one statement (`sql`, one of
/// the two above): a resume that archives thousands of rows makes one round
/// trip, not one per row.
async fn insert_rows(
    tx: &tokio_postgres::Transaction<'_>,
    sql: &str,
    id: &SessionId,
    first: i64,
    rows: &[Message],
) -> Result<(), StoreError> {
    if rows.is_empty() {
        return Ok(());
    }
    let texts = rows
        .iter()
        .map(serde_json::to_string)
        .collect::<Result<Vec<String>, _>>()
        .map_err(json_err)?;
    tx.execute(sql, &[&id.as_str(), &first, &texts])
        .await
        .map_err(db)?;
    Ok(())
}

/// Lock the session's row for this transaction; its row count, or `None`
/// when it was deleted.
async fn lock_row(
    tx: &tokio_postgres::Transaction<'_>,
    id: &SessionId,
) -> Result<Option<i64>, StoreError> {
    Ok(tx
        .query_opt(
            "SELECT rows FROM lrg_sessions WHERE id = $1 FOR UPDATE",
            &[&id.as_str()],
        )
        .await
        .map_err(db)?
        .map(|r| r.get(0)))
}

async fn replace_rows(
    client: &mut Client,
    id: &SessionId,
    rows: &[Message],
    state: &SessionState,
) -> Result<(), StoreError> {
    archive_and_replace(client, id, &[], rows, state).await
}

/// Move `archived` to the archive table, then replace the rows with
/// `rows`, in one transaction.
async fn archive_and_replace(
    client: &mut Client,
    id: &SessionId,
    archived: &[Message],
    rows: &[Message],
    state: &SessionState,
) -> Result<(), StoreError> {
    let tx = client.transaction().await.map_err(db)?;
    if lock_row(&tx, id).await?.is_none() {
        return Err(StoreError::NotOpen(id.clone()));
    }
    if !archived.is_empty() {
        let first: i64 = tx
            .query_one(
                "SELECT COALESCE(MAX(n) + 1, 0) FROM lrg_session_archive WHERE session_id = $1",
                &[&id.as_str()],
            )
            .await
            .map_err(db)?
            .get(0);
        insert_rows(&tx, INSERT_ARCHIVE, id, first, archived).await?;
    }
    tx.execute(
        "DELETE FROM lrg_session_rows WHERE session_id = $1",
        &[&id.as_str()],
    )
    .await
    .map_err(db)?;
    put_rows(&tx, id, 0, rows, state).await?;
    tx.commit().await.map_err(db)
}

impl SessionStore for PgStore {
    fn create<'a>(&'a self, meta: &'a SessionMeta) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            let client = self.client().await?;
            self.take_lock(&client, &meta.id).await?;
            let meta_text = serde_json::to_string(meta).map_err(json_err)?;
            let state = SessionState {
                updated_ms: meta.created_ms,
                ..SessionState::default()
            };
            let state_text = serde_json::to_string(&state).map_err(json_err)?;
            let keys = meta.keys.as_ref();
            let inserted = client
                .execute(
                    "INSERT INTO lrg_sessions \
                     (id, version, owner, client_key, context_key, meta, state, rows, updated_ms) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, 0, $8) ON CONFLICT (id) DO NOTHING",
                    &[
                        &meta.id.as_str(),
                        &(FORMAT_VERSION as i32),
                        &meta.owner,
                        &keys.map(|k| k.client().as_str()),
                        &keys.map(|k| k.context().as_str()),
                        &meta_text,
                        &state_text,
                        &i64::try_from(meta.created_ms).unwrap_or(i64::MAX),
                    ],
                )
                .await
                .map_err(db);
            match inserted {
                Ok(1) => {
                    lock(&self.open).insert(meta.id.clone());
                    Ok(())
                }
                other => {
                    Self::unlock(&client, &meta.id).await;
                    other?;
                    Err(StoreError::Exists(meta.id.clone()))
                }
            }
        })
    }

    fn resume<'a>(
        &'a self,
        id: &'a SessionId,
        max_rows: usize,
    ) -> BoxFuture<'a, Result<StoredSession, StoreError>> {
        Box::pin(async move {
            let mut client = self.client().await?;
            self.take_lock(&client, id).await?;
            let result = async {
                let mut stored = read(&client, id).await?;
                let start = trim_start(&stored.rows, max_rows);
                if start > 0 || !stored.warnings.is_empty() {
                    let archived: Vec<Message> = stored.rows.drain(..start).collect();
                    archive_and_replace(&mut client, id, &archived, &stored.rows, &stored.state)
                        .await?;
                }
                Ok(stored)
            }
            .await;
            match result {
                Ok(stored) => {
                    lock(&self.open).insert(id.clone());
                    Ok(stored)
                }
                Err(e) => {
                    Self::unlock(&client, id).await;
                    Err(e)
                }
            }
        })
    }

    fn append<'a>(
        &'a self,
        id: &'a SessionId,
        rows: &'a [Message],
        state: &'a SessionState,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            let mut client = self.client().await?;
            if !self.is_open(id) {
                return Err(StoreError::NotOpen(id.clone()));
            }
            let tx = client.transaction().await.map_err(db)?;
            let Some(count) = lock_row(&tx, id).await? else {
                return Err(StoreError::NotOpen(id.clone()));
            };
            put_rows(&tx, id, count, rows, state).await?;
            tx.commit().await.map_err(db)
        })
    }

    fn rewrite<'a>(
        &'a self,
        id: &'a SessionId,
        rows: &'a [Message],
        state: &'a SessionState,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            let mut client = self.client().await?;
            if !self.is_open(id) {
                return Err(StoreError::NotOpen(id.clone()));
            }
            replace_rows(&mut client, id, rows, state).await
        })
    }

    fn load<'a>(&'a self, id: &'a SessionId) -> BoxFuture<'a, Result<StoredSession, StoreError>> {
        Box::pin(async move {
            let client = self.client().await?;
            read(&client, id).await
        })
    }

    fn list<'a>(
        &'a self,
        filter: &'a ListFilter,
    ) -> BoxFuture<'a, Result<Vec<SessionSummary>, StoreError>> {
        Box::pin(async move {
            let client = self.client().await?;
            let rows = client
                .query(
                    // The first user row too: a chat list's title.
                    "SELECT s.meta, s.rows, s.updated_ms, s.version, \
                       (SELECT r.row FROM lrg_session_rows r WHERE r.session_id = s.id \
                          AND r.row LIKE '{\"role\":\"user\"%' ORDER BY r.n LIMIT 1) \
                     FROM lrg_sessions s \
                     WHERE ($1::TEXT IS NULL OR s.owner = $1) \
                       AND ($2::TEXT IS NULL OR s.client_key = $2) \
                       AND ($3::TEXT IS NULL OR s.context_key = $3) \
                     ORDER BY s.updated_ms DESC, s.id",
                    &[&filter.owner, &filter.client_key, &filter.context_key],
                )
                .await
                .map_err(db)?;
            let mut out = Vec::new();
            for row in rows {
                if row.get::<_, i32>(3) > FORMAT_VERSION as i32 {
                    continue;
                }
                match serde_json::from_str::<SessionMeta>(row.get::<_, &str>(0)) {
                    Ok(meta) => out.push(SessionSummary {
                        meta,
                        rows: usize::try_from(row.get::<_, i64>(1)).unwrap_or(0),
                        updated_ms: u64::try_from(row.get::<_, i64>(2)).unwrap_or(0),
                        first_message: row
                            .get::<_, Option<&str>>(4)
                            .and_then(|r| serde_json::from_str::<Message>(r).ok())
                            .and_then(|m| super::first_message(std::slice::from_ref(&m))),
                    }),
                    Err(e) => tracing::warn!("skipping an unreadable session: {e}"),
                }
            }
            Ok(out)
        })
    }

    fn damaged<'a>(&'a self) -> BoxFuture<'a, Result<Vec<DamagedSession>, StoreError>> {
        Box::pin(async move { self.damaged_with(None).await })
    }

    fn find<'a>(
        &'a self,
        keys: &'a SessionKeys,
    ) -> BoxFuture<'a, Result<Option<SessionSummary>, StoreError>> {
        Box::pin(async move {
            // By the keys' index, not a scan of every session.
            if let Some(d) = self.damaged_with(Some(keys)).await?.into_iter().next() {
                return Err(d.error);
            }
            Ok(self
                .list(&ListFilter::keys(keys))
                .await?
                .into_iter()
                .find(|s| !s.meta.archived))
        })
    }

    fn delete<'a>(&'a self, id: &'a SessionId) -> BoxFuture<'a, Result<bool, StoreError>> {
        Box::pin(async move {
            let client = self.client().await?;
            // Ours: stop writing first, so no append queued behind this one
            // brings it back. Not ours: it must not be anyone's.
            let ours = lock(&self.open).remove(id);
            if !ours {
                self.take_lock(&client, id).await?;
            }
            let deleted = client
                .execute("DELETE FROM lrg_sessions WHERE id = $1", &[&id.as_str()])
                .await
                .map_err(db);
            Self::unlock(&client, id).await;
            Ok(deleted? > 0)
        })
    }

    fn archive<'a>(&'a self, id: &'a SessionId) -> BoxFuture<'a, Result<bool, StoreError>> {
        Box::pin(async move {
            let mut client = self.client().await?;
            // Ours: archived in place, and it goes on being written. Not
            // ours: it must not be anyone's while it changes.
            let ours = self.is_open(id);
            if !ours {
                self.take_lock(&client, id).await?;
            }
            let archived = meta::update_meta(&mut client, id, |m| m.archived = true).await;
            if !ours {
                Self::unlock(&client, id).await;
            }
            Ok(archived?.is_some())
        })
    }

    fn rebind<'a>(
        &'a self,
        id: &'a SessionId,
        model: &'a ModelBinding,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            let mut client = self.client().await?;
            if !self.is_open(id) {
                return Err(StoreError::NotOpen(id.clone()));
            }
            let model = model.clone();
            match meta::update_meta(&mut client, id, |m| m.model = model).await? {
                Some(_) => Ok(()),
                None => Err(StoreError::NotOpen(id.clone())),
            }
        })
    }

    fn rename<'a>(
        &'a self,
        id: &'a SessionId,
        name: Option<&'a str>,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        Box::pin(async move {
            let mut client = self.client().await?;
            // As for archive: ours is renamed in place; not ours must not
            // be anyone's while it changes.
            let ours = self.is_open(id);
            if !ours {
                self.take_lock(&client, id).await?;
            }
            let name = name.filter(|n| !n.is_empty()).map(str::to_string);
            let renamed = meta::update_meta(&mut client, id, |m| m.name = name).await;
            if !ours {
                Self::unlock(&client, id).await;
            }
            Ok(renamed?.is_some())
        })
    }

    fn release<'a>(&'a self, id: &'a SessionId) -> BoxFuture<'a, ()> {
        let ours = lock(&self.open).remove(id);
        let shared = self.client.get().cloned();
        let id = id.clone();
        // Spawned, so the lock is freed even if the future is dropped.
        let unlock = match (ours, shared, tokio::runtime::Handle::try_current()) {
            (true, Some(shared), Ok(runtime)) => Some(runtime.spawn(async move {
                let client = shared.lock().await;
                Self::unlock(&client, &id).await;
            })),
            _ => None,
        };
        Box::pin(async move {
            if let Some(task) = unlock {
                let _ = task.await;
            }
        })
    }
}
