//! What differs between OpenAI-compatible servers, as data: one [`Dialect`]
//! per server family, read by the encoder and decoder instead of `if` chains
//! on server names.

use crate::ModelLocation;
use crate::typed::OutputMode;

/// Which request field carries the answer budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MaxTokensField {
    /// `max_completion_tokens` (OpenAI; its reasoning models reject `max_tokens`).
    MaxCompletionTokens,
    /// `max_tokens` (every other server).
    MaxTokens,
}

impl MaxTokensField {
    /// The JSON field name.
    pub fn as_str(self) -> &'static str {
        match self {
            MaxTokensField::MaxCompletionTokens => "max_completion_tokens",
            MaxTokensField::MaxTokens => "max_tokens",
        }
    }
}

/// A delta field a server streams reasoning in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReasoningField {
    /// `reasoning_content` (DeepSeek, vLLM, llama.cpp, LM Studio).
    ReasoningContent,
    /// `reasoning` (Ollama's /v1, OpenRouter, newer vLLM).
    Reasoning,
}

/// Where a server takes the schema of a typed answer
/// ([`crate::TurnRequest::output`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SchemaField {
    /// OpenAI's strict mode: `response_format: {type: "json_schema",
    /// json_schema: {name, schema, strict}}` with the schema shaped to the
    /// strict rules ([`crate::typed::StrictTarget::OpenAi`]); `strict: false`
    /// when it cannot be made strict. The server enforces it.
    StrictResponseFormat,
    /// `response_format: {type: "json_schema", json_schema: {name, schema}}`
    /// with the caller's own schema: the server constrains its answer as it
    /// can (a grammar made from the schema, on most local servers).
    ResponseFormat,
    /// The caller's schema in a top-level field of this name, where the
    /// server documents one of its own (llama-server's `json_schema`).
    Field(&'static str),
    /// Nowhere: the schema goes into the instructions.
    Prompted,
}

/// How one family of OpenAI-compatible servers speaks Chat Completions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Dialect {
    /// Short name, for logs and errors.
    pub name: &'static str,
    /// Provider prefix reported in [`crate::ModelInfo`] (`openai`, `lmstudio`, ...).
    pub provider: &'static str,
    /// Where such a server runs.
    pub location: ModelLocation,
    /// Base URL used when none is configured (`None`: one must be given).
    pub default_base_url: Option<&'static str>,
    /// Env var that overrides the base URL.
    pub base_url_env: Option<&'static str>,
    /// Env vars holding the key, first set wins.
    pub key_env: &'static [&'static str],
    /// Whether a request without a key is pointless (the cloud API).
    pub key_required: bool,
    /// The field carrying the answer budget.
    pub max_tokens_field: MaxTokensField,
    /// Answer budget when neither the request nor the config sets one.
    pub default_max_tokens: u32,
    /// Model-name prefixes of reasoning models, which reject `temperature`,
    /// `top_p` and `stop` (OpenAI's o-series and gpt-5): those settings are
    /// dropped for them.
    pub reasoning_prefixes: &'static [&'static str],
    /// The field carrying the sampling seed (`seed`; Mistral's `random_seed`).
    pub seed_field: &'static str,
    /// Most stop sequences the API takes (`None`: no limit); the rest are dropped.
    pub stop_limit: Option<usize>,
    /// Whether the server takes a `top_k` body field (vLLM, llama-server,
    /// LM Studio, SGLang, OpenRouter, Together); where not (OpenAI itself,
    /// Ollama's `/v1`, Mistral, which refuses unknown fields) it is dropped
    /// with a debug line.
    pub top_k: bool,
    /// Whether to ask for usage in the stream (`stream_options.include_usage`).
    pub stream_usage: bool,
    /// Delta fields read as reasoning, in order; the first present one is used
    /// so a server that fills two of them with the same text is not doubled.
    pub reasoning_fields: &'static [ReasoningField],
    /// Newest images kept attached (`None`: all; a cloud bills every resend).
    pub image_limit: Option<usize>,
    /// Where a typed answer's schema goes.
    pub schema_field: SchemaField,
    /// Whether the schema may go on a request that also offers tools. A
    /// server that turns the schema into a grammar over its whole answer
    /// (llama-server, vLLM, LM Studio, Ollama) can then no longer call a
    /// tool, or refuses the pair: such a request carries the schema in its
    /// instructions instead, and the schema goes on the wire only where no
    /// tool is offered (a typed message without tools, a repair turn).
    pub schema_with_tools: bool,
}

/// Model-name prefixes of OpenAI's reasoning models (Chat Completions and
/// the Responses API alike).
pub(crate) const OPENAI_REASONING_PREFIXES: &[&str] = &["o1", "o3", "o4", "gpt-5", "codex"];

const BOTH_REASONING: &[ReasoningField] =
    &[ReasoningField::ReasoningContent, ReasoningField::Reasoning];

