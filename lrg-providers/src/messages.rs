//! [`Messages`]: a conversation shared, not copied, between a session's
//! history and the requests built from it.

use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::Message;

/// A conversation, oldest first, cheap to clone.
///
/// Why shared: a session builds a [`crate::TurnRequest`] every model turn
/// from its history, which usually fits the window whole, and the request
/// is cloned again for every attempt (retries, recorders). Holding the
/// messages behind an [`Arc`] makes each of those a reference-count bump
/// instead of a deep copy of every message.
///
/// Reads go through `Deref<Target = [Message]>` (`&request.messages`
/// iterates, indexes and slices like a `Vec`). Edits go through
/// [`make_mut`](Self::make_mut), which copies the messages only while
/// another holder shares them (copy-on-write).
///
/// Serialized exactly as a list of messages.
#[derive(Clone, Default)]
pub struct Messages(Arc<Vec<Message>>);

impl Messages {
    /// An empty conversation.
    pub fn new() -> Self {
        Self::default()
    }

    /// The messages as a slice (what `Deref` gives too).
    pub fn as_slice(&self) -> &[Message] {
        &self.0
    }

    /// The messages to edit in place; copied first only when another
    /// `Messages` shares them.
    pub fn make_mut(&mut self) -> &mut Vec<Message> {
        Arc::make_mut(&mut self.0)
    }

    /// Append `message` (see [`make_mut`](Self::make_mut) for when this
    /// copies).
    pub fn push(&mut self, message: Message) {
        self.make_mut().push(message);
    }

    /// The messages as an owned `Vec`, copied only when shared.
    pub fn into_vec(self) -> Vec<Message> {
        Arc::try_unwrap(self.0).unwrap_or_else(|shared| (*shared).clone())
    }

    /// Whether both hold the very same messages (one shared buffer), not
    /// merely equal ones.
    pub fn ptr_eq(a: &Self, b: &Self) -> bool {
        Arc::ptr_eq(&a.0, &b.0)
    }
}

impl Deref for Messages {
    type Target = [Message];

    fn deref(&self) -> &[Message] {
        &self.0
    }
}

impl AsRef<[Message]> for Messages {
    fn as_ref(&self) -> &[Message] {
        &self.0
    }
}

impl From<Vec<Message>> for Messages {
    fn from(messages: Vec<Message>) -> Self {
        Self(Arc::new(messages))
    }
}

impl From<&[Message]> for Messages {
    fn from(messages: &[Message]) -> Self {
        Self(Arc::new(messages.to_vec()))
    }
}

impl<const N: usize> From<[Message; N]> for Messages {
    fn from(messages: [Message; N]) -> Self {
        Self(Arc::new(messages.into()))
    }
}

impl From<Messages> for Vec<Message> {
    fn from(messages: Messages) -> Self {
        messages.into_vec()
    }
}

impl FromIterator<Message> for Messages {
    fn from_iter<I: IntoIterator<Item = Message>>(iter: I) -> Self {
        Self(Arc::new(iter.into_iter().collect()))
    }
}

impl Extend<Message> for Messages {
    fn extend<I: IntoIterator<Item = Message>>(&mut self, iter: I) {
        self.make_mut().extend(iter);
    }
}

impl<'a> IntoIterator for &'a Messages {
    type Item = &'a Message;
    type IntoIter = std::slice::Iter<'a, Message>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

impl PartialEq for Messages {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || self.0 == other.0
    }
}

impl PartialEq<Vec<Message>> for Messages {
    fn eq(&self, other: &Vec<Message>) -> bool {
        *self.0 == *other
    }
}

impl PartialEq<[Message]> for Messages {
    fn eq(&self, other: &[Message]) -> bool {
        self.0.as_slice() == other
    }
}

impl fmt::Debug for Messages {
    // As the list itself, so debug output (and snapshots of it) read as before.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl Serialize for Messages {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Messages {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Vec::<Message>::deserialize(deserializer).map(Self::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clones_share_until_one_is_edited() {
        let a: Messages = vec![Message::user("one")].into();
        let mut b = a.clone();
        assert!(Messages::ptr_eq(&a, &b));
        b.push(Message::assistant("two"));
        assert!(!Messages::ptr_eq(&a, &b));
        assert_eq!(a.len(), 1);
        assert_eq!(b.len(), 2);
        // Alone again: an edit copies nothing.
        let shared = Arc::as_ptr(&b.0);
        b.push(Message::user("three"));
        assert_eq!(Arc::as_ptr(&b.0), shared);
        assert_eq!(b[0].text(), "one");
        assert_eq!(b.into_vec().len(), 3);
    }

    #[test]
    fn serializes_as_a_plain_list() {
        let messages: Messages = [Message::user("hi")].into();
        let json = serde_json::to_value(&messages).unwrap();
        assert_eq!(
            json,
            serde_json::to_value(vec![Message::user("hi")]).unwrap()
        );
        let back: Messages = serde_json::from_value(json).unwrap();
        assert_eq!(back, messages);
        assert_eq!(
            format!("{messages:?}"),
            format!("{:?}", vec![Message::user("hi")])
        );
    }
}
