//! The [`LocalEngine`] trait: what an in-process engine (llama.cpp, MLX) does.

use futures::stream::BoxStream;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::{Image, ProviderError, Usage};

/// Role of a rendered message; engines apply their own chat template.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EngineRole {
    /// System prompt.
    System,
    /// User turn (also carries tool results for local models).
    User,
    /// The model's own earlier turns.
    Assistant,
}

/// Marks an attached image's place in [`EngineMessage::content`]: the
/// content holds one of these per image, in the order of
/// [`EngineMessage::images`]. It never occurs in rendered text otherwise (the
/// renderer removes it from what users and tools wrote), so an engine that
/// sees can put its own media marker there and one that does not can drop it.
pub const IMAGE_SLOT: char = '\u{FFFC}';

/// One message of a conversation rendered for a local engine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EngineMessage {
    /// Who wrote it.
    pub role: EngineRole,
    /// Its text, with an [`IMAGE_SLOT`] at the place of each attached image.
    pub content: String,
    /// Images attached to it, in the order of their slots in `content`.
    /// [`crate::local_chat::LocalChatModel`] attaches images only for engines
    /// whose [`LocalEngine::vision`] is true; others get a note in their place.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<Image>,
}

/// One constrained assistant turn for an engine.
#[derive(Debug, Clone, PartialEq)]
pub struct EngineTurn {
    /// The rendered conversation, system message first.
    pub messages: Vec<EngineMessage>,
    /// JSON Schema the answer must match (enforced by the engine's grammar).
    pub schema: Value,
    /// Most tokens to generate.
    pub max_tokens: u32,
    /// Sampling temperature (0 = greedy).
    pub temperature: f32,
    /// Nucleus sampling: sample only among the likeliest allowed tokens whose
    /// probabilities add up to this (`None`: all allowed tokens).
    pub top_p: Option<f32>,
    /// Sampling seed, for reproducible runs.
    pub seed: Option<u32>,
}

/// Why generation stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EngineStop {
    /// End of generation (the grammar completed, or an end token).
    Done,
    /// `max_tokens` reached.
    MaxTokens,
    /// Cancelled by the caller.
    Cancelled,
}

/// One event of a constrained generation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum EngineEvent {
    /// More of the answer, always whole UTF-8 characters.
    Delta {
        /// The new text.
        text: String,
    },
    /// Generation is over.
    Done {
        /// Tokens read and written for this turn.
        usage: Usage,
        /// Why it stopped.
        stop: EngineStop,
    },
}

/// An in-process engine producing one constrained turn at a time.
///
/// It keeps its KV cache between turns and evaluates only what follows the
/// longest shared prefix. Errors use [`ProviderError`]: a conversation that does
/// not fit is `ContextOverflow`.
pub trait LocalEngine: Send + Sync {
    /// A short name for the loaded model (file stem or directory name).
    fn model_name(&self) -> String;

    /// Tokens available to one conversation.
    fn context_window(&self) -> u32;

    /// Whether the loaded model can see images. One that cannot is sent a
    /// short note in place of each image (see [`crate::ModelInfo::vision`]).
    fn vision(&self) -> bool {
        false
    }

    /// Generate one constrained turn, streamed; cancelling `cancel` stops at the
    /// next token.
    fn generate(
        &self,
        turn: EngineTurn,
        cancel: CancellationToken,
    ) -> BoxStream<'static, Result<EngineEvent, ProviderError>>;
}
