//! The three CLIs as data: what each is called, where it is installed,
//! which environment it gets, and where it sends a conversation.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::child_env::EnvNames;
use crate::text_tools::ToolFormat;

/// Which agent CLI.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CliKind {
    /// Anthropic's Claude Code (`claude`).
    Claude,
    /// OpenAI's Codex CLI (`codex`).
    Codex,
    /// Google's Gemini CLI (`gemini`).
    Gemini,
}

/// Which environment a CLI process gets: the base set every child gets
/// ([`crate::child_env::BASE`]: `PATH`, `HOME`, `USER`, `LANG`, `LC_*`, ...),
/// the proxy and certificate settings ([`crate::child_env::NETWORK`]), and
/// the XDG directories ([`crate::child_env::DIRS`]), and the names its
/// vendor documents for its login and settings. Never the
/// keys of other vendors, nor one of lrg's own tokens
/// ([`crate::child_env::is_lrg_secret`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct EnvPolicy {
    /// The vendor's own names, passed when set.
    pub vendor: EnvNames,
    /// Passed as well, but only while `when` is set (a cloud the CLI was
    /// switched to, e.g. Bedrock's `AWS_*` under `CLAUDE_CODE_USE_BEDROCK`).
    pub switched: &'static [(&'static str, EnvNames)],
}

impl EnvPolicy {
    /// Whether a process under this policy gets `name` (besides the base set).
    pub fn passes(&self, name: &str) -> bool {
        crate::child_env::NETWORK.contains(&name)
            || crate::child_env::DIRS.contains(&name)
            || self.vendor.contains(name)
            || self
                .switched
                .iter()
                .any(|(when, names)| names.contains(name) && crate::child_env::is_set(when))
    }
}

/// What lrg knows about one agent CLI.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct CliSpec {
    /// Provider prefix in model ids (`claude-cli`).
    pub provider: &'static str,
    /// The product's name, for messages.
    pub name: &'static str,
    /// The executable's file name.
    pub program: &'static str,
    /// Env var naming the executable, checked before `PATH`.
    pub path_env: &'static str,
    /// Where installers put it when it is not on `PATH`: absolute, or
    /// relative to the home directory.
    pub install_dirs: &'static [&'static str],
    /// How to install it, for the "not found" message.
    pub install_hint: &'static str,
    /// The vendor's host the CLI sends the conversation to.
    pub sends_to: &'static str,
    /// Model names offered in listings (`default`: the CLI's own choice).
    pub models: &'static [&'static str],
    /// The environment it runs with.
    pub env: EnvPolicy,
    /// How lrg's tools are described in its prompt and its calls read from
    /// its text: the CLI's own tools are off, so these are the only ones.
    pub tool_format: ToolFormat,
}

const COMMON_DIRS: &[&str] = &[
    ".local/bin",
    ".npm-global/bin",
    ".bun/bin",
    ".volta/bin",
    "/usr/local/bin",
    "/opt/homebrew/bin",
];

impl CliKind {
    /// Every agent CLI, in display order.
    pub const ALL: [CliKind; 3] = [CliKind::Claude, CliKind::Codex, CliKind::Gemini];

    /// Its description.
    pub fn spec(self) -> &'static CliSpec {
        match self {
            CliKind::Claude => &CLAUDE,
            CliKind::Codex => &CODEX,
            CliKind::Gemini => &GEMINI,
        }
    }

    /// The kind whose provider prefix is `provider` (`claude-cli`, ...).
    pub fn from_provider(provider: &str) -> Option<CliKind> {
        Self::ALL
            .into_iter()
            .find(|k| k.spec().provider == provider)
    }
}

