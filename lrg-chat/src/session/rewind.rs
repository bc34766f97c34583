//! Going back over the conversation: retry the last message (with new
//! text or not), compact it into a summary, clear it.

use lrg_providers::Messages;

use super::{ChatSession, SessionError, TurnHandle, Work, persist};

impl ChatSession {
    /// Answer the last user message again: everything after it is dropped
    /// (and the view told with a `rewound` event).
    /// It runs with the session's generation settings (not those a
    /// [`send_with`](Self::send_with) gave the message).
    pub fn retry_last(&self) -> Result<TurnHandle, SessionError> {
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| SessionError::NoRuntime)?;
        let mut state = self.shared.lock();
        if state.running.is_some() {
            return Err(SessionError::Busy);
        }
        let &(index, seq) = state.user_seqs.last().ok_or(SessionError::NothingToRetry)?;
        state.history.make_mut().truncate(index + 1);
        state.generation += 1;
        state
            .announce
            .push(persist::Announce::Rewound { to_seq: seq });
        Ok(self.start(&runtime, state, Work::message()))
    }

    /// [`retry_last`](Self::retry_last) with the last user message's text
    /// replaced by `text` (its images stay): the person edited it. The view
    /// is told with a `rewound` to the event before that message, then the
    /// message again as a `user_message` with the new text.
    pub fn retry_with_text(&self, text: impl Into<String>) -> Result<TurnHandle, SessionError> {
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| SessionError::NoRuntime)?;
        let mut state = self.shared.lock();
        if state.running.is_some() {
            return Err(SessionError::Busy);
        }
        let &(index, seq) = state.user_seqs.last().ok_or(SessionError::NothingToRetry)?;
        let text = text.into();
        let history = state.history.make_mut();
        history.truncate(index + 1);
        let mut images = 0;
        if let Some(row) = history.get_mut(index) {
            let mut parts = vec![lrg_providers::Part::text(text.clone())];
            for part in row.parts.drain(..) {
                if matches!(part, lrg_providers::Part::Image(_)) {
                    images += 1;
                    parts.push(part);
                }
            }
            row.parts = parts;
        }
        state.user_seqs.pop();
        state.generation += 1;
        state.announce.push(persist::Announce::Rewound {
            to_seq: seq.saturating_sub(1),
        });
        state.announce.push(persist::Announce::User {
            index,
            text,
            images,
        });
        Ok(self.start(&runtime, state, Work::message()))
    }

    /// Replace the conversation with a summary the model writes in one
    /// tool-free turn; the summary seeds the new history as a user message.
    pub fn compact(&self) -> Result<TurnHandle, SessionError> {
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| SessionError::NoRuntime)?;
        let state = self.shared.lock();
        if state.running.is_some() {
            return Err(SessionError::Busy);
        }
        if state.history.is_empty() {
            return Err(SessionError::NothingToCompact);
        }
        Ok(self.start(&runtime, state, Work::Compact))
    }

    /// Empty the conversation. A cleared chat is a new chat: tools allowed
    /// "for this chat" ask again (rules saved with "always" stay), and its
    /// sub-agents are stopped, forgotten and deleted from the store.
    ///
    /// The `cleared` event follows once the emptied history is durable (a
    /// viewer never sees a clear a crash could undo); await
    /// [`clear_kept`](Self::clear_kept) to know when.
    pub fn clear(&self) -> Result<(), SessionError> {
        self.clear_task().map(drop)
    }

    /// [`clear`](Self::clear), and wait until the emptied history is durable
    /// and `cleared` published — what to await before acknowledging a clear
    /// to anyone. Returns whether it is kept: `false` when the store failed
    /// (a `warning` event said so); `true` without a store. Giving up the
    /// wait does not give up the clear.
    pub async fn clear_kept(&self) -> Result<bool, SessionError> {
        match self.clear_task()? {
            Some(task) => Ok(task.await.unwrap_or(false)),
            None => Ok(true),
        }
    }

    /// Clear, and the task that keeps the clear and then announces it
    /// (`None`: announced already, there being nothing to wait for).
    fn clear_task(&self) -> Result<Option<tokio::task::JoinHandle<bool>>, SessionError> {
        let mut state = self.shared.lock();
        if state.running.is_some() {
            return Err(SessionError::Busy);
        }
        state.history = Messages::new();
        state.user_seqs.clear();
        state.generation += 1;
        state.chat_allowed.clear();
        // Results of work the clear stops have nothing left to answer.
        state.deliveries.clear();
        state.announce.push(persist::Announce::Cleared);
        drop(state);
        if let Some(delegation) = &self.shared.delegation {
            delegation.clear();
        }
        // Wiped in the store now, not at the next message.
        Ok(self.keep_and_announce())
    }

    /// Save what changed and then announce it, in a task: its handle, or
    /// `None` when announced at once, there being no store (or no runtime)
    /// to wait for. A message's first save announces it too, should that
    /// come first.
    pub(super) fn keep_and_announce(&self) -> Option<tokio::task::JoinHandle<bool>> {
        if self.shared.persister.is_some()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            let shared = self.shared.clone();
            return Some(runtime.spawn(async move { persist::save_and_announce(&shared).await }));
        }
        persist::publish_pending(&self.shared, &mut self.shared.lock());
        None
    }
}
