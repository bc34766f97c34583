//! [`LlamaEngine`]: the handle callers hold; the work happens on its worker.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::sync::mpsc as std_mpsc;
use std::time::Duration;

use futures::StreamExt;
use futures::stream::BoxStream;
use lrg_providers::ProviderError;
use lrg_providers::local_chat::{
    EngineEvent, EngineMessage, EngineTurn, LoadProgress, LocalEngine, SequenceId,
};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::config::LlamaConfig;
use crate::worker::{Job, Loaded, Shared, spawn_worker};

/// Counters of a turn, to check and measure KV-cache reuse.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EngineStats {
    /// Tokens of the rendered prompt (an image counts the tokens the
    /// projector made of it).
    pub prompt_tokens: u32,
    /// Prompt tokens not computed: kept in the chat's slot from earlier
    /// turns, or restored from its saved state.
    pub tokens_reused: u32,
    /// Of `tokens_reused`, those restored from the chat's saved state (it
    /// had lost its slot to other chats).
    pub tokens_restored: u32,
    /// Prompt tokens evaluated this turn (`prompt_tokens - tokens_reused`).
    pub tokens_evaluated: u32,
    /// Tokens generated this turn.
    pub tokens_generated: u32,
    /// Tokens in the chat's slot after the turn.
    pub tokens_held: u32,
    /// Time from the start of the turn (once it had a slot) until its prompt
    /// was in the KV cache: rendering, restoring a saved state, evaluating,
    /// sharing batches with other chats' turns.
    pub prefill: Duration,
    /// Time from the start of the turn (once it had a slot) to the first
    /// generated token.
    pub time_to_first_token: Option<Duration>,
}

/// A llama.cpp model behind the [`LocalEngine`] trait, shared by chats.
///
/// One worker thread owns the model and its context. The context has
/// [`LlamaConfig::n_seq_max`] sequence slots; each chat ([`SequenceId`])
/// takes one for a turn, keeps its KV prefix there between turns, and when
/// chats outnumber slots has its state saved to host memory and restored on
/// its next turn. Turns of different chats decode together, one batch per
/// step. Dropping the engine stops the worker once its queue is done.
pub struct LlamaEngine {
    jobs: std_mpsc::Sender<Job>,
    model_name: String,
    context_window: u32,
    vision: bool,
    slots: usize,
    shared: Arc<Shared>,
}

impl std::fmt::Debug for LlamaEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LlamaEngine")
            .field("model_name", &self.model_name)
            .field("context_window", &self.context_window)
            .field("vision", &self.vision)
            .field("slots", &self.slots)
            .finish()
    }
}

impl LlamaEngine {
    /// Loads the model and starts the worker. Blocks until the model is
    /// loaded (seconds for large files): from async code, call it inside
    /// `tokio::task::spawn_blocking`.
    ///
    /// # Errors
    /// `ModelNotFound` when the file does not exist, `Config` when llama.cpp
    /// cannot load it or create a context with these settings, or when the
    /// projector file is missing or is not a projector for this model.
    pub fn load(config: LlamaConfig) -> Result<Self, ProviderError> {
        Self::load_with_progress(config, LoadProgress::ignore())
    }

