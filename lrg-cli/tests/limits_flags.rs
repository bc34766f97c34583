//! Issue 24 §7's two library limits as flags, driven through the binary:
//! `--max-answer` (the cap on one model answer) and `--turn-deadline` (how
//! long a turn may go on retrying), on `run`, `chat` and `serve`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use crate::security_support;

use std::io::Write as _;
use std::process::Stdio;
use std::time::Duration;

use common::{Env, ran};

/// A script whose one answer is 3,000 bytes of text.
fn big_answer() -> String {
    serde_json::json!([{ "text": "x".repeat(3000) }]).to_string()
}

/// A "model server" that takes connections and never answers; its URL.
fn silent_server() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for conn in listener.incoming().flatten() {
            held.push(conn);
        }
    });
    url
}

#[test]
fn run_max_answer_cuts_an_answer_over_the_cap() {
    let env = Env::new();
    env.file("big.json", &big_answer());
    // Under the default cap (4 MiB) the answer is taken whole.
    let r = ran(env.lrg().args(["run", "--model", "script:big.json", "hi"]));
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains(&"x".repeat(3000)), "{r:?}");

    let r = ran(env.lrg().args([
        "run",
        "--model",
        "script:big.json",
        "--max-answer",
        "1KiB",
        "hi",
    ]));
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stderr.contains("past the 1 KiB cap"), "{r:?}");
    assert!(!r.stdout.contains(&"x".repeat(3000)), "{r:?}");

    let r = ran(env.lrg().args([
        "run",
        "--model",
        "script:big.json",
        "--max-answer",
        "lots",
        "hi",
    ]));
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("is not a size"), "{r:?}");
}

#[test]
fn chat_max_answer_cuts_an_answer_over_the_cap() {
    let env = Env::new();
    env.file("big.json", &big_answer());
    let r = ran(env
        .lrg()
        .args(["chat", "--model", "script:big.json", "--max-answer", "1KiB"])
        .write_stdin("hi\n"));
    assert!(r.stderr.contains("past the 1 KiB cap"), "{r:?}");
    assert!(!r.stdout.contains(&"x".repeat(3000)), "{r:?}");
}

#[test]
fn run_turn_deadline_stops_the_retries() {
    let url = silent_server();
    let env = Env::new();
    let r = ran(env.lrg().args([
        "run",
        "--model",
        "server:m",
        "--base-url",
        &url,
        "--model-timeout",
        "0.3",
        "--turn-deadline",
        "0.5",
        "hi",
    ]));
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stderr.contains("retry deadline of 0.5 s"), "{r:?}");
    // The default deadline (3 min) would let all four retries run.
    assert!(!r.stderr.contains("Retry 2 of 4"), "{r:?}");

    let r = ran(env
        .lrg()
        .args(["run", "--model", "server:m", "--turn-deadline", "0", "hi"]));
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("expected seconds above 0"), "{r:?}");
}

#[test]
fn chat_turn_deadline_stops_the_retries() {
    let url = silent_server();
    let env = Env::new();
    let mut child = env
        .lrg_std()
        .args([
            "chat",
            "--model",
            "server:m",
            "--base-url",
            &url,
            "--model-timeout",
            "0.3",
            "--turn-deadline",
            "0.5",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(b"hi\n").unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let out = rx
        .recv_timeout(common::TIMEOUT)
        .expect("lrg chat did not end")
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("retry deadline of 0.5 s"), "{stderr}");
    assert!(!stderr.contains("Retry 2 of 4"), "{stderr}");
}

/// The first chat's first `error` event, read from its event stream (60 s
/// at most).
async fn first_error(served: &security_support::Served) -> serde_json::Value {
    use futures::StreamExt as _;
    let events = served
        .client
        .get(served.chat_url("/events?after=0"))
        .bearer_auth(&served.token)
        .send()
        .await
        .unwrap();
    let mut stream = events.bytes_stream();
    let mut seen = String::new();
    let read = async {
        while let Some(chunk) = stream.next().await {
            seen.push_str(&String::from_utf8_lossy(&chunk.unwrap()));
            let error = seen
                .lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .filter_map(|d| serde_json::from_str::<serde_json::Value>(d.trim()).ok())
                .find(|e| e["type"] == "error");
            if let Some(error) = error {
                return error;
            }
        }
        panic!("the event stream ended without an error: {seen}");
    };
    tokio::time::timeout(Duration::from_secs(60), read)
        .await
        .expect("no error event within 60 s")
}

#[tokio::test(flavor = "multi_thread")]
async fn serve_max_answer_cuts_an_answer_over_the_cap() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("big.json"), big_answer()).unwrap();
    let served = security_support::serve(dir.path(), "script:big.json", &["--max-answer", "1KiB"]);
    let a = served.chat_post("/messages", r#"{"text": "hi"}"#).await;
    assert_eq!(a.status, 202, "{a:?}");
    let error = first_error(&served).await;
    assert!(error.to_string().contains("past the 1 KiB cap"), "{error}");
}

#[tokio::test(flavor = "multi_thread")]
async fn serve_turn_deadline_stops_the_retries() {
    let url = silent_server();
    let dir = tempfile::tempdir().unwrap();
    let served = security_support::serve(
        dir.path(),
        "server:m",
        &[
            "--base-url",
            &url,
            "--model-timeout",
            "0.3",
            "--turn-deadline",
            "0.5",
        ],
    );
    let a = served.chat_post("/messages", r#"{"text": "hi"}"#).await;
    assert_eq!(a.status, 202, "{a:?}");
    let error = first_error(&served).await;
    assert!(
        error.to_string().contains("retry deadline of 0.5 s"),
        "{error}"
    );
}
