//! [`MlxEngine`]: the handle callers hold; the sidecar does the work.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures::StreamExt as _;
use futures::stream::BoxStream;
use lrg_providers::local_chat::{
    EngineEvent, EngineMessage, EngineStop, EngineTurn, KvReuse, LoadProgress, LocalEngine,
    SequenceId,
};
use lrg_providers::{ProviderError, Usage};
use tokio::sync::{Mutex, mpsc};
use tokio_util::sync::CancellationToken;

use crate::config::MlxConfig;
use crate::protocol::{Reply, Request, SidecarInfo, SidecarUsage, Timings, wire_messages};
use crate::sidecar::Sidecar;

/// Counters of the last turn, to check and measure prompt-cache reuse.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
#[non_exhaustive]
pub struct MlxStats {
    /// Tokens of the rendered prompt.
    pub prompt_tokens: u32,
    /// Prompt tokens already in the prompt cache from earlier turns.
    pub tokens_reused: u32,
    /// Prompt tokens evaluated this turn (`prompt_tokens - tokens_reused`,
    /// fewer when cancelled during prefill).
    pub tokens_evaluated: u32,
    /// Tokens generated this turn.
    pub tokens_generated: u32,
    /// Tokens generated after the sidecar received a cancel (at most one: the
    /// token being computed when it came).
    pub tokens_after_cancel: u32,
    /// Whether the compiled grammar of the previous turn was reused (same schema).
    pub grammar_reused: bool,
    /// Time the sidecar spent evaluating the prompt.
    pub prefill: Duration,
    /// Time from the sidecar reading the request to the first sampled token.
    pub time_to_first_token: Option<Duration>,
    /// Time the sidecar spent on the whole turn (what the caller saw beyond
    /// it is the cost of the pipe and the JSON lines).
    pub sidecar_time: Duration,
    /// Times the sidecar was started (1 after [`MlxEngine::start`]).
    pub starts: u32,
}

/// An MLX model behind the [`LocalEngine`] trait, run by a Python sidecar.
///
/// The sidecar (`lrg_mlx_sidecar`, mlx-lm constrained by llguidance) keeps a
/// prompt cache per chat ([`EngineTurn::sequence`]) and the compiled grammar
/// between turns; turns run one at a time. One engine (one sidecar) serves
/// every chat on its model through the engine pool
/// ([`lrg_providers::local_chat::pool`]); [`LocalEngine::release`] frees a
/// chat's cache. If it dies or misbehaves, the turn in flight fails with a clear error
/// and the next turn starts a new one. Dropping the engine stops it.
///
/// The sidecar runs text models: each image of a turn reaches the model as a
/// short text placeholder, never as an error.
///
/// A turn whose schema is `null` is generated unconstrained (control tokens
/// are still kept out): benches use it to price the constraint.
pub struct MlxEngine {
    inner: Arc<Inner>,
}

struct Inner {
    config: MlxConfig,
    info: SidecarInfo,
    /// The running sidecar; `None` after a failure, until the next turn.
    slot: Mutex<Option<Sidecar>>,
    stats: std::sync::Mutex<MlxStats>,
    next_id: AtomicU64,
}

impl std::fmt::Debug for MlxEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MlxEngine")
            .field("model_dir", &self.inner.config.model_dir)
            .field("python", &self.inner.config.python)
            .field("context_window", &self.inner.info.model.context_window)
            .finish()
    }
}

impl MlxEngine {
    /// Starts the sidecar and waits until it has loaded the model.
    ///
    /// # Errors
    /// `ModelNotFound` when the directory is not a model; `Config` when Python
    /// or mlx/mlx-lm/llguidance is missing (the message holds the pip
    /// command), when the model does not load, or when the sidecar speaks
    /// another protocol version; `Other` when it is not ready within
    /// [`MlxConfig::startup_timeout`].
    pub async fn start(config: MlxConfig) -> Result<Self, ProviderError> {
        Self::start_with_progress(config, LoadProgress::ignore()).await
    }

