//! `provider:model` references, e.g. `openai:gpt-4.1` or `ollama:qwen3:8b`.

use std::fmt;
use std::str::FromStr;

pub use crate::catalog::Provider;

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
    #[error("unknown provider {0:?}; known: {known}", known = Provider::known_ids())]
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
    fn the_unknown_provider_message_lists_the_table() {
        let e = "foo:bar".parse::<ModelRef>().unwrap_err().to_string();
        assert!(e.contains(&Provider::known_ids()), "{e}");
    }
}
