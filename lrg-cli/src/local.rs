//! In-process engines this binary links in: llama.cpp for GGUF files
//! (feature `llama`) and MLX model directories run by a Python sidecar
//! (feature `mlx`). They are registered with the library's [`Connections`],
//! which lists their model files and loads them.

use lrg_providers::catalog::{Availability, Connections, ProviderModels};
use lrg_providers::{ModelRef, Provider};

use crate::engines::Engine;
use crate::exit::CliError;

/// llama.cpp, constrained to lrg's answer format so even a small model calls
/// tools reliably.
#[cfg(feature = "llama")]
mod llama {
    use std::path::PathBuf;
    use std::sync::Arc;

    use futures::future::BoxFuture;
    use lrg_providers::ProviderError;
    use lrg_providers::catalog::EngineLoader;
    use lrg_providers::local_chat::{EngineSettings, LoadProgress, LocalEngine};

    /// Loads GGUF files, with the vision projector `--mmproj` names.
    pub struct Llama {
        pub mmproj: Option<PathBuf>,
    }

    impl EngineLoader for Llama {
        fn load(
            &self,
            path: PathBuf,
            settings: &EngineSettings,
            progress: LoadProgress,
        ) -> BoxFuture<'static, Result<Arc<dyn LocalEngine>, ProviderError>> {
            let mmproj = self.mmproj.clone();
            let settings = settings.clone();
            Box::pin(async move {
                if !path.is_file() {
                    return Err(ProviderError::Config {
                        message: "no such file (give the path of a .gguf model)".into(),
                    });
                }
                // Loading reads the whole file: keep it off the async workers.
                let engine = tokio::task::spawn_blocking(move || {
                    let mut config = lrg_llama::LlamaConfig::new(path).with_settings(&settings);
                    if let Some(mmproj) = mmproj {
                        config = config.with_mmproj(mmproj);
                    }
                    lrg_llama::LlamaEngine::load_with_progress(config, progress)
                })
                .await
                .map_err(|e| ProviderError::Config {
                    message: format!("loading failed: {e}"),
                })??;
                let engine: Arc<dyn LocalEngine> = Arc::new(engine);
                Ok(engine)
            })
        }

        fn fingerprint(&self) -> String {
            // With and without a projector are different engines.
            self.mmproj
                .as_ref()
                .map(|p| format!("mmproj={}", p.display()))
                .unwrap_or_default()
        }
    }
}

/// An MLX model directory as an engine: mlx-lm in a Python sidecar (one per
/// loaded model, shared by its chats), constrained to lrg's answer format.
#[cfg(feature = "mlx")]
mod mlx {
    use std::path::PathBuf;
    use std::sync::Arc;

    use futures::future::BoxFuture;
    use lrg_providers::ProviderError;
    use lrg_providers::catalog::EngineLoader;
    use lrg_providers::local_chat::{EngineSettings, LoadProgress, LocalEngine};

    pub struct Mlx;

    impl EngineLoader for Mlx {
        fn load(
            &self,
            path: PathBuf,
            settings: &EngineSettings,
            progress: LoadProgress,
        ) -> BoxFuture<'static, Result<Arc<dyn LocalEngine>, ProviderError>> {
            let config = lrg_mlx::MlxConfig::new(path).with_settings(settings);
            Box::pin(async move {
                let engine = lrg_mlx::MlxEngine::start_with_progress(config, progress).await?;
                let engine: Arc<dyn LocalEngine> = Arc::new(engine);
                Ok(engine)
            })
        }
    }
}

/// `connections` with the engines of this build; llama.cpp models get the
/// vision projector `mmproj` (`--mmproj`).
pub fn with_engines(connections: Connections, mmproj: Option<&std::path::Path>) -> Connections {
    #[cfg(feature = "llama")]
    let connections = connections.with_engine(
        Provider::Llama,
        std::sync::Arc::new(llama::Llama {
            mmproj: mmproj.map(std::path::Path::to_path_buf),
        }),
    );
    #[cfg(not(feature = "llama"))]
    let _ = mmproj;
    #[cfg(feature = "mlx")]
    let connections = connections.with_engine(Provider::Mlx, std::sync::Arc::new(mlx::Mlx));
    connections
}

/// The engine `provider` needs when this build lacks it.
pub fn missing(provider: Provider) -> Option<Engine> {
    match provider {
        Provider::Llama if !cfg!(feature = "llama") => Some(Engine::Llama),
        Provider::Mlx if !cfg!(feature = "mlx") => Some(Engine::Mlx),
        _ => None,
    }
}

/// Without the engine a model needs: one line that says how to get it.
pub fn missing_engine(model_ref: &ModelRef) -> Option<CliError> {
    missing(model_ref.provider).map(|engine| engine.missing(&model_ref.to_string()))
}

/// In a listing, the group of an engine this build lacks says how to get it
/// (the library only knows that it is not linked in).
pub fn explain_missing(groups: &mut [ProviderModels]) {
    for g in groups {
        if let Some(engine) = missing(g.provider) {
            g.availability = Availability::Unavailable {
                reason: engine.how_to_get().to_string(),
            };
        }
    }
}
