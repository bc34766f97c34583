//! The worker thread: owns the model and the context, and runs the turns of
//! every chat on it.
//!
//! The context has one KV sequence per slot. A turn takes a slot (its chat's
//! own when the chat still has one, see [`slots`]) and joins the running
//! turns: each step decodes one `llama_batch` holding the next token of every
//! generating turn and as much prompt of the prefilling ones as fits
//! (continuous batching). Turns join and leave between steps; a cancelled
//! turn leaves at the next step, the others go on.

mod load;
mod prompt;
mod schedule;
mod slots;
mod turn;

use std::collections::{HashMap, HashSet, VecDeque};
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc as std_mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use llama_cpp_2::SeqState;
use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::{LlamaChatTemplate, LlamaModel};
use lrg_providers::ProviderError;
use lrg_providers::local_chat::{EngineEvent, EngineMessage, EngineTurn, LoadProgress, SequenceId};
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::config::LlamaConfig;
use crate::constraint::{AnswerConstraint, ConstraintCompiler};
use crate::engine::EngineStats;
use crate::vision::Vision;
use slots::Slots;
use turn::{Active, Outbox};

/// Work for the worker.
pub(crate) enum Job {
    /// One turn to run, its events sent as they happen.
    Generate {
        turn: EngineTurn,
        cancel: CancellationToken,
        events: mpsc::Sender<Result<EngineEvent, ProviderError>>,
    },
    /// The chat is gone: free its slot and saved state.
    Release(SequenceId),
    /// Forget every conversation held in free slots and saved states.
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
    /// Sequence slots.
    pub slots: usize,
}

/// What the worker shares with the engine handle.
#[derive(Debug, Default)]
pub(crate) struct Shared {
    stats: Mutex<Board>,
    /// Estimated bytes of weights and KV (set once loaded).
    pub resident: AtomicU64,
    /// Bytes of saved sequence states now.
    pub saved_bytes: AtomicU64,
}

/// Counters of the most recent turn and of each chat's latest.
#[derive(Debug, Default)]
struct Board {
    last: EngineStats,
    last_sequence: Option<SequenceId>,
    per_sequence: HashMap<SequenceId, EngineStats>,
}

impl Shared {
    /// Counters of the turn that started last.
    pub fn last(&self) -> EngineStats {
        self.board().last
    }

    /// Counters of `sequence`'s latest turn.
    pub fn of(&self, sequence: SequenceId) -> Option<EngineStats> {
        self.board().per_sequence.get(&sequence).copied()
    }

    fn board(&self) -> std::sync::MutexGuard<'_, Board> {
        // Counters stay readable after a panic elsewhere: they are plain numbers.
        self.stats.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn started(&self, sequence: SequenceId, stats: EngineStats) {
        let mut b = self.board();
        b.last = stats;
        b.last_sequence = Some(sequence);
        b.per_sequence.insert(sequence, stats);
    }

    fn update(&self, sequence: SequenceId, stats: EngineStats) {
        let mut b = self.board();
        if b.last_sequence == Some(sequence) {
            b.last = stats;
        }
        b.per_sequence.insert(sequence, stats);
    }

    fn forget(&self, sequence: SequenceId) {
        self.board().per_sequence.remove(&sequence);
    }
}

/// Starts the worker thread and waits until it has loaded the model.
pub(crate) fn spawn_worker(
    config: LlamaConfig,
    progress: LoadProgress,
    shared: Arc<Shared>,
) -> Result<(std_mpsc::Sender<Job>, Loaded), ProviderError> {
    let (jobs_tx, jobs_rx) = std_mpsc::channel::<Job>();
    let (ready_tx, ready_rx) = std_mpsc::channel::<Result<Loaded, ProviderError>>();
    std::thread::Builder::new()
        .name("lrg-llama".into())
        .spawn(move || run_worker(config, progress, shared, jobs_rx, ready_tx))
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
    progress: LoadProgress,
    shared: Arc<Shared>,
    jobs: std_mpsc::Receiver<Job>,
    ready: std_mpsc::Sender<Result<Loaded, ProviderError>>,
) {
    let model = match load::load_model(&config, progress) {
        Ok(m) => m,
        Err(e) => {
            let _ = ready.send(Err(e));
            return;
        }
    };
    let opened = match load::open(&model, &config) {
        Ok(o) => o,
        Err(e) => {
            let _ = ready.send(Err(e));
            return;
        }
    };
    let n_slots = config.n_seq_max.max(1) as usize;
    shared.resident.store(opened.resident, Ordering::Relaxed);
    if ready
        .send(Ok(Loaded {
            context_window: opened.window,
            vision: opened.vision.is_some(),
            slots: n_slots,
        }))
        .is_err()
    {
        return;
    }
    let mut worker = Worker {
        model: &model,
        ctx: opened.ctx,
        template: opened.template,
        compiler: opened.compiler,
        last_constraint: None,
        vision: opened.vision,
        slots: Slots::new(n_slots, config.kv_cache_mem),
        window: opened.window,
        batch: LlamaBatch::new(opened.n_batch, 1),
        n_batch: opened.n_batch,
        active: Vec::new(),
        waiting: VecDeque::new(),
        releases: HashSet::new(),
        draining: Vec::new(),
        shared,
    };
    worker.serve(&jobs);
}

/// A turn waiting for a slot.
struct Waiting {
    turn: EngineTurn,
    cancel: CancellationToken,
    events: mpsc::Sender<Result<EngineEvent, ProviderError>>,
}

