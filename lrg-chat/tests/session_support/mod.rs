//! Shared helpers of the session, events and permissions tests: a small
//! in-test tool set, a session on a ScriptedModel, and the checks every test
//! makes.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use lrg_chat::events::{Event, LogEntry, Subscription};
use lrg_chat::session::tool_pairing_errors;
use lrg_chat::tools::{ToolOutput, Tools, ToolsError};
use lrg_chat::{ChatSession, FixedModel, Permissions};
use lrg_providers::{
    Image, Part, RetryPolicy, ScriptedCall, ScriptedModel, ScriptedTurn, ToolAnnotations, ToolSpec,
};
use serde_json::{Value, json};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

/// How long any wait in a test may take before the test fails.
pub const WAIT: Duration = Duration::from_secs(10);

/// A tool set for the loop: a read tool, a change tool, a destructive bulk
/// tool, a tool that runs until the test lets it finish, and one that returns
/// an image. Records every call it runs.
pub struct TestTools {
    calls: Mutex<Vec<(String, Value)>>,
    /// `slow_search` holds until the test adds a permit.
    pub gate: Semaphore,
}

impl TestTools {
    pub fn new() -> Arc<Self> {
        Arc::new(Self {
            calls: Mutex::default(),
            gate: Semaphore::new(0),
        })
    }

    /// Calls that ran, in order.
    pub fn calls(&self) -> Vec<(String, Value)> {
        self.calls.lock().unwrap().clone()
    }
}

fn spec(
    name: &str,
    description: &str,
    read_only: Option<bool>,
    destructive: Option<bool>,
    schema: Value,
) -> ToolSpec {
    ToolSpec {
        name: name.into(),
        description: description.into(),
        input_schema: schema,
        annotations: ToolAnnotations {
            read_only_hint: read_only,
            destructive_hint: destructive,
            ..Default::default()
        },
    }
}

pub fn test_specs() -> Vec<ToolSpec> {
    vec![
        spec(
            "read_note",
            "Read a note by name.",
            Some(true),
            None,
            json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}),
        ),
        spec(
            "rename_note",
            "Rename a note.",
            Some(false),
            Some(false),
            json!({"type": "object", "properties": {"from": {"type": "string"}, "to": {"type": "string"}}, "required": ["from", "to"]}),
        ),
        spec(
            "delete_notes",
            "Delete notes by id.",
            None,
            None,
            json!({"type": "object", "properties": {"ids": {"type": "array", "items": {"type": "integer"}}}, "required": ["ids"]}),
        ),
        spec(
            "slow_search",
            "Search slowly.",
            Some(true),
            None,
            json!({"type": "object"}),
        ),
        spec(
            "snapshot",
            "Take a picture.",
            Some(true),
            None,
            json!({"type": "object"}),
        ),
    ]
}

impl Tools for TestTools {
    fn list(&self) -> BoxFuture<'_, Result<Vec<ToolSpec>, ToolsError>> {
        Box::pin(async { Ok(test_specs()) })
    }

    fn call<'a>(
        &'a self,
        name: &'a str,
        arguments: Value,
        _cancel: CancellationToken,
    ) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            self.calls
                .lock()
                .unwrap()
                .push((name.to_string(), arguments.clone()));
            match name {
                "read_note" => match arguments.get("name").and_then(Value::as_str) {
                    Some(n) => ToolOutput::text(format!("note {n}: buy milk")),
                    None => ToolOutput::error(
                        "invalid arguments: `name` is required, a string (expected {\"name\": string})",
                    ),
                },
                "rename_note" => ToolOutput::text("renamed"),
                "delete_notes" => match arguments.get("ids").and_then(Value::as_array) {
                    Some(ids) => ToolOutput::text(format!("deleted {} notes", ids.len())),
                    None => ToolOutput::error(
                        "invalid arguments: `ids` is required, an array of integers",
                    ),
                },
                "slow_search" => match tokio::time::timeout(WAIT, self.gate.acquire()).await {
                    Ok(Ok(_)) => ToolOutput::text("found it"),
                    _ => ToolOutput::error("gate never opened"),
                },
                "snapshot" => ToolOutput {
                    parts: vec![
                        Part::text("a picture"),
                        Part::Image(Image {
                            mime: "image/png".into(),
                            data: bytes::Bytes::from_static(b"\x89PNG"),
                        }),
                    ],
                    is_error: false,
                    warning: None,
                },
                other => ToolOutput::error(format!("no tool {other}")),
            }
        })
    }
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
        .tools(tools.clone())
        .permissions(permissions)
        .retry(RetryPolicy {
            max_retries: 2,
            base_delay: Duration::ZERO,
            max_delay: Duration::ZERO,
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
