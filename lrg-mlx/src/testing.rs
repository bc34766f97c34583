//! Test and bench support: finding a Python that can run the sidecar, and
//! writing the tiny random-weight model (`lrg_mlx_sidecar.tiny_model`).
//!
//! Public so that this crate's tests, the workspace benches and the CLI's
//! tests share one way to do it. Nothing here is needed in production.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::config::{BUNDLED_SIDECAR_DIR, MlxConfig};

/// The modules the sidecar and the fixture generator import.
const PROBE: &str = "import mlx.core, mlx_lm, llguidance, tokenizers, numpy";

/// The Python the engine would use (`LRG_MLX_PYTHON`, else `python3`), if it
/// can import mlx, mlx-lm, llguidance, tokenizers and numpy.
///
/// # Errors
/// Why not, with the command that fixes it.
pub fn python_with_mlx() -> Result<PathBuf, String> {
    let config = MlxConfig::new("");
    let python = config.python.clone();
    let out = Command::new(&python).arg("-c").arg(PROBE).output();
    match out {
        Ok(o) if o.status.success() => Ok(python),
        Ok(o) => Err(format!(
            "{} cannot import the sidecar's packages ({}); install them with `{} tokenizers` \
             or set {} to a Python that has them",
            python.display(),
            String::from_utf8_lossy(&o.stderr)
                .lines()
                .last()
                .unwrap_or("no message"),
            config.install_command(),
            crate::config::PYTHON_ENV
        )),
        Err(e) => Err(format!(
            "cannot run {} ({e}); set {} to a Python with mlx",
            python.display(),
            crate::config::PYTHON_ENV
        )),
    }
}

/// Writes the tiny model (2-layer llama, byte-level BPE tokenizer, ChatML
/// template, about 0.5 MB) into `dir` with `python`, offline. Without
/// `context_window` its config names none and 32,768 is assumed.
///
/// # Errors
/// The generator's own error output when it fails.
pub fn write_tiny_model(
    python: &Path,
    dir: &Path,
    context_window: Option<u32>,
) -> Result<(), String> {
    generate(python, dir, context_window, None)
}

/// The tiny model with a bias towards the `"` token: strings end early, so
/// answers are a few dozen tokens (fast end-to-end runs); greedy, it calls a
/// tool with minimal arguments. Otherwise as [`write_tiny_model`].
///
/// # Errors
/// The generator's own error output when it fails.
pub fn write_terse_tiny_model(python: &Path, dir: &Path) -> Result<(), String> {
    generate(python, dir, None, Some(2.0))
}

/// The tiny model with a tool habit: random weights plus crafted circuits
/// (`craft_tool_habit` in the generator) that make greedy decoding call a
/// tool first (a `list…` one when offered), then, once the conversation holds
/// a tool result, reply. Every free string it writes is "Here it is.". So
/// `lrg run` on it goes call, result, reply, the way a real model does.
///
/// # Errors
/// The generator's own error output when it fails.
pub fn write_tool_habit_model(python: &Path, dir: &Path) -> Result<(), String> {
    generate_with(python, dir, &["--tool-habit"])
}

fn generate(
    python: &Path,
    dir: &Path,
    context_window: Option<u32>,
    quote_bias: Option<f32>,
) -> Result<(), String> {
    let mut args = Vec::new();
    if let Some(n) = context_window {
        args.extend(["--context-window".to_string(), n.to_string()]);
    }
    if let Some(b) = quote_bias {
        args.extend(["--quote-bias".to_string(), b.to_string()]);
    }
    generate_with(python, dir, &args)
}

/// Runs the generator with `args` after the output directory.
fn generate_with(
    python: &Path,
    dir: &Path,
    args: &[impl AsRef<std::ffi::OsStr>],
) -> Result<(), String> {
    let mut cmd = Command::new(python);
    cmd.arg("-m")
        .arg("lrg_mlx_sidecar.tiny_model")
        .arg(dir)
        .env("PYTHONPATH", BUNDLED_SIDECAR_DIR)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .args(args);
    let out = cmd
        .output()
        .map_err(|e| format!("cannot run {}: {e}", python.display()))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "the tiny model generator failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}