/// The worker's state between steps.
struct Worker<'m> {
    model: &'m LlamaModel,
    ctx: LlamaContext<'m>,
    template: LlamaChatTemplate,
    compiler: ConstraintCompiler,
    /// The last schema compiled, with its constraint before any token.
    last_constraint: Option<(Value, AnswerConstraint)>,
    /// The projector, when the model sees images.
    vision: Option<Vision>,
    slots: Slots<SeqState>,
    /// Tokens one sequence may hold.
    window: u32,
    batch: LlamaBatch<'static>,
    n_batch: usize,
    /// Turns with a slot, decoding together.
    active: Vec<Active>,
    /// Turns waiting for a slot, in arrival order.
    waiting: VecDeque<Waiting>,
    /// Chats released while a turn of theirs ran or waited.
    releases: HashSet<SequenceId>,
    /// Finished turns whose last events their readers have not taken yet.
    draining: Vec<Outbox>,
    shared: Arc<Shared>,
}

impl Worker<'_> {
    /// Runs jobs until the engine is dropped and every queued turn is done.
    fn serve(&mut self, jobs: &std_mpsc::Receiver<Job>) {
        // How long to wait for a job while turns wait for their readers.
        const POLL: Duration = Duration::from_millis(2);
        let mut open = true;
        loop {
            let busy = !self.active.is_empty() || !self.waiting.is_empty();
            if !busy && open {
                // A finished turn's last events still to deliver: poll.
                let job = if self.draining.is_empty() {
                    jobs.recv()
                        .map_err(|_| std_mpsc::RecvTimeoutError::Disconnected)
                } else {
                    jobs.recv_timeout(POLL)
                };
                match job {
                    Ok(job) => self.take(job),
                    Err(std_mpsc::RecvTimeoutError::Timeout) => {}
                    Err(std_mpsc::RecvTimeoutError::Disconnected) => open = false,
                }
            }
            while open {
                match jobs.try_recv() {
                    Ok(job) => self.take(job),
                    Err(std_mpsc::TryRecvError::Empty) => break,
                    Err(std_mpsc::TryRecvError::Disconnected) => open = false,
                }
            }
            self.draining.retain_mut(|out| !out.flush());
            let busy = !self.active.is_empty() || !self.waiting.is_empty();
            if !open && !busy {
                if self.draining.is_empty() {
                    return;
                }
                std::thread::sleep(POLL);
                continue;
            }
            self.admit();
            let worked = self.guarded_step();
            if !worked && !self.active.is_empty() {
                // Every running turn waits for its reader: poll, not spin.
                if open {
                    match jobs.recv_timeout(POLL) {
                        Ok(job) => self.take(job),
                        Err(std_mpsc::RecvTimeoutError::Timeout) => {}
                        Err(std_mpsc::RecvTimeoutError::Disconnected) => open = false,
                    }
                } else {
                    std::thread::sleep(POLL);
                }
            }
        }
    }

    fn take(&mut self, job: Job) {
        match job {
            Job::Generate {
                turn,
                cancel,
                events,
            } => self.waiting.push_back(Waiting {
                turn,
                cancel,
                events,
            }),
            Job::Release(sequence) => self.release(sequence),
            Job::ClearCache => self.clear_free(),
            Job::Tokenize { messages, reply } => {
                let tokens = self.prompt(&messages).and_then(|p| {
                    p.text_only().ok_or_else(|| ProviderError::BadRequest {
                        message: "tokenize_prompt takes conversations without images".into(),
                    })
                });
                let _ = reply.send(tokens);
            }
        }
    }

    /// One step, with a panic in llama.cpp's bindings or ours failing the
    /// running turns instead of the worker.
    fn guarded_step(&mut self) -> bool {
        match std::panic::catch_unwind(AssertUnwindSafe(|| self.step())) {
            Ok(worked) => worked,
            Err(_) => {
                for mut active in std::mem::take(&mut self.active) {
                    active.out.push(Err(ProviderError::Other {
                        message: "the llama.cpp worker panicked during this turn".into(),
                    }));
                    self.slots.give_back(active.slot);
                    self.draining.push(active.out);
                }
                // The cache may not match what the slots think they hold.
                self.reset_all();
                true
            }
        }
    }

    /// The chat of `sequence` is gone. A chat with a turn running or
    /// waiting is released once the last of them ends.
    fn release(&mut self, sequence: SequenceId) {
        let in_flight = self.active.iter().any(|a| a.sequence == sequence)
            || self.waiting.iter().any(|w| w.turn.sequence == sequence);
        if in_flight {
            self.releases.insert(sequence);
            return;
        }
        self.releases.remove(&sequence);
        if let Some(slot) = self.slots.release(sequence) {
            self.clear_slot(slot);
        }
        self.shared
            .saved_bytes
            .store(self.slots.saved_bytes(), Ordering::Relaxed);
        self.shared.forget(sequence);
    }

    /// Empties the KV of slot `slot` (its owner stays as it is).
    fn clear_slot(&mut self, slot: usize) {
        let _ = self.ctx.clear_kv_cache_seq(Some(slot as u32), None, None);
        self.slots.slot_mut(slot).held.clear();
    }

    /// Forgets what free slots hold and every saved state.
    fn clear_free(&mut self) {
        for slot in 0..self.slots.len() {
            if !self.slots.slot(slot).busy {
                self.clear_slot(slot);
                self.slots.slot_mut(slot).owner = None;
            }
        }
        self.slots.clear_saved();
        self.shared.saved_bytes.store(0, Ordering::Relaxed);
    }

    /// Clears the whole cache after something left it in an unknown state.
    fn reset_all(&mut self) {
        self.ctx.clear_kv_cache();
        for slot in self.slots.iter_mut() {
            slot.held.clear();
            slot.owner = None;
            slot.busy = false;
        }
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
}