impl Dialect {
    /// OpenAI's own API.
    pub const OPENAI: Dialect = Dialect {
        name: "OpenAI",
        provider: "openai",
        location: ModelLocation::Cloud,
        default_base_url: Some("https://api.openai.com/v1"),
        base_url_env: Some("OPENAI_BASE_URL"),
        key_env: &["OPENAI_API_KEY"],
        key_required: true,
        max_tokens_field: MaxTokensField::MaxCompletionTokens,
        default_max_tokens: 8_192,
        reasoning_prefixes: OPENAI_REASONING_PREFIXES,
        seed_field: "seed",
        stop_limit: Some(4),
        top_k: false,
        stream_usage: true,
        reasoning_fields: &[],
        image_limit: Some(crate::images::CLOUD_IMAGE_LIMIT),
        schema_field: SchemaField::StrictResponseFormat,
        // Documented: the model may call tools, and its answer without a
        // call follows the schema.
        schema_with_tools: true,
    };

    /// LM Studio's OpenAI-compatible server (`response_format` json_schema,
    /// enforced by its grammar).
    pub const LMSTUDIO: Dialect = Dialect {
        name: "LM Studio",
        provider: "lmstudio",
        default_base_url: Some("http://localhost:1234/v1"),
        ..Self::SERVER
    };

    /// Ollama's OpenAI-compatible endpoint (`/v1`); see also
    /// [`crate::ollama::OllamaChat`] for its native API.
    pub const OLLAMA_V1: Dialect = Dialect {
        name: "Ollama (/v1)",
        provider: "ollama",
        default_base_url: Some("http://localhost:11434/v1"),
        reasoning_fields: &[ReasoningField::Reasoning, ReasoningField::ReasoningContent],
        // Its `/v1` documents no `top_k` (the native API's `options.top_k`
        // does, see `crate::ollama`).
        top_k: false,
        ..Self::SERVER
    };

    /// vLLM's OpenAI-compatible server.
    pub const VLLM: Dialect = Dialect {
        name: "vLLM",
        default_base_url: Some("http://localhost:8000/v1"),
        ..Self::SERVER
    };

    /// llama.cpp's `llama-server`: the schema in its own top-level
    /// `json_schema` field, the form its README documents (its
    /// `response_format` reading has changed between builds). With tools it
    /// answers "Either json_schema or grammar can be specified, but not
    /// both", hence [`Dialect::schema_with_tools`] off (as for every server).
    pub const LLAMA_CPP: Dialect = Dialect {
        name: "llama.cpp server",
        default_base_url: Some("http://localhost:8080/v1"),
        schema_field: SchemaField::Field("json_schema"),
        ..Self::SERVER
    };

    /// Any other OpenAI-compatible server, at a configured base URL.
    pub const GENERIC: Dialect = Self::SERVER;

    /// OpenRouter: many vendors' models behind one key; reasoning streams in
    /// `reasoning`.
    pub const OPENROUTER: Dialect = Dialect {
        name: "OpenRouter",
        provider: "openrouter",
        default_base_url: Some("https://openrouter.ai/api/v1"),
        base_url_env: Some("OPENROUTER_BASE_URL"),
        key_env: &["OPENROUTER_API_KEY"],
        reasoning_fields: &[ReasoningField::Reasoning],
        top_k: true,
        ..Self::CLOUD
    };

    /// Groq: reasoning models stream their reasoning in `reasoning`.
    pub const GROQ: Dialect = Dialect {
        name: "Groq",
        provider: "groq",
        default_base_url: Some("https://api.groq.com/openai/v1"),
        base_url_env: Some("GROQ_BASE_URL"),
        key_env: &["GROQ_API_KEY"],
        reasoning_fields: &[ReasoningField::Reasoning],
        ..Self::CLOUD
    };

    /// Together AI.
    pub const TOGETHER: Dialect = Dialect {
        name: "Together AI",
        provider: "together",
        default_base_url: Some("https://api.together.xyz/v1"),
        base_url_env: Some("TOGETHER_BASE_URL"),
        key_env: &["TOGETHER_API_KEY"],
        top_k: true,
        ..Self::CLOUD
    };

    /// DeepSeek: `deepseek-reasoner` streams its chain in `reasoning_content`.
    /// Its JSON mode takes no schema (`json_object` only): typed answers are
    /// prompted.
    pub const DEEPSEEK: Dialect = Dialect {
        name: "DeepSeek",
        provider: "deepseek",
        default_base_url: Some("https://api.deepseek.com/v1"),
        base_url_env: Some("DEEPSEEK_BASE_URL"),
        key_env: &["DEEPSEEK_API_KEY"],
        reasoning_fields: &[ReasoningField::ReasoningContent],
        schema_field: SchemaField::Prompted,
        ..Self::CLOUD
    };

    /// Mistral: refuses fields it does not know (`stream_options` among
    /// them) and reports usage in the last chunk unasked.
    pub const MISTRAL: Dialect = Dialect {
        name: "Mistral",
        provider: "mistral",
        default_base_url: Some("https://api.mistral.ai/v1"),
        base_url_env: Some("MISTRAL_BASE_URL"),
        key_env: &["MISTRAL_API_KEY"],
        stream_usage: false,
        seed_field: "random_seed",
        ..Self::CLOUD
    };

