//! What differs between hosts of the Responses API (OpenAI, xAI), as data:
//! one [`ResponsesHost`] per host, read by the config, encoder and decoder.

/// How one host speaks the Responses API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ResponsesHost {
    /// Short name, for logs and errors.
    pub name: &'static str,
    /// Provider prefix reported in [`crate::ModelInfo`] and kept on native
    /// parts (`openai-responses`, `xai`).
    pub provider: &'static str,
    /// Base URL used when none is configured.
    pub default_base_url: &'static str,
    /// Env var that overrides the base URL.
    pub base_url_env: &'static str,
    /// Env vars holding the key, first set wins.
    pub key_env: &'static [&'static str],
    /// Model-name prefixes of reasoning models: they take `reasoning` and
    /// `include`, and reject a temperature.
    pub reasoning_prefixes: &'static [&'static str],
    /// Whether to ask for a reasoning summary (`reasoning.summary: "auto"`),
    /// which reaches the user as reasoning deltas.
    pub reasoning_summary: bool,
    /// Answer budget when neither the request nor the config sets one.
    /// Reasoning tokens count against it, so it is larger than Chat
    /// Completions' default.
    pub default_max_tokens: u32,
}

impl ResponsesHost {
    /// OpenAI's Responses API.
    pub const OPENAI: ResponsesHost = ResponsesHost {
        name: "OpenAI (Responses API)",
        provider: "openai-responses",
        default_base_url: "https://api.openai.com/v1",
        base_url_env: "OPENAI_BASE_URL",
        key_env: &["OPENAI_API_KEY"],
        reasoning_prefixes: crate::openai::OPENAI_REASONING_PREFIXES,
        reasoning_summary: true,
        default_max_tokens: 16_384,
    };

    /// xAI's Responses API (Grok).
    pub const XAI: ResponsesHost = ResponsesHost {
        name: "xAI",
        provider: "xai",
        default_base_url: "https://api.x.ai/v1",
        base_url_env: "XAI_BASE_URL",
        key_env: &["XAI_API_KEY"],
        reasoning_prefixes: &["grok-3-mini", "grok-4", "grok-code"],
        // Grok reasons without publishing a summary of it.
        reasoning_summary: false,
        default_max_tokens: 16_384,
    };

    /// Whether `model` is one of this host's reasoning models.
    pub fn is_reasoning_model(&self, model: &str) -> bool {
        self.reasoning_prefixes.iter().any(|p| model.starts_with(p))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasoning_models_by_name() {
        assert!(ResponsesHost::OPENAI.is_reasoning_model("o4-mini"));
        assert!(ResponsesHost::OPENAI.is_reasoning_model("gpt-5-mini"));
        assert!(!ResponsesHost::OPENAI.is_reasoning_model("gpt-4.1"));
        assert!(ResponsesHost::XAI.is_reasoning_model("grok-4-fast"));
        assert!(!ResponsesHost::XAI.is_reasoning_model("grok-3"));
    }
}
