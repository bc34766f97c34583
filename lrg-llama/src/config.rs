//! How to load a model: file, projector, context size, batch size, threads,
//! GPU layers.

use std::path::PathBuf;

/// Settings of a [`crate::LlamaEngine`].
#[derive(Debug, Clone, PartialEq)]
pub struct LlamaConfig {
    /// The GGUF file.
    pub model_path: PathBuf,
    /// The vision projector GGUF made for this model (`mmproj-*.gguf`);
    /// with one the engine sees images, without one it is blind.
    pub mmproj_path: Option<PathBuf>,
    /// Context size in tokens for all sequences together; `None` takes the
    /// model's training context, capped at [`LlamaConfig::DEFAULT_MAX_CTX`].
    pub n_ctx: Option<u32>,
    /// Most tokens evaluated per llama.cpp call; longer prompts are fed in chunks.
    pub n_batch: u32,
    /// Parallel sequences the context is split into; one conversation gets
    /// `n_ctx / n_seq_max` tokens.
    pub n_seq_max: u32,
    /// CPU threads; `None` uses all available cores.
    pub n_threads: Option<u32>,
    /// Layers offloaded to a GPU (ignored by CPU-only builds).
    pub n_gpu_layers: u32,
}

impl LlamaConfig {
    /// Default cap on the context size when the model allows more: larger
    /// contexts cost memory up front.
    pub const DEFAULT_MAX_CTX: u32 = 16_384;

    /// Defaults for `model_path`: no projector, the model's context up to
    /// 16k, batches of 512, one sequence, all cores, every layer on the GPU if
    /// there is one.
    pub fn new(model_path: impl Into<PathBuf>) -> Self {
        Self {
            model_path: model_path.into(),
            mmproj_path: None,
            n_ctx: None,
            n_batch: 512,
            n_seq_max: 1,
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
}
