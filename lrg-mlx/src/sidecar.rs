//! The sidecar process: starting it, the handshake, one line at a time each
//! way (every read bounded by a timeout), and stopping it.

use std::collections::VecDeque;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lrg_providers::ProviderError;
use lrg_providers::local_chat::LoadProgress;
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout};

use crate::config::MlxConfig;
use crate::protocol::{self, FatalKind, Reply, Request, SidecarInfo};

/// Lines of the sidecar's stderr kept to explain a failure.
const TAIL_LINES: usize = 8;
/// Characters kept of each of those lines.
const TAIL_LINE_CHARS: usize = 200;
/// How long a dead sidecar gets to finish its last words (stderr, exit status).
const SETTLE: Duration = Duration::from_millis(500);
/// How long a sidecar asked to shut down gets before it is killed.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);

/// A running sidecar that has said it is ready.
pub(crate) struct Sidecar {
    child: Child,
    stdin: ChildStdin,
    stdout: Lines<BufReader<ChildStdout>>,
    stderr: Arc<Mutex<VecDeque<String>>>,
    python: String,
    /// A generate request sent and not yet answered with `done`/`error`: its
    /// lines are skipped by id, and it is cancelled before the next request.
    pub(crate) in_flight: Option<u64>,
}

impl std::fmt::Debug for Sidecar {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sidecar")
            .field("pid", &self.child.id())
            .field("in_flight", &self.in_flight)
            .finish()
    }
}

impl Sidecar {
    /// Starts the sidecar for `config` and waits for it to be ready.
    ///
    /// # Errors
    /// `ModelNotFound` when the directory is not a model; `Config` when Python,
    /// its packages or the sidecar package are missing, the model does not
    /// load, or the sidecar speaks another protocol; `Other` when it does not
    /// become ready within the startup timeout or exits first.
    pub(crate) async fn start(
        config: &MlxConfig,
        progress: &LoadProgress,
    ) -> Result<(Self, SidecarInfo), ProviderError> {
        if !config.model_dir.join("config.json").is_file() {
            return Err(ProviderError::ModelNotFound {
                message: format!(
                    "{} is not an MLX model directory (no config.json there)",
                    config.model_dir.display()
                ),
            });
        }
        let python = config.python.display().to_string();
        let mut cmd = tokio::process::Command::new(&config.python);
        cmd.arg("-m")
            .arg("lrg_mlx_sidecar")
            .arg("--model")
            .arg(&config.model_dir)
            .arg("--parallel")
            .arg(config.parallel.to_string())
            .arg("--kv-cache-mem")
            .arg(config.kv_cache_mem.to_string());
        // The sidecar is Python running mlx-lm: it needs its interpreter's
        // and the model caches' variables, never the keys of this process
        // (the base set of lrg_providers::child_env plus these).
        lrg_providers::child_env::apply(&mut cmd, sidecar_passes);
        cmd.env("PYTHONUNBUFFERED", "1")
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .envs(config.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        if let Some(dir) = &config.sidecar_dir {
            // The package first, then whatever path was given or inherited.
            let given = config.env.iter().rev().find(|(k, _)| k == "PYTHONPATH");
            let rest = given.map_or_else(
                || std::env::var_os("PYTHONPATH").unwrap_or_default(),
                |(_, v)| v.into(),
            );
            let mut paths = vec![dir.clone()];
            paths.extend(std::env::split_paths(&rest));
            if let Ok(joined) = std::env::join_paths(paths) {
                cmd.env("PYTHONPATH", joined);
            }
        }
        // Its own process group: Ctrl-C at the terminal stops lrg, which
        // stops the sidecar, rather than hitting Python mid-token.
        #[cfg(unix)]
        cmd.process_group(0);
        let mut child = lrg_providers::retry::while_executable_busy(|| cmd.spawn())
            .await
            .map_err(|e| {
                let hint = if e.kind() == std::io::ErrorKind::NotFound {
                    format!(
                        "no Python at `{python}`: install Python 3.10 or later, or set {} to one \
                     that has mlx (e.g. a venv's bin/python)",
                        crate::config::PYTHON_ENV
                    )
                } else {
                    format!("cannot run `{python}`: {e}")
                };
                ProviderError::Config {
                    message: format!("cannot start the MLX sidecar: {hint}"),
                }
            })?;
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(ProviderError::Other {
                message: "the MLX sidecar's pipes were not created".into(),
            });
        };
        let tail = Arc::new(Mutex::new(VecDeque::new()));
        follow_stderr(stderr, tail.clone());
        let mut sidecar = Self {
            child,
            stdin,
            stdout: BufReader::new(stdout).lines(),
            stderr: tail,
            python,
            in_flight: None,
        };
        let info = sidecar.handshake(config, progress).await?;
        Ok((sidecar, info))
    }

