//! Sessions kept in a store and found again: the registry's create-or-resume,
//! eviction and transcripts, and the session's own saving (write errors,
//! clear, retry).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::session_support;

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use lrg_chat::events::Event;
use lrg_chat::registry::{
    OpenRequest, Opened, OpenedHow, OtherModel, RegistryConfig, RegistryError, SessionRegistry,
};
use lrg_chat::store::{
    JsonlStore, ListFilter, ModelBinding, SessionId, SessionKeys, SessionMeta, SessionState,
    SessionStore, SessionSummary, StoreError, StoredSession,
};
use lrg_chat::transcript::{ToolOutcome, Transcript, TranscriptRow};
use lrg_chat::{Answer, ChatSession, FixedModel, Permissions, TurnOutcome};
use lrg_providers::{Message, ScriptedModel, ScriptedTurn};
use serde_json::json;
use session_support::*;
use tempfile::TempDir;

fn keys(context: &str) -> SessionKeys {
    SessionKeys::new("alice", context).unwrap()
}

fn model() -> ModelBinding {
    ModelBinding::new("script:scripted")
}

/// A registry over `store` whose sessions all play `script` (one shared
/// script, so turns go on across sessions and restarts).
fn registry(
    store: Option<Arc<dyn SessionStore>>,
    script: &ScriptedModel,
    config: RegistryConfig,
) -> SessionRegistry {
    let script = script.clone();
    let tools = TestTools::new();
    let registry = SessionRegistry::new(
        move |_: &ModelBinding| {
            Ok(
                ChatSession::builder(Arc::new(FixedModel::new(script.clone())))
                    .tools(tools.host.clone())
                    .permissions(Arc::new(Permissions::default())),
            )
        },
        config,
    );
    match store {
        Some(store) => registry.with_store(store),
        None => registry,
    }
}

fn jsonl(dir: &TempDir) -> Arc<dyn SessionStore> {
    Arc::new(JsonlStore::new(dir.path()))
}

async fn open(registry: &SessionRegistry, request: OpenRequest) -> Opened {
    tokio::time::timeout(WAIT, registry.open(request))
        .await
        .unwrap()
        .unwrap()
}

async fn say(session: &ChatSession, text: &str) -> TurnOutcome {
    let outcome = finish(session.send(text).unwrap()).await;
    assert_pairing(session);
    outcome
}

fn two_tool_chat() -> Vec<ScriptedTurn> {
    vec![
        calls(&[
            ("read_note", json!({"name": "todo"})),
            ("snapshot", json!({})),
        ]),
        reply("You need milk; here is a picture."),
        reply("Yes, milk."),
    ]
}

#[tokio::test]
async fn a_keyed_chat_resumes_after_a_restart_with_its_history_as_events() {
    let dir = TempDir::new().unwrap();
    let script = ScriptedModel::new(two_tool_chat());
    let first = registry(Some(jsonl(&dir)), &script, RegistryConfig::default());
    let opened = open(&first, OpenRequest::keyed(keys("doc:1"), model())).await;
    assert_eq!(opened.how, OpenedHow::Created);
    assert!(opened.session.is_saving().await);
    let outcome = say(&opened.session, "what is on my todo note?").await;
    assert!(matches!(outcome, TurnOutcome::Completed { .. }));
    let history = opened.session.history();
    let transcript = first.transcript(&opened.id).await.unwrap();
    drop(opened.session);
    drop(first);

    // A new process: a new store handle and registry on the same directory.
    let second = registry(Some(jsonl(&dir)), &script, RegistryConfig::default());
    let resumed = open(&second, OpenRequest::keyed(keys("doc:1"), model())).await;
    assert_eq!(resumed.id, opened.id);
    assert_eq!(resumed.how, OpenedHow::Resumed { rows: 4 });
    assert_eq!(resumed.session.history(), history);
    assert_eq!(second.transcript(&resumed.id).await.unwrap(), transcript);
    // A page connecting with after=0 rebuilds the conversation.
    snapshot!(log(&resumed.session));
    // And it goes on, saved.
    let outcome = say(&resumed.session, "anything else?").await;
    assert_eq!(
        outcome,
        TurnOutcome::Completed {
            text: "Yes, milk.".into(),
            json: None,
        }
    );
    let stored = second.store().unwrap().load(&resumed.id).await.unwrap();
    assert_eq!(stored.rows, resumed.session.history());
    assert_eq!(stored.rows.len(), 6);
}

