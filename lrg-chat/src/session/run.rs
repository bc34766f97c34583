//! The loop for one user message: model turns, each followed by its tool
//! calls, until the model answers without calling a tool. A typed
//! message's answer is then checked, and repaired, in [`super::typed`].

use std::collections::HashSet;

use futures::StreamExt as _;
use lrg_providers::typed::OutputSchema;
use lrg_providers::{
    AssistantTurn, ChatModel, GenerationSettings, Message, ProviderError, ToolCall, TurnEvent,
    TurnRequest,
};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::{Shared, TurnOutcome, calls, typed};
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
    output: Option<&OutputSchema>,
    cancel: &CancellationToken,
) -> TurnOutcome {
    // Identical calls already made for this message (tool name + canonical
    // arguments), whatever became of them.
    let mut made: HashSet<String> = HashSet::new();
    super::offer::start_message(shared);
    for step in 0..shared.config.max_steps {
        if cancel.is_cancelled() {
            return TurnOutcome::Stopped;
        }
        let model = match resolve(shared, cancel).await {
            Ok(model) => model,
            Err(failure) => return failed(shared, failure),
        };
        let info = model.info();
        if let Some(schema) = output
            && let Err(error) = typed::supported(&info, schema)
        {
            return failed(shared, TurnFailure::Failed(error));
        }
        // With sub-agents on, their tools are among these (see
        // `crate::sub_agents::tools`).
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
        let settings = shared.permissions.settings();
        // Usually every tool is offered: then the kept list itself is, and
        // no schema is copied (per turn, nor per attempt).
        let offered: std::sync::Arc<[_]> = if specs.iter().all(|s| is_offered(&settings, &s.name)) {
            specs.clone()
        } else {
            specs
                .iter()
                .filter(|s| is_offered(&settings, &s.name))
                .cloned()
                .collect()
        };
        // Many tools: a few of them and `search_tools` (crate::tools::search).
        let offered = super::offer::narrow(shared, &mut specs, offered, &info, step == 0);
        let model_key = info.id();
        // Fitted under the lock: only what changes gets copied; a history
        // that fits whole is shared with the request.
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
        let system = typed::system_prompt((shared.system_prompt)(&info, &offered), &info, output);
        let request = TurnRequest::new(context::shown_to(&info, fitted.messages))
            .system_opt(system)
            .tools(offered)
            .settings(settings)
            .output(output.cloned());
        // Checked from the spending so far and this request's estimated
        // input: a limit it would pass ends the message here, every call
        // made so far answered.
        let history_tokens = fitted
            .estimated_tokens
            .saturating_sub(budget.answer_reserve.saturating_add(budget.overhead));
        if let Err(reason) = super::budget::check(shared, &info, &request, history_tokens) {
            return over_budget(shared, reason);
        }
        let (turn, span) = stream_turn_traced(shared, model.as_ref(), &request, cancel, true).await;
        let turn = match turn {
            Ok(turn) => turn,
            Err(failure) => return failed(shared, failure),
        };
        // The calls' spans are children of this turn's, which ends here.
        let asked_by = crate::otel::TurnContext::of(&span);
        drop(span);
        if let Some(usage) = turn.usage {
            record_usage(shared, &info, usage, &request.messages, &budget);
        }
        let calls: Vec<ToolCall> = turn.tool_calls().into_iter().cloned().collect();
        if let Some(schema) = output
            && calls.is_empty()
        {
            // Checked (and repaired, on the same model) before it is kept.
            let last = typed::Attempt {
                model,
                request,
                budget,
            };
            return typed::final_answer(shared, last, turn, schema, cancel).await;
        }
        // Never keep a model past its turn: the app may swap it meanwhile.
        drop(model);
        // The request may share the history (it did when everything fit):
        // gone before the pushes below, they append without copying it.
        drop(request);
        let text = keep_turn(shared, turn, None).await;
        if calls.is_empty() {
            return TurnOutcome::Completed { text, json: None };
        }
        let mut results = Vec::with_capacity(calls.len());
        for call in &calls {
            results
                .push(calls::handle_call(shared, call, &specs, &mut made, &asked_by, cancel).await);
        }
        // A tool that ends the turn, having run: its result is the answer.
        let ended = calls
            .iter()
            .zip(&results)
            .find(|(call, result)| !result.is_error && shared.tools.policy(&call.name).ends_turn)
            .map(|(_, result)| result.text_content());
        shared.lock().history.push(Message::tool_results(results));
        super::persist::save(shared).await;
        if cancel.is_cancelled() {
            return TurnOutcome::Stopped;
        }
        if let Some(text) = ended {
            return TurnOutcome::Completed { text, json: None };
        }
    }
    let steps = shared.config.max_steps;
    let turns = if steps == 1 { "turn" } else { "turns" };
    shared.publish(Event::Error {
        message: format!(
            "Gave up after {steps} model {turns} without a final answer (the limit per message); \
             send another message to let it continue."
        ),
        kind: ErrorKind::MaxSteps,
    });
    TurnOutcome::StepsExhausted
}

