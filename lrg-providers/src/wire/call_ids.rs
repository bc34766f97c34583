//! Tool call ids unique in a conversation, for every decoder whose server
//! may leave an id out or repeat one.

use std::collections::HashSet;

use crate::{Message, Part};

/// Ids for tool calls, unique in the conversation: a server's own id is kept
/// unless it is missing or already taken, else `call_<n>` is made up.
#[derive(Debug, Default)]
pub(crate) struct CallIds {
    taken: HashSet<String>,
    next: usize,
}

impl CallIds {
    /// Ids already used in `history`.
    pub(crate) fn from_history(history: &[Message]) -> Self {
        let taken: HashSet<String> = history
            .iter()
            .flat_map(|m| m.parts.iter())
            .filter_map(|p| match p {
                Part::ToolCall(c) => Some(c.id.clone()),
                _ => None,
            })
            .collect();
        Self {
            next: taken.len() + 1,
            taken,
        }
    }

    /// `proposed` when it is new, else a fresh `call_<n>`.
    pub(crate) fn claim(&mut self, proposed: Option<String>) -> String {
        if let Some(id) = proposed.filter(|id| !id.is_empty() && !self.taken.contains(id)) {
            self.taken.insert(id.clone());
            return id;
        }
        loop {
            let id = format!("call_{}", self.next);
            self.next += 1;
            if self.taken.insert(id.clone()) {
                return id;
            }
        }
    }
}
