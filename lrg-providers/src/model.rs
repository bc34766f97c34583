//! The [`ChatModel`] trait: one streamed assistant turn for a whole conversation.

use std::pin::Pin;
use std::sync::Arc;

use futures::{Stream, StreamExt as _};
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::typed::{OutputMode, OutputSchema};
use crate::{
    GenerationSettings, Message, Messages, NativePart, Part, ProviderError, Role, ToolCall,
    ToolSpec,
};

/// Everything a model needs for one assistant turn.
///
/// Built with [`TurnRequest::new`] and the builder methods, so that fields can
/// be added without breaking callers:
///
/// ```
/// use lrg_providers::{Message, TurnRequest};
/// let request = TurnRequest::new(vec![Message::user("hi")])
///     .system("You are terse.")
///     .max_tokens(200);
/// assert_eq!(request.settings.max_tokens, Some(200));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct TurnRequest {
    /// The system prompt, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system: Option<String>,
    /// The conversation so far, oldest first; shared with the history it
    /// came from, so cloning a request copies no message ([`Messages`]).
    pub messages: Messages,
    /// The tools the model may call (empty: a tool-free completion).
    /// Shared like the messages: a session offers the list its tools keep
    /// (usually all of them) without copying a schema, per turn or per
    /// attempt.
    #[serde(
        default,
        skip_serializing_if = "<[ToolSpec]>::is_empty",
        serialize_with = "shared_tools::serialize",
        deserialize_with = "shared_tools::deserialize"
    )]
    pub tools: Arc<[ToolSpec]>,
    /// How to sample the answer; an unset setting uses the adapter's
    /// default. Serialized inline (`"temperature": 0.7` beside `messages`).
    #[serde(flatten)]
    pub settings: GenerationSettings,
    /// The schema the final answer must match, for a typed answer (see
    /// [`crate::typed`]); `None` for prose. The model may still call tools
    /// first: the schema holds for the answer that calls none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<OutputSchema>,
}

impl TurnRequest {
    /// A request for `messages`, with no system prompt, no tools and the
    /// adapter's default budget and temperature.
    pub fn new(messages: impl Into<Messages>) -> Self {
        Self {
            messages: messages.into(),
            ..Self::default()
        }
    }

    /// Set the system prompt.
    pub fn system(mut self, system: impl Into<String>) -> Self {
        self.system = Some(system.into());
        self
    }

    /// Set (or clear, with `None`) the system prompt.
    pub fn system_opt(mut self, system: Option<String>) -> Self {
        self.system = system;
        self
    }

    /// Offer these tools (a `Vec`, or a list shared with others).
    pub fn tools(mut self, tools: impl Into<Arc<[ToolSpec]>>) -> Self {
        self.tools = tools.into();
        self
    }

    /// Sample with these settings (replacing any set before).
    pub fn settings(mut self, settings: GenerationSettings) -> Self {
        self.settings = settings;
        self
    }

    /// Cap the answer at `max_tokens`.
    pub fn max_tokens(mut self, max_tokens: u32) -> Self {
        self.settings.max_tokens = Some(max_tokens);
        self
    }

    /// Sample at `temperature`, where the provider accepts one.
    pub fn temperature(mut self, temperature: f32) -> Self {
        self.settings.temperature = Some(temperature);
        self
    }

    /// Ask for a final answer matching `schema` (or prose, with `None`).
    pub fn output(mut self, schema: impl Into<Option<OutputSchema>>) -> Self {
        self.output = schema.into();
        self
    }
}

/// Serde for [`TurnRequest::tools`] as a plain list (serde's own
/// `Arc` support is behind a feature that would rebuild every crate).
mod shared_tools {
    use std::sync::Arc;

    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use crate::ToolSpec;

