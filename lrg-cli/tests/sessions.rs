//! Kept chats from the command line: `--session KEY` resumes by key,
//! `lrg sessions` lists, shows and removes, and a chat survives kill -9.
//! Every run keeps its sessions in the test's own directory
//! (`XDG_DATA_HOME`), under a fixed OS user.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

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

#[test]
fn another_model_starts_a_new_chat_under_the_key() {
    let env = Env::new();
    env.file("a.json", r#"[{"text":"From a."}]"#);
    env.file("b.json", r#"[{"text":"From b."}]"#);
    let r = ran(kept(&env).args(["run", "--model", "script:a.json", "--session", "k", "hi"]));
    assert_eq!(r.code, 0, "{r:?}");
    let r = ran(kept(&env).args(["run", "--model", "script:b.json", "--session", "k", "hi"]));
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stderr
            .contains("session k was a chat with script:a.json; a chat never moves"),
        "{r:?}"
    );
    let show = ran(kept(&env).args(["sessions", "show", "k"]));
    assert_eq!(show.stdout, "you: hi\nmodel: From b.\n", "{show:?}");
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
