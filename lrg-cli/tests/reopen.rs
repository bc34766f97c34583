//! A kept chat is never lost on reopen: `--session KEY` with no model
//! resumes on the chat's own model, the same model resumes, another model
//! exits 2 and changes nothing, `--carry-over` moves the conversation to
//! the new model, and `--replace` starts a new chat and archives the old
//! one, which `lrg sessions` lists and `show`/`rm` take by its archive id.
//! Every run keeps its sessions in the test's own directory
//! (`XDG_DATA_HOME`), under a fixed OS user.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::path::PathBuf;

use common::{Env, ran};
use serde_json::Value;

fn kept(env: &Env) -> assert_cmd::Command {
    let mut cmd = env.lrg();
    cmd.env("XDG_DATA_HOME", env.path("data"))
        .env("USER", "tester");
    cmd
}

/// Every file of the store, with its bytes, sorted by name.
fn store_files(env: &Env) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = env.path("data").join("lrg").join("sessions");
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let path = e.unwrap().path();
            let bytes = std::fs::read(&path).unwrap();
            (path, bytes)
        })
        .collect();
    files.sort();
    files
}

fn listed(env: &Env) -> Vec<Value> {
    let r = ran(kept(env).args(["sessions", "--json"]));
    assert_eq!(r.code, 0, "{r:?}");
    serde_json::from_str::<Value>(&r.stdout)
        .unwrap()
        .as_array()
        .unwrap()
        .clone()
}

fn run(env: &Env, args: &[&str]) -> common::Ran {
    ran(kept(env).arg("run").args(args))
}