    /// As [`MlxEngine::start`], reporting the sidecar's load steps (0 to 1)
    /// to `progress`.
    ///
    /// # Errors
    /// As for [`MlxEngine::start`].
    pub async fn start_with_progress(
        config: MlxConfig,
        progress: LoadProgress,
    ) -> Result<Self, ProviderError> {
        let (sidecar, info) = Sidecar::start(&config, &progress).await?;
        tracing::debug!(?info, "MLX sidecar ready");
        Ok(Self {
            inner: Arc::new(Inner {
                config,
                info,
                slot: Mutex::new(Some(sidecar)),
                stats: std::sync::Mutex::new(MlxStats {
                    starts: 1,
                    ..MlxStats::default()
                }),
                next_id: AtomicU64::new(1),
            }),
        })
    }

    /// What the sidecar reported when it started: versions and the model.
    pub fn info(&self) -> &SidecarInfo {
        &self.inner.info
    }

    /// Counters of the most recent finished turn.
    pub fn stats(&self) -> MlxStats {
        *self.inner.stats.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The token ids of `messages` as a turn would feed them to the model
    /// (the model's chat template, generation prompt appended). Waits for a
    /// running turn to finish first.
    ///
    /// # Errors
    /// As for a turn: the sidecar failing or not answering in time.
    pub async fn tokenize_prompt(
        &self,
        messages: &[EngineMessage],
    ) -> Result<Vec<u32>, ProviderError> {
        let inner = &self.inner;
        let mut slot = inner.slot.lock().await;
        let id = inner.next_id.fetch_add(1, Ordering::Relaxed);
        let sidecar = inner.running(&mut slot).await?;
        let request = Request::Tokenize {
            id,
            messages: wire_messages(messages),
        };
        let result = async {
            sidecar.send(&request).await?;
            loop {
                match sidecar.next(inner.config.read_timeout).await? {
                    Reply::Tokens { id: rid, tokens } if rid == id => return Ok(tokens),
                    Reply::Error {
                        id: Some(rid),
                        kind,
                        message,
                    } if rid == id => return Err(kind.into_error(message)),
                    other => skip_stale(id, &other)?,
                }
            }
        }
        .await;
        inner.settle(&mut slot, &result).await;
        result
    }

    /// One request to the sidecar and its answer, timed: the fixed cost of
    /// a line each way (benches compare it to the time per token).
    ///
    /// # Errors
    /// As for a turn: the sidecar failing or not answering in time.
    pub async fn ping(&self) -> Result<Duration, ProviderError> {
        self.acknowledged(|id| Request::Ping { id }).await
    }

    /// Forgets the conversation in the prompt cache, after any running turn;
    /// the next turn evaluates its whole prompt. Nothing needs this for
    /// correctness (a new conversation only reuses its matching prefix).
    ///
    /// # Errors
    /// As for a turn: the sidecar failing or not answering in time.
    pub async fn clear_cache(&self) -> Result<(), ProviderError> {
        self.acknowledged(|id| Request::ClearCache { id })
            .await
            .map(|_| ())
    }

    /// Sends the request made by `request` and waits for its `pong`.
    async fn acknowledged(
        &self,
        request: impl Fn(u64) -> Request<'static>,
    ) -> Result<Duration, ProviderError> {
        let inner = &self.inner;
        let mut slot = inner.slot.lock().await;
        let id = inner.next_id.fetch_add(1, Ordering::Relaxed);
        let sidecar = inner.running(&mut slot).await?;
        let result = async {
            let started = std::time::Instant::now();
            sidecar.send(&request(id)).await?;
            loop {
                match sidecar.next(inner.config.read_timeout).await? {
                    Reply::Pong { id: rid } if rid == id => return Ok(started.elapsed()),
                    other => skip_stale(id, &other)?,
                }
            }
        }
        .await;
        inner.settle(&mut slot, &result).await;
        result
    }

    /// The sidecar's process id, while one runs (tests use it to kill it).
    pub async fn sidecar_pid(&self) -> Option<u32> {
        self.inner.slot.lock().await.as_ref().and_then(Sidecar::pid)
    }

    /// Stops the sidecar now, after any running turn; the next turn starts
    /// a new one. Dropping the engine does this too (by killing it).
    pub async fn shutdown(&self) {
        if let Some(sidecar) = self.inner.slot.lock().await.take() {
            sidecar.shutdown().await;
        }
    }
}

impl Inner {
    /// The running sidecar, started again if an earlier failure stopped it.
    async fn running<'a>(
        &self,
        slot: &'a mut Option<Sidecar>,
    ) -> Result<&'a mut Sidecar, ProviderError> {
        if slot.is_none() {
            let (sidecar, info) = Sidecar::start(&self.config, &LoadProgress::ignore()).await?;
            if info.model != self.info.model {
                tracing::warn!(was = ?self.info.model, now = ?info.model, "the restarted MLX sidecar reports another model");
            }
            self.stats.lock().unwrap_or_else(|e| e.into_inner()).starts += 1;
            *slot = Some(sidecar);
        }
        let sidecar = slot.as_mut().ok_or_else(|| ProviderError::Other {
            message: "the MLX sidecar slot is empty after a start".into(),
        })?;
        // A request whose reader went away unanswered: stop it, its lines
        // will be skipped by id.
        if let Some(stale) = sidecar.in_flight.take() {
            sidecar.send(&Request::Cancel { id: stale }).await?;
        }
        Ok(sidecar)
    }

    /// After a request: a sidecar that failed (died, went silent, wrote
    /// garbage) is in an unknown state, so it is stopped, and the next
    /// request starts a new one. Errors it reported itself leave it running.
    async fn settle<T>(&self, slot: &mut Option<Sidecar>, result: &Result<T, ProviderError>) {
        let broken = matches!(
            result,
            Err(ProviderError::Transient { .. } | ProviderError::Protocol { .. })
        );
        if broken && let Some(sidecar) = slot.take() {
            sidecar.kill().await;
        }
    }

    fn record(&self, usage: SidecarUsage, grammar_reused: bool, timings: Timings) {
        let ms = |v: f64| Duration::from_secs_f64(v.max(0.0) / 1000.0);
        let mut stats = self.stats.lock().unwrap_or_else(|e| e.into_inner());
        *stats = MlxStats {
            prompt_tokens: usage.prompt_tokens,
            tokens_reused: usage.reused_tokens,
            tokens_evaluated: usage.evaluated_tokens,
            tokens_generated: usage.completion_tokens,
            tokens_after_cancel: usage.after_cancel_tokens,
            grammar_reused,
            prefill: ms(timings.prefill_ms),
            time_to_first_token: timings.first_token_ms.map(ms),
            sidecar_time: ms(timings.total_ms),
            starts: stats.starts,
        };
    }
}

