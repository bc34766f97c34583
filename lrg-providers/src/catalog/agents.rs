//! Common ACP agents, known by command: each is offered as a model
//! (`acp:COMMAND`) when its program is on the search path.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::model_ref::ACP_PREFIX;

/// An ACP agent lrg knows by its command.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct AcpAgentPreset {
    /// Its name for people.
    pub name: &'static str,
    /// The program and its arguments that speak ACP on stdio.
    pub command: &'static [&'static str],
    /// How to install it, for a hint.
    pub install: &'static str,
}

impl AcpAgentPreset {
    /// The model id that runs it: `acp:COMMAND` (its words are plain, so
    /// they need no quoting).
    pub fn model_id(&self) -> String {
        format!("{ACP_PREFIX}{}", self.command.join(" "))
    }

    /// Its command, as [`crate::AcpModelId::command`] spells it.
    pub fn command_line(&self) -> String {
        self.command.join(" ")
    }
}

/// The agents lrg knows, in the order a menu lists them.
pub const ACP_AGENT_PRESETS: &[AcpAgentPreset] = &[
    AcpAgentPreset {
        name: "Claude Code (ACP)",
        command: &["claude-code-acp"],
        install: "npm install -g @zed-industries/claude-code-acp",
    },
    AcpAgentPreset {
        name: "Gemini CLI (ACP)",
        command: &["gemini", "--experimental-acp"],
        install: "npm install -g @google/gemini-cli",
    },
    AcpAgentPreset {
        name: "Codex (ACP)",
        command: &["codex-acp"],
        install: "npm install -g @zed-industries/codex-acp",
    },
];

/// A known agent whose program was found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct FoundAgent {
    /// Which agent.
    pub preset: AcpAgentPreset,
    /// The model id that runs it (`acp:COMMAND`).
    pub id: String,
    /// Where its program is.
    #[serde(skip)]
    pub program: PathBuf,
}

/// The known agents whose program is an executable file in one of the
/// directories of `search_path` (a `PATH` value), in table order.
pub fn agents_on_path(search_path: Option<&OsStr>) -> Vec<FoundAgent> {
    let dirs: Vec<PathBuf> = search_path
        .map(|p| std::env::split_paths(p).collect())
        .unwrap_or_default();
    ACP_AGENT_PRESETS
        .iter()
        .filter_map(|preset| {
            let program = dirs
                .iter()
                .map(|dir| dir.join(preset.command[0]))
                .find(|file| is_executable(file))?;
            Some(FoundAgent {
                preset: *preset,
                id: preset.model_id(),
                program,
            })
        })
        .collect()
}

#[cfg(unix)]
fn is_executable(file: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::metadata(file).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(not(unix))]
fn is_executable(file: &Path) -> bool {
    // Windows finds programs by extension; npm installs `.cmd` shims.
    ["", "exe", "cmd", "bat"].iter().any(|ext| {
        let file = if ext.is_empty() {
            file.to_path_buf()
        } else {
            file.with_extension(ext)
        };
        file.is_file()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake(dir: &Path, name: &str, executable: bool) {
        let file = dir.join(name);
        std::fs::write(&file, "#!/bin/sh\n").unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = if executable { 0o755 } else { 0o644 };
            std::fs::set_permissions(&file, std::fs::Permissions::from_mode(mode)).unwrap();
        }
        #[cfg(not(unix))]
        let _ = executable;
    }

    #[test]
    fn each_known_agent_is_listed_when_its_program_is_on_the_path() {
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        fake(a.path(), "codex-acp", true);
        fake(b.path(), "claude-code-acp", true);
        let path = std::env::join_paths([a.path(), b.path()]).unwrap();
        let found = agents_on_path(Some(&path));
        let ids: Vec<&str> = found.iter().map(|f| f.id.as_str()).collect();
        assert_eq!(ids, ["acp:claude-code-acp", "acp:codex-acp"]);
        assert_eq!(found[0].program, b.path().join("claude-code-acp"));
        assert_eq!(found[1].preset.name, "Codex (ACP)");

        fake(a.path(), "gemini", true);
        let found = agents_on_path(Some(&path));
        assert!(
            found
                .iter()
                .any(|f| f.id == "acp:gemini --experimental-acp"),
            "{found:?}"
        );
    }

    #[cfg(unix)]
    #[test]
    fn a_file_that_is_not_executable_or_no_path_lists_none() {
        let dir = tempfile::tempdir().unwrap();
        fake(dir.path(), "codex-acp", false);
        std::fs::create_dir(dir.path().join("claude-code-acp")).unwrap();
        assert_eq!(agents_on_path(Some(dir.path().as_os_str())), []);
        assert_eq!(agents_on_path(None), []);
    }

    #[test]
    fn the_catalog_looks_on_its_connections_search_path() {
        use crate::catalog::{Connections, ModelCatalog};
        let dir = tempfile::tempdir().unwrap();
        fake(dir.path(), "codex-acp", true);
        let catalog = ModelCatalog::new(Connections::new().with_search_path(dir.path()));
        let ids: Vec<String> = catalog.agents().into_iter().map(|a| a.id).collect();
        assert_eq!(ids, ["acp:codex-acp"]);
        // Connections that read nothing from the environment look nowhere.
        assert_eq!(ModelCatalog::new(Connections::new()).agents(), []);
    }

    #[test]
    fn every_preset_id_parses_back_to_its_command() {
        for preset in ACP_AGENT_PRESETS {
            let id = crate::AcpModelId::parse(&preset.model_id()).unwrap();
            assert_eq!(id.command, preset.command_line());
            assert_eq!(id.model, None);
        }
    }
}
