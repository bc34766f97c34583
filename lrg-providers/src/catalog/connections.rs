//! [`Connections`]: how to reach each provider (keys, base URLs, model
//! directories, the engines linked in), and connecting a model by id. Set by
//! the application or read from the environment, never from a page.

use std::collections::HashMap;
use std::ffi::OsString;
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;

use super::table::{Access, Provider};
use crate::anthropic::{AnthropicChat, AnthropicConfig};
use crate::cli_agents::{CliAgent, CliAgentConfig};
use crate::gemini::{GeminiChat, GeminiConfig};
use crate::local_chat::{EnginePool, EngineSettings, LoadProgress, LocalEngine};
use crate::ollama::{OllamaChat, OllamaConfig, parse_host};
use crate::openai::{OpenAiChat, OpenAiConfig};
use crate::record::ReplayModel;
use crate::responses::{ResponsesChat, ResponsesConfig};
use crate::text_tools::ToolMode;
use crate::transport::TransportConfig;
use crate::{ApiKey, ChatModel, ModelRef, ProviderError, ScriptedModel};

/// How long one provider's probe may take before the catalog reports it as
/// not answering.
pub const DEFAULT_PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// Loads a model file into an in-process engine (llama.cpp, MLX). The
/// application links the engine in and registers it with
/// [`Connections::with_engine`]; lrg-providers itself depends on no engine.
///
/// Loads go through the engine pool ([`crate::local_chat::pool`]): one load
/// per model and settings, shared by every chat, so a loader is called again
/// only after the pool unloaded the engine.
pub trait EngineLoader: Send + Sync {
    /// Load the model at `path` (a `.gguf` file, an MLX directory) with
    /// `settings`, reporting how far it got to `progress`.
    fn load(
        &self,
        path: PathBuf,
        settings: &EngineSettings,
        progress: LoadProgress,
    ) -> BoxFuture<'static, Result<Arc<dyn LocalEngine>, ProviderError>>;

    /// What this loader does differently from another of its kind (a
    /// vision projector, say): part of the pool's key, so engines loaded
    /// otherwise are never shared. Empty by default.
    fn fingerprint(&self) -> String {
        String::new()
    }
}

/// Where one provider is reached: its base URL and key, after overrides and
/// env vars are applied.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Endpoint {
    /// The provider.
    pub provider: Provider,
    /// Its base URL, as its adapter takes it.
    pub base_url: String,
    /// Its key, when it has one.
    pub api_key: Option<ApiKey>,
    /// Timeouts for requests to it.
    pub transport: TransportConfig,
    /// How tools reach it, for a server the user runs (OpenAI-compatible or Ollama)
    /// (`None`: the adapter's default, native tool calls).
    pub tool_mode: Option<ToolMode>,
}

/// How to reach each provider. [`Connections::from_env`] reads the table's
/// env vars and `LRG_MODELS_DIR`; [`Connections::new`] reads nothing, for
/// applications that configure everything themselves (and for tests).
#[derive(Clone)]
pub struct Connections {
    read_env: bool,
    base_urls: HashMap<Provider, String>,
    keys: HashMap<Provider, ApiKey>,
    model_dirs: Vec<PathBuf>,
    model_paths: Vec<PathBuf>,
    engines: HashMap<Provider, Arc<dyn EngineLoader>>,
    /// Where in-process engines are loaded and shared.
    pool: EnginePool,
    /// How they are loaded.
    engine_settings: EngineSettings,
    probe_timeout: Duration,
    tool_mode: Option<ToolMode>,
    /// Timeouts of the models [`Connections::connect`] makes.
    transport: TransportConfig,
    /// Where programs (ACP agents) are looked for, over `PATH`.
    search_path: Option<OsString>,
}

impl fmt::Debug for Connections {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Connections")
            .field("read_env", &self.read_env)
            .field("base_urls", &self.base_urls)
            .field("keys", &self.keys.keys().collect::<Vec<_>>())
            .field("model_dirs", &self.model_dirs)
            .field("model_paths", &self.model_paths)
            .field("engines", &self.engines.keys().collect::<Vec<_>>())
            .field("engine_settings", &self.engine_settings)
            .field("probe_timeout", &self.probe_timeout)
            .field("tool_mode", &self.tool_mode)
            .field("transport", &self.transport)
            .field("search_path", &self.search_path)
            .finish()
    }
}

impl Default for Connections {
    fn default() -> Self {
        Self::new()
    }
}

