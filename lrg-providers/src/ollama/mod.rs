//! [`OllamaChat`]: Ollama's native `/api/chat`, streamed as NDJSON, with
//! thinking as reasoning and tool calls that arrive whole.
//!
//! ```no_run
//! # async fn demo() -> Result<(), lrg_providers::ProviderError> {
//! use lrg_providers::ollama::{OllamaChat, OllamaConfig};
//! use lrg_providers::{ChatModel, Message, TurnRequest, collect_turn};
//!
//! let model = OllamaChat::new(OllamaConfig::from_env("qwen3:8b")?)?;
//! for listed in model.list_models().await? {
//!     println!("{} ({:?} tokens)", listed.model, listed.context_window);
//! }
//! let request = TurnRequest::new(vec![Message::user("Hello")]);
//! let turn = collect_turn(model.turn(request, Default::default())).await?;
//! println!("{}", turn.text());
//! # Ok(()) }
//! ```

mod decode;
mod encode;
mod models;

use tokio_util::sync::CancellationToken;

pub use decode::OllamaDecoder;
pub use encode::{DEFAULT_NUM_PREDICT, encode};
pub(crate) use models::list_detailed;

use crate::endpoint::{check_base_url, sends_to};
use crate::text_tools::{TextToolDecoder, TextTurn, ToolMode};
use crate::transport::{HttpTransport, TransportConfig};
use crate::typed::OutputMode;
use crate::wire::Framing;
use crate::{ChatModel, ModelInfo, ModelLocation, ProviderError, TurnRequest, TurnStream};

/// Where Ollama listens when `OLLAMA_HOST` is not set.
pub const DEFAULT_HOST: &str = "http://127.0.0.1:11434";

/// Settings of an [`OllamaChat`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct OllamaConfig {
    /// The server, e.g. `http://127.0.0.1:11434` (no `/api`).
    pub base_url: String,
    /// The model name, e.g. `qwen3:8b`.
    pub model: String,
    /// Answer budget (`options.num_predict`); `None`: [`DEFAULT_NUM_PREDICT`].
    pub max_tokens: Option<u32>,
    /// Sampling temperature (`options.temperature`).
    pub temperature: Option<f32>,
    /// Turn thinking on or off for thinking models (`think`); `None` leaves
    /// the model's default.
    pub think: Option<bool>,
    /// Context window, when the caller knows it (from the model list).
    pub context_window: Option<u32>,
    /// Whether the model sees images (default: assumed, the server refuses
    /// them when it does not); reported in [`ModelInfo::vision`], so a
    /// session sends a text placeholder in place of each image when not.
    pub vision: bool,
    /// Timeouts.
    pub transport: TransportConfig,
    /// Whether tools go natively or as text in the model family's format
    /// (for a model whose Ollama template has no tool support).
    pub tool_mode: ToolMode,
}

impl OllamaConfig {
    /// A config for `model` on the server at `base_url`.
    pub fn new(base_url: impl Into<String>, model: impl Into<String>) -> Self {
        Self {
            base_url: base_url.into(),
            model: model.into(),
            max_tokens: None,
            temperature: None,
            think: None,
            context_window: None,
            vision: true,
            transport: TransportConfig::default(),
            tool_mode: ToolMode::Native,
        }
    }

    /// The server named by `OLLAMA_HOST` (see [`parse_host`]), else
    /// [`DEFAULT_HOST`].
    pub fn from_env(model: impl Into<String>) -> Result<Self, ProviderError> {
        let base_url = match std::env::var("OLLAMA_HOST") {
            Ok(host) if !host.trim().is_empty() => parse_host(&host),
            _ => DEFAULT_HOST.to_string(),
        };
        check_base_url(&base_url).map_err(|_| ProviderError::Config {
            message: format!("OLLAMA_HOST does not name a server: expected host:port or http://host:port, got {base_url:?}"),
        })?;
        Ok(Self::new(base_url, model))
    }

    /// With this answer budget.
    pub fn with_max_tokens(mut self, max_tokens: u32) -> Self {
        self.max_tokens = Some(max_tokens);
        self
    }

    /// With this temperature.
    pub fn with_temperature(mut self, temperature: f32) -> Self {
        self.temperature = Some(temperature);
        self
    }

