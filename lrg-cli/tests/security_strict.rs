//! Issue 24 §8, as an attacker drives `lrg serve`: bodies are read strictly
//! (trailing garbage, an array for an object and unknown fields are 400s),
//! a weak agent token is refused at start, and on a loopback bind a request
//! naming another host (DNS rebinding) gets the uniform 403.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::security_support;

use std::process::{Child, Output};
use std::time::{Duration, Instant};

use security_support::{AGENT, SCRIPT, command, serve};

/// `child`'s output once it exits; killed, and the test failed, when it is
/// still running after `limit` (a server that started).
fn exit_within(mut child: Child, limit: Duration) -> Output {
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("lrg serve started with a weak agent token");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().unwrap()
}

#[tokio::test]
async fn bodies_are_read_strictly() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("turns.json"), SCRIPT).unwrap();
    let s = serve(dir.path(), "script:turns.json", &[]);
    let bad = [
        // Trailing garbage after a valid body.
        ("/messages", r#"{"text": "hi"} and more"#, None),
        ("/messages", r#"{"text": "hi"}{"text": "again"}"#, None),
        ("/messages", r#"{"text": "hi"}]"#, None),
        // An array where an object goes, at the top and inside.
        ("/messages", r#"["hi"]"#, None),
        (
            "/messages",
            r#"{"text": "a", "images": [["image/png", "aGk="]]}"#,
            Some("images[0]"),
        ),
        ("/model", r#"["script:turns.json", true]"#, None),
        ("/approvals/c1", r#"["once"]"#, None),
        // Unknown fields, named.
        (
            "/messages",
            r#"{"text": "hi", "role": "system"}"#,
            Some("role"),
        ),
        (
            "/model",
            r#"{"model": "x", "confirm": true, "base_url": "http://evil"}"#,
            Some("base_url"),
        ),
    ];
    for (route, body, names) in bad {
        let a = s.chat_post(route, body).await;
        assert_eq!(a.status, 400, "{route} {body}: {a:?}");
        assert_eq!(a.json()["error"]["kind"], "bad_request", "{route} {body}");
        if let Some(field) = names {
            assert!(a.message().contains(field), "{route} {body}: {a:?}");
        }
    }
    let a = s.post(&s.chat_url("/permissions"), &s.token, "").await;
    assert_eq!(a.status, 405);
    let put = s
        .client
        .put(s.chat_url("/permissions"))
        .bearer_auth(&s.token)
        .body(r#"{"mode": "ask_all"} x"#)
        .send()
        .await
        .unwrap();
    assert_eq!(put.status(), 400);
    for body in [
        r#"{} {}"#,
        r#"[]"#,
        r#"[null, null, {"mode": "auto_all"}]"#,
        r#"{"permissions": ["auto_all"]}"#,
        r#"{"model": "script:turns.json", "base_url": "http://evil"}"#,
    ] {
        let a = s.open(body).await;
        assert_eq!(a.status, 400, "{body}: {a:?}");
    }
    assert!(
        s.open(r#"{"model": "script:turns.json", "base_url": "http://evil"}"#)
            .await
            .message()
            .contains("base_url")
    );
    // A declared length over the body limit is a 413 at once, not a 408
    // once the client has trickled (or failed to send) 8 MiB.
    let head = format!(
        "POST {} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {}\r\n\
         Content-Type: application/json\r\nContent-Length: 52428800\r\n",
        s.chat_url("/messages").trim_start_matches(&s.origin),
        s.token
    );
    assert_eq!(s.raw_status(&head), 413);
    // Nothing of the refused messages reached the chat; a good one does.
    let t = s.say_hi(&s.session.clone(), &s.token.clone(), 2).await;
    assert_eq!(t["rows"].as_array().unwrap().len(), 2, "{t}");
}

#[test]
fn a_weak_agent_token_is_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("turns.json"), SCRIPT).unwrap();
    let repeated = "a".repeat(40);
    for weak in ["a", "short-but-not-short-enough-0123", repeated.as_str()] {
        let child = command(
            dir.path(),
            "script:turns.json",
            &[],
            &[("LRG_AGENT_TOKEN", weak)],
        )
        .spawn()
        .unwrap();
        let out = exit_within(child, Duration::from_secs(30));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{weak}: {stderr}");
        assert!(stderr.contains("openssl rand -hex 16"), "{stderr}");
        assert!(stderr.contains("LRG_AGENT_TOKEN"), "{stderr}");
        assert!(out.stdout.is_empty(), "no page URL is printed");
        if weak.len() > 1 {
            assert!(!stderr.contains(weak), "the token is not echoed: {stderr}");
        }
    }
    // 32 characters is enough.
    let mut ok = serve(dir.path(), "script:turns.json", &[]);
    assert!(ok.child.try_wait().unwrap().is_none());
    assert!(AGENT.len() >= 32);
}

#[tokio::test]
async fn a_foreign_host_is_refused_on_a_loopback_bind() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("turns.json"), SCRIPT).unwrap();
    let s = serve(dir.path(), "script:turns.json", &[]);
    let port = s.port();
    let chat = format!("/v1/chat/sessions/{}/transcript", s.session);
    let auth = format!("Authorization: Bearer {}\r\n", s.token);
    let agent = format!("Authorization: Bearer {AGENT}\r\nContent-Length: 2\r\n");
    for host in [
        format!("127.0.0.1:{port}"),
        format!("localhost:{port}"),
        "localhost".to_string(),
        format!("[::1]:{port}"),
    ] {
        assert_eq!(
            s.raw_status(&format!("GET /v1/ui/chat HTTP/1.1\r\nHost: {host}\r\n")),
            200,
            "{host}"
        );
        assert_eq!(
            s.raw_status(&format!("GET {chat} HTTP/1.1\r\nHost: {host}\r\n{auth}")),
            200,
            "{host}"
        );
    }
    let forbidden = s.get(&s.chat_url("/transcript"), "not-the-token").await;
    assert_eq!(forbidden.status, 403);
    // Few enough that refused requests stay under the 403 throttle's
    // burst (the unit tests of the host rule try many more names).
    for host in [
        format!("evil.example:{port}"),
        format!("127.0.0.1.evil.example:{port}"),
        "localhost.evil.example".to_string(),
    ] {
        // The page, a chat with its right token, the agent route, and a
        // route that does not exist: all the one 403.
        for head in [
            // An absolute-form target names its host too.
            format!("GET http://{host}{chat} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{auth}"),
            format!("GET /v1/ui/chat HTTP/1.1\r\nHost: {host}\r\n"),
            format!("GET {chat} HTTP/1.1\r\nHost: {host}\r\n{auth}"),
            format!("GET /nope HTTP/1.1\r\nHost: {host}\r\n"),
        ] {
            assert_eq!(s.raw_status(&head), 403, "{head}");
        }
        let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        stream
            .set_read_timeout(Some(std::time::Duration::from_secs(20)))
            .unwrap();
        std::io::Write::write_all(
            &mut stream,
            format!(
                "POST /v1/chat/sessions HTTP/1.1\r\nHost: {host}\r\n{agent}Connection: close\r\n\r\n{{}}"
            )
            .as_bytes(),
        )
        .unwrap();
        let mut answer = String::new();
        let _ = std::io::Read::read_to_string(&mut stream, &mut answer);
        assert!(answer.starts_with("HTTP/1.1 403"), "{answer}");
        assert!(
            answer.ends_with(&forbidden.body),
            "the uniform 403 body: {answer}"
        );
    }
}
