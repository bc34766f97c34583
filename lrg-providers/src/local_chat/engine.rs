//! The [`LocalEngine`] trait: what an in-process engine (llama.cpp, MLX) does,
//! and what loading one takes ([`EngineSettings`], [`LoadProgress`]).
//!
//! One loaded engine serves every chat on its model (see
//! [`super::pool`]): each chat is a [`SequenceId`], every [`EngineTurn`]
//! names the sequence it continues, and [`LocalEngine::release`] says a
//! chat is gone. How much of a turn's prompt the engine could keep is
//! reported by [`EngineEvent::Prefill`].

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

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

/// A conversation's identity inside a shared engine: the engine keeps this
/// sequence's KV prefix (in a slot, or saved to host memory) between its
/// turns, apart from every other chat's. At most one turn of a sequence
/// runs at a time ([`crate::local_chat::LocalChatModel`] gives a turn that
/// overlaps another of its chat a spare sequence).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct SequenceId(pub u64);

impl SequenceId {
    /// A sequence id no other call in this process has returned.
    pub fn fresh() -> Self {
        // Starts at 1 so 0 stays free for single-chat tools and tests.
        static NEXT: AtomicU64 = AtomicU64::new(1);
        Self(NEXT.fetch_add(1, Ordering::Relaxed))
    }
}

impl fmt::Display for SequenceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "seq{}", self.0)
    }
}

/// One constrained assistant turn for an engine.
#[derive(Debug, Clone, PartialEq)]
pub struct EngineTurn {
    /// The chat this turn continues; its KV prefix is reused when the
    /// engine still has it.
    pub sequence: SequenceId,
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

/// How a turn's prompt got into the engine's KV cache: the three counts add
/// up to the prompt's tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[non_exhaustive]
pub struct KvReuse {
    /// Prompt tokens whose KV was still in the sequence's slot.
    pub kept: u32,
    /// Prompt tokens whose KV was restored from the sequence's saved state
    /// (host memory), not computed.
    pub restored: u32,
    /// Prompt tokens evaluated (prefilled) for this turn.
    pub prefilled: u32,
    /// Whether the sequence had a saved state that was dropped (the
    /// `kv_cache_mem` budget, an unload) so what it held was prefilled again.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dropped: bool,
}

impl KvReuse {
    /// `kept` tokens found in the slot, `restored` from a saved state,
    /// `prefilled` evaluated.
    pub fn new(kept: u32, restored: u32, prefilled: u32) -> Self {
        Self {
            kept,
            restored,
            prefilled,
            dropped: false,
        }
    }

    /// Saying whether a saved state was dropped and its tokens prefilled again.
    pub fn with_dropped(mut self, dropped: bool) -> Self {
        self.dropped = dropped;
        self
    }

    /// Prompt tokens not computed for this turn (kept or restored).
    pub fn reused(&self) -> u32 {
        self.kept.saturating_add(self.restored)
    }
}

/// One event of a constrained generation.
///
/// A turn streams at most one [`EngineEvent::Prefill`] (before the first
/// delta, once the prompt is in the KV cache), then deltas, then one
/// [`EngineEvent::Done`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum EngineEvent {
    /// The prompt is in the KV cache: how much of it was kept, restored
    /// from a saved state, or prefilled again. Engines that do not track
    /// it send none.
    Prefill {
        /// The counts.
        kv: KvReuse,
    },
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

    /// Generate one constrained turn of `turn.sequence`, streamed; cancelling
    /// `cancel` stops at the next token. Turns of different sequences may
    /// run at once (up to [`LocalEngine::slots`] decode together; more wait).
    fn generate(
        &self,
        turn: EngineTurn,
        cancel: CancellationToken,
    ) -> BoxStream<'static, Result<EngineEvent, ProviderError>>;

    /// The chat of `sequence` is gone: free its slot and any saved state.
    /// Never called while a turn of that sequence runs.
    fn release(&self, sequence: SequenceId) {
        let _ = sequence;
    }

    /// How many sequences decode at once (KV allocated for each at load).
    fn slots(&self) -> usize {
        1
    }

    /// Bytes this engine holds now (weights, KV, saved states), when it
    /// knows.
    fn resident_bytes(&self) -> Option<u64> {
        None
    }
}

/// Default sequence slots per loaded engine ([`EngineSettings::parallel`]).
pub const DEFAULT_PARALLEL: usize = 4;

/// Default host-memory budget for saved sequence states
/// ([`EngineSettings::kv_cache_mem`]): 2 GiB.
pub const DEFAULT_KV_CACHE_MEM: u64 = 2 << 30;

/// How an engine is loaded. Part of the engine pool's key: the same model
/// with other settings is another load.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct EngineSettings {
    /// Sequence slots, each with its own KV allocated at load (llama.cpp's
    /// `n_seq_max`, MLX's per-sequence prompt caches). Default
    /// [`DEFAULT_PARALLEL`]; at least 1.
    pub parallel: usize,
    /// Bytes of host memory for the saved KV states of chats that lost
    /// their slot (more chats than slots); past it the least recently used
    /// state is dropped and that chat prefills again. Default
    /// [`DEFAULT_KV_CACHE_MEM`].
    pub kv_cache_mem: u64,
}

impl Default for EngineSettings {
    fn default() -> Self {
        Self {
            parallel: DEFAULT_PARALLEL,
            kv_cache_mem: DEFAULT_KV_CACHE_MEM,
        }
    }
}

impl EngineSettings {
    /// The defaults: [`DEFAULT_PARALLEL`] slots, [`DEFAULT_KV_CACHE_MEM`].
    pub fn new() -> Self {
        Self::default()
    }

    /// With `parallel` slots (0 is taken as 1).
    pub fn with_parallel(mut self, parallel: usize) -> Self {
        self.parallel = parallel.max(1);
        self
    }

    /// With this many bytes for saved sequence states.
    pub fn with_kv_cache_mem(mut self, bytes: u64) -> Self {
        self.kv_cache_mem = bytes;
        self
    }
}

/// Where a load reports how far it got: a cheap, clonable callback taking
/// the fraction done, 0.0 to 1.0.
#[derive(Clone)]
pub struct LoadProgress(Arc<dyn Fn(f32) + Send + Sync>);

impl LoadProgress {
    /// Progress delivered to `report`.
    pub fn new(report: impl Fn(f32) + Send + Sync + 'static) -> Self {
        Self(Arc::new(report))
    }

    /// Progress nobody watches.
    pub fn ignore() -> Self {
        Self::new(|_| {})
    }

    /// Report `fraction` done (clamped to 0..=1; NaN reads as 0).
    pub fn report(&self, fraction: f32) {
        let fraction = if fraction.is_nan() {
            0.0
        } else {
            fraction.clamp(0.0, 1.0)
        };
        (self.0)(fraction);
    }
}

impl Default for LoadProgress {
    fn default() -> Self {
        Self::ignore()
    }
}

impl fmt::Debug for LoadProgress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("LoadProgress")
    }
}
