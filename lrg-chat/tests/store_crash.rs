//! kill -9 at random moments: a child process chats (two tool calls per
//! step) against the JSONL store and is killed at least 50 times; after each
//! kill the session must load, keep every message that had finished, and
//! hold a history in which every tool call has a result. The next child
//! resumes it, so every round also tests a resume after a crash.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use lrg_chat::session::tool_pairing_errors;
use lrg_chat::store::{INTERRUPTED_NOTE, JsonlStore, ListFilter, SessionStore, StoreError};
use lrg_providers::Part;
use tokio::io::{AsyncBufReadExt as _, BufReader};
use tokio::process::Command;

const KILLS: usize = 60;
const WAIT: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_at_random_moments_loses_at_most_the_step_in_flight() {
    let dir = tempfile::TempDir::new().unwrap();
    let store = JsonlStore::new(dir.path());
    let (mut torn, mut repaired, mut max_rows, mut messages) = (0, 0, 0, 0);
    for round in 0..KILLS {
        let mut child = Command::new(env!("CARGO_BIN_EXE_lrg-store-crash-child"))
            .arg(dir.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let ready = tokio::time::timeout(WAIT, lines.next_line())
            .await
            .expect("the child did not start")
            .unwrap()
            .unwrap_or_else(|| panic!("round {round}: the child ended before it was ready"));
        assert!(ready.starts_with("ready "), "{ready}");
        let id = store.list(&ListFilter::all()).await.unwrap()[0]
            .meta
            .id
            .clone();
        if round == 0 {
            // One writer at a time, across processes.
            let err = store.resume(&id, 64).await.unwrap_err();
            assert!(matches!(err, StoreError::Locked { .. }), "{err}");
        }
        // Count finished messages while the child runs.
        let done = Arc::new(AtomicUsize::new(0));
        let rows_done = done.clone();
        let finished = Arc::new(AtomicUsize::new(0));
        let count = finished.clone();
        let reader = tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                if let Some(n) = line.strip_prefix("done ") {
                    rows_done.store(n.parse().unwrap(), Ordering::SeqCst);
                    count.fetch_add(1, Ordering::SeqCst);
                }
            }
        });
        let pause = 5 + rand::random::<u64>() % 250;
        tokio::time::sleep(Duration::from_millis(pause)).await;
        child.start_kill().unwrap(); // SIGKILL
        tokio::time::timeout(WAIT, child.wait())
            .await
            .unwrap()
            .unwrap();
        tokio::time::timeout(WAIT, reader).await.unwrap().unwrap();
        messages += finished.load(Ordering::SeqCst);

        let loaded = store
            .load(&id)
            .await
            .unwrap_or_else(|e| panic!("round {round}: the session does not load: {e}"));
        let errors = tool_pairing_errors(&loaded.rows);
        assert!(errors.is_empty(), "round {round}: {errors:?}");
        let kept = done.load(Ordering::SeqCst);
        assert!(
            loaded.rows.len() >= kept,
            "round {round}: {} rows kept, but {kept} had been saved when a message finished",
            loaded.rows.len()
        );
        // Nothing from nowhere: beyond the last message reported done, at
        // most that message's successor (6 rows) and the one in flight.
        if kept > 0 {
            assert!(
                loaded.rows.len() <= kept + 12,
                "round {round}: {} rows after {kept}",
                loaded.rows.len()
            );
        }
        torn += loaded
            .warnings
            .iter()
            .filter(|w| w.contains("torn last line"))
            .count();
        // Calls the kill left without a result, answered by this load.
        repaired += loaded
            .rows
            .last()
            .into_iter()
            .flat_map(|m| &m.parts)
            .filter(|p| matches!(p, Part::ToolResult(r) if r.text_content() == INTERRUPTED_NOTE))
            .count()
            * usize::from(loaded.warnings.iter().any(|w| w.contains("had no result")));
        max_rows = max_rows.max(loaded.rows.len());
    }
    // The figures for the closing note.
    eprintln!(
        "kill -9: {KILLS} kills, every reload succeeded; {messages} messages finished in all; \
         {torn} torn last lines dropped; {repaired} calls cut off mid-run answered on load; \
         at most {max_rows} rows in the file"
    );
}
