//! `lrg chat` as a person at a terminal uses it, in a pseudo-terminal
//! (rexpect): line editing, history, typing while a reply streams, Ctrl-C,
//! Markdown; and, without a terminal, the resumed chat's recap and the
//! `--json` outcome line of `lrg run`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::{Env, ran};

// ---------------------------------------------------------------- pty

#[cfg(unix)]
mod pty {
    use super::*;
    use rexpect::reader::Options;
    use rexpect::session::{PtySession, spawn_with_options};

    /// `lrg chat --model script:s.json --record rec.json ARGS` in a
    /// pseudo-terminal whose echo is on, as a person's terminal is (rexpect
    /// turns it off: without it, typing into a stream would garble nothing
    /// and the test could not fail).
    fn chat(env: &Env, script: &str, args: &[&str], vars: &[(&str, &str)]) -> PtySession {
        env.file("s.json", script);
        let mut cmd = std::process::Command::new("sh");
        cmd.arg("-c")
            .arg("stty echo icanon; exec \"$0\" \"$@\"")
            .arg(env!("CARGO_BIN_EXE_lrg"))
            .args(["chat", "--model", "script:s.json", "--record", "rec.json"])
            .args(args)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("OLLAMA_HOST", "http://127.0.0.1:9")
            .env("XDG_CONFIG_HOME", env.path("config"))
            .env("XDG_DATA_HOME", env.path("data"))
            .env("TERM", "xterm")
            .current_dir(env.dir.path());
        for (k, v) in vars {
            cmd.env(k, v);
        }
        let mut p = spawn_with_options(cmd, Options::new().timeout_ms(Some(20_000))).unwrap();
        exp(&mut p, "lrg chat — script:s.json");
        p
    }

    /// rexpect reads the terminal byte by byte, each byte a `char`: a
    /// needle is written that way, and what was read decoded back.
    fn exp(p: &mut PtySession, needle: &str) -> String {
        let bytes: String = needle.bytes().map(char::from).collect();
        let before = p.exp_string(&bytes).unwrap();
        let bytes: Vec<u8> = before.chars().map(|c| c as u8).collect();
        String::from_utf8_lossy(&bytes).into_owned()
    }

    /// Wait for the prompt of the line editor.
    fn prompt(p: &mut PtySession) -> String {
        exp(p, "> ")
    }

    /// Ctrl-D at the prompt; the chat ends with exit 0.
    fn quit(p: &mut PtySession) {
        prompt(p);
        p.send_control('d').unwrap();
        p.exp_eof().unwrap();
        // nix's WaitStatus, which rexpect does not re-export: `Exited(pid, 0)`.
        let status = format!("{:?}", p.process().wait().unwrap());
        assert!(
            status.starts_with("Exited(") && status.ends_with(", 0)"),
            "{status}"
        );
    }

    /// The user messages the model was sent, in order (each request's
    /// last message).
    fn sent(env: &Env) -> Vec<String> {
        let rec: serde_json::Value = serde_json::from_str(&env.read("rec.json")).unwrap();
        rec["exchanges"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| {
                let last = x["request"]["messages"]
                    .as_array()
                    .unwrap()
                    .last()
                    .unwrap()
                    .clone();
                assert_eq!(last["role"], "user", "{last}");
                last["parts"][0]["text"].as_str().unwrap().to_string()
            })
            .collect()
    }

    #[test]
    fn arrow_keys_edit_the_line_and_up_recalls_history() {
        let env = Env::new();
        let mut p = chat(
            &env,
            r#"[{"text":"First."},{"text":"Second."},{"text":"Third."}]"#,
            &[],
            &[("NO_COLOR", "1")],
        );
        prompt(&mut p);
        // "helo", Left, "l", Enter: "hello".
        p.send("helo").unwrap();
        p.send("\x1b[D").unwrap();
        p.send("l\r").unwrap();
        p.flush().unwrap();
        exp(&mut p, "First.");
        // Up recalls it; Home and typing edit the recalled line.
        prompt(&mut p);
        p.send("\x1b[A").unwrap();
        p.send("\x1b[H").unwrap();
        p.send("say \r").unwrap();
        p.flush().unwrap();
        exp(&mut p, "Second.");
        // A trailing backslash goes on on a new line.
        prompt(&mut p);
        p.send("line one \\\r").unwrap();
        p.send("line two\r").unwrap();
        p.flush().unwrap();
        exp(&mut p, "Third.");
        // Tab completes a command.
        prompt(&mut p);
        p.send("/he\t").unwrap();
        p.send("\r").unwrap();
        p.flush().unwrap();
        exp(&mut p, "Type a message and press Enter. Commands:");
        exp(&mut p, "Tab completes commands and tool names");
        quit(&mut p);
        assert_eq!(sent(&env), ["hello", "say hello", "line one \nline two"]);
        // The history is kept in lrg's data directory, for the next chat.
        let history = std::fs::read_to_string(env.path("data/lrg/chat-history")).unwrap();
        assert!(history.contains("say hello"), "{history}");

        let env2 = Env::new();
        std::fs::create_dir_all(env2.path("data/lrg")).unwrap();
        std::fs::write(env2.path("data/lrg/chat-history"), history).unwrap();
        let mut p = chat(&env2, r#"[{"text":"Again."}]"#, &[], &[("NO_COLOR", "1")]);
        prompt(&mut p);
        // Ctrl-R searches it.
        p.send_control('r').unwrap();
        p.send("say").unwrap();
        p.send("\r").unwrap();
        p.flush().unwrap();
        exp(&mut p, "Again.");
        quit(&mut p);
        assert_eq!(sent(&env2), ["say hello"]);
    }

    #[test]
    fn typing_during_a_stream_is_held_and_sent_after_the_reply_as_queued() {
        let env = Env::new();
        let mut p = chat(
            &env,
            r#"[{"text":"alpha bravo charlie delta echo foxtrot golf hotel","delay_ms":150},
                {"text":"Second answer."}]"#,
            &[],
            &[("NO_COLOR", "1")],
        );
        prompt(&mut p);
        p.send("first\r").unwrap();
        p.flush().unwrap();
        exp(&mut p, "alpha");
        // Typed while the reply streams: not echoed into it.
        p.send("next question\r").unwrap();
        p.flush().unwrap();
        let streamed = exp(&mut p, "hotel");
        assert_eq!(
            streamed.trim_start(),
            " bravo charlie delta echo foxtrot golf ".trim_start(),
            "the reply was not written into"
        );
        // Shown as queued, then sent.
        let shown = exp(&mut p, "(queued)");
        assert!(shown.ends_with("next question \x1b[2m"), "{shown:?}");
        exp(&mut p, "Second answer.");
        quit(&mut p);
        assert_eq!(sent(&env), ["first", "next question"]);
    }

