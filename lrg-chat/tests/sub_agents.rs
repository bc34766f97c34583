//! Sub-agents, driven by ScriptedModels: one script for the parent and one
//! per sub-agent (a router picks it by the conversation's first message),
//! with tools that hold each sub-agent until the test lets it finish, so
//! results arrive in the order the test chooses.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::session_support;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use lrg_chat::events::Event;
use lrg_chat::session::ChatSessionBuilder;
use lrg_chat::store::{JsonlStore, ModelBinding, SessionMeta, SessionStore};
use lrg_chat::sub_agents::{SubAgentStatus, SubAgents};
use lrg_chat::{Answer, ChatSession, FixedModel, Permissions, TurnOutcome};
use lrg_providers::{
    ChatModel, ModelInfo, ModelLocation, Part, Role, ScriptedModel, ScriptedTurn, ToolAnnotations,
    TurnRequest, TurnStream,
};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use session_support::*;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

/// Sends each turn to the script of the conversation's first message: a
/// sub-agent's prompt, or else the parent's (`script:router`; also the HTTP
/// tests' model, `http_sub_agents.rs`).
pub(crate) struct Router {
    pub(crate) parent: ScriptedModel,
    pub(crate) subs: HashMap<String, ScriptedModel>,
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

#[derive(Deserialize, JsonSchema)]
struct GateArgs {
    /// Which gate to wait at.
    name: String,
}

/// `wait_gate {name}`, a read tool that returns once the test opens gate
/// `name`.
#[derive(Clone, Default)]
struct Gates(Arc<Mutex<HashMap<String, Arc<Semaphore>>>>);

impl Gates {
    fn gate(&self, name: &str) -> Arc<Semaphore> {
        self.0
            .lock()
            .unwrap()
            .entry(name.to_string())
            .or_insert_with(|| Arc::new(Semaphore::new(0)))
            .clone()
    }

