//! The JSONL store: the conformance suite, then what only a file has (torn
//! lines, bad files, the files themselves).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::store_support;

use std::path::Path;
use std::sync::Arc;

use lrg_chat::store::{JsonlStore, ListFilter, SessionStore, StoreError};
use lrg_providers::Message;
use store_support::*;
use tempfile::TempDir;

struct Jsonl(TempDir);

impl Backend for Jsonl {
    fn store(&self) -> Arc<dyn SessionStore> {
        Arc::new(JsonlStore::new(self.0.path().join("sessions")))
    }
}

async fn jsonl() -> Option<Jsonl> {
    Some(Jsonl(TempDir::new().unwrap()))
}

conformance_suite!(jsonl);

#[test]
fn an_older_state_loads_with_the_lock_off() {
    an_older_state_loads_unlocked();
}

/// A session of two exchanges, released; returns the store and its file.
async fn two_exchanges(dir: &Path) -> (JsonlStore, lrg_chat::store::SessionMeta, Vec<u8>) {
    let store = JsonlStore::new(dir);
    let meta = meta();
    store.create(&meta).await.unwrap();
    store
        .append(&meta.id, &exchange("a", 1), &state(1))
        .await
        .unwrap();
    store
        .append(&meta.id, &exchange("b", 2), &state(2))
        .await
        .unwrap();
    store.release(&meta.id).await;
    let bytes = std::fs::read(store.path_of(&meta.id)).unwrap();
    (store, meta, bytes)
}

#[tokio::test]
async fn the_file_is_a_header_then_one_line_per_row() {
    let dir = TempDir::new().unwrap();
    let (store, meta, bytes) = two_exchanges(dir.path()).await;
    let text = String::from_utf8(bytes).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    // header, 4 rows + state, 4 rows + state
    assert_eq!(lines.len(), 1 + 5 + 5);
    assert!(lines[0].starts_with("{\"lrg_session\":1,"), "{}", lines[0]);
    assert!(lines[0].contains("\"model\":\"anthropic:claude-test\""));
    assert!(lines[0].contains("\"connection\":\"work\""));
    assert!(lines[1].starts_with("{\"row\":"));
    assert!(lines[5].starts_with("{\"state\":"));
    assert!(text.ends_with('\n'));
    let summary = &store.list(&ListFilter::all()).await.unwrap()[0];
    assert_eq!(summary.rows, 8);
    assert_eq!(summary.meta, meta);
}

#[tokio::test]
async fn a_torn_last_line_loses_only_the_step_in_flight() {
    let dir = TempDir::new().unwrap();
    let (store, meta, bytes) = two_exchanges(dir.path()).await;
    let path = store.path_of(&meta.id);
    let full = store.load(&meta.id).await.unwrap().rows;
    // Cut the file at every byte of the last step: each load succeeds, keeps
    // the first step whole, and never leaves a call without its result.
    let first_step_end = {
        let text = std::str::from_utf8(&bytes).unwrap();
        text.match_indices('\n').nth(5).unwrap().0 + 1
    };
    for cut in first_step_end..bytes.len() {
        std::fs::write(&path, &bytes[..cut]).unwrap();
        let loaded = store.load(&meta.id).await.unwrap();
        assert!(loaded.rows.len() >= 4, "cut at {cut}");
        assert_eq!(loaded.rows[..4], full[..4], "cut at {cut}");
        assert!(
            lrg_chat::session::tool_pairing_errors(&loaded.rows).is_empty(),
            "cut at {cut}"
        );
        let torn = bytes[cut - 1] != b'\n';
        assert_eq!(
            loaded.warnings.iter().any(|w| w.contains("torn last line")),
            torn,
            "cut at {cut}: {:?}",
            loaded.warnings
        );
    }
    // A resume after a torn write rewrites the file clean.
    std::fs::write(&path, &bytes[..bytes.len() - 3]).unwrap();
    let resumed = store.resume(&meta.id, 64).await.unwrap();
    assert_eq!(resumed.warnings.len(), 1);
    store
        .append(&meta.id, &exchange("c", 0), &state(3))
        .await
        .unwrap();
    let again = store.load(&meta.id).await.unwrap();
    assert!(again.warnings.is_empty(), "{:?}", again.warnings);
    assert_eq!(again.rows.len(), resumed.rows.len() + 2);
}

/// Load and resume of a broken file (`edit` of a good one) both fail naming
/// the file and line, and leave it byte for byte as it was.
async fn refused(edit: impl Fn(&str) -> String, line: usize, what: &str) {
    let dir = TempDir::new().unwrap();
    let (store, meta, good) = two_exchanges(dir.path()).await;
    let path = store.path_of(&meta.id);
    let bytes = edit(std::str::from_utf8(&good).unwrap());
    std::fs::write(&path, &bytes).unwrap();
    for result in [store.load(&meta.id).await, store.resume(&meta.id, 2).await] {
        let err = result.unwrap_err();
        let text = err.to_string();
        assert!(
            text.starts_with(&format!("{}:{line}: ", path.display()))
                || text.starts_with(&format!("{}: ", path.display())),
            "{text}"
        );
        assert!(text.contains(what), "{text}");
        assert!(text.contains("left as it is"), "{text}");
    }
    assert_eq!(
        std::fs::read(&path).unwrap(),
        bytes.as_bytes(),
        "the file was changed"
    );
}

