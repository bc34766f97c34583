//! `lrg serve` as a process: it prints the page URL with a chat token, the
//! page and the API answer on it, Ctrl-C (SIGINT) stops it cleanly, and it
//! refuses to listen beyond loopback unless told to.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

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

/// The fragment of a printed page URL, as name → value.
fn fragment(url: &str) -> std::collections::HashMap<String, String> {
    let (_, fragment) = url.split_once('#').unwrap();
    fragment
        .split('&')
        .filter_map(|p| p.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

async fn owner_chats(client: &reqwest::Client, origin: &str, token: &str) -> Vec<Value> {
    let r = client
        .get(format!("{origin}/v1/owners/default/chats"))
        .bearer_auth(token)
        .header("origin", origin)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let v: Value = r.json().await.unwrap();
    v["chats"].as_array().unwrap().clone()
}

/// Issue 28 §2 and §6: the printed URL carries the default owner and its
/// token, which lists the page's chat; that chat (unkeyed) is kept in the
/// data directory's store and listed by the next server; and "always" on
/// the page is saved to the permissions file `lrg chat` uses.
#[tokio::test]
async fn the_page_url_carries_an_owner_token_and_every_chat_outlives_the_server() {
    let env = Env::new();
    env.file("turns.json", SCRIPT);
    let data = env.path("data");
    let config = env.path("config");
    let vars = [
        ("LRG_AGENT_TOKEN", "agent-secret-for-the-serve-tests-0123"),
        ("XDG_DATA_HOME", data.to_str().unwrap()),
        ("XDG_CONFIG_HOME", config.to_str().unwrap()),
    ];
    lrg_providers::transport::ensure_tls_provider();
    let client = reqwest::Client::new();

    let mut child = serve(&env, &[], &vars);
    let url = first_line(&mut child);
    let params = fragment(&url);
    assert_eq!(params["owner"], "default", "{url}");
    let owner_token = &params["owner_token"];
    assert_eq!(owner_token.len(), 43, "{url}");
    let origin = url.split("/v1/ui/chat").next().unwrap().to_string();
    let session = &params["session"];
    let chat = format!("{origin}/v1/chat/sessions/{session}");
    say_hi(&client, &chat, &params["token"], &origin).await;
    let chats = owner_chats(&client, &origin, owner_token).await;
    assert_eq!(chats.len(), 1, "{chats:?}");
    assert_eq!(
        (&chats[0]["session"], &chats[0]["title"], &chats[0]["live"]),
        (&json!(session), &json!("hi"), &json!(true))
    );
    // The owner token works the chat's routes too.
    let t = transcript(&client, &chat, owner_token).await;
    assert_eq!(t["rows"].as_array().unwrap().len(), 2, "{t}");

    // "Always allow" writes the rule to the settings file, as `lrg chat` does.
    let r = client
        .put(format!("{chat}/permissions"))
        .bearer_auth(&params["token"])
        .header("origin", &origin)
        .json(&json!({"rules": {"echo": "allow"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["saved"], true, "{v}");
    let saved = std::fs::read_to_string(config.join("lrg").join("permissions.json")).unwrap();
    assert!(saved.contains("\"echo\""), "{saved}");
    assert_eq!(interrupt_and_wait(&mut child), 0);
    assert!(
        data.join("lrg")
            .join("sessions")
            .join(format!("{session}.jsonl"))
            .exists(),
        "the unkeyed chat was kept in the data directory"
    );

    // The next server lists it under the default owner, with its title.
    let mut child = serve(&env, &[], &vars);
    let url = first_line(&mut child);
    let params = fragment(&url);
    let origin = url.split("/v1/ui/chat").next().unwrap().to_string();
    let chats = owner_chats(&client, &origin, &params["owner_token"]).await;
    let old = chats
        .iter()
        .find(|c| c["session"] == json!(session))
        .unwrap_or_else(|| panic!("the old chat is listed: {chats:?}"));
    assert_eq!((&old["title"], &old["live"]), (&json!("hi"), &json!(false)));
    let r = client
        .get(format!(
            "{origin}/v1/chat/sessions/{}/permissions",
            params["session"]
        ))
        .bearer_auth(&params["token"])
        .send()
        .await
        .unwrap();
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["rules"]["echo"], "allow", "the rule holds: {v}");
    assert_eq!(interrupt_and_wait(&mut child), 0);
}

/// Issue 28 §6: `--base-url` is the served `server:` model's address only:
/// LM Studio and Ollama are not probed there (no model listed twice, no
/// "HTTP 404" entry), the menu lists what is available first, and the
/// meter's window (the `usage` event's) is the one the menu and `lrg
/// models` show for a server that reports none.
#[tokio::test(flavor = "multi_thread")]
async fn base_url_is_the_served_servers_alone_and_available_models_come_first() {
    use wiremock::matchers::{method, path};
    use wiremock::{Mock, MockServer, ResponseTemplate};
    let fake = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/v1/models"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(json!({"data": [{"id": "m", "object": "model"}]})),
        )
        .mount(&fake)
        .await;
    let chunk = json!({"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m",
        "choices": [{"index": 0, "delta": {"role": "assistant", "content": "Hi."},
                     "finish_reason": "stop"}]});
    let usage = json!({"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m",
        "choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12}});
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(ResponseTemplate::new(200).set_body_raw(
            format!("data: {chunk}\n\ndata: {usage}\n\ndata: [DONE]\n\n"),
            "text/event-stream",
        ))
        .mount(&fake)
        .await;
    let env = Env::new();
    let base = format!("{}/v1", fake.uri());
    let mut child = serve_on(
        &env,
        "server:m",
        &["--base-url", &base],
        &[("LRG_AGENT_TOKEN", "agent-secret-for-the-serve-tests-0123")],
    );
    let url = first_line(&mut child);
    let params = fragment(&url);
    let origin = url.split("/v1/ui/chat").next().unwrap().to_string();
    lrg_providers::transport::ensure_tls_provider();
    let r = reqwest::Client::new()
        .get(format!(
            "{origin}/v1/chat/sessions/{}/models",
            params["session"]
        ))
        .bearer_auth(&params["token"])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let v: Value = r.json().await.unwrap();
    let groups = v["groups"].as_array().unwrap();
    let entries: Vec<&Value> = groups
        .iter()
        .flat_map(|g| g["models"].as_array().unwrap())
        .collect();
    let listing_m: Vec<&Value> = entries
        .iter()
        .filter(|e| e["model"] == "m")
        .map(|e| &e["provider"])
        .collect();
    assert_eq!(listing_m, [&json!("server")], "{v:#}");
    assert!(
        !entries
            .iter()
            .any(|e| e["reason"].as_str().is_some_and(|r| r.contains("404"))),
        "{v:#}"
    );
    let available: Vec<bool> = groups
        .iter()
        .map(|g| {
            g["models"]
                .as_array()
                .unwrap()
                .iter()
                .any(|e| e["available"] == true)
        })
        .collect();
    let first_unavailable = available.iter().position(|a| !a).unwrap_or(available.len());
    assert!(
        available[first_unavailable..].iter().all(|a| !a),
        "available groups first: {v:#}"
    );

    // One window: the usage event's is the menu's (the catalog's).
    let window = entries
        .iter()
        .find(|e| e["id"] == "server:m")
        .map(|e| e["context_window"].clone())
        .unwrap();
    assert_eq!(window, 32_768, "{v:#}");
    let client = reqwest::Client::new();
    let chat = format!("{origin}/v1/chat/sessions/{}", params["session"]);
    let mut stream = client
        .get(format!("{chat}/events?after=0"))
        .bearer_auth(&params["token"])
        .send()
        .await
        .unwrap()
        .bytes_stream();
    let r = client
        .post(format!("{chat}/messages"))
        .bearer_auth(&params["token"])
        .json(&json!({"text": "hi"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 202);
    let mut seen = String::new();
    let event = tokio::time::timeout(Duration::from_secs(30), async {
        use futures::StreamExt as _;
        loop {
            let chunk = stream.next().await.expect("the stream ended").unwrap();
            seen.push_str(&String::from_utf8_lossy(&chunk));
            if let Some(line) = seen
                .lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .find(|l| l.contains("\"type\":\"usage\""))
            {
                return serde_json::from_str::<Value>(line.trim()).unwrap();
            }
        }
    })
    .await
    .expect("no usage event");
    assert_eq!(event["context_window"], window, "{event}");
    assert_eq!(interrupt_and_wait(&mut child), 0);
}

/// The parent spawns one sub-agent; its turn and the sub-agent's first race
/// for the next two script turns (the same reply); the last is the
/// parent's reaction to the sub-agent's answer.
const SUB_AGENT_SCRIPT: &str = r#"[
  {"calls": [{"name": "spawn_sub_agent", "arguments": {"tasks": [{"description": "count the notes", "prompt": "How many notes are there?"}]}}]},
  {"text": "Working on it."},
  {"text": "Working on it."},
  {"text": "The helper is done."}
]"#;

#[tokio::test]
async fn with_sub_agents_the_served_chats_delegate_and_list_their_sub_agents() {
    let env = Env::new();
    env.file("turns.json", SUB_AGENT_SCRIPT);
    let mut child = serve(
        &env,
        &["--sub-agents"],
        &[("LRG_AGENT_TOKEN", "agent-secret-for-the-serve-tests-0123")],
    );
    let url = first_line(&mut child);
    let params = fragment(&url);
    let (session, token) = (&params["session"], &params["token"]);
    let origin = url.split_once("/v1/ui/chat").unwrap().0;
    lrg_providers::transport::ensure_tls_provider();
    let client = reqwest::Client::new();
    let chat = format!("{origin}/v1/chat/sessions/{session}");
    let r = client
        .post(format!("{chat}/messages"))
        .bearer_auth(token)
        .json(&json!({"text": "count my notes in the background"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 202);

    let mut listed = Value::Null;
    for _ in 0..100 {
        listed = client
            .get(format!("{chat}/sub_agents"))
            .bearer_auth(token)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if listed["sub_agents"][0]["status"] == "done" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let agent = &listed["sub_agents"][0];
    assert_eq!(agent["status"], "done", "{listed}");
    assert_eq!(agent["n"], 1);
    assert_eq!(agent["description"], "count the notes");
    assert!(agent["ended_at"].is_string(), "{listed}");

    // Its own stream: its prompt and its answer, then its end.
    let stream = client
        .get(format!("{chat}/sub_agents/1/events"))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), 200);
    let text = tokio::time::timeout(Duration::from_secs(20), stream.text())
        .await
        .expect("the sub-agent's stream did not end")
        .unwrap();
    assert!(
        text.contains(r#""type":"user_message","text":"How many notes are there?""#),
        "{text}"
    );
    assert!(text.contains(r#""text":"Working on it.""#), "{text}");
    assert_eq!(interrupt_and_wait(&mut child), 0);
}
