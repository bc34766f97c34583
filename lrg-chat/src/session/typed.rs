//! Typed answers: a message whose final answer must match a JSON Schema
//! ([`ChatSession::send_typed`], [`ChatSession::send_with_schema`]).
//!
//! The message runs like any other — tools first, as many model turns as it
//! takes — with the schema on every request ([`TurnRequest::output`]), so
//! each backend enforces it the strongest way it can
//! ([`lrg_providers::typed`]). A model that can only be asked in words
//! ([`OutputMode::Prompted`]) gets the schema in its system prompt, after
//! the app's own.
//!
//! The answer that calls no tool is checked before it enters the history
//! ([`OutputSchema::check`]: extracted, validated against the caller's own
//! schema, because servers lie). One that does not match is sent back with
//! its problems in words, in a repair turn on the same model: the request's
//! messages, the invalid answer, and a user message saying what is wrong,
//! without tools (a repair never runs one; calls it makes anyway are
//! dropped). Those two messages are for the repair request alone, never the
//! history. Each failed attempt is a retrying `warning` (the live answer
//! restarts). After [`SessionConfig::typed_repairs`] repairs (not counted in
//! [`SessionConfig::max_steps`]) the last answer is kept as the model gave
//! it, an `error` of kind `invalid_answer` follows, and the message ends
//! [`TurnOutcome::Invalid`].
//!
//! [`SessionConfig::typed_repairs`]: super::SessionConfig::typed_repairs
//! [`SessionConfig::max_steps`]: super::SessionConfig::max_steps

use std::sync::Arc;

use lrg_providers::typed::{OutputMode, OutputSchema, repair_prompt};
use lrg_providers::{
    AssistantTurn, ChatModel, GenerationSettings, Message, ModelInfo, Part, ProviderError,
    TurnRequest,
};
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::run::{failed, keep_turn, record_usage, stream_turn};
use super::{ChatSession, SessionError, Shared, TurnHandle, TurnOutcome, UserInput};
use crate::context::Budget;
use crate::events::{ErrorKind, Event};

/// Why a typed message has no typed answer.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum TypedError {
    /// The answer never matched the schema within the repair budget
    /// ([`super::SessionConfig::typed_repairs`]). The last answer is in the
    /// history as the model gave it.
    #[error("the answer does not match its schema: {}", errors.join("; "))]
    Invalid {
        /// The last answer's text.
        last_text: String,
        /// What is wrong with it, one line per problem.
        errors: Vec<String>,
    },
    /// The model cannot give an answer in this schema at all (a local
    /// model's grammar cannot hold a recursive schema, say): said before
    /// anything was sent to it, or by the provider refusing the request.
    #[error("the model cannot give this typed answer: {reason}")]
    Unsupported {
        /// Why, in words.
        reason: String,
    },
    /// The person stopped the message.
    #[error("the message was stopped")]
    Stopped,
    /// A fatal error ended the message (also sent as an `error` event).
    #[error("the message failed: {error}")]
    Failed {
        /// What went wrong.
        error: ProviderError,
    },
    /// [`super::SessionConfig::max_steps`] model turns passed, tools
    /// calling tools, without a final answer.
    #[error("the model used all its turns without a final answer")]
    StepsExhausted,
    /// A `user_prompt_submit` hook blocked the message.
    #[error("a hook blocked the message: {reason}")]
    Blocked {
        /// The hook's reason.
        reason: String,
    },
    /// The answer matched the schema, yet does not deserialize into the
    /// type asked for: the schema says less than the type does (a
    /// hand-written `JsonSchema`, a `deserialize_with`). Rare, since the
    /// schema comes from the type.
    #[error("the answer matches its schema but does not deserialize into the type: {reason}")]
    Deserialize {
        /// The validated answer.
        json: Value,
        /// serde's complaint.
        reason: String,
    },
}

impl ChatSession {
    /// Send a message whose final answer is a `T`: the schema comes from
    /// `T`'s [`JsonSchema`], and the validated answer is deserialized into
    /// it. See [`send_with_schema`](Self::send_with_schema) for how the
    /// answer is obtained and repaired.
    ///
    /// # Errors
    ///
    /// As [`send`](Self::send); [`SessionError::Schema`] when `T`'s schema
    /// cannot be used (refused before anything is sent or recorded).
    pub fn send_typed<T: JsonSchema + DeserializeOwned>(
        &self,
        input: impl Into<UserInput>,
    ) -> Result<TurnHandle<Result<T, TypedError>>, SessionError> {
        let schema = OutputSchema::of::<T>()?;
        Ok(self.send_output(input.into(), schema)?.map(into_typed::<T>))
    }

