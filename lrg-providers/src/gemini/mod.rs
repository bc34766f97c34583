//! The gemini adapter (work in progress).
