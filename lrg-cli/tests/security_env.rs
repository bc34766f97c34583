//! Issue 24 §3, as an attacker would look for it: the keys in lrg's
//! environment must not reach an MCP tool server, under `lrg run` nor under
//! `lrg serve`. The tool server here is `sh`, which writes the environment
//! it got to a file and then runs lrg's demo server.
//!
//! Also §7's flags, driven the same way: `--max-tool-result` and
//! `--model-timeout`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::collections::BTreeMap;
use std::io::{BufRead as _, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{Env, ran};
use serde_json::{Value, json};

/// Secrets an attacker would hope to find in a tool server's environment.
const SECRETS: &[(&str, &str)] = &[
    ("OPENAI_API_KEY", "sk-openai-secret-value"),
    ("AWS_SECRET_ACCESS_KEY", "aws-secret-value"),
    ("GITHUB_TOKEN", "ghp-secret-value"),
    (
        "LRG_AGENT_TOKEN",
        "agent-secret-for-the-env-tests-0123456789",
    ),
    (
        "LRG_NODE_SECRET",
        "node-secret-for-the-env-tests-0123456789",
    ),
];

const SCRIPT: &str = r#"[{"text": "Done."}]"#;

/// A config whose one server records its environment in `env.txt` (in the
/// scratch directory), with `extra` merged into its entry.
fn config(env: &Env, extra: Value) -> String {
    let record = env.path("env.txt");
    let mut entry = json!({
        "command": "sh",
        "args": [
            "-c",
            "env > \"$0\"; exec \"$1\" demo-server",
            record.to_str().unwrap(),
            env!("CARGO_BIN_EXE_lrg"),
        ],
        "env": {"OWN_SETTING": "from-the-config"},
    });
    if let (Value::Object(entry), Value::Object(extra)) = (&mut entry, extra) {
        entry.extend(extra);
    }
    json!({"mcpServers": {"spy": entry}}).to_string()
}

/// The environment the server recorded, waiting for it (bounded).
fn recorded(path: &Path) -> BTreeMap<String, String> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(text) = std::fs::read_to_string(path)
            && !text.is_empty()
        {
            return text
                .lines()
                .filter_map(|l| l.split_once('='))
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect();
        }
        assert!(
            Instant::now() < deadline,
            "the tool server never started (no {})",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn run_with(env: &Env, cfg: &str) -> common::Ran {
    env.file("cfg.json", cfg);
    env.file("s.json", SCRIPT);
    let mut cmd = env.lrg();
    cmd.env("HOME", env.dir.path());
    for (k, v) in SECRETS {
        cmd.env(k, v);
    }
    ran(cmd.args([
        "run",
        "--model",
        "script:s.json",
        "--mcp-config",
        "cfg.json",
        "hi",
    ]))
}

fn assert_no_secrets(got: &BTreeMap<String, String>, except: &[&str]) {
    for (name, value) in SECRETS {
        if except.contains(name) {
            continue;
        }
        assert!(!got.contains_key(*name), "{name} reached the tool server");
        assert!(
            !got.values().any(|v| v.contains(value)),
            "the value of {name} reached the tool server"
        );
    }
}

#[test]
fn a_tool_server_under_run_gets_the_base_set_and_its_own_env_only() {
    let env = Env::new();
    let r = run_with(&env, &config(&env, json!({})));
    assert_eq!(r.code, 0, "{r:?}");
    let got = recorded(&env.path("env.txt"));
    assert_no_secrets(&got, &[]);
    assert!(got.contains_key("PATH"), "{got:?}");
    assert_eq!(
        got.get("HOME").map(String::as_str),
        env.dir.path().to_str(),
        "{got:?}"
    );
    assert_eq!(got["OWN_SETTING"], "from-the-config");
    // Nothing else of lrg's environment (the test harness set these).
    assert!(!got.contains_key("OLLAMA_HOST"), "{got:?}");
    assert!(!got.contains_key("XDG_CONFIG_HOME"), "{got:?}");
}

#[test]
fn inherit_env_passes_exactly_the_names_listed() {
    let env = Env::new();
    let cfg = config(
        &env,
        json!({"inherit_env": ["GITHUB_TOKEN", "OLLAMA_HOST"]}),
    );
    let r = run_with(&env, &cfg);
    assert_eq!(r.code, 0, "{r:?}");
    let got = recorded(&env.path("env.txt"));
    assert_eq!(got["GITHUB_TOKEN"], "ghp-secret-value");
    assert_eq!(got["OLLAMA_HOST"], "http://127.0.0.1:9");
    assert_no_secrets(&got, &["GITHUB_TOKEN"]);
    assert!(!got.contains_key("XDG_CONFIG_HOME"), "{got:?}");
}

#[test]
fn inherit_env_true_passes_everything_but_lrgs_own_secrets() {
    let env = Env::new();
    let r = run_with(&env, &config(&env, json!({"inherit_env": true})));
    assert_eq!(r.code, 0, "{r:?}");
    let got = recorded(&env.path("env.txt"));
    assert_eq!(got["OPENAI_API_KEY"], "sk-openai-secret-value");
    assert!(got.contains_key("XDG_CONFIG_HOME"), "{got:?}");
    assert!(!got.contains_key("LRG_AGENT_TOKEN"), "{got:?}");
    assert!(!got.contains_key("LRG_NODE_SECRET"), "{got:?}");
}

#[test]
fn inherit_env_must_be_true_false_or_names_and_never_an_lrg_secret() {
    for (value, says) in [
        (json!(["LRG_AGENT_TOKEN"]), "LRG_AGENT_TOKEN"),
        (json!(3), "\"inherit_env\" must be true, false or an array"),
        (json!(["A=B"]), "not a valid environment variable name"),
        (json!([1]), "\"inherit_env\"[0] must be a variable name"),
    ] {
        let env = Env::new();
        let r = run_with(&env, &config(&env, json!({ "inherit_env": value })));
        assert_eq!(r.code, 2, "{value}: {r:?}");
        assert!(r.stderr.contains("spy"), "{value}: {r:?}");
        assert!(r.stderr.contains(says), "{value}: {r:?}");
        assert!(!env.path("env.txt").exists(), "{value}: the server ran");
        // A secret's value is never quoted.
        assert!(!r.stderr.contains("agent-secret"), "{r:?}");
    }
}

/// A child process killed when the test ends, passed or not.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `lrg serve` with the secrets in its environment; its page URL.
fn serve(env: &Env) -> (Killed, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_lrg"));
    cmd.env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", env.dir.path())
        .env("OLLAMA_HOST", "http://127.0.0.1:9")
        .env("XDG_CONFIG_HOME", env.path("config"))
        .current_dir(env.dir.path())
        .args(["serve", "--port", "0", "--model", "script:s.json"])
        .args(["--mcp-config", "cfg.json"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    for (k, v) in SECRETS {
        cmd.env(k, v);
    }
    let mut child = Killed(cmd.spawn().unwrap());
    let stdout = child.0.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        let _ = tx.send(line);
    });
    let line = rx.recv_timeout(Duration::from_secs(60));
    let Ok(line) = line else {
        panic!("lrg serve printed no URL");
    };
    (child, line.trim().to_owned())
}

#[tokio::test]
async fn a_tool_server_under_serve_never_sees_the_agent_token_or_any_key() {
    let env = Env::new();
    env.file("cfg.json", &config(&env, json!({})));
    env.file("s.json", SCRIPT);
    let (child, url) = serve(&env);
    let result = async {
        let (page, fragment) = url.split_once('#').unwrap();
        let origin = page.trim_end_matches("/v1/ui/chat");
        let params: BTreeMap<_, _> = fragment
            .split('&')
            .filter_map(|p| p.split_once('='))
            .collect();
        lrg_providers::transport::ensure_tls_provider();
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .build()
            .unwrap();
        let r = client
            .post(format!(
                "{origin}/v1/chat/sessions/{}/messages",
                params["session"]
            ))
            .bearer_auth(params["token"])
            .header("origin", origin)
            .json(&json!({"text": "hi"}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 202);
        let path = env.path("env.txt");
        tokio::task::spawn_blocking(move || recorded(&path))
            .await
            .unwrap()
    }
    .await;
    drop(child);
    assert_no_secrets(&result, &[]);
    assert!(result.contains_key("PATH"), "{result:?}");
    assert_eq!(result["OWN_SETTING"], "from-the-config");
}

// ------------------------------------------------ §7: the tool result cap flag

#[test]
fn max_tool_result_makes_a_larger_result_an_error_naming_its_size() {
    let env = Env::new();
    env.file(
        "s.json",
        &common::call_then_reply("list_notes", "{}", "Done."),
    );
    let demo = format!("{} demo-server", env!("CARGO_BIN_EXE_lrg"));
    let r = ran(env.lrg().args([
        "run",
        "--json",
        "--model",
        "script:s.json",
        "--mcp",
        &demo,
        "--max-tool-result",
        "10",
        "notes?",
    ]));
    assert_eq!(r.code, 0, "{r:?}");
    let done = r
        .stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|e| e["type"] == "tool_done")
        .unwrap_or_else(|| panic!("no tool_done: {r:?}"));
    let text = done.to_string();
    assert!(text.contains("over the 10 bytes cap"), "{text}");
    assert_eq!(done["ok"], false, "{done}");

    let r = ran(env.lrg().args([
        "run",
        "--model",
        "script:s.json",
        "--max-tool-result",
        "lots",
        "hi",
    ]));
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("is not a size"), "{r:?}");
}

#[test]
fn model_timeout_ends_a_hanging_model_with_the_limit_it_hit() {
    // A "server" that takes connections and never answers.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for conn in listener.incoming().flatten() {
            held.push(conn);
        }
    });
    let env = Env::new();
    let started = Instant::now();
    let r = ran(env.lrg().args([
        "run",
        "--model",
        "server:m",
        "--base-url",
        &url,
        "--model-timeout",
        "0.3",
        "hi",
    ]));
    let took = started.elapsed();
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stderr.contains("first-byte timeout"), "{r:?}");
    assert!(r.stderr.contains("0.3 s"), "{r:?}");
    // Five tries of 0.3 s and their backoff, not five of 60 s.
    assert!(took < Duration::from_secs(30), "took {took:?}");
}
