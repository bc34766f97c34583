//! One running turn: where its prompt evaluation is, its constraint, sampler
//! and text stream, and the events it has not delivered yet.

use std::collections::VecDeque;
use std::time::Instant;

use llama_cpp_2::model::LlamaModel;
use llama_cpp_2::token::LlamaToken;
use lrg_providers::local_chat::{EngineEvent, EngineStop, KvReuse, SequenceId};
use lrg_providers::{ProviderError, Usage};
use rand::rngs::StdRng;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::chunks::{Chunk, Chunks};
use crate::constraint::AnswerConstraint;
use crate::engine::EngineStats;
use crate::sampling::sample;
use crate::utf8::Utf8Stream;

/// A turn's event stream.
pub(super) type Events = mpsc::Sender<Result<EngineEvent, ProviderError>>;

/// Events on their way to a turn's reader. The worker never blocks on a
/// reader: what does not fit the channel waits here, and the turn decodes no
/// further until its reader catches up, so a slow reader holds back its own
/// turn only.
pub(super) struct Outbox {
    tx: Events,
    queue: VecDeque<Result<EngineEvent, ProviderError>>,
}

impl Outbox {
    pub fn new(tx: Events) -> Self {
        Self {
            tx,
            queue: VecDeque::new(),
        }
    }

    pub fn push(&mut self, event: Result<EngineEvent, ProviderError>) {
        self.queue.push_back(event);
        self.flush();
    }

    /// Sends what the channel takes; true when nothing is left waiting.
    pub fn flush(&mut self) -> bool {
        while let Some(event) = self.queue.pop_front() {
            match self.tx.try_send(event) {
                Ok(()) => {}
                Err(mpsc::error::TrySendError::Full(event)) => {
                    self.queue.push_front(event);
                    return false;
                }
                // Nobody reads any more: nothing to deliver.
                Err(mpsc::error::TrySendError::Closed(_)) => {
                    self.queue.clear();
                    return true;
                }
            }
        }
        true
    }

    pub fn backed_up(&self) -> bool {
        !self.queue.is_empty()
    }

    pub fn is_closed(&self) -> bool {
        self.tx.is_closed()
    }
}

/// A turn that has a slot and runs.
pub(super) struct Active {
    pub sequence: SequenceId,
    /// Its slot: the llama.cpp sequence id.
    pub slot: usize,
    pub prompt: Chunks,
    /// The next prompt piece to evaluate: chunk index, token offset in it.
    pub at: (usize, usize),
    /// The token sampled last, evaluated in the next batch.
    pub next: Option<LlamaToken>,
    pub constraint: AnswerConstraint,
    pub rng: StdRng,
    pub text: Utf8Stream,
    pub usage: Usage,
    pub max_tokens: u32,
    pub temperature: f32,
    pub top_p: Option<f32>,
    pub cancel: CancellationToken,
    pub out: Outbox,
    pub started: Instant,
    pub kv: KvReuse,
    pub stats: EngineStats,
    /// Set when the turn is to end at the end of this step.
    pub ending: Option<Result<EngineStop, ProviderError>>,
}

/// What the turn does after a token was sampled.
pub(super) enum Next {
    /// Evaluate the token and go on.
    Continue,
    /// The turn is over.
    Stop(EngineStop),
}

impl Active {
    /// Still evaluating its prompt.
    pub fn prefilling(&self) -> bool {
        self.at.0 < self.prompt.as_slice().len()
    }

    /// The prompt's next piece, when it is an image: its hash and whether it
    /// ends the prompt.
    pub fn next_image(&self) -> Option<(u64, bool)> {
        let chunks = self.prompt.as_slice();
        match chunks.get(self.at.0) {
            Some(Chunk::Image { hash, .. }) => Some((*hash, self.at.0 + 1 == chunks.len())),
            _ => None,
        }
    }

    /// Up to `room` tokens of the prompt's next text piece, and whether they
    /// end the prompt (so the last needs logits).
    pub fn next_text(&self, room: usize) -> Option<(&[i32], bool)> {
        let chunks = self.prompt.as_slice();
        match chunks.get(self.at.0) {
            Some(Chunk::Text(tokens)) => {
                let rest = &tokens[self.at.1..];
                let n = rest.len().min(room);
                let ends = self.at.0 + 1 == chunks.len() && n == rest.len();
                Some((&rest[..n], ends))
            }
            _ => None,
        }
    }

    /// Moves past `n` tokens (or the image) of the prompt's next piece.
    pub fn advance(&mut self, n: usize) {
        let len = match self.prompt.as_slice().get(self.at.0) {
            Some(Chunk::Text(t)) => t.len(),
            _ => 0,
        };
        self.at.1 += n;
        if self.at.1 >= len {
            self.at = (self.at.0 + 1, 0);
        }
    }

    /// The prompt is in the KV cache: says how it got there.
    pub fn prefill_done(&mut self) {
        self.stats.prefill = self.started.elapsed();
        self.out.push(Ok(EngineEvent::Prefill { kv: self.kv }));
    }

    /// Samples the next token from `logits` and streams its text.
    /// `window_full` says the slot has no room for another token.
    pub fn sample(
        &mut self,
        model: &LlamaModel,
        logits: &[f32],
        window_full: bool,
    ) -> Result<Next, ProviderError> {
        if self.cancel.is_cancelled() || self.out.is_closed() {
            return Ok(Next::Stop(EngineStop::Cancelled));
        }
        if self.usage.completion_tokens >= self.max_tokens || window_full {
            return Ok(Next::Stop(EngineStop::MaxTokens));
        }
        let allowed = self.constraint.allowed_tokens()?;
        let Some(id) = sample(
            logits,
            &allowed,
            self.temperature,
            self.top_p,
            &mut self.rng,
        ) else {
            return Err(ProviderError::Other {
                message: "the answer constraint allows no token of this model's vocabulary".into(),
            });
        };
        let token = LlamaToken(id as i32);
        if self.usage.completion_tokens == 0 {
            self.stats.time_to_first_token = Some(self.started.elapsed());
        }
        let vocab = model.vocab();
        if vocab.is_eog(token) {
            return Ok(Next::Stop(EngineStop::Done));
        }
        self.constraint.commit(id)?;
        self.usage.completion_tokens += 1;
        self.stats.tokens_generated = self.usage.completion_tokens;
        let piece = vocab.token_to_piece(token, false, None);
        let delta = self.text.push(&piece);
        if !delta.is_empty() {
            self.out.push(Ok(EngineEvent::Delta { text: delta }));
        }
        if self.constraint.is_finished() {
            // The closing token is not evaluated: nothing would read its
            // logits, and the next turn's prefix match re-evaluates it.
            return Ok(Next::Stop(EngineStop::Done));
        }
        if self.usage.completion_tokens >= self.max_tokens {
            // Likewise: the last token allowed needs no logits.
            return Ok(Next::Stop(EngineStop::MaxTokens));
        }
        self.next = Some(token);
        Ok(Next::Continue)
    }

    /// Ends the stream: the held-back text, then `Done`.
    pub fn finish(&mut self, stop: EngineStop) {
        let rest = self.text.finish();
        if !rest.is_empty() {
            self.out.push(Ok(EngineEvent::Delta { text: rest }));
        }
        self.out.push(Ok(EngineEvent::Done {
            usage: self.usage,
            stop,
        }));
    }
}