#[tokio::test]
async fn a_live_session_answers_itself() {
    let dir = TempDir::new().unwrap();
    let script = ScriptedModel::new(vec![]);
    let registry = registry(Some(jsonl(&dir)), &script, RegistryConfig::default());
    let a = open(&registry, OpenRequest::keyed(keys("doc:1"), model())).await;
    let b = open(&registry, OpenRequest::keyed(keys("doc:1"), model())).await;
    assert_eq!(b.how, OpenedHow::Live);
    assert_eq!(a.id, b.id);
    let c = open(&registry, OpenRequest::keyed(keys("doc:2"), model())).await;
    assert_ne!(c.id, a.id);
    let d = open(&registry, OpenRequest::new(model())).await;
    let e = open(&registry, OpenRequest::new(model())).await;
    assert_ne!(d.id, e.id, "unkeyed opens always create");
    assert_eq!(registry.len(), 4);
}

#[tokio::test]
async fn another_model_is_refused_or_replaced_never_deleted_the_same_model_resumes() {
    let dir = TempDir::new().unwrap();
    let script = ScriptedModel::new(two_tool_chat());
    let registry = registry(Some(jsonl(&dir)), &script, RegistryConfig::default());
    let first = open(&registry, OpenRequest::keyed(keys("doc:1"), model())).await;
    say(&first.session, "what is on my todo note?").await;

    // The same provider:model on another connection: the same chat.
    let moved = open(
        &registry,
        OpenRequest::keyed(keys("doc:1"), model().with_connection("laptop")),
    )
    .await;
    assert_eq!(moved.how, OpenedHow::Resumed { rows: 4 });
    assert_eq!(moved.id, first.id);
    assert_eq!(moved.session.history(), first.session.history());

    // Another model: refused by default, nothing changed.
    let err = registry
        .open(OpenRequest::keyed(
            keys("doc:1"),
            ModelBinding::new("openai:gpt-test"),
        ))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, RegistryError::OtherModel { id, stored_model, asked_model }
            if *id == first.id && stored_model == "script:scripted" && asked_model == "openai:gpt-test"),
        "{err}"
    );
    assert!(registry.get(&first.id).is_some(), "still live");

    // Asked to replace it: a new, empty chat; the old one is archived, kept.
    let other = open(
        &registry,
        OpenRequest::keyed(keys("doc:1"), ModelBinding::new("openai:gpt-test"))
            .on_other_model(OtherModel::Replace),
    )
    .await;
    assert_eq!(
        other.how,
        OpenedHow::Replaced {
            archived: first.id.clone(),
            old_model: "script:scripted".into()
        }
    );
    assert!(other.session.history().is_empty());
    let store = registry.store().unwrap();
    let old = store.load(&first.id).await.unwrap();
    assert!(old.meta.archived);
    assert_eq!(old.rows.len(), 4);
    assert_eq!(store.list(&ListFilter::all()).await.unwrap().len(), 2);
}