    #[test]
    fn ctrl_c_stops_the_running_turn_and_the_chat_goes_on() {
        let env = Env::new();
        let mut p = chat(
            &env,
            r#"[{"text":"Quick one."},
                {"text":"alpha bravo charlie delta echo foxtrot golf hotel india juliet","delay_ms":200},
                {"text":"After the stop."}]"#,
            &[],
            &[("NO_COLOR", "1")],
        );
        prompt(&mut p);
        p.send("one\r").unwrap();
        p.flush().unwrap();
        exp(&mut p, "Quick one.");
        prompt(&mut p);
        p.send("two\r").unwrap();
        p.flush().unwrap();
        exp(&mut p, "bravo");
        // Typed during the turn, then Ctrl-C: the turn stops, and the line
        // is not sent unasked but waits at the prompt.
        p.send("three\r").unwrap();
        p.send_control('c').unwrap();
        // The printer's "stopped" and the signal's "stopping" may come in
        // either order.
        let before = exp(&mut p, "stopped");
        assert!(!before.contains("juliet"), "{before}");
        exp(
            &mut p,
            "(what you typed during the turn is back at the prompt)",
        );
        exp(&mut p, "> three");
        p.send("\r").unwrap();
        p.flush().unwrap();
        exp(&mut p, "After the stop.");
        quit(&mut p);
        assert_eq!(sent(&env), ["one", "two", "three"]);
    }

    #[test]
    fn a_question_during_a_turn_is_answered_as_typed() {
        let env = Env::new();
        let mut p = chat(
            &env,
            r#"[{"calls":[{"name":"delete_notes","arguments":{"ids":[1]}}]},
                {"text":"Deleted it."}]"#,
            &["--mcp", "lrg demo-server"],
            &[("NO_COLOR", "1")],
        );
        prompt(&mut p);
        p.send("delete note one\r").unwrap();
        p.flush().unwrap();
        exp(&mut p, "? allow");
        exp(&mut p, "telling the model why) > ");
        p.send("y\r").unwrap();
        p.flush().unwrap();
        exp(&mut p, "deleted 1 note(s)");
        exp(&mut p, "Deleted it.");
        quit(&mut p);
    }

    /// `text` less its CSI escape sequences.
    fn strip_ansi(text: &str) -> String {
        let mut out = String::new();
        let mut in_escape = false;
        for c in text.chars() {
            match c {
                '\x1b' => in_escape = true,
                c if in_escape => in_escape = !(c.is_ascii_alphabetic() || c == '~'),
                c => out.push(c),
            }
        }
        out
    }

    const MARKDOWN: &str = r###"[{"text":"## Done\n\nSome **bold** text.\n\n- one\n- two\n\n| a | b |\n|---|---|\n| 1 | 2 |\n"}]"###;

    #[test]
    fn markdown_is_rendered_on_a_terminal() {
        let env = Env::new();
        let mut p = chat(&env, MARKDOWN, &[], &[]);
        prompt(&mut p);
        p.send("show me\r").unwrap();
        p.flush().unwrap();
        let shown = exp(&mut p, "└───┴───┘");
        assert!(shown.contains("\x1b[1mDone\x1b[0m"), "{shown:?}");
        assert!(shown.contains("\x1b[1mbold\x1b[0m"), "{shown:?}");
        assert!(shown.contains("• one"), "{shown:?}");
        assert!(strip_ansi(&shown).contains("│ 1 │ 2 │"), "{shown:?}");
        assert!(
            !shown.contains("## Done") && !shown.contains("**bold**"),
            "{shown:?}"
        );
        quit(&mut p);
    }

    #[test]
    fn markdown_stays_plain_on_a_terminal_with_no_color() {
        let env = Env::new();
        let mut p = chat(&env, MARKDOWN, &[], &[("NO_COLOR", "1")]);
        prompt(&mut p);
        p.send("show me\r").unwrap();
        p.flush().unwrap();
        exp(&mut p, "## Done");
        exp(&mut p, "Some **bold** text.");
        quit(&mut p);
    }
}

