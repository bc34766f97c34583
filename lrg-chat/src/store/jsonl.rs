//! [`JsonlStore`]: one JSON-lines file per session, the embedded default.
//!
//! `<dir>/<id>.jsonl` (a sub-agent's `::` written `.`) holds a header line (`{"lrg_session":1,"id":…}`), then
//! one line per history row (`{"row":{…}}`) and, after each step's rows, the
//! state (`{"state":{…}}`). A step is one `write_all` followed by
//! `sync_data`, so a crash costs at most a torn last line, which a load drops
//! and reports. Rewrites go to a temporary file renamed over the old one.
//!
//! One writer per session: `<dir>/<id>.lock` is held with an advisory lock
//! (`flock`) from create/resume until release. It is a file of its own because
//! a rename replaces the session file, and a lock on a replaced file guards
//! nothing.

use std::collections::HashMap;
use std::fs::{File, OpenOptions, TryLockError};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use lrg_providers::Message;
use serde::{Deserialize, Serialize};
use tokio::sync::Mutex as AsyncMutex;

use super::{
    FORMAT_VERSION, INTERRUPTED_NOTE, ListFilter, SessionId, SessionMeta, SessionState,
    SessionStore, SessionSummary, StoreError, StoredSession, answer_open_calls, relock, trim_start,
};

/// Sessions as JSON-lines files in one directory. See the [module docs](self).
#[derive(Debug)]
pub struct JsonlStore {
    dir: PathBuf,
    /// Sessions this store writes, by id.
    open: Mutex<HashMap<SessionId, Arc<AsyncMutex<Writer>>>>,
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
}

#[derive(Serialize, Deserialize)]
struct Header {
    lrg_session: u32,
    #[serde(flatten)]
    meta: SessionMeta,
}

/// Only the version, read first so a newer file is refused by its version
/// rather than by a field this lrg does not know.
#[derive(Deserialize)]
struct Version {
    lrg_session: u32,
}

#[derive(Serialize)]
#[serde(rename_all = "snake_case")]
enum LineOut<'a> {
    Row(&'a Message),
    State(&'a SessionState),
}

#[derive(Deserialize)]
#[serde(rename_all = "snake_case")]
enum LineIn {
    Row(Message),
    State(SessionState),
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> StoreError + '_ {
    move |source| StoreError::Io {
        path: path.to_path_buf(),
        source,
    }
}

impl JsonlStore {
    /// A store in `dir` (created when the first session is).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self {
            dir: dir.into(),
            open: Mutex::default(),
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
        relock(&self.open)
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
        if relock(&self.open).contains_key(id) {
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
        relock(&self.open).insert(writer.id.clone(), Arc::new(AsyncMutex::new(writer)));
    }
}

/// Run blocking file work off the async threads.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, StoreError> + Send + 'static,
) -> Result<T, StoreError> {
    tokio::task::spawn_blocking(work)
        .await
        .unwrap_or_else(|e| Err(StoreError::Database(format!("store task failed: {e}"))))
}

fn header_line(meta: &SessionMeta) -> Vec<u8> {
    let mut out = serde_json::to_vec(&Header {
        lrg_session: FORMAT_VERSION,
        meta: meta.clone(),
    })
    .unwrap_or_default();
    out.push(b'\n');
    out
}

/// The lines for `rows` then `state`, ready for one `write_all`.
fn step_lines(rows: &[Message], state: &SessionState) -> Result<Vec<u8>, StoreError> {
    let mut out = Vec::new();
    let mut line = |l: LineOut<'_>| -> Result<(), StoreError> {
        serde_json::to_writer(&mut out, &l)
            .map_err(|e| StoreError::Database(format!("cannot encode a row: {e}")))?;
        out.push(b'\n');
        Ok(())
    };
    for row in rows {
        line(LineOut::Row(row))?;
    }
    line(LineOut::State(state))?;
    Ok(out)
}

fn sync_dir(dir: &Path) {
    // Makes a create or rename durable; not supported everywhere (Windows),
    // where the rename itself is what there is.
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
}

/// Write `meta`, `rows` and `state` to a temporary file and rename it over
/// `path`; returns the file reopened for appending.
fn write_whole(
    path: &Path,
    meta: &SessionMeta,
    rows: &[Message],
    state: &SessionState,
) -> Result<File, StoreError> {
    let mut bytes = header_line(meta);
    bytes.extend(step_lines(rows, state)?);
    let tmp = path.with_extension("jsonl.tmp");
    let mut file = File::create(&tmp).map_err(io(&tmp))?;
    file.write_all(&bytes).map_err(io(&tmp))?;
    file.sync_data().map_err(io(&tmp))?;
    drop(file);
    std::fs::rename(&tmp, path).map_err(io(path))?;
    if let Some(dir) = path.parent() {
        sync_dir(dir);
    }
    OpenOptions::new().append(true).open(path).map_err(io(path))
}