    pub(super) fn serialize<S: Serializer>(
        tools: &Arc<[ToolSpec]>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        tools.as_ref().serialize(serializer)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Arc<[ToolSpec]>, D::Error> {
        Vec::<ToolSpec>::deserialize(deserializer).map(Arc::from)
    }
}

/// Token counts reported for a turn.
///
/// The two totals mean the same for every provider; each adapter normalises
/// its API's figures to them:
/// - `prompt_tokens` counts *every* token the model read, whether it was
///   computed afresh, read from a prompt cache or written to one. (Anthropic's
///   `input_tokens` leaves cache reads and writes out; its adapter adds them.)
/// - `completion_tokens` counts *every* token the model wrote, reasoning
///   included. (Gemini's `candidatesTokenCount` leaves thoughts out; its
///   adapter adds them.)
///
/// The optional counts break those totals down, so each is a part of its
/// total, never more than it. `None` means the provider did not say (which is
/// not the same as `Some(0)`: "reported, and none"). They are left out of
/// JSON when `None`, so records written before they existed still load.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Usage {
    /// Tokens read: system prompt, tools and conversation, cached or not.
    pub prompt_tokens: u32,
    /// Tokens written by the model, reasoning included.
    pub completion_tokens: u32,
    /// Of `prompt_tokens`, those read from a cache rather than computed:
    /// a provider's prompt cache, or a local engine's kept KV cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_prompt_tokens: Option<u32>,
    /// Of `prompt_tokens`, those written to a prompt cache for later turns
    /// (Anthropic bills them apart; other providers do not report them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write_tokens: Option<u32>,
    /// Of `completion_tokens`, those spent on reasoning.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_tokens: Option<u32>,
}

impl Usage {
    /// Totals only: `prompt_tokens` read, `completion_tokens` written.
    pub fn new(prompt_tokens: u32, completion_tokens: u32) -> Self {
        Self {
            prompt_tokens,
            completion_tokens,
            ..Self::default()
        }
    }

    /// With the prompt tokens read from a cache: a part of `prompt_tokens`,
    /// capped at it (a server's figure above it is wrong).
    pub fn with_cached_prompt_tokens(mut self, tokens: impl Into<Option<u32>>) -> Self {
        self.cached_prompt_tokens = tokens.into().map(|n| n.min(self.prompt_tokens));
        self
    }

    /// With the prompt tokens written to a cache: a part of `prompt_tokens`,
    /// capped at it.
    pub fn with_cache_write_tokens(mut self, tokens: impl Into<Option<u32>>) -> Self {
        self.cache_write_tokens = tokens.into().map(|n| n.min(self.prompt_tokens));
        self
    }

    /// With the reasoning tokens: a part of `completion_tokens`, capped at it.
    pub fn with_reasoning_tokens(mut self, tokens: impl Into<Option<u32>>) -> Self {
        self.reasoning_tokens = tokens.into().map(|n| n.min(self.completion_tokens));
        self
    }
}

