//! Anthropic's Messages API (`POST /v1/messages`), streamed.
//!
//! [`AnthropicChat`] encodes a [`TurnRequest`] into a Messages body
//! ([`encode`]), streams the answer through the shared HTTP transport and
//! decodes its events ([`AnthropicDecoder`]). Claude's thinking blocks (with their signatures) and redacted
//! thinking blocks come back as [`crate::NativePart`]s, in order with the text
//! and tool calls, and go back unchanged with the tool results.
//!
//! A typed answer ([`TurnRequest::output`]) goes as structured outputs on the
//! models that have them, else through a synthetic answer tool
//! ([`ANSWER_TOOL`]) whose input comes back as the answer's text.
//!
//! ```no_run
//! # async fn demo() -> Result<(), lrg_providers::ProviderError> {
//! use lrg_providers::anthropic::{AnthropicChat, AnthropicConfig};
//! use lrg_providers::{ChatModel, Message, TurnRequest, collect_turn};
//!
//! // ANTHROPIC_API_KEY (and optionally ANTHROPIC_BASE_URL) from the environment.
//! let config = AnthropicConfig::from_env("claude-sonnet-4-5")?.with_thinking_budget(2_048);
//! let model = AnthropicChat::new(config)?;
//! let request = TurnRequest::new(vec![Message::user("Hello")]);
//! let turn = collect_turn(model.turn(request, Default::default())).await?;
//! // Keep `turn.into_message()` in the history: its thinking blocks go back next turn.
//! println!("{}", turn.text());
//! # Ok(()) }
//! ```

mod answer;
mod decode;
mod encode;
mod models;

use reqwest::header::CONTENT_TYPE;
use tokio_util::sync::CancellationToken;

pub use answer::ANSWER_TOOL;
pub(crate) use answer::output_mode;
pub use decode::AnthropicDecoder;
pub use encode::encode;

use crate::endpoint::{host_of, key_header, normalize_base, sends_to};
use crate::transport::{HttpTransport, TransportConfig};
use crate::wire::Framing;
use crate::{ApiKey, ChatModel, ModelInfo, ModelLocation, ProviderError, TurnRequest, TurnStream};

/// Provider name used in model ids and on [`crate::NativePart`]s.
pub const PROVIDER: &str = "anthropic";
/// The API's default address.
pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";
/// The `anthropic-version` header this adapter speaks.
pub const API_VERSION: &str = "2023-06-01";
/// Context window of current Claude models.
pub const CLAUDE_CONTEXT_WINDOW: u32 = 200_000;
/// Answer budget when neither the request nor the config sets one.
pub const DEFAULT_MAX_TOKENS: u32 = 8_192;

/// How to reach Anthropic and what to ask for.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct AnthropicConfig {
    /// Base URL without `/v1` (e.g. `https://api.anthropic.com`, or a proxy).
    pub base_url: String,
    /// The API key, sent as `x-api-key`.
    pub api_key: Option<ApiKey>,
    /// Model name, e.g. `claude-sonnet-4-5`.
    pub model: String,
    /// Answer budget in tokens, unless the request sets one.
    pub max_tokens: u32,
    /// Sampling temperature, unless the request sets one (ignored with thinking on).
    pub temperature: Option<f32>,
    /// Extended thinking budget in tokens; `None` (the default) leaves thinking
    /// off. Anthropic requires at least 1,024. It is added on top of the answer
    /// budget, so thinking never eats the answer.
    pub thinking_budget: Option<u32>,
    /// Mark the system prompt, tools and conversation for prompt caching
    /// (default on).
    pub prompt_caching: bool,
    /// Context window reported by [`ChatModel::info`]; `new` fills in
    /// Claude's 200,000 tokens for `claude-*` models.
    pub context_window: Option<u32>,
    /// Timeouts.
    pub transport: TransportConfig,
}

impl AnthropicConfig {
    /// A config for `model` at the default address with `api_key`.
    pub fn new(model: impl Into<String>, api_key: ApiKey) -> Self {
        let model = model.into();
        let context_window = model.starts_with("claude").then_some(CLAUDE_CONTEXT_WINDOW);
        Self {
            base_url: DEFAULT_BASE_URL.to_string(),
            api_key: Some(api_key),
            model,
            max_tokens: DEFAULT_MAX_TOKENS,
            temperature: None,
            thinking_budget: None,
            prompt_caching: true,
            context_window,
            transport: TransportConfig::default(),
        }
    }

    /// With this base URL (a proxy, or a fake server in tests).
    pub fn with_base_url(mut self, url: impl Into<String>) -> Self {
        self.base_url = url.into();
        self
    }

    /// With this answer budget.
    pub fn with_max_tokens(mut self, max_tokens: u32) -> Self {
        self.max_tokens = max_tokens;
        self
    }

    /// With this temperature (not sent while thinking is on).
    pub fn with_temperature(mut self, temperature: f32) -> Self {
        self.temperature = Some(temperature);
        self
    }

