//! The worker thread: owns the model and context, runs one turn at a time.

use std::num::NonZeroU32;
use std::panic::AssertUnwindSafe;
use std::sync::mpsc as std_mpsc;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::model::{LlamaChatMessage, LlamaChatTemplate, LlamaModel};
use llama_cpp_2::sampling::LlamaSampler;
use llama_cpp_2::token::LlamaToken;
use lrg_providers::local_chat::{EngineEvent, EngineMessage, EngineRole, EngineStop, EngineTurn};
use lrg_providers::{ProviderError, Usage};
use rand::SeedableRng;
use rand::rngs::StdRng;
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::backend::backend;
use crate::config::LlamaConfig;
use crate::constraint::{AnswerConstraint, ConstraintCompiler};
use crate::engine::EngineStats;
use crate::sampling::sample;
use crate::utf8::Utf8Stream;

/// Work for the worker.
pub(crate) enum Job {
    /// One turn to run, its events sent as they happen.
    Generate {
        turn: EngineTurn,
        cancel: CancellationToken,
        events: mpsc::Sender<Result<EngineEvent, ProviderError>>,
    },
    /// Forget the conversation held in the KV cache.
    ClearCache,
    /// Render and tokenize a conversation as a turn would.
    Tokenize {
        messages: Vec<EngineMessage>,
        reply: std_mpsc::Sender<Result<Vec<i32>, ProviderError>>,
    },
}

/// What the worker reports once the model is loaded.
pub(crate) struct Loaded {
    pub context_window: u32,
}

/// Starts the worker thread and waits until it has loaded the model.
pub(crate) fn spawn_worker(
    config: LlamaConfig,
    stats: Arc<Mutex<EngineStats>>,
) -> Result<(std_mpsc::Sender<Job>, Loaded), ProviderError> {
    let (jobs_tx, jobs_rx) = std_mpsc::channel::<Job>();
    let (ready_tx, ready_rx) = std_mpsc::channel::<Result<Loaded, ProviderError>>();
    std::thread::Builder::new()
        .name("lrg-llama".into())
        .spawn(move || run_worker(config, stats, jobs_rx, ready_tx))
        .map_err(|e| ProviderError::Other {
            message: format!("could not start the llama.cpp worker: {e}"),
        })?;
    let loaded = ready_rx.recv().map_err(|_| ProviderError::Other {
        message: "the llama.cpp worker stopped while loading".into(),
    })??;
    Ok((jobs_tx, loaded))
}

