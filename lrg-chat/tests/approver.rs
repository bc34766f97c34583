//! The approval API: an [`Approver`] set on the builder answers the
//! session's questions, given everything the `approval_needed` event
//! carries; the session handles stop, timeout, a failing approver and an
//! answer it does not offer, and records each.

use crate::session_support;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use lrg_chat::events::Event;
use lrg_chat::permissions::{ApprovalReason, Mode};
use lrg_chat::sub_agents::SubAgents;
use lrg_chat::tools::ToolClass;
use lrg_chat::{
    Answer, AnswerKind, ApprovalRequest, Approver, ChatSession, ChatSessionBuilder, FixedModel,
    PermissionSettings, Permissions, SkipReason, TurnOutcome, approver_fn,
};
use lrg_providers::{
    ChatModel, ModelInfo, ModelLocation, Part, ScriptedModel, ScriptedTurn, TurnRequest, TurnStream,
};
use serde_json::json;
use session_support::*;
use tokio_util::sync::CancellationToken;

/// Records every request it is given, then answers with `answer`.
struct Recording {
    asked: Mutex<Vec<ApprovalRequest>>,
    answer: Answer,
}

impl Recording {
    fn new(answer: Answer) -> Arc<Self> {
        Arc::new(Self {
            asked: Mutex::new(Vec::new()),
            answer,
        })
    }

    fn asked(&self) -> Vec<ApprovalRequest> {
        self.asked.lock().unwrap().clone()
    }
}

impl Approver for Recording {
    fn approve<'a>(&'a self, request: &'a ApprovalRequest) -> BoxFuture<'a, Answer> {
        self.asked.lock().unwrap().push(request.clone());
        Box::pin(std::future::ready(self.answer.clone()))
    }
}

/// Never answers; says when the session dropped its future (the question
/// was withdrawn).
#[derive(Default)]
struct Silent {
    asked: AtomicBool,
    dropped: Arc<AtomicBool>,
}

struct OnDrop(Arc<AtomicBool>);

impl Drop for OnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

impl Approver for Silent {
    fn approve<'a>(&'a self, _request: &'a ApprovalRequest) -> BoxFuture<'a, Answer> {
        self.asked.store(true, Ordering::SeqCst);
        let guard = OnDrop(self.dropped.clone());
        Box::pin(async move {
            let _guard = guard;
            std::future::pending::<Answer>().await
        })
    }
}

/// A session on `turns` with the test tools, answered by `approver`.
fn session(
    turns: Vec<ScriptedTurn>,
    approver: Arc<dyn Approver>,
    configure: impl FnOnce(ChatSessionBuilder) -> ChatSessionBuilder,
) -> (ChatSession, ScriptedModel, Arc<TestTools>) {
    let model = ScriptedModel::new(turns);
    let tools = TestTools::new();
    let builder = ChatSession::builder(Arc::new(FixedModel::new(model.clone())))
        .tools(tools.host.clone())
        .permissions(Arc::new(Permissions::default()))
        .approver(approver);
    (configure(builder).build(), model, tools)
}

fn skipped(session: &ChatSession) -> Vec<(SkipReason, Option<String>)> {
    session
        .events()
        .entries()
        .iter()
        .filter_map(|e| match &e.event {
            Event::ToolSkipped { reason, note, .. } => Some((*reason, note.clone())),
            _ => None,
        })
        .collect()
}

fn answered(session: &ChatSession) -> Vec<Answer> {
    session
        .events()
        .entries()
        .iter()
        .filter_map(|e| match &e.event {
            Event::ApprovalAnswered { answer, .. } => Some(answer.clone()),
            _ => None,
        })
        .collect()
}

fn warnings(session: &ChatSession) -> Vec<String> {
    session
        .events()
        .entries()
        .iter()
        .filter_map(|e| match &e.event {
            Event::Warning { message, .. } => Some(message.clone()),
            _ => None,
        })
        .collect()
}

