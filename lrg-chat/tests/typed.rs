//! Typed answers in the session loop (`send_typed`, `send_with_schema`),
//! driven by a ScriptedModel: the schema on every request, the instructions
//! for prompted models only, the check before the answer is kept, the
//! repair loop and its budget, tools first, stop, and bad input.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::session_support;

use std::sync::Arc;

use lrg_chat::events::{ErrorKind, Event};
use lrg_chat::{
    ChatSession, FixedModel, OutputMode, OutputSchemaError, SessionError, TurnHandle, TurnOutcome,
    TypedError,
};
use lrg_providers::{
    ChatModel, Message, ModelInfo, Role, ScriptedModel, ScriptedTurn, TurnRequest, TurnStream,
};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use session_support::*;
use tokio_util::sync::CancellationToken;

/// A ScriptedModel that says it gets typed answers by `mode`.
struct WithMode {
    inner: ScriptedModel,
    mode: OutputMode,
}

impl ChatModel for WithMode {
    fn info(&self) -> ModelInfo {
        self.inner.info().output_mode(self.mode)
    }

    fn turn(&self, request: TurnRequest, cancel: CancellationToken) -> TurnStream {
        self.inner.turn(request, cancel)
    }
}

fn triage_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "label": {"enum": ["bug", "feature", "question"]},
            "priority": {"type": "integer", "minimum": 1, "maximum": 5}
        },
        "required": ["label", "priority"],
        "additionalProperties": false
    })
}

const VALID: &str = r#"{"label": "bug", "priority": 2}"#;
const TOO_HIGH: &str = r#"{"label": "bug", "priority": 7}"#;
const NO_LABEL: &str = r#"{"priority": 3}"#;

/// A session on `turns` whose model reports `mode`, with no tools.
fn on(mode: OutputMode, turns: Vec<ScriptedTurn>) -> (ChatSession, ScriptedModel) {
    let model = ScriptedModel::new(turns);
    let wrapped = WithMode {
        inner: model.clone(),
        mode,
    };
    let session = ChatSession::builder(Arc::new(FixedModel::new(wrapped)))
        .system_prompt("You triage bug reports.")
        .build();
    (session, model)
}

async fn done<O>(handle: TurnHandle<O>) -> O {
    tokio::time::timeout(WAIT, handle)
        .await
        .expect("the message did not finish in time")
}

fn warnings(session: &ChatSession) -> Vec<(String, bool)> {
    session
        .events()
        .entries()
        .iter()
        .filter_map(|e| match &e.event {
            Event::Warning { message, retrying } => Some((message.clone(), *retrying)),
            _ => None,
        })
        .collect()
}

fn errors(session: &ChatSession) -> Vec<(ErrorKind, String)> {
    session
        .events()
        .entries()
        .iter()
        .filter_map(|e| match &e.event {
            Event::Error { message, kind } => Some((*kind, message.clone())),
            _ => None,
        })
        .collect()
}

/// The `json` of each numbered `assistant_turn`.
fn turn_jsons(session: &ChatSession) -> Vec<Option<Value>> {
    session
        .events()
        .entries()
        .iter()
        .filter_map(|e| match &e.event {
            Event::AssistantTurn { json, .. } => Some(json.clone()),
            _ => None,
        })
        .collect()
}

fn last_text(messages: &[Message]) -> String {
    messages.last().map(Message::text).unwrap_or_default()
}

// ------------------------------------------------------------ the happy path

#[tokio::test]
async fn a_valid_first_answer_is_kept_and_given_as_json() {
    let (session, model) = on(OutputMode::Prompted, vec![reply(VALID)]);
    let answer = done(
        session
            .send_with_schema("The app crashes at start.", triage_schema())
            .unwrap(),
    )
    .await;
    assert_eq!(answer, Ok(json!({"label": "bug", "priority": 2})));
    let history = session.history();
    assert_eq!(history.len(), 2);
    assert_eq!(history[1].text(), VALID);
    assert_eq!(
        turn_jsons(&session),
        [Some(json!({"label": "bug", "priority": 2}))]
    );
    assert!(warnings(&session).is_empty());
    let requests = model.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(
        requests[0].output.as_ref().map(|s| s.schema().clone()),
        Some(triage_schema())
    );
}

