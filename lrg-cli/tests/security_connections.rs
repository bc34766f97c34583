//! `lrg serve` against clients that hold connections, as an attacker would
//! drive it (issue 24, §2 and the protocol-error part of §8): a flood of
//! slow and idle sockets under a 256-descriptor limit must not stop a
//! well-behaved client nor an open event stream; slow heads, trickling
//! bodies and idle keep-alives are closed; repeated 403s from one address
//! turn into 429s; hyper's own protocol errors carry the API's JSON body.
#![cfg(unix)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::io::{BufRead as _, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::Env;
use futures::StreamExt as _;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

const SCRIPT: &str = r#"[{"text": "Hello from the script."}, {"text": "Again."}]"#;
const AGENT_TOKEN: &str = "agent-token-for-the-connection-tests-0123456789";

/// A running `lrg serve` (killed on drop) and what its URL tells.
struct Served {
    child: Child,
    origin: String,
    addr: std::net::SocketAddr,
    session: String,
    token: String,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `lrg serve` on a scripted model, under `ulimit -n fds` when given.
fn serve(env: &Env, fds: Option<u32>, extra: &[&str]) -> Served {
    env.file("turns.json", SCRIPT);
    let lrg = env!("CARGO_BIN_EXE_lrg");
    let mut cmd = match fds {
        Some(n) => {
            let mut c = Command::new("sh");
            c.args(["-c", &format!("ulimit -n {n} && exec \"$0\" \"$@\""), lrg]);
            c
        }
        None => Command::new(lrg),
    };
    cmd.env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("OLLAMA_HOST", "http://127.0.0.1:9")
        .env("XDG_CONFIG_HOME", env.path("config"))
        .env("XDG_DATA_HOME", env.path("data"))
        .env("LRG_AGENT_TOKEN", AGENT_TOKEN)
        .current_dir(env.dir.path())
        .args(["serve", "--port", "0", "--model", "script:turns.json"])
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    let mut child = cmd.spawn().unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        let _ = tx.send(line);
    });
    let url = match rx.recv_timeout(Duration::from_secs(60)) {
        Ok(line) => line.trim().to_string(),
        Err(_) => {
            let _ = child.kill();
            panic!("lrg serve printed no URL");
        }
    };
    let (page, fragment) = url.split_once('#').unwrap();
    let origin = page.trim_end_matches("/v1/ui/chat").to_string();
    let params: std::collections::HashMap<_, _> = fragment
        .split('&')
        .filter_map(|p| p.split_once('='))
        .collect();
    let addr = origin.trim_start_matches("http://").parse().unwrap();
    Served {
        child,
        addr,
        session: params["session"].to_string(),
        token: params["token"].to_string(),
        origin,
    }
}

