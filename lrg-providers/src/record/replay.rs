//! [`ReplayModel`]: plays a recording back, checking every request.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::file::{RecordError, Recording, canonical, request_value};
use crate::{ChatModel, ModelInfo, ProviderError, StopReason, TurnEvent, TurnRequest, TurnStream};

/// Plays a recording's answers back in order, one exchange per turn.
///
/// Each request must equal the recorded one; if it does not, the turn fails
/// with a fatal [`ProviderError::Other`] whose message holds a unified diff
/// of the two requests as pretty JSON (`-` recorded, `+` now). Asking for
/// more turns than were recorded is an error too.
///
/// [`ChatModel::info`] reports the recorded model (provider, name, location,
/// context window), because a session may shape its requests by them; only
/// `sends_to` is cleared, since a replay sends nothing anywhere.
#[derive(Debug, Clone)]
pub struct ReplayModel {
    source: PathBuf,
    recording: Arc<Recording>,
    next: Arc<Mutex<usize>>,
    /// The first request that differed from its recording, as the error
    /// message (with the diff) that turn failed with.
    drift: Arc<Mutex<Option<String>>>,
}

impl ReplayModel {
    /// Play `recording`; `source` names it in error messages.
    pub fn new(recording: Recording, source: impl Into<PathBuf>) -> Self {
        Self {
            source: source.into(),
            recording: Arc::new(recording),
            next: Arc::default(),
            drift: Arc::default(),
        }
    }

    /// Load and play a recording file.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self, RecordError> {
        let path = path.as_ref();
        Ok(Self::new(Recording::load(path)?, path))
    }

    /// The recording being played.
    pub fn recording(&self) -> &Recording {
        &self.recording
    }

    /// How many exchanges have been played (or attempted).
    pub fn played(&self) -> usize {
        *crate::sync::lock(&self.next)
    }

    /// How many recorded exchanges have not been played: more than zero after
    /// a run means the session now stops earlier than when it was recorded.
    pub fn remaining(&self) -> usize {
        self.recording.exchanges.len().saturating_sub(self.played())
    }

    /// When a request differed from its recording: the message the turn
    /// failed with, holding the unified diff (the first such request only).
    /// Lets a test runner tell drift from an error the recording itself holds.
    pub fn drift(&self) -> Option<String> {
        crate::sync::lock(&self.drift).clone()
    }

    fn mismatch(&self, index: usize, recorded: &Value, now: &Value) -> ProviderError {
        let pretty = |v: &Value| {
            let mut s = serde_json::to_string_pretty(v).unwrap_or_default();
            s.push('\n');
            s
        };
        let (old, new) = (pretty(&canonical(recorded.clone())), pretty(now));
        let diff = similar::TextDiff::from_lines(&old, &new)
            .unified_diff()
            .context_radius(3)
            .header("recorded request", "request now")
            .to_string();
        let message = format!(
            "replay of {}: request {} differs from the recorded one (a changed prompt, system prompt, \
             tool set or history); re-record with --record if the change is intended:\n{diff}",
            self.source.display(),
            index + 1,
        );
        crate::sync::lock(&self.drift).get_or_insert_with(|| message.clone());
        ProviderError::Other { message }
    }
}

impl ChatModel for ReplayModel {
    fn info(&self) -> ModelInfo {
        ModelInfo {
            sends_to: None,
            ..self.recording.model.clone()
        }
    }

    fn turn(&self, request: TurnRequest, cancel: CancellationToken) -> TurnStream {
        let index = {
            let mut next = crate::sync::lock(&self.next);
            let index = *next;
            *next += 1;
            index
        };
        let total = self.recording.exchanges.len();
        let outcome = match self.recording.exchanges.get(index) {
            None => Err(ProviderError::Other {
                message: format!(
                    "replay of {}: the recording holds {total} model turn(s) and turn {} was requested; \
                     the session now takes more turns than when it was recorded (re-record with --record)",
                    self.source.display(),
                    index + 1,
                ),
            }),
            Some(exchange) => match request_value(&request) {
                Err(e) => Err(e),
                Ok(now) if now != exchange.request => {
                    Err(self.mismatch(index, &exchange.request, &now))
                }
                Ok(_) => Ok((
                    exchange.events.clone(),
                    exchange.error.as_ref().map(|e| e.to_error()),
                )),
            },
        };
        Box::pin(async_stream::stream! {
            let (events, error) = match outcome {
                Ok(played) => played,
                Err(e) => {
                    yield Err(e);
                    return;
                }
            };
            for event in events {
                if cancel.is_cancelled() {
                    yield Ok(TurnEvent::End { stop: StopReason::Cancelled });
                    return;
                }
                yield Ok(event);
                // Let a stop requested while this event is handled land
                // before the next one, as it would with a streaming model.
                tokio::task::yield_now().await;
            }
            if let Some(e) = error {
                yield Err(e);
            }
        })
    }
}
