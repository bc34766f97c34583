//! `kill -9` at every acknowledgement point, as a crash would: what `lrg run
//! --json` printed (a `user_message`, a `tool_done` with `ok: true`, an
//! `assistant_turn`) and what `lrg serve` answered `202` for is there after
//! a resume, every time; and at random moments the kept chat always loads.
//!
//! A `cleared` or `compacted` a page was shown is what a restarted server
//! has too: the history it replaced never comes back.
//!
//! The loop counts come from `LRG_KILLS_USER`, `LRG_KILLS_TOOL`,
//! `LRG_KILLS_SERVE`, `LRG_KILLS_RANDOM`, `LRG_KILLS_CLEAR` and
//! `LRG_KILLS_COMPACT` (defaults 30, 30, 30, 50, 5 and 5).
#![cfg(unix)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::io::{BufRead as _, BufReader};
use std::process::{Child, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use common::{Env, TIMEOUT, ran};
use serde_json::{Value, json};

const DEMO: &str = "lrg demo-server";
const AGENT_TOKEN: &str = "agent-secret-for-the-kill-tests-0123456789";

fn kills(var: &str, default: usize) -> usize {
    std::env::var(var)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// `lrg` with the test's own data directory and OS user.
fn kept(env: &Env) -> assert_cmd::Command {
    let mut cmd = env.lrg();
    cmd.env("XDG_DATA_HOME", env.path("data"))
        .env("USER", "tester");
    cmd
}

/// A running `lrg` whose stdout lines come through a channel.
struct Running {
    child: Child,
    lines: Receiver<String>,
    /// Every line read so far: all of it was shown before the kill.
    seen: Vec<String>,
}

impl Running {
    fn start(mut cmd: std::process::Command) -> Self {
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        Self {
            child,
            lines,
            seen: Vec::new(),
        }
    }

    /// Read lines until one passes `done` (`true`), or the process ends
    /// (`false`); bounded by [`TIMEOUT`].
    fn until(&mut self, done: impl Fn(&Value) -> bool) -> bool {
        let deadline = Instant::now() + TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    let event: Value = serde_json::from_str(&line).unwrap_or(Value::Null);
                    self.seen.push(line);
                    if done(&event) {
                        return true;
                    }
                }
                Err(RecvTimeoutError::Disconnected) => return false,
                Err(RecvTimeoutError::Timeout) => panic!("no such line within {TIMEOUT:?}"),
            }
        }
    }

    /// SIGKILL, then everything it had printed.
    fn kill(mut self) -> Vec<Value> {
        let _ = self.child.kill();
        self.child.wait().unwrap();
        let deadline = Instant::now() + TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => self.seen.push(line),
                Err(RecvTimeoutError::Disconnected) => break,
                // A tool server it started may hold the pipe a moment longer.
                Err(RecvTimeoutError::Timeout) => panic!("stdout stayed open after the kill"),
            }
        }
        self.seen
            .iter()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }
}

fn run_json(env: &Env, key: &str, prompt: &str, mcp: bool) -> std::process::Command {
    let mut cmd = env.lrg_std();
    cmd.env("XDG_DATA_HOME", env.path("data"))
        .env("USER", "tester")
        .args([
            "run",
            "--json",
            "--model",
            "script:s.json",
            "--session",
            key,
        ]);
    if mcp {
        cmd.args(["--mcp", DEMO]);
    }
    cmd.arg(prompt);
    cmd
}

/// The kept chat `key` as its transcript rows (it must load).
fn transcript(env: &Env, key: &str) -> Vec<Value> {
    let show = ran(kept(env).args(["sessions", "show", key, "--json"]));
    assert_eq!(show.code, 0, "the kept chat does not load: {show:?}");
    let t: Value = serde_json::from_str(&show.stdout).unwrap();
    assert_eq!(t["truncated"], false);
    t["rows"].as_array().unwrap().clone()
}

fn of_type(events: &[Value], kind: &str) -> Vec<Value> {
    events
        .iter()
        .filter(|e| e["type"] == kind)
        .cloned()
        .collect()
}

