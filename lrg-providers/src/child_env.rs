//! The environment a child process gets: a small base set, never all of
//! this process's environment.
//!
//! lrg runs other programs — MCP tool servers, agent CLIs (Claude Code,
//! Codex, Gemini CLI), external ACP agents — and this process's environment
//! holds keys that are none of their business: `OPENAI_API_KEY`,
//! `AWS_SECRET_ACCESS_KEY`, `GITHUB_TOKEN`, and under `lrg serve` the agent
//! token that opens chats. So a child starts from an empty environment and
//! gets:
//!
//! - the [`BASE`] set, which is what the reference MCP SDKs pass by default
//!   (`PATH`, `HOME`, `USER`, `LOGNAME`, `SHELL`, `TERM`, `LANG`, `LC_*`,
//!   `TMPDIR` on Unix; their Windows set on Windows), so that a program can
//!   find its interpreter, its home directory and its locale;
//! - what its caller adds by name (an MCP server's `inherit_env`, an agent
//!   CLI's own login variables);
//! - never one of lrg's own secrets ([`is_lrg_secret`]: `LRG_AGENT_TOKEN`,
//!   `LRG_NODE_SECRET`, `LRG_SERVER_API_KEY`, any `LRG_` name with `TOKEN`,
//!   `SECRET`, `KEY` or `PASSWORD` in it), whatever the caller asks: those
//!   grant control of lrg itself, and no tool or agent needs them.

use std::ffi::{OsStr, OsString};

/// Variables every child gets from this process when they are set: the
/// default set of the reference MCP SDKs (TypeScript and Python).
#[cfg(not(windows))]
pub const BASE: &[&str] = &[
    "HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "LANG", "TMPDIR",
];

/// Variables every child gets from this process when they are set: the
/// default set of the reference MCP SDKs (TypeScript and Python).
#[cfg(windows)]
pub const BASE: &[&str] = &[
    "APPDATA",
    "HOMEDRIVE",
    "HOMEPATH",
    "LOCALAPPDATA",
    "PATH",
    "PROCESSOR_ARCHITECTURE",
    "SYSTEMDRIVE",
    "SYSTEMROOT",
    "TEMP",
    "USERNAME",
    "USERPROFILE",
];

/// Prefixes of base variables: the locale categories (`LC_ALL`, `LC_CTYPE`, ...).
#[cfg(not(windows))]
const BASE_PREFIXES: &[&str] = &["LC_"];
#[cfg(windows)]
const BASE_PREFIXES: &[&str] = &[];

/// Names set for the proxy and the trusted certificates: a program that
/// talks to its vendor over the network needs them where a proxy is in use.
pub const NETWORK: &[&str] = &[
    "HTTPS_PROXY",
    "HTTP_PROXY",
    "NO_PROXY",
    "ALL_PROXY",
    "https_proxy",
    "http_proxy",
    "no_proxy",
    "all_proxy",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "NODE_EXTRA_CA_CERTS",
];

/// Where a user's programs keep their settings and caches (XDG base
/// directories): an agent CLI finds its login and config through them when
/// they are moved from under `HOME`. Paths, never secrets.
pub const DIRS: &[&str] = &[
    "XDG_CONFIG_HOME",
    "XDG_DATA_HOME",
    "XDG_CACHE_HOME",
    "XDG_STATE_HOME",
    "XDG_RUNTIME_DIR",
];

/// More variables a child is given by name or by prefix, beyond [`BASE`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct EnvNames {
    /// Exact names.
    pub names: &'static [&'static str],
    /// Prefixes: every name that starts with one (`ANTHROPIC_`).
    pub prefixes: &'static [&'static str],
}

impl EnvNames {
    /// No names beyond the base set.
    pub const NONE: EnvNames = EnvNames {
        names: &[],
        prefixes: &[],
    };

    /// Whether `name` is one of these.
    pub fn contains(&self, name: &str) -> bool {
        self.names.iter().any(|n| same_name(n, name))
            || self.prefixes.iter().any(|p| has_prefix(name, p))
    }
}

/// Whether `name` is one of lrg's own secrets, never passed to a child: an
/// `LRG_` name with `TOKEN`, `SECRET`, `KEY` or `PASSWORD` in it.
pub fn is_lrg_secret(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    upper.starts_with("LRG_")
        && ["TOKEN", "SECRET", "KEY", "PASSWORD"]
            .iter()
            .any(|w| upper.contains(w))
}

