//! The connection layer over real sockets: raw bytes in, what a client
//! reads out.

use std::time::Duration;

use axum::routing::get;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

use super::*;
use crate::http::ApiError;

async fn forbidden() -> ApiError {
    ApiError::forbidden()
}

/// A server of two routes (`/ok`, `/forbidden`) on a free port.
async fn start(options: ServeOptions) -> (SocketAddr, tokio::sync::oneshot::Sender<()>) {
    let router = Router::new()
        .route(
            "/ok",
            get(|| async { "ok" }).post(|body: String| async move { body }),
        )
        .route("/forbidden", get(forbidden))
        .route("/big", get(|| async { vec![b'x'; 32 << 20] }));
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let addr = listener.local_addr().unwrap_or_else(|e| panic!("{e}"));
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(serve(listener, router, options, async move {
        let _ = rx.await;
    }));
    (addr, tx)
}

/// Send `request`, read until the server closes (or 5 s pass).
async fn exchange(addr: SocketAddr, request: &[u8]) -> String {
    let mut stream = TcpStream::connect(addr)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let _ = stream.write_all(request).await;
    read_until_close(&mut stream).await
}

async fn read_until_close(stream: &mut TcpStream) -> String {
    let mut out = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(60), stream.read_to_end(&mut out)).await;
    String::from_utf8_lossy(&out).into_owned()
}

fn json_body(response: &str) -> serde_json::Value {
    let (_, body) = response.split_once("\r\n\r\n").unwrap_or_default();
    serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {response}"))
}

#[tokio::test]
async fn hypers_own_errors_have_the_api_body() {
    let (addr, _stop) = start(ServeOptions::default()).await;

    let bad = exchange(addr, b"NOT A REQUEST\r\n\r\n").await;
    assert!(bad.starts_with("HTTP/1.1 400 "), "{bad}");
    assert_eq!(json_body(&bad)["error"]["kind"], "bad_request", "{bad}");

    let big = format!(
        "GET /ok HTTP/1.1\r\nhost: x\r\nx-big: {}\r\n\r\n",
        "a".repeat(20_000)
    );
    let big = exchange(addr, big.as_bytes()).await;
    assert!(big.starts_with("HTTP/1.1 431 "), "{big}");
    assert_eq!(json_body(&big)["error"]["kind"], "too_large", "{big}");

    let long = format!("GET /ok?{} HTTP/1.1\r\nhost: x\r\n\r\n", "q".repeat(10_000));
    let long = exchange(addr, long.as_bytes()).await;
    assert!(long.starts_with("HTTP/1.1 414 "), "{long}");
    assert_eq!(json_body(&long)["error"]["kind"], "too_large", "{long}");

    // A good request on a kept-alive connection after all that.
    let ok = exchange(
        addr,
        b"GET /ok HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n",
    )
    .await;
    assert!(ok.starts_with("HTTP/1.1 200 "), "{ok}");
    assert!(ok.ends_with("ok"), "{ok}");
}

#[tokio::test]
async fn a_response_that_looks_like_hypers_error_is_not_touched() {
    // A response body that is exactly hyper's error head goes through as
    // written.
    let head = "HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n";
    let (addr, _stop) = start(ServeOptions::default()).await;
    let request = format!(
        "POST /ok HTTP/1.1\r\nhost: x\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{head}",
        head.len()
    );
    let out = exchange(addr, request.as_bytes()).await;
    assert!(out.starts_with("HTTP/1.1 200 "), "{out}");
    assert!(out.ends_with(head), "{out}");
}

#[tokio::test]
async fn slow_heads_trickling_bodies_and_idle_connections_are_closed() {
    let options = ServeOptions::default()
        .header_read_timeout(Duration::from_millis(300))
        .body_read_timeout(Duration::from_millis(300))
        .idle_timeout(Duration::from_millis(300));
    let (addr, _stop) = start(options).await;

    let t = Instant::now();
    let slow_head = exchange(addr, b"GET /ok HTTP/1.1\r\nhost: x\r\n").await;
    assert!(slow_head.is_empty(), "{slow_head}");
    assert!(t.elapsed() < Duration::from_secs(20), "{:?}", t.elapsed());

    let slow_body = exchange(
        addr,
        b"POST /ok HTTP/1.1\r\nhost: x\r\ncontent-length: 100\r\n\r\nabc",
    )
    .await;
    assert!(slow_body.starts_with("HTTP/1.1 408 "), "{slow_body}");
    assert_eq!(json_body(&slow_body)["error"]["kind"], "timeout");

    let t = Instant::now();
    let idle = exchange(addr, b"GET /ok HTTP/1.1\r\nhost: x\r\n\r\n").await;
    assert!(idle.starts_with("HTTP/1.1 200 "), "{idle}");
    assert!(t.elapsed() < Duration::from_secs(20), "{:?}", t.elapsed());

    let t = Instant::now();
    let silent = exchange(addr, b"").await;
    assert!(silent.is_empty());
    assert!(t.elapsed() < Duration::from_secs(20), "{:?}", t.elapsed());
}