/// Running totals: `total += turn`. A breakdown stays `None` only while no
/// turn reported it. Saturates rather than wraps.
impl std::ops::AddAssign for Usage {
    fn add_assign(&mut self, other: Usage) {
        fn sum(a: Option<u32>, b: Option<u32>) -> Option<u32> {
            match (a, b) {
                (Some(a), Some(b)) => Some(a.saturating_add(b)),
                (a, b) => a.or(b),
            }
        }
        self.prompt_tokens = self.prompt_tokens.saturating_add(other.prompt_tokens);
        self.completion_tokens = self
            .completion_tokens
            .saturating_add(other.completion_tokens);
        self.cached_prompt_tokens = sum(self.cached_prompt_tokens, other.cached_prompt_tokens);
        self.cache_write_tokens = sum(self.cache_write_tokens, other.cache_write_tokens);
        self.reasoning_tokens = sum(self.reasoning_tokens, other.reasoning_tokens);
    }
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
#[non_exhaustive]
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
    /// More of a tool call while the model is still writing it: live only,
    /// for showing the call early. The [`TurnEvent::ToolCall`] that follows
    /// is authoritative; a consumer that only runs calls ignores these.
    ///
    /// The contract, the same for every adapter:
    /// - `index` numbers the calls of this turn from 0, in the order their
    ///   first deltas appear; every fragment of one call carries its index.
    /// - The first delta of a call carries its `id` (the id its `ToolCall`
    ///   will have) and its `name`; later ones carry `None` for both, so a
    ///   fragment costs no copy of them.
    /// - The `arguments_fragment`s of one call, joined in order, are the
    ///   arguments' JSON text as the model wrote it (it may be empty on the
    ///   first delta). An adapter whose provider sends a call whole emits one
    ///   delta holding all of it.
    /// - All of a call's deltas come before its `ToolCall`. A call cut off
    ///   (the answer budget ran out, the stream failed) may have deltas and
    ///   no `ToolCall`: it never runs, and a viewer drops it when the turn ends.
    ToolCallDelta {
        /// The call's number within this turn, from 0.
        index: u32,
        /// The call's id, on its first delta only.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<String>,
        /// The tool's name, on its first delta only.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
        /// More of the arguments' JSON text.
        arguments_fragment: String,
    },
    /// The model is being loaded before the turn can start (a local engine
    /// the pool had unloaded): live only, for a progress bar.
    Loading {
        /// Fraction done, 0.0 to 1.0.
        progress: f32,
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

/// The one [`TurnEvent::ToolCallDelta`] of a call that arrives whole
/// (Gemini, Ollama), as call number `index` of its turn.
pub(crate) fn whole_call_delta(index: u32, call: &ToolCall) -> TurnEvent {
    TurnEvent::ToolCallDelta {
        index,
        id: Some(call.id.clone()),
        name: Some(call.name.clone()),
        arguments_fragment: call.arguments.to_string(),
    }
}

/// A turn that fails before anything is sent: a stream of just `error`.
pub(crate) fn failed_turn(error: ProviderError) -> TurnStream {
    Box::pin(futures::stream::once(async move { Err(error) }))
}

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
///
/// Built with [`ModelInfo::new`] and the builder methods:
///
/// ```
/// use lrg_providers::{ModelInfo, ModelLocation};
/// let info = ModelInfo::new("openai", "gpt-4.1", ModelLocation::Cloud)
///     .context_window(Some(1_047_576))
///     .sends_to(Some("api.openai.com".into()));
/// assert_eq!(info.id(), "openai:gpt-4.1");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
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
    /// Whether the model can see images. One that cannot is sent a short text
    /// placeholder in place of each image.
    #[serde(default = "yes", skip_serializing_if = "is_yes")]
    pub vision: bool,
    /// How a typed answer is obtained from it (see [`crate::typed`]). Left
    /// out of JSON when `prompted` (the default), so records written before
    /// it existed read and compare the same.
    #[serde(default, skip_serializing_if = "OutputMode::is_prompted")]
    pub output_mode: OutputMode,
    /// Whether the model keeps the conversation itself (an external agent,
    /// sent only each new message): the caller cannot summarize it for
    /// it, and a rewritten history starts the model afresh.
    #[serde(default, skip_serializing_if = "is_no")]
    pub keeps_conversation: bool,
}

fn yes() -> bool {
    true
}

fn is_yes(b: &bool) -> bool {
    *b
}

fn is_no(b: &bool) -> bool {
    !*b
}

impl ModelInfo {
    /// A model of `provider` named `model`, running at `location`; window and
    /// destination unknown, images assumed visible (the server refuses them
    /// when they are not).
    pub fn new(
        provider: impl Into<String>,
        model: impl Into<String>,
        location: ModelLocation,
    ) -> Self {
        Self {
            provider: provider.into(),
            model: model.into(),
            location,
            context_window: None,
            sends_to: None,
            vision: true,
            output_mode: OutputMode::Prompted,
            keeps_conversation: false,
        }
    }

    /// Set the context window, when known.
    pub fn context_window(mut self, tokens: Option<u32>) -> Self {
        self.context_window = tokens;
        self
    }

    /// Set the host a conversation is sent to, if it leaves the machine.
    pub fn sends_to(mut self, host: Option<String>) -> Self {
        self.sends_to = host;
        self
    }