/// Everything `events` showed as kept is in `rows`: each user message, each
/// answer text, each successful tool result.
fn check_shown_is_kept(events: &[Value], rows: &[Value], what: &str) {
    for e in of_type(events, "user_message") {
        assert!(
            rows.iter()
                .any(|r| r["type"] == "user" && r["text"] == e["text"]),
            "{what}: user_message {} shown, not kept: {rows:?}",
            e["text"]
        );
    }
    for e in of_type(events, "assistant_turn") {
        if e["text"] == "" {
            continue;
        }
        assert!(
            rows.iter()
                .any(|r| r["type"] == "assistant" && r["text"] == e["text"]),
            "{what}: assistant_turn {} shown, not kept: {rows:?}",
            e["text"]
        );
    }
    for e in of_type(events, "tool_done") {
        if e["ok"] != true {
            continue;
        }
        let row = rows
            .iter()
            .find(|r| r["type"] == "tool_call" && r["call_id"] == e["call_id"]);
        assert!(
            row.is_some_and(|r| r["outcome"] == "ok"),
            "{what}: tool_done ok:true for {} shown, kept as {row:?}",
            e["call_id"]
        );
    }
}

#[test]
fn a_user_message_printed_is_a_user_message_kept() {
    let env = Env::new();
    // A slow answer: the kill lands while the turn is still going.
    env.file(
        "s.json",
        r#"[{"text":"one two three four five six seven eight nine ten","delay_ms":40}]"#,
    );
    let n = kills("LRG_KILLS_USER", 30);
    for i in 0..n {
        let prompt = format!("message {i}");
        let mut run = Running::start(run_json(&env, "ack:user", &prompt, false));
        assert!(
            run.until(|e| e["type"] == "user_message"),
            "no user_message"
        );
        run.kill();
        // Every message acknowledged so far, by the same chat, resumed.
        let rows = transcript(&env, "ack:user");
        for j in 0..=i {
            let text = format!("message {j}");
            assert!(
                rows.iter()
                    .any(|r| r["type"] == "user" && r["text"] == text),
                "kill {i}: `{text}` was printed as a user_message and lost: {rows:?}"
            );
        }
    }
}

#[test]
fn a_tool_done_printed_is_a_result_kept() {
    let env = Env::new();
    env.file(
        "s.json",
        r#"[{"text":"Looking.","calls":[{"name":"list_notes","arguments":{}}]},
            {"text":"a b c d e f g h i j k l","delay_ms":40}]"#,
    );
    let n = kills("LRG_KILLS_TOOL", 30);
    for i in 0..n {
        let key = format!("ack:tool:{i}");
        let mut run = Running::start(run_json(&env, &key, "what notes?", true));
        assert!(
            run.until(|e| e["type"] == "tool_done" && e["ok"] == true),
            "no tool_done"
        );
        let events = run.kill();
        let rows = transcript(&env, &key);
        check_shown_is_kept(&events, &rows, &format!("kill {i}"));
        let call = rows.iter().find(|r| r["type"] == "tool_call").unwrap();
        assert_eq!(call["outcome"], "ok", "kill {i}: {rows:?}");
    }
}

#[test]
fn random_kills_never_lose_what_was_shown_nor_break_the_file() {
    let env = Env::new();
    env.file(
        "s.json",
        r#"[{"text":"Looking.","calls":[{"name":"list_notes","arguments":{}}]},
            {"text":"Reading.","calls":[{"name":"read_note","arguments":{"name":"todo"}}]},
            {"text":"a b c d e f g h","delay_ms":15}]"#,
    );
    let n = kills("LRG_KILLS_RANDOM", 50);
    // A fixed seed: a failure can be replayed.
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    for i in 0..n {
        seed = seed
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        let delay = Duration::from_millis((seed >> 33) % 250);
        let key = format!("random:{i}");
        let run = Running::start(run_json(&env, &key, &format!("random {i}"), true));
        std::thread::sleep(delay);
        let events = run.kill();
        let shown_user = !of_type(&events, "user_message").is_empty();
        let show = ran(kept(&env).args(["sessions", "show", &key, "--json"]));
        if !shown_user && show.code == 2 && show.stderr.contains("no kept chat") {
            continue; // killed before anything was acknowledged
        }
        let rows = transcript(&env, &key);
        check_shown_is_kept(&events, &rows, &format!("kill {i} after {delay:?}"));
    }
    // Nothing a kill left behind is damaged.
    let list = ran(kept(&env).args(["sessions", "--json"]));
    assert_eq!(list.code, 0, "{list:?}");
    assert!(!list.stdout.contains("\"damaged\""), "{list:?}");
}

