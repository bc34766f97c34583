//! Damaged and foreign session files, and what a resume keeps: only a torn
//! *last* line is ever dropped; any other damage refuses the resume, leaves
//! the file byte for byte as it was, is listed as damaged, and never lets a
//! second chat start under the same keys. A resume keeps the whole
//! conversation (a bound archives, never deletes), and nothing is shown to a
//! viewer before it is kept.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::http_support;
use crate::store_support;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use lrg_chat::registry::{OpenRequest, OpenedHow, RegistryConfig, RegistryError, SessionRegistry};
use lrg_chat::store::{
    JsonlStore, ListFilter, ModelBinding, SessionId, SessionKeys, SessionMeta, SessionState,
    SessionStore, SessionSummary, StoreError, StoredSession,
};
use lrg_chat::{ChatSession, FixedModel};
use lrg_providers::{Message, ScriptedModel, ScriptedTurn};
use store_support::*;
use tempfile::TempDir;

fn keys() -> SessionKeys {
    SessionKeys::new("alice", "doc:1").unwrap()
}

fn binding() -> ModelBinding {
    ModelBinding::new("anthropic:claude-test")
}

fn registry(store: Arc<dyn SessionStore>, config: RegistryConfig) -> SessionRegistry {
    SessionRegistry::new(
        |_: &ModelBinding| {
            let model = ScriptedModel::new(vec![ScriptedTurn {
                text: Some("hi".into()),
                ..Default::default()
            }]);
            Ok(ChatSession::builder(Arc::new(FixedModel::new(model))))
        },
        config,
    )
    .with_store(store)
}

/// A keyed session of `exchanges` one-call exchanges (4 rows each), written
/// and released; returns its id and file.
async fn keyed_session(dir: &Path, exchanges: usize) -> (SessionId, PathBuf) {
    let store = JsonlStore::new(dir);
    let meta = SessionMeta::new(binding()).with_keys(keys());
    within(store.create(&meta)).await.unwrap();
    for n in 0..exchanges {
        within(store.append(&meta.id, &exchange(&n.to_string(), 1), &state(n as u32)))
            .await
            .unwrap();
    }
    store.release(&meta.id).await;
    (meta.id.clone(), store.path_of(&meta.id))
}

fn session_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    files.sort();
    files
}

