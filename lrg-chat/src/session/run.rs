//! The loop for one user message: model turns, each followed by its tool
//! calls, until the model answers without calling a tool.

use std::collections::HashSet;

use futures::StreamExt as _;
use lrg_providers::{
    AssistantTurn, ChatModel, GenerationSettings, Message, ProviderError, StopReason, ToolCall,
    TurnEvent, TurnRequest,
};
use tokio_util::sync::CancellationToken;

use super::{Shared, TurnOutcome, calls};
use crate::context::{self, Budget};
use crate::events::{DeltaKind, ErrorKind, Event};
use crate::permissions::is_offered;

/// Why a model turn produced no answer.
pub(super) enum TurnFailure {
    /// The person stopped it.
    Stopped,
    /// A fatal error, or a transient one that outlived its retries.
    Failed(ProviderError),
    /// The session is local only and the model runs in a cloud.
    LocalOnly(ProviderError),
}

pub(super) async fn run_message(
    shared: &Shared,
    generation: &GenerationSettings,
    cancel: &CancellationToken,
) -> TurnOutcome {
    // Identical calls already made for this message (tool name + canonical
    // arguments), whatever became of them.
    let mut made: HashSet<String> = HashSet::new();
    for _ in 0..shared.config.max_steps {
        if cancel.is_cancelled() {
            return TurnOutcome::Stopped;
        }
        let model = match resolve(shared, cancel).await {
            Ok(model) => model,
            Err(failure) => return failed(shared, failure),
        };
        let info = model.info();
        let mut specs = match shared.tools.list_shared().await {
            Ok(specs) => specs,
            Err(e) => {
                shared.publish(Event::Warning {
                    message: e.to_string(),
                    retrying: false,
                });
                std::sync::Arc::from([])
            }
        };
        if shared.sub_agents.is_some() {
            // The kept list is shared: a session with sub-agents adds its own tool to a copy.
            specs = crate::sub_agents::tools::with_own(specs.to_vec()).into();
        }
        let settings = shared.permissions.settings();
        let offered: Vec<_> = specs
            .iter()
            .filter(|s| is_offered(&settings, &s.name))
            .cloned()
            .collect();
        let model_key = info.id();
        // Fitted under the lock: only what is sent gets cloned.
        let (fitted, budget, settings) = {
            let mut state = shared.lock();
            let overhead = state.overhead.get(&model_key).copied();
            let budget = shared.config.context.budget(&info, overhead);
            // The message's own settings over the session's, read at each
            // turn so a change made meanwhile applies from the next one.
            let settings = generation.or(&state.generation_settings);
            let state = &mut *state;
            let sizes =
                state
                    .estimates
                    .update(&state.history, state.generation, budget.image_tokens);
            (
                context::fit_estimated(&state.history, sizes, &budget),
                budget,
                settings,
            )
        };
        if let Err(e) = settings.validate() {
            let error = ProviderError::Config {
                message: format!("invalid generation settings: {e}"),
            };
            return failed(shared, TurnFailure::Failed(error));
        }
        let request = TurnRequest::new(context::shown_to(&info, fitted.messages))
            .system_opt((shared.system_prompt)(&info, &offered))
            .tools(offered)
            .settings(settings);
        let turn = match stream_turn(shared, model.as_ref(), &request, cancel, true).await {
            Ok(turn) => turn,
            Err(failure) => return failed(shared, failure),
        };
        // Never keep a model past its turn: the app may swap it meanwhile.
        drop(model);
        if let Some(usage) = turn.usage {
            record_usage(shared, &model_key, usage, &request.messages, &budget);
        }
        let calls: Vec<ToolCall> = turn.tool_calls().into_iter().cloned().collect();
        let reasoning = turn
            .parts
            .iter()
            .filter_map(|p| match p {
                lrg_providers::Part::Reasoning { text } => Some(text.as_str()),
                _ => None,
            })
            .collect::<String>();
        let text = turn.text();
        {
            let mut state = shared.lock();
            shared.publish(Event::AssistantTurn {
                reasoning,
                text: text.clone(),
            });
            state.history.push(turn.into_message());
        }
        super::persist::save(shared).await;
        if calls.is_empty() {
            return TurnOutcome::Completed { text };
        }
        let mut results = Vec::with_capacity(calls.len());
        for call in &calls {
            results.push(calls::handle_call(shared, call, &specs, &mut made, cancel).await);
        }
        shared.lock().history.push(Message::tool_results(results));
        super::persist::save(shared).await;
        if cancel.is_cancelled() {
            return TurnOutcome::Stopped;
        }
    }
    let steps = shared.config.max_steps;
    shared.publish(Event::Error {
        message: format!(
            "Gave up after {steps} model turns without a final answer (the limit per message); \
             send another message to let it continue."
        ),
        kind: ErrorKind::MaxSteps,
    });
    TurnOutcome::StepsExhausted
}

