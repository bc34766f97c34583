//! `lrg` as a process: help, exit codes, output modes, permissions without a
//! terminal, record and replay, tools, with the demo MCP server as a real
//! tool server.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::io::Read as _;
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::{Env, TIMEOUT, call_then_reply, ran, repo_root};

const DEMO: &str = "lrg demo-server";

const NOTES_SCRIPT: &str = r#"[
  {"reasoning":"Look first.","text":"Let me look.","calls":[{"name":"list_notes","arguments":{}}],
   "usage":{"prompt_tokens":100,"completion_tokens":10}},
  {"text":"You have three notes."}
]"#;

// ---------------------------------------------------------------- help

#[test]
fn help_texts() {
    let env = Env::new();
    for (name, args) in [
        ("help", vec!["--help"]),
        ("run_help", vec!["run", "--help"]),
        ("chat_help", vec!["chat", "--help"]),
        ("models_help", vec!["models", "--help"]),
        ("tools_help", vec!["tools", "--help"]),
        ("demo_server_help", vec!["demo-server", "--help"]),
        ("serve_help", vec!["serve", "--help"]),
        ("acp_help", vec!["acp", "--help"]),
    ] {
        let r = ran(env.lrg().args(&args));
        assert_eq!(r.code, 0, "{r:?}");
        insta::assert_snapshot!(name, r.stdout);
    }
}

#[test]
fn help_lists_the_exit_codes() {
    let r = ran(Env::new().lrg().args(["run", "--help"]));
    for line in [
        "0  the model replied",
        "1  a model or tool error",
        "2  bad usage",
        "3  stopped",
    ] {
        assert!(r.stdout.contains(line), "{line}: {r:?}");
    }
}

// ---------------------------------------------------------------- run

#[test]
fn plain_run_reply_on_stdout_tools_on_stderr() {
    let env = Env::new();
    env.file("s.json", NOTES_SCRIPT);
    let r = ran(env.lrg().args([
        "run",
        "--model",
        "script:s.json",
        "--mcp",
        DEMO,
        "what notes?",
    ]));
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(r.stdout, "Let me look.\nYou have three notes.\n");
    assert!(r.stderr.contains("→ list_notes {} [read]"), "{r:?}");
    assert!(
        r.stderr
            .contains("✓ list_notes 1: Buy oat milk and coffee beans …"),
        "{r:?}"
    );
    assert!(
        r.stderr.contains("Look first."),
        "reasoning on stderr: {r:?}"
    );
    // No ANSI codes when stderr is not a terminal.
    assert!(!r.stderr.contains('\x1b'), "{r:?}");
}

#[test]
fn json_run_prints_the_session_events() {
    let env = Env::new();
    env.file("s.json", NOTES_SCRIPT);
    let r = ran(env.lrg().args([
        "run",
        "--json",
        "--model",
        "script:s.json",
        "--mcp",
        DEMO,
        "what notes?",
    ]));
    assert_eq!(r.code, 0, "{r:?}");
    // Nothing but JSON, and on stdout; stderr has the cost summary alone.
    assert_eq!(r.stderr.lines().count(), 1, "{r:?}");
    assert!(
        r.stderr
            .starts_with("lrg: 110 tokens (100 in; 10 out), $0.0000, "),
        "{r:?}"
    );
    for line in r.stdout.lines() {
        serde_json::from_str::<serde_json::Value>(line).expect(line);
    }
    let first: serde_json::Value = serde_json::from_str(r.stdout.lines().next().unwrap()).unwrap();
    assert_eq!(first["type"], "lrg_events");
    assert_eq!(first["version"], 1);
    insta::assert_snapshot!(r.stdout);
}

