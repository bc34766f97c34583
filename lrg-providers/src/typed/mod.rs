//! Typed answers: a final answer that must match a JSON Schema.
//!
//! A caller asks for one by putting an [`OutputSchema`] on
//! [`TurnRequest::output`](crate::TurnRequest::output). Each adapter carries
//! it the strongest way its API allows, and says which in
//! [`ModelInfo::output_mode`](crate::ModelInfo::output_mode):
//!
//! | [`OutputMode`] | who | how |
//! |---|---|---|
//! | `grammar` | llama.cpp, MLX | the reply branch of the answer grammar *is* the schema: the answer cannot be invalid |
//! | `native_strict` | OpenAI Chat Completions and Responses, Anthropic (models with structured outputs) | the API's strict mode, with the schema shaped to its rules ([`OutputSchema::strict`]) |
//! | `native` | Gemini, Ollama, OpenAI-compatible servers | the API's JSON-schema field, enforced as the server sees fit |
//! | `forced_tool` | older Anthropic models | a synthetic answer tool the model is made to call |
//! | `prompted` | text-tool servers, CLI agents, ACP agents, scripted models | the schema in the instructions ([`OutputSchema::instructions`]) |
//!
//! Whatever the mode, the answer is then checked the same way
//! ([`OutputSchema::check`]): extracted from the text ([`extract_json`]),
//! cleared of the `null`s strict shaping invited, and validated against the
//! caller's own schema, because servers lie. What does not validate comes
//! back as a list of problems in words, ready for a repair turn
//! ([`repair_prompt`]).

mod check;
mod extract;
mod output_schema;
mod strict;

pub use check::{AnswerProblems, repair_prompt};
pub use extract::extract_json;
pub use output_schema::{
    GRAMMAR_STRING_MAX_CHARS, MAX_SCHEMA_BYTES, OutputSchema, OutputSchemaError,
};
pub(crate) use strict::schema_without_meta as without_meta;
pub use strict::{StrictSchema, StrictTarget, strict_schema};

use serde::{Deserialize, Serialize};

/// How a model is made to give a typed answer, strongest first (see the
/// [module docs](self)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum OutputMode {
    /// A local engine's grammar enforces the schema token by token.
    Grammar,
    /// The API's strict structured-output mode.
    NativeStrict,
    /// The API's JSON-schema field, without a strictness promise.
    Native,
    /// A synthetic tool whose arguments are the answer, which the model is
    /// made to call.
    ForcedTool,
    /// The schema is written into the instructions; only validation holds
    /// the answer to it.
    #[default]
    Prompted,
}

impl OutputMode {
    /// The stable snake_case name (`grammar`, `native_strict`, ...), as in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Grammar => "grammar",
            Self::NativeStrict => "native_strict",
            Self::Native => "native",
            Self::ForcedTool => "forced_tool",
            Self::Prompted => "prompted",
        }
    }

    /// Whether this is [`OutputMode::Prompted`] (serde's default, left out
    /// of JSON).
    pub fn is_prompted(&self) -> bool {
        *self == Self::Prompted
    }
}

impl std::fmt::Display for OutputMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