/// The text of the last result of `tool` the model was sent.
fn result_sent(model: &ScriptedModel, tool: &str) -> String {
    let requests = model.requests();
    let last = requests.last().expect("the model was called");
    last.messages
        .iter()
        .rev()
        .flat_map(|m| m.parts.iter())
        .find_map(|p| match p {
            Part::ToolResult(result) if result.name == tool => Some(result.text_content()),
            _ => None,
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn an_approver_is_asked_with_everything_the_event_carries_and_its_yes_runs_the_call() {
    let approver = Recording::new(Answer::Once);
    let (session, _, tools) = session(
        vec![
            calls(&[
                ("read_note", json!({"name": "a"})),
                ("delete_notes", json!({"ids": [1, 2]})),
            ]),
            reply("done"),
        ],
        approver.clone(),
        |b| b,
    );
    let outcome = finish(session.send("read a, delete 1 and 2").unwrap()).await;
    assert!(
        matches!(outcome, TurnOutcome::Completed { .. }),
        "{outcome:?}"
    );
    // The read ran on its own (auto_read); only the delete was asked.
    let asked = approver.asked();
    assert_eq!(asked.len(), 1, "{asked:?}");
    let request = &asked[0];
    assert_eq!(request.tool, "delete_notes");
    assert_eq!(request.class, ToolClass::Destructive);
    assert_eq!(request.arguments, json!({"ids": [1, 2]}));
    assert_eq!(request.targets, Some(2));
    assert_eq!(
        request.reason,
        ApprovalReason::Mode {
            mode: Mode::AutoRead
        }
    );
    assert_eq!(
        request.answers,
        [
            AnswerKind::Once,
            AnswerKind::ThisChat,
            AnswerKind::Always,
            AnswerKind::Deny
        ]
    );
    assert!(
        request
            .warnings
            .iter()
            .any(|w| w.contains("no annotations")),
        "{:?}",
        request.warnings
    );
    assert!(request.sub_agent.is_none());
    // The event says exactly what the approver was told.
    let event = session
        .events()
        .entries()
        .iter()
        .find_map(|e| ApprovalRequest::from_event(&e.event))
        .expect("an approval_needed event");
    assert_eq!(&event, request);
    assert_eq!(answered(&session), [Answer::Once]);
    assert_eq!(
        tools.calls(),
        [
            ("read_note".to_string(), json!({"name": "a"})),
            ("delete_notes".to_string(), json!({"ids": [1, 2]}))
        ]
    );
    assert!(session.pending_approvals().is_empty());
    assert_pairing(&session);
}

#[tokio::test]
async fn an_approver_that_allows_reads_and_denies_changes_with_a_note() {
    let approver = approver_fn(|request| async move {
        match request.class {
            ToolClass::Read => Answer::Once,
            _ => Answer::deny_with("  not without the owner  "),
        }
    });
    let (session, model, tools) = session(
        vec![
            calls(&[
                ("read_note", json!({"name": "a"})),
                ("rename_note", json!({"from": "a", "to": "b"})),
            ]),
            reply("could not rename"),
        ],
        approver,
        |b| {
            b.permissions(Arc::new(Permissions::new(PermissionSettings {
                mode: Mode::AskAll,
                ..Default::default()
            })))
        },
    );
    finish(session.send("rename a to b").unwrap()).await;
    assert_eq!(
        tools.calls(),
        [("read_note".to_string(), json!({"name": "a"}))]
    );
    // The note is trimmed, recorded, and told to the model.
    let note = "not without the owner".to_string();
    assert_eq!(
        answered(&session),
        [Answer::Once, Answer::deny_with(note.clone())]
    );
    assert_eq!(skipped(&session), [(SkipReason::NotAllowed, Some(note))]);
    let sent = result_sent(&model, "rename_note");
    assert!(sent.contains("not without the owner"), "{sent}");
    assert_pairing(&session);
}

#[tokio::test]
async fn stop_while_the_approver_asks_withdraws_the_question_and_records_the_stop() {
    let approver = Arc::new(Silent::default());
    let (session, _, tools) = session(
        vec![
            calls(&[
                ("delete_notes", json!({"ids": [1]})),
                ("read_note", json!({"name": "x"})),
            ]),
            reply("never"),
        ],
        approver.clone(),
        |b| b,
    );
    let mut events = session.subscribe(0);
    let handle = session.send("delete note 1").unwrap();
    next_approval(&mut events).await;
    assert!(approver.asked.load(Ordering::SeqCst));
    assert!(!approver.dropped.load(Ordering::SeqCst));
    session.stop();
    assert_eq!(finish(handle).await, TurnOutcome::Stopped);
    assert!(
        approver.dropped.load(Ordering::SeqCst),
        "the approver's future is dropped when the question is withdrawn"
    );
    assert!(tools.calls().is_empty());
    assert!(session.pending_approvals().is_empty());
    assert_eq!(
        skipped(&session),
        [(SkipReason::Stopped, None), (SkipReason::Stopped, None)]
    );
    assert!(answered(&session).is_empty(), "nobody answered");
    assert_pairing(&session);
}

#[tokio::test]
async fn no_answer_within_the_timeout_is_a_denial_recorded_as_such() {
    let approver = Arc::new(Silent::default());
    let (session, model, tools) = session(
        vec![
            calls(&[("delete_notes", json!({"ids": [1]}))]),
            reply("nobody answered"),
        ],
        approver.clone(),
        |b| b.approval_timeout(Duration::from_millis(200)),
    );
    let started = std::time::Instant::now();
    let outcome = finish(session.send("delete note 1").unwrap()).await;
    assert!(started.elapsed() >= Duration::from_millis(200));
    assert_eq!(
        outcome,
        TurnOutcome::Completed {
            text: "nobody answered".into(),
            json: None
        }
    );
    assert!(approver.dropped.load(Ordering::SeqCst));
    assert!(tools.calls().is_empty());
    assert_eq!(skipped(&session), [(SkipReason::ApprovalTimedOut, None)]);
    let sent = result_sent(&model, "delete_notes");
    assert!(sent.contains("nobody answered within 0.2 s"), "{sent}");
    assert!(session.pending_approvals().is_empty());
    assert_pairing(&session);
}

#[tokio::test]
async fn a_front_end_may_answer_before_the_approver_does() {
    let approver = Arc::new(Silent::default());
    let (session, _, tools) = session(
        vec![calls(&[("delete_notes", json!({"ids": [3]}))]), reply("ok")],
        approver.clone(),
        |b| b,
    );
    let mut events = session.subscribe(0);
    let handle = session.send("delete note 3").unwrap();
    let id = next_approval(&mut events).await;
    session.answer_approval(&id, Answer::Once).unwrap();
    finish(handle).await;
    assert!(approver.dropped.load(Ordering::SeqCst));
    assert_eq!(
        tools.calls(),
        [("delete_notes".to_string(), json!({"ids": [3]}))]
    );
    assert_eq!(answered(&session), [Answer::Once]);
}

#[tokio::test]
async fn a_panicking_approver_denies_the_call_with_a_warning() {
    let approver = approver_fn(|_| async { panic!("the approval service is down") });
    let (session, _, tools) = session(
        vec![calls(&[("delete_notes", json!({"ids": [1]}))]), reply("ok")],
        approver,
        |b| b,
    );
    let outcome = finish(session.send("delete note 1").unwrap()).await;
    assert!(
        matches!(outcome, TurnOutcome::Completed { .. }),
        "{outcome:?}"
    );
    assert!(tools.calls().is_empty());
    assert!(
        warnings(&session)
            .iter()
            .any(|w| w.contains("the approval service is down")),
        "{:?}",
        warnings(&session)
    );
    assert_eq!(skipped(&session)[0].0, SkipReason::NotAllowed);
    assert_pairing(&session);
}

#[tokio::test]
async fn always_on_a_bulk_question_counts_as_once_and_writes_no_rule() {
    let approver = Recording::new(Answer::Always);
    let (session, _, tools) = session(
        vec![
            calls(&[("delete_notes", json!({"ids": [1, 2, 3]}))]),
            reply("ok"),
        ],
        approver.clone(),
        |b| {
            b.permissions(Arc::new(Permissions::new(PermissionSettings {
                mode: Mode::AutoAll,
                bulk_limit: 2,
                ..Default::default()
            })))
        },
    );
    finish(session.send("delete 1 to 3").unwrap()).await;
    let asked = approver.asked();
    assert_eq!(
        asked[0].reason,
        ApprovalReason::Bulk {
            targets: 3,
            limit: 2
        }
    );
    assert!(
        !asked[0].offers(AnswerKind::Always),
        "{:?}",
        asked[0].answers
    );
    assert_eq!(answered(&session), [Answer::Once]);
    assert!(
        warnings(&session)
            .iter()
            .any(|w| w.contains("\"always\" is not offered")),
        "{:?}",
        warnings(&session)
    );
    assert!(session.permissions().settings().rules.is_empty());
    assert_eq!(tools.calls().len(), 1);
}

/// Sends each turn to the script of the conversation's first message: a
/// sub-agent's prompt, or else the parent's.
struct Router {
    parent: ScriptedModel,
    subs: HashMap<String, ScriptedModel>,
}

impl ChatModel for Router {
    fn info(&self) -> ModelInfo {
        ModelInfo::new("script", "router", ModelLocation::Local)
    }

    fn turn(&self, request: TurnRequest, cancel: CancellationToken) -> TurnStream {
        let first = request
            .messages
            .first()
            .map(|m| m.text())
            .unwrap_or_default();
        self.subs
            .get(&first)
            .unwrap_or(&self.parent)
            .turn(request, cancel)
    }
}

#[tokio::test]
async fn a_sub_agent_asks_the_parents_approver_under_its_prefixed_call_id() {
    let sub = ScriptedModel::named(
        "d",
        vec![
            calls(&[("delete_notes", json!({"ids": [7]}))]),
            reply("deleted note 7"),
        ],
    );
    let parent = ScriptedModel::named(
        "parent",
        vec![
            calls(&[(
                "spawn_sub_agent",
                json!({"tasks": [{"description": "delete 7", "prompt": "task d"}]}),
            )]),
            reply("On it."),
            reply("Deleted."),
        ],
    );
    let router = Router {
        parent,
        subs: HashMap::from([("task d".to_string(), sub)]),
    };
    let tools = TestTools::new();
    let approver = Recording::new(Answer::Once);
    let session = ChatSession::builder(Arc::new(FixedModel::new(router)))
        .tools(tools.host.clone())
        .sub_agents(SubAgents::default())
        .approver(approver.clone())
        .build();
    finish(session.send("delete note 7 in the background").unwrap()).await;
    tokio::time::timeout(WAIT, session.wait_settled())
        .await
        .expect("the sub-agent finished");
    let id = session.sub_agents()[0].id.clone();
    let asked = approver.asked();
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert_eq!(asked[0].call_id, format!("{id}::call_1_1"));
    let ask = asked[0].sub_agent.as_ref().expect("the sub-agent is named");
    assert_eq!(ask.sub_session_id, id);
    assert_eq!(ask.tool, "delete_notes");
    assert_eq!(asked[0].tool, "delete_notes");
    // The parent's stream shows the same question, answered.
    let shown = session
        .events()
        .entries()
        .iter()
        .find_map(|e| ApprovalRequest::from_event(&e.event))
        .expect("the question is relayed to the parent");
    assert_eq!(shown, asked[0]);
    assert!(session.events().entries().iter().any(|e| matches!(
        &e.event,
        Event::ApprovalAnswered { call_id, answer: Answer::Once } if *call_id == asked[0].call_id
    )));
    assert_eq!(
        tools.calls(),
        [("delete_notes".to_string(), json!({"ids": [7]}))]
    );
}

#[test]
fn an_event_from_before_the_fields_reads_as_a_question_that_asks_most() {
    let old: Event = serde_json::from_value(json!({
        "type": "approval_needed",
        "call_id": "c1",
        "reason": {"kind": "bulk", "targets": 500, "limit": 200},
        "offer_always": false
    }))
    .unwrap();
    let request = ApprovalRequest::from_event(&old).unwrap();
    assert_eq!(request.class, ToolClass::Destructive);
    assert_eq!(request.tool, "");
    assert_eq!(
        request.answers,
        [AnswerKind::Once, AnswerKind::ThisChat, AnswerKind::Deny]
    );
    assert!(ApprovalRequest::from_event(&Event::Stopped).is_none());
}