/// `lrg serve` keeping chats in the test's directory; returns it and its
/// origin (`http://127.0.0.1:PORT`).
fn serve(env: &Env) -> (Child, String) {
    let mut cmd = env.lrg_std();
    cmd.env("LRG_AGENT_TOKEN", AGENT_TOKEN)
        .env("USER", "tester")
        .args([
            "serve",
            "--port",
            "0",
            "--model",
            "script:s.json",
            "--store",
        ])
        .arg(env.path("served"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut child = cmd.spawn().unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        let _ = tx.send(line);
    });
    let url = rx.recv_timeout(TIMEOUT).expect("lrg serve printed no URL");
    let origin = url
        .trim()
        .split("/v1/")
        .next()
        .expect("a page URL")
        .to_string();
    (child, origin)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_202_is_a_message_kept_across_kill_9() {
    let env = Env::new();
    env.file(
        "s.json",
        r#"[{"text":"one two three four five six seven eight nine ten","delay_ms":40}]"#,
    );
    lrg_providers::transport::ensure_tls_provider();
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    let n = kills("LRG_KILLS_SERVE", 30);
    for i in 0..=n {
        let (mut child, origin) = serve(&env);
        let opened: Value = client
            .post(format!("{origin}/v1/chat/sessions"))
            .bearer_auth(AGENT_TOKEN)
            .header("origin", &origin)
            .json(&json!({"client_key": "tester", "context_key": "kill:202"}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let id = opened["session"]
            .as_str()
            .expect("a session id")
            .to_string();
        let token = opened["chat_token"].as_str().unwrap().to_string();
        let chat = format!("{origin}/v1/chat/sessions/{id}");
        // Every message answered 202 by an earlier server is here.
        let t: Value = client
            .get(format!("{chat}/transcript"))
            .bearer_auth(&token)
            .header("origin", &origin)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let rows = t["rows"].as_array().unwrap();
        for j in 0..i {
            let text = format!("message {j}");
            assert!(
                rows.iter()
                    .any(|r| r["type"] == "user" && r["text"] == text),
                "restart {i}: `{text}` was answered 202 and lost: {rows:?}"
            );
        }
        if i == n {
            child.kill().unwrap();
            child.wait().unwrap();
            break;
        }
        let r = client
            .post(format!("{chat}/messages"))
            .bearer_auth(&token)
            .header("origin", &origin)
            .json(&json!({"text": format!("message {i}")}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 202, "{:?}", r.text().await);
        child.kill().unwrap(); // SIGKILL, the moment the 202 is in
        child.wait().unwrap();
    }
}

/// A chat of `lrg serve` seen from outside: its URL, token and the origin
/// its requests carry.
struct Served {
    client: reqwest::Client,
    origin: String,
    chat: String,
    token: String,
}

impl Served {
    /// Open (create or resume) the keyed chat `context_key`.
    async fn open(origin: &str, context_key: &str) -> Self {
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .build()
            .unwrap();
        let opened: Value = client
            .post(format!("{origin}/v1/chat/sessions"))
            .bearer_auth(AGENT_TOKEN)
            .header("origin", origin)
            .json(&json!({"client_key": "tester", "context_key": context_key}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let id = opened["session"].as_str().expect("a session id");
        Self {
            chat: format!("{origin}/v1/chat/sessions/{id}"),
            token: opened["chat_token"].as_str().unwrap().to_string(),
            origin: origin.to_string(),
            client,
        }
    }

    fn post(&self, route: &str, body: Value) -> reqwest::RequestBuilder {
        self.client
            .post(format!("{}{route}", self.chat))
            .bearer_auth(&self.token)
            .header("origin", &self.origin)
            .json(&body)
    }

    async fn rows(&self) -> Vec<Value> {
        let t: Value = self
            .client
            .get(format!("{}/transcript", self.chat))
            .bearer_auth(&self.token)
            .header("origin", &self.origin)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        t["rows"].as_array().unwrap().clone()
    }

    /// Its event stream from the start (the streaming client has no
    /// overall timeout: each read is bounded instead).
    async fn events(&self) -> Sse {
        let response = reqwest::Client::new()
            .get(format!("{}/events?after=0", self.chat))
            .bearer_auth(&self.token)
            .header("origin", &self.origin)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        Sse {
            response,
            buffer: String::new(),
        }
    }
}

/// An SSE stream read event by event.
struct Sse {
    response: reqwest::Response,
    buffer: String,
}

impl Sse {
    /// Read events until one passes `done`, bounded by [`TIMEOUT`].
    async fn until(&mut self, what: &str, done: impl Fn(&Value) -> bool) -> Value {
        let deadline = tokio::time::Instant::now() + TIMEOUT;
        loop {
            while let Some(end) = self.buffer.find('\n') {
                let line: String = self.buffer.drain(..=end).collect();
                if let Some(data) = line.trim_end().strip_prefix("data: ") {
                    let event: Value = serde_json::from_str(data).unwrap_or(Value::Null);
                    if done(&event) {
                        return event;
                    }
                }
            }
            let chunk = tokio::time::timeout_at(deadline, self.response.chunk())
                .await
                .unwrap_or_else(|_| panic!("no {what} within {TIMEOUT:?}"))
                .unwrap()
                .unwrap_or_else(|| panic!("the stream ended before {what}"));
            self.buffer.push_str(&String::from_utf8_lossy(&chunk));
        }
    }
}

/// One round of a replace-the-history point: open the keyed chat, check
/// what the last round left, send a message, let it finish, start `route`,
/// and SIGKILL the server the moment `shown` is on the stream.
async fn replace_and_kill(
    env: &Env,
    key: &str,
    script: &str,
    route: &str,
    shown: &str,
    check: impl Fn(&[Value]),
    (i, n): (usize, usize),
) {
    env.file("s.json", script);
    let (mut child, origin) = serve(env);
    let chat = Served::open(&origin, key).await;
    check(&chat.rows().await);
    if i == n {
        child.kill().unwrap();
        child.wait().unwrap();
        return;
    }
    let mut events = chat.events().await;
    let r = chat
        .post("/messages", json!({"text": format!("message {i}")}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 202, "{:?}", r.text().await);
    events
        .until("the end of the turn", |e| {
            e["type"] == "busy" && e["busy"] == false
        })
        .await;
    // Not awaited: the kill is timed by what the page is shown.
    let request = chat.post(route, json!({}));
    let sent = tokio::spawn(request.send());
    events.until(shown, |e| e["type"] == shown).await;
    child.kill().unwrap(); // SIGKILL, the moment it is shown
    child.wait().unwrap();
    sent.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clear_shown_is_a_clear_kept_across_kill_9() {
    let env = Env::new();
    lrg_providers::transport::ensure_tls_provider();
    let n = kills("LRG_KILLS_CLEAR", 5);
    for i in 0..=n {
        let script = format!(r#"[{{"text":"answer {i}"}}]"#);
        let check = |rows: &[Value]| {
            assert!(
                rows.is_empty(),
                "restart {i}: `cleared` was shown, and the old conversation came back: {rows:?}"
            );
        };
        replace_and_kill(
            &env,
            "kill:clear",
            &script,
            "/clear",
            "cleared",
            check,
            (i, n),
        )
        .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compaction_shown_is_a_compaction_kept_across_kill_9() {
    let env = Env::new();
    lrg_providers::transport::ensure_tls_provider();
    let n = kills("LRG_KILLS_COMPACT", 5);
    for i in 0..=n {
        let script = format!(r#"[{{"text":"answer {i}"}},{{"text":"summary {i}"}}]"#);
        let check = |rows: &[Value]| {
            if i == 0 {
                assert!(rows.is_empty(), "{rows:?}");
                return;
            }
            let summary = format!("summary {}", i - 1);
            assert!(
                rows.len() == 1
                    && rows[0]["type"] == "user"
                    && rows[0]["text"]
                        .as_str()
                        .is_some_and(|t| t.contains(&summary)),
                "restart {i}: `compacted` was shown, and the conversation it replaced came \
                 back: {rows:?}"
            );
        };
        replace_and_kill(
            &env,
            "kill:compact",
            &script,
            "/compact",
            "compacted",
            check,
            (i, n),
        )
        .await;
    }
}