impl Connections {
    /// Nothing configured and nothing read from the environment: every
    /// provider at its default address, without keys, no model directories.
    pub fn new() -> Self {
        Self {
            read_env: false,
            base_urls: HashMap::new(),
            keys: HashMap::new(),
            model_dirs: Vec::new(),
            model_paths: Vec::new(),
            engines: HashMap::new(),
            pool: EnginePool::global().clone(),
            engine_settings: EngineSettings::default(),
            probe_timeout: DEFAULT_PROBE_TIMEOUT,
            transport: TransportConfig::default(),
            tool_mode: None,
            search_path: None,
        }
    }

    /// Keys and base URLs from each provider's env vars (see the table), and
    /// the model directory `LRG_MODELS_DIR` (default: `lrg/models` under the
    /// user's data directory).
    pub fn from_env() -> Self {
        let mut c = Self::new();
        c.read_env = true;
        c.model_dirs.extend(super::files::default_models_dir());
        c
    }

    /// With `provider` at `url` (over its env var and default).
    pub fn with_base_url(mut self, provider: Provider, url: impl Into<String>) -> Self {
        self.base_urls.insert(provider, url.into());
        self
    }

    /// With `key` for `provider` (over its env vars).
    pub fn with_api_key(mut self, provider: Provider, key: ApiKey) -> Self {
        self.keys.insert(provider, key);
        self
    }

    /// With another directory searched for model files.
    pub fn with_model_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.model_dirs.push(dir.into());
        self
    }

    /// With a model file (or MLX directory) listed wherever it is.
    pub fn with_model_path(mut self, path: impl Into<PathBuf>) -> Self {
        self.model_paths.push(path.into());
        self
    }

    /// With an in-process engine for `provider` (`llama`, `mlx`).
    pub fn with_engine(mut self, provider: Provider, loader: Arc<dyn EngineLoader>) -> Self {
        self.engines.insert(provider, loader);
        self
    }

    /// With in-process engines loaded into `pool` (default: the process's
    /// [`EnginePool::global`], so every chat of the process shares them).
    pub fn with_engine_pool(mut self, pool: EnginePool) -> Self {
        self.pool = pool;
        self
    }

    /// With in-process engines loaded with `settings` (slots, the saved-state
    /// budget).
    pub fn with_engine_settings(mut self, settings: EngineSettings) -> Self {
        self.engine_settings = settings;
        self
    }

    /// The pool in-process engines are loaded into.
    pub fn engine_pool(&self) -> &EnginePool {
        &self.pool
    }

    /// With this per-provider probe timeout (default 2 s).
    pub fn with_probe_timeout(mut self, timeout: Duration) -> Self {
        self.probe_timeout = timeout;
        self
    }

    /// With tools reaching OpenAI-compatible servers the user runs (LM
    /// Studio, `server:`) this way: a text format read from the answer, or
    /// `auto` by the model's family. Clouds keep their native tool calls.
    pub fn with_tool_mode(mut self, mode: ToolMode) -> Self {
        self.tool_mode = Some(mode);
        self
    }

    /// With these timeouts for every model [`Connections::connect`] makes
    /// (first-byte, idle between chunks; default 60 s each).
    pub fn with_transport(mut self, transport: TransportConfig) -> Self {
        self.transport = transport;
        self
    }

    /// The per-provider probe timeout.
    pub fn probe_timeout(&self) -> Duration {
        self.probe_timeout
    }

    /// The directories searched for model files.
    pub fn model_dirs(&self) -> &[PathBuf] {
        &self.model_dirs
    }

    /// The model paths named explicitly.
    pub fn model_paths(&self) -> &[PathBuf] {
        &self.model_paths
    }

    /// With programs (the known ACP agents) looked for in `path`, a `PATH`
    /// value, instead of the environment's.
    pub fn with_search_path(mut self, path: impl Into<OsString>) -> Self {
        self.search_path = Some(path.into());
        self
    }

    /// Where programs are looked for: the one set, else `PATH` when the
    /// environment is read ([`Connections::from_env`]), else nowhere.
    pub fn search_path(&self) -> Option<OsString> {
        self.search_path
            .clone()
            .or_else(|| self.read_env.then(|| std::env::var_os("PATH")).flatten())
    }

    /// Whether an engine for `provider` is linked in.
    pub fn has_engine(&self, provider: Provider) -> bool {
        self.engines.contains_key(&provider)
    }

    fn env(&self, var: &str) -> Option<String> {
        if !self.read_env {
            return None;
        }
        std::env::var(var)
            .ok()
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
    }

    /// Where `provider` is reached with these settings, or why it cannot be
    /// (no key, no address). The reason names variables, never their values.
    pub fn endpoint(&self, provider: Provider) -> Result<Endpoint, ProviderError> {
        self.endpoint_with(provider, self.transport.clone())
    }

    pub(crate) fn endpoint_with(
        &self,
        provider: Provider,
        transport: TransportConfig,
    ) -> Result<Endpoint, ProviderError> {
        let spec = provider.spec();
        let base_url = self
            .base_urls
            .get(&provider)
            .map(|u| u.trim().to_string())
            .filter(|u| !u.is_empty())
            .or_else(|| spec.base_url_env.and_then(|v| self.env(v)))
            .or_else(|| spec.default_base_url.map(str::to_string));
        let Some(base_url) = base_url else {
            let hint = spec
                .base_url_env
                .map(|v| format!("set {v} or give a base URL"))
                .unwrap_or_else(|| "give a base URL".into());
            return Err(ProviderError::Config {
                message: format!("no address for {}: {hint}", spec.name),
            });
        };
        let api_key = self.keys.get(&provider).cloned().or_else(|| {
            spec.key_env
                .iter()
                .find_map(|v| self.env(v))
                .map(ApiKey::new)
        });
        if spec.key_required && api_key.is_none() {
            return Err(ProviderError::Config {
                message: format!(
                    "no API key for {}: set {}",
                    spec.name,
                    spec.key_env.join(" or ")
                ),
            });
        }
        let tool_mode = self
            .tool_mode
            .filter(|_| spec.locality != crate::ModelLocation::Cloud);
        Ok(Endpoint {
            provider,
            base_url,
            api_key,
            transport,
            tool_mode,
        })
    }

    /// The model `id` names, ready to take turns. In-process engines need
    /// [`Connections::with_engine`] and are loaded once into the engine pool
    /// for every chat (each connect is a chat of its own); `script:` and
    /// `replay:` read their file.
    pub async fn connect(&self, id: &ModelRef) -> Result<Arc<dyn ChatModel>, ProviderError> {
        let spec = id.provider.spec();
        match spec.access {
            Access::Engine(_) => match self.engines.get(&id.provider) {
                Some(loader) => {
                    let model = self
                        .pool
                        .connect(
                            id.provider,
                            PathBuf::from(&id.model),
                            self.engine_settings.clone(),
                            Arc::clone(loader),
                        )
                        .await?;
                    Ok(Arc::new(model))
                }
                None => Err(ProviderError::Config {
                    message: format!("the {} engine is not part of this program", spec.name),
                }),
            },
            Access::File if id.provider == Provider::Replay => {
                let replay =
                    ReplayModel::from_file(&id.model).map_err(|e| ProviderError::Config {
                        message: e.to_string(),
                    })?;
                Ok(Arc::new(replay))
            }
            Access::File => Ok(Arc::new(ScriptedModel::from_file(&id.model)?)),
            Access::Cli(kind) => Ok(Arc::new(CliAgent::new(CliAgentConfig::new(
                kind, &id.model,
            ))?)),
            _ => {
                let endpoint = self.endpoint(id.provider)?;
                let known = self.server_facts(id).await;
                connect_http(&endpoint, &id.model, known)
            }
        }
    }

    /// What a server says of `id` — the window it runs it with and whether
    /// it sees images — asked before connecting so the session fits the
    /// conversation to it (and Ollama is sent `num_ctx`) and sends no image
    /// to a model that cannot see. Only servers are asked: a cloud's list
    /// costs a request per run and its adapters know their windows.
    async fn server_facts(&self, id: &ModelRef) -> Known {
        if id.provider.spec().locality != crate::ModelLocation::Server {
            return Known::default();
        }
        let group = super::probe::probe(self, id.provider).await;
        let Some(found) = group.models.into_iter().find(|m| m.model == id.model) else {
            return Known::default();
        };
        Known {
            window: (!found.window_assumed).then_some(found.context_window),
            vision: found.vision,
        }
    }
}

