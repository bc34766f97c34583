//! Google's Gemini API: `streamGenerateContent?alt=sse` (and `generateContent`
//! for whole answers), decoded by the same state machine.
//!
//! [`GeminiChat`] encodes a [`TurnRequest`] ([`encode`]), sends it with the key
//! in the `x-goog-api-key` header (never in the URL), and decodes the answer
//! ([`GeminiDecoder`]). Thought parts become reasoning deltas; each `thoughtSignature`
//! is kept as a [`crate::NativePart`] right after the part it came with, and
//! goes back on that same part.
//!
//! ```no_run
//! # async fn demo() -> Result<(), lrg_providers::ProviderError> {
//! use lrg_providers::gemini::{GeminiChat, GeminiConfig};
//! use lrg_providers::{ChatModel, Message, TurnRequest, collect_turn};
//!
//! // GEMINI_API_KEY (or GOOGLE_API_KEY), and optionally GEMINI_BASE_URL.
//! let model = GeminiChat::new(GeminiConfig::from_env("gemini-2.5-flash")?)?;
//! let request = TurnRequest::new(vec![Message::user("Hello")]);
//! let turn = collect_turn(model.turn(request, Default::default())).await?;
//! println!("{}", turn.text());
//! # Ok(()) }
//! ```

mod decode;
mod encode;
mod models;
mod output;

use futures::StreamExt as _;
use reqwest::header::CONTENT_TYPE;
use tokio_util::sync::CancellationToken;

pub use decode::GeminiDecoder;
pub use encode::encode;

use crate::endpoint::{host_of, key_header, normalize_base, sends_to};
use crate::transport::{HttpTransport, TransportConfig};
use crate::wire::{Decoder, Frame, Framing};
use crate::{
    ApiKey, ChatModel, ModelInfo, ModelLocation, ProviderError, StopReason, TurnEvent, TurnRequest,
    TurnStream,
};

/// Provider name used in model ids and on [`crate::NativePart`]s.
pub const PROVIDER: &str = "gemini";
/// The API's default address.
pub const DEFAULT_BASE_URL: &str = "https://generativelanguage.googleapis.com";
/// Answer budget when neither the request nor the config sets one.
pub const DEFAULT_MAX_TOKENS: u32 = 8_192;

/// How to reach Gemini and what to ask for.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct GeminiConfig {
    /// Base URL without `/v1beta`.
    pub base_url: String,
    /// The API key, sent as `x-goog-api-key`.
    pub api_key: Option<ApiKey>,
    /// Model name, e.g. `gemini-2.5-flash` (a `models/` prefix is accepted).
    pub model: String,
    /// Answer budget in tokens (`maxOutputTokens`), unless the request sets one.
    pub max_tokens: u32,
    /// Sampling temperature, unless the request sets one.
    pub temperature: Option<f32>,
    /// Ask for thought summaries (`thinkingConfig.includeThoughts`). `None`
    /// asks thinking models only (2.5, 3 and `*thinking*` names): older models
    /// reject the setting.
    pub include_thoughts: Option<bool>,
    /// `thinkingConfig.thinkingBudget` in tokens, when set.
    pub thinking_budget: Option<u32>,
    /// Stream the answer (`streamGenerateContent?alt=sse`, the default) or
    /// fetch it whole (`generateContent`).
    pub streaming: bool,
    /// Context window reported by [`ChatModel::info`], when known (the model
    /// list's `inputTokenLimit`).
    pub context_window: Option<u32>,
    /// Timeouts.
    pub transport: TransportConfig,
}

impl GeminiConfig {
    /// A config for `model` at the default address with `api_key`.
    pub fn new(model: impl Into<String>, api_key: ApiKey) -> Self {
        Self {
            base_url: DEFAULT_BASE_URL.to_string(),
            api_key: Some(api_key),
            model: model.into(),
            max_tokens: DEFAULT_MAX_TOKENS,
            temperature: None,
            include_thoughts: None,
            thinking_budget: None,
            streaming: true,
            context_window: None,
            transport: TransportConfig::default(),
        }
    }