#[test]
fn prompt_from_stdin_and_last_message_file() {
    let env = Env::new();
    env.file("s.json", r#"[{"text":"Hi there."}]"#);
    let r = ran(env
        .lrg()
        .args([
            "run",
            "--model",
            "script:s.json",
            "--output-last-message",
            "last.txt",
            "-",
        ])
        .write_stdin("hello\n"));
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(env.read("last.txt"), "Hi there.");
}

#[test]
fn system_prompt_and_denied_tools_reach_the_model_request() {
    let env = Env::new();
    env.file("s.json", r#"[{"text":"ok"}]"#);
    let r = ran(env.lrg().args([
        "run",
        "--model",
        "script:s.json",
        "--mcp",
        DEMO,
        "--system",
        "Be brief.",
        "--deny",
        "delete_notes",
        "--record",
        "rec.json",
        "hi",
    ]));
    assert_eq!(r.code, 0, "{r:?}");
    let rec: serde_json::Value = serde_json::from_str(&env.read("rec.json")).unwrap();
    let request = &rec["exchanges"][0]["request"];
    assert_eq!(request["system"], "Be brief.");
    let tools: Vec<&str> = request["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        tools,
        ["add_note", "list_notes", "read_note"],
        "a denied tool is not offered"
    );
}

// ---------------------------------------------------------------- exit codes

#[test]
fn exit_1_when_the_model_fails() {
    let env = Env::new();
    env.file(
        "s.json",
        r#"[{"error":{"transient":false,"message":"the model fell over"}}]"#,
    );
    let r = ran(env.lrg().args(["run", "--model", "script:s.json", "hi"]));
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stderr.contains("the model fell over"), "{r:?}");
}

#[test]
fn exit_3_when_the_step_limit_runs_out() {
    let env = Env::new();
    let turn = r#"{"calls":[{"name":"list_notes","arguments":{}}]}"#;
    env.file("s.json", &format!("[{turn},{turn},{turn}]"));
    let r = ran(env.lrg().args([
        "run",
        "--model",
        "script:s.json",
        "--mcp",
        DEMO,
        "--max-steps",
        "2",
        "loop",
    ]));
    assert_eq!(r.code, 3, "{r:?}");
}

#[test]
fn exit_2_for_bad_usage_and_configuration() {
    let env = Env::new();
    env.file("s.json", r#"[{"text":"hi"}]"#);
    let cases: &[(&[&str], &str)] = &[
        (
            &["run", "--model", "nope:x", "hi"],
            "unknown provider \"nope\"",
        ),
        (
            &["run", "--model", "script:missing.json", "hi"],
            "missing.json",
        ),
        (
            &["run", "--model", "replay:missing.json", "hi"],
            "missing.json",
        ),
        (&["run", "--model", "script:s.json"], "the message is empty"),
        (
            &["run", "--model", "script:s.json", "--mode", "yolo", "hi"],
            "invalid value 'yolo'",
        ),
        (
            &[
                "run",
                "--model",
                "script:s.json",
                "--allow",
                "t",
                "--deny",
                "t",
                "hi",
            ],
            "both --allow and --deny",
        ),
        (
            &[
                "run",
                "--model",
                "script:s.json",
                "--mcp",
                "lrg-no-such-program-x",
                "hi",
            ],
            "lrg-no-such-program-x",
        ),
        (
            &[
                "run",
                "--model",
                "script:s.json",
                "--mcp",
                "'unclosed",
                "hi",
            ],
            "--mcp",
        ),
        (
            &[
                "run",
                "--model",
                "script:s.json",
                "--mcp-config",
                "nope.json",
                "hi",
            ],
            "nope.json",
        ),
        (&["run", "--model", "server:m", "hi"], "LRG_SERVER_URL"),
        (
            &["run", "--model", "openai:gpt-4.1", "hi"],
            "OPENAI_API_KEY",
        ),
        (
            &["run", "--model", "anthropic:claude", "hi"],
            "ANTHROPIC_API_KEY",
        ),
        (
            &["run", "--model", "gemini:gemini-2.5-flash", "hi"],
            "GEMINI_API_KEY",
        ),
        (&["run", "hi"], "LRG_MODEL"),
        (&["tools"], "--mcp"),
        (&["frobnicate"], "unrecognized subcommand"),
    ];
    for (args, needle) in cases {
        let r = ran(env.lrg().args(*args));
        assert_eq!(r.code, 2, "{args:?}: {r:?}");
        assert!(
            r.stderr.contains(needle),
            "{args:?} should say {needle:?}: {r:?}"
        );
    }
}

#[test]
fn lrg_model_env_is_the_default() {
    let env = Env::new();
    env.file("s.json", r#"[{"text":"from the env"}]"#);
    let r = ran(env
        .lrg()
        .env("LRG_MODEL", "script:s.json")
        .args(["run", "hi"]));
    assert_eq!((r.code, r.stdout.as_str()), (0, "from the env\n"), "{r:?}");
}

// ---------------------------------------------------------------- permissions

#[test]
fn a_destructive_call_without_a_terminal_is_denied_at_once() {
    let env = Env::new();
    env.file(
        "s.json",
        &call_then_reply("delete_notes", r#"{"ids":[1]}"#, "Could not delete."),
    );
    let started = Instant::now();
    let r = ran(env
        .lrg()
        .args([
            "run",
            "--json",
            "--model",
            "script:s.json",
            "--mcp",
            DEMO,
            "delete note 1",
        ])
        .timeout(Duration::from_secs(30)));
    assert!(started.elapsed() < Duration::from_secs(30));
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stdout.contains(
            r#"{"seq":7,"type":"tool_skipped","call_id":"call_1_1","reason":"not_allowed","note":"no one can approve in a non-interactive run"}"#
        ),
        "{r:?}"
    );
}

#[test]
fn yes_approves_and_allow_lets_a_tool_run() {
    let env = Env::new();
    env.file(
        "s.json",
        &call_then_reply("delete_notes", r#"{"ids":[1,2]}"#, "Done."),
    );
    for flags in [
        vec!["--yes"],
        vec!["--allow", "delete_notes"],
        vec!["--mode", "auto_all"],
    ] {
        let mut args = vec!["run", "--model", "script:s.json", "--mcp", DEMO];
        args.extend(flags.iter().copied());
        args.push("delete notes 1 and 2");
        let r = ran(env.lrg().args(&args));
        assert_eq!(r.code, 0, "{flags:?}: {r:?}");
        assert!(
            r.stderr.contains("✓ delete_notes deleted 2 note(s)"),
            "{flags:?}: {r:?}"
        );
    }
}

#[test]
fn ask_all_asks_even_for_reads() {
    let env = Env::new();
    env.file("s.json", &call_then_reply("list_notes", "{}", "ok"));
    let r = ran(env.lrg().args([
        "run",
        "--model",
        "script:s.json",
        "--mcp",
        DEMO,
        "--mode",
        "ask_all",
        "list",
    ]));
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stderr.contains(
            "list_notes skipped: not allowed (no one can approve in a non-interactive run)"
        ),
        "{r:?}"
    );
}

// ---------------------------------------------------------------- record and replay

#[test]
fn a_recorded_run_replays_identically_and_a_changed_prompt_fails_with_a_diff() {
    let env = Env::new();
    env.file("s.json", NOTES_SCRIPT);
    let base = ["run", "--json", "--mcp", DEMO];
    let recorded = ran(env.lrg().args(base).args([
        "--model",
        "script:s.json",
        "--record",
        "rec.json",
        "what notes?",
    ]));
    assert_eq!(recorded.code, 0, "{recorded:?}");

    let replayed = ran(env
        .lrg()
        .args(base)
        .args(["--model", "replay:rec.json", "what notes?"]));
    assert_eq!(replayed.code, 0, "{replayed:?}");
    // The same events, apart from the model named in the header line.
    let body = |s: &str| s.lines().skip(1).collect::<Vec<_>>().join("\n");
    assert_eq!(body(&replayed.stdout), body(&recorded.stdout));

    let changed = ran(env.lrg().args([
        "run",
        "--mcp",
        DEMO,
        "--model",
        "replay:rec.json",
        "what notes now?",
    ]));
    assert_eq!(changed.code, 1, "{changed:?}");
    assert!(
        changed
            .stderr
            .contains("request 1 differs from the recorded one"),
        "{changed:?}"
    );
    assert!(
        changed
            .stderr
            .contains("--- recorded request\n+++ request now\n"),
        "{changed:?}"
    );
    assert!(
        changed
            .stderr
            .contains("-          \"text\": \"what notes?\","),
        "{changed:?}"
    );
    assert!(
        changed
            .stderr
            .contains("+          \"text\": \"what notes now?\","),
        "{changed:?}"
    );

    // A changed tool set is caught too: without the server, no tools are offered.
    let no_tools = ran(env
        .lrg()
        .args(["run", "--model", "replay:rec.json", "what notes?"]));
    assert_eq!(no_tools.code, 1, "{no_tools:?}");
    assert!(no_tools.stderr.contains("-  \"tools\": ["), "{no_tools:?}");
}

#[test]
fn a_replay_that_stops_early_is_an_error() {
    let env = Env::new();
    env.file("s.json", NOTES_SCRIPT);
    let r = ran(env.lrg().args([
        "run",
        "--mcp",
        DEMO,
        "--model",
        "script:s.json",
        "--record",
        "rec.json",
        "q",
    ]));
    assert_eq!(r.code, 0, "{r:?}");
    // One step only: the second recorded turn is never asked for.
    let r = ran(env.lrg().args([
        "run",
        "--mcp",
        DEMO,
        "--model",
        "replay:rec.json",
        "--max-steps",
        "1",
        "q",
    ]));
    assert_eq!(r.code, 3, "{r:?}");
}

#[test]
fn the_bundled_recording_replays_offline() {
    // The README's main job.
    let r = ran(Env::new().lrg().current_dir(repo_root()).args([
        "run",
        "--model",
        "replay:examples/recordings/hello.json",
        "--mcp",
        DEMO,
        "What notes do I have?",
    ]));
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("You have three notes:"), "{r:?}");
}

// ---------------------------------------------------------------- tools

#[test]
fn tools_lists_class_and_permission() {
    let env = Env::new();
    let r = ran(env
        .lrg()
        .args(["tools", "--mcp", DEMO, "--deny", "add_note"]));
    assert_eq!(r.code, 0, "{r:?}");
    insta::assert_snapshot!("tools_table", r.stdout);
    let r = ran(env
        .lrg()
        .args(["tools", "--json", "--mcp", DEMO, "--mode", "auto_safe"]));
    assert_eq!(r.code, 0, "{r:?}");
    insta::assert_snapshot!("tools_json", r.stdout);
}

#[test]
fn tools_schema_for_each_target() {
    let env = Env::new();
    for target in ["grammar", "openai", "anthropic", "gemini"] {
        let r = ran(env
            .lrg()
            .args(["tools", "--json", "--mcp", DEMO, "--schema", target]));
        assert_eq!(r.code, 0, "{r:?}");
        let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
        let delete = v["tools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == "delete_notes")
            .unwrap();
        insta::assert_json_snapshot!(format!("schema_{target}"), delete["schema"]);
    }
}

#[test]
fn permissions_file_is_bound_by_default_and_flags_are_not_saved() {
    let env = Env::new();
    let default = env.path("config/lrg/permissions.json");
    let permission = |r: &common::Ran, tool: &str| {
        let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
        let row = v["tools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == tool)
            .cloned()
            .unwrap();
        row["permission"].as_str().unwrap().to_string()
    };
    // A run binds the default file, writing the defaults when it is new.
    env.file("s.json", r#"[{"text": "hi"}]"#);
    let r = ran(env.lrg().args(["run", "--model", "script:s.json", "hi"]));
    assert_eq!(r.code, 0, "{r:?}");
    let saved: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&default).unwrap()).unwrap();
    assert_eq!(saved["mode"], "auto_read");
    // What the file says holds in later runs.
    std::fs::write(&default, r#"{"rules": {"list_notes": "block"}}"#).unwrap();
    let r = ran(env.lrg().args(["tools", "--json", "--mcp", DEMO]));
    assert_eq!(permission(&r, "list_notes"), "block", "{r:?}");
    // Flags win for this run, and a run with flags leaves the file alone.
    let r = ran(env.lrg().args([
        "run",
        "--model",
        "script:s.json",
        "--mode",
        "auto_all",
        "hi",
    ]));
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(
        std::fs::read_to_string(&default).unwrap(),
        r#"{"rules": {"list_notes": "block"}}"#
    );
    // --permissions names another file.
    env.file("mine.json", r#"{"rules": {"add_note": "block"}}"#);
    let r = ran(env.lrg().args([
        "tools",
        "--json",
        "--mcp",
        DEMO,
        "--permissions",
        "mine.json",
    ]));
    assert_eq!(permission(&r, "add_note"), "block", "{r:?}");
    assert_eq!(permission(&r, "list_notes"), "allow", "{r:?}");
    // A broken file is a usage error that names it.
    std::fs::write(&default, "{not json").unwrap();
    let r = ran(env.lrg().args(["tools", "--mcp", DEMO]));
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("permissions.json"), "{r:?}");
}

#[test]
fn mcp_config_file_is_read() {
    let env = Env::new();
    let exe = assert_cmd::cargo::cargo_bin("lrg");
    let config =
        serde_json::json!({"mcpServers": {"notes": {"command": exe, "args": ["demo-server"]}}});
    env.file("mcp.json", &config.to_string());
    let r = ran(env
        .lrg()
        .args(["tools", "--json", "--mcp-config", "mcp.json"]));
    assert_eq!(r.code, 0, "{r:?}");
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["tools"][0]["server"], "notes");
    assert_eq!(v["tools"].as_array().unwrap().len(), 4);
}

#[test]
fn disabled_mcp_servers_are_listed_and_never_started() {
    let env = Env::new();
    let exe = assert_cmd::cargo::cargo_bin("lrg");
    // Were it started, the disabled server would leave a file behind.
    let config = serde_json::json!({"mcpServers": {
        "off": {"command": "sh", "args": ["-c", "touch started; sleep 5"], "disabled": true},
        "notes": {"command": exe, "args": ["demo-server"]},
    }});
    env.file("mcp.json", &config.to_string());
    let r = ran(env
        .lrg()
        .args(["tools", "--json", "--mcp-config", "mcp.json"]));
    assert_eq!(r.code, 0, "{r:?}");
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["disabled_servers"], serde_json::json!(["off"]));
    assert!(v["failed_servers"].as_array().unwrap().is_empty(), "{r:?}");
    assert!(
        v["tools"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t["server"] == "notes")
    );
    let r = ran(env.lrg().args(["tools", "--mcp-config", "mcp.json"]));
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("`off` is disabled"), "{r:?}");
    assert!(
        !env.path("started").exists(),
        "a disabled server was started"
    );
}

// ---------------------------------------------------------------- Ctrl-C

#[cfg(unix)]
#[test]
fn ctrl_c_stops_the_run_with_exit_3() {
    let env = Env::new();
    env.file(
        "s.json",
        r#"[{"text":"one two three four five six seven eight nine ten","delay_ms":300}]"#,
    );
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("lrg"))
        .args(["run", "--model", "script:s.json", "count"])
        .current_dir(env.dir.path())
        .env_clear()
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait for the first streamed word, so the turn is surely running.
    let mut stdout = child.stdout.take().unwrap();
    let mut first = [0u8; 3];
    stdout.read_exact(&mut first).unwrap();
    assert_eq!(&first, b"one");
    let status = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let deadline = Instant::now() + TIMEOUT;
    let code = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status.code();
        }
        if Instant::now() > deadline {
            child.kill().unwrap();
            panic!("lrg did not stop after Ctrl-C");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut rest = String::new();
    stdout.read_to_string(&mut rest).unwrap();
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert_eq!(code, Some(3), "stdout: one{rest}\nstderr: {stderr}");
    assert!(stderr.contains("stopping"), "{stderr}");
    assert!(!rest.contains("ten"), "the turn was cut short: one{rest}");
}