// ---------------------------------------------------------------- piped

#[test]
fn markdown_stays_plain_when_piped() {
    let env = Env::new();
    env.file("s.json", r###"[{"text":"## Done\n\n- **one**\n"}]"###);
    let r = ran(env
        .lrg()
        .args(["chat", "--model", "script:s.json"])
        .write_stdin("hi\n"));
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(r.stdout, "## Done\n\n- **one**\n", "{r:?}");
}

#[test]
fn a_resumed_chat_shows_its_last_exchanges() {
    let env = Env::new();
    env.file(
        "s.json",
        r#"[{"text":"Reply one."},{"text":"Reply two."},{"text":"Reply three."},{"text":"Reply four."}]"#,
    );
    let store = env.path("store");
    let store = store.to_str().unwrap();
    let r = ran(env
        .lrg()
        .args([
            "chat",
            "--model",
            "script:s.json",
            "--store",
            store,
            "--session",
            "k",
        ])
        .write_stdin("one\ntwo\nthree\nfour\n"));
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        !r.stderr.contains("resumed"),
        "a new chat has nothing to recall: {r:?}"
    );
    let r = ran(env
        .lrg()
        .args(["chat", "--store", store, "--session", "k"])
        .write_stdin(""));
    assert_eq!(r.code, 0, "{r:?}");
    let recap = r
        .stderr
        .split_once("── resumed")
        .map(|(_, r)| r)
        .unwrap_or_default();
    assert!(
        recap.starts_with(
            "; the last 3 of 4 exchanges ──\n> two\nReply two.\n> three\nReply three.\n> four\nReply four.\n──\n"
        ),
        "{r:?}"
    );
    assert!(r.stdout.is_empty(), "the recap is not output: {r:?}");
}

// ---------------------------------------------------------------- --json outcome

/// The last line of `lrg run --json ARGS` with the script, and the exit code.
fn outcome(script: &str, args: &[&str]) -> (String, i32) {
    let env = Env::new();
    env.file("s.json", script);
    let r = ran(env
        .lrg()
        .args(["run", "--json", "--model", "script:s.json"])
        .args(args)
        .arg("go"));
    let last = r.stdout.lines().last().unwrap_or_default().to_string();
    (last, r.code)
}

#[test]
fn json_ends_with_the_outcome_and_its_exit_code() {
    assert_eq!(
        outcome(r#"[{"text":"Done."}]"#, &[]),
        (
            r#"{"type":"outcome","outcome":"completed","exit_code":0}"#.into(),
            0
        )
    );
    assert_eq!(
        outcome(r#"[{"error":{"transient":false,"message":"boom"}}]"#, &[]),
        (
            r#"{"type":"outcome","outcome":"error","exit_code":1}"#.into(),
            1
        )
    );
    assert_eq!(
        outcome(
            r#"[{"calls":[{"name":"nothing_here","arguments":{}}]}]"#,
            &["--max-steps", "1"]
        ),
        (
            r#"{"type":"outcome","outcome":"gave_up","exit_code":3}"#.into(),
            3
        )
    );
}

#[test]
fn giving_up_after_one_turn_says_turn() {
    let env = Env::new();
    env.file(
        "s.json",
        r#"[{"calls":[{"name":"nothing_here","arguments":{}}]}]"#,
    );
    let r = ran(env
        .lrg()
        .args(["run", "--max-steps", "1", "--model", "script:s.json", "go"]));
    assert_eq!(r.code, 3, "{r:?}");
    assert!(
        r.stderr
            .contains("Gave up after 1 model turn without a final answer"),
        "{r:?}"
    );
}

#[cfg(unix)]
#[test]
fn json_of_a_stopped_run_ends_with_stopped() {
    use std::io::{BufRead as _, BufReader};
    use std::process::Stdio;
    let env = Env::new();
    env.file(
        "s.json",
        r#"[{"text":"one two three four five six seven eight nine ten","delay_ms":300}]"#,
    );
    let mut child = env
        .lrg_std()
        .args(["run", "--json", "--model", "script:s.json", "count"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    // The first delta: the turn surely runs.
    for line in lines.by_ref() {
        if line.unwrap().contains(r#""type":"delta""#) {
            break;
        }
    }
    let killed = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let rest: Vec<String> = lines.map(Result::unwrap).collect();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(3), "{rest:#?}");
    assert_eq!(
        rest.last().map(String::as_str),
        Some(r#"{"type":"outcome","outcome":"stopped","exit_code":3}"#),
        "{rest:#?}"
    );
}