fn run_worker(
    config: LlamaConfig,
    stats: Arc<Mutex<EngineStats>>,
    jobs: std_mpsc::Receiver<Job>,
    ready: std_mpsc::Sender<Result<Loaded, ProviderError>>,
) {
    let backend = backend();
    let path = config.model_path.display().to_string();
    let params = LlamaModelParams::default().with_n_gpu_layers(config.n_gpu_layers);
    let model = match LlamaModel::load_from_file(backend, &config.model_path, &params) {
        Ok(m) => m,
        Err(e) => {
            let _ = ready.send(Err(ProviderError::Config {
                message: format!("llama.cpp could not load {path}: {e}"),
            }));
            return;
        }
    };
    let n_ctx = config
        .n_ctx
        .unwrap_or_else(|| model.n_ctx_train().min(LlamaConfig::DEFAULT_MAX_CTX));
    let mut ctx_params = LlamaContextParams::default()
        .with_n_ctx(NonZeroU32::new(n_ctx))
        .with_n_batch(config.n_batch)
        .with_n_ubatch(config.n_batch)
        .with_n_seq_max(config.n_seq_max);
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
    let ctx = match model.new_context(backend, ctx_params) {
        Ok(c) => c,
        Err(e) => {
            let _ = ready.send(Err(ProviderError::Config {
                message: format!(
                    "llama.cpp could not create a {n_ctx}-token context for {path}: {e}"
                ),
            }));
            return;
        }
    };
    let template = match model.chat_template(None) {
        Ok(t) => t,
        Err(e) => {
            tracing::warn!(model = %path, error = %e, "model has no usable chat template; using chatml");
            match LlamaChatTemplate::new("chatml") {
                Ok(t) => t,
                Err(e) => {
                    let _ = ready.send(Err(ProviderError::Other {
                        message: format!("chatml template: {e}"),
                    }));
                    return;
                }
            }
        }
    };
    let compiler = match ConstraintCompiler::new(&LlamaSampler::llguidance_tok_env(&model)) {
        Ok(c) => c,
        Err(e) => {
            let _ = ready.send(Err(e));
            return;
        }
    };
    // With a unified cache each sequence could take it all, but we promise
    // callers only their share.
    let window = ctx.n_ctx() / config.n_seq_max.max(1);
    let n_batch = ctx.n_batch().max(1) as usize;
    if ready
        .send(Ok(Loaded {
            context_window: window,
        }))
        .is_err()
    {
        return;
    }
    let mut worker = Worker {
        model: &model,
        ctx,
        template,
        compiler,
        last_constraint: None,
        held: Vec::new(),
        window,
        batch: LlamaBatch::new(n_batch, 1),
        n_batch,
        stats,
    };
    while let Ok(job) = jobs.recv() {
        let (turn, cancel, events) = match job {
            Job::Generate {
                turn,
                cancel,
                events,
            } => (turn, cancel, events),
            Job::ClearCache => {
                worker.reset_cache();
                continue;
            }
            Job::Tokenize { messages, reply } => {
                let tokens = worker
                    .tokenize(&messages)
                    .map(|t| t.iter().map(|t| t.0).collect());
                let _ = reply.send(tokens);
                continue;
            }
        };
        let outcome =
            std::panic::catch_unwind(AssertUnwindSafe(|| worker.run(turn, cancel, &events)));
        let result = match outcome {
            Ok(r) => r,
            Err(_) => {
                // The cache may not match `held` any more; start clean.
                worker.reset_cache();
                Err(ProviderError::Other {
                    message: "the llama.cpp worker panicked during this turn".into(),
                })
            }
        };
        if let Err(e) = result {
            let _ = events.blocking_send(Err(e));
        }
    }
}

/// The worker's state between turns.
struct Worker<'m> {
    model: &'m LlamaModel,
    ctx: LlamaContext<'m>,
    template: LlamaChatTemplate,
    compiler: ConstraintCompiler,
    /// The last schema compiled, with its constraint before any token.
    last_constraint: Option<(Value, AnswerConstraint)>,
    /// The tokens in sequence 0 of the KV cache, in position order.
    held: Vec<LlamaToken>,
    window: u32,
    batch: LlamaBatch<'static>,
    n_batch: usize,
    stats: Arc<Mutex<EngineStats>>,
}

/// Sequence 0 holds the conversation.
const SEQ: i32 = 0;

impl<'m> Worker<'m> {
    fn reset_cache(&mut self) {
        self.ctx.clear_kv_cache();
        self.held.clear();
    }

    /// A fresh constraint for `schema`. Turns of one conversation usually
    /// send the same schema (the same tools), so the last one compiled is kept
    /// and cloned.
    fn constraint_for(&mut self, schema: &Value) -> Result<AnswerConstraint, ProviderError> {
        if let Some((last, compiled)) = &self.last_constraint
            && last == schema
        {
            return Ok(compiled.clone());
        }
        let compiled = self.compiler.compile(schema)?;
        self.last_constraint = Some((schema.clone(), compiled.clone()));
        Ok(compiled)
    }

    /// The conversation as the model reads it: chat template applied, the
    /// assistant's generation prompt appended, tokenized with special tokens.
    fn tokenize(&self, messages: &[EngineMessage]) -> Result<Vec<LlamaToken>, ProviderError> {
        let rendered = self.render(messages)?;
        Ok(self.model.vocab().tokenize(rendered.as_bytes(), true, true))
    }

    fn render(&self, messages: &[EngineMessage]) -> Result<String, ProviderError> {
        let mut chat = Vec::with_capacity(messages.len());
        for m in messages {
            if !m.images.is_empty() {
                return Err(ProviderError::Unsupported {
                    message: "this llama.cpp engine does not take images".into(),
                });
            }
            let role = match m.role {
                EngineRole::System => "system",
                EngineRole::User => "user",
                EngineRole::Assistant => "assistant",
            };
            let msg = LlamaChatMessage::new(role.into(), m.content.clone()).map_err(|e| {
                ProviderError::BadRequest {
                    message: format!("a {role} message cannot be passed to llama.cpp: {e}"),
                }
            })?;
            chat.push(msg);
        }
        self.model
            .apply_chat_template(&self.template, &chat, true)
            .map_err(|e| ProviderError::BadRequest {
                message: format!(
                    "the model's chat template could not render the conversation: {e}"
                ),
            })
    }