/// Read and check a session file. A torn last line (no newline at its end:
/// a write cut short) is dropped with a warning; anything else that does not
/// parse is an error naming the file and line.
fn read_file(path: &Path, id: &SessionId) -> Result<StoredSession, StoreError> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(StoreError::NotFound(id.clone()));
        }
        Err(e) => return Err(io(path)(e)),
    };
    parse(path, &bytes, Some(id))
}

fn corrupt(path: &Path, line: usize, reason: impl Into<String>) -> StoreError {
    StoreError::Corrupt {
        file: path.to_path_buf(),
        line,
        reason: reason.into(),
    }
}

fn parse_header(path: &Path, line: &[u8]) -> Result<SessionMeta, StoreError> {
    let version: Version = serde_json::from_slice(line)
        .map_err(|e| corrupt(path, 1, format!("not an lrg session header ({e})")))?;
    if version.lrg_session > FORMAT_VERSION {
        return Err(StoreError::FutureVersion {
            file: path.to_path_buf(),
            found: version.lrg_session,
        });
    }
    let header: Header = serde_json::from_slice(line)
        .map_err(|e| corrupt(path, 1, format!("bad session header ({e})")))?;
    Ok(header.meta)
}

fn parse(path: &Path, bytes: &[u8], id: Option<&SessionId>) -> Result<StoredSession, StoreError> {
    let Some(header_end) = bytes.iter().position(|&b| b == b'\n') else {
        return Err(corrupt(
            path,
            1,
            "truncated header (the file ends before its first line does)",
        ));
    };
    let meta = parse_header(path, &bytes[..header_end])?;
    if let Some(id) = id
        && meta.id != *id
    {
        return Err(corrupt(
            path,
            1,
            format!("the header names session `{}`", meta.id),
        ));
    }
    let mut rows = Vec::new();
    let mut state = SessionState {
        updated_ms: meta.created_ms,
        ..SessionState::default()
    };
    let mut warnings = Vec::new();
    // Rows only count once their step's state line follows: a step cut
    // short keeps the rows that made it (each is whole), which is the most
    // a crash can leave.
    let mut rest = &bytes[header_end + 1..];
    let mut number = 1;
    while !rest.is_empty() {
        number += 1;
        let (line, torn) = match rest.iter().position(|&b| b == b'\n') {
            Some(end) => {
                let line = &rest[..end];
                rest = &rest[end + 1..];
                (line, false)
            }
            None => {
                let line = rest;
                rest = &[];
                (line, true)
            }
        };
        if torn || line.iter().all(|&b| b == 0) {
            warnings.push(format!(
                "{}:{number}: dropped a torn last line ({} bytes): a write was cut short, \
                 so the last step in flight was lost",
                path.display(),
                line.len()
            ));
            break;
        }
        match serde_json::from_slice::<LineIn>(line) {
            Ok(LineIn::Row(row)) => rows.push(row),
            Ok(LineIn::State(s)) => state = s,
            Err(e) => return Err(corrupt(path, number, format!("unreadable line ({e})"))),
        }
    }
    let answered = answer_open_calls(&mut rows, INTERRUPTED_NOTE);
    if answered > 0 {
        warnings.push(format!(
            "{answered} tool call(s) had no result (the session ended while they ran); \
             they are recorded as not finished"
        ));
    }
    Ok(StoredSession {
        meta,
        state,
        rows,
        warnings,
    })
}

/// The summary of one file, read without checking every row.
fn summarize(path: &Path) -> Result<SessionSummary, StoreError> {
    let bytes = std::fs::read(path).map_err(io(path))?;
    let Some(header_end) = bytes.iter().position(|&b| b == b'\n') else {
        return Err(corrupt(path, 1, "truncated header"));
    };
    let meta = parse_header(path, &bytes[..header_end])?;
    let body = &bytes[header_end + 1..];
    let mut rows = 0;
    let mut updated_ms = meta.created_ms;
    for line in body.split(|&b| b == b'\n') {
        if line.starts_with(b"{\"row\"") {
            rows += 1;
        } else if line.starts_with(b"{\"state\"")
            && let Ok(LineIn::State(s)) = serde_json::from_slice(line)
        {
            updated_ms = s.updated_ms;
        }
    }
    Ok(SessionSummary {
        meta,
        rows,
        updated_ms,
    })
}

