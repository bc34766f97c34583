//! Connecting to the providers behind the network or in-process engines,
//! finding a default model, and listing what is reachable.

use std::sync::Arc;
use std::time::Duration;

use lrg_providers::anthropic::{AnthropicChat, AnthropicConfig};
use lrg_providers::gemini::{GeminiChat, GeminiConfig};
use lrg_providers::ollama::{OllamaChat, OllamaConfig};
use lrg_providers::openai::{Dialect, OpenAiChat, OpenAiConfig};
use lrg_providers::transport::TransportConfig;
use lrg_providers::{ApiKey, ChatModel, ModelInfo, ModelRef, Provider, ProviderError};

use crate::cli::ModelArgs;
use crate::exit::CliError;
use crate::usage;

/// Env var holding the key for `server:` (sent as a Bearer token). A
/// separate variable on purpose: an OpenAI key must never go to whatever
/// host a base URL names.
pub const SERVER_KEY_ENV: &str = "LRG_SERVER_API_KEY";

/// How long probing a local server for a default model may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

fn config_error(id: &ModelRef, e: ProviderError) -> CliError {
    usage!("--model {id}: {e}")
}

/// Env var naming the `server:` provider's base URL.
pub const SERVER_URL_ENV: &str = "LRG_SERVER_URL";

fn non_empty(s: Option<&str>) -> Option<String> {
    s.map(str::trim)
        .filter(|u| !u.is_empty())
        .map(str::to_string)
}

/// `--base-url`, for whichever provider is chosen.
fn base_url_flag(args: &ModelArgs) -> Option<String> {
    non_empty(args.base_url.as_deref())
}

/// `server:`'s address: `--base-url`, else `LRG_SERVER_URL` (which applies to
/// no other provider).
fn server_url(args: &ModelArgs) -> Option<String> {
    base_url_flag(args).or_else(|| non_empty(std::env::var(SERVER_URL_ENV).ok().as_deref()))
}

/// `server:` needs a base URL; the adapter wants it up to `/v1`.
fn server_config(args: &ModelArgs, model: &str) -> Result<OpenAiConfig, CliError> {
    let Some(url) = server_url(args) else {
        return Err(usage!(
            "server:{model} needs the server's address: pass --base-url URL or set LRG_SERVER_URL \
             (e.g. http://localhost:8000/v1)"
        ));
    };
    let mut config = OpenAiConfig::new(Dialect::GENERIC, url, model);
    if let Some(key) = ApiKey::from_env(&[SERVER_KEY_ENV]) {
        config = config.with_api_key(key);
    }
    if let Some(mode) = args.tool_format {
        config = config.with_tool_mode(mode);
    }
    Ok(config)
}

fn lmstudio_config(args: &ModelArgs, model: &str) -> Result<OpenAiConfig, ProviderError> {
    let mut config = OpenAiConfig::for_dialect(Dialect::LMSTUDIO, model)?;
    if let Some(url) = base_url_flag(args) {
        config.base_url = url;
    }
    if let Some(mode) = args.tool_format {
        config = config.with_tool_mode(mode);
    }
    Ok(config)
}

fn ollama_config(args: &ModelArgs, model: &str) -> Result<OllamaConfig, ProviderError> {
    let mut config = OllamaConfig::from_env(model)?;
    if let Some(url) = base_url_flag(args) {
        config.base_url = url;
    }
    Ok(config)
}

/// The model for `model_ref` (not `script:` or `replay:`, handled before).
pub async fn connect(
    model_ref: &ModelRef,
    args: &ModelArgs,
) -> Result<Arc<dyn ChatModel>, CliError> {
    let model = model_ref.model.as_str();
    let err = |e| config_error(model_ref, e);
    Ok(match model_ref.provider {
        Provider::OpenAi => Arc::new(
            OpenAiConfig::from_env(model)
                .and_then(OpenAiChat::new)
                .map_err(err)?,
        ),
        Provider::LmStudio => Arc::new(
            lmstudio_config(args, model)
                .and_then(OpenAiChat::new)
                .map_err(err)?,
        ),
        Provider::Server => Arc::new(OpenAiChat::new(server_config(args, model)?).map_err(err)?),
        Provider::Ollama => Arc::new(
            ollama_config(args, model)
                .and_then(OllamaChat::new)
                .map_err(err)?,
        ),
        Provider::Anthropic => Arc::new(
            AnthropicConfig::from_env(model)
                .and_then(AnthropicChat::new)
                .map_err(err)?,
        ),
        Provider::Gemini => Arc::new(
            GeminiConfig::from_env(model)
                .and_then(GeminiChat::new)
                .map_err(err)?,
        ),
        Provider::Llama => crate::local::llama(model).await?,
        Provider::Mlx => crate::local::mlx(model).await?,
        Provider::Script | Provider::Replay => {
            return Err(usage!(
                "--model {model_ref}: handled elsewhere (this is a bug in lrg)"
            ));
        }
    })
}

fn probe_transport() -> TransportConfig {
    TransportConfig::new(PROBE_TIMEOUT, PROBE_TIMEOUT)
}

async fn first_model(
    list: impl Future<Output = Result<Vec<ModelInfo>, ProviderError>>,
) -> Option<String> {
    match tokio::time::timeout(PROBE_TIMEOUT * 2, list).await {
        Ok(Ok(models)) => models.into_iter().next().map(|m| m.id()),
        _ => None,
    }
}

