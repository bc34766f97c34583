//! Model profiles: a table (data, not branches) from a model id to its
//! family, and from the family to how it writes tool calls and reasoning,
//! the sampling its makers recommend, and whether the usual servers parse
//! its tool calls themselves.

use serde::{Deserialize, Serialize};

use super::{ToolFormat, ToolMode};
use crate::GenerationSettings;

/// A model family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Family {
    /// Qwen3-Coder.
    Qwen3Coder,
    /// Qwen 2.5 / 3, QwQ.
    Qwen,
    /// Nous Hermes.
    Hermes,
    /// Microsoft Phi.
    Phi,
    /// Llama 3.x.
    Llama3,
    /// Llama 4.
    Llama4,
    /// Mistral, Mixtral, Magistral, Devstral, Ministral, Codestral.
    Mistral,
    /// OpenAI gpt-oss.
    GptOss,
    /// IBM Granite.
    Granite,
    /// DeepSeek V3 / R1.
    DeepSeek,
    /// Google Gemma.
    Gemma,
    /// Not recognised: Hermes, the most common text format, is assumed.
    Unknown,
}

/// How a family marks its reasoning in text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum ReasoningFormat {
    /// No reasoning text.
    None,
    /// `<think>…</think>`.
    ThinkTags,
    /// `[THINK]…[/THINK]` (Magistral).
    MistralThink,
    /// Harmony's `analysis` channel.
    Harmony,
}

/// Sampling settings a family's makers recommend (`None`: no advice).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Sampling {
    /// Temperature.
    pub temperature: Option<f32>,
    /// Nucleus sampling.
    pub top_p: Option<f32>,
    /// Top-k.
    pub top_k: Option<u32>,
}

impl Sampling {
    /// Put these values into `settings` when it sets no sampling of its own
    /// (no temperature, top_p nor top_k): a family's advice is taken whole
    /// or not at all, never mixed with a person's own choice. Whether any
    /// value was put in.
    pub fn fill(&self, settings: &mut GenerationSettings) -> bool {
        let own =
            settings.temperature.is_some() || settings.top_p.is_some() || settings.top_k.is_some();
        let advice = self.temperature.is_some() || self.top_p.is_some() || self.top_k.is_some();
        if own || !advice {
            return false;
        }
        settings.temperature = self.temperature;
        settings.top_p = self.top_p;
        settings.top_k = self.top_k;
        true
    }

    const fn new(temperature: f32, top_p: f32, top_k: Option<u32>) -> Self {
        Self {
            temperature: Some(temperature),
            top_p: Some(top_p),
            top_k,
        }
    }
}

/// What lrg knows about a model from its id.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ModelProfile {
    /// The family.
    pub family: Family,
    /// How it writes tool calls as text.
    pub tool_format: ToolFormat,
    /// How it writes reasoning.
    pub reasoning: ReasoningFormat,
    /// Recommended sampling.
    pub sampling: Sampling,
    /// Whether the usual servers (llama-server `--jinja`, vLLM, Ollama, LM
    /// Studio) turn its text calls into native ones, so tools can be sent
    /// natively.
    pub server_parses_tools: bool,
    /// Whether its chat template ends the prompt with the reasoning opener
    /// (`<think>\n`), so the answer starts inside reasoning and only the
    /// closer shows up (see [`TextToolParser::starting_in_reasoning`]).
    ///
    /// [`TextToolParser::starting_in_reasoning`]: super::TextToolParser::starting_in_reasoning
    pub starts_in_reasoning: bool,
}

impl ModelProfile {
    /// The same profile for a template that opens reasoning in the prompt.
    const fn opening_reasoning(mut self) -> Self {
        self.starts_in_reasoning = true;
        self
    }
}

const fn profile(
    family: Family,
    tool_format: ToolFormat,
    reasoning: ReasoningFormat,
    sampling: Sampling,
    server_parses_tools: bool,
) -> ModelProfile {
    ModelProfile {
        family,
        tool_format,
        reasoning,
        sampling,
        server_parses_tools,
        starts_in_reasoning: false,
    }
}

use Family as F;
use ReasoningFormat as R;
use ToolFormat as T;