#[tokio::test]
async fn instructions_are_appended_for_prompted_models_only() {
    let (session, model) = on(OutputMode::Prompted, vec![reply(VALID)]);
    done(session.send_with_schema("crash", triage_schema()).unwrap())
        .await
        .unwrap();
    let system = model.requests()[0].system.clone().unwrap();
    assert!(
        system.starts_with("You triage bug reports.\n\n"),
        "the app's prompt first: {system}"
    );
    assert!(system.contains("JSON Schema of the answer"), "{system}");
    assert!(
        system.contains(r#""maximum":5"#),
        "the schema itself: {system}"
    );

    for mode in [OutputMode::NativeStrict, OutputMode::Grammar] {
        let (session, model) = on(mode, vec![reply(VALID)]);
        done(session.send_with_schema("crash", triage_schema()).unwrap())
            .await
            .unwrap();
        let request = &model.requests()[0];
        assert_eq!(
            request.system.as_deref(),
            Some("You triage bug reports."),
            "{mode}: the API carries the schema"
        );
        assert!(request.output.is_some(), "{mode}");
    }

    // A prose message on a prompted model gets no instructions.
    let (session, model) = on(OutputMode::Prompted, vec![reply("hi")]);
    done(session.send("hello").unwrap()).await;
    assert_eq!(
        model.requests()[0].system.as_deref(),
        Some("You triage bug reports.")
    );
    assert!(model.requests()[0].output.is_none());
}

#[derive(Debug, PartialEq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
enum Label {
    Bug,
    Feature,
    Question,
}

/// A bug report, triaged.
#[derive(Debug, PartialEq, Deserialize, JsonSchema)]
struct Triage {
    /// What kind of report it is.
    label: Label,
    /// 1 (low) to 5 (urgent).
    #[schemars(range(min = 1, max = 5))]
    priority: u8,
}

#[tokio::test]
async fn send_typed_deserializes_into_the_type() {
    let (session, model) = on(
        OutputMode::Prompted,
        vec![
            reply(r#"{"label": "feature", "priority": 9}"#),
            reply(r#"{"label": "feature", "priority": 1}"#),
        ],
    );
    let triage = done(session.send_typed::<Triage>("add dark mode").unwrap()).await;
    assert_eq!(
        triage,
        Ok(Triage {
            label: Label::Feature,
            priority: 1
        })
    );
    let schema = model.requests()[0].output.clone().unwrap();
    assert_eq!(schema.name(), "Triage");
    assert_eq!(schema.schema()["properties"]["priority"]["maximum"], 5);
}

#[derive(Debug, Deserialize, JsonSchema)]
struct Loose {
    /// The schema says a string; serde wants a number.
    #[schemars(with = "String")]
    #[allow(dead_code)]
    count: u32,
}

#[tokio::test]
async fn a_valid_answer_the_type_cannot_read_is_a_deserialize_error() {
    let (session, _) = on(OutputMode::Prompted, vec![reply(r#"{"count": "three"}"#)]);
    let outcome = done(session.send_typed::<Loose>("count").unwrap()).await;
    match outcome {
        Err(TypedError::Deserialize { json, reason }) => {
            assert_eq!(json, json!({"count": "three"}));
            assert!(reason.contains("expected u32"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
}

// ------------------------------------------------------------ repairs

#[tokio::test]
async fn invalid_invalid_valid_is_repaired_twice() {
    let (session, model) = on(
        OutputMode::Prompted,
        vec![reply(TOO_HIGH), reply(NO_LABEL), reply(VALID)],
    );
    let outcome = done(
        session
            .send_output(
                "crash",
                lrg_chat::OutputSchema::new(triage_schema()).unwrap(),
            )
            .unwrap(),
    )
    .await;
    assert_eq!(
        outcome,
        TurnOutcome::Completed {
            text: VALID.into(),
            json: Some(json!({"label": "bug", "priority": 2})),
        }
    );
    let warned = warnings(&session);
    assert_eq!(warned.len(), 2, "{warned:?}");
    assert!(warned.iter().all(|(_, retrying)| *retrying));
    assert!(warned[0].0.contains("attempt 1 of 3"), "{warned:?}");
    assert!(
        warned[0]
            .0
            .contains("`priority`: 7 is greater than the maximum of 5"),
        "{warned:?}"
    );
    assert!(warned[1].0.contains("attempt 2 of 3"), "{warned:?}");
    assert!(warned[1].0.contains("label"), "{warned:?}");
    // Only the valid answer was kept, and shown.
    let history = session.history();
    assert_eq!(history.len(), 2, "{history:#?}");
    assert_eq!(history[1].text(), VALID);
    assert_eq!(turn_jsons(&session).len(), 1);

    let requests = model.requests();
    assert_eq!(requests.len(), 3);
    let first = &requests[0];
    for (i, repair) in requests[1..].iter().enumerate() {
        let wrong = [TOO_HIGH, NO_LABEL][i];
        assert!(repair.tools.is_empty(), "a repair offers no tool");
        assert_eq!(repair.system, first.system);
        assert_eq!(repair.output, first.output);
        let n = repair.messages.len();
        assert_eq!(
            n,
            first.messages.len() + 2,
            "the request's messages, then two"
        );
        assert_eq!(&repair.messages[..n - 2], &first.messages[..]);
        assert_eq!(repair.messages[n - 2].role, Role::Assistant);
        assert_eq!(repair.messages[n - 2].text(), wrong);
        assert_eq!(repair.messages[n - 1].role, Role::User);
        assert!(
            last_text(&repair.messages).starts_with("Your answer does not match"),
            "{:?}",
            last_text(&repair.messages)
        );
    }
    assert!(last_text(&requests[1].messages).contains("greater than the maximum of 5"));
}

#[tokio::test]
async fn three_invalid_answers_end_invalid_with_the_last_one_kept() {
    let (session, model) = on(
        OutputMode::Prompted,
        vec![reply(TOO_HIGH), reply(NO_LABEL), reply(TOO_HIGH)],
    );
    let outcome = done(session.send_with_schema("crash", triage_schema()).unwrap()).await;
    assert_eq!(
        outcome,
        Err(TypedError::Invalid {
            last_text: TOO_HIGH.into(),
            errors: vec!["`priority`: 7 is greater than the maximum of 5".into()],
        })
    );
    assert_eq!(model.requests().len(), 3);
    assert_eq!(warnings(&session).len(), 2);
    let errors = errors(&session);
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(errors[0].0, ErrorKind::InvalidAnswer);
    assert!(errors[0].1.contains("after 2 repairs"), "{errors:?}");
    assert!(
        errors[0].1.contains("greater than the maximum"),
        "{errors:?}"
    );
    assert_eq!(
        serde_json::to_value(ErrorKind::InvalidAnswer).unwrap(),
        "invalid_answer"
    );
    // The last answer, as the model gave it; no repair message.
    let history = session.history();
    assert_eq!(history.len(), 2, "{history:#?}");
    assert_eq!(history[0].role, Role::User);
    assert_eq!(history[1].text(), TOO_HIGH);
    assert!(
        !history
            .iter()
            .any(|m| m.text().contains("does not match the required")),
        "{history:#?}"
    );
    // Shown without json.
    assert_eq!(turn_jsons(&session), [None]);
}

#[tokio::test]
async fn no_repair_budget_ends_at_the_first_invalid_answer() {
    let model = ScriptedModel::new(vec![reply(TOO_HIGH), reply(VALID)]);
    let session = ChatSession::builder(Arc::new(FixedModel::new(model.clone())))
        .typed_repairs(0)
        .build();
    let outcome = done(session.send_with_schema("crash", triage_schema()).unwrap()).await;
    assert!(
        matches!(outcome, Err(TypedError::Invalid { .. })),
        "{outcome:?}"
    );
    assert_eq!(model.requests().len(), 1);
    assert!(warnings(&session).is_empty());
}

#[tokio::test]
async fn repairs_do_not_count_against_max_steps() {
    let model = ScriptedModel::new(vec![reply(TOO_HIGH), reply(NO_LABEL), reply(VALID)]);
    let session = ChatSession::builder(Arc::new(FixedModel::new(model.clone())))
        .max_steps(1)
        .build();
    let outcome = done(session.send_with_schema("crash", triage_schema()).unwrap()).await;
    assert_eq!(outcome, Ok(json!({"label": "bug", "priority": 2})));
}

// ------------------------------------------------------------ with tools

#[tokio::test]
async fn a_typed_answer_after_two_tool_calls() {
    let (session, model, tools) = new_session(vec![
        calls(&[("read_note", json!({"name": "crash"}))]),
        calls(&[("snapshot", json!({}))]),
        reply(TOO_HIGH),
        reply(VALID),
    ]);
    let outcome = done(
        session
            .send_with_schema("triage my crash note", triage_schema())
            .unwrap(),
    )
    .await;
    assert_eq!(outcome, Ok(json!({"label": "bug", "priority": 2})));
    assert_eq!(
        tools.calls(),
        [
            ("read_note".to_string(), json!({"name": "crash"})),
            ("snapshot".to_string(), json!({})),
        ],
        "each tool ran once"
    );
    assert_pairing(&session);
    let requests = model.requests();
    assert_eq!(requests.len(), 4);
    for request in &requests[..3] {
        assert_eq!(request.tools.len(), 5, "tools offered before the answer");
        assert!(request.output.is_some(), "the schema on every request");
    }
    assert!(requests[3].tools.is_empty(), "the repair carries no tools");
    assert!(requests[3].output.is_some());
    // user, call, result, call, result, answer: no repair messages.
    let history = session.history();
    assert_eq!(history.len(), 6, "{history:#?}");
    assert_eq!(history[5].text(), VALID);
    assert_eq!(
        turn_jsons(&session),
        [None, None, Some(json!({"label": "bug", "priority": 2}))]
    );
}

#[tokio::test]
async fn a_typed_answer_with_no_tools() {
    let model = ScriptedModel::new(vec![reply(VALID)]);
    let session = ChatSession::builder(Arc::new(FixedModel::new(model.clone()))).build();
    let outcome = done(session.send_with_schema("crash", triage_schema()).unwrap()).await;
    assert_eq!(outcome, Ok(json!({"label": "bug", "priority": 2})));
    assert!(model.requests()[0].tools.is_empty());
}

#[tokio::test]
async fn a_repair_that_calls_a_tool_runs_none() {
    let mut repair = calls(&[("delete_notes", json!({"ids": [1]}))]);
    repair.text = Some(VALID.into());
    let (session, model, tools) = new_session(vec![reply(TOO_HIGH), repair]);
    let outcome = done(session.send_with_schema("crash", triage_schema()).unwrap()).await;
    assert_eq!(outcome, Ok(json!({"label": "bug", "priority": 2})));
    assert!(tools.calls().is_empty(), "{:?}", tools.calls());
    assert_eq!(model.requests().len(), 2);
    assert_pairing(&session);
    assert_eq!(session.history()[1].tool_calls().count(), 0);
}

// ------------------------------------------------------------ stop

#[tokio::test]
async fn stop_during_a_repair() {
    let slow = ScriptedTurn {
        text: Some(VALID.into()),
        delay_ms: Some(60_000),
        ..Default::default()
    };
    let (session, model) = on(OutputMode::Prompted, vec![reply(TOO_HIGH), slow]);
    let mut events = session.subscribe(0);
    let handle = session.send_with_schema("crash", triage_schema()).unwrap();
    wait_for(&mut events, |e| {
        matches!(e, Event::Warning { retrying: true, .. })
    })
    .await;
    assert!(session.stop());
    assert_eq!(done(handle).await, Err(TypedError::Stopped));
    assert_eq!(model.requests().len(), 2, "the repair was asked for");
    let history = session.history();
    // The user message, then the stop note: the invalid answer was never kept.
    assert_eq!(history.len(), 2, "{history:#?}");
    assert_eq!(history[1].text(), lrg_chat::session::STOPPED_NOTE);
    assert!(turn_jsons(&session).is_empty());
}

// ------------------------------------------------------------ bad input

#[tokio::test]
async fn schemas_that_are_not_objects_are_refused_before_anything_is_sent() {
    for (schema, found) in [(json!(true), "boolean"), (json!("string"), "string")] {
        let (session, model) = on(OutputMode::Prompted, vec![reply(VALID)]);
        let refused = session.send_with_schema("crash", schema).unwrap_err();
        assert_eq!(
            refused,
            SessionError::Schema(OutputSchemaError::NotAnObject { found })
        );
        assert!(
            refused.to_string().contains("must be a JSON object"),
            "{refused}"
        );
        assert!(session.history().is_empty(), "nothing recorded");
        assert!(session.events().entries().is_empty(), "nothing shown");
        assert!(!session.is_busy());
        assert!(model.requests().is_empty());
    }
}

#[tokio::test]
async fn an_invalid_json_schema_is_refused() {
    let (session, model) = on(OutputMode::Prompted, vec![reply(VALID)]);
    let refused = session
        .send_with_schema("crash", json!({"type": "strnig"}))
        .unwrap_err();
    assert!(
        matches!(
            refused,
            SessionError::Schema(OutputSchemaError::Invalid { .. })
        ),
        "{refused:?}"
    );
    assert!(model.requests().is_empty());
}

#[tokio::test]
async fn a_schema_over_256_kib_is_refused() {
    let properties: serde_json::Map<String, Value> = (0..12_000)
        .map(|i| (format!("field_{i:05}"), json!({"type": "string"})))
        .collect();
    let schema = json!({"type": "object", "properties": properties});
    assert!(serde_json::to_vec(&schema).unwrap().len() > 256 * 1024);
    let (session, model) = on(OutputMode::Prompted, vec![reply(VALID)]);
    let refused = session.send_with_schema("crash", schema).unwrap_err();
    assert!(
        matches!(
            refused,
            SessionError::Schema(OutputSchemaError::TooLarge { max: 262_144, .. })
        ),
        "{refused:?}"
    );
    assert!(session.history().is_empty());
    assert!(model.requests().is_empty());
}

fn tree_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "children": {"type": "array", "items": {"$ref": "#"}}
        },
        "required": ["name"]
    })
}

#[tokio::test]
async fn a_recursive_schema_works_on_a_prompted_model() {
    let tree = r#"{"name": "a", "children": [{"name": "b", "children": [{"name": "c"}]}]}"#;
    let bad = r#"{"name": "a", "children": [{"children": []}]}"#;
    let (session, _) = on(OutputMode::Prompted, vec![reply(bad), reply(tree)]);
    let outcome = done(session.send_with_schema("a tree", tree_schema()).unwrap()).await;
    assert_eq!(outcome, Ok(serde_json::from_str::<Value>(tree).unwrap()));
    let warned = warnings(&session);
    assert!(warned[0].0.contains("children[0]"), "{warned:?}");
}

#[tokio::test]
async fn a_recursive_schema_is_unsupported_under_a_grammar_before_anything_is_sent() {
    let (session, model) = on(OutputMode::Grammar, vec![reply("{}")]);
    let outcome = done(session.send_with_schema("a tree", tree_schema()).unwrap()).await;
    match outcome {
        Err(TypedError::Unsupported { reason }) => {
            assert!(reason.contains("grammar"), "{reason}")
        }
        other => panic!("{other:?}"),
    }
    assert!(model.requests().is_empty(), "nothing sent");
    assert_eq!(errors(&session)[0].0, ErrorKind::Unsupported);
}

#[tokio::test]
async fn a_non_json_answer_is_repaired() {
    let (session, model) = on(
        OutputMode::Prompted,
        vec![reply("It is a bug, fairly urgent."), reply(VALID)],
    );
    let outcome = done(session.send_with_schema("crash", triage_schema()).unwrap()).await;
    assert_eq!(outcome, Ok(json!({"label": "bug", "priority": 2})));
    let warned = warnings(&session);
    assert!(warned[0].0.contains("holds no JSON value"), "{warned:?}");
    assert!(last_text(&model.requests()[1].messages).contains("holds no JSON value"));
}

#[tokio::test]
async fn an_answer_in_markdown_fences_is_read() {
    let fenced = format!("Here is the triage:\n```json\n{VALID}\n```\n");
    let (session, model) = on(OutputMode::Prompted, vec![reply(&fenced)]);
    let outcome = done(session.send_with_schema("crash", triage_schema()).unwrap()).await;
    assert_eq!(outcome, Ok(json!({"label": "bug", "priority": 2})));
    assert_eq!(model.requests().len(), 1, "no repair");
    // Kept as the model wrote it.
    assert_eq!(session.history()[1].text(), fenced);
}

#[tokio::test]
async fn an_answer_followed_by_prose_is_read() {
    let chatty = format!("{VALID}\nLet me know if you need anything else {{or not}}.");
    let (session, model) = on(OutputMode::Prompted, vec![reply(&chatty)]);
    let outcome = done(session.send_with_schema("crash", triage_schema()).unwrap()).await;
    assert_eq!(outcome, Ok(json!({"label": "bug", "priority": 2})));
    assert_eq!(model.requests().len(), 1, "no repair");
}

// ------------------------------------------------------------ the events

#[tokio::test]
async fn the_events_of_a_repaired_typed_message() {
    let (session, _) = on(
        OutputMode::Prompted,
        vec![
            ScriptedTurn {
                reasoning: Some("Priority seven feels right.".into()),
                text: Some(TOO_HIGH.into()),
                ..Default::default()
            },
            reply(VALID),
        ],
    );
    done(session.send_with_schema("crash", triage_schema()).unwrap())
        .await
        .unwrap();
    snapshot!(log(&session));
}

#[test]
fn an_untyped_assistant_turn_has_no_json_key() {
    let event = Event::AssistantTurn {
        reasoning: String::new(),
        text: "hi".into(),
        json: None,
        stopped: false,
    };
    assert_eq!(
        serde_json::to_string(&event).unwrap(),
        r#"{"type":"assistant_turn","text":"hi"}"#
    );
    let typed = Event::AssistantTurn {
        reasoning: String::new(),
        text: "{}".into(),
        json: Some(json!({})),
        stopped: false,
    };
    assert_eq!(
        serde_json::to_string(&typed).unwrap(),
        r#"{"type":"assistant_turn","text":"{}","json":{}}"#
    );
}
