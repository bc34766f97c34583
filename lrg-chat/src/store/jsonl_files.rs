//! The files of a [`JsonlStore`](super::JsonlStore) on disk: whole-file
//! writes (temp + rename), the lock note, the row archives of a bounded
//! resume, and the header rewrite that archives a chat or moves it to
//! another model.

use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::path::{Path, PathBuf};

use lrg_providers::Message;

use super::jsonl_format::{LockNote, header_line, parse, row_lines, salvage, step_lines};
use super::{DamagedSession, SessionId, SessionMeta, SessionState, StoreError, StoredSession};

pub(super) fn io(path: &Path) -> impl FnOnce(std::io::Error) -> StoreError + '_ {
    move |source| StoreError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// What can be told of the damaged file `path`: its id and keys from what
/// is left of its header, else from its lock file's note.
pub(super) fn damage_of(path: &Path, bytes: &[u8], error: StoreError) -> DamagedSession {
    let (mut id, mut keys) = salvage(bytes);
    let stem = path
        .file_stem()
        .and_then(|s| s.to_str())
        .map(|s| s.replace('.', "::"));
    if id.is_none() {
        id = stem.as_deref().and_then(|s| s.parse().ok());
    }
    if keys.is_none()
        && let Some(note) = std::fs::read(path.with_extension("lock"))
            .ok()
            .and_then(|b| LockNote::parse(&b))
        && id.as_ref().is_none_or(|id| *id == note.id)
    {
        id = Some(note.id);
        keys = note.keys;
    }
    DamagedSession {
        file: path.to_path_buf(),
        id,
        keys,
        error,
    }
}

/// Write `note` over the lock file's content, durably.
pub(super) fn write_note(lock: &File, lock_path: &Path, note: &[u8]) -> Result<(), StoreError> {
    let mut f = lock;
    f.set_len(0).map_err(io(lock_path))?;
    std::io::Seek::seek(&mut f, std::io::SeekFrom::Start(0)).map_err(io(lock_path))?;
    f.write_all(note).map_err(io(lock_path))?;
    f.sync_data().map_err(io(lock_path))
}

/// The archives of the session file `path`: `<file>.archive-<n>`, oldest
/// first (a listing skips them: they are not `.jsonl`).
fn archives(path: &Path) -> Vec<(u64, PathBuf)> {
    let (Some(dir), Some(name)) = (path.parent(), path.file_name().and_then(|n| n.to_str())) else {
        return Vec::new();
    };
    let prefix = format!("{name}.archive-");
    let mut out: Vec<(u64, PathBuf)> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let file = e.file_name();
            let n = file.to_str()?.strip_prefix(&prefix)?.parse().ok()?;
            Some((n, e.path()))
        })
        .collect();
    out.sort();
    out
}

/// Move `rows` (the oldest of a session) to a new archive beside `path`:
/// its header, then the rows, written whole (temp + rename) before the
/// session file is rewritten without them.
pub(super) fn archive_rows(
    path: &Path,
    meta: &SessionMeta,
    rows: &[Message],
) -> Result<(), StoreError> {
    let next = archives(path).last().map_or(1, |(n, _)| n + 1);
    let target = PathBuf::from(format!("{}.archive-{next}", path.display()));
    let tmp = PathBuf::from(format!("{}.tmp", target.display()));
    let mut bytes = header_line(meta);
    bytes.extend(row_lines(rows)?);
    let mut file = File::create(&tmp).map_err(io(&tmp))?;
    file.write_all(&bytes).map_err(io(&tmp))?;
    file.sync_data().map_err(io(&tmp))?;
    drop(file);
    std::fs::rename(&tmp, &target).map_err(io(&target))?;
    if let Some(dir) = path.parent() {
        sync_dir(dir);
    }
    Ok(())
}

pub(super) fn remove_archives(path: &Path) -> Result<(), StoreError> {
    for (_, archive) in archives(path) {
        remove(&archive)?;
    }
    Ok(())
}

/// Run blocking file work off the async threads.
pub(super) async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, StoreError> + Send + 'static,
) -> Result<T, StoreError> {
    tokio::task::spawn_blocking(work)
        .await
        .unwrap_or_else(|e| Err(StoreError::Database(format!("store task failed: {e}"))))
}

pub(super) fn sync_dir(dir: &Path) {
    // Makes a create or rename durable; not supported everywhere (Windows),
    // where the rename itself is what there is.
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
}

/// Write `meta`, `rows` and `state` to a temporary file and rename it over
/// `path`; returns the file reopened for appending.
pub(super) fn write_whole(
    path: &Path,
    meta: &SessionMeta,
    rows: &[Message],
    state: &SessionState,
) -> Result<File, StoreError> {
    let mut bytes = header_line(meta);
    bytes.extend(step_lines(rows, state, false)?);
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
pub(super) fn read_file(path: &Path, id: &SessionId) -> Result<StoredSession, StoreError> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(StoreError::NotFound(id.clone()));
        }
        Err(e) => return Err(io(path)(e)),
    };
    parse(path, &bytes, Some(id))
}

pub(super) fn remove(path: &Path) -> Result<bool, StoreError> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(io(path)(e)),
    }
}

/// Change the header of the session file `path` with `change` and write
/// the file again whole (temp + rename), every line after the header kept
/// byte for byte. Returns the header as it is now and the file reopened for
/// appending (a handle opened before the rename would write to the
/// replaced file); `None` for the file when `change` left the header as it
/// was (nothing is written then).
pub(super) fn rewrite_header(
    path: &Path,
    id: &SessionId,
    change: impl FnOnce(&mut SessionMeta),
) -> Result<(SessionMeta, Option<File>), StoreError> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(StoreError::NotFound(id.clone()));
        }
        Err(e) => return Err(io(path)(e)),
    };
    let end = bytes
        .iter()
        .position(|&b| b == b'\n')
        .ok_or_else(|| super::jsonl_format::corrupt(path, 1, "truncated header"))?;
    let mut meta = super::jsonl_format::parse_header(path, &bytes[..end])?;
    if meta.id != *id {
        return Err(super::jsonl_format::corrupt(
            path,
            1,
            format!("the header names session `{}`", meta.id),
        ));
    }
    let before = meta.clone();
    change(&mut meta);
    if meta == before {
        return Ok((meta, None));
    }
    let mut out = header_line(&meta);
    out.extend_from_slice(&bytes[end + 1..]);
    let tmp = path.with_extension("jsonl.tmp");
    let mut file = File::create(&tmp).map_err(io(&tmp))?;
    file.write_all(&out).map_err(io(&tmp))?;
    file.sync_data().map_err(io(&tmp))?;
    drop(file);
    std::fs::rename(&tmp, path).map_err(io(path))?;
    if let Some(dir) = path.parent() {
        sync_dir(dir);
    }
    let file = OpenOptions::new()
        .append(true)
        .open(path)
        .map_err(io(path))?;
    Ok((meta, Some(file)))
}
