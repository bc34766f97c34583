//! The openai adapter (work in progress).
