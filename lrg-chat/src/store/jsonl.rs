//! [`JsonlStore`]: one JSON-lines file per session, the embedded default.
//!
//! `<dir>/<id>.jsonl` (a sub-agent's `::` written `.`) holds a header line (`{"lrg_session":1,"id":…}`), then
//! one line per history row (`{"row":{…}}`) and, after each step's rows, the
//! state (`{"state":{…}}`). A step is one `write_all` followed by
//! `sync_data`, so a crash costs at most a torn last line, which a load drops
//! and reports. Any other damage — a bad line with rows after it (a NUL
//! line included), a corrupt or emptied header, a newer format — refuses the
//! load and the resume, leaves the file as it is, and lists the session as
//! damaged ([`SessionStore::damaged`]). A new file is written whole (temp +
//! rename), so lrg itself never leaves an empty or half-headed one.
//!
//! One writer per session: `<dir>/<id>.lock` is held with an advisory lock
//! (`flock`) from create/resume until release. It is a file of its own because
//! a rename replaces the session file, and a lock on a replaced file guards
//! nothing. It also holds the session's id and keys (written before the
//! session file), so a session whose file is damaged past reading still
//! names its keys, and no second chat is started under them.
//!
//! A resume keeps every row and rewrites the file only to repair it; with a
//! row bound, the older rows go to `<id>.jsonl.archive-<n>` (a header, then
//! rows) before the file is rewritten without them. A delete removes the
//! archives with the session.
//!
//! Archiving a chat ([`SessionStore::archive`]), naming it
//! ([`SessionStore::rename`]) and moving it to another model
//! ([`SessionStore::rebind`]) rewrite only the header (temp + rename,
//! every other line kept byte for byte); an archived chat's lock note
//! names no keys, so it holds none even when its file is later damaged.

use std::collections::HashMap;
use std::fs::{File, OpenOptions, TryLockError};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use lrg_providers::Message;
use lrg_providers::sync::lock;
use tokio::sync::Mutex as AsyncMutex;

use super::jsonl_files::{
    archive_rows, blocking, damage_of, io, read_file, remove, remove_archives, rewrite_header,
    sync_dir, write_note, write_whole,
};
use super::jsonl_format::{LockNote, header_line, parse_header, step_lines, summarize};
use super::jsonl_index::KeyIndex;
use super::{
    DamagedSession, ListFilter, ModelBinding, SessionId, SessionKeys, SessionMeta, SessionState,
    SessionStore, SessionSummary, StoreError, StoredSession, trim_start,
};

/// Sessions as JSON-lines files in one directory: `<dir>/<id>.jsonl`, a
/// header line, then one line per history row and a state line after each
/// step, appended and `sync_data`'d; only a torn last line is ever dropped
/// on load (see [`crate::store`]).
#[derive(Debug)]
pub struct JsonlStore {
    dir: PathBuf,
    /// Sessions this store writes, by id.
    open: Mutex<HashMap<SessionId, Arc<AsyncMutex<Writer>>>>,
    /// Which file holds which keys, for keyed lookups (see
    /// [`KeyIndex`] on what may be stale and why that is safe).
    index: Arc<Mutex<KeyIndex>>,
}

#[derive(Debug)]
struct Writer {
    id: SessionId,
    path: PathBuf,
    /// The session file opened for appending; `None` once deleted.
    file: Option<File>,
    /// Holds the advisory lock while open.
    lock: File,
    lock_path: PathBuf,
    /// The setup the file holds (in an earlier state line): a state with
    /// the same one leaves it out (see [`super::ChatSetup`]).
    setup: Option<Arc<super::ChatSetup>>,
}

