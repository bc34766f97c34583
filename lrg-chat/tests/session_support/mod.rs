//! Shared helpers of the session, events and permissions tests: a small
//! in-test tool set, a session on a ScriptedModel, and the checks every test
//! makes.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use lrg_chat::events::{Event, LogEntry, Subscription};
use lrg_chat::session::tool_pairing_errors;
use lrg_chat::tools::ToolHost;
use lrg_chat::{ChatSession, FixedModel, Permissions};
use lrg_providers::{
    Image, Part, RetryPolicy, ScriptedCall, ScriptedModel, ScriptedTurn, ToolAnnotations, ToolSpec,
};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::Semaphore;

/// How long any wait in a test may take before the test fails.
pub const WAIT: Duration = Duration::from_secs(10);

/// The tools of these tests: Rust functions on a real [`ToolHost`] (so the
/// host's argument checking is exercised too): a read tool, a change tool, a
/// destructive bulk tool, a read tool that runs until the test lets it
/// finish, and one that returns an image. Records every call that ran.
pub struct TestTools {
    /// The host the session calls.
    pub host: Arc<ToolHost>,
    calls: Arc<Mutex<Vec<(String, Value)>>>,
    /// `slow_search` holds until the test adds a permit.
    pub gate: Arc<Semaphore>,
}

#[derive(Deserialize, JsonSchema)]
struct NoteName {
    /// Which note.
    name: String,
}

#[derive(Deserialize, JsonSchema)]
struct Rename {
    /// The note's name now.
    from: String,
    /// Its new name.
    to: String,
}

#[derive(Deserialize, JsonSchema)]
struct Ids {
    /// Notes to delete.
    ids: Vec<i64>,
}

#[derive(Deserialize, JsonSchema)]
struct Nothing {}

fn annotations(read_only: Option<bool>, destructive: Option<bool>) -> ToolAnnotations {
    ToolAnnotations {
        read_only_hint: read_only,
        destructive_hint: destructive,
        ..Default::default()
    }
}

impl TestTools {
    pub fn new() -> Arc<Self> {
        let host = Arc::new(ToolHost::new());
        let calls: Arc<Mutex<Vec<(String, Value)>>> = Arc::default();
        let gate = Arc::new(Semaphore::new(0));
        let log = calls.clone();
        host.add_fn(
            "read_note",
            "Read a note by name.",
            annotations(Some(true), None),
            move |a: NoteName| {
                log.lock()
                    .unwrap()
                    .push(("read_note".into(), json!({"name": a.name})));
                async move { Ok::<_, String>(format!("note {}: buy milk", a.name)) }
            },
        )
        .unwrap();
        let log = calls.clone();
        host.add_fn(
            "rename_note",
            "Rename a note.",
            annotations(Some(false), Some(false)),
            move |a: Rename| {
                log.lock()
                    .unwrap()
                    .push(("rename_note".into(), json!({"from": a.from, "to": a.to})));
                async move { Ok::<_, String>("renamed".to_string()) }
            },
        )
        .unwrap();
        let log = calls.clone();
        host.add_fn(
            "delete_notes",
            "Delete notes by id.",
            annotations(None, None),
            move |a: Ids| {
                log.lock()
                    .unwrap()
                    .push(("delete_notes".into(), json!({"ids": a.ids})));
                async move { Ok::<_, String>(format!("deleted {} notes", a.ids.len())) }
            },
        )
        .unwrap();
        let log = calls.clone();
        let g = gate.clone();
        host.add_fn(
            "slow_search",
            "Search slowly.",
            annotations(Some(true), None),
            move |_: Nothing| {
                log.lock().unwrap().push(("slow_search".into(), json!({})));
                let gate = g.clone();
                async move {
                    match tokio::time::timeout(WAIT, gate.acquire()).await {
                        Ok(Ok(_)) => Ok("found it".to_string()),
                        _ => Err("the test never opened the gate"),
                    }
                }
            },
        )
        .unwrap();
        let log = calls.clone();
        host.add_fn(
            "snapshot",
            "Take a picture.",
            annotations(Some(true), None),
            move |_: Nothing| {
                log.lock().unwrap().push(("snapshot".into(), json!({})));
                async move {
                    Ok::<_, String>(vec![
                        Part::text("a picture"),
                        Part::Image(Image {
                            mime: "image/png".into(),
                            data: bytes::Bytes::from_static(b"\x89PNG"),
                        }),
                    ])
                }
            },
        )
        .unwrap();
        Arc::new(Self { host, calls, gate })
    }

