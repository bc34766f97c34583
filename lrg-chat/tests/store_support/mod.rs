//! The store conformance suite: every check any `SessionStore` must pass,
//! run by `store.rs` (JSONL) and `store_postgres.rs` (PostgreSQL) through
//! [`conformance_suite!`].
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use lrg_chat::session::tool_pairing_errors;
use lrg_chat::store::{
    INTERRUPTED_NOTE, ListFilter, ModelBinding, SessionKeys, SessionMeta, SessionState,
    SessionStore, StoreError,
};
use lrg_providers::{Image, Message, NativePart, Part, Role, ToolCall, ToolResult, Usage};
use serde_json::json;

mod kept_choices;
mod names;
mod reopen;
// Used through `conformance_suite!`, which not every test that shares this
// module runs.
#[allow(unused_imports)]
pub use kept_choices::*;
#[allow(unused_imports)]
pub use names::*;
#[allow(unused_imports)]
pub use reopen::*;

/// How long any store operation in a test may take.
pub const WAIT: Duration = Duration::from_secs(60);

/// Where a suite's sessions live: every call to `store` is a new handle on
/// the same data (as a second process would have).
pub trait Backend: Send + Sync {
    /// A new store handle on this backend's data.
    fn store(&self) -> Arc<dyn SessionStore>;
}

pub async fn within<T>(f: impl Future<Output = T>) -> T {
    tokio::time::timeout(WAIT, f)
        .await
        .expect("store operation timed out")
}

pub fn meta() -> SessionMeta {
    SessionMeta::new(ModelBinding::new("anthropic:claude-test").with_connection("work"))
}

pub fn state(n: u32) -> SessionState {
    let mut s = SessionState::default();
    s.granted = vec!["delete_notes".into()];
    s.usage = Usage::new(n, n / 2);
    s.updated_ms = 1_000 + u64::from(n);
    s
}

fn call(id: &str, name: &str) -> ToolCall {
    ToolCall {
        id: id.into(),
        name: name.into(),
        arguments: json!({"ids": [1, 2], "note": "ünïcödé \"quoted\"\n"}),
    }
}

/// One user message, an assistant turn calling `calls` tools, their results
/// and a final answer: a step of a multi-tool chat.
pub fn exchange(tag: &str, calls: usize) -> Vec<Message> {
    let ids: Vec<ToolCall> = (0..calls)
        .map(|i| call(&format!("{tag}_{i}"), "read_note"))
        .collect();
    let mut rows = vec![Message::user(format!("question {tag}"))];
    if calls > 0 {
        rows.push(Message {
            role: Role::Assistant,
            parts: ids.iter().cloned().map(Part::ToolCall).collect(),
        });
        rows.push(Message::tool_results(
            ids.iter().map(|c| ToolResult::text(c, "ok", false)),
        ));
    }
    rows.push(Message::assistant(format!("answer {tag}")));
    rows
}

/// Every kind of part, in the roles that carry them.
pub fn every_part() -> Vec<Message> {
    let c = call("c1", "snapshot");
    let image = Image {
        mime: "image/png".into(),
        data: Bytes::from_static(b"\x89PNG\r\n\x1a\n\0\xff"),
    };
    vec![
        Message {
            role: Role::User,
            parts: vec![Part::text("look at this"), Part::Image(image.clone())],
        },
        Message {
            role: Role::Assistant,
            parts: vec![
                Part::Native(NativePart {
                    provider: "anthropic".into(),
                    model: "claude-test".into(),
                    value: json!({"type": "thinking", "thinking": "hm", "signature": "c2lnbmF0dXJl"}),
                }),
                Part::reasoning("I should take a picture."),
                Part::text("Taking one."),
                Part::ToolCall(c.clone()),
            ],
        },
        Message::tool_results([ToolResult {
            call_id: c.id.clone(),
            name: c.name.clone(),
            parts: vec![Part::text("a picture"), Part::Image(image)],
            is_error: false,
        }]),
        Message::assistant("Here it is."),
    ]
}