/// A reply that belongs to no current request: a cancelled request's late
/// lines are skipped; anything else out of place is a protocol error.
fn skip_stale(current: u64, reply: &Reply) -> Result<(), ProviderError> {
    match reply {
        Reply::Progress { id }
        | Reply::Prefilled { id, .. }
        | Reply::Delta { id, .. }
        | Reply::Done { id, .. }
        | Reply::Tokens { id, .. }
        | Reply::Pong { id }
        | Reply::Error { id: Some(id), .. }
            if *id != current =>
        {
            tracing::debug!(stale = id, current, "skipping a line of an earlier request");
            Ok(())
        }
        other => Err(ProviderError::Protocol {
            message: format!("the MLX sidecar answered request {current} with {other:?}"),
        }),
    }
}

impl LocalEngine for MlxEngine {
    fn model_name(&self) -> String {
        self.inner.info.model.name.clone()
    }

    fn context_window(&self) -> u32 {
        self.inner.info.model.context_window
    }

    fn slots(&self) -> usize {
        self.inner.config.parallel
    }

    fn release(&self, sequence: SequenceId) {
        // After any running turn, and only to a running sidecar: a new one
        // holds no cache to free.
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let inner = self.inner.clone();
        runtime.spawn(async move {
            let mut slot = inner.slot.lock().await;
            if let Some(sidecar) = slot.as_mut()
                && sidecar
                    .send(&Request::Release {
                        sequence: sequence.0,
                    })
                    .await
                    .is_err()
            {
                // Gone: the next turn starts a new one.
                *slot = None;
            }
        });
    }

    fn generate(
        &self,
        turn: EngineTurn,
        cancel: CancellationToken,
    ) -> BoxStream<'static, Result<EngineEvent, ProviderError>> {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            let err = ProviderError::Other {
                message: "MlxEngine::generate must be called within a tokio runtime".into(),
            };
            return futures::stream::once(async move { Err(err) }).boxed();
        };
        // Bounded: a slow reader holds the sidecar's lines in the pipe.
        let (events, mut rx) = mpsc::channel(64);
        let inner = self.inner.clone();
        runtime.spawn(async move {
            if let Err(e) = run_turn(&inner, turn, &cancel, &events).await {
                let _ = events.send(Err(e)).await;
            }
        });
        futures::stream::poll_fn(move |cx| rx.poll_recv(cx)).boxed()
    }
}