    /// Calls that ran, in order.
    pub fn calls(&self) -> Vec<(String, Value)> {
        self.calls.lock().unwrap().clone()
    }
}

/// Specs shaped like the test tools, for hand-written `Tools` impls.
pub fn test_specs() -> Vec<ToolSpec> {
    [
        "read_note",
        "rename_note",
        "delete_notes",
        "slow_search",
        "snapshot",
    ]
    .into_iter()
    .map(|name| ToolSpec {
        name: name.into(),
        description: String::new(),
        input_schema: json!({"type": "object"}),
        annotations: annotations(Some(true), None),
        output_schema: None,
    })
    .collect()
}

/// A scripted turn that calls tools.
pub fn calls(calls: &[(&str, Value)]) -> ScriptedTurn {
    ScriptedTurn {
        calls: calls
            .iter()
            .map(|(name, arguments)| ScriptedCall {
                name: name.to_string(),
                arguments: arguments.clone(),
            })
            .collect(),
        ..Default::default()
    }
}

/// A scripted turn that answers with text.
pub fn reply(text: &str) -> ScriptedTurn {
    ScriptedTurn {
        text: Some(text.into()),
        ..Default::default()
    }
}

/// A session on `turns` with the test tools and in-memory default
/// permissions; retries are immediate so tests stay fast and deterministic.
pub fn new_session(turns: Vec<ScriptedTurn>) -> (ChatSession, ScriptedModel, Arc<TestTools>) {
    session_with(turns, Arc::new(Permissions::default()))
}

pub fn session_with(
    turns: Vec<ScriptedTurn>,
    permissions: Arc<Permissions>,
) -> (ChatSession, ScriptedModel, Arc<TestTools>) {
    let model = ScriptedModel::new(turns);
    let tools = TestTools::new();
    let session = ChatSession::builder(Arc::new(FixedModel::new(model.clone())))
        .tools(tools.host.clone())
        .permissions(permissions)
        .retry(RetryPolicy {
            max_retries: 2,
            base_delay: Duration::ZERO,
            max_delay: Duration::ZERO,
            deadline: None,
        })
        .build();
    (session, model, tools)
}

/// The numbered log as JSON, for snapshots.
pub fn log(session: &ChatSession) -> Vec<Value> {
    session
        .events()
        .entries()
        .iter()
        .map(|e| serde_json::to_value(e.as_ref()).unwrap())
        .collect()
}

/// The invariant every test checks: each tool call in the history has
/// exactly one result, and no result lacks its call.
pub fn assert_pairing(session: &ChatSession) {
    let errors = tool_pairing_errors(&session.history());
    assert!(
        errors.is_empty(),
        "tool call/result pairing broken: {errors:?}\n{:#?}",
        session.history()
    );
}

/// Read `sub` until an event matches `pred`; fails the test after [`WAIT`].
pub async fn wait_for(sub: &mut Subscription, pred: impl Fn(&Event) -> bool) -> Arc<LogEntry> {
    tokio::time::timeout(WAIT, async {
        loop {
            match sub.next().await {
                Some(entry) if pred(&entry.event) => return entry,
                Some(_) => {}
                None => panic!("event stream ended while waiting"),
            }
        }
    })
    .await
    .expect("timed out waiting for an event")
}

/// Wait for the next approval question and return its call id.
pub async fn next_approval(sub: &mut Subscription) -> String {
    match &wait_for(sub, |e| matches!(e, Event::ApprovalNeeded { .. }))
        .await
        .event
    {
        Event::ApprovalNeeded { call_id, .. } => call_id.clone(),
        _ => unreachable!(),
    }
}

/// Await a turn with a timeout.
pub async fn finish(handle: lrg_chat::TurnHandle) -> lrg_chat::TurnOutcome {
    tokio::time::timeout(WAIT, handle)
        .await
        .expect("the turn did not finish in time")
}

/// `insta::assert_json_snapshot!` with map keys sorted, so snapshots do not
/// depend on whether serde_json preserves insertion order in this build.
#[macro_export]
macro_rules! snapshot {
    ($($args:tt)*) => {
        insta::with_settings!({ sort_maps => true }, { insta::assert_json_snapshot!($($args)*) })
    };
}