/// Without a store the same rules hold for the live chats: another model
/// is refused, carried over from the live history, or replaced with the
/// old chat kept live.
#[tokio::test]
async fn in_memory_the_keys_on_another_model_are_refused_carried_or_replaced() {
    let script = ScriptedModel::new(two_tool_chat());
    let registry = registry(None, &script, RegistryConfig::default());
    let first = open(&registry, OpenRequest::keyed(keys("doc:1"), model())).await;
    say(&first.session, "what is on my todo note?").await;
    let history = first.session.history();
    let other = || OpenRequest::keyed(keys("doc:1"), ModelBinding::new("openai:gpt-test"));

    let err = registry.open(other()).await.unwrap_err();
    assert!(matches!(err, RegistryError::OtherModel { .. }), "{err}");
    let carried = open(&registry, other().on_other_model(OtherModel::CarryOver)).await;
    assert_eq!(carried.id, first.id);
    assert_eq!(
        carried.how,
        OpenedHow::CarriedOver {
            from: "script:scripted".into(),
            rows: 4
        }
    );
    assert_eq!(carried.session.history(), history);
    assert_eq!(
        registry.kept_model(&keys("doc:1")).await.unwrap(),
        Some(ModelBinding::new("openai:gpt-test"))
    );

    let replaced = open(
        &registry,
        OpenRequest::keyed(keys("doc:1"), model()).on_other_model(OtherModel::Replace),
    )
    .await;
    assert_eq!(
        replaced.how,
        OpenedHow::Replaced {
            archived: first.id.clone(),
            old_model: "openai:gpt-test".into()
        }
    );
    assert!(registry.is_live(&first.id), "the old chat goes on");
    let again = open(&registry, OpenRequest::keyed(keys("doc:1"), model())).await;
    assert_eq!((again.how, again.id), (OpenedHow::Live, replaced.id));
}

#[tokio::test]
async fn idle_keyed_sessions_are_evicted_unkeyed_never() {
    let dir = TempDir::new().unwrap();
    let script = ScriptedModel::new(vec![reply("hi")]);
    let config = RegistryConfig::default().idle(Duration::from_millis(50));
    let registry = registry(Some(jsonl(&dir)), &script, config);
    let keyed = open(&registry, OpenRequest::keyed(keys("doc:1"), model())).await;
    say(&keyed.session, "hello").await;
    let unkeyed = open(&registry, OpenRequest::new(model())).await;
    tokio::time::sleep(Duration::from_millis(120)).await;
    assert_eq!(registry.evict_idle().await, 1);
    assert!(registry.get(&keyed.id).is_none());
    assert!(registry.get(&unkeyed.id).is_some());
    // Evicted to the store: its transcript is still there, and it resumes.
    let transcript = registry.transcript(&keyed.id).await.unwrap();
    assert_eq!(transcript.rows.len(), 2);
    let back = open(&registry, OpenRequest::keyed(keys("doc:1"), model())).await;
    assert_eq!(back.how, OpenedHow::Resumed { rows: 2 });
    assert_eq!(back.id, keyed.id);
}

