//! The anthropic adapter (work in progress).