    /// A hosted OpenAI-compatible API: a key of its own (never
    /// `OPENAI_API_KEY`), billed image resends, `max_tokens`.
    const CLOUD: Dialect = Dialect {
        name: "hosted OpenAI-compatible API",
        provider: "cloud",
        location: ModelLocation::Cloud,
        default_base_url: None,
        base_url_env: None,
        key_env: &[],
        key_required: true,
        max_tokens_field: MaxTokensField::MaxTokens,
        default_max_tokens: 8_192,
        reasoning_prefixes: &[],
        seed_field: "seed",
        // OpenAI's limit, which hosted copies of its API tend to share.
        stop_limit: Some(4),
        // Not in OpenAI's API, which hosted copies follow; those that
        // document it say so in their row.
        top_k: false,
        stream_usage: true,
        reasoning_fields: BOTH_REASONING,
        image_limit: Some(crate::images::CLOUD_IMAGE_LIMIT),
        // OpenAI's field without its strictness promise: whether the schema
        // is enforced depends on the model behind it (a host that refuses it
        // for a model is learned from its 400, see `crate::openai`).
        schema_field: SchemaField::ResponseFormat,
        // Open models on a grammar engine, like a local server: nothing
        // documents that a tool can still be called under the schema.
        schema_with_tools: false,
    };

    /// The hosted OpenAI-compatible APIs with a row of their own.
    pub const HOSTED: &'static [Dialect] = &[
        Self::OPENROUTER,
        Self::GROQ,
        Self::TOGETHER,
        Self::DEEPSEEK,
        Self::MISTRAL,
    ];

    /// A dialect for another OpenAI-compatible server: [`Dialect::GENERIC`]
    /// under its own name and provider prefix.
    pub const fn server(name: &'static str, provider: &'static str) -> Dialect {
        Dialect {
            name,
            provider,
            ..Self::SERVER
        }
    }

    /// Whether `model` is one of this dialect's reasoning models.
    pub fn is_reasoning_model(&self, model: &str) -> bool {
        self.reasoning_prefixes.iter().any(|p| model.starts_with(p))
    }

    /// How a typed answer is obtained through this dialect's schema field.
    pub fn output_mode(&self) -> OutputMode {
        match self.schema_field {
            SchemaField::StrictResponseFormat => OutputMode::NativeStrict,
            SchemaField::ResponseFormat | SchemaField::Field(_) => OutputMode::Native,
            SchemaField::Prompted => OutputMode::Prompted,
        }
    }

    const SERVER: Dialect = Dialect {
        name: "OpenAI-compatible server",
        provider: "server",
        location: ModelLocation::Server,
        default_base_url: None,
        base_url_env: None,
        // Never OPENAI_API_KEY: that would hand an OpenAI key to whatever host
        // the base URL names. A server's key comes from its config.
        key_env: &[],
        key_required: false,
        max_tokens_field: MaxTokensField::MaxTokens,
        default_max_tokens: 2_048,
        reasoning_prefixes: &[],
        seed_field: "seed",
        stop_limit: None,
        top_k: true,
        stream_usage: true,
        reasoning_fields: BOTH_REASONING,
        image_limit: None,
        // vLLM, SGLang, LM Studio, Ollama's /v1 and newer llama-servers all
        // read OpenAI's field; one that refuses it is learned from its 400.
        schema_field: SchemaField::ResponseFormat,
        schema_with_tools: false,
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_dialect_says_where_a_typed_answer_goes() {
        assert_eq!(
            Dialect::OPENAI.schema_field,
            SchemaField::StrictResponseFormat
        );
        assert_eq!(Dialect::OPENAI.output_mode(), OutputMode::NativeStrict);
        // Only OpenAI documents tools and a schema together.
        let with_tools = [Dialect::OPENAI, Dialect::GENERIC].map(|d| d.schema_with_tools);
        assert_eq!(with_tools, [true, false]);
        assert_eq!(
            Dialect::LLAMA_CPP.schema_field,
            SchemaField::Field("json_schema")
        );
        for server in [
            Dialect::LMSTUDIO,
            Dialect::OLLAMA_V1,
            Dialect::VLLM,
            Dialect::GENERIC,
            Dialect::server("SGLang", "sglang"),
        ] {
            assert_eq!(
                server.schema_field,
                SchemaField::ResponseFormat,
                "{}",
                server.name
            );
        }
        for local in [
            Dialect::LMSTUDIO,
            Dialect::LLAMA_CPP,
            Dialect::VLLM,
            Dialect::GENERIC,
        ] {
            assert_eq!(local.output_mode(), OutputMode::Native, "{}", local.name);
            // A grammar over the whole answer would forbid tool calls.
            assert!(!local.schema_with_tools, "{}", local.name);
        }
        for hosted in Dialect::HOSTED {
            let expected = if hosted.provider == "deepseek" {
                OutputMode::Prompted
            } else {
                OutputMode::Native
            };
            assert_eq!(hosted.output_mode(), expected, "{}", hosted.name);
            assert!(!hosted.schema_with_tools, "{}", hosted.name);
        }
        assert_eq!(Dialect::DEEPSEEK.schema_field, SchemaField::Prompted);
    }
}
