//! The keys index of a [`JsonlStore`](super::JsonlStore): which session
//! file holds which keys, so a keyed open ([`SessionStore::find`]) reads the
//! one file its keys name rather than every file in the directory.
//!
//! What may be stale, and why it is safe:
//! - **Files.** Each lookup lists the directory (names only) and reads just
//!   the files it has not seen yet; files gone are forgotten. Another
//!   process creating or deleting sessions in the same directory is
//!   therefore seen at once, as a full scan would see it: no second chat is
//!   started under keys another process just used.
//! - **Keys.** A session's keys are in its header, which a rewrite keeps.
//!   The one change lrg makes to them is archiving, which releases them;
//!   a file seen to hold keys is a hit until then, and the files a lookup
//!   hits are read again whole, so their summary is current, an archived
//!   one is no longer a hit (and is indexed as holding no keys), and damage
//!   since (or a file replaced under the same name) is seen there: a
//!   damaged file under the keys refuses the lookup.
//! - **Unreadable files** whose keys nothing tells (neither header nor lock
//!   note) are read again on every lookup: a person may have repaired one.
//!
//! [`SessionStore::find`]: super::SessionStore::find

use std::collections::{HashMap, HashSet};
use std::ffi::OsString;
use std::path::Path;

use super::jsonl_format::summarize;
use super::{SessionKeys, SessionSummary, StoreError};

/// What a session file was seen to hold.
#[derive(Debug, Clone)]
enum Seen {
    /// A session under these keys (readable then, or damaged with the keys
    /// still told by what is left of its header or its lock note).
    Keyed(SessionKeys),
    /// A session without keys.
    Unkeyed,
    /// Damaged, keys unknown: looked at again next time.
    Unknown,
}

/// The index: every `.jsonl` file of the directory, by file name.
#[derive(Debug, Default)]
pub(super) struct KeyIndex {
    files: HashMap<OsString, Seen>,
}

/// What one read of a session file tells.
enum Read {
    Good(SessionSummary),
    Damaged(super::DamagedSession),
    /// Deleted meanwhile, or unreadable (logged).
    Gone,
}

fn read(path: &Path) -> Read {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Read::Gone,
        Err(e) => {
            tracing::warn!(
                "skipping a session file: {}",
                StoreError::Io {
                    path: path.to_path_buf(),
                    source: e,
                }
            );
            return Read::Gone;
        }
    };
    match summarize(path, &bytes) {
        Ok(s) => Read::Good(s),
        Err(error) => Read::Damaged(super::jsonl_files::damage_of(path, &bytes, error)),
    }
}

fn seen_of(read: &Read) -> Option<Seen> {
    match read {
        // An archived session's keys are released: it holds none.
        Read::Good(s) => Some(match s.meta.live_keys() {
            Some(k) => Seen::Keyed(k.clone()),
            None => Seen::Unkeyed,
        }),
        Read::Damaged(d) => Some(match &d.keys {
            Some(k) => Seen::Keyed(k.clone()),
            None => Seen::Unknown,
        }),
        Read::Gone => None,
    }
}

impl KeyIndex {
    /// The readable session under `keys` in `dir` (the most recently
    /// changed, should there be several); a damaged one under them is the
    /// error (logged at error level), even beside a readable one.
    pub(super) fn find(
        &mut self,
        dir: &Path,
        keys: &SessionKeys,
    ) -> Result<Option<SessionSummary>, StoreError> {
        let names = match jsonl_names(dir) {
            Ok(names) => names,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                self.files.clear();
                return Ok(None);
            }
            Err(source) => {
                return Err(StoreError::Io {
                    path: dir.to_path_buf(),
                    source,
                });
            }
        };
        self.files.retain(|name, _| names.contains(name));
        let mut hits = Vec::new();
        for name in names {
            let seen = match self.files.get(&name) {
                Some(seen @ (Seen::Keyed(_) | Seen::Unkeyed)) => seen.clone(),
                // New, or unreadable with no keys known: read it now.
                Some(Seen::Unknown) | None => {
                    let path = dir.join(&name);
                    let read = read(&path);
                    match seen_of(&read) {
                        Some(seen) => {
                            self.files.insert(name.clone(), seen.clone());
                            if matches!(&seen, Seen::Keyed(k) if k == keys) {
                                hits.push((name, Some(read)));
                            }
                        }
                        None => {
                            self.files.remove(&name);
                        }
                    }
                    continue;
                }
            };
            if matches!(&seen, Seen::Keyed(k) if k == keys) {
                hits.push((name, None));
            }
        }
        let mut found: Option<SessionSummary> = None;
        for (name, fresh) in hits {
            // A hit is read whole now (unless it just was): its summary is
            // current, and damage since is seen.
            let read = fresh.unwrap_or_else(|| read(&dir.join(&name)));
            match seen_of(&read) {
                Some(seen) => self.files.insert(name, seen),
                None => self.files.remove(&name),
            };
            match read {
                Read::Good(s) if s.meta.live_keys() == Some(keys) => {
                    let newer = found.as_ref().is_none_or(|f| {
                        (s.updated_ms, std::cmp::Reverse(&s.meta.id))
                            > (f.updated_ms, std::cmp::Reverse(&f.meta.id))
                    });
                    if newer {
                        found = Some(s);
                    }
                }
                Read::Damaged(d) if d.keys.as_ref() == Some(keys) => {
                    tracing::error!(
                        "a damaged session file, left as it is (its chat cannot be resumed until \
                         it is repaired or removed): {}",
                        d.error
                    );
                    return Err(d.error);
                }
                // Replaced under the same name by another chat (now
                // indexed as such), or gone.
                _ => {}
            }
        }
        Ok(found)
    }
}