    fn open(&self, name: &str) {
        self.gate(name).add_permits(1);
    }
}

struct Setup {
    session: ChatSession,
    parent: ScriptedModel,
    subs: HashMap<String, ScriptedModel>,
    gates: Gates,
    tools: Arc<TestTools>,
}

/// A sub-agent's script: wait at gate `name`, then answer `answer name`.
fn gated(name: &str) -> Vec<ScriptedTurn> {
    vec![
        calls(&[("wait_gate", json!({"name": name}))]),
        reply(&format!("answer {name}")),
    ]
}

/// `spawn_sub_agent` with one task per name (prompt `task NAME`).
fn spawn(names: &[&str]) -> ScriptedTurn {
    let tasks: Vec<Value> = names
        .iter()
        .map(|n| json!({"description": format!("find {n}"), "prompt": format!("task {n}")}))
        .collect();
    calls(&[("spawn_sub_agent", json!({ "tasks": tasks }))])
}

fn setup(
    parent: Vec<ScriptedTurn>,
    subs: Vec<(&str, Vec<ScriptedTurn>)>,
    limits: SubAgents,
    store: Option<(Arc<dyn SessionStore>, lrg_chat::store::SessionId)>,
) -> Setup {
    setup_with(parent, subs, limits, |builder| match store {
        Some((store, id)) => builder.store(store, id),
        None => builder,
    })
}

fn setup_with(
    parent: Vec<ScriptedTurn>,
    subs: Vec<(&str, Vec<ScriptedTurn>)>,
    limits: SubAgents,
    configure: impl FnOnce(ChatSessionBuilder) -> ChatSessionBuilder,
) -> Setup {
    let parent = ScriptedModel::named("parent", parent);
    let subs: HashMap<String, ScriptedModel> = subs
        .into_iter()
        .map(|(name, turns)| (format!("task {name}"), ScriptedModel::named(name, turns)))
        .collect();
    let router = Router {
        parent: parent.clone(),
        subs: subs.clone(),
    };
    let tools = TestTools::new();
    let gates = Gates::default();
    let g = gates.clone();
    tools
        .host
        .add_fn(
            "wait_gate",
            "Wait at a gate.",
            ToolAnnotations {
                read_only_hint: Some(true),
                ..Default::default()
            },
            move |a: GateArgs| {
                let gate = g.gate(&a.name);
                async move {
                    match tokio::time::timeout(WAIT, gate.acquire()).await {
                        Ok(Ok(_)) => Ok(format!("gate {} open", a.name)),
                        _ => Err("the test never opened the gate".to_string()),
                    }
                }
            },
        )
        .unwrap();
    let builder = ChatSession::builder(Arc::new(FixedModel::new(router)))
        .tools(tools.host.clone())
        .permissions(Arc::new(Permissions::default()))
        .sub_agents(limits);
    Setup {
        session: configure(builder).build(),
        parent,
        subs,
        gates,
        tools,
    }
}

/// Wait, bounded, until the session has nothing left to do.
async fn settled(session: &ChatSession) {
    tokio::time::timeout(WAIT, session.wait_settled())
        .await
        .expect("the session did not settle in time");
}

/// Wait, bounded, until `check` holds of the session's sub-agents.
async fn until(
    session: &ChatSession,
    check: impl Fn(&[lrg_chat::sub_agents::SubAgentInfo]) -> bool,
) {
    tokio::time::timeout(WAIT, async {
        while !check(&session.sub_agents()) {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("sub-agents never got there: {:#?}", session.sub_agents()));
}

fn statuses(session: &ChatSession) -> Vec<SubAgentStatus> {
    session.sub_agents().iter().map(|a| a.status).collect()
}

/// The text of every tool result in the history, with its tool.
fn results(session: &ChatSession) -> Vec<(String, String)> {
    session
        .history()
        .iter()
        .filter(|m| m.role == Role::Tool)
        .flat_map(|m| m.parts.iter())
        .filter_map(|p| match p {
            Part::ToolResult(r) => Some((r.name.clone(), r.text_content())),
            _ => None,
        })
        .collect()
}

fn tool_names(request: &TurnRequest) -> Vec<String> {
    request.tools.iter().map(|t| t.name.clone()).collect()
}

/// The parent's log as JSON with its random id made stable.
fn stable_log(session: &ChatSession) -> Vec<Value> {
    let parent = session.sub_agents()[0]
        .id
        .split("::")
        .next()
        .unwrap()
        .to_string();
    let text = serde_json::to_string(&log(session)).unwrap();
    serde_json::from_str(&text.replace(&parent, "PARENT")).unwrap()
}

/// Open `gate`, then wait for the parent's turn reacting to it to end.
async fn release_and_react(s: &Setup, gate: &str, reaction: &str) {
    let mut events = s.session.subscribe(s.session.events().last_seq());
    s.gates.open(gate);
    wait_for(&mut events, |e| {
        matches!(
            e,
            Event::Busy {
                busy: true,
                autonomous: true,
                ..
            }
        )
    })
    .await;
    wait_for(
        &mut events,
        |e| matches!(e, Event::AssistantTurn { text, .. } if text == reaction),
    )
    .await;
    wait_for(&mut events, |e| {
        matches!(e, Event::Busy { busy: false, .. })
    })
    .await;
}

#[tokio::test]
async fn three_sub_agents_report_out_of_order_and_the_parent_reacts_to_each() {
    let s = setup(
        vec![
            spawn(&["a", "b", "c"]),
            reply("Three helpers are on it."),
            reply("b is in."),
            reply("c is in."),
            reply("a is in."),
        ],
        vec![("a", gated("a")), ("b", gated("b")), ("c", gated("c"))],
        SubAgents::default(),
        None,
    );
    let outcome = finish(s.session.send("look into a, b and c").unwrap()).await;
    assert_eq!(
        outcome,
        TurnOutcome::Completed {
            text: "Three helpers are on it.".into(),
            json: None,
        }
    );
    // The spawn returned at once: all three are still at their gates.
    until(&s.session, |a| {
        a.iter().all(|a| a.status == SubAgentStatus::Running)
    })
    .await;
    let spawned = &results(&s.session)[0].1;
    assert!(spawned.starts_with("Spawned 3 sub-agents: "), "{spawned}");
    assert!(!s.session.is_busy());
    assert!(!s.session.is_settled(), "idle, but its sub-agents work");
    // While they work, each one's own session is there to follow.
    let b_id = s.session.sub_agents()[1].id.clone();
    let b = s.session.sub_agent(&b_id).unwrap();

    release_and_react(&s, "b", "b is in.").await;
    release_and_react(&s, "c", "c is in.").await;
    release_and_react(&s, "a", "a is in.").await;
    settled(&s.session).await;

    assert_eq!(statuses(&s.session), [SubAgentStatus::Done; 3]);
    assert!(s.session.is_settled());
    assert_pairing(&s.session);
    // Each answer entered as a synthetic call paired with its result, in
    // the order they finished; only the final answers.
    let results = results(&s.session);
    assert_eq!(
        results[1..],
        [
            ("sub_agent_result".to_string(), "answer b".to_string()),
            ("sub_agent_result".into(), "answer c".into()),
            ("sub_agent_result".into(), "answer a".into()),
        ]
    );
    let history = s.session.history();
    let call = history
        .iter()
        .flat_map(|m| m.tool_calls())
        .find(|c| c.name == "sub_agent_result")
        .unwrap();
    let ids: Vec<String> = s
        .session
        .sub_agents()
        .iter()
        .map(|a| a.id.clone())
        .collect();
    assert!(
        ids[0].ends_with("::sub::1") && ids[1].ends_with("::sub::2"),
        "{ids:?}"
    );
    assert_eq!(
        call.arguments,
        json!({"sub_session_id": ids[1], "description": "find b"})
    );
    // The parent saw each answer in its autonomous turn.
    let requests = s.parent.requests();
    assert_eq!(requests.len(), 5);
    let last = requests[2].messages.last().unwrap();
    assert_eq!(last.role, Role::Tool);
    assert!(last.text().contains("answer b") || results_of(last).contains("answer b"));

    // Depth one: the parent is offered the sub-agent tools, a sub-agent is
    // not; a sub-agent starts from its prompt alone.
    let parent_tools = tool_names(&requests[0]);
    for tool in ["spawn_sub_agent", "list_sub_agents", "read_sub_agent"] {
        assert!(parent_tools.contains(&tool.to_string()), "{parent_tools:?}");
    }
    for sub in s.subs.values() {
        let request = &sub.requests()[0];
        let tools = tool_names(request);
        assert!(tools.contains(&"wait_gate".to_string()), "{tools:?}");
        assert!(
            !tools.iter().any(|t| t.contains("sub_agent")),
            "a sub-agent was offered sub-agent tools: {tools:?}"
        );
        assert_eq!(request.messages.len(), 1);
    }
    // Each sub-agent's own events are in its own stream; once its result
    // is in, the parent lets go of it.
    assert!(
        b.events()
            .entries()
            .iter()
            .any(|e| matches!(&e.event, Event::AssistantTurn { text, .. } if text == "answer b"))
    );
    for id in &ids {
        assert!(s.session.sub_agent(id).is_none(), "{id} is still held");
    }
    snapshot!(stable_log(&s.session));
}

fn results_of(message: &lrg_providers::Message) -> String {
    message
        .parts
        .iter()
        .filter_map(|p| match p {
            Part::ToolResult(r) => Some(r.text_content()),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn past_four_at_once_tasks_queue_and_start_as_others_finish() {
    let names = ["q1", "q2", "q3", "q4", "q5", "q6"];
    let s = setup(
        vec![spawn(&names), reply("Six helpers."), reply("q1 is in.")],
        names.iter().map(|n| (*n, gated(n))).collect(),
        SubAgents::default(),
        None,
    );
    finish(s.session.send("six things").unwrap()).await;
    let spawned = &results(&s.session)[0].1;
    assert!(
        spawned.contains("4 run at a time: 2 queued"),
        "the spawn result says what queued: {spawned}"
    );
    use SubAgentStatus::*;
    until(&s.session, |a| {
        a.iter().filter(|a| a.status == Running).count() == 4
    })
    .await;
    assert_eq!(statuses(&s.session)[4..], [Queued, Queued]);
    release_and_react(&s, "q1", "q1 is in.").await;
    // q1's place went to the first queued task.
    until(&s.session, |a| a[4].status == Running).await;
    assert_eq!(
        statuses(&s.session),
        [Done, Running, Running, Running, Running, Queued]
    );
    // Leave without reactions: stop them all.
    assert!(s.session.stop_with_sub_agents());
    for n in &names[1..] {
        s.gates.open(n);
    }
    settled(&s.session).await;
    assert_eq!(
        statuses(&s.session),
        [Done, Stopped, Stopped, Stopped, Stopped, Stopped]
    );
    assert_pairing(&s.session);
}

#[tokio::test]
async fn limits_refuse_with_a_clear_tool_result() {
    let s = setup(
        vec![
            spawn(&["l1", "l2", "l3"]),
            spawn(&["l1", "l2"]),
            spawn(&["l3", "l4"]),
            calls(&[("read_sub_agent", json!({"id": "nobody::sub::9"}))]),
            calls(&[("spawn_sub_agent", json!({"tasks": [{"description": "x"}]}))]),
            reply("Done spawning."),
        ],
        vec![("l1", gated("l1")), ("l2", gated("l2"))],
        SubAgents::default().max_per_call(2).max_per_message(3),
        None,
    );
    finish(s.session.send("many things").unwrap()).await;
    let results = results(&s.session);
    let texts: Vec<&str> = results.iter().map(|(_, t)| t.as_str()).collect();
    assert!(
        texts[0].contains("3 tasks in one call, and the limit is 2"),
        "{}",
        texts[0]
    );
    assert!(texts[1].starts_with("Spawned 2 sub-agents"), "{}", texts[1]);
    assert!(
        texts[2].contains("2 already spawned for this message, and the limit is 3"),
        "{}",
        texts[2]
    );
    assert!(
        texts[3].starts_with("There is no sub-agent `nobody::sub::9` of yours."),
        "{}",
        texts[3]
    );
    assert!(texts[4].starts_with("Invalid arguments: "), "{}", texts[4]);
    assert_eq!(s.session.sub_agents().len(), 2);
    // The refusals are results the model reads, not failures of the turn.
    let failed: Vec<bool> = s
        .session
        .events()
        .entries()
        .iter()
        .filter_map(|e| match &e.event {
            Event::ToolDone { ok, .. } => Some(*ok),
            _ => None,
        })
        .collect();
    assert_eq!(failed, [false, true, false, false, false]);
    s.session.stop_with_sub_agents();
    s.gates.open("l1");
    s.gates.open("l2");
    settled(&s.session).await;
}

#[tokio::test]
async fn stop_stops_queued_sub_agents_and_stop_with_sub_agents_the_running_ones() {
    let names = ["s1", "s2", "s3", "s4", "s5"];
    let s = setup(
        vec![spawn(&names), reply("Five helpers."), reply("s1 is in.")],
        names.iter().map(|n| (*n, gated(n))).collect(),
        SubAgents::default(),
        None,
    );
    finish(s.session.send("five things").unwrap()).await;
    use SubAgentStatus::*;
    until(&s.session, |a| {
        a.iter().filter(|a| a.status == Running).count() == 4
    })
    .await;
    // A plain stop: the queued one never starts, the running ones go on and
    // their answers still come back.
    assert!(s.session.stop(), "a queued sub-agent was stopped");
    assert_eq!(statuses(&s.session)[4], Stopped);
    release_and_react(&s, "s1", "s1 is in.").await;
    assert_eq!(statuses(&s.session)[..4], [Done, Running, Running, Running]);
    // Stopping with the sub-agents: the running ones end, and send nothing
    // back (the parent's script has no turn left for them).
    assert!(s.session.stop_with_sub_agents());
    for n in &names[1..4] {
        s.gates.open(n);
    }
    settled(&s.session).await;
    assert_eq!(
        statuses(&s.session),
        [Done, Stopped, Stopped, Stopped, Stopped]
    );
    assert_eq!(s.parent.remaining(), 0);
    assert_eq!(
        results(&s.session)
            .iter()
            .filter(|(t, _)| t == "sub_agent_result")
            .count(),
        1
    );
    assert_pairing(&s.session);
    assert!(
        s.subs["task s5"].requests().is_empty(),
        "the queued one never ran"
    );
}

#[tokio::test]
async fn a_sub_agents_approval_question_is_answered_on_the_parent() {
    let s = setup(
        vec![spawn(&["d"]), reply("On it."), reply("Deleted.")],
        vec![(
            "d",
            vec![
                calls(&[("delete_notes", json!({"ids": [7]}))]),
                reply("deleted note 7"),
            ],
        )],
        SubAgents::default(),
        None,
    );
    let mut events = s.session.subscribe(0);
    finish(s.session.send("delete note 7 in the background").unwrap()).await;
    let asked = wait_for(&mut events, |e| matches!(e, Event::ApprovalNeeded { .. })).await;
    let Event::ApprovalNeeded {
        call_id, sub_agent, ..
    } = &asked.event
    else {
        unreachable!()
    };
    let ask = sub_agent.as_ref().expect("labelled with the sub-agent");
    let id = &s.session.sub_agents()[0].id;
    assert_eq!(&ask.sub_session_id, id);
    assert_eq!(ask.tool, "delete_notes");
    assert_eq!(ask.arguments, json!({"ids": [7]}));
    assert!(call_id.starts_with(&format!("{id}::")), "{call_id}");
    assert_eq!(s.tools.calls(), []);
    s.session.answer_approval(call_id, Answer::Once).unwrap();
    wait_for(
        &mut events,
        |e| matches!(e, Event::ApprovalAnswered { call_id: c, .. } if c == call_id),
    )
    .await;
    wait_for(
        &mut events,
        |e| matches!(e, Event::AssistantTurn { text, .. } if text == "Deleted."),
    )
    .await;
    settled(&s.session).await;
    assert_eq!(
        s.tools.calls(),
        [("delete_notes".to_string(), json!({"ids": [7]}))]
    );
    assert_eq!(results(&s.session)[1].1, "deleted note 7");
}

#[tokio::test]
async fn transcripts_persist_under_their_ids_and_go_with_the_parent() {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn SessionStore> = Arc::new(JsonlStore::new(dir.path()));
    let meta = SessionMeta::new(ModelBinding::new("script:router"));
    let parent_id = meta.id.clone();
    store.create(&meta).await.unwrap();
    let sub_id = parent_id.sub_agent(1);
    let s = setup(
        vec![
            spawn(&["p"]),
            reply("Started."),
            calls(&[
                ("list_sub_agents", json!({})),
                ("read_sub_agent", json!({"id": sub_id.as_str(), "limit": 2})),
            ]),
            reply("p is in."),
        ],
        vec![("p", gated("p"))],
        SubAgents::default(),
        Some((store.clone(), parent_id.clone())),
    );
    finish(s.session.send("one thing").unwrap()).await;
    assert_eq!(s.session.sub_agents()[0].id, sub_id.as_str());
    release_and_react(&s, "p", "p is in.").await;
    settled(&s.session).await;
    s.session.save().await;

    // The model listed and read its sub-agent.
    let results = results(&s.session);
    let listed: Value = serde_json::from_str(&results[2].1).unwrap();
    assert_eq!(
        listed,
        json!([{"id": sub_id.as_str(), "description": "find p", "status": "done"}])
    );
    let page: Value = serde_json::from_str(&results[3].1).unwrap();
    assert_eq!(page["total_rows"], 3, "{page}");
    assert_eq!(page["rows"][0], json!({"type": "user", "text": "task p"}));
    assert_eq!(page["next_offset"], 2);

    // The sub-agent's transcript is stored under its own id.
    let stored = store.load(&sub_id).await.unwrap();
    assert_eq!(stored.rows.first().unwrap().text(), "task p");
    assert_eq!(stored.rows.last().unwrap().text(), "answer p");
    assert_eq!(stored.meta.model.model, "script:router");
    assert!(
        dir.path()
            .join(format!("{}.sub.1.jsonl", parent_id))
            .exists()
    );

    // Clearing the parent removes it.
    s.session.clear().unwrap();
    assert!(s.session.sub_agents().is_empty());
    tokio::time::timeout(WAIT, async {
        while store.load(&sub_id).await.is_ok() {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("the sub-agent's transcript was not deleted with the clear");
    assert!(store.load(&parent_id).await.is_ok(), "the parent stays");
}

#[tokio::test]
async fn deleting_the_parent_deletes_its_stored_sub_agents() {
    let dir = tempfile::tempdir().unwrap();
    let store = JsonlStore::new(dir.path());
    let parent = SessionMeta::new(ModelBinding::new("script:x"));
    let other = SessionMeta::new(ModelBinding::new("script:x"));
    store.create(&parent).await.unwrap();
    store.create(&other).await.unwrap();
    for (owner, n) in [(&parent, 1), (&parent, 2), (&other, 1)] {
        let mut meta = SessionMeta::new(ModelBinding::new("script:x"));
        meta.id = owner.id.sub_agent(n);
        store.create(&meta).await.unwrap();
    }
    assert_eq!(
        lrg_chat::store::delete_sub_agents(&store, &parent.id)
            .await
            .unwrap(),
        2
    );
    assert!(store.load(&parent.id.sub_agent(1)).await.is_err());
    assert!(store.load(&other.id.sub_agent(1)).await.is_ok());
    assert!(store.load(&parent.id).await.is_ok());
}

#[test]
fn sub_agent_ids_parse_and_name_their_parent() {
    let parent = lrg_chat::store::SessionId::random();
    let sub = parent.sub_agent(3);
    assert_eq!(sub.as_str(), format!("{parent}::sub::3"));
    assert_eq!(sub.parent(), Some(parent.clone()));
    assert_eq!(
        sub.as_str().parse::<lrg_chat::store::SessionId>().unwrap(),
        sub
    );
    assert_eq!(sub.sub_agent(4), parent.sub_agent(4), "one level deep");
    assert_eq!(parent.parent(), None);
    for bad in [
        format!("{parent}::sub::"),
        format!("{parent}::sub::x"),
        format!("{parent}::sub::1::sub::2"),
        "../x::sub::1".to_string(),
    ] {
        assert!(bad.parse::<lrg_chat::store::SessionId>().is_err(), "{bad}");
    }
}

/// The names of the tools in the history's calls, in order.
fn called(session: &ChatSession) -> Vec<String> {
    session
        .history()
        .iter()
        .flat_map(|m| m.tool_calls())
        .map(|c| c.name.clone())
        .collect()
}

#[tokio::test]
async fn an_answer_that_comes_while_the_parent_works_waits_for_the_end_of_its_message() {
    let s = setup(
        vec![
            spawn(&["w"]),
            reply("Started."),
            calls(&[("wait_gate", json!({"name": "hold"}))]),
            reply("Second message done."),
            reply("w is in."),
        ],
        vec![("w", gated("w"))],
        SubAgents::default(),
        None,
    );
    finish(s.session.send("start w").unwrap()).await;
    let second = s.session.send("now wait at the hold gate").unwrap();
    // The parent is in its tool when the sub-agent finishes.
    s.gates.open("w");
    until(&s.session, |a| a[0].status == SubAgentStatus::Done).await;
    assert!(s.session.is_busy());
    assert!(!called(&s.session).contains(&"sub_agent_result".to_string()));
    s.gates.open("hold");
    assert_eq!(
        finish(second).await,
        TurnOutcome::Completed {
            text: "Second message done.".into(),
            json: None,
        }
    );
    settled(&s.session).await;
    assert_eq!(
        called(&s.session),
        ["spawn_sub_agent", "wait_gate", "sub_agent_result"]
    );
    let history = s.session.history();
    assert_eq!(history.last().unwrap().text(), "w is in.");
    assert_pairing(&s.session);
}

#[tokio::test]
async fn after_a_stop_a_waiting_answer_enters_without_a_turn() {
    let s = setup(
        vec![
            spawn(&["w"]),
            reply("Started."),
            calls(&[("wait_gate", json!({"name": "hold"}))]),
            reply("never played"),
        ],
        vec![("w", gated("w"))],
        SubAgents::default(),
        None,
    );
    finish(s.session.send("start w").unwrap()).await;
    let second = s.session.send("now wait at the hold gate").unwrap();
    s.gates.open("w");
    until(&s.session, |a| a[0].status == SubAgentStatus::Done).await;
    assert!(s.session.stop());
    s.gates.open("hold");
    assert_eq!(finish(second).await, TurnOutcome::Stopped);
    settled(&s.session).await;
    assert_eq!(
        called(&s.session),
        ["spawn_sub_agent", "wait_gate", "sub_agent_result"]
    );
    assert_eq!(s.parent.remaining(), 1, "no turn after the person's stop");
    assert!(!s.session.events().entries().iter().any(|e| matches!(
        e.event,
        Event::Busy {
            autonomous: true,
            ..
        }
    )));
    assert_pairing(&s.session);
}

#[tokio::test]
async fn a_resumed_chat_numbers_new_sub_agents_after_its_stored_ones() {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn SessionStore> = Arc::new(JsonlStore::new(dir.path()));
    let meta = SessionMeta::new(ModelBinding::new("script:router"));
    let parent_id = meta.id.clone();
    store.create(&meta).await.unwrap();
    let first = setup(
        vec![spawn(&["r1"]), reply("Started."), reply("r1 is in.")],
        vec![("r1", gated("r1"))],
        SubAgents::default(),
        Some((store.clone(), parent_id.clone())),
    );
    finish(first.session.send("one").unwrap()).await;
    first.gates.open("r1");
    settled(&first.session).await;
    first.session.save().await;
    drop(first);
    store.release(&parent_id).await;

    let stored = store.resume(&parent_id, 64).await.unwrap();
    assert!(
        stored
            .rows
            .iter()
            .any(|m| m.tool_calls().any(|c| c.name == "sub_agent_result"))
    );
    let second = setup_with(
        vec![spawn(&["r2"]), reply("Again."), reply("r2 is in.")],
        vec![("r2", gated("r2"))],
        SubAgents::default(),
        |builder| {
            builder
                .store(store.clone(), parent_id.clone())
                .resumed(stored)
        },
    );
    finish(second.session.send("two").unwrap()).await;
    assert_eq!(
        second.session.sub_agents()[0].id,
        parent_id.sub_agent(2).as_str()
    );
    second.gates.open("r2");
    settled(&second.session).await;
    assert!(store.load(&parent_id.sub_agent(1)).await.is_ok());
    assert!(store.load(&parent_id.sub_agent(2)).await.is_ok());
}

/// A JSONL store whose writes of one session wait, while `closed`, for a
/// permit: the test decides when the parent's history becomes durable.
#[derive(Debug)]
struct HoldOne {
    inner: JsonlStore,
    id: lrg_chat::store::SessionId,
    closed: std::sync::atomic::AtomicBool,
    gate: Semaphore,
}

impl HoldOne {
    async fn pass(&self, id: &lrg_chat::store::SessionId) {
        if *id == self.id && self.closed.load(std::sync::atomic::Ordering::SeqCst) {
            self.gate.acquire().await.unwrap().forget();
        }
    }
}

type StoreFuture<'a, T> = futures::future::BoxFuture<'a, Result<T, lrg_chat::store::StoreError>>;

impl SessionStore for HoldOne {
    fn create<'a>(&'a self, meta: &'a SessionMeta) -> StoreFuture<'a, ()> {
        self.inner.create(meta)
    }
    fn resume<'a>(
        &'a self,
        id: &'a lrg_chat::store::SessionId,
        max_rows: usize,
    ) -> StoreFuture<'a, lrg_chat::store::StoredSession> {
        self.inner.resume(id, max_rows)
    }
    fn append<'a>(
        &'a self,
        id: &'a lrg_chat::store::SessionId,
        rows: &'a [lrg_providers::Message],
        state: &'a lrg_chat::store::SessionState,
    ) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            self.pass(id).await;
            self.inner.append(id, rows, state).await
        })
    }
    fn rewrite<'a>(
        &'a self,
        id: &'a lrg_chat::store::SessionId,
        rows: &'a [lrg_providers::Message],
        state: &'a lrg_chat::store::SessionState,
    ) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            self.pass(id).await;
            self.inner.rewrite(id, rows, state).await
        })
    }
    fn load<'a>(
        &'a self,
        id: &'a lrg_chat::store::SessionId,
    ) -> StoreFuture<'a, lrg_chat::store::StoredSession> {
        self.inner.load(id)
    }
    fn list<'a>(
        &'a self,
        filter: &'a lrg_chat::store::ListFilter,
    ) -> StoreFuture<'a, Vec<lrg_chat::store::SessionSummary>> {
        self.inner.list(filter)
    }
    fn delete<'a>(&'a self, id: &'a lrg_chat::store::SessionId) -> StoreFuture<'a, bool> {
        self.inner.delete(id)
    }
    fn release<'a>(
        &'a self,
        id: &'a lrg_chat::store::SessionId,
    ) -> futures::future::BoxFuture<'a, ()> {
        self.inner.release(id)
    }
}

