//! Local models: a GGUF file run by llama.cpp in this process (feature
//! `llama`), an MLX model directory run by a Python sidecar (feature `mlx`).

use std::sync::Arc;

use lrg_providers::ChatModel;

use crate::exit::CliError;
use crate::providers::ProviderModels;

/// A GGUF file as a chat model: llama.cpp, constrained to lrg's answer
/// format so even a small model calls tools reliably.
#[cfg(feature = "llama")]
pub async fn llama(path: &str) -> Result<Arc<dyn ChatModel>, CliError> {
    use crate::usage;
    use lrg_providers::local_chat::LocalChatModel;
    let path = std::path::PathBuf::from(path);
    if !path.is_file() {
        return Err(usage!(
            "--model llama:{}: no such file (give the path of a .gguf model)",
            path.display()
        ));
    }
    let shown = path.display().to_string();
    // Loading reads the whole file: keep it off the async workers.
    let engine = tokio::task::spawn_blocking(move || {
        lrg_llama::LlamaEngine::load(lrg_llama::LlamaConfig::new(path))
    })
    .await
    .map_err(|e| usage!("--model llama:{shown}: loading failed: {e}"))?
    .map_err(|e| usage!("--model llama:{shown}: {e}"))?;
    Ok(Arc::new(LocalChatModel::new("llama", Arc::new(engine))))
}

/// Without the `llama` feature there is no engine to run a GGUF file on.
#[cfg(not(feature = "llama"))]
pub async fn llama(path: &str) -> Result<Arc<dyn ChatModel>, CliError> {
    Err(crate::engines::Engine::Llama.missing(&format!("llama:{path}")))
}

/// The `llama` line of `lrg models`: files are named, not discovered.
pub fn llama_listing() -> ProviderModels {
    let (available, reason) = if cfg!(feature = "llama") {
        (
            true,
            Some("run any GGUF file with --model llama:/path/to/model.gguf".to_string()),
        )
    } else {
        (
            false,
            Some(crate::engines::Engine::Llama.how_to_get().to_string()),
        )
    };
    ProviderModels {
        provider: "llama",
        available,
        reason,
        models: Vec::new(),
    }
}

/// An MLX model directory as a chat model: mlx-lm in a Python sidecar,
/// constrained to lrg's answer format.
#[cfg(feature = "mlx")]
pub async fn mlx(dir: &str) -> Result<Arc<dyn ChatModel>, CliError> {
    use crate::usage;
    use lrg_providers::local_chat::LocalChatModel;
    let engine = lrg_mlx::MlxEngine::start(lrg_mlx::MlxConfig::new(dir))
        .await
        .map_err(|e| usage!("--model mlx:{dir}: {e}"))?;
    Ok(Arc::new(LocalChatModel::new("mlx", Arc::new(engine))))
}

/// Without the `mlx` feature there is no engine to run an MLX model on.
#[cfg(not(feature = "mlx"))]
pub async fn mlx(dir: &str) -> Result<Arc<dyn ChatModel>, CliError> {
    Err(crate::engines::Engine::Mlx.missing(&format!("mlx:{dir}")))
}

/// The `mlx` line of `lrg models`: directories are named, not discovered,
/// and Python is only looked for when one is run.
pub fn mlx_listing() -> ProviderModels {
    let (available, reason) = if cfg!(feature = "mlx") {
        (
            true,
            Some(
                "run an MLX model directory with --model mlx:/path/to/dir (needs Python with \
                 mlx-lm and llguidance: $LRG_MLX_PYTHON, else python3)"
                    .to_string(),
            ),
        )
    } else {
        (
            false,
            Some(crate::engines::Engine::Mlx.how_to_get().to_string()),
        )
    };
    ProviderModels {
        provider: "mlx",
        available,
        reason,
        models: Vec::new(),
    }
}
