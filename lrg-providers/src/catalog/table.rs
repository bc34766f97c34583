//! The provider table: one row per provider, the only place a provider is
//! named. The [`Provider`] enum, [`Provider::ALL`], the ids `provider:model`
//! parses, the help text, `lrg models` and connecting are all derived from
//! it, so adding a provider is one variant and one row here (plus, for an
//! OpenAI-compatible host, one [`Dialect`] entry).

use std::fmt;
use std::str::FromStr;

use crate::ModelLocation;
use crate::cli_agents::CliKind;
use crate::model_ref::ModelRefError;
use crate::openai::Dialect;
use crate::responses::ResponsesHost;

/// How a provider is reached: what the catalog does to list its models and
/// what [`crate::catalog::Connections::connect`] does to build a model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Access {
    /// Chat Completions on an OpenAI-compatible host speaking `dialect`;
    /// `windows` says where its real context windows are read.
    OpenAi {
        /// The host's dialect.
        dialect: Dialect,
        /// Extra places asked for context windows, in order.
        windows: &'static [WindowProbe],
    },
    /// Anthropic's Messages API.
    Anthropic,
    /// Google's Gemini API.
    Gemini,
    /// Ollama's native API (windows from `/api/show`).
    Ollama,
    /// The Responses API on `host` (OpenAI, xAI).
    Responses(ResponsesHost),
    /// An agent CLI logged in on this machine, run with its own tools off
    /// (lrg's are offered as text; it reaches its vendor's cloud itself).
    Cli(CliKind),
    /// An in-process engine the application links in, running model files
    /// found in the model directories.
    Engine(EngineFiles),
    /// A file named in the id (a script, a recording): nothing to list.
    File,
}

/// What files an in-process engine runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum EngineFiles {
    /// `.gguf` files (llama.cpp).
    Gguf,
    /// Model directories with a `config.json` and safetensors (MLX).
    MlxDir,
}

/// Where an OpenAI-compatible host reports real context windows beyond its
/// `/v1/models` list (which vLLM fills with `max_model_len`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum WindowProbe {
    /// LM Studio's own `/api/v0/models`: the loaded context length, vision
    /// (`type: vlm`) and native tool use.
    LmStudio,
    /// LM Studio's v1 REST API (0.4 and later), `/api/v1/models`: the loaded
    /// instance's context length and `capabilities` (`vision`,
    /// `trained_for_tool_use`).
    LmStudioV1,
    /// llama.cpp's `llama-server` `/props`: `n_ctx` of its slots.
    LlamaServerProps,
}

/// One provider: everything lrg knows about it, as data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ProviderSpec {
    /// The prefix in model ids (`openai` in `openai:gpt-4.1`).
    pub id: &'static str,
    /// The name shown to people.
    pub name: &'static str,
    /// Where its models run.
    pub locality: ModelLocation,
    /// Env vars holding its API key, first set wins (empty: no key).
    pub key_env: &'static [&'static str],
    /// Whether it cannot be used without a key.
    pub key_required: bool,
    /// Env var naming its base URL.
    pub base_url_env: Option<&'static str>,
    /// Its base URL when none is given (`None`: one must be given).
    pub default_base_url: Option<&'static str>,
    /// An example model name, for help texts (`gpt-4.1`).
    pub example: &'static str,
    /// One line (or a few, `\n`-separated) of help: what it is and what to set.
    pub help: &'static str,
    /// How it is listed and connected.
    pub access: Access,
}

impl ProviderSpec {
    /// A row for an OpenAI-compatible host, read from its [`Dialect`]: the
    /// dialect's locality, key and base URL; the caller adds the rest.
    pub const fn openai_compatible(
        id: &'static str,
        dialect: Dialect,
        windows: &'static [WindowProbe],
        example: &'static str,
        help: &'static str,
    ) -> Self {
        Self {
            id,
            name: dialect.name,
            locality: dialect.location,
            key_env: dialect.key_env,
            key_required: dialect.key_required,
            base_url_env: dialect.base_url_env,
            default_base_url: dialect.default_base_url,
            example,
            help,
            access: Access::OpenAi { dialect, windows },
        }
    }