    /// Set whether the model can see images.
    pub fn vision(mut self, vision: bool) -> Self {
        self.vision = vision;
        self
    }

    /// Set how a typed answer is obtained from it (default
    /// [`OutputMode::Prompted`]).
    pub fn output_mode(mut self, mode: OutputMode) -> Self {
        self.output_mode = mode;
        self
    }

    /// Set whether the model keeps the conversation itself (the field of
    /// that name; default no).
    pub fn keeps_conversation(mut self, keeps: bool) -> Self {
        self.keeps_conversation = keeps;
        self
    }

    /// The model id, `provider:model` (the form `--model` takes).
    pub fn id(&self) -> String {
        format!("{}:{}", self.provider, self.model)
    }
}

/// A model that can take one assistant turn of a conversation.
///
/// Implementations are cheap to share (`Arc<dyn ChatModel>`); a turn owns its
/// request so the stream can outlive the borrow.
pub trait ChatModel: Send + Sync {
    /// What this model is.
    fn info(&self) -> ModelInfo;

    /// Run one assistant turn, streamed: reasoning and text deltas as decoded,
    /// tool-call deltas while a call is written (where the provider streams
    /// them) and then each whole tool call, native parts, usage, then `End`. Cancelling `cancel`
    /// stops the stream mid-way.
    fn turn(&self, request: TurnRequest, cancel: CancellationToken) -> TurnStream;
}

impl<M: ChatModel + ?Sized> ChatModel for std::sync::Arc<M> {
    fn info(&self) -> ModelInfo {
        (**self).info()
    }

    fn turn(&self, request: TurnRequest, cancel: CancellationToken) -> TurnStream {
        (**self).turn(request, cancel)
    }
}

impl<M: ChatModel + ?Sized> ChatModel for Box<M> {
    fn info(&self) -> ModelInfo {
        (**self).info()
    }

    fn turn(&self, request: TurnRequest, cancel: CancellationToken) -> TurnStream {
        (**self).turn(request, cancel)
    }
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
            // Live only: the whole call follows.
            TurnEvent::ToolCallDelta { .. } => {}
            // Live only: a load is no part of the answer.
            TurnEvent::Loading { .. } => {}
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

#[cfg(test)]
mod tests {
    use super::Usage;

    #[test]
    fn usage_without_breakdown_keeps_its_old_json() {
        let usage = Usage::new(12, 3);
        let json = serde_json::to_string(&usage).unwrap();
        assert_eq!(json, r#"{"prompt_tokens":12,"completion_tokens":3}"#);
        // An old record (no breakdown) loads with none.
        assert_eq!(serde_json::from_str::<Usage>(&json).unwrap(), usage);
        let full = usage.with_cached_prompt_tokens(10).with_reasoning_tokens(2);
        let back: Usage = serde_json::from_str(&serde_json::to_string(&full).unwrap()).unwrap();
        assert_eq!(back, full);
    }

    #[test]
    fn a_breakdown_is_capped_at_its_total() {
        let usage = Usage::new(5, 2)
            .with_cached_prompt_tokens(9)
            .with_cache_write_tokens(6)
            .with_reasoning_tokens(4);
        assert_eq!(usage.cached_prompt_tokens, Some(5));
        assert_eq!(usage.cache_write_tokens, Some(5));
        assert_eq!(usage.reasoning_tokens, Some(2));
    }

    #[test]
    fn totals_add_and_keep_a_breakdown_any_turn_reported() {
        let mut total = Usage::new(10, 1);
        total += Usage::new(20, 5).with_cached_prompt_tokens(8);
        total += Usage::new(30, 7).with_reasoning_tokens(3);
        total += Usage::new(u32::MAX, 0).with_cached_prompt_tokens(4);
        assert_eq!(total.prompt_tokens, u32::MAX);
        assert_eq!(total.completion_tokens, 13);
        assert_eq!(total.cached_prompt_tokens, Some(12));
        assert_eq!(total.cache_write_tokens, None);
        assert_eq!(total.reasoning_tokens, Some(3));
    }
}
