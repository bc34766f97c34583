//! Which chat each KV-cache slot holds, and the saved states of chats that
//! lost theirs.
//!
//! Pure bookkeeping, no model: the worker asks [`Slots::pick`] where a turn
//! of a sequence can run, does the llama.cpp work the answer calls for
//! (save the evicted chat's state, restore the arriving one's), and tells the
//! table what it did. A chat keeps its slot while the slot is free, so its
//! next turn finds its prefix in place; only when every slot is taken by
//! other chats is the least recently used free slot given up, its chat's
//! state saved to host memory under a byte budget. Past the budget the least
//! recently used saved states are dropped, and the table remembers that each
//! of those chats lost one, so its next turn can say it prefilled again.

use std::collections::{HashMap, HashSet};

use lrg_providers::local_chat::SequenceId;

use crate::chunks::Chunks;

/// One KV-cache sequence of the context (llama.cpp seq id = its index).
#[derive(Debug, Default)]
pub(crate) struct Slot {
    /// What the slot's KV holds, in position order.
    pub held: Chunks,
    /// The chat whose prefix is there, if any.
    pub owner: Option<SequenceId>,
    /// A turn is running in it.
    pub busy: bool,
    /// When it was last taken or given back (a tick of the table's clock).
    last_used: u64,
}

/// A chat's KV state kept in host memory while it has no slot.
#[derive(Debug)]
pub(crate) struct Saved<S> {
    /// The llama.cpp sequence state.
    pub state: S,
    /// What that state holds.
    pub held: Chunks,
    /// Its size, counted against the budget.
    pub bytes: u64,
    last_used: u64,
}

/// Where a turn of a sequence can run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pick {
    /// The sequence's own slot: its prefix is there.
    Own(usize),
    /// A free slot no chat holds.
    Empty(usize),
    /// The least recently used free slot, held by `owner`, whose state is
    /// to be saved before the slot changes hands.
    Evict {
        /// The slot.
        slot: usize,
        /// The chat it held.
        owner: SequenceId,
    },
    /// Every slot runs a turn, or this sequence's own slot does: wait.
    Wait,
}

/// The slot table and the saved states.
#[derive(Debug)]
pub(crate) struct Slots<S> {
    slots: Vec<Slot>,
    saved: HashMap<SequenceId, Saved<S>>,
    /// Chats whose saved state was dropped (or never kept) since their last turn.
    dropped: HashSet<SequenceId>,
    budget: u64,
    saved_bytes: u64,
    clock: u64,
}

impl<S> Slots<S> {
    /// `n` empty slots and `budget` bytes for saved states.
    pub fn new(n: usize, budget: u64) -> Self {
        Self {
            slots: (0..n.max(1)).map(|_| Slot::default()).collect(),
            saved: HashMap::new(),
            dropped: HashSet::new(),
            budget,
            saved_bytes: 0,
            clock: 0,
        }
    }

    /// The number of slots.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// Slot `i`.
    pub fn slot(&self, i: usize) -> &Slot {
        &self.slots[i]
    }

    /// Slot `i`, to change what it holds.
    pub fn slot_mut(&mut self, i: usize) -> &mut Slot {
        &mut self.slots[i]
    }

