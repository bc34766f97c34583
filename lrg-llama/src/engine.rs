//! [`LlamaEngine`]: the handle callers hold; the work happens on its worker.

use std::sync::mpsc as std_mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use futures::stream::BoxStream;
use lrg_providers::ProviderError;
use lrg_providers::local_chat::{EngineEvent, EngineMessage, EngineTurn, LocalEngine};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::config::LlamaConfig;
use crate::worker::{Job, Loaded, spawn_worker};

/// Counters of the last turn, to check and measure KV-cache reuse.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EngineStats {
    /// Tokens of the rendered prompt (an image counts the tokens the
    /// projector made of it).
    pub prompt_tokens: u32,
    /// Prompt tokens already in the KV cache from earlier turns.
    pub tokens_reused: u32,
    /// Prompt tokens evaluated this turn (`prompt_tokens - tokens_reused`).
    pub tokens_evaluated: u32,
    /// Tokens generated this turn.
    pub tokens_generated: u32,
    /// Tokens in the KV cache after the turn.
    pub tokens_held: u32,
    /// Time spent evaluating the prompt.
    pub prefill: Duration,
    /// Time from the start of the turn to the first generated token.
    pub time_to_first_token: Option<Duration>,
}

/// A llama.cpp model behind the [`LocalEngine`] trait.
///
/// One worker thread owns the model and its context; turns queue up and run
/// one at a time. The conversation lives in KV-cache sequence 0, and each turn
/// evaluates only what follows the longest prefix it shares with the tokens
/// already held. Dropping the engine stops the worker once its queue is done.
pub struct LlamaEngine {
    jobs: std_mpsc::Sender<Job>,
    model_name: String,
    context_window: u32,
    vision: bool,
    stats: Arc<Mutex<EngineStats>>,
}

impl std::fmt::Debug for LlamaEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LlamaEngine")
            .field("model_name", &self.model_name)
            .field("context_window", &self.context_window)
            .field("vision", &self.vision)
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
        let stats = Arc::new(Mutex::new(EngineStats::default()));
        let (
            jobs,
            Loaded {
                context_window,
                vision,
            },
        ) = spawn_worker(config, stats.clone())?;
        Ok(Self {
            jobs,
            model_name,
            context_window,
            vision,
            stats,
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

    /// Forgets the conversation in the KV cache, after any queued turn; the
    /// next turn evaluates its whole prompt. Nothing needs this for
    /// correctness (a new conversation only shares its matching prefix).
    pub fn clear_cache(&self) {
        // A stopped worker holds no cache to clear.
        let _ = self.jobs.send(Job::ClearCache);
    }

    /// Counters of the most recent turn (`tokens_generated` counts up live
    /// while a turn runs).
    pub fn stats(&self) -> EngineStats {
        *self.stats.lock().unwrap_or_else(|e| e.into_inner())
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
        // Bounded: a slow reader holds the worker back instead of piling up text.
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
}