pub async fn round_trip_every_part(backend: &dyn Backend) {
    let store = backend.store();
    let meta = meta()
        .with_keys(SessionKeys::new("me", "doc:1").unwrap())
        .with_owner("app");
    within(store.create(&meta)).await.unwrap();
    let rows = every_part();
    within(store.append(&meta.id, &rows[..1], &state(1)))
        .await
        .unwrap();
    within(store.append(&meta.id, &rows[1..], &state(2)))
        .await
        .unwrap();
    let loaded = within(backend.store().load(&meta.id)).await.unwrap();
    assert_eq!(loaded.meta, meta);
    assert_eq!(loaded.rows, rows);
    assert_eq!(loaded.state, state(2));
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    // A duplicate create is refused, and does not touch the first.
    let err = within(store.create(&meta)).await.unwrap_err();
    assert!(
        matches!(err, StoreError::Exists(_) | StoreError::Locked { .. }),
        "{err}"
    );
    assert_eq!(within(store.load(&meta.id)).await.unwrap().rows, rows);
}

pub async fn list_and_find_by_keys(backend: &dyn Backend) {
    let store = backend.store();
    let keys = SessionKeys::new("alice", "doc:1").unwrap();
    let a = meta().with_keys(keys.clone()).with_owner("app");
    let b = meta().with_keys(SessionKeys::new("alice", "doc:2").unwrap());
    let c = meta();
    for (m, n) in [(&a, 5), (&b, 7), (&c, 9)] {
        within(store.create(m)).await.unwrap();
        within(store.append(&m.id, &exchange("x", 1), &state(n)))
            .await
            .unwrap();
    }
    let all = within(store.list(&ListFilter::all())).await.unwrap();
    let ids: Vec<_> = all.iter().map(|s| s.meta.id.clone()).collect();
    assert_eq!(
        ids,
        [c.id.clone(), b.id.clone(), a.id.clone()],
        "newest first"
    );
    assert_eq!(all[2].rows, 4);
    assert_eq!(all[2].updated_ms, state(5).updated_ms);
    let found = within(store.find(&keys)).await.unwrap().unwrap();
    assert_eq!(found.meta, a);
    let mut alice = ListFilter::all();
    alice.client_key = Some("alice".into());
    assert_eq!(within(store.list(&alice)).await.unwrap().len(), 2);
    let mut owned = ListFilter::all();
    owned.owner = Some("app".into());
    assert_eq!(within(store.list(&owned)).await.unwrap().len(), 1);
    let nobody = SessionKeys::new("bob", "doc:1").unwrap();
    assert!(within(store.find(&nobody)).await.unwrap().is_none());
}

/// Sub-agents are kept under their own ids (`{parent}::sub::{n}`), listed
/// like any session, and deleted with their parent, open or released.
pub async fn sub_agents_go_with_their_parent(backend: &dyn Backend) {
    let store = backend.store();
    let parent = meta();
    let other = meta();
    let mut subs = Vec::new();
    for (owner, n) in [(&parent, 1), (&parent, 2), (&other, 1)] {
        let mut m = meta();
        m.id = owner.id.sub_agent(n);
        subs.push(m);
    }
    for m in [&parent, &other].into_iter().chain(&subs) {
        within(store.create(m)).await.unwrap();
        within(store.append(&m.id, &exchange("x", 1), &state(1)))
            .await
            .unwrap();
    }
    // One released, one still open for writing.
    within(store.release(&subs[0].id)).await;
    let loaded = within(store.load(&subs[0].id)).await.unwrap();
    assert_eq!(loaded.meta.id, subs[0].id);
    assert_eq!(loaded.rows.len(), 4);
    let listed = within(store.list(&ListFilter::all())).await.unwrap();
    assert_eq!(listed.len(), 5);
    let deleted = within(lrg_chat::store::delete_sub_agents(
        store.as_ref(),
        &parent.id,
    ))
    .await
    .unwrap();
    assert_eq!(deleted, 2);
    for sub in &subs[..2] {
        assert!(matches!(
            within(store.load(&sub.id)).await,
            Err(StoreError::NotFound(_))
        ));
    }
    assert!(
        within(store.load(&subs[2].id)).await.is_ok(),
        "another parent's"
    );
    assert!(
        within(store.load(&parent.id)).await.is_ok(),
        "the parent itself"
    );
}