/// Opening by the keys of a damaged chat fails with the damage and starts
/// nothing: still one session file, byte for byte as it was.
async fn refused_by_keys(dir: &Path, file: &Path, what: &str) -> String {
    let before = std::fs::read(file).unwrap();
    let store: Arc<dyn SessionStore> = Arc::new(JsonlStore::new(dir));
    let registry = registry(store.clone(), RegistryConfig::default());
    let mut text = String::new();
    for _ in 0..2 {
        let err = within(registry.open(OpenRequest::keyed(keys(), binding())))
            .await
            .unwrap_err();
        let RegistryError::Store(e) = &err else {
            panic!("{err}")
        };
        assert!(e.is_damage(), "{e}");
        assert!(err.to_string().contains(what), "{err}");
        assert!(err.to_string().contains("left as it is"), "{err}");
        text = err.to_string();
    }
    assert_eq!(
        session_files(dir),
        vec![file.to_path_buf()],
        "a second chat"
    );
    assert_eq!(std::fs::read(file).unwrap(), before, "the file was changed");
    // Listed as damaged, with its keys, never as a chat.
    let damaged = within(store.damaged()).await.unwrap();
    assert_eq!(damaged.len(), 1);
    assert_eq!(damaged[0].keys.as_ref(), Some(&keys()));
    assert!(
        within(store.list(&ListFilter::all()))
            .await
            .unwrap()
            .is_empty()
    );
    text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nul_line_in_the_middle_refuses_the_resume_and_keeps_every_row() {
    let dir = TempDir::new().unwrap();
    let (id, file) = keyed_session(dir.path(), 8).await;
    let good = std::fs::read(&file).unwrap();
    // A line of NUL bytes after the first step: 28+ intact rows follow it.
    let cut = good.iter().position(|&b| b == b'\n').unwrap() + 1;
    let mut bad = good[..cut].to_vec();
    bad.extend_from_slice(&[0; 64]);
    bad.push(b'\n');
    bad.extend_from_slice(&good[cut..]);
    std::fs::write(&file, &bad).unwrap();

    let store = JsonlStore::new(dir.path());
    for result in [
        within(store.load(&id)).await,
        within(store.resume(&id, usize::MAX)).await,
    ] {
        let err = result.unwrap_err();
        assert!(
            err.to_string()
                .starts_with(&format!("{}:2: a line of 64 NUL byte(s)", file.display())),
            "{err}"
        );
    }
    let text = refused_by_keys(dir.path(), &file, "NUL").await;
    assert!(text.contains(":2:"), "{text}");
    assert_eq!(std::fs::read(&file).unwrap(), bad);
    // Removed, the same rows load again whole.
    std::fs::write(&file, &good).unwrap();
    assert_eq!(within(store.load(&id)).await.unwrap().rows.len(), 32);
}

/// A change made to a good file.
type Edit = fn(&[u8]) -> Vec<u8>;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupt_header_an_empty_file_or_a_newer_format_never_starts_a_second_chat() {
    let edits: [(&str, Edit, &str); 3] = [
        (
            "corrupt header",
            |b| {
                let mut out = b"{\"lrg_session\":1,\"id\":\x00\x01garbage\n".to_vec();
                out.extend_from_slice(&b[b.iter().position(|&c| c == b'\n').unwrap() + 1..]);
                out
            },
            "not an lrg session header",
        ),
        ("empty file", |_| Vec::new(), "the file is empty"),
        (
            "newer format",
            |b| {
                String::from_utf8(b.to_vec())
                    .unwrap()
                    .replacen("{\"lrg_session\":1,", "{\"lrg_session\":2,", 1)
                    .into_bytes()
            },
            "written by a newer lrg (format version 2",
        ),
    ];
    for (name, edit, what) in edits {
        let dir = TempDir::new().unwrap();
        let (_, file) = keyed_session(dir.path(), 2).await;
        let bad = edit(&std::fs::read(&file).unwrap());
        std::fs::write(&file, &bad).unwrap();
        let text = refused_by_keys(dir.path(), &file, what).await;
        assert!(text.contains(&file.display().to_string()), "{name}: {text}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_rows_survive_a_resume() {
    let dir = TempDir::new().unwrap();
    let (id, file) = keyed_session(dir.path(), 50).await;
    let store: Arc<dyn SessionStore> = Arc::new(JsonlStore::new(dir.path()));
    let all = within(store.load(&id)).await.unwrap().rows;
    assert_eq!(all.len(), 200);
    let registry = registry(store.clone(), RegistryConfig::default());
    let opened = within(registry.open(OpenRequest::keyed(keys(), binding())))
        .await
        .unwrap();
    assert_eq!(opened.how, OpenedHow::Resumed { rows: 200 });
    assert_eq!(opened.session.history(), all);
    assert_eq!(within(store.load(&id)).await.unwrap().rows, all);
    // A clean file is not even rewritten by a resume.
    assert_eq!(session_files(dir.path()), vec![file]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_row_bound_archives_the_older_rows_and_deletes_none() {
    let dir = TempDir::new().unwrap();
    let (id, file) = keyed_session(dir.path(), 50).await;
    let store: Arc<dyn SessionStore> = Arc::new(JsonlStore::new(dir.path()));
    let all = within(store.load(&id)).await.unwrap().rows;
    let registry = registry(
        store.clone(),
        RegistryConfig::default().max_kept_rows(Some(64)),
    );
    let opened = within(registry.open(OpenRequest::keyed(keys(), binding())))
        .await
        .unwrap();
    let OpenedHow::Resumed { rows } = opened.how else {
        panic!("{:?}", opened.how)
    };
    assert!(rows <= 64 && rows > 0, "{rows}");
    let archive = PathBuf::from(format!("{}.archive-1", file.display()));
    let text = std::fs::read_to_string(&archive).unwrap();
    let mut lines = text.lines();
    assert!(lines.next().unwrap().starts_with("{\"lrg_session\":1,"));
    #[derive(serde::Deserialize)]
    struct Row {
        row: Message,
    }
    let mut kept: Vec<Message> = lines
        .map(|l| serde_json::from_str::<Row>(l).unwrap().row)
        .collect();
    assert_eq!(kept.len(), 200 - rows);
    kept.extend(within(store.load(&id)).await.unwrap().rows);
    assert_eq!(kept, all, "archive + live file = every row, in order");
    // The archive is no chat of its own.
    assert_eq!(
        within(store.list(&ListFilter::all())).await.unwrap().len(),
        1
    );
}

/// A JSONL store whose writes each wait for a permit: the test decides when
/// anything becomes durable, and watches what is shown meanwhile.
#[derive(Debug)]
struct Gated {
    inner: JsonlStore,
    gate: tokio::sync::Semaphore,
}

impl SessionStore for Gated {
    fn create<'a>(&'a self, meta: &'a SessionMeta) -> BoxFuture<'a, Result<(), StoreError>> {
        self.inner.create(meta)
    }
    fn resume<'a>(
        &'a self,
        id: &'a SessionId,
        max_rows: usize,
    ) -> BoxFuture<'a, Result<StoredSession, StoreError>> {
        self.inner.resume(id, max_rows)
    }
    fn append<'a>(
        &'a self,
        id: &'a SessionId,
        rows: &'a [Message],
        state: &'a SessionState,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            self.gate.acquire().await.unwrap().forget();
            self.inner.append(id, rows, state).await
        })
    }
    fn rewrite<'a>(
        &'a self,
        id: &'a SessionId,
        rows: &'a [Message],
        state: &'a SessionState,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            self.gate.acquire().await.unwrap().forget();
            self.inner.rewrite(id, rows, state).await
        })
    }
    fn load<'a>(&'a self, id: &'a SessionId) -> BoxFuture<'a, Result<StoredSession, StoreError>> {
        self.inner.load(id)
    }
    fn list<'a>(
        &'a self,
        filter: &'a ListFilter,
    ) -> BoxFuture<'a, Result<Vec<SessionSummary>, StoreError>> {
        self.inner.list(filter)
    }
    fn delete<'a>(&'a self, id: &'a SessionId) -> BoxFuture<'a, Result<bool, StoreError>> {
        self.inner.delete(id)
    }
    fn release<'a>(&'a self, id: &'a SessionId) -> BoxFuture<'a, ()> {
        self.inner.release(id)
    }
}