/// A chat kept under `k` on `script:a.json`, one exchange long.
fn a_kept_chat() -> Env {
    let env = Env::new();
    env.file("a.json", r#"[{"text":"From a."}]"#);
    env.file("b.json", r#"[{"text":"From b."}]"#);
    let r = run(&env, &["--model", "script:a.json", "--session", "k", "hi"]);
    assert_eq!(r.code, 0, "{r:?}");
    env
}

#[test]
fn with_no_model_a_kept_chat_resumes_on_its_own_model() {
    let env = a_kept_chat();
    env.file("a.json", r#"[{"text":"Still a."}]"#);
    // No --model and no LRG_MODEL (the environment is cleared): the stored
    // model, not the first local one found.
    let r = run(&env, &["--session", "k", "again"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(r.stdout, "Still a.\n");
    assert!(
        r.stderr.contains("lrg: resuming session k (2 rows;"),
        "{r:?}"
    );
    let show = ran(kept(&env).args(["sessions", "show", "k"]));
    assert_eq!(
        show.stdout, "you: hi\nmodel: From a.\nyou: again\nmodel: Still a.\n",
        "{show:?}"
    );
}

#[test]
fn with_the_same_model_a_kept_chat_resumes() {
    let env = a_kept_chat();
    env.file("a.json", r#"[{"text":"Still a."}]"#);
    let r = run(
        &env,
        &["--model", "script:a.json", "--session", "k", "again"],
    );
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stderr.contains("resuming session k (2 rows;"), "{r:?}");
    let list = listed(&env);
    assert_eq!(list.len(), 1, "{list:?}");
    assert_eq!(list[0]["rows"], 4);
}

#[test]
fn another_model_exits_2_and_changes_nothing() {
    let env = a_kept_chat();
    let before = store_files(&env);
    for (cmd, extra) in [("run", Some("hi")), ("chat", None)] {
        let mut c = kept(&env);
        c.args([cmd, "--model", "script:b.json", "--session", "k"]);
        if let Some(prompt) = extra {
            c.arg(prompt);
        }
        let r = ran(c.write_stdin(""));
        assert_eq!(r.code, 2, "{cmd}: {r:?}");
        assert!(
            r.stderr
                .contains("session k is a chat with script:a.json, not script:b.json"),
            "{r:?}"
        );
        assert!(r.stderr.contains("nothing was changed"), "{r:?}");
        assert!(
            r.stderr
                .contains("--carry-over  carry this conversation over to script:b.json"),
            "{r:?}"
        );
        assert!(
            r.stderr.contains("--replace     start a new chat under k"),
            "{r:?}"
        );
        assert!(r.stdout.is_empty(), "nothing was asked of a model: {r:?}");
        assert_eq!(store_files(&env), before, "the store, byte for byte");
    }
}

#[test]
fn another_model_with_carry_over_keeps_the_history_and_says_so() {
    let env = a_kept_chat();
    let r = run(
        &env,
        &[
            "--model",
            "script:b.json",
            "--session",
            "k",
            "--carry-over",
            "--json",
            "and now?",
        ],
    );
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stderr
            .contains("carrying session k (2 rows) over from script:a.json to script:b.json"),
        "{r:?}"
    );
    let lines: Vec<Value> = r
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // The header, then the switch (after the history, which is not
    // printed again), then the new message.
    assert_eq!(lines[0]["type"], "lrg_events", "{r:?}");
    assert_eq!(lines[1]["type"], "model_switched", "{r:?}");
    assert_eq!(lines[1]["from"], "script:a.json");
    assert_eq!(lines[1]["to"], "script:b.json");
    assert!(
        lines[1]["seq"].as_u64().unwrap() > 2,
        "numbered after the history"
    );
    assert_eq!(lines[2]["type"], "user_message");
    let show = ran(kept(&env).args(["sessions", "show", "k"]));
    assert_eq!(
        show.stdout, "you: hi\nmodel: From a.\nyou: and now?\nmodel: From b.\n",
        "{show:?}"
    );
    // The chat is on the new model now: resumed there with no flag.
    let list = listed(&env);
    assert_eq!(list.len(), 1, "{list:?}");
    assert_eq!(list[0]["model"], "script:b.json");
    env.file("b.json", r#"[{"text":"Still b."}]"#);
    let r = run(
        &env,
        &["--model", "script:b.json", "--session", "k", "more"],
    );
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(r.stdout, "Still b.\n");
}

#[test]
fn carrying_over_to_a_cloud_model_names_where_the_conversation_goes() {
    let env = a_kept_chat();
    // Refused first: the message names the host the conversation would go to.
    let r = ran(kept(&env)
        .env("OPENAI_API_KEY", "sk-test")
        .args(["chat", "--model", "openai:gpt-4.1", "--session", "k"])
        .write_stdin(""));
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr.contains(
            "--carry-over  carry this conversation over to openai:gpt-4.1, which sends it to \
             api.openai.com"
        ),
        "{r:?}"
    );
    // Carried over (no message is sent: stdin is empty).
    let r = ran(kept(&env)
        .env("OPENAI_API_KEY", "sk-test")
        .args([
            "chat",
            "--model",
            "openai:gpt-4.1",
            "--session",
            "k",
            "--carry-over",
        ])
        .write_stdin(""));
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stderr
            .contains("over from script:a.json to openai:gpt-4.1; the conversation is being sent to api.openai.com"),
        "{r:?}"
    );
    assert!(
        r.stderr
            .contains("switched from script:a.json to openai:gpt-4.1"),
        "{r:?}"
    );
    assert_eq!(listed(&env)[0]["model"], "openai:gpt-4.1");
}

#[test]
fn another_model_with_replace_archives_the_old_chat() {
    let env = a_kept_chat();
    let r = run(
        &env,
        &[
            "--model",
            "script:b.json",
            "--session",
            "k",
            "--replace",
            "fresh",
        ],
    );
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(r.stdout, "From b.\n");
    let list = listed(&env);
    assert_eq!(list.len(), 2, "{list:?}");
    let old = list.iter().find(|s| s["archived"] == true).unwrap();
    let new = list.iter().find(|s| s["archived"] == false).unwrap();
    assert_eq!(old["model"], "script:a.json");
    assert_eq!(old["key"], "k");
    assert_eq!(old["rows"], 2, "its history is kept");
    let archive_id = old["archive_id"].as_str().unwrap().to_string();
    assert_eq!(archive_id, old["id"].as_str().unwrap());
    assert!(new.get("archive_id").is_none(), "{new}");
    assert!(
        r.stderr.contains(&format!("archived as {archive_id}")),
        "{r:?}"
    );
    let text = ran(kept(&env).args(["sessions"]));
    assert!(
        text.stdout.contains(&format!("(archived: {archive_id})")),
        "{text:?}"
    );

    // The key is the new chat's; the archive id is the old one's.
    let show = ran(kept(&env).args(["sessions", "show", "k"]));
    assert_eq!(show.stdout, "you: fresh\nmodel: From b.\n", "{show:?}");
    let show = ran(kept(&env).args(["sessions", "show", &archive_id]));
    assert_eq!(show.code, 0, "{show:?}");
    assert_eq!(show.stdout, "you: hi\nmodel: From a.\n", "{show:?}");
    // Not another user's.
    let other = ran(kept(&env)
        .env("USER", "someone")
        .args(["sessions", "show", &archive_id]));
    assert_eq!(other.code, 2, "{other:?}");

    let rm = ran(kept(&env).args(["sessions", "rm", &archive_id]));
    assert_eq!(rm.code, 0, "{rm:?}");
    let list = listed(&env);
    assert_eq!(list.len(), 1, "{list:?}");
    assert_eq!(list[0]["archived"], false);
    assert_eq!(list[0]["model"], "script:b.json");
}

#[test]
fn the_two_ways_forward_are_flags_of_a_kept_chat_and_exclude_each_other() {
    let env = a_kept_chat();
    let r = run(
        &env,
        &[
            "--model",
            "script:b.json",
            "--session",
            "k",
            "--carry-over",
            "--replace",
            "x",
        ],
    );
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("cannot be used with"), "{r:?}");
    let r = run(&env, &["--model", "script:b.json", "--replace", "x"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("--session"), "{r:?}");
    // The same model: neither flag changes anything.
    env.file("a.json", r#"[{"text":"Same."}]"#);
    let r = run(
        &env,
        &[
            "--model",
            "script:a.json",
            "--session",
            "k",
            "--replace",
            "x",
        ],
    );
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stderr.contains("resuming session k"), "{r:?}");
    assert_eq!(listed(&env).len(), 1);
}

#[test]
fn model_in_lrg_chat_carries_a_kept_chat_over_and_never_empties_it() {
    let env = a_kept_chat();
    env.file("b.json", r#"[{"text":"From b."}]"#);
    // `n` (a new chat) is not offered for a kept chat: it keeps the model.
    let r = ran(kept(&env)
        .args(["chat", "--session", "k"])
        .write_stdin("/model script:b.json\nn\n"));
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stderr.contains("kept the current model"), "{r:?}");
    assert!(
        r.stderr.contains("--replace --model script:b.json"),
        "{r:?}"
    );
    assert_eq!(listed(&env)[0]["rows"], 2);
    // `c` carries it over: the history stays, the next answer is b's, and
    // the chat is kept on b from now on.
    let r = ran(kept(&env)
        .args(["chat", "--session", "k"])
        .write_stdin("/model script:b.json\nc\nagain\n"));
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stderr.contains("Carried over to script:b.json."), "{r:?}");
    assert_eq!(r.stdout, "From b.\n", "{r:?}");
    let show = ran(kept(&env).args(["sessions", "show", "k"]));
    assert_eq!(
        show.stdout, "you: hi\nmodel: From a.\nyou: again\nmodel: From b.\n",
        "{show:?}"
    );
    let list = listed(&env);
    assert_eq!(list.len(), 1, "{list:?}");
    assert_eq!(list[0]["model"], "script:b.json", "{list:?}");
}
