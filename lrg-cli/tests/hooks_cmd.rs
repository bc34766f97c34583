//! Hooks from lrg's config file: a `pre_tool_use` hook that denies
//! `delete_*` stops such a call in `lrg run` (even with `--mode auto_all`)
//! and in `lrg chat`; `hooks.json` in codex's shape works too; a bad config
//! is a usage error naming the file.
#![cfg(unix)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::io::Write as _;
use std::process::Stdio;

use common::{Env, call_then_reply, ran};

const DEMO: &str = "lrg demo-server";

const GUARD: &str = r#"#!/bin/sh
input=$(cat)
case "$input" in
  *'"tool":"delete_'*) echo '{"decision":"deny","reason":"deleting needs a ticket"}' ;;
esac
"#;

fn guarded_env(config_name: &str) -> Env {
    use std::os::unix::fs::PermissionsExt as _;
    let env = Env::new();
    env.file("guard.sh", GUARD);
    std::fs::set_permissions(env.path("guard.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
    env.file(
        "s.json",
        &call_then_reply("delete_notes", r#"{"ids":[1]}"#, "I could not delete it."),
    );
    let config = "[[hooks.pre_tool_use]]\nmatcher = \"delete_*\"\ncommand = \"./guard.sh\"\ntimeout_s = 10\n";
    if config_name == "default" {
        std::fs::create_dir_all(env.path("config/lrg")).unwrap();
        env.file("config/lrg/config.toml", config);
    } else {
        env.file(config_name, config);
    }
    env
}

#[test]
fn a_config_hook_denies_delete_in_run_even_under_auto_all() {
    for config in ["default", "mine.toml"] {
        let env = guarded_env(config);
        let mut args = vec![
            "run",
            "--json",
            "--mode",
            "auto_all",
            "--model",
            "script:s.json",
            "--mcp",
            DEMO,
        ];
        if config != "default" {
            args.extend(["--config", config]);
        }
        args.push("delete note 1");
        let r = ran(env.lrg().args(&args));
        assert_eq!(r.code, 0, "{r:?}");
        assert!(
            r.stdout.contains(r#""type":"hook_decision","hook":"guard.sh","event":"pre_tool_use","decision":"deny","reason":"deleting needs a ticket","call_id":"call_1_1""#),
            "{r:?}"
        );
        assert!(r.stdout.contains(r#""reason":"hook_denied""#), "{r:?}");
        assert!(
            !r.stdout.contains(r#""type":"tool_running""#),
            "it never ran: {r:?}"
        );
    }
}

#[test]
fn a_config_hook_denies_delete_in_chat() {
    let env = guarded_env("default");
    let mut child = env
        .lrg_std()
        .args([
            "chat",
            "--mode",
            "auto_all",
            "--model",
            "script:s.json",
            "--mcp",
            DEMO,
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"delete note 1\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr
            .contains("hook guard.sh (pre_tool_use) deny on delete_notes: deleting needs a ticket"),
        "{stderr}"
    );
    assert!(stderr.contains("skipped: denied by a hook"), "{stderr}");
}

#[test]
fn hooks_json_in_codex_shape_is_read() {
    let env = guarded_env("unused.toml");
    std::fs::create_dir_all(env.path("config/lrg")).unwrap();
    env.file(
        "config/lrg/hooks.json",
        r#"{"hooks": {"PreToolUse": [{"matcher": "delete_*|drop_*", "hooks": [{"type": "command", "command": "./guard.sh", "timeout": 5}]}]}}"#,
    );
    let r = ran(env.lrg().args([
        "run",
        "--json",
        "--mode",
        "auto_all",
        "--model",
        "script:s.json",
        "--mcp",
        DEMO,
        "delete note 1",
    ]));
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains(r#""reason":"hook_denied""#), "{r:?}");
}

#[test]
fn a_bad_config_is_a_usage_error_naming_the_file() {
    let env = Env::new();
    env.file(
        "bad.toml",
        "[[hooks.pre_tool_use]]\nmatcher = \"[oops\"\ncommand = \"x\"\n",
    );
    let r = ran(env.lrg().args([
        "run",
        "--config",
        "bad.toml",
        "--model",
        "script:s.json",
        "hi",
    ]));
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr.contains("bad.toml") || r.stderr.contains("[oops"),
        "{r:?}"
    );
    assert!(r.stderr.contains("glob"), "{r:?}");
}

/// `lrg serve` with the same hook: a served chat's delete is refused too.
#[tokio::test]
async fn a_config_hook_denies_delete_in_serve() {
    use std::io::{BufRead as _, BufReader};
    let env = guarded_env("mine.toml");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_lrg"))
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("OLLAMA_HOST", "http://127.0.0.1:9")
        .env("LRG_AGENT_TOKEN", "agent-secret-for-the-hook-tests-0123")
        .current_dir(env.dir.path())
        .args(["serve", "--port", "0", "--model", "script:s.json"])
        .args(["--mode", "auto_all", "--mcp", DEMO, "--config", "mine.toml"])
        .args(["--store", "store"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        let _ = tx.send(line);
    });
    let url = rx
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("lrg serve printed no URL");
    let (page, fragment) = url.trim().split_once('#').unwrap();
    let params: std::collections::HashMap<_, _> = fragment
        .split('&')
        .filter_map(|p| p.split_once('='))
        .collect();
    let origin = page.trim_end_matches("/v1/ui/chat");
    let chat = format!("{origin}/v1/chat/sessions/{}", params["session"]);
    lrg_providers::transport::ensure_tls_provider();
    let client = reqwest::Client::new();
    let r = client
        .post(format!("{chat}/messages"))
        .bearer_auth(params["token"])
        .header("origin", origin)
        .json(&serde_json::json!({"text": "delete note 1"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 202);
    let mut rows = serde_json::Value::Null;
    for _ in 0..100 {
        let t: serde_json::Value = client
            .get(format!("{chat}/transcript"))
            .bearer_auth(params["token"])
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let done = t["rows"]
            .as_array()
            .is_some_and(|r| r.iter().any(|row| row["text"] == "I could not delete it."));
        if done {
            rows = t["rows"].clone();
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let _ = child.kill();
    let _ = child.wait();
    let call = rows
        .as_array()
        .unwrap()
        .iter()
        .find(|row| row["type"] == "tool_call")
        .unwrap();
    assert_eq!(call["tool"], "delete_notes", "{rows}");
    assert_eq!(call["outcome"], "denied", "{rows}");
    assert!(
        call["output"]
            .as_str()
            .unwrap()
            .contains("deleting needs a ticket"),
        "{rows}"
    );
}
