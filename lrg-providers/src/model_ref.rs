//! `provider:model` references, e.g. `openai:gpt-4.1` or `ollama:qwen3:8b`.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// The providers lrg knows how to reach.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Provider {
    /// OpenAI's cloud API.
    OpenAi,
    /// Anthropic's Messages API.
    Anthropic,
    /// Google's Gemini API.
    Gemini,
    /// An Ollama server (native `/api/chat`).
    Ollama,
    /// An LM Studio server (OpenAI-compatible).
    LmStudio,
    /// Any other OpenAI-compatible server, at a configured base URL.
    Server,
    /// OpenAI through the Responses API.
    #[serde(rename = "openai-responses")]
    OpenAiResponses,
    /// xAI (Grok) through the Responses API.
    Xai,
    /// OpenRouter (Chat Completions).
    OpenRouter,
    /// Groq (Chat Completions).
    Groq,
    /// Together AI (Chat Completions).
    Together,
    /// DeepSeek (Chat Completions).
    DeepSeek,
    /// Mistral (Chat Completions).
    Mistral,
    /// Claude Code, logged in on this machine (chat only).
    #[serde(rename = "claude-cli")]
    ClaudeCli,
    /// The Codex CLI, logged in on this machine (chat only).
    #[serde(rename = "codex-cli")]
    CodexCli,
    /// The Gemini CLI, logged in on this machine (chat only).
    #[serde(rename = "gemini-cli")]
    GeminiCli,
    /// A GGUF file run in-process by llama.cpp.
    Llama,
    /// A model directory run by the MLX sidecar.
    Mlx,
    /// A [`crate::ScriptedModel`] JSON file.
    Script,
    /// A recording played back.
    Replay,
}

impl Provider {
    /// Every provider, in display order.
    pub const ALL: [Provider; 20] = [
        Provider::OpenAi,
        Provider::Anthropic,
        Provider::Gemini,
        Provider::Ollama,
        Provider::LmStudio,
        Provider::Server,
        Provider::OpenAiResponses,
        Provider::Xai,
        Provider::OpenRouter,
        Provider::Groq,
        Provider::Together,
        Provider::DeepSeek,
        Provider::Mistral,
        Provider::ClaudeCli,
        Provider::CodexCli,
        Provider::GeminiCli,
        Provider::Llama,
        Provider::Mlx,
        Provider::Script,
        Provider::Replay,
    ];

    /// The prefix used in model ids.
    pub fn as_str(self) -> &'static str {
        match self {
            Provider::OpenAi => "openai",
            Provider::Anthropic => "anthropic",
            Provider::Gemini => "gemini",
            Provider::Ollama => "ollama",
            Provider::LmStudio => "lmstudio",
            Provider::Server => "server",
            Provider::OpenAiResponses => "openai-responses",
            Provider::Xai => "xai",
            Provider::OpenRouter => "openrouter",
            Provider::Groq => "groq",
            Provider::Together => "together",
            Provider::DeepSeek => "deepseek",
            Provider::Mistral => "mistral",
            Provider::ClaudeCli => "claude-cli",
            Provider::CodexCli => "codex-cli",
            Provider::GeminiCli => "gemini-cli",
            Provider::Llama => "llama",
            Provider::Mlx => "mlx",
            Provider::Script => "script",
            Provider::Replay => "replay",
        }
    }

    /// Whether the conversation leaves the machine for a third party's cloud.
    pub fn is_cloud(self) -> bool {
        matches!(
            self,
            Provider::OpenAi
                | Provider::Anthropic
                | Provider::Gemini
                | Provider::OpenAiResponses
                | Provider::Xai
                | Provider::OpenRouter
                | Provider::Groq
                | Provider::Together
                | Provider::DeepSeek
                | Provider::Mistral
                | Provider::ClaudeCli
                | Provider::CodexCli
                | Provider::GeminiCli
        )
    }
}

impl fmt::Display for Provider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Provider {
    type Err = ModelRefError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Provider::ALL
            .into_iter()
            .find(|p| p.as_str() == s)
            .ok_or_else(|| ModelRefError::UnknownProvider(s.to_string()))
    }
}

/// A parsed `provider:model` id. The model part may itself contain colons.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ModelRef {
    /// Which provider.
    pub provider: Provider,
    /// The provider's model name, or a path for local engines and files.
    pub model: String,
}

/// Why a model id could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModelRefError {
    /// Nothing was given.
    #[error("empty model id; expected provider:model, e.g. openai:gpt-4.1")]
    Empty,
    /// No colon, or nothing before it.
    #[error("model id {0:?} has no provider; expected provider:model, e.g. ollama:qwen3:8b")]
    MissingProvider(String),
    /// Nothing after the colon.
    #[error("model id {0:?} has no model after the provider")]
    MissingModel(String),
    /// The provider is not one lrg knows.
    #[error(
        "unknown provider {0:?}; known: openai, anthropic, gemini, ollama, lmstudio, server, openai-responses, xai, openrouter, groq, together, deepseek, mistral, claude-cli, codex-cli, gemini-cli, llama, mlx, script, replay"
    )]
    UnknownProvider(String),
}

impl ModelRef {
    /// A reference from its parts.
    pub fn new(provider: Provider, model: impl Into<String>) -> Self {
        Self {
            provider,
            model: model.into(),
        }
    }
}

impl FromStr for ModelRef {
    type Err = ModelRefError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        if s.is_empty() {
            return Err(ModelRefError::Empty);
        }
        let Some((provider, model)) = s.split_once(':') else {
            return Err(ModelRefError::MissingProvider(s.to_string()));
        };
        if provider.is_empty() {
            return Err(ModelRefError::MissingProvider(s.to_string()));
        }
        let provider: Provider = provider.parse()?;
        if model.is_empty() {
            return Err(ModelRefError::MissingModel(s.to_string()));
        }
        Ok(Self {
            provider,
            model: model.to_string(),
        })
    }
}

impl fmt::Display for ModelRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.provider, self.model)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_at_first_colon() {
        let r: ModelRef = "ollama:qwen3:8b".parse().unwrap();
        assert_eq!(r.provider, Provider::Ollama);
        assert_eq!(r.model, "qwen3:8b");
        assert_eq!(r.to_string(), "ollama:qwen3:8b");
        let r: ModelRef = "llama:/models/x.gguf".parse().unwrap();
        assert_eq!(
            (r.provider, r.model.as_str()),
            (Provider::Llama, "/models/x.gguf")
        );
    }

    #[test]
    fn clear_errors() {
        assert_eq!("".parse::<ModelRef>(), Err(ModelRefError::Empty));
        assert!(matches!(
            ":x".parse::<ModelRef>(),
            Err(ModelRefError::MissingProvider(_))
        ));
        assert!(matches!(
            "gpt-4".parse::<ModelRef>(),
            Err(ModelRefError::MissingProvider(_))
        ));
        assert!(matches!(
            "openai:".parse::<ModelRef>(),
            Err(ModelRefError::MissingModel(_))
        ));
        let e = "foo:bar".parse::<ModelRef>().unwrap_err();
        assert!(e.to_string().contains("unknown provider \"foo\""), "{e}");
    }

    #[test]
    fn every_provider_round_trips() {
        for p in Provider::ALL {
            assert_eq!(p.as_str().parse::<Provider>(), Ok(p));
        }
    }
}
