//! Project instructions: the `AGENTS.md` files (or other names) from the
//! working directory up to the repository root.
//!
//! The search starts in the working directory and goes up until a folder
//! that holds `.git` (the repository root, included). Where no `.git` is
//! found on the way up, only the working directory itself is read: a
//! folder outside any repository does not pick up whatever lies above it.
//! Files are given root first, nearest last (the nearer, more specific one
//! is read last), each labelled with its path from the root, under one byte
//! cap for all of them together; what does not fit is cut on a character
//! boundary with a note saying where.

use std::path::{Path, PathBuf};

use super::cache::{FileCache, cut};

/// The byte cap of all project instructions together, by default (32 KiB).
pub const DEFAULT_PROJECT_DOC_MAX_BYTES: usize = 32 * 1024;

/// The file names read by default.
pub const DEFAULT_PROJECT_DOC_NAMES: &[&str] = &["AGENTS.md"];

/// One file of project instructions, as it goes into the prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProjectDoc {
    /// The file.
    pub path: PathBuf,
    /// Its text as the model gets it: a label line with its path, then the
    /// file's text (cut, with a note, when the cap ran out).
    pub text: String,
}

/// Where project instructions are looked for, and how much of them is taken.
#[derive(Debug)]
pub struct ProjectDocs {
    dir: PathBuf,
    names: Vec<String>,
    max_bytes: usize,
    cache: FileCache,
}

impl ProjectDocs {
    /// Instructions for work in `dir`, with the default names and cap.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self {
            dir: dir.into(),
            names: DEFAULT_PROJECT_DOC_NAMES
                .iter()
                .map(|n| (*n).to_owned())
                .collect(),
            max_bytes: DEFAULT_PROJECT_DOC_MAX_BYTES,
            cache: FileCache::default(),
        }
    }

    /// The file names to read in each folder, in this order (default
    /// `["AGENTS.md"]`; `CLAUDE.md` is a common addition). Names with a path
    /// separator, and `.`/`..`, are ignored: each is a name within a folder.
    pub fn names(mut self, names: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.names = names
            .into_iter()
            .map(Into::into)
            .filter(|n| is_plain_name(n))
            .collect();
        self
    }

    /// The byte cap of all files together (default
    /// [`DEFAULT_PROJECT_DOC_MAX_BYTES`]).
    pub fn max_bytes(mut self, max: usize) -> Self {
        self.max_bytes = max;
        self
    }

    /// The working directory the search starts from.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The folders searched, root first: from the repository root (the
    /// nearest folder up that holds `.git`) down to the working directory,
    /// or the working directory alone outside a repository.
    pub fn folders(&self) -> Vec<PathBuf> {
        let start = std::fs::canonicalize(&self.dir).unwrap_or_else(|_| self.dir.clone());
        let mut up = Vec::new();
        let mut at = Some(start.as_path());
        while let Some(dir) = at {
            up.push(dir.to_path_buf());
            if dir.join(".git").exists() {
                up.reverse();
                return up;
            }
            at = dir.parent();
        }
        vec![start]
    }

    /// The files found now, root first, each read (again only when it
    /// changed) and labelled, under the cap.
    pub fn load(&self) -> Vec<ProjectDoc> {
        let folders = self.folders();
        let root = folders.first().cloned().unwrap_or_default();
        let mut left = self.max_bytes;
        let mut docs = Vec::new();
        for folder in &folders {
            for name in &self.names {
                let path = folder.join(name);
                let Some(text) = self.cache.read(&path) else {
                    continue;
                };
                let shown = path.strip_prefix(&root).unwrap_or(&path);
                let label = if docs.is_empty() {
                    format!("Project instructions from {}:\n\n", shown.display())
                } else {
                    format!(
                        "Project instructions from {} (nearer the working directory than those \
                         above: they win where the two disagree):\n\n",
                        shown.display()
                    )
                };
                let body = text.trim_end();
                if left == 0 {
                    docs.push(ProjectDoc {
                        path: path.clone(),
                        text: format!(
                            "{label}[Left out: the project instructions reached their cap of {} bytes before this file.]",
                            self.max_bytes
                        ),
                    });
                    continue;
                }
                let kept = cut(body, left);
                left -= kept.len();
                let text = if kept.len() < body.len() {
                    format!(
                        "{label}{kept}\n\n[Cut here: the project instructions reached their cap of {} bytes; {} of this file's {} bytes are shown.]",
                        self.max_bytes,
                        kept.len(),
                        body.len()
                    )
                } else {
                    format!("{label}{kept}")
                };
                docs.push(ProjectDoc { path, text });
            }
        }
        docs
    }
}

fn is_plain_name(name: &str) -> bool {
    !name.is_empty() && name != "." && name != ".." && !name.contains('/') && !name.contains('\\')
}