/// Family profiles. Sampling from each maker's model card / generation config.
const QWEN3_CODER: ModelProfile = profile(
    F::Qwen3Coder,
    T::Qwen3Coder,
    R::None,
    Sampling::new(0.7, 0.8, Some(20)),
    true,
);
const QWEN: ModelProfile = profile(
    F::Qwen,
    T::Hermes,
    R::ThinkTags,
    Sampling::new(0.6, 0.95, Some(20)),
    true,
);
const HERMES: ModelProfile = profile(
    F::Hermes,
    T::Hermes,
    R::ThinkTags,
    Sampling {
        temperature: None,
        top_p: None,
        top_k: None,
    },
    true,
);
const PHI: ModelProfile = profile(
    F::Phi,
    T::Hermes,
    R::ThinkTags,
    Sampling {
        temperature: None,
        top_p: None,
        top_k: None,
    },
    false,
);
const LLAMA3: ModelProfile = profile(
    F::Llama3,
    T::Llama3,
    R::None,
    Sampling::new(0.6, 0.9, None),
    true,
);
const LLAMA4: ModelProfile = profile(
    F::Llama4,
    T::Pythonic,
    R::None,
    Sampling::new(0.6, 0.9, None),
    true,
);
const MISTRAL: ModelProfile = profile(
    F::Mistral,
    T::Mistral,
    R::MistralThink,
    Sampling::new(0.15, 1.0, None),
    true,
);
const GPT_OSS: ModelProfile = profile(
    F::GptOss,
    T::Harmony,
    R::Harmony,
    Sampling::new(1.0, 1.0, None),
    true,
);
const GRANITE: ModelProfile = profile(
    F::Granite,
    T::Granite,
    R::ThinkTags,
    Sampling {
        temperature: None,
        top_p: None,
        top_k: None,
    },
    true,
);
const DEEPSEEK: ModelProfile = profile(
    F::DeepSeek,
    T::DeepSeek,
    R::ThinkTags,
    Sampling::new(0.6, 0.95, None),
    true,
);
const GEMMA: ModelProfile = profile(
    F::Gemma,
    T::Gemma,
    R::None,
    Sampling::new(1.0, 0.95, Some(64)),
    false,
);
const UNKNOWN: ModelProfile = profile(
    F::Unknown,
    T::Hermes,
    R::ThinkTags,
    Sampling {
        temperature: None,
        top_p: None,
        top_k: None,
    },
    true,
);

/// Templates that end the prompt with `<think>\n`: QwQ's, DeepSeek-R1's
/// (since its 2025-02 template update) and Qwen3's thinking-only 2507
/// models'. Qwen3's hybrid models write the opener themselves.
const QWEN_OPEN_THINK: ModelProfile = QWEN.opening_reasoning();
const DEEPSEEK_R1: ModelProfile = DEEPSEEK.opening_reasoning();

/// Model-id fragments (lowercase, `_` and ` ` read as `-`), first match wins:
/// the more specific ones come first (`qwen3-coder` before `qwen`).
const PROFILES: &[(&str, ModelProfile)] = &[
    ("deepseek-r1", DEEPSEEK_R1),
    ("r1-distill", DEEPSEEK_R1),
    ("qwen3-coder", QWEN3_CODER),
    ("qwen3coder", QWEN3_CODER),
    ("thinking-2507", QWEN_OPEN_THINK),
    ("qwq", QWEN_OPEN_THINK),
    ("qwen", QWEN),
    ("hermes", HERMES),
    ("phi", PHI),
    ("llama-4", LLAMA4),
    ("llama4", LLAMA4),
    ("llama-3", LLAMA3),
    ("llama3", LLAMA3),
    ("magistral", MISTRAL),
    ("devstral", MISTRAL),
    ("ministral", MISTRAL),
    ("codestral", MISTRAL),
    ("mixtral", MISTRAL),
    ("mistral", MISTRAL),
    ("gpt-oss", GPT_OSS),
    ("granite", GRANITE),
    ("deepseek", DEEPSEEK),
    ("gemma", GEMMA),
];

impl ToolFormat {
    /// The parsers a turn in this format runs, in order: the format itself,
    /// then fenced JSON (```` ```json ````), the shape most models fall
    /// back to when they forget their own.
    pub fn chain(self) -> &'static [ToolFormat] {
        use ToolFormat as T;
        match self {
            T::Hermes => &[T::Hermes, T::MarkdownJson],
            T::Qwen3Coder => &[T::Qwen3Coder, T::MarkdownJson],
            T::Mistral => &[T::Mistral, T::MarkdownJson],
            T::Llama3 => &[T::Llama3, T::MarkdownJson],
            T::Harmony => &[T::Harmony, T::MarkdownJson],
            T::Granite => &[T::Granite, T::MarkdownJson],
            T::DeepSeek => &[T::DeepSeek, T::MarkdownJson],
            T::Pythonic => &[T::Pythonic, T::MarkdownJson],
            T::MarkdownJson => &[T::MarkdownJson],
            T::Gemma => &[T::Gemma, T::MarkdownJson],
        }
    }
}