const CLAUDE: CliSpec = CliSpec {
    provider: "claude-cli",
    name: "Claude Code",
    program: "claude",
    path_env: "CLAUDE_CODE_PATH",
    install_dirs: &[
        ".claude/local",
        ".local/bin",
        ".npm-global/bin",
        ".bun/bin",
        ".volta/bin",
        "/usr/local/bin",
        "/opt/homebrew/bin",
    ],
    install_hint: "install Claude Code (npm install -g @anthropic-ai/claude-code) and log in",
    sends_to: "api.anthropic.com",
    models: &["sonnet", "opus", "haiku"],
    // Its login lives under HOME (~/.claude) or in these, as its docs list
    // them (code.claude.com/docs/en/env-vars); the clouds it can be switched
    // to get their own credentials only when it is.
    env: EnvPolicy {
        vendor: EnvNames {
            names: &["API_TIMEOUT_MS", "DISABLE_TELEMETRY", "DISABLE_AUTOUPDATER"],
            prefixes: &["ANTHROPIC_", "CLAUDE_"],
        },
        switched: &[
            (
                "CLAUDE_CODE_USE_BEDROCK",
                EnvNames {
                    names: &[],
                    prefixes: &["AWS_"],
                },
            ),
            (
                "CLAUDE_CODE_USE_VERTEX",
                EnvNames {
                    names: &[
                        "GOOGLE_APPLICATION_CREDENTIALS",
                        "GOOGLE_CLOUD_PROJECT",
                        "CLOUD_ML_REGION",
                    ],
                    prefixes: &["VERTEX_REGION_", "CLOUDSDK_"],
                },
            ),
        ],
    },
    tool_format: ToolFormat::Hermes,
};

const CODEX: CliSpec = CliSpec {
    provider: "codex-cli",
    name: "Codex CLI",
    program: "codex",
    path_env: "CODEX_CLI_PATH",
    install_dirs: COMMON_DIRS,
    install_hint: "install the Codex CLI (npm install -g @openai/codex) and log in",
    sends_to: "api.openai.com",
    models: &["default", "gpt-5-codex", "gpt-5"],
    // Its login is in CODEX_HOME (~/.codex by default); `codex exec` also
    // takes a key from CODEX_API_KEY (developers.openai.com/codex/environment-variables).
    env: EnvPolicy {
        vendor: EnvNames {
            names: &["OPENAI_API_KEY", "OPENAI_BASE_URL"],
            prefixes: &["CODEX_"],
        },
        switched: &[],
    },
    tool_format: ToolFormat::Hermes,
};

const GEMINI: CliSpec = CliSpec {
    provider: "gemini-cli",
    name: "Gemini CLI",
    program: "gemini",
    path_env: "GEMINI_CLI_PATH",
    install_dirs: COMMON_DIRS,
    install_hint: "install the Gemini CLI (npm install -g @google/gemini-cli) and log in",
    sends_to: "generativelanguage.googleapis.com",
    models: &["default", "gemini-2.5-pro", "gemini-2.5-flash"],
    // Its login is under HOME (~/.gemini) or in GEMINI_API_KEY, and Vertex
    // takes the GOOGLE_ names (geminicli.com/docs/get-started/authentication).
    env: EnvPolicy {
        vendor: EnvNames {
            names: &[],
            prefixes: &["GEMINI_", "GOOGLE_", "CLOUDSDK_"],
        },
        switched: &[],
    },
    tool_format: ToolFormat::Hermes,
};

/// Where `spec`'s executable is: its env var, then `PATH`, then the usual
/// install dirs. The inputs are passed in so that the search is testable
/// without touching the process environment.
pub(crate) fn locate(
    spec: &CliSpec,
    var: Option<OsString>,
    path: Option<OsString>,
    home: Option<PathBuf>,
) -> Option<PathBuf> {
    if let Some(var) = var.filter(|v| !v.is_empty()) {
        // An explicit choice: used or reported missing, never bypassed.
        let file = PathBuf::from(var);
        return is_executable(&file).then_some(file);
    }
    let on_path = path
        .iter()
        .flat_map(std::env::split_paths)
        .map(|dir| dir.join(spec.program));
    let installed = spec.install_dirs.iter().filter_map(|dir| {
        let dir = Path::new(dir);
        if dir.is_absolute() {
            Some(dir.join(spec.program))
        } else {
            home.as_ref().map(|h| h.join(dir).join(spec.program))
        }
    });
    on_path.chain(installed).find(|f| is_executable(f))
}

