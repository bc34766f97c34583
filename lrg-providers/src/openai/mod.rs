//! [`OpenAiChat`]: Chat Completions, for OpenAI and every OpenAI-compatible
//! server (LM Studio, Ollama's `/v1`, vLLM, llama.cpp's server, ...). What
//! differs between servers is data, in a [`Dialect`] — among it where a
//! typed answer's schema goes ([`SchemaField`]); a server that refuses it
//! with a 400 is asked once more with the schema in the instructions, and
//! that is remembered for the process.
//!
//! ```no_run
//! # async fn demo() -> Result<(), lrg_providers::ProviderError> {
//! use lrg_providers::openai::{Dialect, OpenAiChat, OpenAiConfig};
//! use lrg_providers::{ChatModel, Message, TurnRequest, collect_turn};
//!
//! let model = OpenAiChat::new(OpenAiConfig::for_dialect(Dialect::LMSTUDIO, "qwen3-8b")?)?;
//! let request = TurnRequest::new(vec![Message::user("Hello")]);
//! let turn = collect_turn(model.turn(request, Default::default())).await?;
//! println!("{}", turn.text());
//! # Ok(()) }
//! ```

mod decode;
mod dialect;
mod encode;
mod models;
mod output;

use std::sync::Arc;

use futures::StreamExt as _;
use tokio_util::sync::CancellationToken;

pub use decode::OpenAiDecoder;
pub(crate) use decode::{frame_error, parse_arguments, stream_error};
pub(crate) use dialect::OPENAI_REASONING_PREFIXES;
pub use dialect::{Dialect, MaxTokensField, ReasoningField, SchemaField};
pub use encode::encode;
use encode::encode_for;
pub(crate) use encode::{decimal, function_tool};
pub(crate) use models::parse_models;
pub(crate) use output::{system_with_instructions, tools_as_text, without_meta};

use crate::endpoint::{check_base_url, sends_to};
use crate::text_tools::{TextToolDecoder, TextTurn, ToolMode};
use crate::transport::{HttpTransport, TransportConfig};
use crate::typed::OutputMode;
use crate::wire::Framing;
use crate::{
    ApiKey, ChatModel, ModelInfo, ProviderError, StopReason, TurnEvent, TurnRequest, TurnStream,
};

/// Settings of an [`OpenAiChat`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct OpenAiConfig {
    /// Which kind of server this is.
    pub dialect: Dialect,
    /// Base URL up to and including `/v1`, e.g. `https://api.openai.com/v1`.
    pub base_url: String,
    /// Sent as a Bearer token; required by OpenAI itself.
    pub api_key: Option<ApiKey>,
    /// The server's model name.
    pub model: String,
    /// Answer budget; `None` uses the dialect's default.
    pub max_tokens: Option<u32>,
    /// Sampling temperature, sent where the dialect allows one.
    pub temperature: Option<f32>,
    /// Context window, when the caller knows it (from the model list).
    pub context_window: Option<u32>,
    /// Whether the model sees images (default: assumed, the server refuses
    /// them when it does not); reported in [`ModelInfo::vision`], so a
    /// session sends a text placeholder in place of each image when not.
    pub vision: bool,
    /// Timeouts.
    pub transport: TransportConfig,
    /// Whether tools go natively or as text in the model family's format.
    pub tool_mode: ToolMode,
}

impl OpenAiConfig {
    /// A config for `model` at `base_url`, speaking `dialect`, without a key.
    pub fn new(dialect: Dialect, base_url: impl Into<String>, model: impl Into<String>) -> Self {
        Self {
            dialect,
            base_url: base_url.into(),
            api_key: None,
            model: model.into(),
            max_tokens: None,
            temperature: None,
            context_window: None,
            vision: true,
            transport: TransportConfig::default(),
            tool_mode: ToolMode::Native,
        }
    }

    /// OpenAI itself: base URL from `OPENAI_BASE_URL` (else the public API),
    /// key from `OPENAI_API_KEY`, which must be set.
    pub fn from_env(model: impl Into<String>) -> Result<Self, ProviderError> {
        Self::for_dialect(Dialect::OPENAI, model)
    }

