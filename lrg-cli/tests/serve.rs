//! `lrg serve` as a process: it prints the page URL with a chat token, the
//! page and the API answer on it, Ctrl-C (SIGINT) stops it cleanly, and it
//! refuses to listen beyond loopback unless told to.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::{BufRead as _, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::Env;
use serde_json::{Value, json};

const SCRIPT: &str = r#"[{"text": "Hello from the script."}]"#;

fn serve(env: &Env, extra: &[&str], vars: &[(&str, &str)]) -> Child {
    serve_on(env, "script:turns.json", extra, vars)
}

fn serve_on(env: &Env, model: &str, extra: &[&str], vars: &[(&str, &str)]) -> Child {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_lrg"));
    cmd.env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("OLLAMA_HOST", "http://127.0.0.1:9")
        .current_dir(env.dir.path())
        .args(["serve", "--port", "0", "--model", model])
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in vars {
        cmd.env(k, v);
    }
    cmd.spawn().unwrap()
}

/// The first stdout line (the page URL), read on a thread with a deadline.
fn first_line(child: &mut Child) -> String {
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        let _ = tx.send(line);
    });
    rx.recv_timeout(Duration::from_secs(60))
        .expect("lrg serve printed no URL")
        .trim()
        .to_string()
}

fn interrupt_and_wait(child: &mut Child) -> i32 {
    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    for _ in 0..300 {
        if let Some(s) = child.try_wait().unwrap() {
            return s.code().unwrap_or(-1);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    child.kill().unwrap();
    panic!("lrg serve did not stop within 30 s of Ctrl-C");
}

async fn transcript(client: &reqwest::Client, chat: &str, token: &str) -> Value {
    let r = client
        .get(format!("{chat}/transcript"))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    r.json().await.unwrap()
}

/// Send "hi" to the chat at `chat` (its URL) and wait for the scripted
/// answer; returns the transcript then.
async fn say_hi(client: &reqwest::Client, chat: &str, token: &str, origin: &str) -> Value {
    let r = client
        .post(format!("{chat}/messages"))
        .bearer_auth(token)
        .header("origin", origin)
        .json(&json!({"text": "hi"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 202);
    for _ in 0..100 {
        let t = transcript(client, chat, token).await;
        if t["rows"].as_array().unwrap().len() == 2 {
            return t;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the scripted model did not answer");
}

#[tokio::test]
async fn serve_prints_the_page_url_and_answers_on_it() {
    let env = Env::new();
    env.file("turns.json", SCRIPT);
    let mut child = serve(
        &env,
        &[],
        &[("LRG_AGENT_TOKEN", "agent-secret-for-the-serve-tests-0123")],
    );
    let url = first_line(&mut child);
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");
    let (page, fragment) = url.split_once('#').unwrap();
    assert!(page.ends_with("/v1/ui/chat"), "{url}");
    let params: std::collections::HashMap<_, _> = fragment
        .split('&')
        .filter_map(|p| p.split_once('='))
        .collect();
    let (session, token) = (params["session"], params["token"]);
    let origin = page.trim_end_matches("/v1/ui/chat");
    lrg_providers::transport::ensure_tls_provider();
    let client = reqwest::Client::new();

    let r = client.get(page).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert!(r.headers().contains_key("content-security-policy"));
    let chat = format!("{origin}/v1/chat/sessions/{session}");
    let t = say_hi(&client, &chat, token, origin).await;
    assert_eq!(t["rows"][1]["text"], "Hello from the script.");
    // The agent token opens more chats; a page of another site may not.
    let open = |origin: &str| {
        client
            .post(format!(
                "{}/v1/chat/sessions",
                page.trim_end_matches("/v1/ui/chat")
            ))
            .bearer_auth("agent-secret-for-the-serve-tests-0123")
            .header("origin", origin)
            .json(&json!({}))
            .send()
    };
    assert_eq!(open(origin).await.unwrap().status(), 201);
    assert_eq!(open("http://evil.example").await.unwrap().status(), 403);

    assert_eq!(interrupt_and_wait(&mut child), 0);
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(stderr.contains("stopping every chat"), "{stderr}");
    assert!(!stderr.contains("agent-secret-for-the-serve-tests-0123"));
}

#[test]
fn without_lrg_agent_token_a_fresh_one_is_written_to_a_private_file() {
    let env = Env::new();
    env.file("turns.json", SCRIPT);
    let runtime = env.path("run");
    std::fs::create_dir(&runtime).unwrap();
    let mut child = serve(&env, &[], &[("XDG_RUNTIME_DIR", runtime.to_str().unwrap())]);
    let _url = first_line(&mut child);
    let dir = std::fs::read_dir(&runtime)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let file = dir.join("agent-token");
    let token = std::fs::read_to_string(&file).unwrap();
    assert!(token.len() >= 43, "{token}");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        assert_eq!(
            std::fs::metadata(&file).unwrap().permissions().mode() & 0o777,
            0o600
        );
    }
    assert_eq!(interrupt_and_wait(&mut child), 0);
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(
        stderr.contains(file.to_str().unwrap()),
        "the path is printed: {stderr}"
    );
    assert!(!stderr.contains(&token), "the token itself is not");
    assert!(!file.exists(), "the token file goes when the server stops");
}

#[test]
fn listening_beyond_loopback_needs_a_flag() {
    let env = Env::new();
    env.file("turns.json", SCRIPT);
    let out = serve(&env, &["--bind", "0.0.0.0"], &[("LRG_AGENT_TOKEN", "x")])
        .wait_with_output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--allow-remote"));
}

#[tokio::test]
async fn keyed_chats_are_resumed_by_the_next_server() {
    let env = Env::new();
    env.file("turns.json", SCRIPT);
    let store = env.path("chats");
    let agent = "agent-secret-for-the-serve-tests-0123";
    lrg_providers::transport::ensure_tls_provider();
    let client = reqwest::Client::new();
    let mut seen = Vec::new();
    for expected in ["created", "resumed"] {
        let mut child = serve(
            &env,
            &["--store", store.to_str().unwrap()],
            &[("LRG_AGENT_TOKEN", agent)],
        );
        let url = first_line(&mut child);
        let origin = url.split("/v1/ui/chat").next().unwrap().to_string();
        let r = client
            .post(format!("{origin}/v1/chat/sessions"))
            .bearer_auth(agent)
            .json(&json!({"client_key": "me", "context_key": "doc:1"}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 201);
        let v: Value = r.json().await.unwrap();
        assert_eq!(v["opened"], expected, "{v}");
        let chat = format!(
            "{origin}/v1/chat/sessions/{}",
            v["session"].as_str().unwrap()
        );
        let token = v["chat_token"].as_str().unwrap();
        if expected == "created" {
            say_hi(&client, &chat, token, &origin).await;
        }
        seen.push((
            v["session"].clone(),
            transcript(&client, &chat, token).await,
        ));
        assert_eq!(interrupt_and_wait(&mut child), 0);
    }
    assert_eq!(seen[0], seen[1], "the same chat, the same transcript");
    assert_eq!(seen[1].1["rows"][1]["text"], "Hello from the script.");
}

/// An external ACP agent as the model of a served chat (`lrg acp` on a
/// script): its tool calls reach the page's event stream as lrg's own do.
#[tokio::test]
async fn a_served_chat_on_an_acp_agent_streams_its_tool_calls() {
    use futures::StreamExt as _;
    let env = Env::new();
    env.file(
        "agent.json",
        r#"[{"calls": [{"name": "list_notes"}]}, {"text": "Three notes."}]"#,
    );
    let agent = "acp:lrg acp --model script:agent.json --mcp 'lrg demo-server'";
    let mut child = serve_on(
        &env,
        agent,
        &[],
        &[("LRG_AGENT_TOKEN", "agent-secret-for-the-serve-tests-0123")],
    );
    let url = first_line(&mut child);
    let (page, fragment) = url.split_once('#').unwrap();
    let params: std::collections::HashMap<_, _> = fragment
        .split('&')
        .filter_map(|p| p.split_once('='))
        .collect();
    let (session, token) = (params["session"], params["token"]);
    let origin = page.trim_end_matches("/v1/ui/chat");
    lrg_providers::transport::ensure_tls_provider();
    let client = reqwest::Client::new();
    let chat = format!("{origin}/v1/chat/sessions/{session}");
    let r = client
        .post(format!("{chat}/messages"))
        .bearer_auth(token)
        .header("origin", origin)
        .json(&json!({"text": "what notes?"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 202);
    let events = client
        .get(format!("{chat}/events?after=0"))
        .bearer_auth(token)
        .header("origin", origin)
        .send()
        .await
        .unwrap();
    let mut stream = events.bytes_stream();
    let mut seen = String::new();
    let read = async {
        while let Some(chunk) = stream.next().await {
            seen.push_str(&String::from_utf8_lossy(&chunk.unwrap()));
            if seen.contains(r#""type":"assistant_turn""#) {
                break;
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(60), read)
        .await
        .expect("the agent's turn did not finish");
    for part in [
        r#""type":"tool_call","call_id":"call_1_1","tool":"list_notes","class":"read""#,
        r#""type":"tool_done","call_id":"call_1_1","ok":true"#,
        r#""text":"Three notes.""#,
    ] {
        assert!(seen.contains(part), "no {part} in:\n{seen}");
    }
    assert_eq!(interrupt_and_wait(&mut child), 0);
}
