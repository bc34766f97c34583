//! The shared permission settings: in memory until a path is bound, then
//! saved as JSON on every change with an atomic write.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use super::{PermissionSettings, Rule};

/// Reading or writing the settings file failed.
#[derive(Debug, thiserror::Error)]
pub enum PermissionsError {
    /// The file could not be read or written.
    #[error("permission settings {path}: {source}")]
    Io {
        /// The settings file.
        path: PathBuf,
        /// What failed.
        source: std::io::Error,
    },
    /// The file is not valid settings JSON.
    #[error(
        "permission settings {path} are not valid: {message} (expected {{\"mode\": \"ask_all\"|\"auto_read\"|\"auto_safe\"|\"auto_all\", \"rules\": {{\"<tool>\": \"allow\"|\"ask\"|\"block\"}}, \"bulk_limit\": <number>, \"cloud_consent\": [\"<provider>\"]}})"
    )]
    Invalid {
        /// The settings file.
        path: PathBuf,
        /// What the parser said.
        message: String,
    },
}

/// Whether a change reached the disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SaveStatus {
    /// No path is bound: the settings live in memory only.
    NotBound,
    /// Written to the bound path.
    Saved,
    /// Writing failed; the change holds in memory.
    Failed(String),
}

impl SaveStatus {
    /// Whether the settings are on disk.
    pub fn saved(&self) -> bool {
        matches!(self, SaveStatus::Saved)
    }
}

#[derive(Debug, Default)]
struct State {
    settings: PermissionSettings,
    path: Option<PathBuf>,
}

/// Permission settings shared by every session of an app (an "always" answer
/// in one chat holds in all of them).
#[derive(Debug, Default)]
pub struct Permissions {
    state: Mutex<State>,
}

impl Permissions {
    /// Settings kept in memory until [`Permissions::bind`] is called.
    pub fn new(settings: PermissionSettings) -> Self {
        Self {
            state: Mutex::new(State {
                settings,
                path: None,
            }),
        }
    }

    /// Settings bound to `path`: read from it when it exists, otherwise the
    /// defaults, written there.
    pub fn open(path: impl Into<PathBuf>) -> Result<Self, PermissionsError> {
        let store = Self::default();
        store.bind(path)?;
        Ok(store)
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Settings are replaced whole; a poisoned lock holds a consistent value.
        lrg_providers::sync::lock(&self.state)
    }

    /// Bind the settings to a file. When the file exists its settings replace
    /// the ones in memory; otherwise the ones in memory are written to it.
    pub fn bind(&self, path: impl Into<PathBuf>) -> Result<(), PermissionsError> {
        let path = path.into();
        let mut state = self.lock();
        match std::fs::read_to_string(&path) {
            Ok(text) => {
                state.settings =
                    serde_json::from_str(&text).map_err(|e| PermissionsError::Invalid {
                        path: path.clone(),
                        message: e.to_string(),
                    })?;
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                write_atomic(&path, &state.settings)?;
            }
            Err(source) => return Err(PermissionsError::Io { path, source }),
        }
        state.path = Some(path);
        Ok(())
    }

    /// The bound file, if any.
    pub fn path(&self) -> Option<PathBuf> {
        self.lock().path.clone()
    }

    /// The settings now in force.
    pub fn settings(&self) -> PermissionSettings {
        self.lock().settings.clone()
    }

    /// Change the settings and save them when a path is bound.
    pub fn update(&self, change: impl FnOnce(&mut PermissionSettings)) -> SaveStatus {
        let mut state = self.lock();
        change(&mut state.settings);
        match &state.path {
            None => SaveStatus::NotBound,
            Some(path) => match write_atomic(path, &state.settings) {
                Ok(()) => SaveStatus::Saved,
                Err(e) => {
                    tracing::warn!(error = %e, "could not save permission settings");
                    SaveStatus::Failed(e.to_string())
                }
            },
        }
    }

    /// Set (or with `None`, remove) the rule for one tool.
    pub fn set_rule(&self, tool: &str, rule: Option<Rule>) -> SaveStatus {
        self.update(|s| match rule {
            Some(rule) => {
                s.rules.insert(tool.to_string(), rule);
            }
            None => {
                s.rules.remove(tool);
            }
        })
    }
}

/// Write to a temporary file in the same directory, then rename it over the
/// target, so a crash never leaves half a file.
fn write_atomic(path: &Path, settings: &PermissionSettings) -> Result<(), PermissionsError> {
    let io = |source| PermissionsError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut json = serde_json::to_vec_pretty(settings)
        .map_err(|e| io(std::io::Error::other(e.to_string())))?;
    json.push(b'\n');
    crate::atomic_file::write_atomic(path, &json).map_err(io)
}

#[cfg(test)]
mod tests {
    use super::super::Mode;
    use super::*;

    #[test]
    fn in_memory_until_bound_then_saved() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub").join("permissions.json");
        let store = Permissions::default();
        assert_eq!(
            store.set_rule("rm", Some(Rule::Block)),
            SaveStatus::NotBound
        );
        store.bind(&path).unwrap();
        let on_disk: PermissionSettings =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(on_disk.rules["rm"], Rule::Block, "memory written on bind");
        assert_eq!(store.update(|s| s.mode = Mode::AutoAll), SaveStatus::Saved);
        let reopened = Permissions::open(&path).unwrap();
        assert_eq!(reopened.settings().mode, Mode::AutoAll);
        assert_eq!(reopened.settings().rules["rm"], Rule::Block);
        let leftovers: Vec<_> = std::fs::read_dir(path.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(leftovers.len(), 1, "no temp files left: {leftovers:?}");
    }

    #[test]
    fn cloud_consent_round_trips_and_an_older_file_loads() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.json");
        // Written before consent was kept: no `cloud_consent` field.
        std::fs::write(&path, r#"{"mode":"auto_safe","rules":{},"bulk_limit":7}"#).unwrap();
        let store = Permissions::open(&path).unwrap();
        assert_eq!(store.settings().bulk_limit, 7);
        assert!(store.settings().cloud_consent.is_empty());
        let status = store.update(|s| {
            s.cloud_consent.insert("anthropic".into());
        });
        assert_eq!(status, SaveStatus::Saved);
        let reopened = Permissions::open(&path).unwrap().settings();
        assert!(reopened.cloud_consent.contains("anthropic"), "{reopened:?}");
        assert_eq!((reopened.mode, reopened.bulk_limit), (Mode::AutoSafe, 7));
    }

    #[test]
    fn invalid_file_names_the_problem() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.json");
        std::fs::write(&path, r#"{"mode":"auto_read","bulk":3}"#).unwrap();
        let err = Permissions::open(&path).unwrap_err().to_string();
        assert!(
            err.contains("p.json") && err.contains("unknown field `bulk`"),
            "{err}"
        );
    }

    #[test]
    fn failed_save_is_reported_and_kept_in_memory() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.json");
        let store = Permissions::open(&path).unwrap();
        // A directory where the file should be makes the rename fail.
        std::fs::remove_file(&path).unwrap();
        std::fs::create_dir(&path).unwrap();
        std::fs::write(path.join("x"), "keep the dir non-empty").unwrap();
        let status = store.set_rule("t", Some(Rule::Allow));
        assert!(matches!(status, SaveStatus::Failed(_)), "{status:?}");
        assert_eq!(store.settings().rules["t"], Rule::Allow);
    }
}
