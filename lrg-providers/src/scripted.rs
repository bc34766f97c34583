//! [`ScriptedModel`]: a [`ChatModel`] that plays back scripted turns, for tests
//! and users' own CI suites.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::{
    ChatModel, ModelInfo, ModelLocation, ProviderError, StopReason, ToolCall, TurnEvent,
    TurnRequest, TurnStream, Usage,
};

/// One scripted assistant turn (the JSON file is an array of these).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptedTurn {
    /// Reasoning streamed before the text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<String>,
    /// Answer text, streamed word by word.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Tool calls made after the text.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub calls: Vec<ScriptedCall>,
    /// Fail this turn instead (nothing else of the turn is played).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ScriptedError>,
    /// Usage to report (default: none reported).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// Pause between streamed events, in milliseconds (default 0), to test
    /// stopping mid-stream.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay_ms: Option<u64>,
}

/// A scripted tool call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptedCall {
    /// Tool name.
    pub name: String,
    /// Arguments object.
    #[serde(default = "empty_object")]
    pub arguments: Value,
}

fn empty_object() -> Value {
    Value::Object(Default::default())
}

/// A scripted failure.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptedError {
    /// Transient (retried by the session) or fatal.
    pub transient: bool,
    /// The error message.
    pub message: String,
}

#[derive(Debug, Default)]
struct State {
    next: usize,
    requests: Vec<TurnRequest>,
}

/// Plays back scripted turns in order, one per [`ChatModel::turn`] call, and
/// keeps every request it was sent so tests can assert on them.
#[derive(Debug, Clone)]
pub struct ScriptedModel {
    name: String,
    turns: Arc<Vec<ScriptedTurn>>,
    state: Arc<Mutex<State>>,
}

impl ScriptedModel {
    /// A model playing `turns`.
    pub fn new(turns: Vec<ScriptedTurn>) -> Self {
        Self::named("scripted", turns)
    }

    /// A model playing `turns`, reporting `name` as its model name.
    pub fn named(name: impl Into<String>, turns: Vec<ScriptedTurn>) -> Self {
        Self {
            name: name.into(),
            turns: Arc::new(turns),
            state: Arc::default(),
        }
    }

    /// Parse a script from JSON text (an array of turns).
    pub fn from_json(name: impl Into<String>, json: &str) -> Result<Self, ProviderError> {
        let turns: Vec<ScriptedTurn> = serde_json::from_str(json).map_err(|e| ProviderError::Config {
            message: format!(
                "invalid script: {e} (expected an array of {{\"reasoning\"?, \"text\"?, \"calls\"?, \"error\"?}})"
            ),
        })?;
        Ok(Self::named(name, turns))
    }

    /// Load a script from a JSON file.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self, ProviderError> {
        let path = path.as_ref();
        let json = std::fs::read_to_string(path).map_err(|e| ProviderError::Config {
            message: format!("cannot read script {}: {e}", path.display()),
        })?;
        Self::from_json(path.display().to_string(), &json).map_err(|e| match e {
            ProviderError::Config { message } => ProviderError::Config {
                message: format!("{}: {message}", path.display()),
            },
            other => other,
        })
    }

    /// Every request received so far, in order.
    pub fn requests(&self) -> Vec<TurnRequest> {
        self.lock().requests.clone()
    }

    /// How many turns have been played (including failed ones).
    pub fn turns_played(&self) -> usize {
        self.lock().next
    }

    /// How many scripted turns remain.
    pub fn remaining(&self) -> usize {
        self.turns.len().saturating_sub(self.turns_played())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic elsewhere while holding the lock leaves the data consistent
        // (plain pushes and increments), so recover rather than propagate.
        crate::sync::lock(&self.state)
    }
}

impl ChatModel for ScriptedModel {
    fn info(&self) -> ModelInfo {
        // A script answers what it was written to, whatever the schema: a
        // typed answer is checked like any prompted one.
        ModelInfo::new("script", self.name.clone(), ModelLocation::Local)
            .output_mode(crate::typed::OutputMode::Prompted)
    }