/// What to run when neither `--model` nor `LRG_MODEL` says: the first model
/// of the first local server that answers (Ollama, then LM Studio).
pub async fn default_model(args: &ModelArgs) -> Result<String, CliError> {
    let mut tried = Vec::new();
    if let Ok(config) = ollama_config(args, "") {
        tried.push(format!("Ollama at {}", config.base_url));
        if let Ok(chat) = OllamaChat::new(config.with_transport(probe_transport()))
            && let Some(id) = first_model(chat.list_models()).await
        {
            return Ok(id);
        }
    }
    if let Ok(config) = lmstudio_config(args, "") {
        tried.push(format!("LM Studio at {}", config.base_url));
        if let Ok(chat) = OpenAiChat::new(config.with_transport(probe_transport()))
            && let Some(id) = first_model(chat.list_models()).await
        {
            return Ok(id);
        }
    }
    Err(usage!(
        "no model chosen, and no local model server answered ({}).\n\
         Pass --model PROVIDER:MODEL or set LRG_MODEL, for example:\n  \
         LRG_MODEL=openai:gpt-4.1 with OPENAI_API_KEY set\n  \
         LRG_MODEL=anthropic:claude-sonnet-4-5 with ANTHROPIC_API_KEY set\n  \
         LRG_MODEL=ollama:qwen3:8b with Ollama running\n  \
         LRG_MODEL=llama:/path/to/model.gguf\n\
         (`lrg models` shows what is reachable now)",
        tried.join(", ")
    ))
}

/// One provider's line in `lrg models`.
#[derive(Debug, serde::Serialize)]
pub struct ProviderModels {
    /// The provider prefix.
    pub provider: &'static str,
    /// Whether it can be used now.
    pub available: bool,
    /// Why not, when it cannot.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Its models, when it could list them.
    pub models: Vec<ModelInfo>,
}

async fn listing(
    provider: &'static str,
    list: Result<impl Future<Output = Result<Vec<ModelInfo>, ProviderError>>, String>,
) -> ProviderModels {
    let result = match list {
        Err(reason) => Err(reason),
        Ok(list) => match tokio::time::timeout(Duration::from_secs(10), list).await {
            Err(_) => Err("no answer within 10 s".to_string()),
            Ok(Err(e)) => Err(e.to_string()),
            Ok(Ok(models)) => Ok(models),
        },
    };
    match result {
        Ok(models) => ProviderModels {
            provider,
            available: true,
            reason: None,
            models,
        },
        Err(reason) => ProviderModels {
            provider,
            available: false,
            reason: Some(reason),
            models: Vec::new(),
        },
    }
}

/// Every provider with what it offers now, or why it cannot be used.
pub async fn list_all(args: &ModelArgs) -> Vec<ProviderModels> {
    let short = TransportConfig::new(Duration::from_secs(3), Duration::from_secs(10));
    let openai =
        OpenAiConfig::from_env("").and_then(|c| OpenAiChat::new(c.with_transport(short.clone())));
    let anthropic = AnthropicConfig::from_env("")
        .and_then(|c| AnthropicChat::new(c.with_transport(short.clone())));
    let gemini =
        GeminiConfig::from_env("").and_then(|c| GeminiChat::new(c.with_transport(short.clone())));
    let ollama =
        ollama_config(args, "").and_then(|c| OllamaChat::new(c.with_transport(short.clone())));
    let lmstudio =
        lmstudio_config(args, "").and_then(|c| OpenAiChat::new(c.with_transport(short.clone())));
    let server = match server_config(args, "") {
        Ok(c) => OpenAiChat::new(c.with_transport(short.clone())).map_err(|e| e.to_string()),
        Err(_) => {
            Err("no server configured: pass --base-url URL or set LRG_SERVER_URL".to_string())
        }
    };
    fn e<T>(r: Result<T, ProviderError>) -> Result<T, String> {
        r.map_err(|e| e.to_string())
    }
    let (openai, anthropic, gemini, ollama, lmstudio) =
        (e(openai), e(anthropic), e(gemini), e(ollama), e(lmstudio));
    let (a, b, c, d, e, f) = futures::join!(
        listing(
            "openai",
            openai
                .as_ref()
                .map(|c| c.list_models())
                .map_err(Clone::clone)
        ),
        listing(
            "anthropic",
            anthropic
                .as_ref()
                .map(|c| c.list_models())
                .map_err(Clone::clone)
        ),
        listing(
            "gemini",
            gemini
                .as_ref()
                .map(|c| c.list_models())
                .map_err(Clone::clone)
        ),
        listing(
            "ollama",
            ollama
                .as_ref()
                .map(|c| c.list_models())
                .map_err(Clone::clone)
        ),
        listing(
            "lmstudio",
            lmstudio
                .as_ref()
                .map(|c| c.list_models())
                .map_err(Clone::clone)
        ),
        listing(
            "server",
            server
                .as_ref()
                .map(|c| c.list_models())
                .map_err(Clone::clone)
        ),
    );
    let mut all = vec![a, b, c, d, e, f];
    all.push(crate::local::llama_listing());
    all.push(crate::local::mlx_listing());
    all
}