/// The open-files limit of this test process (`ulimit -n` of a child shell).
fn own_fd_limit() -> usize {
    let out = Command::new("sh")
        .args(["-c", "ulimit -n"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .unwrap_or(usize::MAX)
}

/// Send `request` on a fresh connection; read until the server closes it
/// (or `wait` passes).
async fn exchange(addr: std::net::SocketAddr, request: &[u8], wait: Duration) -> String {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let _ = stream.write_all(request).await;
    let mut out = Vec::new();
    let _ = tokio::time::timeout(wait, stream.read_to_end(&mut out)).await;
    String::from_utf8_lossy(&out).into_owned()
}

fn json_body(response: &str) -> Value {
    let (_, body) = response.split_once("\r\n\r\n").unwrap_or_default();
    serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {response:?}"))
}

/// Whether the server has closed `stream` (a read returns end of file or
/// an error at once).
fn is_closed(stream: &TcpStream) -> bool {
    let mut buf = [0u8; 4096];
    loop {
        match stream.try_read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return false,
            Err(_) => return true,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_slow_and_idle_sockets_under_256_fds_does_not_stop_a_good_client() {
    let env = Env::new();
    let served = serve(&env, Some(256), &[]);
    lrg_providers::transport::ensure_tls_provider();
    let client = reqwest::Client::new();
    let chat = format!("{}/v1/chat/sessions/{}", served.origin, served.session);

    // An event stream open before the flood.
    let events = client
        .get(format!("{chat}/events?after=0"))
        .bearer_auth(&served.token)
        .send()
        .await
        .unwrap();
    assert_eq!(events.status(), 200);
    let (seen_tx, mut seen_rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    let reader = tokio::spawn(async move {
        let mut stream = events.bytes_stream();
        while let Some(Ok(chunk)) = stream.next().await {
            let _ = seen_tx.send(String::from_utf8_lossy(&chunk).into_owned());
        }
    });

    // 1,000 sockets (fewer if this process may not hold them): half send
    // part of a head and trickle a byte now and then, half send one whole
    // kept-alive request and then nothing.
    let flood = 1000.min(own_fd_limit().saturating_sub(200));
    if flood < 1000 {
        eprintln!("this process may open only {flood} sockets for the flood");
    }
    let started = Instant::now();
    let mut slow = Vec::new();
    let mut idle = Vec::new();
    for i in 0..flood {
        let Ok(Ok(mut s)) =
            tokio::time::timeout(Duration::from_secs(2), TcpStream::connect(served.addr)).await
        else {
            continue;
        };
        if i % 2 == 0 {
            let _ = s
                .write_all(b"GET /v1/ui/chat HTTP/1.1\r\nhost: 127.0.0.1\r\nx-slow: ")
                .await;
            slow.push(s);
        } else {
            let _ = s
                .write_all(b"GET /nothing-here HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n")
                .await;
            idle.push(s);
        }
    }
    let opened = slow.len() + idle.len();
    let flood_took = started.elapsed();
    let (stop_tx, mut stop_rx) = tokio::sync::oneshot::channel::<()>();
    let trickle = tokio::spawn(async move {
        loop {
            for s in &mut slow {
                let _ = s.write_all(b"a").await;
            }
            tokio::select! {
                _ = &mut stop_rx => return slow,
                () = tokio::time::sleep(Duration::from_millis(500)) => {}
            }
        }
    });

    // The well-behaved client, on a fresh connection each time.
    let mut worst = Duration::ZERO;
    for _ in 0..5 {
        let fresh = reqwest::Client::builder()
            .pool_max_idle_per_host(0)
            .build()
            .unwrap();
        let t = Instant::now();
        let r = tokio::time::timeout(
            Duration::from_secs(5),
            fresh.get(format!("{}/v1/ui/chat", served.origin)).send(),
        )
        .await
        .expect("the page was not answered within 5 s")
        .unwrap();
        assert_eq!(r.status(), 200);
        let _ = r.bytes().await.unwrap();
        worst = worst.max(t.elapsed());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let _ = stop_tx.send(());
    let slow = trickle.await.unwrap();
    let held = slow.iter().chain(&idle).filter(|s| !is_closed(s)).count();

    // The event stream kept working: a message shows on it.
    let r = client
        .post(format!("{chat}/messages"))
        .bearer_auth(&served.token)
        .json(&json!({"text": "still there?"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 202);
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut seen = String::new();
    while !seen.contains("still there?") {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, seen_rx.recv()).await {
            Ok(Some(chunk)) => seen.push_str(&chunk),
            _ => panic!("the event stream stopped during the flood; it had: {seen}"),
        }
    }

    eprintln!(
        "figures: {opened} slow and idle sockets opened in {flood_took:?} against a server \
         under a 256-fd limit; {held} of them held open by it after the good client's tries; \
         the good client answered in at most {worst:?} (5 tries, fresh connections)"
    );
    assert!(
        worst < Duration::from_secs(1),
        "the good client waited {worst:?}"
    );
    assert!(held < 256, "{held} connections held under a 256-fd limit");
    reader.abort();
}

#[tokio::test]
async fn slow_heads_trickling_bodies_and_idle_connections_are_closed() {
    let env = Env::new();
    let served = serve(
        &env,
        None,
        &[
            "--header-timeout",
            "1",
            "--body-timeout",
            "1",
            "--idle-timeout",
            "1",
        ],
    );
    let wait = Duration::from_secs(8);

    // A head that never ends: closed, with nothing answered.
    let t = Instant::now();
    let out = exchange(
        served.addr,
        b"GET /v1/ui/chat HTTP/1.1\r\nhost: 127.0.0.1\r\n",
        wait,
    )
    .await;
    assert!(out.is_empty(), "{out}");
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "open for {:?}",
        t.elapsed()
    );

    // A body that never ends: 408 in the API's form, then closed.
    let chat = format!("/v1/chat/sessions/{}/messages", served.session);
    let head = format!(
        "POST {chat} HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer {}\r\n\
         content-type: application/json\r\ncontent-length: 100\r\n\r\n{{\"text\"",
        served.token
    );
    let t = Instant::now();
    let out = exchange(served.addr, head.as_bytes(), wait).await;
    assert!(out.starts_with("HTTP/1.1 408 "), "{out}");
    assert_eq!(json_body(&out)["error"]["kind"], "timeout", "{out}");
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "open for {:?}",
        t.elapsed()
    );

    // Answered, then kept alive with nothing more: closed.
    let t = Instant::now();
    let out = exchange(
        served.addr,
        b"GET /v1/ui/chat HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n",
        wait,
    )
    .await;
    assert!(out.starts_with("HTTP/1.1 200 "), "{out}");
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "open for {:?}",
        t.elapsed()
    );

    // Connected, never a byte: closed.
    let t = Instant::now();
    let out = exchange(served.addr, b"", wait).await;
    assert!(out.is_empty(), "{out}");
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "open for {:?}",
        t.elapsed()
    );
}

#[tokio::test]
async fn repeated_403s_from_one_address_turn_into_429s() {
    let env = Env::new();
    let served = serve(&env, None, &[]);
    lrg_providers::transport::ensure_tls_provider();
    let client = reqwest::Client::new();
    let url = format!(
        "{}/v1/chat/sessions/{}/transcript",
        served.origin, served.session
    );
    // A web page of another site, in the person's browser on this machine,
    // can send requests without preflight (no custom headers): 40 of them
    // must not lock the person out of the page or their chat.
    for _ in 0..40 {
        let r = client
            .post(format!(
                "{}/v1/chat/sessions/{}/messages",
                served.origin, served.session
            ))
            .header("origin", "https://evil.example")
            .header("content-type", "text/plain")
            .body(r#"{"text":"hi"}"#)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 403);
    }
    let page = client
        .get(format!("{}/v1/ui/chat", served.origin))
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 200);
    let own = client
        .get(&url)
        .bearer_auth(&served.token)
        .send()
        .await
        .unwrap();
    assert_eq!(own.status(), 200);

    let mut answers = Vec::new();
    for _ in 0..25 {
        let r = client
            .get(&url)
            .bearer_auth("a-wrong-token")
            .send()
            .await
            .unwrap();
        let retry = r.headers().get("retry-after").cloned();
        let status = r.status().as_u16();
        answers.push((status, retry, r.text().await.unwrap()));
    }
    let statuses: Vec<u16> = answers.iter().map(|a| a.0).collect();
    assert!(statuses[..20].iter().all(|s| *s == 403), "{statuses:?}");
    assert!(statuses[22..].iter().all(|s| *s == 429), "{statuses:?}");
    // Every 403 is the same bytes, and a 429 says when to come back.
    assert!(answers[..20].iter().all(|a| a.2 == answers[0].2));
    let limited = answers.last().unwrap();
    assert!(limited.1.is_some(), "no Retry-After");
    let body: Value = serde_json::from_str(&limited.2).unwrap();
    assert_eq!(body["error"]["kind"], "too_many");
    // Even the right token waits: the address is throttled, not the token
    // (or a wrong guess would be told apart from a right one). The page,
    // which needs no token, is still served.
    let page = client
        .get(format!("{}/v1/ui/chat", served.origin))
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 200);
    let r = client
        .get(&url)
        .bearer_auth(&served.token)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 429);
}

#[tokio::test]
async fn protocol_errors_have_the_api_body() {
    let env = Env::new();
    let served = serve(&env, None, &[]);
    let wait = Duration::from_secs(5);

    let out = exchange(served.addr, b"BROKEN\x01 / HTTP/1.1\r\n\r\n", wait).await;
    assert!(out.starts_with("HTTP/1.1 400 "), "{out}");
    assert_eq!(json_body(&out)["error"]["kind"], "bad_request", "{out}");

    let big = format!(
        "GET /v1/ui/chat HTTP/1.1\r\nhost: 127.0.0.1\r\ncookie: {}\r\n\r\n",
        "c".repeat(40_000)
    );
    let out = exchange(served.addr, big.as_bytes(), wait).await;
    assert!(out.starts_with("HTTP/1.1 431 "), "{out}");
    assert_eq!(json_body(&out)["error"]["kind"], "too_large", "{out}");
    assert!(out.contains("content-type: application/json"), "{out}");

    let long = format!(
        "GET /v1/ui/chat?{} HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n",
        "q".repeat(12_000)
    );
    let out = exchange(served.addr, long.as_bytes(), wait).await;
    assert!(out.starts_with("HTTP/1.1 414 "), "{out}");
    assert_eq!(json_body(&out)["error"]["kind"], "too_large", "{out}");
}

#[test]
fn connection_limits_must_be_above_zero() {
    let env = Env::new();
    for flags in [
        ["--max-connections", "0"],
        ["--header-timeout", "0"],
        ["--body-timeout", "-1"],
        ["--idle-timeout", "soon"],
    ] {
        let flag = format!("{}={}", flags[0], flags[1]);
        let out = env.lrg().args(["serve", &flag]).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{flags:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(flags[0]), "{flags:?}: {stderr}");
    }
}
