//! [`Transcript`]: what a test run did, read from the session's events.

use std::collections::HashMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::expect::{CallExpectation, Expectations, Failure, ReplyExpectation, clip};
use crate::events::{ErrorKind, Event, LogEntry, SkipReason};
use crate::permissions::{Answer, ApprovalReason};

/// An enum's stable snake_case name, as serde writes it.
fn snake_name(value: &impl Serialize) -> String {
    match serde_json::to_value(value) {
        Ok(Value::String(s)) => s,
        Ok(other) => other.to_string(),
        Err(_) => String::new(),
    }
}

/// How a test run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Outcome {
    /// Every message got a final reply.
    Replied,
    /// A model or tool error ended a message.
    Failed,
    /// The run was stopped.
    Stopped,
    /// A message ran out of model turns.
    StepsExhausted,
    /// The run took longer than its timeout and was stopped.
    TimedOut,
}

/// How a tool call ended.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CallResult {
    /// It ran.
    Done {
        /// Whether it succeeded.
        ok: bool,
        /// Its text output (or error message).
        text: String,
    },
    /// It never ran.
    Skipped {
        /// Why.
        reason: SkipReason,
        /// The note a denial carried.
        note: Option<String>,
    },
    /// The run ended before the call got a result.
    Unfinished,
}

/// One tool call the model made.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Call {
    /// The session's id for it.
    pub call_id: String,
    /// The tool.
    pub tool: String,
    /// Its arguments, as the model wrote them.
    pub arguments: Value,
    /// Why an approval was asked for it, when one was.
    pub approval: Option<ApprovalReason>,
    /// The answer the approval got.
    pub answer: Option<Answer>,
    /// How it ended.
    pub result: CallResult,
}

/// An `error` event.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ErrorEvent {
    /// Its machine-readable kind.
    pub kind: ErrorKind,
    /// Its message.
    pub message: String,
}

/// What a replayed run left unchecked: drift, or turns never played.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReplayCheck {
    /// The first request that differed from the recording: the message with
    /// the unified diff.
    pub drift: Option<String>,
    /// Recorded model turns not played.
    pub unplayed: usize,
    /// How many turns the recording holds.
    pub recorded: usize,
}

/// What a test run did: its calls, replies, errors and every event. Check it
/// with [`Expectations::check`] or the `assert_*` helpers.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Transcript {
    /// Every numbered event of the session, in order.
    pub events: Vec<LogEntry>,
    /// Every tool call, in order.
    pub calls: Vec<Call>,
    /// The final reply to each message that got one, in order.
    pub replies: Vec<String>,
    /// Every `error` event.
    pub errors: Vec<ErrorEvent>,
    /// How many model turns finished.
    pub model_turns: usize,
    /// How the run ended.
    pub outcome: Outcome,
    /// What went wrong when it did not reply (an error, the step limit).
    pub outcome_detail: Option<String>,
    /// The replay's own check, when the run replayed a recording.
    pub replay: Option<ReplayCheck>,
}

impl Transcript {
    /// Read a transcript from a session's numbered events and how it ended.
    pub fn from_events(
        events: Vec<LogEntry>,
        replies: Vec<String>,
        outcome: Outcome,
        outcome_detail: Option<String>,
    ) -> Self {
        let mut calls: Vec<Call> = Vec::new();
        let mut index: HashMap<String, usize> = HashMap::new();
        let mut errors = Vec::new();
        let mut model_turns = 0;
        for entry in &events {
            match &entry.event {
                Event::ToolCall {
                    call_id,
                    tool,
                    arguments,
                    ..
                } => {
                    index.insert(call_id.clone(), calls.len());
                    calls.push(Call {
                        call_id: call_id.clone(),
                        tool: tool.clone(),
                        arguments: arguments.clone(),
                        approval: None,
                        answer: None,
                        result: CallResult::Unfinished,
                    });
                }
                Event::ApprovalNeeded {
                    call_id, reason, ..
                } => {
                    if let Some(c) = index.get(call_id).and_then(|&i| calls.get_mut(i)) {
                        c.approval = Some(reason.clone());
                    }
                }
                Event::ApprovalAnswered { call_id, answer } => {
                    if let Some(c) = index.get(call_id).and_then(|&i| calls.get_mut(i)) {
                        c.answer = Some(answer.clone());
                    }
                }
                Event::ToolDone {
                    call_id, ok, text, ..
                } => {
                    if let Some(c) = index.get(call_id).and_then(|&i| calls.get_mut(i)) {
                        c.result = CallResult::Done {
                            ok: *ok,
                            text: text.clone(),
                        };
                    }
                }
                Event::ToolSkipped {
                    call_id,
                    reason,
                    note,
                } => {
                    if let Some(c) = index.get(call_id).and_then(|&i| calls.get_mut(i)) {
                        c.result = CallResult::Skipped {
                            reason: *reason,
                            note: note.clone(),
                        };
                    }
                }
                Event::AssistantTurn { .. } => model_turns += 1,
                Event::Error { message, kind } => errors.push(ErrorEvent {
                    kind: *kind,
                    message: message.clone(),
                }),
                _ => {}
            }
        }
        Self {
            events,
            calls,
            replies,
            errors,
            model_turns,
            outcome,
            outcome_detail,
            replay: None,
        }
    }