fn failed(shared: &Shared, failure: TurnFailure) -> TurnOutcome {
    match failure {
        TurnFailure::Stopped => TurnOutcome::Stopped,
        TurnFailure::Failed(error) => {
            shared.publish(Event::Error {
                message: error.to_string(),
                kind: ErrorKind::of(&error),
            });
            TurnOutcome::Failed { error }
        }
        TurnFailure::LocalOnly(error) => {
            shared.publish(Event::Error {
                message: error.to_string(),
                kind: ErrorKind::LocalOnly,
            });
            TurnOutcome::Failed { error }
        }
    }
}

fn record_usage(
    shared: &Shared,
    model_key: &str,
    usage: lrg_providers::Usage,
    sent: &[Message],
    budget: &Budget,
) {
    let mut state = shared.lock();
    state.usage += usage;
    state
        .overhead
        .entry(model_key.to_string())
        .or_insert_with(|| context::learn_overhead(usage.prompt_tokens, sent, budget.image_tokens));
    shared.publish(Event::Usage {
        usage,
        context_window: budget.window,
    });
}

/// Resolve the model for this turn, retrying transient failures.
pub(super) async fn resolve(
    shared: &Shared,
    cancel: &CancellationToken,
) -> Result<std::sync::Arc<dyn ChatModel>, TurnFailure> {
    let mut attempt = 0;
    loop {
        let result = tokio::select! {
            biased;
            _ = cancel.cancelled() => return Err(TurnFailure::Stopped),
            r = shared.models.resolve() => r,
        };
        match result {
            Ok(model) => {
                // Every turn, compaction's too: the lock can be turned on mid-chat.
                super::locality::check(shared, &model.info())?;
                return Ok(model);
            }
            Err(e) => {
                attempt += 1;
                retry_or_fail(shared, e, attempt, cancel).await?;
            }
        }
    }
}

/// Wait before retry `attempt` when `error` is transient and retries are
/// left; otherwise the failure to end the turn with.
async fn retry_or_fail(
    shared: &Shared,
    error: ProviderError,
    attempt: u32,
    cancel: &CancellationToken,
) -> Result<(), TurnFailure> {
    let policy = &shared.config.retry;
    if !error.is_transient() || !policy.allows(attempt) {
        return Err(TurnFailure::Failed(error));
    }
    let delay = policy.delay(attempt, error.retry_after());
    shared.publish(Event::Warning {
        message: format!(
            "The model failed: {error}. Retry {attempt} of {} in {} ms.",
            policy.max_retries,
            delay.as_millis()
        ),
        retrying: true,
    });
    tokio::select! {
        biased;
        _ = cancel.cancelled() => Err(TurnFailure::Stopped),
        _ = tokio::time::sleep(delay) => Ok(()),
    }
}

/// Run one model turn, retrying transient errors; deltas go out live when
/// `live`. A stop drops the stream at once.
pub(super) async fn stream_turn(
    shared: &Shared,
    model: &dyn ChatModel,
    request: &TurnRequest,
    cancel: &CancellationToken,
    live: bool,
) -> Result<AssistantTurn, TurnFailure> {
    let mut attempt = 0;
    loop {
        let mut stream = model.turn(request.clone(), cancel.child_token());
        let mut turn = AssistantTurn::default();
        let error = loop {
            let next = tokio::select! {
                biased;
                _ = cancel.cancelled() => return Err(TurnFailure::Stopped),
                next = stream.next() => next,
            };
            match next {
                None => return Ok(turn),
                // Live only, and moved rather than copied: the whole call
                // follows and is what the turn keeps.
                Some(Ok(TurnEvent::ToolCallDelta {
                    index,
                    id,
                    name,
                    arguments_fragment,
                })) => {
                    if live {
                        shared.events.publish_live(Event::ToolCallDelta {
                            index,
                            call_id: id,
                            tool: name,
                            arguments_fragment,
                        });
                    }
                }
                Some(Ok(event)) => {
                    match &event {
                        TurnEvent::TextDelta { text } if live => {
                            shared.events.publish_live(Event::Delta {
                                kind: DeltaKind::Text,
                                text: text.clone(),
                            })
                        }
                        TurnEvent::ReasoningDelta { text } if live => {
                            shared.events.publish_live(Event::Delta {
                                kind: DeltaKind::Reasoning,
                                text: text.clone(),
                            })
                        }
                        TurnEvent::End {
                            stop: StopReason::Cancelled,
                        } if cancel.is_cancelled() => {
                            return Err(TurnFailure::Stopped);
                        }
                        _ => {}
                    }
                    turn.push(event);
                }
                Some(Err(e)) => break e,
            }
        };
        attempt += 1;
        retry_or_fail(shared, error, attempt, cancel).await?;
    }
}
