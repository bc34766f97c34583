//! How to start the sidecar: which Python, where its package is, which model,
//! and how long to wait for it.

use std::path::{Path, PathBuf};
use std::time::Duration;

use lrg_providers::local_chat::{DEFAULT_KV_CACHE_MEM, DEFAULT_PARALLEL, EngineSettings};

/// Env var naming the Python interpreter that runs the sidecar (one that can
/// import `mlx`, `mlx_lm` and `llguidance`, e.g. a venv's `bin/python`).
pub const PYTHON_ENV: &str = "LRG_MLX_PYTHON";

/// The sidecar package's directory in this crate's source tree, put on
/// `PYTHONPATH` when it exists; otherwise the package must be installed in the
/// interpreter (`pip install lrg-mlx/sidecar`).
pub const BUNDLED_SIDECAR_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/sidecar");

/// Settings of a [`crate::MlxEngine`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct MlxConfig {
    /// The model directory (`config.json`, `*.safetensors`, tokenizer files).
    pub model_dir: PathBuf,
    /// The Python interpreter.
    pub python: PathBuf,
    /// A directory holding the `lrg_mlx_sidecar` package, put first on
    /// `PYTHONPATH`; `None` relies on an installed package.
    pub sidecar_dir: Option<PathBuf>,
    /// Longest wait for the sidecar to load the model and say it is ready.
    pub startup_timeout: Duration,
    /// Longest silence from the sidecar during a turn (it sends a line per
    /// token, and one per prefill chunk); past it the turn fails and the
    /// sidecar is restarted.
    pub read_timeout: Duration,
    /// Extra environment for the sidecar process.
    pub env: Vec<(String, String)>,
    /// Chats whose prompt caches the sidecar always keeps (default
    /// [`DEFAULT_PARALLEL`]).
    pub parallel: usize,
    /// Bytes of prompt caches kept past `parallel`; the least recently used
    /// chat's cache is dropped beyond it (default [`DEFAULT_KV_CACHE_MEM`]).
    pub kv_cache_mem: u64,
}

impl MlxConfig {
    /// Default wait for the model to load.
    pub const DEFAULT_STARTUP_TIMEOUT: Duration = Duration::from_secs(180);
    /// Default longest silence during a turn.
    pub const DEFAULT_READ_TIMEOUT: Duration = Duration::from_secs(120);

    /// Defaults for `model_dir`: Python from `LRG_MLX_PYTHON` (else `python3`),
    /// the bundled sidecar package when this source tree still has it.
    pub fn new(model_dir: impl Into<PathBuf>) -> Self {
        let python = std::env::var_os(PYTHON_ENV)
            .filter(|p| !p.is_empty())
            .map_or_else(|| PathBuf::from("python3"), PathBuf::from);
        let bundled = Path::new(BUNDLED_SIDECAR_DIR);
        Self {
            model_dir: model_dir.into(),
            python,
            sidecar_dir: bundled
                .join("lrg_mlx_sidecar")
                .is_dir()
                .then(|| bundled.to_path_buf()),
            startup_timeout: Self::DEFAULT_STARTUP_TIMEOUT,
            read_timeout: Self::DEFAULT_READ_TIMEOUT,
            env: Vec::new(),
            parallel: DEFAULT_PARALLEL,
            kv_cache_mem: DEFAULT_KV_CACHE_MEM,
        }
    }

    /// Takes the slots (`parallel`) and cache budget of an engine pool's
    /// settings.
    pub fn with_settings(mut self, settings: &EngineSettings) -> Self {
        self.parallel = settings.parallel.max(1);
        self.kv_cache_mem = settings.kv_cache_mem;
        self
    }

    /// Sets the Python interpreter.
    pub fn with_python(mut self, python: impl Into<PathBuf>) -> Self {
        self.python = python.into();
        self
    }

    /// Sets the directory holding the `lrg_mlx_sidecar` package.
    pub fn with_sidecar_dir(mut self, dir: Option<PathBuf>) -> Self {
        self.sidecar_dir = dir;
        self
    }

    /// Sets the startup timeout.
    pub fn with_startup_timeout(mut self, timeout: Duration) -> Self {
        self.startup_timeout = timeout;
        self
    }

    /// Sets the longest silence allowed during a turn.
    pub fn with_read_timeout(mut self, timeout: Duration) -> Self {
        self.read_timeout = timeout;
        self
    }

    /// Adds an environment variable for the sidecar process.
    pub fn with_env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    /// The command that installs what the sidecar imports, for this
    /// interpreter (Linux has no Metal: mlx's CPU build).
    pub fn install_command(&self) -> String {
        let mlx = if cfg!(target_os = "macos") {
            "mlx-lm"
        } else {
            "mlx-lm[cpu]"
        };
        format!(
            "{} -m pip install \"{mlx}\" \"llguidance>=1.9,<1.10\"",
            self.python.display()
        )
    }
}