    /// The final reply: the last message's, when it got one.
    pub fn reply(&self) -> Option<&str> {
        match self.outcome {
            Outcome::Replied => self.replies.last().map(String::as_str),
            _ => None,
        }
    }

    /// The calls of `tool`, in order.
    pub fn calls_of<'a>(&'a self, tool: &'a str) -> impl Iterator<Item = &'a Call> + 'a {
        self.calls.iter().filter(move |c| c.tool == tool)
    }

    /// Failures every replayed run is held to: no drift, every turn played.
    pub(crate) fn replay_failures(&self) -> Vec<Failure> {
        let Some(replay) = &self.replay else {
            return Vec::new();
        };
        let mut failures = Vec::new();
        if let Some(drift) = &replay.drift {
            failures.push(Failure::new(
                "every request equal to the recorded one",
                drift.clone(),
            ));
        } else if replay.unplayed > 0 {
            failures.push(Failure::new(
                format!("all {} recorded model turn(s) played", replay.recorded),
                format!(
                    "{} turn(s) were not played: the session now stops earlier than when it \
                     was recorded (re-record with --record if that is intended)",
                    replay.unplayed
                ),
            ));
        }
        failures
    }

    /// Every call, one line each, with how it ended.
    pub fn describe_calls(&self) -> String {
        if self.calls.is_empty() {
            return "no tool calls were made".to_string();
        }
        let lines: Vec<String> = self
            .calls
            .iter()
            .map(|c| {
                let end = match &c.result {
                    CallResult::Done { ok: true, text } => format!("done: {}", clip(text, 80)),
                    CallResult::Done { ok: false, text } => format!("failed: {}", clip(text, 80)),
                    CallResult::Skipped { reason, note } => {
                        let reason = snake_name(reason);
                        match note {
                            Some(n) => format!("skipped ({reason}: {n})"),
                            None => format!("skipped ({reason})"),
                        }
                    }
                    CallResult::Unfinished => "no result".to_string(),
                };
                format!(
                    "tool_call {} {} → {end}",
                    c.tool,
                    clip(&c.arguments.to_string(), 200)
                )
            })
            .collect();
        format!("calls made:\n{}", lines.join("\n"))
    }

    /// Each finished model turn's text, one line each.
    pub fn describe_turns(&self) -> String {
        self.events
            .iter()
            .filter_map(|e| match &e.event {
                Event::AssistantTurn { text, .. } if text.is_empty() => {
                    Some("assistant_turn (tool calls only)".to_string())
                }
                Event::AssistantTurn { text, .. } => {
                    Some(format!("assistant_turn {:?}", clip(text, 100)))
                }
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// The error events.
    pub fn describe_errors(&self) -> String {
        self.errors
            .iter()
            .map(|e| format!("error [{}]: {}", snake_name(&e.kind), e.message))
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// The approvals asked, and their answers.
    pub fn describe_approvals(&self) -> String {
        let asked: Vec<String> = self
            .calls
            .iter()
            .filter(|c| c.approval.is_some())
            .map(|c| {
                let answer = c
                    .answer
                    .as_ref()
                    .and_then(|a| serde_json::to_value(a).ok())
                    .map_or_else(|| "unanswered".to_string(), |v| v.to_string());
                format!("approval_needed {} → {answer}", c.tool)
            })
            .collect();
        if asked.is_empty() {
            "no approval was asked".to_string()
        } else {
            asked.join("\n")
        }
    }

    /// How the run ended, in words.
    pub fn describe_outcome(&self) -> String {
        let what = match self.outcome {
            Outcome::Replied => "the model replied",
            Outcome::Failed => "an error ended the run",
            Outcome::Stopped => "the run was stopped",
            Outcome::StepsExhausted => "the step limit ran out",
            Outcome::TimedOut => "the run timed out",
        };
        match &self.outcome_detail {
            Some(detail) => format!("{what}: {detail}"),
            None => what.to_string(),
        }
    }

    fn assert_holds(&self, expectations: &Expectations) {
        let failures = expectations.check(self);
        if !failures.is_empty() {
            let text: Vec<String> = failures.iter().map(ToString::to_string).collect();
            panic!("{}", text.join("\n"));
        }
    }

    fn only(f: impl FnOnce(&mut Expectations)) -> Expectations {
        let mut e = Expectations::default();
        f(&mut e);
        e
    }

    /// Assert every expectation in `expectations`, drift and unplayed
    /// replay turns included.
    ///
    /// # Panics
    /// With every failure, explained, when any does not hold.
    pub fn assert(&self, expectations: &Expectations) {
        self.assert_holds(expectations);
    }

    /// Assert that `tool` was called; narrow it with the returned helper's
    /// `with_args` and friends.
    ///
    /// # Panics
    /// When `tool` was not called.
    pub fn assert_called<'a>(&'a self, tool: &str) -> CalledAssert<'a> {
        let call = CallExpectation::new(tool);
        self.assert_holds(&Self::only(|e| e.calls.push(call.clone())));
        CalledAssert { run: self, call }
    }

    /// Assert that `tool` was never called.
    ///
    /// # Panics
    /// When it was.
    pub fn assert_not_called(&self, tool: &str) {
        self.assert_holds(&Self::only(|e| e.never_called.push(tool.into())));
    }

    /// Assert that the tools were called in this order (others may come
    /// between).
    ///
    /// # Panics
    /// When they were not.
    pub fn assert_order(&self, tools: &[&str]) {
        let order = tools.iter().map(|t| t.to_string()).collect();
        self.assert_holds(&Self::only(|e| e.order = order));
    }

    /// Assert at most `n` model turns.
    ///
    /// # Panics
    /// When there were more.
    pub fn assert_max_turns(&self, n: usize) {
        self.assert_holds(&Self::only(|e| e.max_turns = Some(n)));
    }

    /// Assert that no `error` event was sent.
    ///
    /// # Panics
    /// When one was.
    pub fn assert_no_error(&self) {
        self.assert_holds(&Self::only(|e| e.no_error = true));
    }

    /// Assert that an approval was asked for `tool`.
    ///
    /// # Panics
    /// When none was.
    pub fn assert_approval_asked(&self, tool: &str) {
        self.assert_holds(&Self::only(|e| e.approval_asked.push(tool.into())));
    }

    /// Assert the final reply contains `text`.
    ///
    /// # Panics
    /// When it does not, or there is no reply.
    pub fn assert_reply_contains(&self, text: &str) {
        let reply = ReplyExpectation {
            contains: vec![text.into()],
            ..ReplyExpectation::default()
        };
        self.assert_holds(&Self::only(|e| e.reply = Some(reply)));
    }

    /// Assert the final reply matches the regular expression `pattern`.
    ///
    /// # Panics
    /// When it does not, or there is no reply.
    pub fn assert_reply_matches(&self, pattern: &str) {
        let reply = ReplyExpectation {
            regex: Some(pattern.into()),
            ..ReplyExpectation::default()
        };
        self.assert_holds(&Self::only(|e| e.reply = Some(reply)));
    }

    /// Assert the final reply is JSON valid against `schema`.
    ///
    /// # Panics
    /// When it is not.
    pub fn assert_reply_schema(&self, schema: Value) {
        let reply = ReplyExpectation {
            schema: Some(schema),
            ..ReplyExpectation::default()
        };
        self.assert_holds(&Self::only(|e| e.reply = Some(reply)));
    }

    /// Assert the exit status `lrg run` would end with (0 replied, 1 failed,
    /// 3 stopped or out of steps).
    ///
    /// # Panics
    /// When it differs.
    pub fn assert_exit_status(&self, status: u8) {
        self.assert_holds(&Self::only(|e| e.exit_status = Some(status)));
    }
}

/// Narrows [`Transcript::assert_called`]: each method asserts at once that
/// some call of the tool satisfies every condition given so far.
#[derive(Debug, Clone)]
pub struct CalledAssert<'a> {
    run: &'a Transcript,
    call: CallExpectation,
}

