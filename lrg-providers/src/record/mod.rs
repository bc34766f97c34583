//! Record a model's turns and replay them: the regression-suite feature.
//!
//! [`RecordingModel`] wraps any [`ChatModel`](crate::ChatModel) and writes every
//! request it is sent, with the events the model streamed back (and the error
//! that ended the turn, if one did), to a recording file. [`ReplayModel`] plays
//! a recording back in order; when the request it receives is not the one that
//! was recorded it fails with a unified diff of the two, so a changed prompt,
//! system prompt or tool set is caught by CI.
//!
//! # The recording format (version 1)
//!
//! One JSON document, pretty-printed so it diffs well in review:
//!
//! ```json
//! {
//!   "format": "lrg-recording",
//!   "version": 1,
//!   "model": { "provider": "openai", "model": "gpt-4.1", "location": "cloud",
//!              "context_window": null, "sends_to": "api.openai.com" },
//!   "exchanges": [
//!     {
//!       "request": { "system": "…", "messages": [ … ], "tools": [ … ] },
//!       "events": [ { "type": "text_delta", "text": "Hello" },
//!                   { "type": "end", "stop": "end_turn" } ],
//!       "error": null,
//!       "complete": true
//!     }
//!   ]
//! }
//! ```
//!
//! - `request` is a [`TurnRequest`](crate::TurnRequest) and `events` are
//!   [`TurnEvent`](crate::TurnEvent)s, in their serde forms.
//! - `error`, when set, is `{ "kind": "<ProviderError::kind>", "message": "…",
//!   "retry_after_ms": n | null }`: the turn ended with that error after its events.
//! - `complete` is `false` when the turn's stream was dropped before it ended
//!   (the run was stopped or crashed); such an exchange replays what was seen.
//!
//! The file is rewritten atomically (a temporary file renamed over it) when a
//! request is sent and again when its turn ends, so a run that crashes keeps
//! everything recorded up to that point.
//!
//! Nothing secret is written: a request holds no key or header by design (keys
//! live inside the adapters), and the model entry holds no base URL credentials.

mod file;
mod recorder;
mod replay;

pub use file::{
    Exchange, RECORDING_FORMAT, RECORDING_VERSION, RecordError, RecordedError, Recording,
};
pub use recorder::RecordingModel;
pub use replay::ReplayModel;