    /// With thinking turned on or off.
    pub fn with_think(mut self, think: bool) -> Self {
        self.think = Some(think);
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
}

/// `OLLAMA_HOST` as a base URL, read the way Ollama's own client reads it:
/// the scheme is optional (`http`), so is the port (11434 without a scheme,
/// else the scheme's own), and a bind-all or empty host means this machine.
pub fn parse_host(host: &str) -> String {
    let host = host.trim();
    let (scheme, rest, default_port) = match host.split_once("://") {
        Some(("https", rest)) => ("https", rest, "443"),
        Some((scheme, rest)) => (scheme, rest, if scheme == "http" { "80" } else { "11434" }),
        None => ("http", host, "11434"),
    };
    let (authority, path) = match rest.split_once('/') {
        Some((a, p)) => (a, p.trim_end_matches('/')),
        None => (rest, ""),
    };
    let (name, port) = split_host_port(authority);
    let name = match name {
        "" | "0.0.0.0" => "127.0.0.1",
        "::" | "[::]" => "[::1]",
        other => other,
    };
    let name = if name.contains(':') && !name.starts_with('[') {
        format!("[{name}]")
    } else {
        name.to_string()
    };
    let port = port
        .filter(|p| p.parse::<u16>().is_ok())
        .unwrap_or(default_port);
    let path = if path.is_empty() {
        String::new()
    } else {
        format!("/{path}")
    };
    format!("{scheme}://{name}:{port}{path}")
}

fn split_host_port(authority: &str) -> (&str, Option<&str>) {
    if let Some(rest) = authority.strip_prefix('[') {
        // [v6]:port or [v6]
        return match rest.split_once(']') {
            Some((ip, tail)) => (&authority[..ip.len() + 2], tail.strip_prefix(':')),
            None => (authority, None),
        };
    }
    match authority.rsplit_once(':') {
        // A bare IPv6 address has several colons and no port.
        Some((name, _)) if name.contains(':') => (authority, None),
        Some((name, port)) => (name, Some(port)),
        None => (authority, None),
    }
}

/// A model on an Ollama server, through its native API.
#[derive(Debug, Clone)]
pub struct OllamaChat {
    config: OllamaConfig,
    transport: HttpTransport,
}

impl OllamaChat {
    /// A model from its config; fails when the base URL is not http(s).
    pub fn new(config: OllamaConfig) -> Result<Self, ProviderError> {
        check_base_url(&config.base_url)?;
        let transport = HttpTransport::new(config.transport.clone())?;
        Ok(Self { config, transport })
    }

    /// The config in use.
    pub fn config(&self) -> &OllamaConfig {
        &self.config
    }

    /// The server's models (`/api/tags`), each with its context length from
    /// `/api/show` (asked concurrently; unknown where a `show` fails).
    pub async fn list_models(&self) -> Result<Vec<ModelInfo>, ProviderError> {
        models::list(self).await
    }

    /// Whether the server answers HTTP at all (any status counts).
    pub async fn reachable(&self) -> bool {
        self.transport
            .reachable(&self.endpoint("api/version"))
            .await
    }

    fn endpoint(&self, path: &str) -> String {
        format!("{}/{path}", self.config.base_url.trim_end_matches('/'))
    }

    fn info_sends_to(&self) -> Option<String> {
        sends_to(&self.config.base_url)
    }
}

impl ChatModel for OllamaChat {
    fn info(&self) -> ModelInfo {
        let mode = if crate::openai::tools_as_text(self.config.tool_mode, &self.config.model) {
            OutputMode::Prompted
        } else {
            OutputMode::Native
        };
        ModelInfo::new("ollama", self.config.model.clone(), ModelLocation::Server)
            .context_window(self.config.context_window)
            .sends_to(self.info_sends_to())
            .vision(self.config.vision)
            .output_mode(mode)
    }

    fn turn(&self, mut request: TurnRequest, cancel: CancellationToken) -> TurnStream {
        crate::text_tools::profile_sampling(
            self.config.tool_mode,
            &self.config.model,
            self.config.temperature,
            &mut request.settings,
        );
        let TextTurn { request, parser } =
            TextTurn::new(self.config.tool_mode, &self.config.model, request);
        let body = match encode(&request, &self.config) {
            Ok(body) => body,
            Err(e) => return crate::model::failed_turn(e),
        };
        let decoder = TextToolDecoder::wrap(OllamaDecoder::new(&request.messages), parser);
        tracing::debug!(model = %self.config.model, messages = request.messages.len(), tools = request.tools.len(), "ollama chat turn");
        let http = self
            .transport
            .client()
            .post(self.endpoint("api/chat"))
            .json(&body);
        self.transport
            .stream(http, Framing::Ndjson, decoder, None, cancel)
    }
}

#[cfg(test)]
mod tests;