fn shown(session: &ChatSession, kind: &str) -> usize {
    session
        .events()
        .entries()
        .iter()
        .filter(|e| e.seq.is_some() && serde_json::to_value(&e.event).unwrap()["type"] == kind)
        .count()
}

/// Wait (bounded) until `kind` has been shown `n` times.
async fn until_shown(session: &ChatSession, kind: &str, n: usize) {
    tokio::time::timeout(Duration::from_secs(30), async {
        while shown(session, kind) < n {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("{kind} was never shown"));
}

/// Neither shown nor acknowledged while its write waits.
async fn held_back(session: &ChatSession, kind: &str, n: usize) {
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert_eq!(shown(session, kind), n, "{kind} shown before it was kept");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_is_shown_or_acknowledged_before_it_is_kept() {
    let dir = TempDir::new().unwrap();
    let store = Arc::new(Gated {
        inner: JsonlStore::new(dir.path()),
        gate: tokio::sync::Semaphore::new(0),
    });
    let meta = SessionMeta::new(binding());
    within(store.create(&meta)).await.unwrap();
    let script = ScriptedModel::new(vec![
        calls(&[("look", serde_json::json!({}))]),
        ScriptedTurn {
            text: Some("done".into()),
            ..Default::default()
        },
    ]);
    let session = ChatSession::builder(Arc::new(FixedModel::new(script)))
        .store(store.clone(), meta.id.clone())
        .build();
    let mut handle = session.send("go").unwrap();

    // The user message: not shown, not accepted, until its write is done.
    held_back(&session, "user_message", 0).await;
    assert!(
        tokio::time::timeout(Duration::from_millis(50), handle.accepted())
            .await
            .is_err(),
        "accepted before it was kept"
    );
    store.gate.add_permits(1);
    assert!(within(handle.accepted()).await);
    assert_eq!(shown(&session, "user_message"), 1);
    let kept = within(store.load(&meta.id)).await.unwrap().rows;
    assert_eq!(kept, vec![Message::user("go")]);

    // The model's turn that calls a tool.
    held_back(&session, "assistant_turn", 0).await;
    store.gate.add_permits(1);
    until_shown(&session, "assistant_turn", 1).await;

    // The call's result (no such tool: skipped), kept before it is shown.
    held_back(&session, "tool_skipped", 0).await;
    store.gate.add_permits(1);
    until_shown(&session, "tool_skipped", 1).await;
    let kept = within(store.load(&meta.id)).await.unwrap();
    assert_eq!(kept.rows.len(), 3, "{:?}", kept.rows);
    assert!(
        kept.warnings.is_empty(),
        "kept, not 'not finished': {:?}",
        kept.warnings
    );

    store.gate.add_permits(100);
    within(handle).await;
    let kept = within(store.load(&meta.id)).await.unwrap().rows;
    assert_eq!(kept, session.history());
    assert_eq!(kept.len(), 4);
}

/// A clear and a compaction replace the history: neither `cleared` nor
/// `compacted` is shown (nor a clear acknowledged) before the replacement
/// is kept — a kill then would bring the old conversation back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clear_and_a_compaction_are_shown_only_once_kept() {
    let dir = TempDir::new().unwrap();
    let store = Arc::new(Gated {
        inner: JsonlStore::new(dir.path()),
        gate: tokio::sync::Semaphore::new(100),
    });
    let meta = SessionMeta::new(binding());
    within(store.create(&meta)).await.unwrap();
    let reply = |t: &str| ScriptedTurn {
        text: Some(t.into()),
        ..Default::default()
    };
    let script = ScriptedModel::new(vec![reply("one"), reply("the summary"), reply("two")]);
    let session = ChatSession::builder(Arc::new(FixedModel::new(script)))
        .store(store.clone(), meta.id.clone())
        .build();
    within(session.send("first").unwrap()).await;
    // Closed from here on.
    let open = store.gate.available_permits();
    store.gate.acquire_many(open as u32).await.unwrap().forget();

    // Compaction: the summary turn ends, its rewrite waits.
    let compact = session.compact().unwrap();
    held_back(&session, "compacted", 0).await;
    let kept = within(store.load(&meta.id)).await.unwrap().rows;
    assert_eq!(kept.len(), 2, "still the old conversation: {kept:?}");
    store.gate.add_permits(1);
    until_shown(&session, "compacted", 1).await;
    let kept = within(store.load(&meta.id)).await.unwrap().rows;
    assert_eq!(kept.len(), 1, "the summary alone: {kept:?}");
    assert!(kept[0].text().contains("the summary"), "{kept:?}");
    store.gate.add_permits(100);
    within(compact).await;
    within(session.send("second").unwrap()).await;
    let open = store.gate.available_permits();
    store.gate.acquire_many(open as u32).await.unwrap().forget();

    // A clear: the state is empty at once, the event waits for the rewrite.
    let clearing = session.clone();
    let cleared = tokio::spawn(async move { clearing.clear_kept().await });
    held_back(&session, "cleared", 0).await;
    assert!(
        !cleared.is_finished(),
        "a clear acknowledged before it was kept"
    );
    assert_eq!(within(store.load(&meta.id)).await.unwrap().rows.len(), 3);
    store.gate.add_permits(1);
    assert!(within(cleared).await.unwrap().unwrap());
    assert_eq!(shown(&session, "cleared"), 1);
    assert!(within(store.load(&meta.id)).await.unwrap().rows.is_empty());
}

fn calls(list: &[(&str, serde_json::Value)]) -> ScriptedTurn {
    serde_json::from_value(serde_json::json!({
        "calls": list
            .iter()
            .map(|(name, arguments)| serde_json::json!({"name": name, "arguments": arguments}))
            .collect::<Vec<_>>()
    }))
    .unwrap()
}

/// Over HTTP, opening by the keys of a damaged chat is a 500 with a message
/// that says so (the file only in the log), never a new chat.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_chat_is_an_http_500_that_says_so() {
    let dir = TempDir::new().unwrap();
    let server = || {
        let store = Arc::new(JsonlStore::new(dir.path()));
        http_support::start(
            http_support::models(vec![(
                "script:first",
                http_support::scripted("first", vec![http_support::text("hi")]),
            )]),
            move |c| c.store(store),
        )
    };
    let body = serde_json::json!({
        "model": "script:first",
        "client_key": "alice@example.com",
        "context_key": "doc:42",
    });
    let h = server().await;
    let (status, v) = h.open_raw(body.clone()).await;
    assert_eq!(status, 201, "{v}");
    within(h.server.shutdown()).await;
    drop(h);
    let h = server().await;
    let file = session_files(dir.path()).remove(0);
    let bad = b"\0\0\0\n{\"row\":{}}\n";
    let good = std::fs::read(&file).unwrap();
    let end = good.iter().position(|&b| b == b'\n').unwrap() + 1;
    let damaged = [&good[..end], &bad[..]].concat();
    std::fs::write(&file, &damaged).unwrap();
    let (status, v) = h.open_raw(body).await;
    assert_eq!(status, 500, "{v}");
    let message = v.to_string();
    assert!(message.contains("damaged"), "{message}");
    assert!(!message.contains(&file.display().to_string()), "{message}");
    assert_eq!(session_files(dir.path()), vec![file.clone()]);
    assert_eq!(std::fs::read(&file).unwrap(), damaged);
}

/// A file with its third line replaced by `line`.
fn with_third_line(good: &[u8], line: &[u8]) -> Vec<u8> {
    let mut lines: Vec<&[u8]> = good.split(|&b| b == b'\n').collect();
    lines[2] = line;
    lines.join(&b'\n')
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_row_mid_file_is_listed_as_damaged_as_a_resume_refuses_it() {
    let rows: [&[u8]; 3] = [
        // Half written, with rows after it.
        br#"{"row":{"role":"user","parts":[{"type":"te"#,
        // A NUL byte inside a row.
        b"{\"row\":{\"role\":\"user\",\"parts\":[{\"type\":\"text\",\"text\":\"a\0b\"}]}}",
        // JSON, but no message.
        br#"{"row":{"role":"wizard","parts":[]}}"#,
    ];
    for line in rows {
        let dir = TempDir::new().unwrap();
        let (id, file) = keyed_session(dir.path(), 8).await;
        let good = std::fs::read(&file).unwrap();
        std::fs::write(&file, with_third_line(&good, line)).unwrap();
        let store = JsonlStore::new(dir.path());
        let shown = String::from_utf8_lossy(line).into_owned();
        assert!(
            within(store.load(&id)).await.is_err(),
            "the resume refuses it: {shown}"
        );
        // The listing says the same: damaged, with its keys, and no chat.
        refused_by_keys(dir.path(), &file, ":3:").await;
    }
}