    fn set_stats(&self, f: impl FnOnce(&mut EngineStats)) {
        f(&mut self.stats.lock().unwrap_or_else(|e| e.into_inner()));
    }

    /// Runs one turn; events go out as they happen. An `Err` is sent by the
    /// caller as the stream's last item.
    fn run(
        &mut self,
        turn: EngineTurn,
        cancel: CancellationToken,
        events: &mpsc::Sender<Result<EngineEvent, ProviderError>>,
    ) -> Result<(), ProviderError> {
        let started = Instant::now();
        let prompt = self.tokenize(&turn.messages)?;
        if prompt.len() >= self.window as usize {
            return Err(ProviderError::ContextOverflow {
                message: format!(
                    "the prompt is {} tokens and the context window is {} tokens (room is needed for the answer)",
                    prompt.len(),
                    self.window
                ),
            });
        }
        // Compile before touching the cache so a bad schema costs nothing.
        let mut constraint = self.constraint_for(&turn.schema)?;
        let prompt_tokens = prompt.len() as u32;
        self.set_stats(|s| {
            *s = EngineStats {
                prompt_tokens,
                ..EngineStats::default()
            }
        });

        let reused = self.keep_common_prefix(&prompt);
        let mut logits_at = self.prefill(&prompt[reused..], &cancel)?;
        let prefill = started.elapsed();
        self.set_stats(|s| {
            s.tokens_reused = reused as u32;
            s.tokens_evaluated = (prompt.len() - reused) as u32;
            s.prefill = prefill;
            s.tokens_held = self.held.len() as u32;
        });

        // The prompt tokens kept in the KV cache from the last turn were
        // read, not computed: they are this engine's cached prompt tokens.
        let mut usage = Usage::new(prompt_tokens, 0)
            .with_cached_prompt_tokens(u32::try_from(reused).unwrap_or(u32::MAX));
        let done = |usage: Usage, stop: EngineStop| -> Result<EngineEvent, ProviderError> {
            Ok(EngineEvent::Done { usage, stop })
        };
        if logits_at.is_none() {
            // Cancelled during prefill.
            let _ = events.blocking_send(done(usage, EngineStop::Cancelled));
            return Ok(());
        }

        let seed = turn.seed.map_or_else(rand::random::<u64>, u64::from);
        let mut rng = StdRng::seed_from_u64(seed);
        let mut text = Utf8Stream::default();
        let model: &'m LlamaModel = self.model;
        let vocab = model.vocab();
        let stop = loop {
            if cancel.is_cancelled() || events.is_closed() {
                break EngineStop::Cancelled;
            }
            if usage.completion_tokens >= turn.max_tokens || self.held.len() >= self.window as usize
            {
                break EngineStop::MaxTokens;
            }
            let Some(idx) = logits_at else {
                break EngineStop::Done;
            };
            let allowed = constraint.allowed_tokens()?;
            let logits = self.ctx.get_logits_ith(idx);
            let Some(id) = sample(logits, &allowed, turn.temperature, turn.top_p, &mut rng) else {
                return Err(ProviderError::Other {
                    message: "the answer constraint allows no token of this model's vocabulary"
                        .into(),
                });
            };
            let token = LlamaToken(id as i32);
            if usage.completion_tokens == 0 {
                let ttft = started.elapsed();
                self.set_stats(|s| s.time_to_first_token = Some(ttft));
            }
            if vocab.is_eog(token) {
                break EngineStop::Done;
            }
            constraint.commit(id)?;
            usage.completion_tokens += 1;
            // Live, so a caller can see how far a turn got when it cancelled it.
            self.set_stats(|s| s.tokens_generated = usage.completion_tokens);
            let piece = vocab.token_to_piece(token, false, None);
            let delta = text.push(&piece);
            if !delta.is_empty()
                && events
                    .blocking_send(Ok(EngineEvent::Delta { text: delta }))
                    .is_err()
            {
                break EngineStop::Cancelled;
            }
            if constraint.is_finished() {
                // The closing token is not evaluated: nothing would read its
                // logits, and the next turn's prefix match re-evaluates it.
                break EngineStop::Done;
            }
            logits_at = Some(self.decode_one(token)?);
        };
        let rest = text.finish();
        if !rest.is_empty() {
            let _ = events.blocking_send(Ok(EngineEvent::Delta { text: rest }));
        }
        self.set_stats(|s| {
            s.tokens_generated = usage.completion_tokens;
            s.tokens_held = self.held.len() as u32;
        });
        let _ = events.blocking_send(done(usage, stop));
        Ok(())
    }

