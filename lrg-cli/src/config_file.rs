//! lrg's config file: `--config FILE`, else `lrg/config.toml` in the
//! user's config dir (optional), plus `lrg/hooks.json` there in codex's
//! shape. Read once, at start, by every command that runs a session.
//!
//! ```toml
//! project_doc_names = ["AGENTS.md", "CLAUDE.md"]
//!
//! [[hooks.pre_tool_use]]
//! matcher = "delete_*"          # a glob on the tool name; omitted = every tool
//! command = "python3 hooks/guard.py"
//! timeout_s = 10
//! ```
//!
//! Hooks run in the directory lrg was started in. A project's own
//! `.lrg/` holds no hooks: a cloned repository must not run commands on
//! this machine because it was opened.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use lrg_chat::hooks::{HooksConfig, SessionHooks};
use serde::Deserialize;

use crate::exit::CliError;
use crate::usage;

/// What the config file says.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LrgConfig {
    /// The file names read as project instructions (default `["AGENTS.md"]`).
    #[serde(default)]
    pub project_doc_names: Option<Vec<String>>,
    /// Command hooks per event.
    #[serde(default)]
    pub hooks: HooksConfig,
}

static LOADED: OnceLock<LrgConfig> = OnceLock::new();

/// Read the config (`explicit`: `--config`, which must exist) and keep it
/// for [`get`]. Called once by `main`; a second call keeps the first.
pub fn load(explicit: Option<&Path>) -> Result<(), CliError> {
    let config = read(explicit, crate::setup::config_dir().map(|d| d.join("lrg")))?;
    let _ = LOADED.set(config);
    Ok(())
}

/// The config read at start (empty when none was, as in tests of a module).
pub fn get() -> &'static LrgConfig {
    LOADED.get_or_init(LrgConfig::default)
}

/// The configured hooks, ready for a session builder; they run in the
/// current directory.
pub fn hooks() -> Result<Vec<Arc<dyn SessionHooks>>, CliError> {
    hooks_in(std::env::current_dir().ok().as_deref())
}

/// The configured hooks, run in `dir` (an ACP session's own directory).
pub fn hooks_in(dir: Option<&Path>) -> Result<Vec<Arc<dyn SessionHooks>>, CliError> {
    get()
        .hooks
        .clone()
        .into_hooks(dir)
        .map_err(|e| usage!("the config file's hooks: {e}"))
}

fn read(explicit: Option<&Path>, dir: Option<PathBuf>) -> Result<LrgConfig, CliError> {
    let mut config = match explicit {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| usage!("--config {}: {e}", path.display()))?;
            parse(&text, path)?
        }
        None => match dir.as_ref().map(|d| d.join("config.toml")) {
            Some(path) if path.exists() => {
                let text = std::fs::read_to_string(&path)
                    .map_err(|e| usage!("{}: {e}", path.display()))?;
                parse(&text, &path)?
            }
            _ => LrgConfig::default(),
        },
    };
    if let Some(path) = dir.map(|d| d.join("hooks.json"))
        && path.exists()
    {
        let text = std::fs::read_to_string(&path).map_err(|e| usage!("{}: {e}", path.display()))?;
        let hooks = HooksConfig::from_codex_json(&text, &path).map_err(|e| usage!("{e}"))?;
        config.hooks.extend(hooks);
    }
    // Checked now, so a bad matcher or timeout is a usage error at start
    // rather than at the first message.
    config
        .hooks
        .clone()
        .into_hooks(None)
        .map_err(|e| usage!("the config file's hooks: {e}"))?;
    Ok(config)
}

fn parse(text: &str, path: &Path) -> Result<LrgConfig, CliError> {
    toml::from_str(text).map_err(|e| usage!("{}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_documented_shape_and_hooks_json() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("config.toml");
        std::fs::write(
            &file,
            "project_doc_names = [\"AGENTS.md\", \"CLAUDE.md\"]\n\n\
             [[hooks.pre_tool_use]]\nmatcher = \"delete_*\"\ncommand = \"python3 hooks/guard.py\"\ntimeout_s = 10\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("hooks.json"),
            r#"{"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "check"}]}]}}"#,
        )
        .unwrap();
        let config = read(None, Some(dir.path().to_path_buf())).unwrap();
        assert_eq!(
            config.project_doc_names.as_deref(),
            Some(&["AGENTS.md".to_owned(), "CLAUDE.md".to_owned()][..])
        );
        assert_eq!(
            config.hooks.pre_tool_use[0].matcher.as_deref(),
            Some("delete_*")
        );
        assert_eq!(config.hooks.pre_tool_use[0].timeout_s, Some(10.0));
        assert_eq!(config.hooks.stop[0].command, "check");
    }

    #[test]
    fn bad_files_name_the_file_and_what_is_wrong() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("lrg.toml");
        std::fs::write(&file, "[[hooks.pre_tool_use]]\ncomand = \"x\"\n").unwrap();
        let error = read(Some(&file), None).unwrap_err().to_string();
        assert!(
            error.contains("lrg.toml") && error.contains("comand"),
            "{error}"
        );
        let error = read(Some(&dir.path().join("missing.toml")), None)
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("--config") && error.contains("missing.toml"),
            "{error}"
        );
        std::fs::write(&file, "[[hooks.stop]]\ncommand = \"x\"\ntimeout_s = 0\n").unwrap();
        let error = read(Some(&file), None).unwrap_err().to_string();
        assert!(error.contains("timeout"), "{error}");
    }
}