/// Whether `name` is in the base set every child gets.
pub fn is_base(name: &str) -> bool {
    BASE.iter().any(|n| same_name(n, name)) || BASE_PREFIXES.iter().any(|p| has_prefix(name, p))
}

/// The variables of this process a child gets: the base set, plus every
/// name `also` accepts, minus lrg's own secrets. Names that are not valid
/// Unicode are never passed (no allowed name is one).
pub fn inherited(also: impl Fn(&str) -> bool) -> Vec<(OsString, OsString)> {
    filter(std::env::vars_os(), also)
}

/// [`inherited`] over a given environment, for tests.
fn filter(
    vars: impl Iterator<Item = (OsString, OsString)>,
    also: impl Fn(&str) -> bool,
) -> Vec<(OsString, OsString)> {
    vars.filter(|(name, _)| {
        name.to_str()
            .is_some_and(|n| !is_lrg_secret(n) && (is_base(n) || also(n)))
    })
    .collect()
}

/// Clear `cmd`'s environment and give it [`inherited`]`(also)`; what the
/// caller sets afterwards (a config's own `env`) is added on top.
pub fn apply(cmd: &mut tokio::process::Command, also: impl Fn(&str) -> bool) {
    cmd.env_clear();
    cmd.envs(inherited(also));
}

fn same_name(a: &str, b: &str) -> bool {
    // Windows names are case-insensitive (`Path` is `PATH`).
    if cfg!(windows) {
        a.eq_ignore_ascii_case(b)
    } else {
        a == b
    }
}

fn has_prefix(name: &str, prefix: &str) -> bool {
    name.len() > prefix.len()
        && name.is_char_boundary(prefix.len())
        && same_name(&name[..prefix.len()], prefix)
}

/// Whether `name` is set, and not empty, in this process's environment: for
/// a caller's own rule ("AWS variables only when Bedrock is switched on").
pub fn is_set(name: &str) -> bool {
    std::env::var_os(OsStr::new(name)).is_some_and(|v| !v.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
        pairs
            .iter()
            .map(|(k, v)| (OsString::from(k), OsString::from(v)))
            .collect()
    }

    fn names(v: &[(OsString, OsString)]) -> Vec<String> {
        v.iter()
            .map(|(k, _)| k.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn only_the_base_set_and_what_is_asked_for_passes() {
        let all = env(&[
            ("PATH", "/bin"),
            ("HOME", "/home/a"),
            ("LC_ALL", "C"),
            ("OPENAI_API_KEY", "sk-x"),
            ("AWS_SECRET_ACCESS_KEY", "x"),
            ("GITHUB_TOKEN", "x"),
            ("LRG_AGENT_TOKEN", "x"),
            ("WANTED", "1"),
        ]);
        let got = filter(all.clone().into_iter(), |_| false);
        if cfg!(windows) {
            assert_eq!(names(&got), ["PATH"]);
        } else {
            assert_eq!(names(&got), ["PATH", "HOME", "LC_ALL"]);
        }
        let got = filter(all.into_iter(), |n| n == "WANTED" || n == "LRG_AGENT_TOKEN");
        assert!(names(&got).contains(&"WANTED".to_owned()));
        assert!(!names(&got).contains(&"LRG_AGENT_TOKEN".to_owned()));
    }

    #[test]
    fn lrg_secrets_are_recognized() {
        for n in [
            "LRG_AGENT_TOKEN",
            "LRG_NODE_SECRET",
            "LRG_SERVER_API_KEY",
            "lrg_agent_token",
        ] {
            assert!(is_lrg_secret(n), "{n}");
        }
        for n in ["LRG_MODEL", "LRG_STORE", "OPENAI_API_KEY", "TOKEN"] {
            assert!(!is_lrg_secret(n), "{n}");
        }
    }

    #[test]
    fn prefixes_need_a_name_after_them() {
        let n = EnvNames {
            names: &["CODEX_HOME"],
            prefixes: &["ANTHROPIC_"],
        };
        assert!(n.contains("ANTHROPIC_API_KEY") && n.contains("CODEX_HOME"));
        assert!(!n.contains("ANTHROPIC_") && !n.contains("CODEX_HOMES"));
    }
}