/// A request's sampling for `model` under `mode`: where the profile is in
/// use ([`ToolMode::Auto`] or a text format) and neither the request nor
/// the adapter's config (`configured_temperature`) sets any, the family's
/// recommended sampling ([`ModelProfile::sampling`]) is filled in. Native
/// mode leaves the choice to the server.
pub fn profile_sampling(
    mode: ToolMode,
    model: &str,
    configured_temperature: Option<f32>,
    settings: &mut GenerationSettings,
) {
    if mode == ToolMode::Native || configured_temperature.is_some() {
        return;
    }
    if profile_for(model).sampling.fill(settings) {
        tracing::debug!(model, "the model family's recommended sampling applied");
    }
}

/// The profile of `model` (a server's model id, e.g. `Qwen/Qwen3-8B-GGUF`,
/// `qwen3:8b`, `mistral-small-3.2`), from its name.
pub fn profile_for(model: &str) -> ModelProfile {
    let id = model.to_ascii_lowercase().replace(['_', ' '], "-");
    PROFILES
        .iter()
        .find(|(fragment, _)| id.contains(fragment))
        .map_or(UNKNOWN, |(_, p)| *p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_ids_map_to_families() {
        let cases = [
            (
                "Qwen/Qwen3-Coder-30B-A3B-Instruct",
                F::Qwen3Coder,
                T::Qwen3Coder,
            ),
            ("qwen3:8b", F::Qwen, T::Hermes),
            ("hermes-3-llama-3.1-8b", F::Hermes, T::Hermes),
            ("meta-llama/Llama-3.1-8B-Instruct", F::Llama3, T::Llama3),
            ("llama3.2:3b", F::Llama3, T::Llama3),
            ("Llama-4-Scout-17B-16E", F::Llama4, T::Pythonic),
            ("mistral-small-3.2", F::Mistral, T::Mistral),
            ("openai/gpt-oss-20b", F::GptOss, T::Harmony),
            ("granite3.3:8b", F::Granite, T::Granite),
            ("deepseek-r1:14b", F::DeepSeek, T::DeepSeek),
            ("gemma3:12b", F::Gemma, T::Gemma),
            ("phi4-mini", F::Phi, T::Hermes),
            ("some-new-model", F::Unknown, T::Hermes),
        ];
        for (id, family, format) in cases {
            let p = profile_for(id);
            assert_eq!((p.family, p.tool_format), (family, format), "{id}");
        }
        assert_eq!(profile_for("gpt-oss-120b").reasoning, R::Harmony);
        let opens = |id| profile_for(id).starts_in_reasoning;
        for id in [
            "qwq:32b",
            "Qwen/QwQ-32B",
            "deepseek-r1:14b",
            "deepseek-ai/DeepSeek-R1-Distill-Qwen-7B",
            "Qwen/Qwen3-4B-Thinking-2507",
        ] {
            assert!(opens(id), "{id}");
        }
        for id in [
            "qwen3:8b",
            "Qwen3-4B-Instruct-2507",
            "deepseek-v3",
            "llama3.1",
        ] {
            assert!(!opens(id), "{id}");
        }
        assert_eq!(
            profile_for("DeepSeek-R1-Distill-Qwen-7B").family,
            F::DeepSeek
        );
        assert!(!profile_for("gemma3").server_parses_tools);
    }

    #[test]
    fn a_family_sampling_fills_only_settings_that_set_none() {
        let mut none = GenerationSettings::new().max_tokens(10);
        profile_sampling(ToolMode::Auto, "qwen3:8b", None, &mut none);
        assert_eq!(
            (none.temperature, none.top_p, none.top_k, none.max_tokens),
            (Some(0.6), Some(0.95), Some(20), Some(10))
        );
        let mut own = GenerationSettings::new().top_k(5);
        profile_sampling(ToolMode::Auto, "qwen3:8b", None, &mut own);
        assert_eq!((own.temperature, own.top_k), (None, Some(5)));
        let mut configured = GenerationSettings::new();
        profile_sampling(ToolMode::Auto, "qwen3:8b", Some(0.1), &mut configured);
        assert!(configured.is_empty());
        let mut native = GenerationSettings::new();
        profile_sampling(ToolMode::Native, "qwen3:8b", None, &mut native);
        assert!(native.is_empty());
        let mut unknown = GenerationSettings::new();
        profile_sampling(ToolMode::Auto, "some-new-model", None, &mut unknown);
        assert!(unknown.is_empty());
    }
}