    /// With extended thinking on, with this budget (at least 1,024 is sent).
    pub fn with_thinking_budget(mut self, tokens: u32) -> Self {
        self.thinking_budget = Some(tokens);
        self
    }

    /// With prompt caching on or off.
    pub fn with_prompt_caching(mut self, on: bool) -> Self {
        self.prompt_caching = on;
        self
    }

    /// With these timeouts.
    pub fn with_transport(mut self, transport: TransportConfig) -> Self {
        self.transport = transport;
        self
    }

    /// A config for `model` from `ANTHROPIC_API_KEY` and `ANTHROPIC_BASE_URL`
    /// (optional). A missing key is a [`ProviderError::Config`] naming the variable.
    pub fn from_env(model: impl Into<String>) -> Result<Self, ProviderError> {
        let key =
            ApiKey::from_env(&["ANTHROPIC_API_KEY"]).ok_or_else(|| ProviderError::Config {
                message: "no Anthropic API key: set ANTHROPIC_API_KEY".to_string(),
            })?;
        let mut config = Self::new(model, key);
        if let Some(url) = std::env::var("ANTHROPIC_BASE_URL")
            .ok()
            .filter(|u| !u.trim().is_empty())
        {
            config.base_url = url.trim().to_string();
        }
        Ok(config)
    }
}

/// Claude through the Messages API, as a [`ChatModel`].
#[derive(Debug, Clone)]
pub struct AnthropicChat {
    config: AnthropicConfig,
    base: String,
    transport: HttpTransport,
}

impl AnthropicChat {
    /// An adapter for `config`. Fails when there is no key or the base URL is
    /// not an http(s) URL.
    pub fn new(config: AnthropicConfig) -> Result<Self, ProviderError> {
        if config.api_key.is_none() {
            return Err(ProviderError::Config {
                message:
                    "no Anthropic API key: set ANTHROPIC_API_KEY or pass one in AnthropicConfig"
                        .into(),
            });
        }
        if config.model.trim().is_empty() {
            return Err(ProviderError::Config {
                message: "no Anthropic model name given".into(),
            });
        }
        let base = normalize_base(&config.base_url, "/v1", "Anthropic", "ANTHROPIC_BASE_URL")?;
        let transport = HttpTransport::new(config.transport.clone())?;
        Ok(Self {
            config,
            base,
            transport,
        })
    }

    /// The adapter's config.
    pub fn config(&self) -> &AnthropicConfig {
        &self.config
    }

    /// The models this key can use (`GET /v1/models`, all pages).
    pub async fn list_models(&self) -> Result<Vec<ModelInfo>, ProviderError> {
        models::list(self).await
    }

    /// Whether anything answers HTTP at the base URL.
    pub async fn reachable(&self) -> bool {
        self.transport.reachable(&self.base).await
    }

    fn request(
        &self,
        method: reqwest::Method,
        path: &str,
    ) -> Result<reqwest::RequestBuilder, ProviderError> {
        let url = reqwest::Url::parse(&format!("{}{path}", self.base)).map_err(|e| {
            ProviderError::Config {
                message: format!("bad Anthropic base URL: {e}"),
            }
        })?;
        self.request_url(method, url)
    }

    fn request_url(
        &self,
        method: reqwest::Method,
        url: reqwest::Url,
    ) -> Result<reqwest::RequestBuilder, ProviderError> {
        let key = self
            .config
            .api_key
            .as_ref()
            .ok_or_else(|| ProviderError::Config {
                message: "no Anthropic API key: set ANTHROPIC_API_KEY".into(),
            })?;
        let key_header = key_header(key, "Anthropic")?;
        Ok(self
            .transport
            .client()
            .request(method, url)
            .header("x-api-key", key_header)
            .header("anthropic-version", API_VERSION))
    }
}

impl ChatModel for AnthropicChat {
    fn info(&self) -> ModelInfo {
        ModelInfo::new(
            PROVIDER.to_string(),
            self.config.model.clone(),
            ModelLocation::Cloud,
        )
        .context_window(self.config.context_window)
        .sends_to(sends_to(&self.base))
        .output_mode(output_mode(&self.config.model))
    }

    fn turn(&self, request: TurnRequest, cancel: CancellationToken) -> TurnStream {
        let prepared = encode(&request, &self.config).and_then(|body| {
            let http = self.request(reqwest::Method::POST, "/v1/messages")?;
            Ok(http
                .header(CONTENT_TYPE, "application/json")
                .header("accept", "text/event-stream")
                .json(&body))
        });
        let http = match prepared {
            Ok(http) => http,
            Err(e) => return crate::model::failed_turn(e),
        };
        tracing::debug!(model = %self.config.model, host = ?host_of(&self.base), messages = request.messages.len(), "anthropic turn");
        let mut decoder = AnthropicDecoder::new(&self.config.model);
        if let Some(tool) = answer::answer_tool(&request, &self.config) {
            decoder = decoder.with_answer_tool(tool);
        }
        self.transport.stream(
            http,
            Framing::Sse,
            Box::new(decoder),
            self.config.api_key.clone(),
            cancel,
        )
    }
}