impl JsonlStore {
    /// A store in `dir` (created when the first session is).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self {
            dir: dir.into(),
            open: Mutex::default(),
            index: Arc::default(),
        }
    }

    /// The default directory: `$XDG_DATA_HOME/lrg/sessions`, else
    /// `~/.local/share/lrg/sessions`; `None` without either variable.
    pub fn default_dir() -> Option<PathBuf> {
        let data = std::env::var_os("XDG_DATA_HOME")
            .filter(|d| !d.is_empty())
            .map(PathBuf::from)
            .or_else(|| {
                std::env::var_os("HOME")
                    .filter(|h| !h.is_empty())
                    .map(|h| PathBuf::from(h).join(".local").join("share"))
            })?;
        Some(data.join("lrg").join("sessions"))
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The file that holds session `id`.
    pub fn path_of(&self, id: &SessionId) -> PathBuf {
        self.dir.join(format!("{}.jsonl", id.file_stem()))
    }

    fn lock_path(&self, id: &SessionId) -> PathBuf {
        self.dir.join(format!("{}.lock", id.file_stem()))
    }

    fn writer(&self, id: &SessionId) -> Result<Arc<AsyncMutex<Writer>>, StoreError> {
        lock(&self.open)
            .get(id)
            .cloned()
            .ok_or_else(|| StoreError::NotOpen(id.clone()))
    }

    /// Take the advisory lock of `id` (creating the lock file).
    fn take_lock(&self, id: &SessionId) -> Result<(File, PathBuf), StoreError> {
        let lock_path = self.lock_path(id);
        let locked = || StoreError::Locked {
            id: id.clone(),
            lock: lock_path.clone(),
        };
        if lock(&self.open).contains_key(id) {
            return Err(locked());
        }
        std::fs::create_dir_all(&self.dir).map_err(io(&self.dir))?;
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(io(&lock_path))?;
        match lock.try_lock() {
            Ok(()) => Ok((lock, lock_path)),
            Err(TryLockError::WouldBlock) => Err(locked()),
            Err(TryLockError::Error(e)) => Err(io(&lock_path)(e)),
        }
    }

    fn register(&self, writer: Writer) {
        lock(&self.open).insert(writer.id.clone(), Arc::new(AsyncMutex::new(writer)));
    }

    /// Every session file in the directory: the readable ones, most
    /// recently changed first, and the damaged ones (each logged at error
    /// level: a person has to repair or remove it).
    async fn scan(&self) -> Result<(Vec<SessionSummary>, Vec<DamagedSession>), StoreError> {
        let dir = self.dir.clone();
        blocking(move || {
            let entries = match std::fs::read_dir(&dir) {
                Ok(e) => e,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    return Ok((Vec::new(), Vec::new()));
                }
                Err(e) => return Err(io(&dir)(e)),
            };
            let mut good = Vec::new();
            let mut damaged = Vec::new();
            for entry in entries.flatten() {
                let path = entry.path();
                if path.extension().and_then(|e| e.to_str()) != Some("jsonl") {
                    continue;
                }
                let bytes = match std::fs::read(&path) {
                    Ok(b) => b,
                    // Deleted meanwhile.
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                    Err(e) => {
                        tracing::warn!("skipping a session file: {}", io(&path)(e));
                        continue;
                    }
                };
                match summarize(&path, &bytes) {
                    Ok(s) => good.push(s),
                    Err(error) => {
                        tracing::error!(
                            "a damaged session file, left as it is (its chat cannot be resumed until it \
                             is repaired or removed): {error}"
                        );
                        damaged.push(damage_of(&path, &bytes, error));
                    }
                }
            }
            good.sort_by(|a, b| {
                b.updated_ms
                    .cmp(&a.updated_ms)
                    .then_with(|| a.meta.id.cmp(&b.meta.id))
            });
            Ok((good, damaged))
        })
        .await
    }
}

