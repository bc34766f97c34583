//! Running the `lrg` binary in tests: a clean environment, a working
//! directory of its own, and a timeout on every run.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use assert_cmd::Command;

/// No run may take longer than this; a hang fails the test instead.
pub const TIMEOUT: Duration = Duration::from_secs(60);

/// The repository root (for the bundled recordings).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// A scratch directory and a way to run `lrg` in it.
pub struct Env {
    pub dir: tempfile::TempDir,
}

impl Env {
    pub fn new() -> Self {
        Self {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    /// Write a file in the scratch directory; returns its name.
    pub fn file(&self, name: &str, text: &str) -> String {
        std::fs::write(self.dir.path().join(name), text).unwrap();
        name.to_string()
    }

    pub fn read(&self, name: &str) -> String {
        std::fs::read_to_string(self.dir.path().join(name)).unwrap()
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// `lrg ARGS` in the scratch directory, with nothing from the outer
    /// environment but `PATH` (no keys, no `LRG_MODEL`), stdin empty and
    /// closed (null), and a timeout.
    pub fn lrg(&self) -> Command {
        let mut cmd = Command::from_std(self.lrg_std());
        cmd.timeout(TIMEOUT);
        cmd
    }

    /// [`lrg`](Self::lrg) as a plain `std` command, for a test that wires
    /// its stdio itself (a pipe it closes); it must bound the wait itself.
    pub fn lrg_std(&self) -> std::process::Command {
        use assert_cmd::cargo::CommandCargoExt as _;
        let mut cmd = std::process::Command::cargo_bin("lrg").unwrap();
        cmd.env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            // Nothing listens on port 9 (discard): a default-model probe of
            // Ollama fails fast instead of finding a real local server.
            .env("OLLAMA_HOST", "http://127.0.0.1:9")
            // Settings files go to the scratch directory, never the real home.
            .env("XDG_CONFIG_HOME", self.dir.path().join("config"))
            .current_dir(self.dir.path());
        cmd
    }
}

/// The output of a finished run.
pub struct Ran {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

pub fn ran(cmd: &mut Command) -> Ran {
    let out = cmd.output().unwrap();
    let code = out.status.code().unwrap_or(-1);
    Ran {
        code,
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

impl std::fmt::Debug for Ran {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "exit {}\n--- stdout\n{}\n--- stderr\n{}",
            self.code, self.stdout, self.stderr
        )
    }
}

/// A script whose first turn calls `tool` with `args`, then replies `reply`.
pub fn call_then_reply(tool: &str, args: &str, reply: &str) -> String {
    format!(
        r#"[{{"text":"Working on it.","calls":[{{"name":"{tool}","arguments":{args}}}]}},
            {{"text":"{reply}"}}]"#
    )
}
