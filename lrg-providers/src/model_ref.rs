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

/// The prefix of an external ACP agent's model id (`acp:COMMAND`); the
/// agent is not a provider of the table but a program lrg starts.
pub const ACP_PREFIX: &str = "acp:";

/// An external ACP agent as a model id: `acp:COMMAND` (the agent's own
/// default model) or `acp:COMMAND#MODEL` (the value of the agent's model
/// config option), e.g. `acp:'claude-code-acp'#sonnet`.
///
/// `#` separates the model because a command line never holds one outside
/// quotes except as a shell comment: the model is what follows the last
/// unquoted `#`, when that holds no space or quote. `COMMAND` is split into
/// words as a shell would (the caller's business).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct AcpModelId {
    /// The agent's command line, as written after `acp:`.
    pub command: String,
    /// The agent's model to choose, when one is named.
    pub model: Option<String>,
}

impl AcpModelId {
    /// The parts of `id` when it is an `acp:` id (else `None`).
    pub fn parse(id: &str) -> Option<Self> {
        let rest = id.trim().strip_prefix(ACP_PREFIX)?;
        let Some(at) = last_unquoted_hash(rest) else {
            return Some(Self::new(rest, None));
        };
        let model = &rest[at + 1..];
        if model
            .chars()
            .any(|c| c.is_whitespace() || c == '\'' || c == '"')
        {
            return Some(Self::new(rest, None));
        }
        let model = (!model.is_empty()).then(|| model.to_string());
        Some(Self::new(&rest[..at], model))
    }

    /// `command`, on the agent's `model` (`None`: its default).
    pub fn new(command: impl Into<String>, model: Option<String>) -> Self {
        Self {
            command: command.into(),
            model,
        }
    }
}

/// Where the last `#` outside single or double quotes is.
fn last_unquoted_hash(s: &str) -> Option<usize> {
    let (mut single, mut double, mut escaped) = (false, false, false);
    let mut last = None;
    for (i, c) in s.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' if !single => escaped = true,
            '\'' if !double => single = !single,
            '"' if !single => double = !double,
            '#' if !single && !double => last = Some(i),
            _ => {}
        }
    }
    last
}

impl fmt::Display for AcpModelId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{ACP_PREFIX}{}", self.command)?;
        match &self.model {
            Some(model) => write!(f, "#{model}"),
            None => Ok(()),
        }
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

    #[test]
    fn acp_ids_name_the_agent_model_after_the_last_unquoted_hash() {
        let id = AcpModelId::parse("acp:'claude-code-acp'#sonnet").unwrap();
        assert_eq!(id.command, "'claude-code-acp'");
        assert_eq!(id.model.as_deref(), Some("sonnet"));
        assert_eq!(id.to_string(), "acp:'claude-code-acp'#sonnet");
        let id = AcpModelId::parse("acp:codex-acp#openai/gpt-5:high").unwrap();
        assert_eq!(
            (id.command.as_str(), id.model.as_deref()),
            ("codex-acp", Some("openai/gpt-5:high"))
        );
        // Quoted, or followed by words, a `#` belongs to the command.
        for plain in [
            "acp:sh -c 'echo #x'",
            "acp:agent --tag \\#x",
            "acp:agent # a b",
        ] {
            let id = AcpModelId::parse(plain).unwrap();
            assert_eq!(
                (id.command.as_str(), id.model),
                (&plain[4..], None),
                "{plain}"
            );
        }
        assert_eq!(
            AcpModelId::parse("acp:gemini --experimental-acp")
                .unwrap()
                .model,
            None
        );
        assert_eq!(AcpModelId::parse("openai:gpt-4.1"), None);
    }
}