impl SessionStore for JsonlStore {
    fn create<'a>(&'a self, meta: &'a SessionMeta) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            let (lock, lock_path) = self.take_lock(&meta.id)?;
            let path = self.path_of(&meta.id);
            let id = meta.id.clone();
            let header = header_line(meta);
            let dir = self.dir.clone();
            let writer = blocking(move || {
                let mut file = match OpenOptions::new().append(true).create_new(true).open(&path) {
                    Ok(f) => f,
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                        return Err(StoreError::Exists(id));
                    }
                    Err(e) => return Err(io(&path)(e)),
                };
                file.write_all(&header).map_err(io(&path))?;
                file.sync_data().map_err(io(&path))?;
                sync_dir(&dir);
                Ok(Writer {
                    id,
                    path,
                    file: Some(file),
                    lock,
                    lock_path,
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
                let start = trim_start(&stored.rows, max_rows);
                if start > 0 {
                    stored.rows.drain(..start);
                }
                let file = write_whole(&path, &stored.meta, &stored.rows, &stored.state)?;
                let writer = Writer {
                    id,
                    path,
                    file: Some(file),
                    lock,
                    lock_path,
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
            let bytes = step_lines(rows, state)?;
            blocking(move || {
                let writer = writer;
                let Some(mut file) = writer.file.as_ref() else {
                    return Err(StoreError::NotOpen(writer.id.clone()));
                };
                file.write_all(&bytes).map_err(io(&writer.path))?;
                file.sync_data().map_err(io(&writer.path))
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
            let dir = self.dir.clone();
            let filter = filter.clone();
            blocking(move || {
                let entries = match std::fs::read_dir(&dir) {
                    Ok(e) => e,
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
                    Err(e) => return Err(io(&dir)(e)),
                };
                let mut out = Vec::new();
                for entry in entries.flatten() {
                    let path = entry.path();
                    if path.extension().and_then(|e| e.to_str()) != Some("jsonl") {
                        continue;
                    }
                    match summarize(&path) {
                        Ok(s) if filter.matches(&s.meta) => out.push(s),
                        Ok(_) => {}
                        Err(e) => tracing::warn!("skipping a session file: {e}"),
                    }
                }
                out.sort_by(|a, b| {
                    b.updated_ms
                        .cmp(&a.updated_ms)
                        .then_with(|| a.meta.id.cmp(&b.meta.id))
                });
                Ok(out)
            })
            .await
        })
    }

    fn delete<'a>(&'a self, id: &'a SessionId) -> BoxFuture<'a, Result<bool, StoreError>> {
        Box::pin(async move {
            let open = relock(&self.open).get(id).cloned();
            if let Some(writer) = open {
                let mut writer = writer.lock_owned().await;
                let existed = blocking(move || {
                    // Under the writer's lock: an append queued behind this
                    // finds no file and fails, never recreating the session.
                    writer.file = None;
                    let existed = remove(&writer.path)?;
                    remove(&writer.lock_path)?;
                    let _ = writer.lock.unlock();
                    Ok(existed)
                })
                .await?;
                relock(&self.open).remove(id);
                return Ok(existed);
            }
            let path = self.path_of(id);
            if !path.exists() {
                return Ok(false);
            }
            let (lock, lock_path) = self.take_lock(id)?;
            blocking(move || {
                let existed = remove(&path)?;
                remove(&lock_path)?;
                drop(lock);
                Ok(existed)
            })
            .await
        })
    }

    fn release<'a>(&'a self, id: &'a SessionId) -> BoxFuture<'a, ()> {
        // Dropping the writer closes the lock file, which frees the lock.
        relock(&self.open).remove(id);
        Box::pin(async {})
    }
}

fn remove(path: &Path) -> Result<bool, StoreError> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(io(path)(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_torn_last_line_is_dropped_and_said() {
        let meta = SessionMeta::new(super::super::ModelBinding::new("p:m"));
        let mut bytes = header_line(&meta);
        bytes.extend(step_lines(&[Message::user("hi")], &SessionState::default()).unwrap());
        bytes.extend_from_slice(b"{\"row\":{\"role\":\"assi");
        let s = parse(Path::new("x.jsonl"), &bytes, Some(&meta.id)).unwrap();
        assert_eq!(s.rows, vec![Message::user("hi")]);
        assert_eq!(s.warnings.len(), 1);
        assert!(s.warnings[0].starts_with("x.jsonl:4: dropped a torn last line"));
    }
}
