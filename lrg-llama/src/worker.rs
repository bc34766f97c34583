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
use lrg_providers::{Image, ProviderError, Usage};
use rand::SeedableRng;
use rand::rngs::StdRng;
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::backend::backend;
use crate::chunks::{Chunk, Chunks, Plan};
use crate::config::LlamaConfig;
use crate::constraint::{AnswerConstraint, ConstraintCompiler};
use crate::engine::EngineStats;
use crate::sampling::sample;
use crate::utf8::Utf8Stream;
use crate::vision::{Vision, drop_slots, marker, place_markers};

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
    /// Whether a projector was loaded: the model sees images.
    pub vision: bool,
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
    let vision = match &config.mmproj_path {
        None => None,
        Some(mmproj) => match Vision::load(
            mmproj,
            &model,
            &config.model_path,
            config.n_gpu_layers > 0,
            threads,
        ) {
            Ok(v) => Some(v),
            Err(e) => {
                let _ = ready.send(Err(e));
                return;
            }
        },
    };
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
            vision: vision.is_some(),
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
        vision,
        held: Chunks::new(),
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
                let tokens = worker.prompt(&messages).and_then(|p| {
                    p.text_only().ok_or_else(|| ProviderError::BadRequest {
                        message: "tokenize_prompt takes conversations without images".into(),
                    })
                });
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
    /// The projector, when the model sees images.
    vision: Option<Vision>,
    /// What sequence 0 of the KV cache holds, in position order.
    held: Chunks,
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
    /// assistant's generation prompt appended, tokenized with special tokens,
    /// each image (with a projector) a chunk at its marker's place.
    fn prompt(&mut self, messages: &[EngineMessage]) -> Result<Chunks, ProviderError> {
        let (rendered, images) = self.render(messages)?;
        let model: &'m LlamaModel = self.model;
        let vocab = model.vocab();
        let ids = |text: &str, first: bool| -> Vec<i32> {
            vocab
                .tokenize(text.as_bytes(), first, true)
                .iter()
                .map(|t| t.0)
                .collect()
        };
        let mut chunks = Chunks::new();
        let Some(vision) = self.vision.as_mut().filter(|_| !images.is_empty()) else {
            chunks.push_tokens(&ids(&rendered, true));
            return Ok(chunks);
        };
        // Text between markers is tokenized piece by piece, as mtmd does.
        let pieces: Vec<&str> = rendered.split(marker()).collect();
        if pieces.len() != images.len() + 1 {
            return Err(ProviderError::Other {
                message: format!(
                    "the chat template kept {} of {} image markers",
                    pieces.len() - 1,
                    images.len()
                ),
            });
        }
        let prepared = vision.prepare(&images)?;
        for (i, piece) in pieces.iter().enumerate() {
            if i > 0 {
                let image = &prepared[i - 1];
                chunks.push_image(image.hash, image.tokens, image.positions);
            }
            chunks.push_tokens(&ids(piece, i == 0));
        }
        Ok(chunks)
    }

    /// The chat template applied to `messages`, and the images in the order
    /// of their markers.
    fn render<'a>(
        &self,
        messages: &'a [EngineMessage],
    ) -> Result<(String, Vec<&'a Image>), ProviderError> {
        let mut chat = Vec::with_capacity(messages.len());
        let mut images = Vec::new();
        for m in messages {
            let role = match m.role {
                EngineRole::System => "system",
                EngineRole::User => "user",
                EngineRole::Assistant => "assistant",
            };
            let content = match (&self.vision, m.images.is_empty()) {
                // Every message, so that a marker written in text is defused.
                (Some(_), _) => {
                    images.extend(&m.images);
                    place_markers(&m.content, m.images.len())
                }
                (None, true) => drop_slots(&m.content).into_owned(),
                (None, false) => {
                    return Err(ProviderError::Unsupported {
                        message: "this model was loaded without a projector (--mmproj), so it \
                                  cannot take images"
                            .into(),
                    });
                }
            };
            let msg = LlamaChatMessage::new(role.into(), content).map_err(|e| {
                ProviderError::BadRequest {
                    message: format!("a {role} message cannot be passed to llama.cpp: {e}"),
                }
            })?;
            chat.push(msg);
        }
        let rendered = self
            .model
            .apply_chat_template(&self.template, &chat, true)
            .map_err(|e| ProviderError::BadRequest {
                message: format!(
                    "the model's chat template could not render the conversation: {e}"
                ),
            })?;
        Ok((rendered, images))
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
        let prompt = self.prompt(&turn.messages)?;
        let prompt_tokens = prompt.tokens();
        if prompt_tokens >= self.window {
            return Err(ProviderError::ContextOverflow {
                message: format!(
                    "the prompt is {prompt_tokens} tokens and the context window is {} tokens (room is needed for the answer)",
                    self.window
                ),
            });
        }
        // Compile before touching the cache so a bad schema costs nothing.
        let mut constraint = self.constraint_for(&turn.schema)?;
        self.set_stats(|s| {
            *s = EngineStats {
                prompt_tokens,
                ..EngineStats::default()
            }
        });

        let plan = self.keep_common_prefix(&prompt);
        let mut logits_at = self.evaluate(&prompt, &plan, &cancel)?;
        let prefill = started.elapsed();
        self.set_stats(|s| {
            s.tokens_reused = plan.tokens;
            s.tokens_evaluated = prompt_tokens - plan.tokens;
            s.prefill = prefill;
            s.tokens_held = self.held.tokens();
        });

        // The prompt tokens kept in the KV cache from the last turn were
        // read, not computed: they are this engine's cached prompt tokens.
        let mut usage = Usage::new(prompt_tokens, 0).with_cached_prompt_tokens(plan.tokens);
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
            if usage.completion_tokens >= turn.max_tokens || self.held.tokens() >= self.window {
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
            s.tokens_held = self.held.tokens();
        });
        let _ = events.blocking_send(done(usage, stop));
        Ok(())
    }

    /// Drops from the cache everything after the longest prefix `prompt`
    /// shares with what it holds (text token by token, images by their
    /// bytes' hash; see [`crate::chunks`]); returns where evaluation starts.
    /// At least one prompt token is always left to evaluate, since its logits
    /// start the answer.
    fn keep_common_prefix(&mut self, prompt: &Chunks) -> Plan {
        let plan = self.held.plan(prompt);
        if plan.tokens < self.held.tokens() {
            let removed = self
                .ctx
                .clear_kv_cache_seq(Some(SEQ as u32), Some(plan.positions), None)
                .unwrap_or(false);
            if !removed {
                // Some caches (recurrent models) cannot cut a sequence; start over.
                tracing::debug!(
                    keep = plan.tokens,
                    held = self.held.tokens(),
                    "partial KV removal refused; clearing the cache"
                );
                self.reset_cache();
                return self.held.plan(prompt);
            }
        }
        self.held.keep(prompt, &plan);
        plan
    }

    /// Evaluates what `plan` leaves of `prompt` after the held chunks: text
    /// in batches of `n_batch`, images through the projector. Returns the
    /// batch index of the last logits, or `None` if cancelled.
    fn evaluate(
        &mut self,
        prompt: &Chunks,
        plan: &Plan,
        cancel: &CancellationToken,
    ) -> Result<Option<i32>, ProviderError> {
        let chunks = prompt.as_slice();
        let mut last = None;
        for (i, chunk) in chunks.iter().enumerate().skip(plan.whole) {
            if cancel.is_cancelled() {
                return Ok(None);
            }
            let is_last = i + 1 == chunks.len();
            match chunk {
                Chunk::Text(tokens) => {
                    let from = if i == plan.whole { plan.partial } else { 0 };
                    let Some(at) = self.prefill(&tokens[from..], is_last, cancel)? else {
                        return Ok(None);
                    };
                    last = at;
                }
                Chunk::Image { hash, .. } => {
                    let start = self.held.positions();
                    let vision = self.vision.as_mut().ok_or_else(|| ProviderError::Other {
                        message: "an image reached a model without a projector".into(),
                    })?;
                    if let Err(e) =
                        vision.eval(*hash, &mut self.ctx, start, SEQ, self.n_batch, is_last)
                    {
                        self.forget_from(start);
                        return Err(e);
                    }
                    self.held.push(chunk);
                    // llama.cpp reads -1 as the last logits computed.
                    last = Some(-1);
                }
            }
        }
        Ok(last)
    }

    /// Evaluates `tokens` after the held ones in chunks of `n_batch`, with
    /// logits for the last one when `logits_last`. Returns `Some` of the batch
    /// index of the last token (`Some(None)` when there were no tokens), or
    /// `None` if cancelled.
    fn prefill(
        &mut self,
        tokens: &[i32],
        logits_last: bool,
        cancel: &CancellationToken,
    ) -> Result<Option<Option<i32>>, ProviderError> {
        let mut last = None;
        let n_chunks = tokens.len().div_ceil(self.n_batch);
        for (i, chunk) in tokens.chunks(self.n_batch).enumerate() {
            if cancel.is_cancelled() {
                return Ok(None);
            }
            let is_last_chunk = i + 1 == n_chunks;
            self.batch.clear();
            let start = self.held.positions() as usize;
            for (j, &t) in chunk.iter().enumerate() {
                let want_logits = logits_last && is_last_chunk && j + 1 == chunk.len();
                self.batch
                    .add(LlamaToken(t), (start + j) as i32, &[SEQ], want_logits)
                    .map_err(batch_error)?;
            }
            self.decode_batch(start)?;
            self.held.push_tokens(chunk);
            last = Some(chunk.len() as i32 - 1);
        }
        Ok(Some(last))
    }

    /// Evaluates one generated token; returns the index of its logits.
    fn decode_one(&mut self, token: LlamaToken) -> Result<i32, ProviderError> {
        self.batch.clear();
        let pos = self.held.positions() as usize;
        self.batch
            .add(token, pos as i32, &[SEQ], true)
            .map_err(batch_error)?;
        self.decode_batch(pos)?;
        self.held.push_tokens(&[token.0]);
        Ok(0)
    }

    /// Runs the batch; on failure removes whatever it may have written from
    /// `start` on, so the cache matches `held` again.
    fn decode_batch(&mut self, start: usize) -> Result<(), ProviderError> {
        if let Err(e) = self.ctx.decode(&mut self.batch) {
            self.forget_from(u32::try_from(start).unwrap_or(u32::MAX));
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

impl Worker<'_> {
    /// After a failed evaluation from position `start`: removes whatever it
    /// may have written, so the cache matches `held` again.
    fn forget_from(&mut self, start: u32) {
        let removed = self
            .ctx
            .clear_kv_cache_seq(Some(SEQ as u32), Some(start), None)
            .unwrap_or(false);
        if !removed {
            self.reset_cache();
        }
    }
}

fn batch_error(e: llama_cpp_2::llama_batch::BatchAddError) -> ProviderError {
    ProviderError::Other {
        message: format!("llama.cpp batch: {e}"),
    }
}
