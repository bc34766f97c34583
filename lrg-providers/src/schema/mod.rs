//! Schema shaping for grammar engines and cloud APIs (work in progress).