    /// A config for `model` from `GEMINI_API_KEY` (else `GOOGLE_API_KEY`) and
    /// `GEMINI_BASE_URL` (optional). A missing key is a
    /// [`ProviderError::Config`] naming the variables.
    pub fn from_env(model: impl Into<String>) -> Result<Self, ProviderError> {
        let key = ApiKey::from_env(&["GEMINI_API_KEY", "GOOGLE_API_KEY"]).ok_or_else(|| {
            ProviderError::Config {
                message: "no Gemini API key: set GEMINI_API_KEY (or GOOGLE_API_KEY)".into(),
            }
        })?;
        let mut config = Self::new(model, key);
        if let Some(url) = std::env::var("GEMINI_BASE_URL")
            .ok()
            .filter(|u| !u.trim().is_empty())
        {
            config.base_url = url.trim().to_string();
        }
        Ok(config)
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

    /// With this temperature.
    pub fn with_temperature(mut self, temperature: f32) -> Self {
        self.temperature = Some(temperature);
        self
    }

    /// Ask for thought summaries, or not, whatever the model name suggests.
    pub fn with_include_thoughts(mut self, on: bool) -> Self {
        self.include_thoughts = Some(on);
        self
    }

    /// With a thinking budget.
    pub fn with_thinking_budget(mut self, tokens: u32) -> Self {
        self.thinking_budget = Some(tokens);
        self
    }

    /// Stream answers (default) or fetch them whole.
    pub fn with_streaming(mut self, on: bool) -> Self {
        self.streaming = on;
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

    /// The model name without a `models/` prefix.
    fn model_name(&self) -> &str {
        let model = self.model.trim();
        model.strip_prefix("models/").unwrap_or(model)
    }
}

/// Gemini through the Gemini API, as a [`ChatModel`].
#[derive(Debug, Clone)]
pub struct GeminiChat {
    config: GeminiConfig,
    base: String,
    transport: HttpTransport,
}

impl GeminiChat {
    /// An adapter for `config`. Fails when there is no key, the model name
    /// cannot go in a URL path, or the base URL is not an http(s) URL.
    pub fn new(config: GeminiConfig) -> Result<Self, ProviderError> {
        if config.api_key.is_none() {
            return Err(ProviderError::Config {
                message: "no Gemini API key: set GEMINI_API_KEY (or GOOGLE_API_KEY) or pass one in GeminiConfig"
                    .into(),
            });
        }
        let name = config.model_name();
        let valid = !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
        if !valid {
            return Err(ProviderError::Config {
                message: format!(
                    "`{}` is not a Gemini model name (letters, digits, `-`, `_`, `.`)",
                    config.model
                ),
            });
        }
        let base = normalize_base(&config.base_url, "/v1beta", "Gemini", "GEMINI_BASE_URL")?;
        let transport = HttpTransport::new(config.transport.clone())?;
        Ok(Self {
            config,
            base,
            transport,
        })
    }

    /// The adapter's config.
    pub fn config(&self) -> &GeminiConfig {
        &self.config
    }

    /// The models this key can use for chat (`GET /v1beta/models`, all pages),
    /// with their input token limits as context windows.
    pub async fn list_models(&self) -> Result<Vec<ModelInfo>, ProviderError> {
        models::list(self).await.map_err(bad_key_is_auth)
    }

    /// Whether anything answers HTTP at the base URL.
    pub async fn reachable(&self) -> bool {
        self.transport.reachable(&self.base).await
    }

    fn request(
        &self,
        method: reqwest::Method,
        url: reqwest::Url,
    ) -> Result<reqwest::RequestBuilder, ProviderError> {
        let key = self
            .config
            .api_key
            .as_ref()
            .ok_or_else(|| ProviderError::Config {
                message: "no Gemini API key: set GEMINI_API_KEY (or GOOGLE_API_KEY)".into(),
            })?;
        let key_header = key_header(key, "Gemini")?;
        Ok(self
            .transport
            .client()
            .request(method, url)
            .header("x-goog-api-key", key_header))
    }

    fn url(&self, path: &str) -> Result<reqwest::Url, ProviderError> {
        reqwest::Url::parse(&format!("{}{path}", self.base)).map_err(|e| ProviderError::Config {
            message: format!("bad Gemini base URL: {e}"),
        })
    }

    fn prepare(&self, request: &TurnRequest) -> Result<reqwest::RequestBuilder, ProviderError> {
        let body = encode(request, &self.config)?;
        let model = self.config.model_name();
        let path = if self.config.streaming {
            format!("/v1beta/models/{model}:streamGenerateContent?alt=sse")
        } else {
            format!("/v1beta/models/{model}:generateContent")
        };
        let http = self.request(reqwest::Method::POST, self.url(&path)?)?;
        Ok(http.header(CONTENT_TYPE, "application/json").json(&body))
    }

    /// `generateContent`: one JSON answer, fed to the decoder as one frame.
    fn whole(&self, http: reqwest::RequestBuilder, cancel: CancellationToken) -> TurnStream {
        let transport = self.transport.clone();
        let key = self.config.api_key.clone();
        let mut decoder = GeminiDecoder::new(self.config.model_name());
        Box::pin(async_stream::stream! {
            let answer = tokio::select! {
                _ = cancel.cancelled() => {
                    yield Ok(TurnEvent::End { stop: StopReason::Cancelled });
                    return;
                }
                a = transport.get_json(http, key.as_ref()) => a,
            };
            let mut events = Vec::new();
            let decoded = answer.and_then(|value| {
                decoder.decode(&Frame { event: None, data: value.to_string() }, &mut events)?;
                decoder.finish(&mut events)
            });
            for event in events {
                yield Ok(event);
            }
            if let Err(e) = decoded {
                yield Err(e);
            }
        })
    }
}

impl ChatModel for GeminiChat {
    fn info(&self) -> ModelInfo {
        ModelInfo::new(
            PROVIDER.to_string(),
            self.config.model_name().to_string(),
            ModelLocation::Cloud,
        )
        .context_window(self.config.context_window)
        .sends_to(sends_to(&self.base))
        .output_mode(output::output_mode(self.config.model_name()))
    }

    fn turn(&self, request: TurnRequest, cancel: CancellationToken) -> TurnStream {
        let http = match self.prepare(&request) {
            Ok(http) => http,
            Err(e) => return crate::model::failed_turn(e),
        };
        tracing::debug!(
            model = %self.config.model_name(),
            host = ?host_of(&self.base),
            messages = request.messages.len(),
            streaming = self.config.streaming,
            "gemini turn"
        );
        let stream = if self.config.streaming {
            let decoder = GeminiDecoder::new(self.config.model_name());
            let key = self.config.api_key.clone();
            self.transport
                .stream(http, Framing::Sse, Box::new(decoder), key, cancel)
        } else {
            self.whole(http, cancel)
        };
        Box::pin(stream.map(|item| item.map_err(bad_key_is_auth)))
    }
}

/// Gemini answers a wrong key with 400 INVALID_ARGUMENT, not 401: make it
/// the fatal auth error it is, so the user is told to check the key.
fn bad_key_is_auth(error: ProviderError) -> ProviderError {
    match error {
        ProviderError::BadRequest { message } if message.contains("API key not valid") => {
            ProviderError::Auth {
                message: format!("{message} (check GEMINI_API_KEY)"),
            }
        }
        other => other,
    }
}
