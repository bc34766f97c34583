//! How to load a model: file, projector, context size, batch size, slots,
//! saved-state budget, threads, GPU layers.

use std::path::PathBuf;

use lrg_providers::local_chat::{DEFAULT_KV_CACHE_MEM, EngineSettings};

/// Settings of a [`crate::LlamaEngine`].
#[derive(Debug, Clone, PartialEq)]
pub struct LlamaConfig {
    /// The GGUF file.
    pub model_path: PathBuf,
    /// The vision projector GGUF made for this model (`mmproj-*.gguf`);
    /// with one the engine sees images, without one it is blind.
    pub mmproj_path: Option<PathBuf>,
    /// Context size in tokens for all sequences together (each gets
    /// `n_ctx / n_seq_max`); `None` gives each sequence the model's training
    /// context capped at [`LlamaConfig::DEFAULT_MAX_CTX`], all of them
    /// together at most [`LlamaConfig::DEFAULT_MAX_TOTAL_CTX`].
    pub n_ctx: Option<u32>,
    /// Most tokens evaluated per llama.cpp call; longer prompts are fed in chunks.
    pub n_batch: u32,
    /// Sequence slots: chats whose turns decode together, each with its own
    /// KV allocated at load; one conversation gets `n_ctx / n_seq_max`
    /// tokens. More chats than slots take turns, their KV saved to host
    /// memory in between (see `kv_cache_mem`).
    pub n_seq_max: u32,
    /// Bytes of host memory for the saved KV states of chats that lost their
    /// slot; past it the least recently used are dropped and those chats
    /// prefill again.
    pub kv_cache_mem: u64,
    /// CPU threads; `None` uses all available cores.
    pub n_threads: Option<u32>,
    /// Layers offloaded to a GPU (ignored by CPU-only builds).
    pub n_gpu_layers: u32,
}

impl LlamaConfig {
    /// Default cap on the context size when the model allows more: larger
    /// contexts cost memory up front.
    pub const DEFAULT_MAX_CTX: u32 = 16_384;

    /// Default cap on the context of all slots together when `n_ctx` is not
    /// given (4 slots of 8k, 2 of 16k).
    pub const DEFAULT_MAX_TOTAL_CTX: u32 = 32_768;

    /// Defaults for `model_path`: no projector, the model's context up to
    /// 16k, batches of 512, one sequence (see [`LlamaConfig::with_settings`]
    /// for an engine shared by chats), 2 GiB for saved states, all cores,
    /// every layer on the GPU if there is one.
    pub fn new(model_path: impl Into<PathBuf>) -> Self {
        Self {
            model_path: model_path.into(),
            mmproj_path: None,
            n_ctx: None,
            n_batch: 512,
            n_seq_max: 1,
            kv_cache_mem: DEFAULT_KV_CACHE_MEM,
            n_threads: None,
            n_gpu_layers: u32::MAX,
        }
    }

    /// Sets the vision projector (`mmproj`) file.
    pub fn with_mmproj(mut self, mmproj_path: impl Into<PathBuf>) -> Self {
        self.mmproj_path = Some(mmproj_path.into());
        self
    }

    /// Sets the context size.
    pub fn with_n_ctx(mut self, n_ctx: u32) -> Self {
        self.n_ctx = Some(n_ctx);
        self
    }

    /// Sets the batch size.
    pub fn with_n_batch(mut self, n_batch: u32) -> Self {
        self.n_batch = n_batch;
        self
    }

    /// Sets the number of CPU threads.
    pub fn with_n_threads(mut self, n_threads: u32) -> Self {
        self.n_threads = Some(n_threads);
        self
    }

    /// Sets the number of parallel sequences.
    pub fn with_n_seq_max(mut self, n_seq_max: u32) -> Self {
        self.n_seq_max = n_seq_max;
        self
    }

    /// Sets the saved-state budget in bytes.
    pub fn with_kv_cache_mem(mut self, bytes: u64) -> Self {
        self.kv_cache_mem = bytes;
        self
    }

    /// Takes the slots (`parallel`) and saved-state budget of an engine
    /// pool's settings.
    pub fn with_settings(mut self, settings: &EngineSettings) -> Self {
        self.n_seq_max = u32::try_from(settings.parallel.max(1)).unwrap_or(u32::MAX);
        self.kv_cache_mem = settings.kv_cache_mem;
        self
    }
}
