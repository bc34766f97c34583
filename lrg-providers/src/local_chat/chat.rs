//! What a [`super::LocalChatModel`] runs on: its engine (its own, or the
//! pool's entry) and its sequences.
//!
//! A chat has one sequence of its own. A turn that starts while another of
//! the same model runs (sub-agents share their parent's model) takes a spare
//! sequence instead, so two turns never run on one sequence at once and
//! neither clobbers the other's KV prefix; spares are kept for later turns
//! and released with the chat.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::broadcast;

use super::engine::{LocalEngine, SequenceId};
use super::pool::{ChatSlot, Entry, Facts, Lease, LoadingEvent};
use crate::sync::lock;

/// Shown for a pooled model that never loaded (cannot happen: a chat is
/// handed out after its first load).
static UNKNOWN: Facts = Facts {
    name: String::new(),
    window: 0,
    vision: false,
};

/// Where the engine comes from.
enum Backend {
    Direct {
        engine: Arc<dyn LocalEngine>,
        facts: Facts,
    },
    Pooled(Arc<Entry>),
}

/// One sequence of a chat: a pooled one releases itself when dropped.
enum Seq {
    Direct(SequenceId),
    Pooled(ChatSlot),
}

impl Seq {
    fn id(&self) -> SequenceId {
        match self {
            Seq::Direct(id) => *id,
            Seq::Pooled(slot) => slot.sequence,
        }
    }
}

/// A chat on a local engine. See the module docs.
pub(super) struct Chat {
    backend: Backend,
    primary: Seq,
    primary_busy: AtomicBool,
    spares: Mutex<Vec<Seq>>,
}

impl Chat {
    /// A chat on an engine of its own.
    pub(super) fn direct(engine: Arc<dyn LocalEngine>) -> Self {
        let facts = Facts {
            name: engine.model_name(),
            window: engine.context_window(),
            vision: engine.vision(),
        };
        Self::with(
            Backend::Direct { engine, facts },
            Seq::Direct(SequenceId::fresh()),
        )
    }

    /// A chat of a pooled engine, on `slot`'s sequence.
    pub(super) fn pooled(slot: ChatSlot) -> Self {
        Self::with(Backend::Pooled(Arc::clone(&slot.entry)), Seq::Pooled(slot))
    }

    fn with(backend: Backend, primary: Seq) -> Self {
        Self {
            backend,
            primary,
            primary_busy: AtomicBool::new(false),
            spares: Mutex::new(Vec::new()),
        }
    }

    /// The chat's own sequence.
    pub(super) fn sequence(&self) -> SequenceId {
        self.primary.id()
    }

    pub(super) fn facts(&self) -> &Facts {
        match &self.backend {
            Backend::Direct { facts, .. } => facts,
            Backend::Pooled(entry) => entry.facts().unwrap_or(&UNKNOWN),
        }
    }

    /// A sequence for one turn: the chat's own when free, else a spare.
    pub(super) fn take(self: &Arc<Self>) -> InUse {
        if !self.primary_busy.swap(true, Ordering::AcqRel) {
            return InUse {
                chat: Arc::clone(self),
                sequence: self.primary.id(),
                spare: None,
            };
        }
        let spare = lock(&self.spares)
            .pop()
            .unwrap_or_else(|| match &self.backend {
                Backend::Direct { .. } => Seq::Direct(SequenceId::fresh()),
                Backend::Pooled(entry) => Seq::Pooled(ChatSlot::new(Arc::clone(entry))),
            });
        InUse {
            chat: Arc::clone(self),
            sequence: spare.id(),
            spare: Some(spare),
        }
    }

    /// The engine for a turn, when it needs no load: a direct one, or a
    /// pooled one that is loaded (`Err` with the entry to lease it from).
    pub(super) fn engine(&self) -> Result<Held, &Arc<Entry>> {
        match &self.backend {
            Backend::Direct { engine, .. } => Ok(Held::Direct(Arc::clone(engine))),
            Backend::Pooled(entry) => Err(entry),
        }
    }
}

impl Drop for Chat {
    fn drop(&mut self) {
        // Pooled sequences release themselves as they drop.
        if let Backend::Direct { engine, .. } = &self.backend {
            let spares = std::mem::take(&mut *lock(&self.spares));
            for seq in std::iter::once(&self.primary).chain(&spares) {
                engine.release(seq.id());
            }
        }
    }
}

/// A turn's sequence; given back to its chat when dropped.
pub(super) struct InUse {
    chat: Arc<Chat>,
    sequence: SequenceId,
    spare: Option<Seq>,
}

impl InUse {
    pub(super) fn sequence(&self) -> SequenceId {
        self.sequence
    }
}

impl Drop for InUse {
    fn drop(&mut self) {
        match self.spare.take() {
            None => self.chat.primary_busy.store(false, Ordering::Release),
            Some(spare) => lock(&self.chat.spares).push(spare),
        }
    }
}

/// A turn's hold on its engine.
pub(super) enum Held {
    Direct(Arc<dyn LocalEngine>),
    Pooled(Lease),
}

impl Held {
    pub(super) fn engine(&self) -> &Arc<dyn LocalEngine> {
        match self {
            Held::Direct(engine) => engine,
            Held::Pooled(lease) => lease.engine(),
        }
    }
}

/// The next progress report of `model`'s load; pending forever when there
/// is nothing to hear.
pub(super) async fn next_loading(
    events: &mut Option<broadcast::Receiver<LoadingEvent>>,
    model: &str,
) -> f32 {
    use broadcast::error::RecvError;
    loop {
        let Some(receiver) = events.as_mut() else {
            return std::future::pending().await;
        };
        match receiver.recv().await {
            Ok(event) if event.model == model => return event.progress,
            Ok(_) | Err(RecvError::Lagged(_)) => {}
            Err(RecvError::Closed) => *events = None,
        }
    }
}