#[tokio::test]
async fn the_sweeper_evicts_on_its_own() {
    let dir = TempDir::new().unwrap();
    let script = ScriptedModel::new(vec![]);
    let config = RegistryConfig::default().idle(Duration::from_millis(30));
    let registry = Arc::new(registry(Some(jsonl(&dir)), &script, config));
    let sweeper = registry.spawn_sweeper(Duration::from_millis(10));
    open(&registry, OpenRequest::keyed(keys("doc:1"), model())).await;
    tokio::time::timeout(WAIT, async {
        while !registry.is_empty() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .unwrap();
    sweeper.abort();
}

#[tokio::test]
async fn a_full_registry_evicts_the_longest_idle_keyed_session_or_refuses() {
    let dir = TempDir::new().unwrap();
    let script = ScriptedModel::new(vec![]);
    let config = RegistryConfig::default().max_live(2);
    let registry = registry(Some(jsonl(&dir)), &script, config);
    let a = open(&registry, OpenRequest::keyed(keys("a"), model())).await;
    tokio::time::sleep(Duration::from_millis(5)).await;
    let b = open(&registry, OpenRequest::keyed(keys("b"), model())).await;
    tokio::time::sleep(Duration::from_millis(5)).await;
    registry.get(&a.id).unwrap();
    let c = open(&registry, OpenRequest::keyed(keys("c"), model())).await;
    assert_eq!(registry.len(), 2);
    assert!(registry.get(&b.id).is_none(), "b was the longest idle");
    assert!(registry.get(&a.id).is_some());
    assert!(registry.get(&c.id).is_some());

    let unkeyed = registry_of_unkeyed().await;
    let err = unkeyed.open(OpenRequest::new(model())).await.unwrap_err();
    assert!(matches!(err, RegistryError::Full(2)), "{err}");
    assert!(err.to_string().contains("none can be evicted"), "{err}");
}

async fn registry_of_unkeyed() -> SessionRegistry {
    let script = ScriptedModel::new(vec![]);
    let registry = registry(None, &script, RegistryConfig::default().max_live(2));
    open(&registry, OpenRequest::new(model())).await;
    open(&registry, OpenRequest::new(model())).await;
    registry
}

#[tokio::test]
async fn end_deletes_from_the_store() {
    let dir = TempDir::new().unwrap();
    let script = ScriptedModel::new(vec![reply("hi")]);
    let registry = registry(Some(jsonl(&dir)), &script, RegistryConfig::default());
    let opened = open(&registry, OpenRequest::keyed(keys("doc:1"), model())).await;
    say(&opened.session, "hello").await;
    assert!(registry.end(&opened.id).await.unwrap());
    assert!(registry.get(&opened.id).is_none());
    assert!(matches!(
        registry.transcript(&opened.id).await,
        Err(RegistryError::NotFound(_))
    ));
    assert!(!registry.end(&opened.id).await.unwrap());
    let again = open(&registry, OpenRequest::keyed(keys("doc:1"), model())).await;
    assert_eq!(again.how, OpenedHow::Created);
}

/// Every outcome a call can have, each produced by the loop itself, as the
/// transcript shows it.
#[tokio::test]
async fn transcript_rows_carry_each_call_outcome() {
    let script = ScriptedModel::new(vec![
        calls(&[
            ("read_note", json!({"name": "todo"})),
            ("read_note", json!({"name": "todo"})),
            ("no_such_tool", json!({})),
            ("rename_note", json!({"wrong": 1})),
            ("delete_notes", json!({"ids": [1]})),
        ]),
        reply("Done what I could."),
        calls(&[("delete_notes", json!({"ids": [2]}))]),
    ]);
    let registry = registry(None, &script, RegistryConfig::default());
    let opened = open(&registry, OpenRequest::new(model())).await;
    let session = &opened.session;
    let mut sub = session.subscribe(0);
    let handle = session.send("tidy up").unwrap();
    // rename_note changes things: it asks, runs, and fails on its arguments.
    let call = next_approval(&mut sub).await;
    session.answer_approval(&call, Answer::Once).unwrap();
    let call = next_approval(&mut sub).await;
    session
        .answer_approval(&call, Answer::Deny { note: None })
        .unwrap();
    finish(handle).await;
    let handle = session.send("delete note 2").unwrap();
    next_approval(&mut sub).await;
    session.stop();
    finish(handle).await;

    let transcript = registry.transcript(&opened.id).await.unwrap();
    let outcomes: Vec<(String, ToolOutcome)> = transcript
        .rows
        .iter()
        .filter_map(|r| match r {
            TranscriptRow::ToolCall { tool, outcome, .. } => Some((tool.clone(), *outcome)),
            _ => None,
        })
        .collect();
    let expected = [
        ("read_note", ToolOutcome::Ok),
        ("read_note", ToolOutcome::Skipped),
        ("no_such_tool", ToolOutcome::Skipped),
        ("rename_note", ToolOutcome::Failed),
        ("delete_notes", ToolOutcome::Denied),
        ("delete_notes", ToolOutcome::Stopped),
    ];
    let expected: Vec<(String, ToolOutcome)> =
        expected.iter().map(|(t, o)| (t.to_string(), *o)).collect();
    assert_eq!(outcomes, expected);
    assert!(!transcript.truncated);
    snapshot!(transcript);
}

#[tokio::test]
async fn clear_and_retry_rewrite_the_store() {
    let dir = TempDir::new().unwrap();
    let script = ScriptedModel::new(vec![reply("one"), reply("two"), reply("three")]);
    let registry = registry(Some(jsonl(&dir)), &script, RegistryConfig::default());
    let opened = open(&registry, OpenRequest::keyed(keys("doc:1"), model())).await;
    let store = registry.store().unwrap().clone();
    say(&opened.session, "first").await;
    finish(opened.session.retry_last().unwrap()).await;
    let stored = store.load(&opened.id).await.unwrap();
    assert_eq!(stored.rows, opened.session.history());
    assert_eq!(stored.rows[1], Message::assistant("two"));
    opened.session.clear().unwrap();
    opened.session.save().await;
    assert!(store.load(&opened.id).await.unwrap().rows.is_empty());
    say(&opened.session, "again").await;
    assert_eq!(
        store.load(&opened.id).await.unwrap().rows,
        vec![Message::user("again"), Message::assistant("three")]
    );
}

/// A store whose appends fail, as a full or read-only disk does.
#[derive(Debug)]
struct FullDisk(JsonlStore);

impl SessionStore for FullDisk {
    fn create<'a>(&'a self, meta: &'a SessionMeta) -> BoxFuture<'a, Result<(), StoreError>> {
        self.0.create(meta)
    }
    fn resume<'a>(
        &'a self,
        id: &'a SessionId,
        max_rows: usize,
    ) -> BoxFuture<'a, Result<StoredSession, StoreError>> {
        self.0.resume(id, max_rows)
    }
    fn append<'a>(
        &'a self,
        _: &'a SessionId,
        _: &'a [Message],
        _: &'a SessionState,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async {
            Err(StoreError::Io {
                path: "/full/disk.jsonl".into(),
                source: std::io::Error::from_raw_os_error(28),
            })
        })
    }
    fn rewrite<'a>(
        &'a self,
        id: &'a SessionId,
        rows: &'a [Message],
        state: &'a SessionState,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        self.0.rewrite(id, rows, state)
    }
    fn load<'a>(&'a self, id: &'a SessionId) -> BoxFuture<'a, Result<StoredSession, StoreError>> {
        self.0.load(id)
    }
    fn list<'a>(
        &'a self,
        filter: &'a ListFilter,
    ) -> BoxFuture<'a, Result<Vec<SessionSummary>, StoreError>> {
        self.0.list(filter)
    }
    fn delete<'a>(&'a self, id: &'a SessionId) -> BoxFuture<'a, Result<bool, StoreError>> {
        self.0.delete(id)
    }
    fn release<'a>(&'a self, id: &'a SessionId) -> BoxFuture<'a, ()> {
        self.0.release(id)
    }
}

