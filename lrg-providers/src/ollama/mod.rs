//! The ollama adapter (work in progress).
