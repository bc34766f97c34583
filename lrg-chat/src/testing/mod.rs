//! Regression tests for agents: run a session on a scripted model or a
//! recording, then check what it did — which tools it called with which
//! arguments, what it never called, what it replied.
//!
//! [`SessionTest`] runs the messages, answering approval questions as told,
//! and returns a [`Transcript`]. Check it with the `assert_*` helpers in a
//! `cargo test`, or with [`Expectations::check`], which is what `lrg test`
//! does with the `expect` table of a scenario file: both share one
//! implementation. A message sent with [`SessionTest::typed_message`] runs
//! typed, as a scenario's `[output] schema` runs its last message.
//!
//! ```
//! use std::sync::Arc;
//! use lrg_chat::testing::SessionTest;
//! use lrg_chat::tools::ToolHost;
//! use lrg_providers::{ScriptedModel, ToolAnnotations};
//! use serde_json::json;
//!
//! #[derive(serde::Deserialize, schemars::JsonSchema)]
//! struct Lookup {
//!     /// The city.
//!     city: String,
//! }
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! // The model: two scripted turns (a call, then the reply).
//! let model = ScriptedModel::from_json("weather", r#"[
//!   {"calls": [{"name": "weather", "arguments": {"city": "Paris"}}]},
//!   {"text": "It is sunny in Paris."}
//! ]"#).unwrap();
//!
//! // The tools: a Rust function here; an MCP server works the same way.
//! let tools = ToolHost::new();
//! let read_only = ToolAnnotations { read_only_hint: Some(true), ..Default::default() };
//! tools.add_fn("weather", "Today's weather", read_only, |a: Lookup| async move {
//!     Ok::<_, String>(format!("sunny in {}", a.city))
//! }).unwrap();
//!
//! let run = SessionTest::new(model)
//!     .tools(Arc::new(tools))
//!     .message("What's the weather in Paris?")
//!     .run()
//!     .await;
//!
//! run.assert_called("weather").with_args(json!({"city": "Paris"})).times(1);
//! run.assert_not_called("delete_city");
//! run.assert_max_turns(2);
//! run.assert_reply_contains("sunny");
//! run.assert_exit_status(0);
//! # });
//! ```

mod expect;
pub(crate) use expect::clip;
mod fixed_tools;
mod transcript;

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use lrg_providers::record::ReplayModel;
use lrg_providers::typed::OutputSchema;
use lrg_providers::{ChatModel, GenerationSettings, ScriptedModel, ScriptedTurn};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use futures::future::BoxFuture;

use crate::model_source::FixedModel;
use crate::permissions::{Answer, PermissionSettings, Permissions};
use crate::session::{ApprovalRequest, Approver, ChatSession, TurnOutcome};
use crate::tools::Tools;

pub use expect::{
    ArgsMatch, CallExpectation, ExpectationError, Expectations, Failure, ReplyExpectation,
};
pub use fixed_tools::FixedTools;
pub use transcript::{
    Call, CallResult, CalledAssert, ErrorEvent, Outcome, ReplayCheck, Transcript,
};

/// How long a [`SessionTest`] may run before it is stopped (default).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);

/// The note a denial carries when the test gave no answer for an approval.
pub const NO_ANSWER_NOTE: &str = "the test gives no answer for this approval";

/// How an expected approval question is answered (the kinds of
/// [`Answer`]).
pub use crate::permissions::AnswerKind;

/// The answer to one approval question for `tool`. Answers are used in the
/// order given, each for one question; a question with no answer left is
/// denied with [`NO_ANSWER_NOTE`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct ApprovalAnswer {
    /// The tool asked about.
    pub tool: String,
    /// The answer.
    pub answer: AnswerKind,
    /// With `deny`: what the model is told.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl ApprovalAnswer {
    /// Approve one call of `tool`.
    pub fn once(tool: impl Into<String>) -> Self {
        Self {
            tool: tool.into(),
            answer: AnswerKind::Once,
            note: None,
        }
    }

    /// Deny one call of `tool`, telling the model `note`.
    pub fn deny(tool: impl Into<String>, note: impl Into<String>) -> Self {
        Self {
            tool: tool.into(),
            answer: AnswerKind::Deny,
            note: Some(note.into()),
        }
    }

    /// Answer with `answer` (and `note`, for a denial).
    pub fn new(tool: impl Into<String>, answer: AnswerKind, note: Option<String>) -> Self {
        Self {
            tool: tool.into(),
            answer,
            note,
        }
    }

    fn to_answer(&self) -> Answer {
        match self.answer {
            AnswerKind::Once => Answer::Once,
            AnswerKind::ThisChat => Answer::ThisChat,
            AnswerKind::Always => Answer::Always,
            AnswerKind::Deny => Answer::Deny {
                note: self.note.clone(),
            },
        }
    }
}

