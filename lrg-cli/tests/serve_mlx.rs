//! `lrg serve --model mlx:DIR` with five open chats runs one MLX sidecar:
//! every chat connects through the engine pool, so the model is loaded once
//! and each chat is a prompt cache of its own in that sidecar. Needs
//! `LRG_MLX_PYTHON` (or `python3`) with mlx-lm and llguidance; skips loudly
//! without, fails under `CI`.
#![cfg(feature = "mlx")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::io::{BufRead as _, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::Env;
use serde_json::{Value, json};

const AGENT: &str = "agent-secret-for-the-serve-mlx-test-01";

/// The processes whose parent is `parent` and whose command line names the
/// sidecar module.
fn sidecars_of(parent: u32) -> usize {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0;
    };
    entries
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().parse::<u32>().is_ok())
        .filter(|e| {
            let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
            // `pid (comm) state ppid ...`: the comm may hold spaces.
            let ppid = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().nth(1))
                .and_then(|p| p.parse::<u32>().ok());
            let cmdline = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
            ppid == Some(parent) && String::from_utf8_lossy(&cmdline).contains("lrg_mlx_sidecar")
        })
        .count()
}

#[tokio::test]
async fn five_served_chats_on_an_mlx_model_share_one_sidecar() {
    if !cfg!(target_os = "linux") {
        eprintln!("SKIPPED: counting sidecars reads /proc (Linux only)");
        return;
    }
    let python = match lrg_mlx::testing::python_with_mlx() {
        Ok(p) => p,
        Err(why) if std::env::var_os("CI").is_some() => {
            panic!("the MLX serve test needs Python with mlx under CI: {why}")
        }
        Err(why) => {
            eprintln!("SKIPPED: lrg serve --model mlx: test: {why}");
            return;
        }
    };
    let env = Env::new();
    lrg_mlx::testing::write_tiny_model(&python, &env.path("tiny"), None).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_lrg"))
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("OLLAMA_HOST", "http://127.0.0.1:9")
        .env("LRG_AGENT_TOKEN", AGENT)
        .env("LRG_MLX_PYTHON", &python)
        .current_dir(env.dir.path())
        .args([
            "serve",
            "--port",
            "0",
            "--model",
            "mlx:tiny",
            "--parallel",
            "2",
        ])
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
        .recv_timeout(Duration::from_secs(120))
        .expect("lrg serve printed no URL");
    let origin = url.trim().split("/v1/ui/chat").next().unwrap().to_string();
    lrg_providers::transport::ensure_tls_provider();
    let client = reqwest::Client::new();

    let mut chats = Vec::new();
    for _ in 0..5 {
        let r = client
            .post(format!("{origin}/v1/chat/sessions"))
            .bearer_auth(AGENT)
            .header("origin", &origin)
            .json(&json!({}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 201);
        let v: Value = r.json().await.unwrap();
        let chat = format!(
            "{origin}/v1/chat/sessions/{}",
            v["session"].as_str().unwrap()
        );
        chats.push((chat, v["chat_token"].as_str().unwrap().to_string()));
    }
    // A message in each at once: their turns queue on the one sidecar.
    for (chat, token) in &chats {
        let r = client
            .post(format!("{chat}/messages"))
            .bearer_auth(token)
            .header("origin", &origin)
            .json(&json!({"text": "hi"}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 202);
    }
    for (chat, token) in &chats {
        let mut answered = false;
        for _ in 0..600 {
            let t: Value = client
                .get(format!("{chat}/transcript"))
                .bearer_auth(token)
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            if t["rows"].as_array().is_some_and(|rows| rows.len() >= 2) {
                answered = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(answered, "{chat} got no answer");
    }
    let sidecars = sidecars_of(child.id());
    let _ = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status();
    for _ in 0..300 {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = child.kill();
    assert_eq!(sidecars, 1, "one sidecar for five chats");
}