impl SessionStore for JsonlStore {
    fn create<'a>(&'a self, meta: &'a SessionMeta) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            let (lock, lock_path) = self.take_lock(&meta.id)?;
            let path = self.path_of(&meta.id);
            let id = meta.id.clone();
            let header = header_line(meta);
            let note = LockNote::of(meta).to_bytes();
            let dir = self.dir.clone();
            let writer = blocking(move || {
                // Under the lock no other lrg creates this id; the check
                // keeps an existing session (and its note) as it is.
                if path.exists() {
                    return Err(StoreError::Exists(id));
                }
                // The header goes in whole (temp + rename): a session file
                // never exists empty or half-headed by lrg's doing, so a
                // file that is must be damage.
                let tmp = path.with_extension("jsonl.tmp");
                let write_header = || {
                    let mut file = File::create(&tmp).map_err(io(&tmp))?;
                    file.write_all(&header).map_err(io(&tmp))?;
                    file.sync_data().map_err(io(&tmp))
                };
                // The note is durable before the session file exists: from
                // then on, whatever becomes of that file, its keys are
                // known. Its write and the header's run side by side, so
                // their two syncs cost one wait, not two (a file system
                // commits concurrent syncs together).
                let (noted, written) = std::thread::scope(|scope| {
                    let noting = scope.spawn(|| write_note(&lock, &lock_path, &note));
                    let written = write_header();
                    let noted = noting.join().unwrap_or_else(|_| {
                        Err(StoreError::Database(
                            "the lock note's writer panicked".into(),
                        ))
                    });
                    (noted, written)
                });
                if let Err(e) = noted.and(written) {
                    let _ = std::fs::remove_file(&tmp);
                    return Err(e);
                }
                std::fs::rename(&tmp, &path).map_err(io(&path))?;
                sync_dir(&dir);
                let file = OpenOptions::new()
                    .append(true)
                    .open(&path)
                    .map_err(io(&path))?;
                Ok(Writer {
                    id,
                    path,
                    file: Some(file),
                    lock,
                    lock_path,
                    setup: None,
                })
            })
            .await?;
            self.register(writer);
            Ok(())
        })
    }

    fn resume<'a>(
        &'a self,
        id: &'a SessionId,
        max_rows: usize,
    ) -> BoxFuture<'a, Result<StoredSession, StoreError>> {
        Box::pin(async move {
            let (lock, lock_path) = self.take_lock(id)?;
            let path = self.path_of(id);
            let id = id.clone();
            let (writer, stored) = blocking(move || {
                // On any error the lock file handle drops here: nothing was
                // written, and the lock is free again.
                let mut stored = read_file(&path, &id)?;
                // Sessions from before lock notes get theirs now.
                let note = LockNote::of(&stored.meta).to_bytes();
                let held = std::fs::read(&lock_path).unwrap_or_default();
                if held != note {
                    write_note(&lock, &lock_path, &note)?;
                }
                let start = trim_start(&stored.rows, max_rows);
                if start > 0 {
                    archive_rows(&path, &stored.meta, &stored.rows[..start])?;
                    stored.rows.drain(..start);
                }
                // Rewritten only when something changed: a repair (a torn
                // last line dropped, open calls answered) or a trim.
                let file = if start > 0 || !stored.warnings.is_empty() {
                    write_whole(&path, &stored.meta, &stored.rows, &stored.state)?
                } else {
                    OpenOptions::new()
                        .append(true)
                        .open(&path)
                        .map_err(io(&path))?
                };
                let writer = Writer {
                    id,
                    path,
                    file: Some(file),
                    lock,
                    lock_path,
                    setup: stored.state.setup.clone(),
                };
                Ok((writer, stored))
            })
            .await?;
            self.register(writer);
            Ok(stored)
        })
    }

    fn append<'a>(
        &'a self,
        id: &'a SessionId,
        rows: &'a [Message],
        state: &'a SessionState,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            let writer = self.writer(id)?.lock_owned().await;
            let on_file = match (&state.setup, &writer.setup) {
                (Some(now), Some(kept)) => Arc::ptr_eq(now, kept) || now == kept,
                _ => false,
            };
            let bytes = step_lines(rows, state, on_file)?;
            let written = state.setup.clone().filter(|_| !on_file);
            blocking(move || {
                let mut writer = writer;
                let Some(mut file) = writer.file.as_ref() else {
                    return Err(StoreError::NotOpen(writer.id.clone()));
                };
                file.write_all(&bytes).map_err(io(&writer.path))?;
                file.sync_data().map_err(io(&writer.path))?;
                if written.is_some() {
                    writer.setup = written;
                }
                Ok(())
            })
            .await
        })
    }

    fn rewrite<'a>(
        &'a self,
        id: &'a SessionId,
        rows: &'a [Message],
        state: &'a SessionState,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            let mut writer = self.writer(id)?.lock_owned().await;
            let rows = rows.to_vec();
            let state = state.clone();
            blocking(move || {
                if writer.file.is_none() {
                    return Err(StoreError::NotOpen(writer.id.clone()));
                }
                // The header is the one thing a rewrite keeps.
                let bytes = std::fs::read(&writer.path).map_err(io(&writer.path))?;
                let end = bytes
                    .iter()
                    .position(|&b| b == b'\n')
                    .unwrap_or(bytes.len());
                let meta = parse_header(&writer.path, &bytes[..end])?;
                let file = write_whole(&writer.path, &meta, &rows, &state)?;
                writer.file = Some(file);
                // Written whole: the file holds the state's setup, if any.
                writer.setup = state.setup.clone();
                Ok(())
            })
            .await
        })
    }

    fn load<'a>(&'a self, id: &'a SessionId) -> BoxFuture<'a, Result<StoredSession, StoreError>> {
        Box::pin(async move {
            let path = self.path_of(id);
            let id = id.clone();
            blocking(move || read_file(&path, &id)).await
        })
    }

    fn list<'a>(
        &'a self,
        filter: &'a ListFilter,
    ) -> BoxFuture<'a, Result<Vec<SessionSummary>, StoreError>> {
        Box::pin(async move {
            let (mut good, _) = self.scan().await?;
            good.retain(|s| filter.matches(&s.meta));
            Ok(good)
        })
    }

    fn damaged<'a>(&'a self) -> BoxFuture<'a, Result<Vec<DamagedSession>, StoreError>> {
        Box::pin(async move { Ok(self.scan().await?.1) })
    }

    fn find<'a>(
        &'a self,
        keys: &'a SessionKeys,
    ) -> BoxFuture<'a, Result<Option<SessionSummary>, StoreError>> {
        Box::pin(async move {
            // The directory is listed, but only the files not seen before
            // and those under these keys are read: a keyed open costs the
            // same with 10 sessions as with 10,000.
            let index = self.index.clone();
            let dir = self.dir.clone();
            let keys = keys.clone();
            blocking(move || lock(&index).find(&dir, &keys)).await
        })
    }

    fn delete<'a>(&'a self, id: &'a SessionId) -> BoxFuture<'a, Result<bool, StoreError>> {
        Box::pin(async move {
            let open = lock(&self.open).get(id).cloned();
            if let Some(writer) = open {
                let mut writer = writer.lock_owned().await;
                let existed = blocking(move || {
                    // Under the writer's lock: an append queued behind this
                    // finds no file and fails, never recreating the session.
                    writer.file = None;
                    remove_archives(&writer.path)?;
                    let existed = remove(&writer.path)?;
                    remove(&writer.lock_path)?;
                    let _ = writer.lock.unlock();
                    Ok(existed)
                })
                .await?;
                lock(&self.open).remove(id);
                return Ok(existed);
            }
            let path = self.path_of(id);
            if !path.exists() {
                return Ok(false);
            }
            let (lock, lock_path) = self.take_lock(id)?;
            blocking(move || {
                remove_archives(&path)?;
                let existed = remove(&path)?;
                remove(&lock_path)?;
                drop(lock);
                Ok(existed)
            })
            .await
        })
    }

    fn archive<'a>(&'a self, id: &'a SessionId) -> BoxFuture<'a, Result<bool, StoreError>> {
        Box::pin(async move {
            let archived = |meta: &mut SessionMeta| meta.archived = true;
            let open = lock(&self.open).get(id).cloned();
            if let Some(writer) = open {
                // Written here: archived in place, under the writer's lock,
                // and the session goes on being written.
                let mut writer = writer.lock_owned().await;
                return blocking(move || {
                    if writer.file.is_none() {
                        return Err(StoreError::NotOpen(writer.id.clone()));
                    }
                    let (meta, file) = rewrite_header(&writer.path, &writer.id, archived)?;
                    if let Some(file) = file {
                        writer.file = Some(file);
                        // The keys are released in the note too: a damaged
                        // archived file must not hold them.
                        write_note(
                            &writer.lock,
                            &writer.lock_path,
                            &LockNote::of(&meta).to_bytes(),
                        )?;
                    }
                    Ok(true)
                })
                .await;
            }
            let path = self.path_of(id);
            if !path.exists() {
                return Ok(false);
            }
            let (lock, lock_path) = self.take_lock(id)?;
            let id = id.clone();
            blocking(move || {
                let (meta, file) = match rewrite_header(&path, &id, archived) {
                    Err(StoreError::NotFound(_)) => return Ok(false),
                    other => other?,
                };
                if file.is_some() {
                    write_note(&lock, &lock_path, &LockNote::of(&meta).to_bytes())?;
                }
                drop(lock);
                Ok(true)
            })
            .await
        })
    }

    fn rebind<'a>(
        &'a self,
        id: &'a SessionId,
        model: &'a ModelBinding,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            let mut writer = self.writer(id)?.lock_owned().await;
            let model = model.clone();
            blocking(move || {
                if writer.file.is_none() {
                    return Err(StoreError::NotOpen(writer.id.clone()));
                }
                let (_, file) =
                    rewrite_header(&writer.path, &writer.id, |meta| meta.model = model)?;
                if let Some(file) = file {
                    writer.file = Some(file);
                }
                Ok(())
            })
            .await
        })
    }

    fn rename<'a>(
        &'a self,
        id: &'a SessionId,
        name: Option<&'a str>,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        Box::pin(async move {
            let name = name.filter(|n| !n.is_empty()).map(str::to_string);
            let renamed = move |meta: &mut SessionMeta| meta.name = name;
            let open = lock(&self.open).get(id).cloned();
            if let Some(writer) = open {
                // Written here: renamed in place, under the writer's lock.
                let mut writer = writer.lock_owned().await;
                return blocking(move || {
                    if writer.file.is_none() {
                        return Err(StoreError::NotOpen(writer.id.clone()));
                    }
                    let (_, file) = rewrite_header(&writer.path, &writer.id, renamed)?;
                    if let Some(file) = file {
                        writer.file = Some(file);
                    }
                    Ok(true)
                })
                .await;
            }
            let path = self.path_of(id);
            if !path.exists() {
                return Ok(false);
            }
            let (lock, _) = self.take_lock(id)?;
            let id = id.clone();
            blocking(move || {
                let found = match rewrite_header(&path, &id, renamed) {
                    Err(StoreError::NotFound(_)) => false,
                    other => other.map(|_| true)?,
                };
                drop(lock);
                Ok(found)
            })
            .await
        })
    }

    fn release<'a>(&'a self, id: &'a SessionId) -> BoxFuture<'a, ()> {
        // Dropping the writer closes the lock file, which frees the lock.
        lock(&self.open).remove(id);
        Box::pin(async {})
    }
}
