//! In-process models: a GGUF file run by llama.cpp (feature `llama`).

use std::sync::Arc;

use lrg_providers::ChatModel;

use crate::exit::CliError;
use crate::providers::ProviderModels;
use crate::usage;

/// A GGUF file as a chat model. The llama.cpp engine (`lrg_llama::LlamaEngine`)
/// has not landed in `lrg-llama` yet; until it does this says so.
#[cfg(feature = "llama")]
pub async fn llama(path: &str) -> Result<Arc<dyn ChatModel>, CliError> {
    Err(usage!("--model llama:{path}: the llama.cpp engine is not in this build of lrg-llama yet"))
}

/// Without the `llama` feature there is no engine to run a GGUF file on.
#[cfg(not(feature = "llama"))]
pub async fn llama(path: &str) -> Result<Arc<dyn ChatModel>, CliError> {
    Err(usage!(
        "--model llama:{path}: this lrg was built without the `llama` feature"
    ))
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
            Some("this lrg was built without the `llama` feature".to_string()),
        )
    };
    ProviderModels {
        provider: "llama",
        available,
        reason,
        models: Vec::new(),
    }
}
