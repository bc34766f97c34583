//! Tool calls written as text: streaming parsers for the formats models use
//! when the server does not parse tool calls itself (llama-server without
//! `--jinja`, vLLM without a `--tool-call-parser`, a template without tools).
//!
//! [`TextToolParser`] is fed the answer's text deltas, as a wire decoder is
//! fed frames, and gives back [`TurnEvent`](crate::TurnEvent)s: text as soon as it cannot be
//! the start of a call, reasoning (`<think>…</think>`, Harmony's analysis
//! channel), and whole [`ToolCall`](crate::ToolCall)s with generated ids. A call is never shown
//! as text. For a chat template that opens `<think>` in the prompt, the parser
//! [starts in reasoning](TextToolParser::starting_in_reasoning). It is pure
//! and I/O-free, and linear in its input: no delta makes it re-scan what it
//! already read.
//!
//! A call that cannot be read, or names no offered tool, becomes a call to
//! [`RECOVERY_TOOL`]: its arguments hold a message for the model that restates
//! what is needed (see [`recovery`]). The session answers it with that message
//! as the tool result, so a small model sees the fix in its immediate context.

mod decoder;
mod formats;
mod fuzz;
mod json;
mod mode;
mod names;
mod parser;
mod profiles;
mod prompt;
mod pythonic;
pub mod recovery;
mod scan;

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

pub use decoder::TextToolDecoder;
#[doc(hidden)]
pub use fuzz::fuzz_parse;
pub use mode::{TextTurn, ToolMode};
pub use names::{NameMatch, Repair, match_tool_name, resolve_tool_name};
pub use parser::TextToolParser;
pub use profiles::{
    Family, ModelProfile, ReasoningFormat, Sampling, profile_for, profile_sampling,
};
pub use prompt::{render_call, tools_prompt};
pub use recovery::RECOVERY_TOOL;

/// How a model writes tool calls as text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum ToolFormat {
    /// `<tool_call>{"name":…,"arguments":…}</tool_call>` (Qwen 2.5/3, Hermes, Phi).
    Hermes,
    /// `<tool_call><function=NAME><parameter=P>…</parameter></function></tool_call>`.
    Qwen3Coder,
    /// `[TOOL_CALLS][{"name":…,"arguments":…}]` or `[TOOL_CALLS]NAME[ARGS]{…}`.
    Mistral,
    /// `<|python_tag|>{"name":…,"parameters":…}` or the bare JSON object;
    /// several calls are joined by `;`. Also Llama 3.1's custom-tool form
    /// `<function=NAME>{…}</function>`.
    Llama3,
    /// gpt-oss: `<|channel|>commentary to=functions.NAME …<|message|>{…}<|call|>`.
    Harmony,
    /// `<|tool_call|>[…]` or `<function_call>{…}`.
    Granite,
    /// `<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>…`.
    #[serde(rename = "deepseek")]
    DeepSeek,
    /// `[get_weather(city="Paris"), add(a=1, b=2)]` (Llama 4 and others).
    Pythonic,
    /// ```` ```json {"name":…,"arguments":…} ``` ```` blocks, as a last resort.
    MarkdownJson,
    /// Gemma: ```` ```tool_code\nget_weather(city="Paris")\n``` ```` blocks
    /// (results go back in ```` ```tool_output ```` blocks), or a Pythonic
    /// list at the start of the answer.
    Gemma,
}

impl ToolFormat {
    /// Every format, in the order of the table in the docs.
    pub const ALL: [ToolFormat; 10] = [
        ToolFormat::Hermes,
        ToolFormat::Qwen3Coder,
        ToolFormat::Mistral,
        ToolFormat::Llama3,
        ToolFormat::Harmony,
        ToolFormat::Granite,
        ToolFormat::DeepSeek,
        ToolFormat::Pythonic,
        ToolFormat::MarkdownJson,
        ToolFormat::Gemma,
    ];

    /// The name used on the command line and in serde (`qwen3-coder`).
    pub fn name(self) -> &'static str {
        match self {
            ToolFormat::Hermes => "hermes",
            ToolFormat::Qwen3Coder => "qwen3-coder",
            ToolFormat::Mistral => "mistral",
            ToolFormat::Llama3 => "llama3",
            ToolFormat::Harmony => "harmony",
            ToolFormat::Granite => "granite",
            ToolFormat::DeepSeek => "deepseek",
            ToolFormat::Pythonic => "pythonic",
            ToolFormat::MarkdownJson => "markdown-json",
            ToolFormat::Gemma => "gemma",
        }
    }
}

impl fmt::Display for ToolFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A name that is no tool format.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown tool format `{0}`: expected one of {list}", list = ToolFormat::ALL.map(ToolFormat::name).join(", "))]
pub struct UnknownToolFormat(pub String);

impl FromStr for ToolFormat {
    type Err = UnknownToolFormat;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let want = s.trim().to_ascii_lowercase().replace('_', "-");
        ToolFormat::ALL
            .into_iter()
            .find(|f| f.name() == want || f.name().replace('-', "") == want)
            .ok_or_else(|| UnknownToolFormat(s.to_string()))
    }
}

#[cfg(test)]
mod tests;
