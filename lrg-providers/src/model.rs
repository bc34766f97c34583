//! The [`ChatModel`] trait: one streamed assistant turn for a whole conversation.

use std::pin::Pin;

use futures::{Stream, StreamExt as _};
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::{Message, NativePart, Part, ProviderError, Role, ToolCall, ToolSpec};

/// Everything a model needs for one assistant turn.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TurnRequest {
    /// The system prompt, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system: Option<String>,
    /// The conversation so far, oldest first.
    pub messages: Vec<Message>,
    /// The tools the model may call (empty: a tool-free completion).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<ToolSpec>,
    /// Answer budget in tokens; `None` uses the adapter's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    /// Sampling temperature, where the provider accepts one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
}

/// Token counts reported for a turn.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Tokens read: system prompt, tools and conversation.
    pub prompt_tokens: u32,
    /// Tokens written by the model.
    pub completion_tokens: u32,
}

/// Why a turn ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The model finished its answer.
    EndTurn,
    /// The model stopped to have its tool calls run.
    ToolCalls,
    /// The answer budget ran out.
    MaxTokens,
    /// The caller cancelled the turn.
    Cancelled,
    /// Another reason, as the provider named it.
    Other(String),
}

/// One event of a streamed turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum TurnEvent {
    /// More of the model's reasoning, as decoded.
    ReasoningDelta {
        /// The new text.
        text: String,
    },
    /// More of the answer text, as decoded.
    TextDelta {
        /// The new text.
        text: String,
    },
    /// A complete tool call.
    ToolCall(ToolCall),
    /// A provider-native part to keep in the history (thinking signatures, ...).
    Native(NativePart),
    /// Token usage (may come more than once; the last one wins).
    Usage(Usage),
    /// The turn is over.
    End {
        /// Why.
        stop: StopReason,
    },
}

/// A streamed turn. After cancellation it ends promptly, at most yielding
/// `End { stop: Cancelled }`.
pub type TurnStream = Pin<Box<dyn Stream<Item = Result<TurnEvent, ProviderError>> + Send>>;

/// Where a model runs, which decides defaults (image budget, answer budget)
/// and what a user is told about where the conversation goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ModelLocation {
    /// In this process (llama.cpp, MLX) or a scripted/replayed model.
    Local,
    /// An AI server the user runs (Ollama, LM Studio, vLLM, ...).
    Server,
    /// A third party's cloud API.
    Cloud,
}

/// What a model is and where it runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelInfo {
    /// Provider prefix, e.g. `openai`.
    pub provider: String,
    /// The provider's model name.
    pub model: String,
    /// Where it runs.
    pub location: ModelLocation,
    /// Context window in tokens, when known.
    pub context_window: Option<u32>,
    /// Where a conversation goes when it leaves the machine (host name), if it does.
    pub sends_to: Option<String>,
}

/// A model that can take one assistant turn of a conversation.
///
/// Implementations are cheap to share (`Arc<dyn ChatModel>`); a turn owns its
/// request so the stream can outlive the borrow.
pub trait ChatModel: Send + Sync {
    /// What this model is.
    fn info(&self) -> ModelInfo;

    /// Run one assistant turn, streamed: reasoning and text deltas as decoded,
    /// whole tool calls, native parts, usage, then `End`. Cancelling `cancel`
    /// stops the stream mid-way.
    fn turn(&self, request: TurnRequest, cancel: CancellationToken) -> TurnStream;
}

/// A whole assistant turn, collected from its stream.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct AssistantTurn {
    /// The parts, in the order they arrived (consecutive deltas merged).
    pub parts: Vec<Part>,
    /// Last reported usage.
    pub usage: Option<Usage>,
    /// Why it ended (`None` if the stream ended without saying).
    pub stop: Option<StopReason>,
}

impl AssistantTurn {
    /// Fold one event in.
    pub fn push(&mut self, event: TurnEvent) {
        match event {
            TurnEvent::ReasoningDelta { text } => match self.parts.last_mut() {
                Some(Part::Reasoning { text: prev }) => prev.push_str(&text),
                _ => self.parts.push(Part::Reasoning { text }),
            },
            TurnEvent::TextDelta { text } => match self.parts.last_mut() {
                Some(Part::Text { text: prev }) => prev.push_str(&text),
                _ => self.parts.push(Part::Text { text }),
            },
            TurnEvent::ToolCall(call) => self.parts.push(Part::ToolCall(call)),
            TurnEvent::Native(native) => self.parts.push(Part::Native(native)),
            TurnEvent::Usage(usage) => self.usage = Some(usage),
            TurnEvent::End { stop } => self.stop = Some(stop),
        }
    }

    /// The answer text.
    pub fn text(&self) -> String {
        self.parts
            .iter()
            .filter_map(|p| match p {
                Part::Text { text } => Some(text.as_str()),
                _ => None,
            })
            .collect()
    }

    /// The tool calls, in order.
    pub fn tool_calls(&self) -> Vec<&ToolCall> {
        self.parts
            .iter()
            .filter_map(|p| match p {
                Part::ToolCall(c) => Some(c),
                _ => None,
            })
            .collect()
    }

    /// The turn as an assistant message for the history.
    pub fn into_message(self) -> Message {
        Message {
            role: Role::Assistant,
            parts: self.parts,
        }
    }
}

/// Drive a turn stream to its end and collect it. The first error is returned.
pub async fn collect_turn(mut stream: TurnStream) -> Result<AssistantTurn, ProviderError> {
    let mut turn = AssistantTurn::default();
    while let Some(event) = stream.next().await {
        turn.push(event?);
    }
    Ok(turn)
}
