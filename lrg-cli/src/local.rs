//! In-process engines this binary links in: llama.cpp for GGUF files
//! (feature `llama`). They are registered with the library's
//! [`Connections`], which lists their model files and loads them.

use lrg_providers::catalog::Connections;
use lrg_providers::{ModelRef, Provider};

use crate::exit::CliError;
use crate::usage;

/// llama.cpp, constrained to lrg's answer format so even a small model calls
/// tools reliably.
#[cfg(feature = "llama")]
mod llama {
    use std::path::PathBuf;
    use std::sync::Arc;

    use futures::future::BoxFuture;
    use lrg_providers::catalog::EngineLoader;
    use lrg_providers::local_chat::LocalChatModel;
    use lrg_providers::{ChatModel, ProviderError};

    pub struct Llama;

    impl EngineLoader for Llama {
        fn load(
            &self,
            path: PathBuf,
        ) -> BoxFuture<'static, Result<Arc<dyn ChatModel>, ProviderError>> {
            Box::pin(async move {
                if !path.is_file() {
                    return Err(ProviderError::Config {
                        message: "no such file (give the path of a .gguf model)".into(),
                    });
                }
                // Loading reads the whole file: keep it off the async workers.
                let engine = tokio::task::spawn_blocking(move || {
                    lrg_llama::LlamaEngine::load(lrg_llama::LlamaConfig::new(path))
                })
                .await
                .map_err(|e| ProviderError::Config {
                    message: format!("loading failed: {e}"),
                })??;
                let model: Arc<dyn ChatModel> =
                    Arc::new(LocalChatModel::new("llama", Arc::new(engine)));
                Ok(model)
            })
        }
    }
}

/// `connections` with the engines of this build.
pub fn with_engines(connections: Connections) -> Connections {
    #[cfg(feature = "llama")]
    let connections = connections.with_engine(Provider::Llama, std::sync::Arc::new(llama::Llama));
    connections
}

/// Without the `llama` feature there is no engine to run a GGUF file on: one
/// line that says how to get it.
pub fn missing_engine(model_ref: &ModelRef) -> Option<CliError> {
    (model_ref.provider == Provider::Llama && !cfg!(feature = "llama")).then(|| {
        usage!(
            "--model {model_ref}: this lrg was built without the llama.cpp engine; \
             install it with `cargo install --path lrg-cli --features llama` (needs cmake and libclang)"
        )
    })
}