    /// As [`LlamaEngine::load`], reporting how far llama.cpp has read the
    /// weights (0 to 1) to `progress` as it goes.
    ///
    /// # Errors
    /// As for [`LlamaEngine::load`].
    pub fn load_with_progress(
        config: LlamaConfig,
        progress: LoadProgress,
    ) -> Result<Self, ProviderError> {
        if !config.model_path.is_file() {
            return Err(ProviderError::ModelNotFound {
                message: format!("no GGUF file at {}", config.model_path.display()),
            });
        }
        if let Some(mmproj) = &config.mmproj_path
            && !mmproj.is_file()
        {
            return Err(ProviderError::Config {
                message: format!("no projector (--mmproj) file at {}", mmproj.display()),
            });
        }
        if config.n_batch == 0 || config.n_seq_max == 0 {
            return Err(ProviderError::Config {
                message: "n_batch and n_seq_max must be at least 1".into(),
            });
        }
        let model_name = config
            .model_path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| config.model_path.display().to_string());
        let shared = Arc::new(Shared::default());
        let (
            jobs,
            Loaded {
                context_window,
                vision,
                slots,
            },
        ) = spawn_worker(config, progress, shared.clone())?;
        Ok(Self {
            jobs,
            model_name,
            context_window,
            vision,
            slots,
            shared,
        })
    }

    /// The token ids of `messages` as a turn would feed them to the model:
    /// chat template applied, generation prompt appended. Waits for a running
    /// turn to finish first.
    ///
    /// # Errors
    /// As for a turn's rendering (a message llama.cpp cannot take), for a
    /// conversation with images, or when the worker has stopped.
    pub fn tokenize_prompt(&self, messages: &[EngineMessage]) -> Result<Vec<i32>, ProviderError> {
        let stopped = || ProviderError::Other {
            message: "the llama.cpp worker has stopped".into(),
        };
        let (reply, rx) = std_mpsc::channel();
        self.jobs
            .send(Job::Tokenize {
                messages: messages.to_vec(),
                reply,
            })
            .map_err(|_| stopped())?;
        rx.recv().map_err(|_| stopped())?
    }

    /// Forgets the conversations held in free slots and every saved state,
    /// after the jobs queued before it; the next turns evaluate their whole
    /// prompts. Nothing needs this for correctness (a new conversation only
    /// shares its matching prefix).
    pub fn clear_cache(&self) {
        // A stopped worker holds no cache to clear.
        let _ = self.jobs.send(Job::ClearCache);
    }

    /// Counters of the turn that started most recently, whichever chat it
    /// belongs to (`tokens_generated` counts up live while it runs).
    pub fn stats(&self) -> EngineStats {
        self.shared.last()
    }

    /// Counters of the latest turn of `sequence` (live while it runs);
    /// `None` before its first turn and after [`LocalEngine::release`].
    pub fn stats_of(&self, sequence: SequenceId) -> Option<EngineStats> {
        self.shared.of(sequence)
    }

    /// Bytes of saved sequence states held in host memory now.
    pub fn saved_state_bytes(&self) -> u64 {
        self.shared.saved_bytes.load(Ordering::Relaxed)
    }
}

impl LocalEngine for LlamaEngine {
    fn model_name(&self) -> String {
        self.model_name.clone()
    }

    fn context_window(&self) -> u32 {
        self.context_window
    }

    /// True when the engine was loaded with a projector.
    fn vision(&self) -> bool {
        self.vision
    }

    fn generate(
        &self,
        turn: EngineTurn,
        cancel: CancellationToken,
    ) -> BoxStream<'static, Result<EngineEvent, ProviderError>> {
        // Bounded: past 64 events the worker pauses this turn (only this
        // one) until its reader catches up.
        let (events, mut rx) = mpsc::channel(64);
        if self
            .jobs
            .send(Job::Generate {
                turn,
                cancel,
                events,
            })
            .is_err()
        {
            let err = ProviderError::Other {
                message: "the llama.cpp worker has stopped".into(),
            };
            return futures::stream::once(async move { Err(err) }).boxed();
        }
        futures::stream::poll_fn(move |cx| rx.poll_recv(cx)).boxed()
    }

    /// Frees the chat's slot and saved state, after the jobs queued before
    /// it (a turn of that chat still running ends first).
    fn release(&self, sequence: SequenceId) {
        // A stopped worker holds nothing to free.
        let _ = self.jobs.send(Job::Release(sequence));
    }

    fn slots(&self) -> usize {
        self.slots
    }

    /// The weights, the KV of every slot (estimated from the model's shape
    /// at f16) and the saved states.
    fn resident_bytes(&self) -> Option<u64> {
        let fixed = self.shared.resident.load(Ordering::Relaxed);
        Some(fixed.saturating_add(self.saved_state_bytes()))
    }
}