/// What the catalog learned of a model before connecting to it.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Known {
    /// The context window the server runs it with.
    pub(crate) window: Option<u32>,
    /// Whether it sees images.
    pub(crate) vision: Option<bool>,
}

/// A chat model for `model` at `endpoint` (HTTP providers only).
pub(crate) fn connect_http(
    endpoint: &Endpoint,
    model: &str,
    known: Known,
) -> Result<Arc<dyn ChatModel>, ProviderError> {
    let window = known.window;
    let spec = endpoint.provider.spec();
    let base = endpoint.base_url.clone();
    let transport = endpoint.transport.clone();
    let key = endpoint.api_key.clone();
    let missing_key = || ProviderError::Config {
        message: format!(
            "no API key for {}: set {}",
            spec.name,
            spec.key_env.join(" or ")
        ),
    };
    Ok(match spec.access {
        Access::OpenAi { dialect, .. } => {
            let mut config = OpenAiConfig::new(dialect, base, model).with_transport(transport);
            if let Some(key) = key {
                config = config.with_api_key(key);
            }
            if let Some(w) = window {
                config = config.with_context_window(w);
            }
            if let Some(mode) = endpoint.tool_mode {
                config = config.with_tool_mode(mode);
            }
            if let Some(vision) = known.vision {
                config = config.with_vision(vision);
            }
            Arc::new(OpenAiChat::new(config)?)
        }
        Access::Ollama => {
            let mut config = OllamaConfig::new(parse_host(&base), model).with_transport(transport);
            if let Some(w) = window {
                config = config.with_context_window(w);
            }
            if let Some(mode) = endpoint.tool_mode {
                config = config.with_tool_mode(mode);
            }
            if let Some(vision) = known.vision {
                config = config.with_vision(vision);
            }
            Arc::new(OllamaChat::new(config)?)
        }
        Access::Anthropic => {
            let config = AnthropicConfig::new(model, key.ok_or_else(missing_key)?)
                .with_base_url(base)
                .with_transport(transport);
            Arc::new(AnthropicChat::new(config)?)
        }
        Access::Gemini => {
            let mut config = GeminiConfig::new(model, key.ok_or_else(missing_key)?)
                .with_base_url(base)
                .with_transport(transport);
            if let Some(w) = window {
                config = config.with_context_window(w);
            }
            Arc::new(GeminiChat::new(config)?)
        }
        Access::Responses(host) => {
            let mut config = ResponsesConfig::new(host, base, model).with_transport(transport);
            if let Some(key) = key {
                config = config.with_api_key(key);
            }
            if let Some(w) = window {
                config = config.with_context_window(w);
            }
            Arc::new(ResponsesChat::new(config)?)
        }
        Access::Engine(_) | Access::File | Access::Cli(_) => {
            return Err(ProviderError::Config {
                message: format!("{} is not reached over HTTP", spec.name),
            });
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connected_models_get_the_configured_timeouts() {
        let c = Connections::new();
        assert_eq!(
            c.endpoint(Provider::Ollama).unwrap().transport,
            TransportConfig::default()
        );
        let quick = TransportConfig::new(Duration::from_secs(1), Duration::from_secs(5))
            .with_first_byte_timeout(Duration::from_secs(2));
        let c = c.with_transport(quick.clone());
        assert_eq!(c.endpoint(Provider::Ollama).unwrap().transport, quick);
    }

    #[test]
    fn endpoints_from_overrides_defaults_and_reasons_that_name_variables() {
        let c = Connections::new();
        let e = c.endpoint(Provider::Ollama).unwrap();
        assert_eq!(e.base_url, crate::ollama::DEFAULT_HOST);
        let err = c.endpoint(Provider::OpenAi).unwrap_err().to_string();
        assert!(err.contains("OPENAI_API_KEY"), "{err}");
        let err = c.endpoint(Provider::Server).unwrap_err().to_string();
        assert!(err.contains("LRG_SERVER_URL"), "{err}");
        let c = c
            .with_api_key(Provider::OpenAi, ApiKey::new("sk-secret-1234"))
            .with_base_url(Provider::Server, "http://h:8000/v1");
        let e = c.endpoint(Provider::OpenAi).unwrap();
        assert_eq!(e.base_url, "https://api.openai.com/v1");
        assert!(!format!("{c:?} {e:?}").contains("sk-secret"));
        assert_eq!(
            c.endpoint(Provider::Server).unwrap().base_url,
            "http://h:8000/v1"
        );
        // The server's key is its own: an OpenAI key never goes there.
        assert!(c.endpoint(Provider::Server).unwrap().api_key.is_none());
    }

    #[test]
    fn a_tool_mode_reaches_servers_the_user_runs_never_a_cloud() {
        let c = Connections::new()
            .with_api_key(Provider::OpenAi, ApiKey::new("sk-x"))
            .with_base_url(Provider::Server, "http://h:8000/v1")
            .with_tool_mode(ToolMode::Auto);
        assert_eq!(
            c.endpoint(Provider::Server).unwrap().tool_mode,
            Some(ToolMode::Auto)
        );
        assert_eq!(
            c.endpoint(Provider::LmStudio).unwrap().tool_mode,
            Some(ToolMode::Auto)
        );
        assert_eq!(c.endpoint(Provider::OpenAi).unwrap().tool_mode, None);
        assert_eq!(
            Connections::new()
                .endpoint(Provider::LmStudio)
                .unwrap()
                .tool_mode,
            None
        );
    }

    #[tokio::test]
    async fn engines_must_be_linked_in_and_files_are_read() {
        let c = Connections::new();
        let id: ModelRef = "llama:/m/x.gguf".parse().unwrap();
        let err = c.connect(&id).await.err().unwrap().to_string();
        assert!(err.contains("not part of this program"), "{err}");
        let id: ModelRef = "script:/nonexistent/turns.json".parse().unwrap();
        assert!(c.connect(&id).await.is_err());
    }
}