#[tokio::test]
async fn a_client_that_stops_reading_is_closed() {
    let (addr, _stop) =
        start(ServeOptions::default().write_timeout(Duration::from_millis(300))).await;
    // A small receive window, so the answer cannot all sit in the kernel.
    let socket = tokio::net::TcpSocket::new_v4().unwrap_or_else(|e| panic!("{e}"));
    let _ = socket.set_recv_buffer_size(4096);
    let mut stream = socket.connect(addr).await.unwrap_or_else(|e| panic!("{e}"));
    let _ = stream
        .write_all(b"GET /big HTTP/1.1\r\nhost: x\r\n\r\n")
        .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut out = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(5), async {
        let mut buf = vec![0; 1 << 16];
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => out.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    assert!(read.is_ok(), "the connection was kept open");
    assert!(out.len() < 32 << 20, "{}", out.len());
}

#[tokio::test]
async fn at_the_cap_the_longest_idle_connection_makes_room() {
    // Timeouts far longer than the bound below: only eviction can answer in
    // time (the bound is loose, for a loaded machine).
    let (addr, _stop) = start(
        ServeOptions::default()
            .max_connections(4)
            .header_read_timeout(Duration::from_secs(120))
            .idle_timeout(Duration::from_secs(120)),
    )
    .await;
    let mut idle = Vec::new();
    for _ in 0..20 {
        idle.push(
            TcpStream::connect(addr)
                .await
                .unwrap_or_else(|e| panic!("{e}")),
        );
    }
    let t = Instant::now();
    let ok = exchange(
        addr,
        b"GET /ok HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n",
    )
    .await;
    assert!(ok.starts_with("HTTP/1.1 200 "), "{ok}");
    assert!(t.elapsed() < Duration::from_secs(30), "{:?}", t.elapsed());
    // The first ones were closed for it.
    let mut first = idle.remove(0);
    assert!(read_until_close(&mut first).await.is_empty());
}

#[tokio::test]
async fn repeated_403s_from_one_address_are_throttled() {
    let (addr, _stop) =
        start(ServeOptions::default().forbidden_throttle(3, Duration::from_secs(60))).await;
    // Without a token a request is no guess: neither counted nor held back.
    let tokenless = b"GET /forbidden HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n";
    for _ in 0..5 {
        assert!(exchange(addr, tokenless).await.starts_with("HTTP/1.1 403 "));
    }
    let get = b"GET /forbidden HTTP/1.1\r\nhost: x\r\nauthorization: Bearer x\r\n\
                connection: close\r\n\r\n";
    let first = exchange(addr, get).await;
    assert!(first.starts_with("HTTP/1.1 403 "), "{first}");
    for _ in 0..2 {
        assert_eq!(exchange(addr, get).await, first);
    }
    let page = exchange(
        addr,
        b"GET /ok HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n",
    )
    .await;
    assert!(page.starts_with("HTTP/1.1 200 "), "{page}");
    let limited = exchange(
        addr,
        b"GET /ok HTTP/1.1\r\nhost: x\r\nauthorization: Bearer y\r\nconnection: close\r\n\r\n",
    )
    .await;
    assert!(limited.starts_with("HTTP/1.1 429 "), "{limited}");
    assert!(
        limited
            .to_ascii_lowercase()
            .contains("\r\nretry-after: 60\r\n"),
        "{limited}"
    );
    assert_eq!(json_body(&limited)["error"]["kind"], "too_many");
}

#[test]
fn the_default_cap_leaves_room_for_files() {
    assert_eq!(max_connections_for(Some(256)), 192);
    assert_eq!(max_connections_for(Some(1024)), 768);
    assert_eq!(max_connections_for(Some(64)), 16);
    assert_eq!(max_connections_for(Some(u64::MAX)), 8192);
    assert_eq!(max_connections_for(None), 1024);
    assert!(ServeOptions::default().max_connections >= 16);
    assert!(
        ServeOptions::default()
            .idle_timeout(Duration::ZERO)
            .check()
            .is_err()
    );
}

#[tokio::test]
async fn a_chat_server_serves_its_page_and_stops_when_told() {
    use crate::http::{HttpConfig, StandardOpener, StaticMenu};
    let opener = StandardOpener::new(|id: &str| {
        let message = format!("no model {id} in this test");
        Box::pin(async move { Err(lrg_providers::ProviderError::Config { message }) })
    });
    let server = ChatServer::new(
        HttpConfig::new(crate::http::generate_token()),
        Arc::new(opener),
        Arc::new(StaticMenu(Vec::new())),
    );
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let addr = listener.local_addr().unwrap_or_else(|e| panic!("{e}"));
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let serving = tokio::spawn(async move {
        server
            .serve(listener, ServeOptions::default(), async move {
                let _ = rx.await;
            })
            .await
    });
    let page = exchange(
        addr,
        b"GET /v1/ui/chat HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\n\r\n",
    )
    .await;
    assert!(page.starts_with("HTTP/1.1 200 "), "{page}");
    // A kept-alive connection does not hold the stop up.
    let _idle = TcpStream::connect(addr)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let _ = tx.send(());
    let stopped = tokio::time::timeout(Duration::from_secs(5), serving).await;
    assert!(matches!(stopped, Ok(Ok(Ok(())))), "{stopped:?}");
}