    /// A row for a host of the Responses API, read from its
    /// [`ResponsesHost`]: a cloud that needs its key.
    pub const fn responses(
        id: &'static str,
        host: ResponsesHost,
        example: &'static str,
        help: &'static str,
    ) -> Self {
        Self {
            id,
            name: host.name,
            locality: ModelLocation::Cloud,
            key_env: host.key_env,
            key_required: true,
            base_url_env: Some(host.base_url_env),
            default_base_url: Some(host.default_base_url),
            example,
            help,
            access: Access::Responses(host),
        }
    }

    /// A row for an agent CLI: its vendor's cloud, reached by the CLI's own
    /// login (no key, no address of lrg's).
    pub const fn cli(
        id: &'static str,
        kind: CliKind,
        name: &'static str,
        example: &'static str,
        help: &'static str,
    ) -> Self {
        Self {
            id,
            name,
            locality: ModelLocation::Cloud,
            key_env: &[],
            key_required: false,
            base_url_env: None,
            default_base_url: None,
            example,
            help,
            access: Access::Cli(kind),
        }
    }

    /// Whether `lrg models` and the catalog list it (files named in an id
    /// are not listed).
    pub fn is_listed(&self) -> bool {
        !matches!(self.access, Access::File)
    }
}

/// Declares [`Provider`] and its table together, so a variant without a row
/// (or a row without a variant) does not compile.
macro_rules! providers {
    ($( $(#[$doc:meta])* $variant:ident => $row:expr, )+) => {
        /// The providers lrg knows how to reach; each has a row in the
        /// provider table ([`Provider::spec`]).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[non_exhaustive]
        pub enum Provider {
            $( $(#[$doc])* $variant, )+
        }

        impl Provider {
            /// Every provider, in display order (the table's order).
            pub const ALL: &'static [Provider] = &[$(Provider::$variant),+];

            /// This provider's row in the table.
            pub fn spec(self) -> &'static ProviderSpec {
                match self {
                    $( Provider::$variant => {
                        const ROW: ProviderSpec = $row;
                        &ROW
                    } )+
                }
            }
        }
    };
}

const SERVER_WINDOWS: &[WindowProbe] = &[WindowProbe::LlamaServerProps];

providers! {
    /// OpenAI's cloud API.
    OpenAi => ProviderSpec::openai_compatible(
        "openai", Dialect::OPENAI, &[], "gpt-4.1", "OPENAI_API_KEY",
    ),
    /// Anthropic's Messages API.
    Anthropic => ProviderSpec {
        id: "anthropic",
        name: "Anthropic",
        locality: ModelLocation::Cloud,
        key_env: &["ANTHROPIC_API_KEY"],
        key_required: true,
        base_url_env: Some("ANTHROPIC_BASE_URL"),
        default_base_url: Some(crate::anthropic::DEFAULT_BASE_URL),
        example: "claude-sonnet-4-5",
        help: "ANTHROPIC_API_KEY",
        access: Access::Anthropic,
    },
    /// Google's Gemini API.
    Gemini => ProviderSpec {
        id: "gemini",
        name: "Gemini",
        locality: ModelLocation::Cloud,
        key_env: &["GEMINI_API_KEY", "GOOGLE_API_KEY"],
        key_required: true,
        base_url_env: Some("GEMINI_BASE_URL"),
        default_base_url: Some(crate::gemini::DEFAULT_BASE_URL),
        example: "gemini-2.5-flash",
        help: "GEMINI_API_KEY (or GOOGLE_API_KEY)",
        access: Access::Gemini,
    },
    /// An Ollama server (native `/api/chat`).
    Ollama => ProviderSpec {
        id: "ollama",
        name: "Ollama",
        locality: ModelLocation::Server,
        key_env: &[],
        key_required: false,
        base_url_env: Some("OLLAMA_HOST"),
        default_base_url: Some(crate::ollama::DEFAULT_HOST),
        example: "qwen3:8b",
        help: "an Ollama server ($OLLAMA_HOST, default http://localhost:11434)",
        access: Access::Ollama,
    },
    /// An LM Studio server (OpenAI-compatible).
    LmStudio => ProviderSpec::openai_compatible(
        "lmstudio", Dialect::LMSTUDIO, &[WindowProbe::LmStudioV1, WindowProbe::LmStudio], "qwen3-8b",
        "an LM Studio server (http://localhost:1234/v1, or --base-url)",
    ),
    /// Any other OpenAI-compatible server, at a configured base URL.
    Server => ProviderSpec {
        // Its own variables, never OPENAI_API_KEY: an OpenAI key must not go
        // to whatever host a base URL names.
        key_env: &["LRG_SERVER_API_KEY"],
        base_url_env: Some("LRG_SERVER_URL"),
        ..ProviderSpec::openai_compatible(
            "server", Dialect::GENERIC, SERVER_WINDOWS, "my-model",
            "your OpenAI-compatible host (--base-url or $LRG_SERVER_URL;\n\
             key, if it wants one, in $LRG_SERVER_API_KEY)",
        )
    },
    /// OpenAI through the Responses API.
    OpenAiResponses => ProviderSpec::responses(
        "openai-responses", ResponsesHost::OPENAI, "o4-mini",
        "OPENAI_API_KEY, through the Responses API (reasoning models)",
    ),
    /// xAI (Grok) through the Responses API.
    Xai => ProviderSpec::responses("xai", ResponsesHost::XAI, "grok-4", "XAI_API_KEY"),
    /// OpenRouter (Chat Completions).
    OpenRouter => ProviderSpec::openai_compatible(
        "openrouter", Dialect::OPENROUTER, &[], "openai/gpt-4.1", "OPENROUTER_API_KEY",
    ),
    /// Groq (Chat Completions).
    Groq => ProviderSpec::openai_compatible(
        "groq", Dialect::GROQ, &[], "llama-3.3-70b-versatile", "GROQ_API_KEY",
    ),
    /// Together AI (Chat Completions).
    Together => ProviderSpec::openai_compatible(
        "together", Dialect::TOGETHER, &[], "openai/gpt-oss-120b", "TOGETHER_API_KEY",
    ),
    /// DeepSeek (Chat Completions).
    DeepSeek => ProviderSpec::openai_compatible(
        "deepseek", Dialect::DEEPSEEK, &[], "deepseek-chat", "DEEPSEEK_API_KEY",
    ),
    /// Mistral (Chat Completions).
    Mistral => ProviderSpec::openai_compatible(
        "mistral", Dialect::MISTRAL, &[], "mistral-large-latest", "MISTRAL_API_KEY",
    ),
    /// Claude Code, logged in on this machine (chat only).
    ClaudeCli => ProviderSpec::cli(
        "claude-cli", CliKind::Claude, "Claude Code", "sonnet",
        "Claude Code logged in on this machine, chat only",
    ),
    /// The Codex CLI, logged in on this machine (chat only).
    CodexCli => ProviderSpec::cli(
        "codex-cli", CliKind::Codex, "Codex CLI", "default",
        "the Codex CLI logged in on this machine, chat only",
    ),
    /// The Gemini CLI, logged in on this machine (chat only).
    GeminiCli => ProviderSpec::cli(
        "gemini-cli", CliKind::Gemini, "Gemini CLI", "default",
        "the Gemini CLI logged in on this machine, chat only",
    ),
    /// A GGUF file run in-process by llama.cpp.
    Llama => ProviderSpec {
        id: "llama",
        name: "llama.cpp",
        locality: ModelLocation::Local,
        key_env: &[],
        key_required: false,
        base_url_env: None,
        default_base_url: None,
        example: "/path/to/model.gguf",
        help: "llama.cpp in this process (lists .gguf files in $LRG_MODELS_DIR)",
        access: Access::Engine(EngineFiles::Gguf),
    },
    /// A model directory run by the MLX sidecar.
    Mlx => ProviderSpec {
        id: "mlx",
        name: "MLX",
        locality: ModelLocation::Local,
        key_env: &[],
        key_required: false,
        base_url_env: None,
        default_base_url: None,
        example: "/path/to/model-dir",
        help: "MLX through a Python sidecar ($LRG_MLX_PYTHON, else python3;\n\
               lists model folders in $LRG_MODELS_DIR)",
        access: Access::Engine(EngineFiles::MlxDir),
    },
    /// A [`crate::ScriptedModel`] JSON file.
    Script => ProviderSpec {
        id: "script",
        name: "script",
        locality: ModelLocation::Local,
        key_env: &[],
        key_required: false,
        base_url_env: None,
        default_base_url: None,
        example: "turns.json",
        help: "a ScriptedModel file (scripted answers)",
        access: Access::File,
    },
    /// A recording played back.
    Replay => ProviderSpec {
        id: "replay",
        name: "replay",
        locality: ModelLocation::Local,
        key_env: &[],
        key_required: false,
        base_url_env: None,
        default_base_url: None,
        example: "recording.json",
        help: "a recording made with --record",
        access: Access::File,
    },
}

impl Provider {
    /// The prefix used in model ids.
    pub fn as_str(self) -> &'static str {
        self.spec().id
    }

    /// Where this provider's models run.
    pub fn locality(self) -> ModelLocation {
        self.spec().locality
    }

    /// Whether the conversation leaves the machine for a third party's cloud.
    pub fn is_cloud(self) -> bool {
        self.locality() == ModelLocation::Cloud
    }

    /// Every provider id, comma-separated (for messages that list them).
    pub fn known_ids() -> String {
        Self::ALL
            .iter()
            .map(|p| p.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The "Models" help: one line per provider, `id:example  help`, derived
    /// from the table.
    pub fn help_lines() -> String {
        const WIDTH: usize = 28;
        let mut out = String::new();
        for p in Self::ALL {
            let spec = p.spec();
            let left = format!("{}:{}", spec.id, spec.example);
            let mut lines = spec.help.lines();
            let first = lines.next().unwrap_or_default();
            out.push_str(&format!("  {left:<WIDTH$}  {first}\n"));
            for more in lines {
                out.push_str(&format!("  {:<WIDTH$}  {}\n", "", more.trim()));
            }
        }
        out.pop();
        out
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
        Self::ALL
            .iter()
            .copied()
            .find(|p| p.as_str() == s)
            .ok_or_else(|| ModelRefError::UnknownProvider(s.to_string()))
    }
}

impl serde::Serialize for Provider {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> serde::Deserialize<'de> for Provider {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_unique_and_round_trip() {
        for (i, p) in Provider::ALL.iter().enumerate() {
            assert_eq!(p.as_str().parse::<Provider>(), Ok(*p));
            assert!(
                Provider::ALL[..i].iter().all(|q| q.as_str() != p.as_str()),
                "{p} twice"
            );
            let json = serde_json::to_string(p).unwrap();
            assert_eq!(serde_json::from_str::<Provider>(&json).unwrap(), *p);
        }
    }

    #[test]
    fn help_and_the_unknown_provider_message_name_every_provider() {
        let help = Provider::help_lines();
        let unknown = "nope".parse::<Provider>().unwrap_err().to_string();
        for p in Provider::ALL {
            assert!(help.contains(&format!("  {}:", p.as_str())), "{p}: {help}");
            assert!(unknown.contains(p.as_str()), "{p}: {unknown}");
        }
    }

    #[test]
    fn rows_agree_with_their_dialects() {
        for p in Provider::ALL {
            let spec = p.spec();
            if let Access::OpenAi { dialect, .. } = spec.access {
                assert_eq!(spec.locality, dialect.location, "{p}");
            }
            if let Access::Cli(kind) = spec.access {
                // The CLI logs in itself: no key of lrg's.
                assert_eq!(kind.spec().provider, spec.id, "{p}");
                assert!(spec.key_env.is_empty() && !spec.key_required, "{p}");
            } else if spec.locality == ModelLocation::Cloud {
                assert!(spec.key_required && !spec.key_env.is_empty(), "{p}");
            }
            if let Access::Responses(host) = spec.access {
                assert_eq!(host.provider, spec.id, "{p}");
            }
            // A server's key never comes from a cloud vendor's variable.
            if spec.locality != ModelLocation::Cloud {
                assert!(spec.key_env.iter().all(|v| !v.starts_with("OPENAI")), "{p}");
            }
        }
    }
}