/// Runs one session for a test: a model, tools, permissions, answers to the
/// approvals it expects, and the messages to send. See the [module
/// docs](self).
#[must_use = "nothing runs until `run` is awaited"]
pub struct SessionTest {
    model: Arc<dyn ChatModel>,
    replay: Option<Arc<ReplayModel>>,
    tools: Option<Arc<dyn Tools>>,
    settings: PermissionSettings,
    answers: Vec<ApprovalAnswer>,
    system: Option<String>,
    max_steps: Option<usize>,
    generation: GenerationSettings,
    /// Each message, with the schema its answer must match when typed.
    messages: Vec<(String, Option<OutputSchema>)>,
    timeout: Duration,
}

impl std::fmt::Debug for SessionTest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionTest")
            .field(
                "messages",
                &self.messages.iter().map(|(m, _)| m).collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

impl SessionTest {
    /// A test on `model` (a [`ScriptedModel`], say).
    pub fn new(model: impl ChatModel + 'static) -> Self {
        Self::with_model(Arc::new(model))
    }

    /// A test on a shared model.
    pub fn with_model(model: Arc<dyn ChatModel>) -> Self {
        Self {
            model,
            replay: None,
            tools: None,
            settings: PermissionSettings::default(),
            answers: Vec::new(),
            system: None,
            max_steps: None,
            generation: GenerationSettings::default(),
            messages: Vec::new(),
            timeout: DEFAULT_TIMEOUT,
        }
    }

    /// A test on scripted turns.
    pub fn scripted(turns: Vec<ScriptedTurn>) -> Self {
        Self::new(ScriptedModel::new(turns))
    }

    /// A test replaying a recording: a request that differs from the
    /// recorded one, or recorded turns left unplayed, fail every check.
    pub fn replay(replay: ReplayModel) -> Self {
        let replay = Arc::new(replay);
        Self::with_model(replay.clone()).watch_replay(replay)
    }

    /// Hold the run to `replay`'s checks (drift, unplayed turns) when the
    /// model given is, or wraps, that replay.
    pub fn watch_replay(mut self, replay: Arc<ReplayModel>) -> Self {
        self.replay = Some(replay);
        self
    }

    /// The tools offered (default: none).
    pub fn tools(mut self, tools: Arc<dyn Tools>) -> Self {
        self.tools = Some(tools);
        self
    }

    /// The permission settings (default: [`PermissionSettings::default`]).
    pub fn permissions(mut self, settings: PermissionSettings) -> Self {
        self.settings = settings;
        self
    }

    /// Answer one approval question (see [`ApprovalAnswer`]).
    pub fn answer(mut self, answer: ApprovalAnswer) -> Self {
        self.answers.push(answer);
        self
    }

    /// Answer approval questions, in order.
    pub fn answers(mut self, answers: impl IntoIterator<Item = ApprovalAnswer>) -> Self {
        self.answers.extend(answers);
        self
    }

    /// The system prompt.
    pub fn system_prompt(mut self, prompt: impl Into<String>) -> Self {
        self.system = Some(prompt.into());
        self
    }

    /// Model turns allowed per message.
    pub fn max_steps(mut self, steps: usize) -> Self {
        self.max_steps = Some(steps);
        self
    }

    /// The session's generation settings (temperature, budget, ...).
    pub fn generation(mut self, settings: GenerationSettings) -> Self {
        self.generation = settings;
        self
    }

    /// A message to send; several are sent in turn, each after the last
    /// one's reply. The run stops at the first that gets none.
    pub fn message(mut self, text: impl Into<String>) -> Self {
        self.messages.push((text.into(), None));
        self
    }

    /// A typed message: sent as [`ChatSession::send_output`] sends it, its
    /// final answer must match `schema`. One that never does (within the
    /// repair budget) ends the run [`Outcome::Failed`], the schema's errors
    /// in [`Transcript::outcome_detail`] — exit status 1, as `lrg run
    /// --output-schema` ends.
    pub fn typed_message(mut self, text: impl Into<String>, schema: OutputSchema) -> Self {
        self.messages.push((text.into(), Some(schema)));
        self
    }

    /// How long the whole run may take (default [`DEFAULT_TIMEOUT`]); past
    /// it the session is stopped and the outcome is [`Outcome::TimedOut`].
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Run every message and return what happened. Never panics: a run that
    /// goes wrong is a transcript whose checks fail.
    pub async fn run(self) -> Transcript {
        let answers = ScriptedApprover(std::sync::Mutex::new(VecDeque::from(self.answers)));
        let mut builder = ChatSession::builder(Arc::new(FixedModel(self.model)))
            .permissions(Arc::new(Permissions::new(self.settings)))
            .generation(self.generation)
            .approver(Arc::new(answers));
        if let Some(tools) = self.tools {
            builder = builder.tools(tools);
        }
        if let Some(system) = self.system {
            builder = builder.system_prompt(system);
        }
        if let Some(steps) = self.max_steps {
            builder = builder.max_steps(steps);
        }
        let session = builder.build();

        let deadline = tokio::time::Instant::now() + self.timeout;
        let mut replies = Vec::new();
        let mut outcome = Outcome::Replied;
        let mut detail = None;
        for (message, output) in self.messages {
            let handle = match output {
                Some(schema) => session.send_output(message, schema),
                None => session.send(message),
            };
            let handle = match handle {
                Ok(h) => h,
                Err(e) => {
                    (outcome, detail) = (Outcome::Failed, Some(e.to_string()));
                    break;
                }
            };
            let mut handle = std::pin::pin!(handle);
            let ended = match tokio::time::timeout_at(deadline, &mut handle).await {
                Ok(ended) => ended,
                Err(_) => {
                    session.stop();
                    // The stop ends the turn promptly; do not wait forever
                    // on a tool that ignores it.
                    let _ = tokio::time::timeout(Duration::from_secs(5), &mut handle).await;
                    outcome = Outcome::TimedOut;
                    detail = Some(format!("no reply within {:?}", self.timeout));
                    break;
                }
            };
            match ended {
                TurnOutcome::Completed { text, .. } => replies.push(text),
                TurnOutcome::Failed { error } => {
                    (outcome, detail) = (Outcome::Failed, Some(error.to_string()));
                    break;
                }
                // A typed answer that never matched: a failure, with why.
                TurnOutcome::Invalid { errors, .. } => {
                    let why = format!(
                        "the answer does not match its JSON Schema: {}",
                        errors.join("; ")
                    );
                    (outcome, detail) = (Outcome::Failed, Some(why));
                    break;
                }
                TurnOutcome::Stopped => {
                    outcome = Outcome::Stopped;
                    break;
                }
                TurnOutcome::StepsExhausted => {
                    outcome = Outcome::StepsExhausted;
                    break;
                }
                TurnOutcome::OverBudget { reason } => {
                    (outcome, detail) = (Outcome::Failed, Some(reason));
                    break;
                }
                TurnOutcome::Blocked { reason } => {
                    let why = format!("a hook blocked the message: {reason}");
                    (outcome, detail) = (Outcome::Failed, Some(why));
                    break;
                }
            }
        }
        let events = session
            .events()
            .entries()
            .iter()
            .map(|e| e.as_ref().clone())
            .collect();
        let mut transcript = Transcript::from_events(events, replies, outcome, detail);
        transcript.replay = self.replay.map(|r| ReplayCheck {
            drift: r.drift(),
            unplayed: r.remaining(),
            recorded: r.recording().exchanges.len(),
        });
        transcript
    }
}

/// Answers each approval question with the first answer left for its
/// tool, and denies one with none left ([`NO_ANSWER_NOTE`]).
struct ScriptedApprover(std::sync::Mutex<VecDeque<ApprovalAnswer>>);

impl Approver for ScriptedApprover {
    fn approve<'a>(&'a self, request: &'a ApprovalRequest) -> BoxFuture<'a, Answer> {
        let answer = {
            let mut answers = lrg_providers::sync::lock(&self.0);
            answers
                .iter()
                .position(|a| a.tool == request.tool)
                .and_then(|i| answers.remove(i))
        };
        let answer = answer.map_or_else(|| Answer::deny_with(NO_ANSWER_NOTE), |a| a.to_answer());
        Box::pin(std::future::ready(answer))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::events::Event;
    use crate::permissions::Mode;
    use crate::tools::ToolHost;
    use lrg_providers::ToolAnnotations;
    use serde_json::json;

    #[derive(serde::Deserialize, schemars::JsonSchema)]
    struct Ids {
        /// Ids.
        ids: Vec<u64>,
    }

    fn host() -> Arc<ToolHost> {
        let host = ToolHost::new();
        let destructive = ToolAnnotations {
            destructive_hint: Some(true),
            ..Default::default()
        };
        host.add_fn("remove", "Remove items", destructive, |a: Ids| async move {
            Ok::<_, String>(format!("removed {}", a.ids.len()))
        })
        .unwrap();
        Arc::new(host)
    }

    const SCRIPT: &str = r#"[
      {"calls": [{"name": "remove", "arguments": {"ids": [1]}}]},
      {"calls": [{"name": "remove", "arguments": {"ids": [2, 3]}}]},
      {"calls": [{"name": "remove", "arguments": {"ids": [4]}}]},
      {"text": "Removed what I was allowed to."}
    ]"#;

    #[tokio::test]
    async fn approvals_are_answered_in_order_and_unforeseen_ones_denied() {
        let run = SessionTest::new(ScriptedModel::from_json("t", SCRIPT).unwrap())
            .tools(host())
            .permissions(PermissionSettings {
                mode: Mode::AutoRead,
                ..Default::default()
            })
            .answer(ApprovalAnswer::once("remove"))
            .answer(ApprovalAnswer::deny("remove", "not those"))
            .message("clean up")
            .run()
            .await;
        run.assert_exit_status(0);
        run.assert_approval_asked("remove");
        run.assert_called("remove").times(3);
        let results: Vec<&CallResult> = run.calls.iter().map(|c| &c.result).collect();
        assert!(
            matches!(results[0], CallResult::Done { ok: true, .. }),
            "{results:?}"
        );
        assert!(
            matches!(results[1], CallResult::Skipped { note: Some(n), .. } if n == "not those"),
            "{results:?}"
        );
        assert!(
            matches!(results[2], CallResult::Skipped { note: Some(n), .. } if n == NO_ANSWER_NOTE),
            "{results:?}"
        );
    }

    #[tokio::test]
    async fn a_failed_assertion_explains_itself() {
        let run = SessionTest::new(ScriptedModel::from_json("t", SCRIPT).unwrap())
            .tools(host())
            .permissions(PermissionSettings {
                mode: Mode::AutoAll,
                ..Default::default()
            })
            .message("clean up")
            .run()
            .await;
        let panic = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            run.assert_called("remove").with_args(json!({"ids": [9]}));
        }))
        .unwrap_err();
        let text = panic.downcast_ref::<String>().unwrap();
        assert!(
            text.contains(r#"expected: `remove` called, with arguments including {"ids":[9]}"#),
            "{text}"
        );
        assert!(
            text.contains(r#"remove {"ids":[2,3]} (arguments differ)"#),
            "{text}"
        );
    }

    fn triage() -> OutputSchema {
        OutputSchema::new(json!({
            "type": "object",
            "properties": {"priority": {"type": "integer", "maximum": 5}},
            "required": ["priority"]
        }))
        .unwrap()
    }

    #[tokio::test]
    async fn a_typed_message_passes_with_a_valid_answer_and_fails_with_its_errors() {
        let turns = |t: &[&str]| {
            let turns: Vec<ScriptedTurn> = t
                .iter()
                .map(|t| ScriptedTurn {
                    text: Some((*t).into()),
                    ..Default::default()
                })
                .collect();
            ScriptedModel::new(turns)
        };
        let run = SessionTest::new(turns(&["Hello.", r#"{"priority": 2}"#]))
            .message("hi")
            .typed_message("triage it", triage())
            .run()
            .await;
        run.assert_exit_status(0);
        assert_eq!(run.replies, ["Hello.", r#"{"priority": 2}"#]);
        let typed: Vec<Option<&serde_json::Value>> = run
            .events
            .iter()
            .filter_map(|e| match &e.event {
                Event::AssistantTurn { json, .. } => Some(json.as_ref()),
                _ => None,
            })
            .collect();
        assert_eq!(typed, [None, Some(&json!({"priority": 2}))]);

        let bad = r#"{"priority": 7}"#;
        let run = SessionTest::new(turns(&[bad, bad, bad]))
            .typed_message("triage it", triage())
            .run()
            .await;
        assert_eq!(run.outcome, Outcome::Failed);
        run.assert_exit_status(1);
        let detail = run.outcome_detail.unwrap();
        assert!(
            detail.contains("`priority`: 7 is greater than the maximum of 5"),
            "{detail}"
        );
    }

    #[tokio::test]
    async fn a_run_past_its_timeout_is_stopped() {
        let slow = ScriptedModel::new(vec![ScriptedTurn {
            text: Some("one two three four five six".into()),
            delay_ms: Some(10_000),
            ..Default::default()
        }]);
        let run = SessionTest::new(slow)
            .timeout(Duration::from_millis(100))
            .message("hi")
            .run()
            .await;
        assert_eq!(run.outcome, Outcome::TimedOut);
        run.assert_exit_status(3);
    }
}