/// Push a finished model turn into the history, keep it, then show it (with
/// `json`, a typed answer's validated value); its text.
pub(super) async fn keep_turn(shared: &Shared, turn: AssistantTurn, json: Option<Value>) -> String {
    let reasoning = turn
        .parts
        .iter()
        .filter_map(|p| match p {
            lrg_providers::Part::Reasoning { text } => Some(text.as_str()),
            _ => None,
        })
        .collect::<String>();
    let text = turn.text();
    shared.lock().history.push(turn.into_message());
    // Kept before it is shown: what a viewer saw, a resume has.
    super::persist::save(shared).await;
    shared.publish(Event::AssistantTurn {
        reasoning,
        text: text.clone(),
        json,
        stopped: false,
    });
    text
}

pub(super) fn failed(shared: &Shared, failure: TurnFailure) -> TurnOutcome {
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

/// The message ends before a model turn that would pass a budget limit.
fn over_budget(shared: &Shared, reason: String) -> TurnOutcome {
    shared.publish(Event::Error {
        message: reason.clone(),
        kind: ErrorKind::Budget,
    });
    TurnOutcome::OverBudget { reason }
}

pub(super) fn record_usage(
    shared: &Shared,
    info: &lrg_providers::ModelInfo,
    usage: lrg_providers::Usage,
    sent: &[Message],
    budget: &Budget,
) {
    let cost = super::budget::cost(shared, info, &usage);
    let mut state = shared.lock();
    state.usage += usage;
    super::budget::record(&mut state, usage, cost);
    state
        .overhead
        .entry(info.id())
        .or_insert_with(|| context::learn_overhead(usage.prompt_tokens, sent, budget.image_tokens));
    let (message_total, chat_total) = super::budget::totals(&state);
    shared.publish(Event::Usage {
        usage,
        context_window: budget.window,
        cost,
        message_total: Some(message_total),
        chat_total: Some(chat_total),
    });
}

/// Resolve the model for this turn, retrying transient failures.
pub(super) async fn resolve(
    shared: &Shared,
    cancel: &CancellationToken,
) -> Result<std::sync::Arc<dyn ChatModel>, TurnFailure> {
    let mut attempt = 0;
    let started = tokio::time::Instant::now();
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
                retry_or_fail(shared, e, attempt, started, cancel).await?;
            }
        }
    }
}

/// Wait before retry `attempt` when `error` is transient, retries are left
/// and the retry would start within the policy's deadline (counted from
/// `started`, the first attempt); otherwise the failure to end the turn with.
async fn retry_or_fail(
    shared: &Shared,
    error: ProviderError,
    attempt: u32,
    started: tokio::time::Instant,
    cancel: &CancellationToken,
) -> Result<(), TurnFailure> {
    let policy = &shared.config.retry;
    if !error.is_transient() || !policy.allows(attempt) {
        return Err(TurnFailure::Failed(error));
    }
    let delay = policy.delay(attempt, error.retry_after());
    if !policy.within_deadline(started.elapsed(), delay) {
        return Err(TurnFailure::Failed(past_deadline(error, started, policy)));
    }
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
    stream_turn_traced(shared, model, request, cancel, live)
        .await
        .0
}

