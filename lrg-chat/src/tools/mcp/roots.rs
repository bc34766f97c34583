//! The roots a tool host offers its MCP servers (`roots/list`): the
//! directories they may work in. Kept on the host, since the servers are
//! its connections; a change is told to every connected server with
//! `notifications/roots/list_changed`.

use std::path::Path;
use std::sync::{Arc, RwLock};

/// One root: a directory a server may work in, as a `file://` URI.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Root {
    /// Its `file://` URI.
    pub uri: String,
    /// What to call it (the directory's own name, by default).
    pub name: Option<String>,
}

impl Root {
    /// The directory `path` (made absolute, links resolved). Fails when it
    /// is not a directory that exists, naming it.
    pub fn dir(path: impl AsRef<Path>) -> Result<Root, String> {
        let path = path.as_ref();
        let full =
            std::fs::canonicalize(path).map_err(|e| format!("root {}: {e}", path.display()))?;
        if !full.is_dir() {
            return Err(format!("root {}: not a directory", path.display()));
        }
        let name = full
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .or_else(|| Some(full.display().to_string()));
        Ok(Root {
            uri: file_uri(&full),
            name,
        })
    }

    /// A root of any URI a server understands, with a name.
    pub fn uri(uri: impl Into<String>, name: Option<String>) -> Root {
        Root {
            uri: uri.into(),
            name,
        }
    }
}

/// `file://` and the path, with what a URI cannot hold percent-encoded.
fn file_uri(path: &Path) -> String {
    let text = path.to_string_lossy().replace('\\', "/");
    let mut uri = String::from("file://");
    if !text.starts_with('/') {
        uri.push('/');
    }
    for b in text.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'/' | b'-' | b'_' | b'.' | b'~' | b':' => {
                uri.push(b as char)
            }
            _ => uri.push_str(&format!("%{b:02X}")),
        }
    }
    uri
}

/// The host's roots, shared by its servers' handlers.
#[derive(Debug, Clone, Default)]
pub(crate) struct Roots(Arc<RwLock<Arc<Vec<Root>>>>);

impl Roots {
    pub(crate) fn get(&self) -> Arc<Vec<Root>> {
        lrg_providers::sync::read(&self.0).clone()
    }

    /// Replace them; whether they changed.
    pub(crate) fn set(&self, roots: Vec<Root>) -> bool {
        let mut current = lrg_providers::sync::write(&self.0);
        if **current == roots {
            return false;
        }
        *current = Arc::new(roots);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_becomes_an_encoded_file_uri() {
        let dir = std::env::temp_dir().join("lrg roots ü");
        std::fs::create_dir_all(&dir).unwrap();
        let root = Root::dir(&dir).unwrap();
        assert!(root.uri.starts_with("file:///"), "{}", root.uri);
        assert!(root.uri.ends_with("/lrg%20roots%20%C3%BC"), "{}", root.uri);
        assert_eq!(root.name.as_deref(), Some("lrg roots ü"));
        let missing = Root::dir(dir.join("missing")).unwrap_err();
        assert!(missing.contains("missing"), "{missing}");
    }
}
