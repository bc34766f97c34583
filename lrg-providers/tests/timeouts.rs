//! Issue 24 §7, a model that hangs: the answer must begin within the
//! first-byte timeout and keep coming within the idle timeout (60 s each by
//! default, each configurable), and the error says which one it hit.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::time::{Duration, Instant};

use common::{events, turn};
use lrg_providers::openai::{Dialect, OpenAiChat, OpenAiConfig};
use lrg_providers::transport::{DEFAULT_IDLE_TIMEOUT, TransportConfig};
use lrg_providers::{Message, TurnEvent, TurnRequest};
use serde_json::json;
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, ResponseTemplate};

fn ask() -> TurnRequest {
    TurnRequest::new(vec![Message::user("hi")])
}

fn model(base: &str, transport: TransportConfig) -> OpenAiChat {
    let config =
        OpenAiConfig::new(Dialect::VLLM, format!("{base}/v1"), "m").with_transport(transport);
    OpenAiChat::new(config).unwrap()
}

fn chunk(content: &str) -> String {
    let body = json!({"choices": [{"index": 0, "delta": {"content": content}}]});
    format!("data: {body}\n\n")
}

#[test]
fn both_timeouts_are_a_minute_by_default() {
    let config = TransportConfig::default();
    assert_eq!(config.idle_timeout, Duration::from_secs(60));
    assert_eq!(DEFAULT_IDLE_TIMEOUT, Duration::from_secs(60));
    // Unset, the first-byte timeout is the idle timeout.
    assert_eq!(config.first_byte_timeout, None);
    let config = config.with_first_byte_timeout(Duration::from_secs(5));
    assert_eq!(config.first_byte_timeout, Some(Duration::from_secs(5)));
}

#[tokio::test]
async fn a_model_that_never_begins_hits_the_first_byte_timeout() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_raw(chunk("late"), "text/event-stream")
                .set_delay(Duration::from_secs(10)),
        )
        .mount(&server)
        .await;
    // A long idle timeout: only the first-byte one can end this.
    let transport = TransportConfig::new(Duration::from_secs(2), Duration::from_secs(30))
        .with_first_byte_timeout(Duration::from_millis(400));
    let started = Instant::now();
    let err = turn(&model(&server.uri(), transport), ask())
        .await
        .unwrap_err();
    let took = started.elapsed();
    assert!(err.is_transient(), "{err:?}");
    let said = err.to_string();
    assert!(said.contains("first-byte timeout"), "{said}");
    assert!(said.contains("0.4 s"), "{said}");
    assert!(took < Duration::from_secs(8), "took {took:?}");
}

#[tokio::test]
async fn headers_alone_do_not_count_as_the_answer_beginning() {
    // The headers come at once, the body never: still the first byte.
    let base = common::stalling_server("text/event-stream", String::new()).await;
    let transport = TransportConfig::new(Duration::from_secs(2), Duration::from_secs(30))
        .with_first_byte_timeout(Duration::from_millis(400));
    let started = Instant::now();
    let err = turn(&model(&base, transport), ask()).await.unwrap_err();
    assert!(err.to_string().contains("first-byte timeout"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(8));
}

#[tokio::test]
async fn a_model_that_stalls_mid_answer_hits_the_idle_timeout() {
    let base = common::stalling_server("text/event-stream", chunk("Hel")).await;
    // A long first-byte timeout: only the idle one can end this.
    let transport = TransportConfig::new(Duration::from_secs(2), Duration::from_millis(400))
        .with_first_byte_timeout(Duration::from_secs(30));
    let started = Instant::now();
    let all = events(&model(&base, transport), ask()).await;
    assert_eq!(all[0], Ok(TurnEvent::TextDelta { text: "Hel".into() }));
    let err = all[1].clone().unwrap_err();
    assert!(err.is_transient(), "{err:?}");
    let said = err.to_string();
    assert!(said.contains("idle timeout"), "{said}");
    assert!(said.contains("0.4 s"), "{said}");
    assert!(started.elapsed() < Duration::from_secs(8));
}

/// A server that answers 200 and then sends `keep_alive` every 100 ms,
/// after `first` (which may be empty), and never anything else.
async fn trickling_server(first: String, keep_alive: &'static str) -> String {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let first = first.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 65_536];
                let _ = socket.read(&mut buf).await;
                let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\
                            connection: close\r\n\r\n";
                let _ = socket.write_all(head.as_bytes()).await;
                let _ = socket.write_all(first.as_bytes()).await;
                for _ in 0..600 {
                    if socket.write_all(keep_alive.as_bytes()).await.is_err() {
                        return;
                    }
                    let _ = socket.flush().await;
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            });
        }
    });
    format!("http://{addr}")
}

#[tokio::test]
async fn keep_alive_comments_do_not_count_as_an_answer_beginning() {
    // Bytes every 100 ms, none of them a piece of an answer: before the
    // fix each one restarted the timer and the turn never ended.
    let base = trickling_server(String::new(), ": ping\n\n").await;
    let transport = TransportConfig::new(Duration::from_secs(2), Duration::from_millis(400));
    let all = events(&model(&base, transport), ask()).await;
    let err = all.last().cloned().unwrap().unwrap_err();
    assert!(err.to_string().contains("first-byte timeout"), "{err}");
}

#[tokio::test]
async fn empty_deltas_mid_answer_are_silence() {
    let base = trickling_server(
        chunk("Hel"),
        "data: {\"choices\":[{\"index\":0,\"delta\":{}}]}\n\n",
    )
    .await;
    let transport = TransportConfig::new(Duration::from_secs(2), Duration::from_millis(400))
        .with_first_byte_timeout(Duration::from_secs(30));
    let all = events(&model(&base, transport), ask()).await;
    assert_eq!(all[0], Ok(TurnEvent::TextDelta { text: "Hel".into() }));
    let err = all.last().cloned().unwrap().unwrap_err();
    assert!(err.to_string().contains("idle timeout"), "{err}");
}