/// [`stream_turn`] in its `chat {model}` span ([`crate::otel`]), which is
/// handed back with what it told (usage, finish reason, error type) for
/// the calls the turn asked for.
pub(super) async fn stream_turn_traced(
    shared: &Shared,
    model: &dyn ChatModel,
    request: &TurnRequest,
    cancel: &CancellationToken,
    live: bool,
) -> (Result<AssistantTurn, TurnFailure>, tracing::Span) {
    use tracing::Instrument as _;
    let info = model.info();
    let conversation = shared.persister.as_ref().map(|p| p.id().as_str());
    let span = crate::otel::chat_span(&info, &request.settings, conversation);
    let started = std::time::Instant::now();
    let result = turn_attempts(shared, model, request, cancel, live, &span)
        .instrument(span.clone())
        .await;
    let error = match &result {
        Ok(turn) => {
            crate::otel::record_answer(&span, turn.usage.as_ref(), turn.stop.as_ref());
            None
        }
        Err(TurnFailure::Stopped) => Some("cancelled"),
        Err(TurnFailure::Failed(e) | TurnFailure::LocalOnly(e)) => Some(e.kind().as_str()),
    };
    if let Some(kind) = error {
        crate::otel::record_error(&span, kind);
    }
    let usage = result.as_ref().ok().and_then(|t| t.usage.as_ref());
    crate::otel::record_turn(&info, usage, started.elapsed(), error);
    (result, span)
}

async fn turn_attempts(
    shared: &Shared,
    model: &dyn ChatModel,
    request: &TurnRequest,
    cancel: &CancellationToken,
    live: bool,
    span: &tracing::Span,
) -> Result<AssistantTurn, TurnFailure> {
    // One stop future for the whole turn, polled only while the stream
    // waits; an event that is there already costs one look at the token.
    // (A future per event registered and unregistered itself with the
    // token every time, a cost per delta.)
    let stopped = cancel.cancelled();
    tokio::pin!(stopped);
    let mut attempt = 0;
    let started = tokio::time::Instant::now();
    let cap = shared.config.max_answer_bytes;
    loop {
        let mut stream = model.turn(request.clone(), cancel.child_token());
        let mut turn = AssistantTurn::default();
        let mut size = AnswerSize::default();
        let error = loop {
            let next = tokio::select! {
                biased;
                next = stream.next() => next,
                _ = &mut stopped => return Err(stopped_midway(shared, turn, live)),
            };
            // A stop drops the stream at once, even one that never waits.
            if cancel.is_cancelled() {
                return Err(stopped_midway(shared, turn, live));
            }
            if let Some(Ok(event)) = &next
                && size.add(event) > cap
            {
                // Dropped like a stopped turn: nothing of it is kept.
                return Err(TurnFailure::Failed(too_large(size.total(), cap)));
            }
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
                    // Deltas are copied for the live event only when someone
                    // listens: the turn keeps the text itself.
                    let live = live && shared.events.subscriber_count() > 0;
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
                        TurnEvent::Loading { progress } if live => {
                            shared.events.publish_live(Event::ModelLoading {
                                model: model.info().id(),
                                progress: *progress,
                            })
                        }
                        _ => {}
                    }
                    turn.push(event);
                }
                Some(Err(e)) => break e,
            }
        };
        attempt += 1;
        let kind = error.kind().as_str();
        retry_or_fail(shared, error, attempt, started, cancel).await?;
        crate::otel::retry_event(span, attempt, kind);
    }
}

/// A stop in the middle of a streamed turn: what the person saw of it
/// (reasoning and text, never a half-written call) is handed to the
/// message's end, which keeps it with the stop note.
fn stopped_midway(shared: &Shared, turn: AssistantTurn, live: bool) -> TurnFailure {
    if !live {
        return TurnFailure::Stopped;
    }
    let text = turn.text();
    let reasoning = turn
        .parts
        .iter()
        .filter_map(|p| match p {
            lrg_providers::Part::Reasoning { text } => Some(text.as_str()),
            _ => None,
        })
        .collect::<String>();
    if !text.is_empty() || !reasoning.is_empty() {
        shared.lock().stopped_partial = Some((reasoning, text));
    }
    TurnFailure::Stopped
}

/// `error`, saying that the retry deadline stopped the retries.
fn past_deadline(
    error: ProviderError,
    started: tokio::time::Instant,
    policy: &lrg_providers::RetryPolicy,
) -> ProviderError {
    let deadline = policy.deadline.unwrap_or_default().as_secs_f64();
    let note = format!(
        "gave up after {:.1} s of tries: another would start past the retry deadline of {deadline} s",
        started.elapsed().as_secs_f64()
    );
    match error {
        ProviderError::Transient {
            message,
            retry_after,
        } => ProviderError::Transient {
            message: format!("{message}; {note}"),
            retry_after,
        },
        other => other,
    }
}

/// The error a turn ends with when its answer grows past `cap` bytes.
fn too_large(bytes: u64, cap: usize) -> ProviderError {
    ProviderError::Other {
        message: format!(
            "the model's answer grew past the {} cap for one answer: it was cut off at {} \
             and dropped",
            crate::tools::byte_size(cap as u64),
            crate::tools::byte_size(bytes)
        ),
    }
}