// ---------------------------------------------------------------- chat

#[test]
fn chat_reads_messages_and_commands_from_stdin() {
    let env = Env::new();
    env.file(
        "s.json",
        r#"[{"text":"Hello."},{"text":"Hello again."},{"text":"A summary."},{"text":"Fresh start."}]"#,
    );
    let r = ran(env
        .lrg()
        .args(["chat", "--model", "script:s.json"])
        .write_stdin("hi\n/retry\n/compact\n/bogus\n/help\n/clear\nhi again\n"));
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(r.stdout, "Hello.\nHello again.\nFresh start.\n", "{r:?}");
    for needle in [
        "lrg chat — script:s.json, 0 tool(s)",
        "conversation compacted; the summary:\nA summary.",
        "unknown command /bogus",
        "/compact  replace the conversation with a summary",
        "conversation cleared",
    ] {
        assert!(r.stderr.contains(needle), "{needle}: {r:?}");
    }
}

#[test]
fn chat_keeps_going_after_a_model_error() {
    let env = Env::new();
    env.file(
        "s.json",
        r#"[{"error":{"transient":false,"message":"boom"}},{"text":"Better now."}]"#,
    );
    let r = ran(env
        .lrg()
        .args(["chat", "--model", "script:s.json"])
        .write_stdin("one\ntwo\n"));
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stderr.contains("error: boom"), "{r:?}");
    assert!(r.stdout.contains("Better now."), "{r:?}");
}