    /// Send a message whose final answer must match the JSON Schema
    /// `schema`; the validated answer comes back as JSON.
    ///
    /// The message runs like any other (tools first, as many model turns as
    /// it takes) with the schema on every request, so each backend enforces
    /// it the strongest way it can (its
    /// [`ModelInfo::output_mode`](lrg_providers::ModelInfo::output_mode)); a
    /// model that can only be asked in words gets the schema in its system
    /// prompt, after the app's own. The answer that calls no tool is checked
    /// before it is kept: extracted from the text (bare, in a fenced block,
    /// or the first JSON object in it) and validated against `schema`
    /// itself. One that does not match is sent back to the same model with
    /// its problems in words, without tools, up to
    /// [`SessionConfig::typed_repairs`](super::SessionConfig::typed_repairs)
    /// times (each a retrying `warning` event; not counted in `max_steps`);
    /// the repair messages are never kept in the history. Then the last
    /// answer is kept as given, an `error` of kind `invalid_answer` follows,
    /// and the handle gives [`TypedError::Invalid`].
    ///
    /// # Errors
    ///
    /// As [`send`](Self::send); [`SessionError::Schema`] when `schema` is
    /// not an object, too large, or not a valid JSON Schema (refused before
    /// anything is sent or recorded).
    pub fn send_with_schema(
        &self,
        input: impl Into<UserInput>,
        schema: Value,
    ) -> Result<TurnHandle<Result<Value, TypedError>>, SessionError> {
        self.send_with_output(input, OutputSchema::new(schema)?)
    }

    /// [`send_with_schema`](Self::send_with_schema) with a schema already
    /// checked (built once, sent with many messages).
    ///
    /// # Errors
    ///
    /// As [`send`](Self::send).
    pub fn send_with_output(
        &self,
        input: impl Into<UserInput>,
        schema: OutputSchema,
    ) -> Result<TurnHandle<Result<Value, TypedError>>, SessionError> {
        Ok(self.send_output(input.into(), schema)?.map(into_value))
    }

    /// A typed message, its handle giving the plain [`TurnOutcome`] (whose
    /// `Completed` carries the `json`): for front ends that treat a typed
    /// message like any other (`lrg run --output-schema`).
    ///
    /// # Errors
    ///
    /// As [`send`](Self::send).
    pub fn send_output(
        &self,
        input: impl Into<UserInput>,
        schema: OutputSchema,
    ) -> Result<TurnHandle, SessionError> {
        self.send_message(input.into(), GenerationSettings::default(), Some(schema))
    }
}

/// What a typed message's outcome gives as JSON.
fn into_value(outcome: TurnOutcome) -> Result<Value, TypedError> {
    match outcome {
        TurnOutcome::Completed {
            json: Some(json), ..
        } => Ok(json),
        // Not from a typed message's loop, which always checks; said as
        // what it is should it happen.
        TurnOutcome::Completed { text, json: None } => Err(TypedError::Invalid {
            last_text: text,
            errors: vec!["the answer was not checked against its schema".to_owned()],
        }),
        TurnOutcome::Invalid { text, errors } => Err(TypedError::Invalid {
            last_text: text,
            errors,
        }),
        TurnOutcome::Stopped => Err(TypedError::Stopped),
        TurnOutcome::Failed {
            error: ProviderError::Unsupported { message },
        } => Err(TypedError::Unsupported { reason: message }),
        TurnOutcome::Failed { error } => Err(TypedError::Failed { error }),
        TurnOutcome::StepsExhausted => Err(TypedError::StepsExhausted),
        TurnOutcome::OverBudget { reason } => Err(TypedError::Failed {
            error: ProviderError::Other { message: reason },
        }),
        TurnOutcome::Blocked { reason } => Err(TypedError::Blocked { reason }),
    }
}

/// What a typed message's outcome gives as a `T`.
fn into_typed<T: DeserializeOwned>(outcome: TurnOutcome) -> Result<T, TypedError> {
    let json = into_value(outcome)?;
    T::deserialize(&json).map_err(|e| TypedError::Deserialize {
        reason: e.to_string(),
        json,
    })
}