/// The names of the `.jsonl` files in `dir` (names only: nothing is read).
fn jsonl_names(dir: &Path) -> std::io::Result<HashSet<OsString>> {
    let mut names = HashSet::new();
    for entry in std::fs::read_dir(dir)?.flatten() {
        let name = entry.file_name();
        if Path::new(&name).extension().and_then(|e| e.to_str()) == Some("jsonl") {
            names.insert(name);
        }
    }
    Ok(names)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use crate::store::{JsonlStore, ModelBinding, SessionKeys, SessionMeta, SessionStore};

    fn keyed(context: &str) -> SessionMeta {
        let mut meta = SessionMeta::new(ModelBinding::new("script:model"));
        meta.keys = Some(SessionKeys::new("alice", context).unwrap());
        meta
    }

    /// Two stores on one directory stand for two processes: what one
    /// creates, damages or deletes, the other's index sees at its next
    /// lookup.
    #[tokio::test]
    async fn another_writer_is_seen_at_the_next_lookup() {
        let dir = tempfile::TempDir::new().unwrap();
        let (a, b) = (JsonlStore::new(dir.path()), JsonlStore::new(dir.path()));
        let first = keyed("doc:1");
        let keys = first.keys.clone().unwrap();
        assert!(a.find(&keys).await.unwrap().is_none(), "nothing there yet");
        b.create(&first).await.unwrap();
        b.create(&keyed("doc:2")).await.unwrap();
        let found = a.find(&keys).await.unwrap().expect("b's new chat");
        assert_eq!(found.meta.id, first.id);
        // Its summary is read now, not remembered.
        b.append(
            &first.id,
            &[lrg_providers::Message::user("hi")],
            &Default::default(),
        )
        .await
        .unwrap();
        assert_eq!(a.find(&keys).await.unwrap().unwrap().rows, 1);

        // Damaged behind a's back: refused, never "not found".
        let file = b.path_of(&first.id);
        let mut bytes = std::fs::read(&file).unwrap();
        bytes.extend_from_slice(b"\0\0\n{\"row\":{}}\n");
        std::fs::write(&file, &bytes).unwrap();
        let err = a.find(&keys).await.unwrap_err();
        assert!(err.is_damage(), "{err}");
        // Emptied: the lock note still names the keys.
        std::fs::write(&file, b"").unwrap();
        assert!(a.find(&keys).await.unwrap_err().is_damage());

        // Deleted: gone for a too, and the other chat is still found.
        b.release(&first.id).await;
        std::fs::remove_file(&file).unwrap();
        assert!(a.find(&keys).await.unwrap().is_none());
        let other = SessionKeys::new("alice", "doc:2").unwrap();
        assert!(a.find(&other).await.unwrap().is_some());
    }

    /// A file unreadable with no keys known is looked at again: once a
    /// person repairs it, its chat is found.
    #[tokio::test]
    async fn a_repaired_file_is_found_again() {
        let dir = tempfile::TempDir::new().unwrap();
        let store = JsonlStore::new(dir.path());
        let meta = keyed("doc:1");
        let keys = meta.keys.clone().unwrap();
        store.create(&meta).await.unwrap();
        store.release(&meta.id).await;
        let file = store.path_of(&meta.id);
        let good = std::fs::read(&file).unwrap();
        std::fs::write(&file, b"\0\0\0\n").unwrap();
        std::fs::remove_file(file.with_extension("lock")).unwrap();
        assert!(store.find(&keys).await.unwrap().is_none(), "keys unknown");
        std::fs::write(&file, &good).unwrap();
        let found = store.find(&keys).await.unwrap().expect("repaired");
        assert_eq!(found.meta.id, meta.id);
    }
}