    async fn handshake(
        &mut self,
        config: &MlxConfig,
        progress: &LoadProgress,
    ) -> Result<SidecarInfo, ProviderError> {
        // The whole load, its progress lines included, within the timeout.
        let deadline = tokio::time::Instant::now() + config.startup_timeout;
        let line = loop {
            let line = self.startup_line(config, deadline).await?;
            match protocol::decode(&line) {
                Ok(Reply::Loading { progress: done }) => progress.report(done),
                _ => break line,
            }
        };
        match protocol::decode_first(&line)? {
            Reply::Ready(info) => Ok(*info),
            Reply::Fatal {
                kind: FatalKind::MissingPackage,
                message,
                package,
            } => Err(ProviderError::Config {
                message: format!(
                    "the MLX sidecar cannot import {} with {}: {message}; install what it needs \
                     with: {}",
                    package.as_deref().unwrap_or("its packages"),
                    self.python,
                    config.install_command()
                ),
            }),
            Reply::Fatal {
                kind: FatalKind::BadModel,
                message,
                ..
            } => Err(ProviderError::Config {
                message: format!("the MLX sidecar could not load the model: {message}"),
            }),
            Reply::Fatal { message, .. } => Err(ProviderError::Other {
                message: format!("the MLX sidecar could not start: {message}"),
            }),
            other => Err(ProviderError::Protocol {
                message: format!("the MLX sidecar began with {other:?} instead of ready"),
            }),
        }
    }

    /// One line of the sidecar's start, by `deadline`.
    async fn startup_line(
        &mut self,
        config: &MlxConfig,
        deadline: tokio::time::Instant,
    ) -> Result<String, ProviderError> {
        Ok(
            match tokio::time::timeout_at(deadline, self.stdout.next_line()).await {
                Err(_) => {
                    return Err(ProviderError::Other {
                        message: self.with_tail(format!(
                            "the MLX sidecar did not become ready within {}s (loading {})",
                            config.startup_timeout.as_secs(),
                            config.model_dir.display()
                        )),
                    });
                }
                Ok(Ok(Some(line))) => line,
                Ok(Ok(None)) => {
                    let hint = if config.sidecar_dir.is_none() {
                        " (is the sidecar package installed? `pip install lrg-mlx/sidecar` from lrg's \
                     source tree)"
                    } else {
                        ""
                    };
                    return Err(ProviderError::Config {
                        message: format!("{}{hint}", self.exited("before it was ready").await),
                    });
                }
                Ok(Err(e)) => {
                    return Err(ProviderError::Protocol {
                        message: format!("cannot read the MLX sidecar's output: {e}"),
                    });
                }
            },
        )
    }

    /// The process id, while it runs.
    pub(crate) fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// Writes one request.
    ///
    /// # Errors
    /// `Transient` when the sidecar is gone (the pipe is closed).
    pub(crate) async fn send(&mut self, request: &Request<'_>) -> Result<(), ProviderError> {
        let line = request.to_line()?;
        let written = async {
            self.stdin.write_all(line.as_bytes()).await?;
            self.stdin.flush().await
        }
        .await;
        match written {
            Ok(()) => Ok(()),
            Err(_) => Err(ProviderError::transient(format!(
                "{}; it will be restarted for the next turn",
                self.exited("while a request was sent to it").await
            ))),
        }
    }