/// Whether `info`'s model can be asked for `schema` at all: a grammar must
/// be able to hold it. Checked before each request is sent.
pub(super) fn supported(info: &ModelInfo, schema: &OutputSchema) -> Result<(), ProviderError> {
    match info.output_mode {
        OutputMode::Grammar => {
            schema
                .grammar()
                .map(drop)
                .map_err(|why| ProviderError::Unsupported {
                    message: format!(
                        "{} constrains its answers with a grammar, which cannot hold this answer \
                     schema: {why}",
                        info.id()
                    ),
                })
        }
        _ => Ok(()),
    }
}

/// The system prompt of a request: the app's, then the schema in words for
/// a model that can only be asked that way.
pub(super) fn system_prompt(
    app: Option<String>,
    info: &ModelInfo,
    output: Option<&OutputSchema>,
) -> Option<String> {
    match output {
        Some(schema) if info.output_mode == OutputMode::Prompted => {
            let instructions = schema.instructions();
            Some(match app {
                Some(app) if !app.trim().is_empty() => format!("{app}\n\n{instructions}"),
                _ => instructions,
            })
        }
        _ => app,
    }
}

/// The model turn whose answer is being checked: what a repair repeats.
pub(super) struct Attempt {
    /// The model that answered; repairs go to it.
    pub(super) model: Arc<dyn ChatModel>,
    /// The request it answered.
    pub(super) request: TurnRequest,
    /// The budget the request was fitted to.
    pub(super) budget: Budget,
}

/// Check `turn`, a typed message's answer that calls no tool, repairing it
/// while the budget lasts; keep the answer and say how the message ended.
pub(super) async fn final_answer(
    shared: &Shared,
    last: Attempt,
    mut turn: AssistantTurn,
    schema: &OutputSchema,
    cancel: &CancellationToken,
) -> TurnOutcome {
    let repairs = shared.config.typed_repairs;
    let attempts = repairs.saturating_add(1);
    let mut attempt = 1;
    loop {
        let text = turn.text();
        let errors = match schema.check(&text) {
            Ok(json) => {
                // Gone before the push: the request may share the history.
                drop(last);
                let text = keep_turn(shared, turn, Some(json.clone())).await;
                return TurnOutcome::Completed {
                    text,
                    json: Some(json),
                };
            }
            Err(problems) => problems.errors,
        };
        if attempt >= attempts {
            drop(last);
            keep_turn(shared, turn, None).await;
            shared.publish(Event::Error {
                message: format!(
                    "The answer does not match its JSON Schema after {} (the most allowed): {}",
                    plural(repairs, "repair"),
                    errors.join("; ")
                ),
                kind: ErrorKind::InvalidAnswer,
            });
            return TurnOutcome::Invalid { text, errors };
        }
        if cancel.is_cancelled() {
            return TurnOutcome::Stopped;
        }
        shared.publish(Event::Warning {
            message: format!(
                "The answer does not match its JSON Schema (attempt {attempt} of {attempts}): {}. \
                 Asking the model to correct it.",
                errors.join("; ")
            ),
            retrying: true,
        });
        let request = repair_request(&last.request, turn, &errors);
        turn = match stream_turn(shared, last.model.as_ref(), &request, cancel, true).await {
            Ok(turn) => turn,
            Err(failure) => return failed(shared, failure),
        };
        if let Some(usage) = turn.usage {
            record_usage(
                shared,
                &last.model.info(),
                usage,
                &request.messages,
                &last.budget,
            );
        }
        // A repair is offered no tool, and runs none it asks for anyway.
        turn.parts.retain(|p| !matches!(p, Part::ToolCall(_)));
        attempt += 1;
    }
}

/// The request that asks for `answer` again, corrected: `request`'s
/// messages, the answer, and what is wrong with it; no tools.
fn repair_request(request: &TurnRequest, answer: AssistantTurn, errors: &[String]) -> TurnRequest {
    let mut repair = request.clone();
    repair.tools = Arc::from([]);
    let messages = repair.messages.make_mut();
    messages.push(answer.into_message());
    messages.push(Message::user(repair_prompt(errors)));
    repair
}

fn plural(n: usize, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}
