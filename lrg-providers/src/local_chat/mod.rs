//! Tool calling for local models by constrained decoding (see DESIGN.md,
//! "Tool calling without a tool-call format").

mod engine;

pub use engine::{EngineEvent, EngineMessage, EngineRole, EngineStop, EngineTurn, LocalEngine};