pub async fn concurrent_appends(backend: &dyn Backend) {
    let store = backend.store();
    let meta = meta();
    within(store.create(&meta)).await.unwrap();
    let tasks = 8;
    let per_task = 40;
    let mut handles = Vec::new();
    for t in 0..tasks {
        let store = store.clone();
        let id = meta.id.clone();
        handles.push(tokio::spawn(async move {
            for i in 0..per_task {
                let row = Message::user(format!("{t}:{i}"));
                store.append(&id, &[row], &state(i)).await.unwrap();
            }
        }));
    }
    for h in handles {
        within(h).await.unwrap();
    }
    let loaded = within(store.load(&meta.id)).await.unwrap();
    assert_eq!(loaded.rows.len(), tasks * per_task as usize);
    // Every row once, and each task's rows in the order it appended them.
    let mut next: HashMap<u32, u32> = HashMap::new();
    for row in &loaded.rows {
        let text = row.text();
        let (t, i) = text.split_once(':').unwrap();
        let (t, i): (u32, u32) = (t.parse().unwrap(), i.parse().unwrap());
        let expected = next.entry(t).or_default();
        assert_eq!(i, *expected, "task {t} out of order");
        *expected += 1;
    }
    assert!(loaded.warnings.is_empty());
}

pub async fn delete_during_append(backend: &dyn Backend) {
    let store = backend.store();
    let meta = meta();
    within(store.create(&meta)).await.unwrap();
    let writer = {
        let store = store.clone();
        let id = meta.id.clone();
        tokio::spawn(async move {
            let mut ok = 0;
            for i in 0..500 {
                match store
                    .append(&id, &exchange(&i.to_string(), 1), &state(i))
                    .await
                {
                    Ok(()) => ok += 1,
                    Err(StoreError::NotOpen(_)) => return (ok, true),
                    Err(e) => panic!("append failed otherwise: {e}"),
                }
                tokio::task::yield_now().await;
            }
            (ok, false)
        })
    };
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert!(within(store.delete(&meta.id)).await.unwrap());
    let (_, refused) = within(writer).await.unwrap();
    // The writer may have finished first on a fast store; either way the
    // session stays gone.
    let _ = refused;
    assert!(matches!(
        within(store.load(&meta.id)).await,
        Err(StoreError::NotFound(_))
    ));
    let late = within(store.append(&meta.id, &exchange("late", 0), &state(1))).await;
    assert!(matches!(late, Err(StoreError::NotOpen(_))), "{late:?}");
    assert!(matches!(
        within(store.load(&meta.id)).await,
        Err(StoreError::NotFound(_))
    ));
    assert!(
        within(store.list(&ListFilter::all()))
            .await
            .unwrap()
            .is_empty()
    );
    assert!(!within(store.delete(&meta.id)).await.unwrap());
}

pub async fn rewrite_replaces(backend: &dyn Backend) {
    let store = backend.store();
    let meta = meta();
    within(store.create(&meta)).await.unwrap();
    within(store.append(&meta.id, &exchange("a", 2), &state(1)))
        .await
        .unwrap();
    within(store.rewrite(&meta.id, &[], &state(2)))
        .await
        .unwrap();
    let loaded = within(store.load(&meta.id)).await.unwrap();
    assert!(loaded.rows.is_empty());
    assert_eq!(loaded.state, state(2));
    within(store.append(&meta.id, &exchange("b", 1), &state(3)))
        .await
        .unwrap();
    let loaded = within(store.load(&meta.id)).await.unwrap();
    assert_eq!(loaded.rows, exchange("b", 1));
    assert_eq!(loaded.meta, meta);
}

pub async fn resume_trims_keeping_calls_paired(backend: &dyn Backend) {
    let store = backend.store();
    let meta = meta();
    within(store.create(&meta)).await.unwrap();
    let mut all = Vec::new();
    for i in 0..40 {
        // 3 to 6 rows per exchange, up to 4 calls per step.
        let rows = exchange(&i.to_string(), i % 5);
        within(store.append(&meta.id, &rows, &state(i as u32)))
            .await
            .unwrap();
        all.extend(rows);
    }
    store.release(&meta.id).await;
    let other = backend.store();
    let resumed = within(other.resume(&meta.id, 64)).await.unwrap();
    assert!(resumed.rows.len() <= 64, "{}", resumed.rows.len());
    assert!(resumed.rows.len() > 50, "{}", resumed.rows.len());
    assert_eq!(resumed.rows[0].role, Role::User);
    assert!(tool_pairing_errors(&resumed.rows).is_empty());
    assert_eq!(resumed.rows[..], all[all.len() - resumed.rows.len()..]);
    assert_eq!(resumed.state, state(39));
    // The trim was written: a plain load sees the same.
    assert_eq!(
        within(other.load(&meta.id)).await.unwrap().rows,
        resumed.rows
    );
    // The resumer writes now.
    within(other.append(&meta.id, &exchange("after", 1), &state(99)))
        .await
        .unwrap();
    let loaded = within(other.load(&meta.id)).await.unwrap();
    assert_eq!(loaded.rows.len(), resumed.rows.len() + 4);
}

