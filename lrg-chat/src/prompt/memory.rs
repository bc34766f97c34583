//! Memory: a Markdown file of facts the model keeps across chats, one
//! bullet line each (`- fact`). The file's content is a prompt section; the
//! model adds to it with `remember` and takes from it with `forget`.
//!
//! Chats that name the same file share it: each write re-reads the file
//! first, under a lock per path for this process, and replaces it
//! atomically (a temporary file in the same folder, renamed over it), so a
//! crash never leaves half a file and no chat's fact overwrites another's.
//! Lines the person wrote by hand are kept as they are.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex};

use super::cache::{FileCache, cut};

/// The most of the memory file that goes into the prompt (16 KiB).
pub const MAX_MEMORY_BYTES: usize = 16 * 1024;

/// The longest fact `remember` takes, in bytes.
pub const MAX_FACT_BYTES: usize = 1000;

/// A memory file.
#[derive(Debug)]
pub struct MemoryFile {
    path: PathBuf,
    cache: FileCache,
}

/// A write to the memory file failed.
#[derive(Debug, thiserror::Error)]
#[error("cannot write the memory file {}: {source}", path.display())]
pub struct MemoryError {
    path: PathBuf,
    source: std::io::Error,
}

/// One lock per memory file path in this process: writers of one file take
/// turns, whichever chat they are in.
fn lock_for(path: &Path) -> Arc<Mutex<()>> {
    static LOCKS: LazyLock<Mutex<HashMap<PathBuf, Arc<Mutex<()>>>>> = LazyLock::new(Mutex::default);
    lrg_providers::sync::lock(&LOCKS)
        .entry(path.to_path_buf())
        .or_default()
        .clone()
}

impl MemoryFile {
    /// The memory kept in `path` (created on the first `remember`). A
    /// relative path is taken from the current directory now, so a later
    /// change of directory does not move it; its folder's links and `..`
    /// are resolved, so two chats that name one file differently still
    /// share its lock.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        let path = path.into();
        let path = std::path::absolute(&path).unwrap_or(path);
        let path = match (path.parent(), path.file_name()) {
            (Some(dir), Some(name)) => std::fs::canonicalize(dir)
                .map(|dir| dir.join(name))
                .unwrap_or(path),
            _ => path,
        };
        Self {
            path,
            cache: FileCache::default(),
        }
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The file's text now (read again only when it changed), empty when
    /// it does not exist yet.
    pub fn text(&self) -> String {
        self.cache
            .read(&self.path)
            .map(|t| t.to_string())
            .unwrap_or_default()
    }

    /// The prompt section's text: the file's content under a short header,
    /// cut at [`MAX_MEMORY_BYTES`] with a note.
    pub fn section_text(&self) -> String {
        let text = self.text();
        let body = text.trim();
        let header = "Memory: facts kept across chats. Add one with `remember` when the person \
            asks you to remember something or states a lasting preference; remove one with \
            `forget` when it no longer holds.";
        if body.is_empty() {
            return format!("{header}\n\n(Nothing remembered yet.)");
        }
        let kept = cut(body, MAX_MEMORY_BYTES);
        if kept.len() < body.len() {
            format!(
                "{header}\n\n{kept}\n\n[Cut here: the memory file is {} bytes; the first {} are shown.]",
                body.len(),
                kept.len()
            )
        } else {
            format!("{header}\n\n{kept}")
        }
    }

    /// Add `fact` as a bullet line. Returns what the model is told.
    pub fn remember(&self, fact: &str) -> Result<String, String> {
        let fact = one_line(fact);
        if fact.is_empty() {
            return Err("Nothing to remember: `fact` is empty.".to_owned());
        }
        if fact.len() > MAX_FACT_BYTES {
            return Err(format!(
                "The fact is {} bytes; at most {MAX_FACT_BYTES} are kept. Say it more briefly.",
                fact.len()
            ));
        }
        self.change(|text| {
            if text.lines().any(|l| bullet(l) == Some(fact.as_str())) {
                return (None, format!("Already remembered: {fact}"));
            }
            let mut next = text.to_owned();
            if !next.is_empty() && !next.ends_with('\n') {
                next.push('\n');
            }
            next.push_str(&format!("- {fact}\n"));
            (Some(next), format!("Remembered: {fact}"))
        })
    }