/// Where `spec`'s executable is on this machine.
pub(crate) fn locate_here(spec: &CliSpec) -> Option<PathBuf> {
    locate(
        spec,
        std::env::var_os(spec.path_env),
        std::env::var_os("PATH"),
        std::env::var_os("HOME").map(PathBuf::from),
    )
}

fn is_executable(file: &Path) -> bool {
    let Ok(meta) = std::fs::metadata(file) else {
        return false;
    };
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        meta.is_file() && meta.permissions().mode() & 0o111 != 0
    }
    #[cfg(not(unix))]
    {
        meta.is_file()
    }
}

/// Why `spec` cannot be used: never a path, only what to do.
pub(crate) fn not_found(spec: &CliSpec) -> String {
    format!(
        "{} (`{}`) not found: {}, or set {} to the executable",
        spec.name, spec.program, spec.install_hint, spec.path_env
    )
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[test]
    fn each_cli_gets_its_own_vendors_names_only() {
        let claude = CliKind::Claude.spec().env;
        let codex = CliKind::Codex.spec().env;
        let gemini = CliKind::Gemini.spec().env;
        assert!(claude.passes("ANTHROPIC_API_KEY") && claude.passes("CLAUDE_CONFIG_DIR"));
        assert!(codex.passes("CODEX_HOME") && codex.passes("OPENAI_API_KEY"));
        assert!(gemini.passes("GEMINI_API_KEY") && gemini.passes("GOOGLE_CLOUD_PROJECT"));
        for policy in [claude, codex, gemini] {
            assert!(policy.passes("HTTPS_PROXY"));
            for foreign in ["GITHUB_TOKEN", "CARGO_MANIFEST_DIR", "XAI_API_KEY"] {
                assert!(!policy.passes(foreign), "{foreign}");
            }
        }
        assert!(!claude.passes("OPENAI_API_KEY") && !codex.passes("ANTHROPIC_API_KEY"));
        assert!(!gemini.passes("OPENAI_API_KEY"));
    }

    #[allow(clippy::unwrap_used)] // a test helper may panic
    fn exe(dir: &Path, name: &str) -> PathBuf {
        use std::os::unix::fs::PermissionsExt as _;
        let file = dir.join(name);
        std::fs::write(&file, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o755)).unwrap();
        file
    }

    #[test]
    fn env_var_then_path_then_install_dirs() {
        let root = tempfile::tempdir().unwrap();
        let (a, b, home) = (
            root.path().join("a"),
            root.path().join("b"),
            root.path().join("home"),
        );
        for d in [&a, &b, &home.join(".claude/local")] {
            std::fs::create_dir_all(d).unwrap();
        }
        let spec = CliKind::Claude.spec();
        let path = std::env::join_paths([&a, &b]).unwrap();
        assert_eq!(
            locate(spec, None, Some(path.clone()), Some(home.clone())),
            None
        );
        let installed = exe(&home.join(".claude/local"), "claude");
        assert_eq!(
            locate(spec, None, Some(path.clone()), Some(home.clone())),
            Some(installed)
        );
        let on_path = exe(&b, "claude");
        assert_eq!(
            locate(spec, None, Some(path.clone()), Some(home.clone())),
            Some(on_path.clone())
        );
        let chosen = exe(&a, "my-claude");
        assert_eq!(
            locate(
                spec,
                Some(chosen.clone().into()),
                Some(path.clone()),
                Some(home.clone())
            ),
            Some(chosen)
        );
        // A variable naming nothing is reported, not bypassed.
        let gone = root.path().join("gone").into_os_string();
        assert_eq!(locate(spec, Some(gone), Some(path), Some(home)), None);
        // Not executable: not found.
        let plain = b.join("codex");
        std::fs::write(&plain, "").unwrap();
        let path = std::env::join_paths([&b]).unwrap();
        assert_eq!(locate(CliKind::Codex.spec(), None, Some(path), None), None);
    }

    #[test]
    fn the_reason_names_no_path() {
        let reason = not_found(CliKind::Codex.spec());
        assert!(reason.contains("CODEX_CLI_PATH"), "{reason}");
        for dir in COMMON_DIRS {
            assert!(!reason.contains(dir), "{reason}");
        }
    }
}
