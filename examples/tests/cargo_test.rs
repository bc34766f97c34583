//! An agent's behaviour asserted in `cargo test`, with `lrg_chat::testing`.
//!
//! [`SessionTest`] runs a session on a model (scripted here; a recording of
//! a real model replays the same way, with `SessionTest::replay`), answers
//! its approval questions as the test says, and returns a transcript to
//! check: which tools were called with which arguments, which were asked
//! about, what the reply says. The tools are the app's real ones, so the
//! test covers them too.
//!
//! Run it with `cargo test -p lrg-examples --test cargo_test`.

// A test's helpers may unwrap: a failure there is a failed test.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use lrg_chat::SkipReason;
use lrg_chat::testing::{ApprovalAnswer, CallResult, SessionTest};
use lrg_chat::tools::{NoArgs, ToolHost};
use lrg_providers::{ScriptedModel, ToolAnnotations};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

/// The arguments of `delete_file`.
#[derive(Debug, Deserialize, JsonSchema)]
struct Delete {
    /// The file's name.
    path: String,
}

type Files = Arc<Mutex<BTreeMap<String, String>>>;

/// The app's tools over `files`: a read and a destructive change.
fn tools(files: &Files) -> ToolHost {
    let host = ToolHost::new();
    let read_only = ToolAnnotations {
        read_only_hint: Some(true),
        ..Default::default()
    };
    let listed = files.clone();
    host.add_fn(
        "list_files",
        "List the files",
        read_only,
        move |_: NoArgs| {
            let names: Vec<String> = listed.lock().unwrap().keys().cloned().collect();
            async move { Ok::<_, String>(names.join("\n")) }
        },
    )
    .unwrap();
    let deleted = files.clone();
    host.add_fn(
        "delete_file",
        "Delete a file for good",
        ToolAnnotations::default(),
        move |args: Delete| {
            let removed = deleted.lock().unwrap().remove(&args.path);
            async move {
                match removed {
                    Some(_) => Ok(format!("deleted {}", args.path)),
                    None => Err(format!("no file {}", args.path)),
                }
            }
        },
    )
    .unwrap();
    host
}

fn files() -> Files {
    Arc::new(Mutex::new(BTreeMap::from([
        ("draft.txt".to_owned(), "old".to_owned()),
        ("report.txt".to_owned(), "keep".to_owned()),
    ])))
}

/// A model that lists the files, deletes the draft, then says so.
fn tidy_model() -> ScriptedModel {
    ScriptedModel::from_json(
        "tidy",
        r#"[
          {"calls": [{"name": "list_files"}]},
          {"calls": [{"name": "delete_file", "arguments": {"path": "draft.txt"}}]},
          {"text": "I deleted draft.txt and kept report.txt."}
        ]"#,
    )
    .unwrap()
}

#[tokio::test]
async fn a_read_runs_and_a_delete_asks_first() {
    let files = files();
    let run = SessionTest::new(tidy_model())
        .tools(Arc::new(tools(&files)))
        .answer(ApprovalAnswer::once("delete_file"))
        .message("Tidy up my drafts.")
        .run()
        .await;

    run.assert_order(&["list_files", "delete_file"]);
    run.assert_called("delete_file")
        .with_args(json!({"path": "draft.txt"}))
        .times(1);
    run.assert_approval_asked("delete_file");
    run.assert_not_called("write_file");
    run.assert_max_turns(3);
    run.assert_no_error();
    run.assert_reply_contains("kept report.txt");
    run.assert_exit_status(0);
    // The tool really ran: the app's own data changed.
    let left: Vec<String> = files.lock().unwrap().keys().cloned().collect();
    assert_eq!(left, ["report.txt"]);
}

#[tokio::test]
async fn a_denied_delete_never_runs() {
    let files = files();
    let run = SessionTest::new(tidy_model())
        .tools(Arc::new(tools(&files)))
        .answer(ApprovalAnswer::deny("delete_file", "keep everything"))
        .message("Tidy up my drafts.")
        .run()
        .await;

    run.assert_approval_asked("delete_file");
    run.assert_exit_status(0);
    let left: Vec<String> = files.lock().unwrap().keys().cloned().collect();
    assert_eq!(left, ["draft.txt", "report.txt"]);
    // The call got a result all the same: skipped, with the person's note,
    // which the model is told.
    let delete = run.calls_of("delete_file").next().unwrap();
    match &delete.result {
        CallResult::Skipped { reason, note } => {
            assert_eq!(*reason, SkipReason::NotAllowed);
            assert_eq!(note.as_deref(), Some("keep everything"));
        }
        other => panic!("the denied call ran or was left open: {other:?}"),
    }
}
