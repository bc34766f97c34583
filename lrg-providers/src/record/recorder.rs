//! [`RecordingModel`]: a model wrapper that writes every turn to a recording.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use futures::StreamExt as _;
use tokio_util::sync::CancellationToken;

use super::file::{Exchange, RecordError, RecordedError, Recording, request_value};
use crate::{ChatModel, ModelInfo, ProviderError, TurnEvent, TurnRequest, TurnStream};

struct Shared {
    path: PathBuf,
    recording: Recording,
}

/// Wraps a [`ChatModel`] and records every request and its streamed answer
/// to a file (see [the format](super)). The wrapped model's behaviour is
/// unchanged, except that a turn fails with a configuration error when the
/// recording cannot be written: a suite must not pass on a recording that
/// silently lost turns.
pub struct RecordingModel<M> {
    inner: M,
    shared: Arc<Mutex<Shared>>,
}

impl<M: ChatModel> RecordingModel<M> {
    /// Record `inner` into `path`, which is created (or replaced) right away
    /// so an unwritable path fails before the first turn.
    pub fn create(inner: M, path: impl AsRef<Path>) -> Result<Self, RecordError> {
        let path = path.as_ref().to_path_buf();
        let recording = Recording::new(inner.info());
        recording.save(&path)?;
        Ok(Self {
            inner,
            shared: Arc::new(Mutex::new(Shared { path, recording })),
        })
    }

    /// What has been recorded so far.
    pub fn recording(&self) -> Recording {
        lock(&self.shared).recording.clone()
    }

    /// Where the recording is written.
    pub fn path(&self) -> PathBuf {
        lock(&self.shared).path.clone()
    }

    /// The wrapped model.
    pub fn inner(&self) -> &M {
        &self.inner
    }
}

impl<M> std::fmt::Debug for RecordingModel<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecordingModel")
            .field("path", &lock(&self.shared).path)
            .finish_non_exhaustive()
    }
}

fn lock(shared: &Mutex<Shared>) -> MutexGuard<'_, Shared> {
    // The state is a plain list that is always consistent between statements.
    crate::sync::lock(shared)
}

fn save(shared: &Mutex<Shared>) -> Result<(), ProviderError> {
    let state = lock(shared);
    state
        .recording
        .save(&state.path)
        .map_err(ProviderError::from)
}

/// The exchange a running turn writes into; saves what it has if the turn's
/// stream is dropped before its end.
struct Slot {
    shared: Arc<Mutex<Shared>>,
    index: usize,
    dirty: bool,
}

impl Slot {
    fn update(&mut self, f: impl FnOnce(&mut Exchange)) {
        if let Some(exchange) = lock(&self.shared).recording.exchanges.get_mut(self.index) {
            f(exchange);
        }
        self.dirty = true;
    }

    fn save(&mut self) -> Result<(), ProviderError> {
        self.dirty = false;
        save(&self.shared)
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        if self.dirty {
            // Nowhere to report a failure from a drop; the turn is gone anyway.
            let _ = save(&self.shared);
        }
    }
}

impl<M: ChatModel> ChatModel for RecordingModel<M> {
    fn info(&self) -> ModelInfo {
        self.inner.info()
    }

    fn turn(&self, request: TurnRequest, cancel: CancellationToken) -> TurnStream {
        let value = match request_value(&request) {
            Ok(v) => v,
            Err(e) => return crate::model::failed_turn(e),
        };
        let index = {
            let mut state = lock(&self.shared);
            state.recording.exchanges.push(Exchange {
                request: value,
                events: Vec::new(),
                error: None,
                complete: false,
            });
            state.recording.exchanges.len() - 1
        };
        let mut slot = Slot {
            shared: self.shared.clone(),
            index,
            dirty: false,
        };
        if let Err(e) = slot.save() {
            return crate::model::failed_turn(e);
        }
        let mut inner = self.inner.turn(request, cancel);
        Box::pin(async_stream::stream! {
            let mut ended = false;
            while let Some(item) = inner.next().await {
                let finished = match &item {
                    Ok(event) => {
                        let event = event.clone();
                        let end = matches!(event, TurnEvent::End { .. });
                        slot.update(|x| {
                            x.events.push(event);
                            x.complete |= end;
                        });
                        end
                    }
                    Err(err) => {
                        let recorded = RecordedError::from_error(err);
                        slot.update(|x| {
                            x.error = Some(recorded);
                            x.complete = true;
                        });
                        true
                    }
                };
                // Save before handing the end of the turn over: a consumer
                // may stop reading there and drop this stream.
                if finished {
                    ended = true;
                    if let Err(e) = slot.save() {
                        yield Err(e);
                        return;
                    }
                }
                yield item;
            }
            if !ended {
                // The model ended its stream without an `End`: still a whole turn.
                slot.update(|x| x.complete = true);
            }
            if slot.dirty && let Err(e) = slot.save() {
                yield Err(e);
            }
        })
    }
}