    /// A config for `dialect` from its env vars and defaults: base URL from
    /// its env var, else its default address; key from its env vars.
    pub fn for_dialect(dialect: Dialect, model: impl Into<String>) -> Result<Self, ProviderError> {
        let from_env = dialect
            .base_url_env
            .and_then(|var| std::env::var(var).ok())
            .filter(|v| !v.trim().is_empty());
        let Some(base_url) = from_env.or(dialect.default_base_url.map(str::to_string)) else {
            return Err(ProviderError::Config {
                message: format!(
                    "no base URL for {}: give the server's address, e.g. http://host:8000/v1",
                    dialect.name
                ),
            });
        };
        let mut config = Self::new(dialect, base_url.trim(), model);
        config.api_key = ApiKey::from_env(dialect.key_env);
        check_key(&config)?;
        Ok(config)
    }

    /// With this key.
    pub fn with_api_key(mut self, key: ApiKey) -> Self {
        self.api_key = Some(key);
        self
    }

    /// With this answer budget.
    pub fn with_max_tokens(mut self, max_tokens: u32) -> Self {
        self.max_tokens = Some(max_tokens);
        self
    }

    /// With this temperature (sent where the dialect allows one).
    pub fn with_temperature(mut self, temperature: f32) -> Self {
        self.temperature = Some(temperature);
        self
    }

    /// With these timeouts.
    pub fn with_transport(mut self, transport: TransportConfig) -> Self {
        self.transport = transport;
        self
    }

    /// With tools sent natively, as text, or by the model's profile.
    pub fn with_tool_mode(mut self, mode: ToolMode) -> Self {
        self.tool_mode = mode;
        self
    }

    /// With a known context window.
    pub fn with_context_window(mut self, tokens: u32) -> Self {
        self.context_window = Some(tokens);
        self
    }

    /// Whether the model sees images (as its server's model list says).
    pub fn with_vision(mut self, vision: bool) -> Self {
        self.vision = vision;
        self
    }

    fn endpoint(&self, path: &str) -> String {
        format!("{}/{path}", self.base_url.trim_end_matches('/'))
    }
}

fn check_key(config: &OpenAiConfig) -> Result<(), ProviderError> {
    if config.dialect.key_required && config.api_key.is_none() {
        let var = config
            .dialect
            .key_env
            .first()
            .copied()
            .unwrap_or("the API key");
        return Err(ProviderError::Config {
            message: format!("no API key for {}: set {var}", config.dialect.name),
        });
    }
    Ok(())
}

/// A model behind the Chat Completions API.
#[derive(Debug, Clone)]
pub struct OpenAiChat {
    config: Arc<OpenAiConfig>,
    transport: HttpTransport,
    url: String,
    /// Made once: the session asks for it every turn, and the host in it
    /// is parsed from the base URL.
    info: ModelInfo,
}

impl OpenAiChat {
    /// A model from its config; fails when a required key is missing or the
    /// base URL is not an http(s) URL.
    pub fn new(config: OpenAiConfig) -> Result<Self, ProviderError> {
        check_key(&config)?;
        check_base_url(&config.base_url)?;
        let transport = HttpTransport::new(config.transport.clone())?;
        let url = config.endpoint("chat/completions");
        let info = ModelInfo::new(
            config.dialect.provider.to_string(),
            config.model.clone(),
            config.dialect.location,
        )
        .context_window(config.context_window)
        .sends_to(sends_to(&config.base_url))
        .vision(config.vision)
        .output_mode(config.dialect.output_mode());
        Ok(Self {
            config: Arc::new(config),
            transport,
            url,
            info,
        })
    }

    /// The config in use.
    pub fn config(&self) -> &OpenAiConfig {
        &self.config
    }