/// The numbered `tool_done` events of sub-agent answers the parent showed.
fn shown_answers(session: &ChatSession) -> usize {
    session
        .events()
        .entries()
        .iter()
        .filter(|e| {
            e.seq.is_some()
                && matches!(&e.event, Event::ToolDone { call_id, .. }
                    if call_id.starts_with("sub_agent_result"))
        })
        .count()
}

/// A sub-agent's answer is shown in the parent only once the parent's
/// history holds it durably: a kill then must not take back a shown answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sub_agents_answer_is_shown_only_once_kept() {
    let dir = tempfile::tempdir().unwrap();
    let meta = SessionMeta::new(ModelBinding::new("script:router"));
    let parent_id = meta.id.clone();
    let store = Arc::new(HoldOne {
        inner: JsonlStore::new(dir.path()),
        id: parent_id.clone(),
        closed: false.into(),
        gate: Semaphore::new(0),
    });
    store.create(&meta).await.unwrap();
    let s = setup(
        vec![spawn(&["p"]), reply("Started."), reply("p is in.")],
        vec![("p", gated("p"))],
        SubAgents::default(),
        Some((store.clone(), parent_id.clone())),
    );
    finish(s.session.send("one thing").unwrap()).await;
    store
        .closed
        .store(true, std::sync::atomic::Ordering::SeqCst);
    s.gates.open("p");
    until(&s.session, |a| a[0].status == SubAgentStatus::Done).await;
    tokio::time::sleep(std::time::Duration::from_millis(150)).await;
    assert_eq!(
        shown_answers(&s.session),
        0,
        "the answer was shown before the parent kept it"
    );
    store
        .closed
        .store(false, std::sync::atomic::Ordering::SeqCst);
    store.gate.add_permits(100);
    settled(&s.session).await;
    assert_eq!(shown_answers(&s.session), 1);
    let kept = store.load(&parent_id).await.unwrap().rows;
    assert!(
        kept.iter()
            .any(|m| m.tool_calls().any(|c| c.name == "sub_agent_result")),
        "{kept:?}"
    );
    assert_pairing(&s.session);
}