/// Bytes of one answer so far: text, reasoning, and tool-call arguments
/// (streamed fragments or whole calls, whichever is more).
#[derive(Default)]
struct AnswerSize {
    prose: u64,
    fragments: u64,
    calls: u64,
}

impl AnswerSize {
    /// Count `event`; the total so far.
    fn add(&mut self, event: &TurnEvent) -> usize {
        match event {
            TurnEvent::TextDelta { text } | TurnEvent::ReasoningDelta { text } => {
                self.prose += text.len() as u64;
            }
            TurnEvent::ToolCallDelta {
                arguments_fragment, ..
            } => self.fragments += arguments_fragment.len() as u64,
            TurnEvent::ToolCall(call) => {
                self.calls += call.arguments.to_string().len() as u64;
            }
            _ => {}
        }
        usize::try_from(self.total()).unwrap_or(usize::MAX)
    }

    fn total(&self) -> u64 {
        self.prose + self.fragments.max(self.calls)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use lrg_providers::{
        ChatModel, Message, ModelInfo, Part, ScriptedModel, ScriptedTurn, ToolSpec, TurnRequest,
        TurnStream,
    };
    use serde_json::json;
    use tokio_util::sync::CancellationToken;

    use crate::testing::FixedTools;
    use crate::{ChatSession, FixedModel};

    /// Where the first message's text lives: a copy of the history (by the
    /// fit, or by a push while a request still shared it) moves it.
    fn first_text(messages: &[Message]) -> usize {
        match messages.first().and_then(|m| m.parts.first()) {
            Some(Part::Text { text }) => text.as_ptr() as usize,
            _ => 0,
        }
    }

    /// Notes [`first_text`] and where the tools live for each request, and
    /// keeps none of them (a `ScriptedModel` keeps every request, so the
    /// history would stay shared).
    struct Watching {
        answers: ScriptedModel,
        seen: Arc<Mutex<Vec<usize>>>,
        tools: Arc<Mutex<Vec<usize>>>,
    }

    impl ChatModel for Watching {
        fn info(&self) -> ModelInfo {
            self.answers.info()
        }

        fn turn(&self, request: TurnRequest, cancel: CancellationToken) -> TurnStream {
            self.seen
                .lock()
                .unwrap()
                .push(first_text(&request.messages));
            let tools = request.tools.as_ptr() as usize;
            self.tools.lock().unwrap().push(tools);
            self.answers.turn(TurnRequest::default(), cancel)
        }
    }

    #[tokio::test]
    async fn a_history_that_fits_and_the_kept_tools_are_sent_without_copies() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let tools = Arc::new(Mutex::new(Vec::new()));
        let kept: Arc<[ToolSpec]> = Arc::from(vec![ToolSpec {
            name: "look".into(),
            description: "Looks.".into(),
            input_schema: json!({"type": "object", "properties": {"at": {"type": "string"}}}),
            annotations: Default::default(),
            output_schema: None,
        }]);
        let answers = ScriptedModel::new(
            (0..3)
                .map(|n| ScriptedTurn {
                    text: Some(format!("answer {n}")),
                    ..Default::default()
                })
                .collect(),
        );
        let model = Watching {
            answers,
            seen: Arc::clone(&seen),
            tools: Arc::clone(&tools),
        };
        let session = ChatSession::builder(Arc::new(FixedModel::new(model)))
            .tools(Arc::new(FixedTools::new(Arc::clone(&kept))))
            .build();
        let mut original = None;
        for n in 0..3 {
            let handle = session.send(format!("question {n}")).unwrap();
            original.get_or_insert_with(|| first_text(&session.shared.lock().history));
            tokio::time::timeout(Duration::from_secs(10), handle)
                .await
                .unwrap();
        }
        let original = original.unwrap();
        assert_ne!(original, 0);
        assert_eq!(session.history().len(), 6);
        // Every turn was sent the history itself, and it was extended in
        // place: the first message never moved.
        assert_eq!(*seen.lock().unwrap(), vec![original; 3]);
        assert_eq!(first_text(&session.shared.lock().history), original);
        // Every tool was offered: the kept list itself, not a copy.
        assert_eq!(*tools.lock().unwrap(), vec![kept.as_ptr() as usize; 3]);
    }
}