#[tokio::test]
async fn bad_files_are_refused_and_kept() {
    // A header cut short.
    refused(
        |t| t[..t.find('\n').unwrap() / 2].to_string(),
        1,
        "truncated header",
    )
    .await;
    refused(|_| String::new(), 1, "truncated header").await;
    // Not a session file at all.
    refused(|_| "hello\n".into(), 1, "not an lrg session header").await;
    // A line of garbage in the middle.
    let garbage = |t: &str| {
        let mut lines: Vec<&str> = t.lines().collect();
        lines.insert(3, "{\"row\": garbage");
        format!("{}\n", lines.join("\n"))
    };
    refused(garbage, 4, "unreadable line").await;
    // A complete last line that is not a row (not a torn write).
    refused(|t| format!("{t}nonsense\n"), 12, "unreadable line").await;
    // Written by a newer lrg.
    let future = |t: &str| t.replacen("{\"lrg_session\":1,", "{\"lrg_session\":2,", 1);
    refused(future, 1, "format version 2 is newer").await;
    // Another session's file under this id.
    let other = |t: &str| {
        let id = &t[t.find("\"id\":\"").unwrap() + 6..][..32];
        t.replacen(id, "0123456789abcdef0123456789abcdef", 1)
    };
    refused(other, 1, "the header names session").await;
}

#[tokio::test]
async fn a_failed_resume_gives_the_lock_back() {
    let dir = TempDir::new().unwrap();
    let (store, meta, bytes) = two_exchanges(dir.path()).await;
    let path = store.path_of(&meta.id);
    std::fs::write(&path, b"garbage").unwrap();
    assert!(store.resume(&meta.id, 64).await.is_err());
    std::fs::write(&path, &bytes).unwrap();
    store.resume(&meta.id, 64).await.unwrap();
}

#[tokio::test]
async fn bad_files_are_left_out_of_listings() {
    let dir = TempDir::new().unwrap();
    let (store, _, _) = two_exchanges(dir.path()).await;
    std::fs::write(
        dir.path().join("0123456789abcdef0123456789abcdef.jsonl"),
        b"x",
    )
    .unwrap();
    std::fs::write(dir.path().join("notes.txt"), b"x").unwrap();
    assert_eq!(store.list(&ListFilter::all()).await.unwrap().len(), 1);
}

#[tokio::test]
async fn ids_are_checked_before_they_name_a_file() {
    for bad in ["../x", "", "ABCDEF0123456789abcdef0123456789", "0123"] {
        let err = bad.parse::<lrg_chat::store::SessionId>().unwrap_err();
        assert!(matches!(err, StoreError::BadId(_)), "{bad}");
    }
}

#[tokio::test]
async fn clear_then_late_append_cannot_resurrect() {
    let dir = TempDir::new().unwrap();
    let store = JsonlStore::new(dir.path());
    let meta = meta();
    store.create(&meta).await.unwrap();
    store
        .append(&meta.id, &exchange("a", 1), &state(1))
        .await
        .unwrap();
    store.rewrite(&meta.id, &[], &state(2)).await.unwrap();
    assert!(store.load(&meta.id).await.unwrap().rows.is_empty());
    assert!(store.delete(&meta.id).await.unwrap());
    let late = store
        .append(&meta.id, &[Message::user("late")], &state(3))
        .await;
    assert!(matches!(late, Err(StoreError::NotOpen(_))));
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert!(left.is_empty(), "files left: {left:?}");
}

/// Archiving and moving to another model rewrite the header only: every
/// other line is kept byte for byte, a file from before archiving (no
/// `archived` field) reads as not archived, and an archived chat's lock
/// note names no keys, so even damaged past reading it holds none.
#[tokio::test]
async fn archiving_rewrites_the_header_only_and_releases_the_keys_for_good() {
    let dir = TempDir::new().unwrap();
    let keys = lrg_chat::store::SessionKeys::new("alice", "doc:1").unwrap();
    let store = JsonlStore::new(dir.path());
    let meta = meta().with_keys(keys.clone());
    store.create(&meta).await.unwrap();
    store
        .append(&meta.id, &exchange("a", 1), &state(1))
        .await
        .unwrap();
    let path = store.path_of(&meta.id);
    let before = std::fs::read(&path).unwrap();
    assert!(!String::from_utf8_lossy(&before).contains("archived"));
    let body = |bytes: &[u8]| bytes[bytes.iter().position(|&b| b == b'\n').unwrap()..].to_vec();

    let to = lrg_chat::store::ModelBinding::new("openai:gpt-test");
    store.rebind(&meta.id, &to).await.unwrap();
    assert!(store.archive(&meta.id).await.unwrap());
    store.release(&meta.id).await;
    let after = std::fs::read(&path).unwrap();
    assert_eq!(body(&after), body(&before), "the rows are untouched");
    let header = String::from_utf8_lossy(&after[..after.len() - body(&after).len()]).to_string();
    assert!(header.contains("\"archived\":true"), "{header}");
    assert!(header.contains("\"model\":\"openai:gpt-test\""), "{header}");
    let note = std::fs::read_to_string(path.with_extension("lock")).unwrap();
    assert!(!note.contains("doc:1"), "{note}");

    // Damaged past reading: listed as damaged, but it holds no keys.
    std::fs::write(&path, b"").unwrap();
    let damaged = store.damaged().await.unwrap();
    assert_eq!(damaged.len(), 1);
    assert_eq!(damaged[0].keys, None);
    assert!(store.find(&keys).await.unwrap().is_none());
}
