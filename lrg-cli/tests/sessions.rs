//! Kept chats from the command line: `--session KEY` resumes by key,
//! `lrg sessions` lists, shows and removes, and a chat survives kill -9.
//! Every run keeps its sessions in the test's own directory
//! (`XDG_DATA_HOME`), under a fixed OS user.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::io::{BufRead as _, BufReader, Write as _};
use std::process::Stdio;
use std::time::Instant;

use common::{Env, TIMEOUT, ran};

const DEMO: &str = "lrg demo-server";

fn kept(env: &Env) -> assert_cmd::Command {
    let mut cmd = env.lrg();
    cmd.env("XDG_DATA_HOME", env.path("data"))
        .env("USER", "tester");
    cmd
}

#[test]
fn a_kept_run_resumes_by_key_and_sessions_lists_shows_and_removes_it() {
    let env = Env::new();
    env.file(
        "s.json",
        r#"[{"text":"Let me look.","calls":[{"name":"list_notes","arguments":{}}]},
            {"text":"You have three notes."}]"#,
    );
    let first = ran(kept(&env).args([
        "run",
        "--model",
        "script:s.json",
        "--mcp",
        DEMO,
        "--session",
        "doc:1",
        "what notes?",
    ]));
    assert_eq!(first.code, 0, "{first:?}");
    assert_eq!(first.stdout, "Let me look.\nYou have three notes.\n");

    let list = ran(kept(&env).args(["sessions"]));
    assert_eq!(list.code, 0, "{list:?}");
    let lines: Vec<&str> = list.stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{list:?}");
    assert!(lines[0].starts_with("KEY"), "{list:?}");
    assert!(lines[1].starts_with("doc:1  script:s.json"), "{list:?}");
    assert!(lines[1].contains("  4  just now"), "{list:?}");

    // The same key, the same model: the chat goes on where it was.
    env.file("s.json", r#"[{"text":"Still three."}]"#);
    let second = ran(kept(&env).args([
        "run",
        "--model",
        "script:s.json",
        "--json",
        "--session",
        "doc:1",
        "and now?",
    ]));
    assert_eq!(second.code, 0, "{second:?}");
    assert!(
        second
            .stderr
            .contains("lrg: resuming session doc:1 (4 rows;"),
        "{second:?}"
    );
    // Only the new message's events are printed, numbered after the history.
    let first_event: serde_json::Value =
        serde_json::from_str(second.stdout.lines().nth(1).unwrap()).unwrap();
    assert_eq!(first_event["type"], "user_message", "{second:?}");
    assert_eq!(first_event["text"], "and now?");
    assert!(first_event["seq"].as_u64().unwrap() > 4);

    let show = ran(kept(&env).args(["sessions", "show", "doc:1"]));
    assert_eq!(show.code, 0, "{show:?}");
    insta::assert_snapshot!(show.stdout);
    let json = ran(kept(&env).args(["sessions", "show", "doc:1", "--json"]));
    let transcript: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(transcript["rows"].as_array().unwrap().len(), 6);
    assert_eq!(transcript["truncated"], false);

    // Another user's sessions are not mine.
    let other = ran(kept(&env)
        .env("USER", "someone")
        .args(["sessions", "show", "doc:1"]));
    assert_eq!(other.code, 2, "{other:?}");
    assert!(other.stderr.contains("no kept chat `doc:1`"), "{other:?}");

    let rm = ran(kept(&env).args(["sessions", "rm", "doc:1"]));
    assert_eq!(rm.code, 0, "{rm:?}");
    let list = ran(kept(&env).args(["sessions", "--json"]));
    assert_eq!(list.stdout.trim(), "[]", "{list:?}");
    let again = ran(kept(&env).args(["sessions", "rm", "doc:1"]));
    assert_eq!(again.code, 2, "{again:?}");
}

#[test]
fn bad_keys_and_stores_are_usage_errors() {
    let env = Env::new();
    env.file("s.json", r#"[{"text":"hi"}]"#);
    let r = ran(kept(&env).args(["run", "--model", "script:s.json", "--session", "a b", "hi"]));
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr
            .contains("--session: context_key `a b` is not a valid key: use 1 to 64 bytes"),
        "{r:?}"
    );
    let r = ran(env
        .lrg()
        .args(["sessions", "--store", "postgres://u:secret@127.0.0.1:9/x"]));
    // Built with PostgreSQL: nothing listens there; without: not supported.
    let expected = if cfg!(feature = "postgres") { 1 } else { 2 };
    assert_eq!(r.code, expected, "{r:?}");
    assert!(!r.stderr.contains("secret"), "{r:?}");
    // No place to keep them at all.
    let r = ran(env
        .lrg()
        .args(["run", "--model", "script:s.json", "--session", "k", "hi"]));
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("no place to keep chats"), "{r:?}");
}