    fn turn(&self, request: TurnRequest, cancel: CancellationToken) -> TurnStream {
        let index = {
            let mut state = self.lock();
            state.requests.push(request);
            let index = state.next;
            state.next += 1;
            index
        };
        let turn = self.turns.get(index).cloned();
        let total = self.turns.len();
        Box::pin(async_stream::stream! {
            let Some(turn) = turn else {
                yield Err(ProviderError::Other {
                    message: format!(
                        "script exhausted: it has {total} turn(s) and turn {} was requested",
                        index + 1
                    ),
                });
                return;
            };
            if let Some(err) = turn.error {
                yield Err(if err.transient {
                    ProviderError::transient(err.message)
                } else {
                    ProviderError::Other { message: err.message }
                });
                return;
            }
            let delay = Duration::from_millis(turn.delay_ms.unwrap_or(0));
            let mut events = Vec::new();
            if let Some(r) = turn.reasoning {
                events.extend(words(&r).map(|t| TurnEvent::ReasoningDelta { text: t.to_string() }));
            }
            if let Some(t) = turn.text {
                events.extend(words(&t).map(|t| TurnEvent::TextDelta { text: t.to_string() }));
            }
            let has_calls = !turn.calls.is_empty();
            for (i, call) in turn.calls.into_iter().enumerate() {
                let call = ToolCall {
                    id: format!("call_{}_{}", index + 1, i + 1),
                    name: call.name,
                    arguments: call.arguments,
                };
                // Like a provider that sends calls whole: one delta first.
                events.push(crate::model::whole_call_delta(u32::try_from(i).unwrap_or(u32::MAX), &call));
                events.push(TurnEvent::ToolCall(call));
            }
            if let Some(usage) = turn.usage {
                events.push(TurnEvent::Usage(usage));
            }
            events.push(TurnEvent::End {
                stop: if has_calls { StopReason::ToolCalls } else { StopReason::EndTurn },
            });
            for event in events {
                if !delay.is_zero() {
                    tokio::select! {
                        _ = cancel.cancelled() => {}
                        _ = tokio::time::sleep(delay) => {}
                    }
                }
                if cancel.is_cancelled() {
                    yield Ok(TurnEvent::End { stop: StopReason::Cancelled });
                    return;
                }
                yield Ok(event);
            }
        })
    }
}

/// Split text into word-sized deltas that concatenate back to the original.
fn words(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let start = rest.len() - rest.trim_start().len();
        let end = rest[start..]
            .find(char::is_whitespace)
            .map_or(rest.len(), |i| start + i);
        let (word, tail) = rest.split_at(end);
        rest = tail;
        Some(word)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Message, collect_turn};

    #[test]
    fn words_concatenate_back() {
        for s in ["", "a", " a  b\nc ", "héllo wörld", "  "] {
            assert_eq!(words(s).collect::<String>(), s);
        }
    }

    #[tokio::test]
    async fn plays_turns_then_fails_clearly() {
        let model = ScriptedModel::from_json(
            "t",
            r#"[{"reasoning":"think","text":"hello there","calls":[{"name":"ls","arguments":{"path":"."}}],
                "usage":{"prompt_tokens":10,"completion_tokens":3}},
               {"error":{"transient":true,"message":"busy"}}]"#,
        )
        .unwrap();
        let req = TurnRequest {
            messages: vec![Message::user("hi")].into(),
            ..Default::default()
        };
        let turn = collect_turn(model.turn(req.clone(), CancellationToken::new()))
            .await
            .unwrap();
        assert_eq!(turn.text(), "hello there");
        assert_eq!(turn.tool_calls()[0].name, "ls");
        assert_eq!(turn.tool_calls()[0].id, "call_1_1");
        assert_eq!(turn.stop, Some(StopReason::ToolCalls));
        assert_eq!(turn.usage, Some(Usage::new(10, 3)));
        let err = collect_turn(model.turn(req.clone(), CancellationToken::new()))
            .await
            .unwrap_err();
        assert!(err.is_transient());
        let err = collect_turn(model.turn(req, CancellationToken::new()))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("script exhausted"), "{err}");
        assert_eq!(model.requests().len(), 3);
    }

    #[test]
    fn bad_script_names_the_problem() {
        let err = ScriptedModel::from_json("t", r#"[{"txt":"x"}]"#).unwrap_err();
        assert!(err.to_string().contains("unknown field `txt`"), "{err}");
        let err = ScriptedModel::from_file("/nonexistent/script.json").unwrap_err();
        assert!(
            err.to_string().contains("/nonexistent/script.json"),
            "{err}"
        );
    }

    #[tokio::test]
    async fn cancel_stops_mid_stream() {
        let model = ScriptedModel::new(vec![ScriptedTurn {
            text: Some("one two three four five".into()),
            delay_ms: Some(50),
            ..Default::default()
        }]);
        let cancel = CancellationToken::new();
        let mut stream = model.turn(TurnRequest::default(), cancel.clone());
        use futures::StreamExt as _;
        let first = stream.next().await.unwrap().unwrap();
        assert_eq!(first, TurnEvent::TextDelta { text: "one".into() });
        cancel.cancel();
        let next = stream.next().await.unwrap().unwrap();
        assert_eq!(
            next,
            TurnEvent::End {
                stop: StopReason::Cancelled
            }
        );
        assert!(stream.next().await.is_none());
    }
}