    /// The next reply, waiting at most `timeout`.
    ///
    /// # Errors
    /// `Transient` when the sidecar exited or stayed silent past `timeout`;
    /// `Protocol` when it wrote something that is not a reply.
    pub(crate) async fn next(&mut self, timeout: Duration) -> Result<Reply, ProviderError> {
        match tokio::time::timeout(timeout, self.stdout.next_line()).await {
            Err(_) => Err(ProviderError::transient(self.with_tail(format!(
                "the MLX sidecar sent nothing for {}s; it is stopped and will be restarted for \
                 the next turn",
                timeout.as_secs()
            )))),
            Ok(Ok(Some(line))) => protocol::decode(&line),
            Ok(Ok(None)) => Err(ProviderError::transient(format!(
                "{}; it will be restarted for the next turn",
                self.exited("during the turn").await
            ))),
            Ok(Err(e)) => Err(ProviderError::Protocol {
                message: format!("cannot read the MLX sidecar's output: {e}"),
            }),
        }
    }

    /// Asks the sidecar to exit, killing it if it does not within a moment.
    pub(crate) async fn shutdown(mut self) {
        let _ = self.send(&Request::Shutdown).await;
        if tokio::time::timeout(SHUTDOWN_GRACE, self.child.wait())
            .await
            .is_err()
        {
            let _ = self.child.kill().await;
        }
    }

    /// Kills the sidecar now (after a failed turn: its state is unknown).
    pub(crate) async fn kill(mut self) {
        let _ = self.child.kill().await;
    }

    /// What to say of a sidecar that went away: its exit status and last words.
    async fn exited(&mut self, when: &str) -> String {
        let status = match tokio::time::timeout(SETTLE, self.child.wait()).await {
            Ok(Ok(status)) => status.to_string(),
            _ => "still running, its output closed".to_string(),
        };
        // Its stderr may still be draining.
        tokio::time::sleep(Duration::from_millis(50)).await;
        self.with_tail(format!("the MLX sidecar exited {when} ({status})"))
    }

    fn with_tail(&self, message: String) -> String {
        let tail: Vec<String> = self
            .stderr
            .lock()
            .map(|t| t.iter().cloned().collect())
            .unwrap_or_default();
        if tail.is_empty() {
            message
        } else {
            format!("{message}; its last output:\n{}", tail.join("\n"))
        }
    }
}

/// Forwards the sidecar's stderr to `tracing` and keeps its last lines.
fn follow_stderr(stderr: tokio::process::ChildStderr, tail: Arc<Mutex<VecDeque<String>>>) {
    tokio::spawn(async move {
        let mut lines = BufReader::new(stderr).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            tracing::debug!(target: "lrg_mlx::sidecar", "{line}");
            if let Ok(mut t) = tail.lock() {
                if t.len() == TAIL_LINES {
                    t.pop_front();
                }
                t.push_back(match line.char_indices().nth(TAIL_LINE_CHARS) {
                    Some((i, _)) => format!("{}…", &line[..i]),
                    None => line,
                });
            }
        }
    });
}

/// The variables, beside the base set, that the MLX sidecar gets: Python's
/// own (`PYTHON*`, a virtual environment's, pyenv's, conda's), the Hugging
/// Face and MLX settings (caches, offline mode), the dynamic loader's paths,
/// and the proxy, certificate and XDG names.
fn sidecar_passes(name: &str) -> bool {
    use lrg_providers::child_env::{DIRS, NETWORK};
    const PREFIXES: &[&str] = &["PYTHON", "PYENV_", "CONDA_", "HF_", "MLX_", "METAL_"];
    const NAMES: &[&str] = &[
        "VIRTUAL_ENV",
        "TRANSFORMERS_CACHE",
        "TOKENIZERS_PARALLELISM",
        "LD_LIBRARY_PATH",
        "DYLD_LIBRARY_PATH",
        "DYLD_FALLBACK_LIBRARY_PATH",
        "OMP_NUM_THREADS",
    ];
    PREFIXES.iter().any(|p| name.starts_with(p))
        || NAMES.contains(&name)
        || NETWORK.contains(&name)
        || DIRS.contains(&name)
}