    /// All slots, in seq-id order.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = &mut Slot> {
        self.slots.iter_mut()
    }

    /// Bytes of saved states held now.
    pub fn saved_bytes(&self) -> u64 {
        self.saved_bytes
    }

    /// Whether a state of `bytes` could be saved at all.
    pub fn fits(&self, bytes: u64) -> bool {
        bytes <= self.budget
    }

    /// Whether `sequence` has a saved state.
    #[cfg(test)]
    pub fn has_saved(&self, sequence: SequenceId) -> bool {
        self.saved.contains_key(&sequence)
    }

    fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }

    /// Where a turn of `sequence` can run now.
    pub fn pick(&self, sequence: SequenceId) -> Pick {
        if let Some(i) = self.slots.iter().position(|s| s.owner == Some(sequence)) {
            return if self.slots[i].busy {
                Pick::Wait
            } else {
                Pick::Own(i)
            };
        }
        if let Some(i) = self.slots.iter().position(|s| !s.busy && s.owner.is_none()) {
            return Pick::Empty(i);
        }
        self.slots
            .iter()
            .enumerate()
            .filter(|(_, s)| !s.busy)
            .min_by_key(|(_, s)| s.last_used)
            .and_then(|(i, s)| s.owner.map(|owner| Pick::Evict { slot: i, owner }))
            .unwrap_or(Pick::Wait)
    }

    /// A turn of `sequence` runs in slot `i` from now on.
    pub fn take(&mut self, i: usize, sequence: SequenceId) {
        let now = self.tick();
        let slot = &mut self.slots[i];
        slot.owner = Some(sequence);
        slot.busy = true;
        slot.last_used = now;
    }

    /// The turn in slot `i` is over; the slot keeps its chat's prefix.
    pub fn give_back(&mut self, i: usize) {
        let now = self.tick();
        let slot = &mut self.slots[i];
        slot.busy = false;
        slot.last_used = now;
    }

    /// Keeps `state` (of `bytes`, holding `held`) for `sequence`, dropping
    /// the least recently used saved states until it fits the budget.
    /// Returns false, and remembers the loss, when it cannot fit at all.
    pub fn save(&mut self, sequence: SequenceId, state: S, held: Chunks, bytes: u64) -> bool {
        self.remove_saved(sequence);
        if bytes > self.budget {
            self.dropped.insert(sequence);
            return false;
        }
        while self.saved_bytes + bytes > self.budget {
            let Some(oldest) = self
                .saved
                .iter()
                .min_by_key(|(_, s)| s.last_used)
                .map(|(id, _)| *id)
            else {
                break;
            };
            self.remove_saved(oldest);
            self.dropped.insert(oldest);
        }
        let now = self.tick();
        self.saved_bytes += bytes;
        self.saved.insert(
            sequence,
            Saved {
                state,
                held,
                bytes,
                last_used: now,
            },
        );
        self.dropped.remove(&sequence);
        true
    }

    /// Remembers that `sequence` lost its KV prefix without a saved state.
    pub fn mark_dropped(&mut self, sequence: SequenceId) {
        self.dropped.insert(sequence);
    }

    /// Takes `sequence`'s saved state out, to restore it.
    pub fn take_saved(&mut self, sequence: SequenceId) -> Option<Saved<S>> {
        let saved = self.saved.remove(&sequence)?;
        self.saved_bytes -= saved.bytes;
        Some(saved)
    }

    /// Whether `sequence` lost a saved state since its last turn (and
    /// forgets it: the turn that asks reports it).
    pub fn take_dropped(&mut self, sequence: SequenceId) -> bool {
        self.dropped.remove(&sequence)
    }

    fn remove_saved(&mut self, sequence: SequenceId) {
        if let Some(old) = self.saved.remove(&sequence) {
            self.saved_bytes -= old.bytes;
        }
    }

    /// Forgets every saved state (nobody is told they were dropped: the
    /// caller asked for a clean cache).
    pub fn clear_saved(&mut self) {
        self.saved.clear();
        self.saved_bytes = 0;
        self.dropped.clear();
    }

    /// The chat of `sequence` is gone: drops its saved state and gives up
    /// its slot. Returns that slot when it holds KV to clear (a busy slot is
    /// left alone; the caller releases after the turn).
    pub fn release(&mut self, sequence: SequenceId) -> Option<usize> {
        self.remove_saved(sequence);
        self.dropped.remove(&sequence);
        let i = self
            .slots
            .iter()
            .position(|s| s.owner == Some(sequence) && !s.busy)?;
        self.slots[i].owner = None;
        Some(i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: SequenceId = SequenceId(1);
    const B: SequenceId = SequenceId(2);
    const C: SequenceId = SequenceId(3);

    fn held(n: i32) -> Chunks {
        let mut c = Chunks::new();
        c.push_tokens(&(0..n).collect::<Vec<_>>());
        c
    }

    #[test]
    fn a_chat_goes_back_to_its_own_slot_and_others_take_empty_ones() {
        let mut t: Slots<()> = Slots::new(2, 100);
        assert_eq!(t.pick(A), Pick::Empty(0));
        t.take(0, A);
        assert_eq!(t.pick(A), Pick::Wait, "its own slot is busy");
        assert_eq!(t.pick(B), Pick::Empty(1));
        t.take(1, B);
        assert_eq!(t.pick(C), Pick::Wait, "all slots busy");
        t.give_back(0);
        assert_eq!(t.pick(A), Pick::Own(0));
    }

    #[test]
    fn the_least_recently_used_free_slot_is_evicted() {
        let mut t: Slots<()> = Slots::new(2, 100);
        t.take(0, A);
        t.take(1, B);
        t.give_back(1);
        t.give_back(0);
        // B's turn ended first: its slot goes.
        assert_eq!(t.pick(C), Pick::Evict { slot: 1, owner: B });
    }

    #[test]
    fn past_the_budget_the_oldest_saved_state_is_dropped_and_remembered() {
        let mut t: Slots<&str> = Slots::new(1, 100);
        assert!(t.save(A, "a", held(3), 60));
        assert!(t.save(B, "b", held(3), 30));
        assert_eq!(t.saved_bytes(), 90);
        assert!(t.save(C, "c", held(3), 50));
        assert!(!t.has_saved(A) && t.has_saved(B) && t.has_saved(C));
        assert_eq!(t.saved_bytes(), 80);
        assert!(t.take_dropped(A));
        assert!(!t.take_dropped(A), "reported once");
        assert!(!t.take_dropped(B));
        let b = t.take_saved(B).unwrap();
        assert_eq!((b.state, b.bytes, b.held.tokens()), ("b", 30, 3));
        assert_eq!(t.saved_bytes(), 50);
    }

    #[test]
    fn a_state_larger_than_the_budget_is_not_kept() {
        let mut t: Slots<()> = Slots::new(1, 10);
        assert!(!t.save(A, (), held(1), 11));
        assert_eq!(t.saved_bytes(), 0);
        assert!(t.take_dropped(A));
    }

    #[test]
    fn release_frees_the_slot_and_the_saved_state() {
        let mut t: Slots<()> = Slots::new(2, 100);
        t.take(0, A);
        assert_eq!(t.release(A), None, "busy: released after the turn");
        t.give_back(0);
        assert_eq!(t.release(A), Some(0));
        assert_eq!(t.slot(0).owner, None);
        assert!(t.save(B, (), held(2), 5));
        assert_eq!(t.release(B), None);
        assert!(!t.has_saved(B));
        assert_eq!(t.saved_bytes(), 0);
    }
}