pub async fn one_writer_at_a_time(backend: &dyn Backend) {
    let first = backend.store();
    let meta = meta();
    within(first.create(&meta)).await.unwrap();
    let second = backend.store();
    let err = within(second.resume(&meta.id, 64)).await.unwrap_err();
    assert!(matches!(err, StoreError::Locked { .. }), "{err}");
    assert!(err.to_string().contains("open in another process"), "{err}");
    // Deleting is writing too.
    let err = within(second.delete(&meta.id)).await.unwrap_err();
    assert!(matches!(err, StoreError::Locked { .. }), "{err}");
    // Reading is not.
    within(second.load(&meta.id)).await.unwrap();
    first.release(&meta.id).await;
    let late = within(first.append(&meta.id, &exchange("x", 0), &state(1))).await;
    assert!(matches!(late, Err(StoreError::NotOpen(_))), "{late:?}");
    within(second.resume(&meta.id, 64)).await.unwrap();
    within(second.append(&meta.id, &exchange("y", 0), &state(2)))
        .await
        .unwrap();
}

pub async fn open_calls_are_answered_on_load(backend: &dyn Backend) {
    let store = backend.store();
    let meta = meta();
    within(store.create(&meta)).await.unwrap();
    let rows = exchange("q", 3);
    // The process died while the calls ran: the results never came.
    within(store.append(&meta.id, &rows[..2], &state(1)))
        .await
        .unwrap();
    let loaded = within(store.load(&meta.id)).await.unwrap();
    assert_eq!(loaded.rows.len(), 3);
    assert!(tool_pairing_errors(&loaded.rows).is_empty());
    let Part::ToolResult(r) = &loaded.rows[2].parts[0] else {
        panic!("no result row")
    };
    assert!(r.is_error);
    assert_eq!(r.text_content(), INTERRUPTED_NOTE);
    assert_eq!(loaded.warnings.len(), 1, "{:?}", loaded.warnings);
}

pub async fn ten_thousand_rows(backend: &dyn Backend) {
    let store = backend.store();
    let meta = meta();
    within(store.create(&meta)).await.unwrap();
    let mut n = 0;
    let mut batch = Vec::new();
    while n < 10_000 {
        batch.clear();
        for i in 0..50 {
            batch.extend(exchange(&format!("{n}_{i}"), 1));
        }
        n += batch.len();
        within(store.append(&meta.id, &batch, &state(n as u32)))
            .await
            .unwrap();
    }
    let loaded = within(store.load(&meta.id)).await.unwrap();
    assert_eq!(loaded.rows.len(), n);
    assert!(tool_pairing_errors(&loaded.rows).is_empty());
    let listed = within(store.list(&ListFilter::all())).await.unwrap();
    assert_eq!(listed[0].rows, n);
    store.release(&meta.id).await;
    let resumed = within(backend.store().resume(&meta.id, 64)).await.unwrap();
    assert_eq!(resumed.rows.len(), 64);
    assert!(tool_pairing_errors(&resumed.rows).is_empty());
}

/// One `#[tokio::test]` per conformance check, on the backend `$make`
/// (an async fn returning `Option<impl Backend>`; `None` skips).
#[macro_export]
macro_rules! conformance_suite {
    ($make:path) => {
        $crate::conformance_suite!(@tests $make;
            round_trip_every_part, list_and_find_by_keys, concurrent_appends,
            delete_during_append, rewrite_replaces, resume_trims_keeping_calls_paired,
            one_writer_at_a_time, open_calls_are_answered_on_load, ten_thousand_rows,
            sub_agents_go_with_their_parent, archive_releases_the_keys,
            rebind_moves_a_chat_to_another_model,
            the_registry_never_loses_a_chat_on_another_model,
            the_lock_and_consent_last_on_resume, names_and_first_messages_are_listed);
    };
    (@tests $make:path; $($check:ident),*) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $check() {
                if let Some(backend) = $make().await {
                    store_support::$check(&backend).await;
                }
            }
        )*
    };
}