/// Without the `llama` feature, `--model llama:FILE` is a usage error (exit
/// 2) on one line that says how to get the engine: no panic, no backtrace.
#[cfg(not(feature = "llama"))]
#[test]
fn llama_model_without_the_engine_says_how_to_get_it() {
    let env = Env::new();
    let r = ran(env.lrg().env("RUST_BACKTRACE", "1").args([
        "run",
        "--model",
        "llama:model.gguf",
        "hi",
    ]));
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stdout.is_empty(), "{r:?}");
    assert_eq!(r.stderr.trim_end().lines().count(), 1, "{r:?}");
    assert!(
        r.stderr
            .contains("`cargo install --path lrg-cli --features llama` (needs cmake and libclang)"),
        "{r:?}"
    );
    assert!(!r.stderr.contains("panicked"), "{r:?}");
}

// ---------------------------------------------------------------- sub-agents

/// The parent spawns one sub-agent; its turn and the sub-agent's first race
/// for the next two script turns, so both are plain replies; the last turn
/// is the parent's reaction to the sub-agent's answer.
const SUB_AGENT_SCRIPT: &str = r#"[
  {"calls": [{"name": "spawn_sub_agent", "arguments": {"tasks": [{"description": "count the notes", "prompt": "How many notes are there?"}]}}]},
  {"text": "Working on it."},
  {"text": "Working on it."},
  {"text": "The helper is done."}
]"#;