impl CalledAssert<'_> {
    fn narrowed(mut self, f: impl FnOnce(&mut CallExpectation)) -> Self {
        f(&mut self.call);
        let call = self.call.clone();
        self.run
            .assert_holds(&Transcript::only(|e| e.calls.push(call)));
        self
    }

    /// With arguments that include `args` (fields compared recursively).
    ///
    /// # Panics
    /// When no call has them.
    pub fn with_args(self, args: Value) -> Self {
        self.narrowed(|c| {
            c.args = Some(args);
            c.match_ = super::ArgsMatch::Subset;
        })
    }

    /// With arguments equal to `args`.
    ///
    /// # Panics
    /// When no call has them.
    pub fn with_exact_args(self, args: Value) -> Self {
        self.narrowed(|c| {
            c.args = Some(args);
            c.match_ = super::ArgsMatch::Equal;
        })
    }

    /// With the argument `field` (a name or a JSON pointer) matching the
    /// regular expression `pattern`.
    ///
    /// # Panics
    /// When no call has it.
    pub fn with_arg_matching(self, field: &str, pattern: &str) -> Self {
        self.narrowed(|c| {
            c.args_regex.insert(field.into(), pattern.into());
        })
    }

    /// With arguments valid against the JSON Schema `schema`.
    ///
    /// # Panics
    /// When no call's are.
    pub fn with_args_schema(self, schema: Value) -> Self {
        self.narrowed(|c| c.args_schema = Some(schema))
    }

    /// Exactly `n` calls satisfy the conditions.
    ///
    /// # Panics
    /// When another number do.
    pub fn times(self, n: usize) -> Self {
        self.narrowed(|c| c.times = Some(n))
    }
}