type Events = mpsc::Sender<Result<EngineEvent, ProviderError>>;

async fn run_turn(
    inner: &Inner,
    turn: EngineTurn,
    cancel: &CancellationToken,
    events: &Events,
) -> Result<(), ProviderError> {
    let mut slot = tokio::select! {
        biased;
        () = cancel.cancelled() => return cancelled(events).await,
        slot = inner.slot.lock() => slot,
    };
    let id = inner.next_id.fetch_add(1, Ordering::Relaxed);
    let result = async {
        let sidecar = inner.running(&mut slot).await?;
        sidecar
            .send(&Request::Generate {
                id,
                sequence: turn.sequence.0,
                messages: wire_messages(&turn.messages),
                schema: &turn.schema,
                max_tokens: turn.max_tokens,
                temperature: turn.temperature,
                top_p: turn.top_p,
                seed: turn.seed,
            })
            .await?;
        sidecar.in_flight = Some(id);
        stream_replies(inner, sidecar, id, cancel, events).await
    }
    .await;
    inner.settle(&mut slot, &result).await;
    result
}

/// Forwards the replies to request `id` until it is done. A cancel (or the
/// caller dropping the stream) is passed on; the sidecar stops at its next
/// token and its `done` ends the turn as cancelled.
async fn stream_replies(
    inner: &Inner,
    sidecar: &mut Sidecar,
    id: u64,
    cancel: &CancellationToken,
    events: &Events,
) -> Result<(), ProviderError> {
    let mut cancel_sent = false;
    loop {
        let reply = tokio::select! {
            biased;
            () = cancel.cancelled(), if !cancel_sent => {
                sidecar.send(&Request::Cancel { id }).await?;
                cancel_sent = true;
                continue;
            }
            () = events.closed(), if !cancel_sent => {
                sidecar.send(&Request::Cancel { id }).await?;
                cancel_sent = true;
                continue;
            }
            reply = sidecar.next(inner.config.read_timeout) => reply?,
        };
        match reply {
            Reply::Progress { id: rid } if rid == id => {}
            Reply::Prefilled {
                id: rid,
                kept,
                restored,
                evaluated,
                dropped,
            } if rid == id => {
                let kv = KvReuse::new(kept, restored, evaluated).with_dropped(dropped);
                if !cancel_sent && events.send(Ok(EngineEvent::Prefill { kv })).await.is_err() {
                    sidecar.send(&Request::Cancel { id }).await?;
                    cancel_sent = true;
                }
            }
            Reply::Delta { id: rid, text } if rid == id => {
                if !cancel_sent && events.send(Ok(EngineEvent::Delta { text })).await.is_err() {
                    sidecar.send(&Request::Cancel { id }).await?;
                    cancel_sent = true;
                }
            }
            Reply::Done {
                id: rid,
                stop,
                usage,
                grammar_reused,
                timings,
            } if rid == id => {
                sidecar.in_flight = None;
                inner.record(usage, grammar_reused, timings);
                let stop = if cancel_sent {
                    EngineStop::Cancelled
                } else {
                    stop
                };
                // The prompt tokens the sidecar kept in its KV cache were
                // read, not computed: they are its cached prompt tokens.
                let usage = Usage::new(usage.prompt_tokens, usage.completion_tokens)
                    .with_cached_prompt_tokens(usage.reused_tokens);
                // The reader may be gone (it cancelled): nothing to tell.
                let _ = events.send(Ok(EngineEvent::Done { usage, stop })).await;
                return Ok(());
            }
            Reply::Error {
                id: Some(rid),
                kind,
                message,
            } if rid == id => {
                sidecar.in_flight = None;
                return Err(kind.into_error(message));
            }
            other => skip_stale(id, &other)?,
        }
    }
}

async fn cancelled(events: &Events) -> Result<(), ProviderError> {
    let _ = events
        .send(Ok(EngineEvent::Done {
            usage: Usage::default(),
            stop: EngineStop::Cancelled,
        }))
        .await;
    Ok(())
}