/// Another model is refused and the chat kept (the ways forward are in
/// `reopen.rs`).
#[test]
fn another_model_is_refused_and_the_chat_kept() {
    let env = Env::new();
    env.file("a.json", r#"[{"text":"From a."}]"#);
    env.file("b.json", r#"[{"text":"From b."}]"#);
    let r = ran(kept(&env).args(["run", "--model", "script:a.json", "--session", "k", "hi"]));
    assert_eq!(r.code, 0, "{r:?}");
    let r = ran(kept(&env).args(["run", "--model", "script:b.json", "--session", "k", "hi"]));
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr
            .contains("session k is a chat with script:a.json, not script:b.json"),
        "{r:?}"
    );
    let show = ran(kept(&env).args(["sessions", "show", "k"]));
    assert_eq!(show.stdout, "you: hi\nmodel: From a.\n", "{show:?}");
}

/// A chat killed with SIGKILL in the middle of its second message resumes
/// by key with everything before it.
#[cfg(unix)]
#[test]
fn a_chat_survives_kill_9_and_resumes_by_key() {
    let env = Env::new();
    env.file(
        "s.json",
        r#"[{"text":"Looking.","calls":[{"name":"list_notes","arguments":{}}]},
            {"text":"Three notes."},
            {"text":"one two three four five six seven eight nine ten","delay_ms":400}]"#,
    );
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("lrg"))
        .args([
            "chat",
            "--model",
            "script:s.json",
            "--mcp",
            DEMO,
            "--session",
            "doc:9",
        ])
        .current_dir(env.dir.path())
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("XDG_DATA_HOME", env.path("data"))
        .env("USER", "tester")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let deadline = Instant::now() + TIMEOUT;
    let mut read_until = |needle: &str| {
        let mut line = String::new();
        loop {
            assert!(Instant::now() < deadline, "timed out waiting for {needle}");
            line.clear();
            assert!(stdout.read_line(&mut line).unwrap() > 0, "lrg ended early");
            if line.contains(needle) {
                return;
            }
        }
    };
    writeln!(stdin, "what notes?").unwrap();
    read_until("Three notes.");
    writeln!(stdin, "count to ten").unwrap();
    // The slow answer is streaming when the process dies.
    let mut first = [0u8; 3];
    std::io::Read::read_exact(stdout.get_mut(), &mut first).unwrap();
    assert_eq!(&first, b"one");
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();

    let show = ran(kept(&env).args(["sessions", "show", "doc:9"]));
    assert_eq!(show.code, 0, "{show:?}");
    let before = show.stdout.clone();
    assert!(before.starts_with("you: what notes?\nmodel: Looking.\ntool list_notes {} (ok): "));
    assert!(
        before.contains("model: Three notes.\nyou: count to ten\n"),
        "{before}"
    );
    assert!(
        !before.contains("one two"),
        "the cut-off answer is not kept: {before}"
    );

    env.file("s.json", r#"[{"text":"Ten."}]"#);
    let resumed = ran(kept(&env)
        .args(["chat", "--model", "script:s.json", "--session", "doc:9"])
        .write_stdin("again please\n"));
    assert_eq!(resumed.code, 0, "{resumed:?}");
    assert!(
        resumed.stderr.contains("resuming session doc:9 (5 rows;"),
        "{resumed:?}"
    );
    assert_eq!(resumed.stdout, "Ten.\n", "{resumed:?}");
    let after = ran(kept(&env).args(["sessions", "show", "doc:9"])).stdout;
    assert_eq!(after, format!("{before}you: again please\nmodel: Ten.\n"));
}

/// The one kept chat's file.
fn the_file(env: &Env) -> std::path::PathBuf {
    let dir = env.path("data").join("lrg").join("sessions");
    let files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    files[0].clone()
}