    /// Remove the bullet line(s) whose text is `fact`: those that match
    /// exactly, else those that match ignoring case. Returns what the model
    /// is told (also when nothing matched).
    pub fn forget(&self, fact: &str) -> Result<String, String> {
        let fact = one_line(fact);
        if fact.is_empty() {
            return Err("Nothing to forget: `fact` is empty.".to_owned());
        }
        self.change(|text| {
            let exact = |l: &str| bullet(l) == Some(fact.as_str());
            let folded = fact.to_lowercase();
            let loose = |l: &str| bullet(l).is_some_and(|b| b.to_lowercase() == folded);
            let matches: &dyn Fn(&str) -> bool = if text.lines().any(exact) {
                &exact
            } else {
                &loose
            };
            let removed = text.lines().filter(|l| matches(l)).count();
            if removed == 0 {
                return (
                    None,
                    format!("Nothing matched `{fact}`; the memory is unchanged."),
                );
            }
            let mut next: String = text
                .lines()
                .filter(|l| !matches(l))
                .map(|l| format!("{l}\n"))
                .collect();
            if next.trim().is_empty() {
                next.clear();
            }
            let lines = if removed == 1 { "line" } else { "lines" };
            (Some(next), format!("Forgot {removed} {lines}: {fact}"))
        })
    }

    /// Re-read the file under its lock, let `edit` decide the new text
    /// (`None`: unchanged) and the answer, and write it atomically.
    fn change(
        &self,
        edit: impl FnOnce(&str) -> (Option<String>, String),
    ) -> Result<String, String> {
        let lock = lock_for(&self.path);
        let _held = lrg_providers::sync::lock(&lock);
        let text = match std::fs::read(&self.path) {
            Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(e) => {
                return Err(format!(
                    "Cannot read the memory file {}: {e}",
                    self.path.display()
                ));
            }
        };
        let (next, answer) = edit(&text);
        if let Some(next) = next {
            crate::atomic_file::write_atomic(&self.path, next.as_bytes()).map_err(|source| {
                MemoryError {
                    path: self.path.clone(),
                    source,
                }
                .to_string()
            })?;
            self.cache.forget(&self.path);
        }
        Ok(answer)
    }
}

/// The text of a bullet line (`- x`, `* x`), trimmed.
fn bullet(line: &str) -> Option<&str> {
    let line = line.trim();
    line.strip_prefix("- ")
        .or_else(|| line.strip_prefix("* "))
        .map(str::trim)
}

/// `text` on one line: a fact is one bullet.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remember_then_forget_exact_then_loose() {
        let dir = tempfile::tempdir().unwrap();
        let memory = MemoryFile::new(dir.path().join("memory.md"));
        std::fs::write(memory.path(), "# Notes\nhand-written line\n").unwrap();
        assert_eq!(
            memory.remember("Tabs,\n not spaces").unwrap(),
            "Remembered: Tabs, not spaces"
        );
        assert!(
            memory
                .remember("Tabs, not spaces")
                .unwrap()
                .starts_with("Already")
        );
        memory.remember("tabs, NOT spaces").unwrap();
        assert_eq!(
            std::fs::read_to_string(memory.path()).unwrap(),
            "# Notes\nhand-written line\n- Tabs, not spaces\n- tabs, NOT spaces\n"
        );
        // Exact first: only the one line.
        assert_eq!(
            memory.forget("Tabs, not spaces").unwrap(),
            "Forgot 1 line: Tabs, not spaces"
        );
        // Then ignoring case.
        assert!(
            memory
                .forget("TABS, not spaces")
                .unwrap()
                .starts_with("Forgot 1 line")
        );
        assert!(
            memory
                .forget("nothing")
                .unwrap()
                .starts_with("Nothing matched")
        );
        assert_eq!(
            std::fs::read_to_string(memory.path()).unwrap(),
            "# Notes\nhand-written line\n"
        );
    }
}