#[tokio::test]
async fn a_write_error_warns_once_and_the_chat_goes_on_in_memory() {
    let dir = TempDir::new().unwrap();
    let script = ScriptedModel::new(two_tool_chat());
    let store: Arc<dyn SessionStore> = Arc::new(FullDisk(JsonlStore::new(dir.path())));
    let registry = registry(Some(store), &script, RegistryConfig::default());
    let opened = open(&registry, OpenRequest::keyed(keys("doc:1"), model())).await;
    say(&opened.session, "what is on my todo note?").await;
    let outcome = say(&opened.session, "anything else?").await;
    assert_eq!(
        outcome,
        TurnOutcome::Completed {
            text: "Yes, milk.".into(),
            json: None,
        }
    );
    assert!(!opened.session.is_saving().await);
    let warnings: Vec<String> = opened
        .session
        .events()
        .entries()
        .iter()
        .filter_map(|e| match &e.event {
            Event::Warning { message, .. } => Some(message.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].starts_with("This chat is no longer being saved: /full/disk.jsonl: "),
        "{}",
        warnings[0]
    );
    assert!(warnings[0].contains("in memory only"));
    assert_eq!(opened.session.history().len(), 6);
}

#[tokio::test]
async fn a_store_that_cannot_create_leaves_an_unsaved_chat_that_says_so() {
    let dir = TempDir::new().unwrap();
    // The sessions directory is a file: nothing can be created under it.
    let blocked = dir.path().join("sessions");
    std::fs::write(&blocked, b"not a directory").unwrap();
    let script = ScriptedModel::new(vec![reply("hi")]);
    let store: Arc<dyn SessionStore> = Arc::new(JsonlStore::new(&blocked));
    let registry = registry(Some(store), &script, RegistryConfig::default());
    let opened = open(&registry, OpenRequest::keyed(keys("doc:1"), model())).await;
    assert!(!opened.session.is_saving().await);
    assert_eq!(
        say(&opened.session, "hello").await,
        TurnOutcome::Completed {
            text: "hi".into(),
            json: None,
        }
    );
    let first = &opened.session.events().entries()[0];
    let Event::Warning { message, .. } = &first.event else {
        panic!("{first:?}")
    };
    assert!(
        message.starts_with("This chat is not being saved: "),
        "{message}"
    );
}

#[tokio::test]
async fn transcripts_of_long_chats_are_bounded() {
    let rows: Vec<Message> = (0..400)
        .flat_map(|i| {
            [
                Message::user(format!("q{i}")),
                Message::assistant("a".repeat(3000)),
            ]
        })
        .collect();
    let t = Transcript::of(&rows);
    assert!(t.truncated);
    assert!(t.rows.len() <= 128);
    assert_eq!(
        t.rows.last(),
        Some(&TranscriptRow::Assistant {
            text: "a".repeat(3000),
            reasoning: String::new()
        })
    );
}

/// `open_with`: the caller's build runs only when a session must be built,
/// and before anything stored changes, so a model that cannot be had leaves
/// the old chat where it was.
#[tokio::test]
async fn open_with_builds_only_when_needed_and_before_any_change() {
    let dir = TempDir::new().unwrap();
    let script = ScriptedModel::new(two_tool_chat());
    let registry =
        SessionRegistry::without_factory(RegistryConfig::default()).with_store(jsonl(&dir));
    let build = |script: &ScriptedModel| {
        let script = script.clone();
        move |binding: &ModelBinding| {
            let name = binding.model.clone();
            std::future::ready(Ok::<_, RegistryError>((
                ChatSession::builder(Arc::new(FixedModel::new(script))),
                name,
            )))
        }
    };
    let (first, built) = registry
        .open_with(OpenRequest::keyed(keys("doc:1"), model()), build(&script))
        .await
        .unwrap();
    assert_eq!(
        (first.how.clone(), built.as_deref()),
        (OpenedHow::Created, Some("script:scripted"))
    );
    say(&first.session, "what is on my todo note?").await;

    let (live, built) = registry
        .open_with(
            OpenRequest::keyed(keys("doc:1"), model()),
            |_: &ModelBinding| async { panic!("a live session is not built again") },
        )
        .await
        .unwrap();
    let built: Option<()> = built;
    assert_eq!(
        (live.how, live.id.clone(), built),
        (OpenedHow::Live, first.id.clone(), None)
    );

    // Another model that cannot be had: refused, the old chat untouched.
    let err = registry
        .open_with(
            OpenRequest::keyed(keys("doc:1"), ModelBinding::new("nope:x"))
                .on_other_model(OtherModel::Replace),
            |binding: &ModelBinding| {
                let model = binding.model.clone();
                async move {
                    Err::<(lrg_chat::session::ChatSessionBuilder, ()), _>(RegistryError::Model {
                        model,
                        reason: "no such model".into(),
                    })
                }
            },
        )
        .await
        .unwrap_err();
    assert!(err.to_string().contains("no such model"), "{err}");
    let stored = registry.store().unwrap().load(&first.id).await.unwrap();
    assert_eq!(stored.rows, first.session.history());
    assert!(registry.is_live(&first.id), "still live, as it was");
    // No factory: `open` refuses once a session must be built.
    registry.release(&first.id).await;
    let err = registry
        .open(OpenRequest::keyed(keys("doc:1"), model()))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("no session factory"), "{err}");
    let (again, _) = registry
        .open_with(OpenRequest::keyed(keys("doc:1"), model()), build(&script))
        .await
        .unwrap();
    assert_eq!(again.how, OpenedHow::Resumed { rows: 4 });
    assert_eq!(again.id, first.id);
}
