//! [`ResponsesChat`]: OpenAI's Responses API (`POST /responses`), streamed as
//! semantic events; also xAI's, which speaks the same API. What differs
//! between the two hosts is data, in a [`ResponsesHost`].
//!
//! Preferred over Chat Completions for reasoning models: their reasoning
//! items come back as [`crate::NativePart`]s (with `encrypted_content`) and go
//! back unchanged with the tool results, so the model keeps its chain of
//! thought across tool calls while nothing is stored on the server
//! (`store: false`). Servers that store responses can be used with
//! [`ResponsesConfig::with_previous_response_id`] instead, which then sends
//! only what follows the last response.
//!
//! ```no_run
//! # async fn demo() -> Result<(), lrg_providers::ProviderError> {
//! use lrg_providers::responses::{ResponsesChat, ResponsesConfig, ResponsesHost};
//! use lrg_providers::{ChatModel, Message, TurnRequest, collect_turn};
//!
//! // OPENAI_API_KEY (and optionally OPENAI_BASE_URL) from the environment.
//! let model = ResponsesChat::new(ResponsesConfig::from_env(ResponsesHost::OPENAI, "o4-mini")?)?;
//! let request = TurnRequest::new(vec![Message::user("Hello")]);
//! let turn = collect_turn(model.turn(request, Default::default())).await?;
//! // Keep `turn.into_message()` in the history: its reasoning items go back next turn.
//! println!("{}", turn.text());
//! # Ok(()) }
//! ```

mod decode;
mod encode;
mod host;

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

pub use decode::ResponsesDecoder;
pub use encode::encode;
pub use host::ResponsesHost;

use crate::endpoint::{check_base_url, sends_to};
use crate::model::failed_turn as failed;
use crate::openai::{Dialect, parse_models};
use crate::transport::{HttpTransport, TransportConfig};
use crate::typed::OutputMode;
use crate::wire::Framing;
use crate::{ApiKey, ChatModel, ModelInfo, ModelLocation, ProviderError, TurnRequest, TurnStream};

/// The `type` of the native part that keeps a stored response's id (never
/// sent as an input item; only read for `previous_response_id`).
pub const RESPONSE_ID: &str = "lrg_response_id";

/// How much a reasoning model thinks before it answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReasoningEffort {
    /// As little as the model allows.
    Minimal,
    /// Less than the default.
    Low,
    /// The model's default.
    Medium,
    /// More than the default.
    High,
}

impl ReasoningEffort {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            ReasoningEffort::Minimal => "minimal",
            ReasoningEffort::Low => "low",
            ReasoningEffort::Medium => "medium",
            ReasoningEffort::High => "high",
        }
    }
}

/// Settings of a [`ResponsesChat`]. `Debug` never shows the key.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ResponsesConfig {
    /// Which host this is.
    pub host: ResponsesHost,
    /// Base URL up to and including `/v1`, e.g. `https://api.openai.com/v1`.
    pub base_url: String,
    /// Sent as a Bearer token.
    pub api_key: Option<ApiKey>,
    /// The host's model name.
    pub model: String,
    /// Answer budget (reasoning included); `None` uses the host's default.
    pub max_tokens: Option<u32>,
    /// Sampling temperature, sent to models that are not reasoning models.
    pub temperature: Option<f32>,
    /// Whether the model reasons; `None` decides by its name.
    pub reasoning: Option<bool>,
    /// How hard a reasoning model thinks; `None` leaves the host's default.
    pub reasoning_effort: Option<ReasoningEffort>,
    /// Let the server store responses and send `previous_response_id`
    /// (only the new tail of the conversation) instead of the whole history.
    pub previous_response_id: bool,
    /// Context window, when the caller knows it.
    pub context_window: Option<u32>,
    /// Timeouts.
    pub transport: TransportConfig,
}

impl ResponsesConfig {
    /// A config for `model` at `base_url` on `host`, without a key.
    pub fn new(host: ResponsesHost, base_url: impl Into<String>, model: impl Into<String>) -> Self {
        Self {
            host,
            base_url: base_url.into(),
            api_key: None,
            model: model.into(),
            max_tokens: None,
            temperature: None,
            reasoning: None,
            reasoning_effort: None,
            previous_response_id: false,
            context_window: None,
            transport: TransportConfig::default(),
        }
    }

    /// A config for `host` from its env vars: base URL from its variable
    /// (else its public address), key from its variables, which must be set.
    pub fn from_env(host: ResponsesHost, model: impl Into<String>) -> Result<Self, ProviderError> {
        let base_url = std::env::var(host.base_url_env)
            .ok()
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
            .unwrap_or_else(|| host.default_base_url.to_string());
        let mut config = Self::new(host, base_url, model);
        config.api_key = ApiKey::from_env(host.key_env);
        check_key(&config)?;
        Ok(config)
    }

