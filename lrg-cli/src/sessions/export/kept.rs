//! The kept chat played back: its model turns ([`KeptAnswers`]) and its
//! tools answering each call with the result it got ([`KeptTools`]), for
//! rebuilding a recording and checking an export offline.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use lrg_chat::tools::{ToolOutput, Tools, ToolsError};
use lrg_chat::transcript::{ToolOutcome, outcome_of};
use lrg_providers::{
    ChatModel, Message, ModelInfo, Part, StopReason, ToolResult, ToolSpec, TurnEvent, TurnRequest,
    TurnStream,
};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::KeptCall;

/// The kept model turns, played in order: what the model answered then.
pub(super) struct KeptAnswers {
    info: ModelInfo,
    turns: Vec<Vec<TurnEvent>>,
    next: Mutex<usize>,
}

impl KeptAnswers {
    pub(super) fn new(info: &ModelInfo, turns: &[Message]) -> Self {
        // As a replay describes it: a replay sends nothing anywhere.
        let mut info = info.clone();
        info.sends_to = None;
        Self {
            info,
            turns: turns.iter().map(events_of).collect(),
            next: Mutex::new(0),
        }
    }
}

/// The events that make the session keep `turn` as it was kept.
fn events_of(turn: &Message) -> Vec<TurnEvent> {
    let mut events: Vec<TurnEvent> = turn
        .parts
        .iter()
        .filter_map(|part| match part {
            Part::Text { text } => Some(TurnEvent::TextDelta { text: text.clone() }),
            Part::Reasoning { text } => Some(TurnEvent::ReasoningDelta { text: text.clone() }),
            Part::ToolCall(call) => Some(TurnEvent::ToolCall(call.clone())),
            Part::Native(native) => Some(TurnEvent::Native(native.clone())),
            _ => None,
        })
        .collect();
    let stop = if turn.tool_calls().next().is_some() {
        StopReason::ToolCalls
    } else {
        StopReason::EndTurn
    };
    events.push(TurnEvent::End { stop });
    events
}

impl ChatModel for KeptAnswers {
    fn info(&self) -> ModelInfo {
        self.info.clone()
    }

    fn turn(&self, _request: TurnRequest, _cancel: CancellationToken) -> TurnStream {
        let index = {
            let mut next = lrg_providers::sync::lock(&self.next);
            *next += 1;
            *next - 1
        };
        let item = match self.turns.get(index) {
            Some(events) => events.iter().cloned().map(Ok).collect::<Vec<_>>(),
            None => vec![Err(lrg_providers::ProviderError::Other {
                message: format!(
                    "the kept chat holds {} model turn(s) for its first message, and turn {} was asked for",
                    self.turns.len(),
                    index + 1
                ),
            })],
        };
        Box::pin(futures::stream::iter(item))
    }
}

/// The chat's tools as they were: the kept list, and each call answered
/// with the result it got then (calls of the same tool with the same
/// arguments in order).
pub(super) struct KeptTools {
    specs: Arc<[ToolSpec]>,
    results: Mutex<VecDeque<(String, Value, ToolResult)>>,
}

impl KeptTools {
    pub(super) fn new(specs: &[ToolSpec], calls: &[KeptCall]) -> Self {
        let ran = calls
            .iter()
            .filter(|k| matches!(outcome_of(&k.result), ToolOutcome::Ok | ToolOutcome::Failed));
        Self {
            specs: specs.to_vec().into(),
            results: Mutex::new(
                ran.map(|k| {
                    (
                        k.call.name.clone(),
                        k.call.arguments.clone(),
                        k.result.clone(),
                    )
                })
                .collect(),
            ),
        }
    }
}

/// Said with a kept failure: the session adds its hint about the tool's
/// arguments to a failure only when the tool gives none of its own, and
/// the kept result holds that hint already.
const KEPT_FAILURE: &str = "a kept failure, answered as it was";

impl Tools for KeptTools {
    fn list(&self) -> BoxFuture<'_, Result<Vec<ToolSpec>, ToolsError>> {
        let list = self.specs.to_vec();
        Box::pin(async move { Ok(list) })
    }

    fn list_shared(&self) -> BoxFuture<'_, Result<Arc<[ToolSpec]>, ToolsError>> {
        let list = Arc::clone(&self.specs);
        Box::pin(async move { Ok(list) })
    }

    fn call<'a>(
        &'a self,
        name: &'a str,
        arguments: Value,
        _cancel: CancellationToken,
    ) -> BoxFuture<'a, ToolOutput> {
        let kept = {
            let mut results = lrg_providers::sync::lock(&self.results);
            results
                .iter()
                .position(|(n, a, _)| n == name && *a == arguments)
                .and_then(|i| results.remove(i))
        };
        Box::pin(async move {
            match kept {
                Some((_, _, result)) => {
                    let mut output = ToolOutput::text("");
                    output.parts = result.parts;
                    output.is_error = result.is_error;
                    if result.is_error {
                        output.warning = Some(KEPT_FAILURE.to_string());
                    }
                    output
                }
                None => ToolOutput::error(format!(
                    "the kept chat has no result for this call of `{name}` with {arguments}"
                )),
            }
        })
    }
}
