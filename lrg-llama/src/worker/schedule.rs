//! Turns joining (a slot, their chat's KV brought in) and the batched step
//! that decodes every running turn at once.

use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::time::Instant;

use llama_cpp_2::LlamaStateSeqFlags;
use llama_cpp_2::token::LlamaToken;
use lrg_providers::local_chat::{EngineEvent, EngineStop, KvReuse, SequenceId};
use lrg_providers::{ProviderError, Usage};
use rand::SeedableRng;
use rand::rngs::StdRng;

use super::slots::Pick;
use super::turn::{Active, Next, Outbox};
use super::{Waiting, Worker};
use crate::chunks::{Chunks, Plan};
use crate::engine::EngineStats;
use crate::utf8::Utf8Stream;

/// What one turn put into a batch.
struct Entry {
    /// Index into `Worker::active`.
    active: usize,
    /// Position of its first token.
    start: u32,
    tokens: Vec<i32>,
    /// Batch index of the logits it reads, if any.
    logits: Option<i32>,
    /// Prompt tokens (else the turn's last sampled token).
    prefill: bool,
}

impl Worker<'_> {
    /// Starts the waiting turns that can get a slot now, in arrival order
    /// (a chat's later turn never overtakes its earlier one).
    pub(super) fn admit(&mut self) {
        let mut blocked: HashSet<SequenceId> = HashSet::new();
        let mut started = false;
        let mut i = 0;
        while i < self.waiting.len() {
            let w = &self.waiting[i];
            let sequence = w.turn.sequence;
            if w.cancel.is_cancelled() || w.events.is_closed() {
                if let Some(w) = self.waiting.remove(i) {
                    let done = EngineEvent::Done {
                        usage: Usage::default(),
                        stop: EngineStop::Cancelled,
                    };
                    Outbox::new(w.events).push(Ok(done));
                    self.released_after(sequence);
                }
                continue;
            }
            if blocked.contains(&sequence) {
                i += 1;
                continue;
            }
            match self.slots.pick(sequence) {
                Pick::Wait => {
                    blocked.insert(sequence);
                    i += 1;
                }
                pick => {
                    if let Some(w) = self.waiting.remove(i) {
                        self.start(w, pick);
                        started = true;
                    }
                }
            }
        }
        if started && let Some(vision) = self.vision.as_mut() {
            let mut keep: HashSet<u64> = HashSet::new();
            for a in &self.active {
                keep.extend(a.prompt.image_hashes());
            }
            for i in 0..self.slots.len() {
                keep.extend(self.slots.slot(i).held.image_hashes());
            }
            vision.retain(&keep);
        }
    }

    /// A turn ended or was refused: release its chat if that was asked for
    /// and nothing of it is left in flight.
    fn released_after(&mut self, sequence: SequenceId) {
        if self.releases.contains(&sequence) {
            self.release(sequence);
        }
    }

    /// Renders the prompt and compiles the schema (before touching any
    /// slot, so a bad turn costs nothing), then takes the slot `pick` gave.
    fn start(&mut self, w: Waiting, pick: Pick) {
        let Waiting {
            turn,
            cancel,
            events,
        } = w;
        let started = Instant::now();
        let mut out = Outbox::new(events);
        let prepared = self.prompt(&turn.messages).and_then(|prompt| {
            let prompt_tokens = prompt.tokens();
            if prompt_tokens >= self.window {
                return Err(ProviderError::ContextOverflow {
                    message: format!(
                        "the prompt is {prompt_tokens} tokens and the context window is {} tokens (room is needed for the answer)",
                        self.window
                    ),
                });
            }
            Ok((prompt, self.constraint_for(&turn.schema)?))
        });
        let (prompt, constraint) = match prepared {
            Ok(p) => p,
            Err(e) => {
                out.push(Err(e));
                if out.backed_up() {
                    self.draining.push(out);
                }
                self.released_after(turn.sequence);
                return;
            }
        };
        let sequence = turn.sequence;
        let slot = match pick {
            Pick::Own(slot) | Pick::Empty(slot) => slot,
            Pick::Evict { slot, owner } => {
                self.save_state(slot, owner);
                slot
            }
            // `admit` never starts a turn without a slot.
            Pick::Wait => return,
        };
        self.slots.take(slot, sequence);
        let mut dropped = self.slots.take_dropped(sequence);
        let mut restored = false;
        if !matches!(pick, Pick::Own(_))
            && let Some(saved) = self.slots.take_saved(sequence)
        {
            self.clear_slot(slot);
            match self.ctx.state_seq_set(&saved.state, slot as i32) {
                Ok(()) => {
                    self.slots.slot_mut(slot).held = saved.held;
                    restored = true;
                }
                Err(e) => {
                    tracing::warn!(%sequence, error = %e, "restoring a saved sequence state failed; prefilling again");
                    self.clear_slot(slot);
                    dropped = true;
                }
            }
        }
        self.publish_saved_bytes();
        let plan = self.keep_common_prefix(slot, &prompt);
        let prompt_tokens = prompt.tokens();
        let evaluated = prompt_tokens - plan.tokens;
        let kv = if restored {
            KvReuse::new(0, plan.tokens, evaluated)
        } else {
            KvReuse::new(plan.tokens, 0, evaluated)
        }
        .with_dropped(dropped);
        let stats = EngineStats {
            prompt_tokens,
            tokens_reused: plan.tokens,
            tokens_restored: kv.restored,
            tokens_evaluated: evaluated,
            tokens_held: self.slots.slot(slot).held.tokens(),
            ..EngineStats::default()
        };
        self.shared.started(sequence, stats);
        let seed = turn.seed.map_or_else(rand::random::<u64>, u64::from);
        self.active.push(Active {
            sequence,
            slot,
            prompt,
            at: (plan.whole, plan.partial),
            next: None,
            constraint,
            rng: StdRng::seed_from_u64(seed),
            text: Utf8Stream::default(),
            // The prompt tokens kept in the KV cache were read, not
            // computed: they are this engine's cached prompt tokens.
            usage: Usage::new(prompt_tokens, 0).with_cached_prompt_tokens(plan.tokens),
            max_tokens: turn.max_tokens,
            temperature: turn.temperature,
            top_p: turn.top_p,
            cancel,
            out,
            started,
            kv,
            stats,
            ending: None,
        });
    }

    /// Saves the state of `owner`, who is losing slot `slot`, to host memory
    /// when the budget allows; otherwise remembers that it lost it. The
    /// slot's KV stays: the arriving chat may share its prefix (a system
    /// prompt).
    fn save_state(&mut self, slot: usize, owner: SequenceId) {
        let held = self.slots.slot(slot).held.clone();
        if held.tokens() == 0 {
            return;
        }
        let flags = LlamaStateSeqFlags::empty();
        let size = self.ctx.state_seq_get_size_ext(slot as i32, flags) as u64;
        if !self.slots.fits(size) {
            self.slots.mark_dropped(owner);
            return;
        }
        match self.ctx.state_seq_get(slot as i32, flags) {
            Ok(state) => {
                let bytes = state.byte_len() as u64;
                self.slots.save(owner, state, held, bytes);
            }
            Err(e) => {
                tracing::warn!(sequence = %owner, error = %e, "saving a sequence state failed; it will be prefilled again");
                self.slots.mark_dropped(owner);
            }
        }
    }

    fn publish_saved_bytes(&self) {
        self.shared
            .saved_bytes
            .store(self.slots.saved_bytes(), Ordering::Relaxed);
    }

    /// Drops from slot `slot` everything after the longest prefix `prompt`
    /// shares with what it holds (text token by token, images by their
    /// bytes' hash; see [`crate::chunks`]); returns where evaluation starts.
    /// At least one prompt token is always left to evaluate, since its logits
    /// start the answer.
    fn keep_common_prefix(&mut self, slot: usize, prompt: &Chunks) -> Plan {
        let held = &self.slots.slot(slot).held;
        let plan = held.plan(prompt);
        if plan.tokens < held.tokens() {
            let removed = self
                .ctx
                .clear_kv_cache_seq(Some(slot as u32), Some(plan.positions), None)
                .unwrap_or(false);
            if !removed {
                // Some caches (recurrent models) cannot cut a sequence; start over.
                tracing::debug!(
                    slot,
                    keep = plan.tokens,
                    "partial KV removal refused; clearing the slot"
                );
                self.clear_slot(slot);
                return self.slots.slot(slot).held.plan(prompt);
            }
        }
        self.slots.slot_mut(slot).held.keep(prompt, &plan);
        plan
    }

    /// After a failed evaluation in slot `slot` from position `start`:
    /// removes whatever it may have written, so the KV matches `held` again.
    fn forget_from(&mut self, slot: usize, start: u32) {
        let removed = self
            .ctx
            .clear_kv_cache_seq(Some(slot as u32), Some(start), None)
            .unwrap_or(false);
        if !removed {
            self.clear_slot(slot);
        }
    }

    /// One step of every running turn: cancelled ones leave, images are
    /// evaluated, then one batch holds each generating turn's next token and
    /// as much prompt of the prefilling ones as fits. Returns whether
    /// anything was done (false: every turn waits for its reader).
    pub(super) fn step(&mut self) -> bool {
        let mut worked = false;
        for a in &mut self.active {
            a.out.flush();
            if a.cancel.is_cancelled() || a.out.is_closed() {
                a.ending = Some(Ok(EngineStop::Cancelled));
                worked = true;
            }
        }
        worked |= self.step_images();
        worked |= self.step_batch();
        self.conclude();
        worked
    }

    /// Evaluates the image that comes next in a turn's prompt, one turn at a
    /// time (the projector runs its own batches); a prompt ending in an image
    /// samples its first token from the logits right away.
    fn step_images(&mut self) -> bool {
        let mut worked = false;
        for i in 0..self.active.len() {
            let a = &self.active[i];
            if a.ending.is_some() || a.out.backed_up() {
                continue;
            }
            let Some((hash, last)) = a.next_image() else {
                continue;
            };
            worked = true;
            let slot = a.slot;
            let start = self.slots.slot(slot).held.positions();
            let result = match self.vision.as_mut() {
                Some(vision) => {
                    vision.eval(hash, &mut self.ctx, start, slot as i32, self.n_batch, last)
                }
                None => Err(ProviderError::Other {
                    message: "an image reached a model without a projector".into(),
                }),
            };
            if let Err(e) = result {
                self.forget_from(slot, start);
                self.active[i].ending = Some(Err(e));
                continue;
            }
            let a = &mut self.active[i];
            if let Some(chunk) = a.prompt.as_slice().get(a.at.0) {
                self.slots.slot_mut(slot).held.push(chunk);
            }
            a.advance(0);
            if last {
                // llama.cpp reads -1 as the last logits computed.
                self.after_logits(i, -1, true);
            }
        }
        worked
    }

    /// Builds, decodes and reads one batch.
    fn step_batch(&mut self) -> bool {
        let entries = match self.fill_batch() {
            Ok(e) => e,
            Err(e) => {
                // Nothing was decoded: the turns just cannot go on.
                for a in &mut self.active {
                    if a.ending.is_none() {
                        a.ending = Some(Err(e.clone()));
                    }
                }
                return true;
            }
        };
        if entries.is_empty() {
            return false;
        }
        if let Err(e) = self.ctx.decode(&mut self.batch) {
            for entry in &entries {
                let slot = self.active[entry.active].slot;
                self.forget_from(slot, entry.start);
                let err = match &e {
                    llama_cpp_2::DecodeError::NoKvCacheSlot => ProviderError::ContextOverflow {
                        message: format!(
                            "llama.cpp found no room in the KV cache at position {}",
                            entry.start
                        ),
                    },
                    other => ProviderError::Other {
                        message: format!("llama.cpp failed to evaluate tokens: {other}"),
                    },
                };
                self.active[entry.active].ending = Some(Err(err));
            }
            return true;
        }
        for entry in entries {
            let a = &mut self.active[entry.active];
            self.slots.slot_mut(a.slot).held.push_tokens(&entry.tokens);
            if entry.prefill {
                a.advance(entry.tokens.len());
            } else {
                a.next = None;
            }
            if let Some(idx) = entry.logits {
                self.after_logits(entry.active, idx, entry.prefill);
            }
        }
        true
    }

    /// Puts into the batch each generating turn's token, then prompt tokens
    /// of the prefilling turns up to the batch size.
    fn fill_batch(&mut self) -> Result<Vec<Entry>, ProviderError> {
        self.batch.clear();
        let mut entries = Vec::new();
        let mut n = 0usize;
        let ready = |a: &Active| a.ending.is_none() && !a.out.backed_up();
        for (i, a) in self.active.iter().enumerate() {
            let Some(token) = a.next.filter(|_| ready(a)) else {
                continue;
            };
            let start = self.slots.slot(a.slot).held.positions();
            self.batch
                .add(token, start as i32, &[a.slot as i32], true)
                .map_err(batch_error)?;
            entries.push(Entry {
                active: i,
                start,
                tokens: vec![token.0],
                logits: Some(n as i32),
                prefill: false,
            });
            n += 1;
        }
        for (i, a) in self.active.iter().enumerate() {
            let room = self.n_batch.saturating_sub(n);
            if room == 0 {
                break;
            }
            if !ready(a) || !a.prefilling() {
                continue;
            }
            let Some((tokens, ends)) = a.next_text(room) else {
                continue;
            };
            let start = self.slots.slot(a.slot).held.positions();
            for (j, &t) in tokens.iter().enumerate() {
                let logits = ends && j + 1 == tokens.len();
                self.batch
                    .add(
                        LlamaToken(t),
                        (start as usize + j) as i32,
                        &[a.slot as i32],
                        logits,
                    )
                    .map_err(batch_error)?;
            }
            n += tokens.len();
            entries.push(Entry {
                active: i,
                start,
                tokens: tokens.to_vec(),
                logits: ends.then_some(n as i32 - 1),
                prefill: true,
            });
        }
        Ok(entries)
    }

    /// Logits for turn `i` are at batch index `idx`: sample its next token.
    /// `prefill_ended` says they are the prompt's last.
    fn after_logits(&mut self, i: usize, idx: i32, prefill_ended: bool) {
        let model = self.model;
        let held = self.slots.slot(self.active[i].slot).held.tokens();
        let logits = self.ctx.get_logits_ith(idx);
        let a = &mut self.active[i];
        if prefill_ended {
            a.prefill_done();
        }
        a.stats.tokens_held = held;
        match a.sample(model, logits, held >= self.window) {
            Ok(Next::Continue) => {}
            Ok(Next::Stop(stop)) => a.ending = Some(Ok(stop)),
            Err(e) => a.ending = Some(Err(e)),
        }
        // Live, so a caller can see how far a turn got when it cancelled it.
        self.shared.update(a.sequence, a.stats);
    }

    /// Ends the turns marked to end: their last events, their slot given
    /// back, a release that waited for them.
    fn conclude(&mut self) {
        let mut i = self.active.len();
        while i > 0 {
            i -= 1;
            let Some(ending) = self.active[i].ending.take() else {
                continue;
            };
            let mut a = self.active.swap_remove(i);
            match ending {
                Ok(stop) => a.finish(stop),
                Err(e) => a.out.push(Err(e)),
            }
            a.stats.tokens_held = self.slots.slot(a.slot).held.tokens();
            self.shared.update(a.sequence, a.stats);
            self.slots.give_back(a.slot);
            if a.out.backed_up() {
                self.draining.push(a.out);
            }
            self.released_after(a.sequence);
        }
    }
}

fn batch_error(e: llama_cpp_2::llama_batch::BatchAddError) -> ProviderError {
    ProviderError::Other {
        message: format!("llama.cpp batch: {e}"),
    }
}
