//! `lrg serve` as an attacker meets it: a server in a scratch directory
//! with a strong agent token, its page URL read from stdout, and requests
//! with raw bodies and headers.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// The agent token of every test server (32 characters or more).
pub const AGENT: &str = "agent-token-of-the-security-tests-0123456789";

/// A running `lrg serve`, stopped (killed) when dropped.
pub struct Served {
    pub child: Child,
    /// `http://127.0.0.1:PORT`.
    pub origin: String,
    /// The first chat's id and token, from the page URL's fragment.
    pub session: String,
    pub token: String,
    pub client: reqwest::Client,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `lrg serve --model MODEL EXTRA…` in `dir`, with nothing from the outer
/// environment but `PATH`, plus `vars`.
pub fn command(
    dir: &std::path::Path,
    model: &str,
    extra: &[&str],
    vars: &[(&str, &str)],
) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_lrg"));
    cmd.env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("OLLAMA_HOST", "http://127.0.0.1:9")
        .env("HOME", dir)
        .current_dir(dir)
        .args(["serve", "--port", "0", "--model", model])
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in vars {
        cmd.env(k, v);
    }
    cmd
}

/// Start a server (agent token [`AGENT`]) and read its page URL.
pub fn serve(dir: &std::path::Path, model: &str, extra: &[&str]) -> Served {
    let mut child = command(dir, model, extra, &[("LRG_AGENT_TOKEN", AGENT)])
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        let _ = tx.send(line);
    });
    let url = match rx.recv_timeout(Duration::from_secs(60)) {
        Ok(line) if !line.trim().is_empty() => line.trim().to_string(),
        _ => {
            let _ = child.kill();
            let mut err = String::new();
            let _ = child.stderr.take().unwrap().read_to_string(&mut err);
            panic!("lrg serve printed no URL: {err}");
        }
    };
    let (page, fragment) = url.split_once('#').unwrap();
    let params: std::collections::HashMap<_, _> = fragment
        .split('&')
        .filter_map(|p| p.split_once('='))
        .collect();
    lrg_providers::transport::ensure_tls_provider();
    Served {
        origin: page.trim_end_matches("/v1/ui/chat").to_string(),
        session: params["session"].to_string(),
        token: params["token"].to_string(),
        client: reqwest::Client::builder()
            .timeout(Duration::from_secs(60))
            .build()
            .unwrap(),
        child,
    }
}

/// An answer: status and body text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    pub status: u16,
    pub body: String,
}

impl Answer {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or(serde_json::Value::Null)
    }

    /// `error.message`, or "".
    pub fn message(&self) -> String {
        self.json()["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    }
}

impl Served {
    /// The URL of the first chat's `route` (after `/v1/chat/sessions/{id}`).
    pub fn chat_url(&self, route: &str) -> String {
        format!("{}/v1/chat/sessions/{}{route}", self.origin, self.session)
    }

    /// POST `body` (raw text) to `url` with Bearer `token`.
    pub async fn post(&self, url: &str, token: &str, body: &str) -> Answer {
        let r = self
            .client
            .post(url)
            .bearer_auth(token)
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
            .await
            .unwrap();
        Answer {
            status: r.status().as_u16(),
            body: r.text().await.unwrap(),
        }
    }

    /// POST `body` to the first chat's `route` with its chat token.
    pub async fn chat_post(&self, route: &str, body: &str) -> Answer {
        self.post(&self.chat_url(route), &self.token.clone(), body)
            .await
    }

    /// POST `body` to `/v1/chat/sessions` with the agent token.
    pub async fn open(&self, body: &str) -> Answer {
        self.post(&format!("{}/v1/chat/sessions", self.origin), AGENT, body)
            .await
    }

    /// Open a chat on `model` with the agent token.
    pub async fn open_model(&self, model: &str) -> Answer {
        self.open(&serde_json::json!({"model": model}).to_string())
            .await
    }

    /// Switch the first chat to `model`, confirmed, with its chat token.
    pub async fn switch_to(&self, model: &str) -> Answer {
        let body = serde_json::json!({"model": model, "confirm": true}).to_string();
        self.chat_post("/model", &body).await
    }

    /// GET `url` with `token`.
    pub async fn get(&self, url: &str, token: &str) -> Answer {
        let r = self
            .client
            .get(url)
            .bearer_auth(token)
            .send()
            .await
            .unwrap();
        Answer {
            status: r.status().as_u16(),
            body: r.text().await.unwrap(),
        }
    }

    /// Send "hi" on chat `session` with `token` and wait (20 s at most) for
    /// the transcript to hold `rows` rows; returns it.
    pub async fn say_hi(&self, session: &str, token: &str, rows: usize) -> serde_json::Value {
        let chat = format!("{}/v1/chat/sessions/{session}", self.origin);
        let a = self
            .post(&format!("{chat}/messages"), token, r#"{"text": "hi"}"#)
            .await;
        assert_eq!(a.status, 202, "{a:?}");
        for _ in 0..200 {
            let t = self.get(&format!("{chat}/transcript"), token).await.json();
            if t["rows"].as_array().map_or(0, Vec::len) >= rows {
                return t;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("chat {session} did not answer");
    }

    /// The port the server listens on.
    pub fn port(&self) -> u16 {
        self.origin.rsplit(':').next().unwrap().parse().unwrap()
    }

    /// A raw HTTP/1.1 request (`head` is the request line and headers, each
    /// ending in CRLF, without the blank line) on a fresh connection: the
    /// status, read within 20 s.
    pub fn raw_status(&self, head: &str) -> u16 {
        let mut s = std::net::TcpStream::connect(("127.0.0.1", self.port())).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        s.write_all(format!("{head}Connection: close\r\n\r\n").as_bytes())
            .unwrap();
        let mut line = String::new();
        BufReader::new(s).read_line(&mut line).unwrap();
        line.split(' ')
            .nth(1)
            .unwrap_or_default()
            .parse()
            .unwrap_or(0)
    }
}

/// A script file answering one message.
pub const SCRIPT: &str = r#"[{"text": "Hello from the script."}, {"text": "Again."}]"#;