    /// Drops from the cache everything after the longest prefix `prompt`
    /// shares with the held tokens; returns that prefix's length. At least one
    /// prompt token is always left to evaluate, since its logits start the answer.
    fn keep_common_prefix(&mut self, prompt: &[LlamaToken]) -> usize {
        let mut keep = self
            .held
            .iter()
            .zip(prompt)
            .take_while(|(a, b)| a == b)
            .count();
        if keep == prompt.len() {
            keep = keep.saturating_sub(1);
        }
        if keep < self.held.len() {
            let removed = u32::try_from(keep)
                .ok()
                .and_then(|p| {
                    self.ctx
                        .clear_kv_cache_seq(Some(SEQ as u32), Some(p), None)
                        .ok()
                })
                .unwrap_or(false);
            if removed {
                self.held.truncate(keep);
            } else {
                // Some caches (recurrent models) cannot cut a sequence; start over.
                tracing::debug!(
                    keep,
                    held = self.held.len(),
                    "partial KV removal refused; clearing the cache"
                );
                self.reset_cache();
                keep = 0;
            }
        }
        keep
    }

    /// Evaluates `tokens` after the held ones in chunks of `n_batch`. Returns
    /// the batch index of the last token's logits, or `None` if cancelled.
    fn prefill(
        &mut self,
        tokens: &[LlamaToken],
        cancel: &CancellationToken,
    ) -> Result<Option<i32>, ProviderError> {
        let mut last = None;
        let n_chunks = tokens.len().div_ceil(self.n_batch);
        for (i, chunk) in tokens.chunks(self.n_batch).enumerate() {
            if cancel.is_cancelled() {
                return Ok(None);
            }
            let is_last_chunk = i + 1 == n_chunks;
            self.batch.clear();
            let start = self.held.len();
            for (j, &t) in chunk.iter().enumerate() {
                let want_logits = is_last_chunk && j + 1 == chunk.len();
                self.batch
                    .add(t, (start + j) as i32, &[SEQ], want_logits)
                    .map_err(batch_error)?;
            }
            self.decode_batch(start)?;
            self.held.extend_from_slice(chunk);
            last = Some(chunk.len() as i32 - 1);
        }
        Ok(last)
    }

    /// Evaluates one generated token; returns the index of its logits.
    fn decode_one(&mut self, token: LlamaToken) -> Result<i32, ProviderError> {
        self.batch.clear();
        let pos = self.held.len();
        self.batch
            .add(token, pos as i32, &[SEQ], true)
            .map_err(batch_error)?;
        self.decode_batch(pos)?;
        self.held.push(token);
        Ok(0)
    }

    /// Runs the batch; on failure removes whatever it may have written from
    /// `start` on, so the cache matches `held` again.
    fn decode_batch(&mut self, start: usize) -> Result<(), ProviderError> {
        if let Err(e) = self.ctx.decode(&mut self.batch) {
            let cut = u32::try_from(start).ok();
            let removed = self
                .ctx
                .clear_kv_cache_seq(Some(SEQ as u32), cut, None)
                .unwrap_or(false);
            if !removed {
                self.reset_cache();
            }
            return Err(match e {
                llama_cpp_2::DecodeError::NoKvCacheSlot => ProviderError::ContextOverflow {
                    message: format!("llama.cpp found no room in the KV cache at position {start}"),
                },
                other => ProviderError::Other {
                    message: format!("llama.cpp failed to evaluate tokens: {other}"),
                },
            });
        }
        Ok(())
    }
}

fn batch_error(e: llama_cpp_2::llama_batch::BatchAddError) -> ProviderError {
    ProviderError::Other {
        message: format!("llama.cpp batch: {e}"),
    }
}