    /// The models the server offers (`GET /models`), with context windows
    /// where the server reports them.
    pub async fn list_models(&self) -> Result<Vec<ModelInfo>, ProviderError> {
        let mut request = self.transport.client().get(self.config.endpoint("models"));
        if let Some(key) = &self.config.api_key {
            request = request.bearer_auth(key.expose());
        }
        let value = self
            .transport
            .get_json(request, self.config.api_key.as_ref())
            .await?;
        parse_models(
            &value,
            &self.config.dialect,
            sends_to(&self.config.base_url),
        )
    }

    /// Whether the server answers HTTP at all (any status counts).
    pub async fn reachable(&self) -> bool {
        self.transport
            .reachable(&self.config.endpoint("models"))
            .await
    }

    /// Where this model's requests put a typed answer's schema: nowhere
    /// when tools go as text, or when the server refused its dialect's field
    /// earlier in this process.
    fn schema_field(&self) -> SchemaField {
        let config = &self.config;
        if tools_as_text(config.tool_mode, &config.model)
            || output::refused(&config.base_url, &config.model)
        {
            SchemaField::Prompted
        } else {
            config.dialect.schema_field
        }
    }

    /// One request: `request` shaped for the tool mode, encoded with the
    /// schema through `field`, streamed.
    fn attempt(
        &self,
        request: TurnRequest,
        field: SchemaField,
        cancel: CancellationToken,
    ) -> TurnStream {
        let mut request = request;
        crate::text_tools::profile_sampling(
            self.config.tool_mode,
            &self.config.model,
            self.config.temperature,
            &mut request.settings,
        );
        let TextTurn { request, parser } =
            TextTurn::new(self.config.tool_mode, &self.config.model, request);
        let body = match encode_for(&request, &self.config, field) {
            Ok(body) => body,
            Err(e) => return crate::model::failed_turn(e),
        };
        let decoder = TextToolDecoder::wrap(
            OpenAiDecoder::new(self.config.dialect.reasoning_fields, &request.messages),
            parser,
        );
        tracing::debug!(
            server = self.config.dialect.name,
            model = %self.config.model,
            messages = request.messages.len(),
            tools = request.tools.len(),
            "chat completions turn"
        );
        let mut http = self.transport.client().post(&self.url).json(&body);
        if let Some(key) = &self.config.api_key {
            http = http.bearer_auth(key.expose());
        }
        self.transport.stream(
            http,
            Framing::Sse,
            decoder,
            self.config.api_key.clone(),
            cancel,
        )
    }
}

impl ChatModel for OpenAiChat {
    fn info(&self) -> ModelInfo {
        let mut info = self.info.clone();
        if self.schema_field() == SchemaField::Prompted {
            info.output_mode = OutputMode::Prompted;
        }
        info
    }

    /// A request whose schema the server refuses with a 400 is sent once
    /// more with the schema in the instructions; when that one is answered,
    /// the refusal is remembered for the process.
    fn turn(&self, request: TurnRequest, cancel: CancellationToken) -> TurnStream {
        let field = self.schema_field();
        let with_tools = self.config.dialect.schema_with_tools;
        if output::carried(&request, field, with_tools).is_none() {
            return self.attempt(request, field, cancel);
        }
        let mut first = self.attempt(request.clone(), field, cancel.clone());
        let this = self.clone();
        Box::pin(async_stream::stream! {
            let head = first.next().await;
            let refusal = match head {
                Some(Err(ProviderError::BadRequest { message })) => message,
                other => {
                    if let Some(item) = other {
                        yield item;
                    }
                    while let Some(item) = first.next().await {
                        yield item;
                    }
                    return;
                }
            };
            let config = &this.config;
            tracing::warn!(
                server = config.dialect.name,
                model = %config.model,
                error = %refusal,
                "the server refused the answer schema; asking again with it in the instructions"
            );
            let mut retry = this.attempt(request, SchemaField::Prompted, cancel);
            let head = retry.next().await;
            let answered = matches!(&head, Some(Ok(event))
                if *event != TurnEvent::End { stop: StopReason::Cancelled });
            if answered {
                output::learn_refused(&config.base_url, &config.model);
            }
            if let Some(item) = head {
                yield item;
            }
            while let Some(item) = retry.next().await {
                yield item;
            }
        })
    }
}

#[cfg(test)]
mod tests;
