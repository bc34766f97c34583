//! What to tell a person whose `lrg` was built without an engine: one line
//! that says exactly how to get it, kept here so every path says the same.

use crate::exit::CliError;
use crate::usage;

/// An in-process engine that is a build option.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    /// llama.cpp (cargo feature `llama`).
    Llama,
    /// MLX through its Python sidecar (cargo feature `mlx`, on by default).
    Mlx,
}

impl Engine {
    /// How to get an `lrg` with this engine.
    pub fn how_to_get(self) -> &'static str {
        match self {
            Engine::Llama => {
                "this lrg was built without the llama.cpp engine; install one that has it with \
                 `cargo install --path lrg-cli --features llama` (needs cmake and libclang)"
            }
            Engine::Mlx => {
                "this lrg was built without the MLX engine; install one that has it with \
                 `cargo install --path lrg-cli --features mlx` (it then needs Python with \
                 mlx-lm and llguidance at run time)"
            }
        }
    }

    /// The usage error (exit 2) for `--model <id>` on a build without it.
    pub fn missing(self, model_id: &str) -> CliError {
        usage!("--model {model_id}: {}", self.how_to_get())
    }
}