/// A chat whose file is damaged (a NUL line before intact rows, a corrupt
/// header, a newer format) is refused with exit 2, left byte for byte as it
/// was, never replaced by a second chat, and listed as damaged.
#[test]
fn a_damaged_chat_is_refused_with_exit_2_listed_and_left_as_it_is() {
    let env = Env::new();
    env.file("s.json", r#"[{"text":"hi"}, {"text":"hi again"}]"#);
    let args = |text: &'static str| {
        [
            "run",
            "--model",
            "script:s.json",
            "--session",
            "doc:1",
            text,
        ]
    };
    let r = ran(kept(&env).args(args("hello")));
    assert_eq!(r.code, 0, "{r:?}");
    let r = ran(kept(&env).args(args("more")));
    assert_eq!(r.code, 0, "{r:?}");
    let file = the_file(&env);
    let good = std::fs::read(&file).unwrap();
    let header_end = good.iter().position(|&b| b == b'\n').unwrap() + 1;
    let nul = [
        &good[..header_end],
        &[0u8; 32][..],
        b"\n",
        &good[header_end..],
    ]
    .concat();
    let garbage = [&b"{\"lrg_session\":1,garbage\n"[..], &good[header_end..]].concat();
    let newer = String::from_utf8(good.clone())
        .unwrap()
        .replacen("{\"lrg_session\":1,", "{\"lrg_session\":3,", 1)
        .into_bytes();
    for (bad, what) in [
        (nul, ":2: a line of 32 NUL byte(s)"),
        (garbage, ":1: not an lrg session header"),
        (newer, "written by a newer lrg (format version 3"),
    ] {
        std::fs::write(&file, &bad).unwrap();
        let r = ran(kept(&env).args(args("again")));
        assert_eq!(r.code, 2, "{r:?}");
        assert!(r.stderr.contains(what), "{what}: {r:?}");
        assert!(r.stderr.contains("left as it is"), "{r:?}");
        assert_eq!(the_file(&env), file, "a second chat");
        assert_eq!(
            std::fs::read(&file).unwrap(),
            bad,
            "{what}: the file was changed"
        );

        let list = ran(kept(&env).args(["sessions"]));
        assert_eq!(list.code, 0, "{list:?}");
        let line = list.stdout.lines().nth(1).unwrap_or_default().to_string();
        assert!(
            line.starts_with("doc:1") && line.contains("DAMAGED"),
            "{list:?}"
        );
        assert!(line.contains(what), "{list:?}");
        let json = ran(kept(&env).args(["sessions", "--json"]));
        let listed: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
        assert_eq!(listed[0]["key"], "doc:1", "{json:?}");
        assert!(
            listed[0]["damaged"].as_str().unwrap().contains(what),
            "{json:?}"
        );
        let show = ran(kept(&env).args(["sessions", "show", "doc:1"]));
        assert_eq!(show.code, 2, "{show:?}");
    }
    // Repaired, it resumes with everything.
    std::fs::write(&file, &good).unwrap();
    let r = ran(kept(&env).args(args("again")));
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stderr.contains("resuming session doc:1 (4 rows;"),
        "{r:?}"
    );
    // Or, asked for by name, a damaged chat is removed.
    std::fs::write(&file, b"").unwrap();
    let rm = ran(kept(&env).args(["sessions", "rm", "doc:1"]));
    assert_eq!(rm.code, 0, "{rm:?}");
    assert!(!file.exists());
    let list = ran(kept(&env).args(["sessions", "--json"]));
    assert_eq!(list.stdout.trim(), "[]", "{list:?}");
}

/// A resume keeps the whole conversation: 200 rows stay on disk and in
/// `lrg sessions show`; `--max-kept-rows` moves older ones to an archive.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_rows_are_kept_through_a_resume() {
    use lrg_chat::store::{JsonlStore, ModelBinding, SessionKeys, SessionMeta, SessionState};
    let env = Env::new();
    env.file("s.json", r#"[{"text":"one more"}, {"text":"and another"}]"#);
    let dir = env.path("data").join("lrg").join("sessions");
    let store = JsonlStore::new(&dir);
    let keys = SessionKeys::new("tester", "big").unwrap();
    let meta = SessionMeta::new(ModelBinding::new("script:s.json")).with_keys(keys);
    lrg_chat::store::SessionStore::create(&store, &meta)
        .await
        .unwrap();
    let rows: Vec<lrg_providers::Message> = (0..100)
        .flat_map(|i| {
            [
                lrg_providers::Message::user(format!("q{i}")),
                lrg_providers::Message::assistant(format!("a{i}")),
            ]
        })
        .collect();
    lrg_chat::store::SessionStore::append(&store, &meta.id, &rows, &SessionState::default())
        .await
        .unwrap();
    lrg_chat::store::SessionStore::release(&store, &meta.id).await;
    drop(store);

    let run = |extra: &'static [&'static str]| {
        let mut cmd = kept(&env);
        cmd.args(["run", "--model", "script:s.json", "--session", "big"])
            .args(extra)
            .arg("more");
        ran(&mut cmd)
    };
    let r = run(&[]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stderr.contains("resuming session big (200 rows;"),
        "{r:?}"
    );
    let show = ran(kept(&env).args(["sessions", "show", "big", "--json"]));
    let t: serde_json::Value = serde_json::from_str(&show.stdout).unwrap();
    assert_eq!(t["rows"].as_array().unwrap().len(), 202, "{show:?}");
    assert_eq!(t["truncated"], false);
    assert_eq!(t["rows"][0]["text"], "q0");
    let text = ran(kept(&env).args(["sessions", "show", "big"])).stdout;
    assert!(text.starts_with("you: q0\nmodel: a0\n"), "{text}");
    assert_eq!(text.lines().count(), 202);

    // A bound, asked for: the older rows move to an archive, none is lost.
    let r = run(&["--max-kept-rows", "50"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stderr.contains("resuming session big (50 rows;"), "{r:?}");
    let file = the_file(&env);
    let archive = std::path::PathBuf::from(format!("{}.archive-1", file.display()));
    let archived = std::fs::read_to_string(&archive).unwrap();
    assert_eq!(archived.lines().count(), 1 + 152, "{archived}");
    assert!(archived.lines().nth(1).unwrap().contains("q0"));
    let show = ran(kept(&env).args(["sessions", "show", "big", "--json"]));
    let t: serde_json::Value = serde_json::from_str(&show.stdout).unwrap();
    assert_eq!(t["rows"].as_array().unwrap().len(), 52, "{show:?}");
}
