//! Loading: the model file (reporting progress), its context with one KV
//! sequence per slot, the chat template, the constraint compiler, the
//! projector.

use std::num::NonZeroU32;

use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::model::{LlamaChatTemplate, LlamaModel};
use llama_cpp_2::sampling::LlamaSampler;
use lrg_providers::ProviderError;
use lrg_providers::local_chat::LoadProgress;

use crate::backend::backend;
use crate::config::LlamaConfig;
use crate::constraint::ConstraintCompiler;
use crate::vision::Vision;

/// Reads the GGUF file, reporting llama.cpp's progress (0 to 1) to `progress`.
pub(super) fn load_model(
    config: &LlamaConfig,
    progress: LoadProgress,
) -> Result<LlamaModel, ProviderError> {
    let params = LlamaModelParams::default()
        .with_n_gpu_layers(config.n_gpu_layers)
        .with_progress_callback(move |fraction| {
            progress.report(fraction);
            // Never abort: a caller that stops watching still gets its engine.
            true
        });
    LlamaModel::load_from_file(backend(), &config.model_path, &params).map_err(|e| {
        ProviderError::Config {
            message: format!(
                "llama.cpp could not load {}: {e}",
                config.model_path.display()
            ),
        }
    })
}

/// Everything but the model a worker needs.
pub(super) struct Opened<'m> {
    pub ctx: LlamaContext<'m>,
    pub template: LlamaChatTemplate,
    pub compiler: ConstraintCompiler,
    pub vision: Option<Vision>,
    /// Tokens one sequence may hold.
    pub window: u32,
    pub n_batch: usize,
    /// Estimated bytes of the weights and the KV cache of every slot.
    pub resident: u64,
}

/// Creates the context (KV for every slot allocated now), the template, the
/// constraint compiler and the projector for `model`.
pub(super) fn open<'m>(
    model: &'m LlamaModel,
    config: &LlamaConfig,
) -> Result<Opened<'m>, ProviderError> {
    let path = config.model_path.display().to_string();
    let n_seq = config.n_seq_max.max(1);
    let n_ctx = config.n_ctx.unwrap_or_else(|| {
        // Each sequence gets the training context up to the cap, all of them
        // together at most DEFAULT_MAX_TOTAL_CTX: KV costs memory up front.
        let per_seq = model.n_ctx_train().min(LlamaConfig::DEFAULT_MAX_CTX);
        per_seq
            .saturating_mul(n_seq)
            .min(LlamaConfig::DEFAULT_MAX_TOTAL_CTX.max(per_seq))
    });
    // One unified KV buffer (all n_ctx cells allocated now) rather than a
    // stream per sequence: llama.cpp then evaluates a batch mixing
    // sequences as one ubatch, where per-sequence streams split it into
    // equal-length runs of consecutive sequence ids. The worker keeps each
    // sequence within n_ctx / n_seq_max cells, so the cells always suffice
    // and no chat can starve another.
    let mut ctx_params = LlamaContextParams::default()
        .with_n_ctx(NonZeroU32::new(n_ctx))
        .with_n_batch(config.n_batch)
        .with_n_ubatch(config.n_batch)
        .with_n_seq_max(n_seq)
        .with_kv_unified(n_seq > 1);
    let threads = config
        .n_threads
        .or_else(|| {
            std::thread::available_parallelism()
                .ok()
                .map(|n| n.get() as u32)
        })
        .and_then(|n| i32::try_from(n).ok());
    if let Some(t) = threads {
        ctx_params = ctx_params.with_n_threads(t).with_n_threads_batch(t);
    }
    let vision = match &config.mmproj_path {
        None => None,
        Some(mmproj) => Some(Vision::load(
            mmproj,
            model,
            &config.model_path,
            config.n_gpu_layers > 0,
            threads,
        )?),
    };
    let ctx = model
        .new_context(backend(), ctx_params)
        .map_err(|e| ProviderError::Config {
            message: format!("llama.cpp could not create a {n_ctx}-token context for {path}: {e}"),
        })?;
    let template = match model.chat_template(None) {
        Ok(t) => t,
        Err(e) => {
            tracing::warn!(model = %path, error = %e, "model has no usable chat template; using chatml");
            LlamaChatTemplate::new("chatml").map_err(|e| ProviderError::Other {
                message: format!("chatml template: {e}"),
            })?
        }
    };
    let compiler = ConstraintCompiler::new(&LlamaSampler::llguidance_tok_env(model))?;
    // Each sequence could take the whole unified cache, but we promise
    // callers only their share.
    let window = ctx.n_ctx() / n_seq;
    let n_batch = ctx.n_batch().max(1) as usize;
    let resident = model.size().saturating_add(kv_bytes(model, ctx.n_ctx()));
    Ok(Opened {
        ctx,
        template,
        compiler,
        vision,
        window,
        n_batch,
        resident,
    })
}

/// The KV cache's size for `n_ctx` cells at llama.cpp's default f16 keys
/// and values: per layer and cell, one key and one value row per KV head.
fn kv_bytes(model: &LlamaModel, n_ctx: u32) -> u64 {
    let n_head = u64::from(model.n_head().max(1));
    let head_dim = u64::try_from(model.n_embd()).unwrap_or(0) / n_head;
    let row = head_dim * u64::from(model.n_head_kv());
    u64::from(n_ctx) * u64::from(model.n_layer()) * 2 * row * 2
}
