//! In-process models: a GGUF file run by llama.cpp (feature `llama`).

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