#[test]
fn run_with_sub_agents_waits_for_them_and_the_reaction() {
    let env = Env::new();
    env.file("s.json", SUB_AGENT_SCRIPT);
    let r = ran(env.lrg().args([
        "run",
        "--json",
        "--sub-agents",
        "--model",
        "script:s.json",
        "--output-last-message",
        "last.txt",
        "count my notes in the background",
    ]));
    assert_eq!(r.code, 0, "{r:?}");
    let events: Vec<serde_json::Value> = r
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect(l))
        .collect();
    let of_type = |t: &str| events.iter().filter(|e| e["type"] == t).collect::<Vec<_>>();
    let start = of_type("subtask_start");
    assert_eq!(start.len(), 1, "{r:?}");
    assert_eq!(start[0]["description"], "count the notes");
    let sub_id = start[0]["sub_session_id"].as_str().unwrap();
    assert!(sub_id.ends_with("::sub::1"), "{sub_id}");
    let result = of_type("tool_call")
        .into_iter()
        .find(|e| e["tool"] == "sub_agent_result")
        .expect("the answer came back as a sub_agent_result call");
    assert_eq!(result["arguments"]["sub_session_id"], sub_id);
    assert!(
        of_type("busy").iter().any(|e| e["autonomous"] == true),
        "the reaction is an autonomous turn: {r:?}"
    );
    assert_eq!(
        std::fs::read_to_string(env.path("last.txt")).unwrap(),
        "The helper is done."
    );
}

#[test]
fn without_sub_agents_the_tool_is_not_offered() {
    let env = Env::new();
    env.file("s.json", SUB_AGENT_SCRIPT);
    let r = ran(env
        .lrg()
        .args(["run", "--json", "--model", "script:s.json", "hi"]));
    assert!(
        r.stdout
            .contains(r#""type":"tool_skipped","call_id":"call_1_1","reason":"unknown_tool""#),
        "{r:?}"
    );
    assert!(!r.stdout.contains("subtask_start"), "{r:?}");
}

#[test]
fn chat_with_sub_agents_shows_them_and_waits_for_them_at_the_end() {
    let env = Env::new();
    env.file("s.json", SUB_AGENT_SCRIPT);
    let r = ran(env
        .lrg()
        .args(["chat", "--sub-agents", "--model", "script:s.json"])
        .write_stdin("count my notes in the background\n"));
    assert_eq!(r.code, 0, "{r:?}");
    // The sub-agent's own reply is in its stream, not the chat's.
    assert_eq!(r.stdout, "Working on it.\nThe helper is done.\n", "{r:?}");
    assert!(r.stderr.contains("::sub::1 count the notes"), "{r:?}");
    assert!(r.stderr.contains("→ sub_agent_result"), "{r:?}");
}