    /// With this key.
    pub fn with_api_key(mut self, key: ApiKey) -> Self {
        self.api_key = Some(key);
        self
    }

    /// With this base URL (a proxy, or a fake server in tests).
    pub fn with_base_url(mut self, url: impl Into<String>) -> Self {
        self.base_url = url.into();
        self
    }

    /// With this answer budget.
    pub fn with_max_tokens(mut self, max_tokens: u32) -> Self {
        self.max_tokens = Some(max_tokens);
        self
    }

    /// With this temperature (not sent to reasoning models).
    pub fn with_temperature(mut self, temperature: f32) -> Self {
        self.temperature = Some(temperature);
        self
    }

    /// Say whether the model reasons, rather than judging by its name.
    pub fn with_reasoning(mut self, reasons: bool) -> Self {
        self.reasoning = Some(reasons);
        self
    }

    /// With this reasoning effort.
    pub fn with_reasoning_effort(mut self, effort: ReasoningEffort) -> Self {
        self.reasoning_effort = Some(effort);
        self
    }

    /// Store responses on the server and chain turns by
    /// `previous_response_id`.
    pub fn with_previous_response_id(mut self, on: bool) -> Self {
        self.previous_response_id = on;
        self
    }

    /// With a known context window.
    pub fn with_context_window(mut self, tokens: u32) -> Self {
        self.context_window = Some(tokens);
        self
    }

    /// With these timeouts.
    pub fn with_transport(mut self, transport: TransportConfig) -> Self {
        self.transport = transport;
        self
    }

    /// Whether the model is treated as a reasoning model.
    pub fn reasons(&self) -> bool {
        self.reasoning
            .unwrap_or_else(|| self.host.is_reasoning_model(&self.model))
    }

    fn endpoint(&self, path: &str) -> String {
        format!("{}/{path}", self.base_url.trim_end_matches('/'))
    }
}

fn check_key(config: &ResponsesConfig) -> Result<(), ProviderError> {
    if config.api_key.is_none() {
        let var = config
            .host
            .key_env
            .first()
            .copied()
            .unwrap_or("the API key");
        return Err(ProviderError::Config {
            message: format!("no API key for {}: set {var}", config.host.name),
        });
    }
    Ok(())
}

/// A model behind the Responses API.
#[derive(Debug, Clone)]
pub struct ResponsesChat {
    config: Arc<ResponsesConfig>,
    transport: HttpTransport,
    url: String,
}

impl ResponsesChat {
    /// A model from its config; fails when the key is missing or the base
    /// URL is not an http(s) URL.
    pub fn new(config: ResponsesConfig) -> Result<Self, ProviderError> {
        check_key(&config)?;
        check_base_url(&config.base_url)?;
        let transport = HttpTransport::new(config.transport.clone())?;
        let url = config.endpoint("responses");
        Ok(Self {
            config: Arc::new(config),
            transport,
            url,
        })
    }

    /// The config in use.
    pub fn config(&self) -> &ResponsesConfig {
        &self.config
    }

    /// The models the host offers (`GET /models`).
    pub async fn list_models(&self) -> Result<Vec<ModelInfo>, ProviderError> {
        let mut request = self.transport.client().get(self.config.endpoint("models"));
        if let Some(key) = &self.config.api_key {
            request = request.bearer_auth(key.expose());
        }
        let value = self
            .transport
            .get_json(request, self.config.api_key.as_ref())
            .await?;
        let dialect = Dialect {
            provider: self.config.host.provider,
            location: ModelLocation::Cloud,
            ..Dialect::OPENAI
        };
        parse_models(&value, &dialect, sends_to(&self.config.base_url))
    }
}

impl ChatModel for ResponsesChat {
    fn info(&self) -> ModelInfo {
        ModelInfo::new(
            self.config.host.provider,
            self.config.model.clone(),
            ModelLocation::Cloud,
        )
        .context_window(self.config.context_window)
        .sends_to(sends_to(&self.config.base_url))
        .output_mode(OutputMode::NativeStrict)
    }

    fn turn(&self, request: TurnRequest, cancel: CancellationToken) -> TurnStream {
        let body = match encode(&request, &self.config) {
            Ok(body) => body,
            Err(e) => return failed(e),
        };
        let decoder = ResponsesDecoder::new(
            self.config.host.provider,
            &self.config.model,
            self.config.previous_response_id,
            &request.messages,
        );
        tracing::debug!(
            host = self.config.host.name,
            model = %self.config.model,
            messages = request.messages.len(),
            tools = request.tools.len(),
            "responses turn"
        );
        let mut http = self
            .transport
            .client()
            .post(&self.url)
            .header(reqwest::header::ACCEPT, "text/event-stream")
            .json(&body);
        if let Some(key) = &self.config.api_key {
            http = http.bearer_auth(key.expose());
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
