//! Files read at every model turn, re-read only when they change: a turn
//! looks at each file's size and modification time, and reads the bytes
//! again only when either differs from the last read.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

/// What identifies one version of a file without reading it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    modified: Option<SystemTime>,
    len: u64,
}

/// The text of files by path, kept with the stamp it was read at.
#[derive(Debug, Default)]
pub(crate) struct FileCache {
    files: Mutex<HashMap<PathBuf, (Stamp, Arc<str>)>>,
}

impl FileCache {
    /// The text of `path`: the kept copy when the file has the same size and
    /// modification time as when it was read, else the file read again
    /// (invalid UTF-8 replaced). `None` when it is not a readable file.
    pub(crate) fn read(&self, path: &Path) -> Option<Arc<str>> {
        let meta = std::fs::metadata(path).ok().filter(|m| m.is_file())?;
        let stamp = Stamp {
            modified: meta.modified().ok(),
            len: meta.len(),
        };
        if let Some((kept, text)) = lrg_providers::sync::lock(&self.files).get(path)
            && *kept == stamp
        {
            return Some(text.clone());
        }
        let bytes = match std::fs::read(path) {
            Ok(bytes) => bytes,
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "cannot read a prompt file");
                return None;
            }
        };
        let text: Arc<str> = String::from_utf8_lossy(&bytes).into();
        lrg_providers::sync::lock(&self.files).insert(path.to_path_buf(), (stamp, text.clone()));
        Some(text)
    }

    /// Forget `path`'s kept copy (after this process wrote it: a write
    /// within the file system's time resolution may keep the same stamp).
    pub(crate) fn forget(&self, path: &Path) {
        lrg_providers::sync::lock(&self.files).remove(path);
    }
}

/// The longest prefix of `text` of at most `max` bytes that ends on a
/// character boundary.
pub(crate) fn cut(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_is_read_again_only_when_its_size_or_time_changed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("AGENTS.md");
        std::fs::write(&path, "aaaa").unwrap();
        let when = std::fs::metadata(&path).unwrap().modified().unwrap();
        let cache = FileCache::default();
        assert_eq!(cache.read(&path).as_deref(), Some("aaaa"));
        // Same size, same time: the kept copy, so the bytes were not read.
        std::fs::write(&path, "bbbb").unwrap();
        let file = std::fs::File::options().write(true).open(&path).unwrap();
        file.set_modified(when).unwrap();
        assert_eq!(cache.read(&path).as_deref(), Some("aaaa"));
        // Another size: read again.
        std::fs::write(&path, "ccccc").unwrap();
        assert_eq!(cache.read(&path).as_deref(), Some("ccccc"));
        std::fs::remove_file(&path).unwrap();
        assert_eq!(cache.read(&path), None);
        assert_eq!(cut("éé", 3), "é");
    }
}
