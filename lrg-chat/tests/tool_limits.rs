//! Issue 24 §7, limits that tell the truth: a tool result over the cap is a
//! prompt, clear error naming its size, not a timeout (the server is a few
//! lines of `sh` speaking MCP over stdio, whose one tool `big` answers with
//! `bytes` bytes of text); a model answer over its cap ends the turn and is
//! not kept; a model that hangs fails at its first-byte timeout, and the
//! retry deadline stops the retries.
#![cfg(unix)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use std::sync::Arc;

use lrg_chat::tools::{McpServerConfig, StdioServerConfig, ToolHost, ToolHostOptions, Tools as _};
use lrg_chat::{ChatSession, FixedModel, SessionConfig, TurnOutcome};
use lrg_providers::openai::{Dialect, OpenAiChat, OpenAiConfig};
use lrg_providers::transport::TransportConfig;
use lrg_providers::{Part, RetryPolicy, ScriptedModel, ScriptedTurn};
use serde_json::json;
use tokio_util::sync::CancellationToken;

/// An MCP server in `sh`: answers `initialize` (with the client's own
/// protocol version), `tools/list` (one tool) and `tools/call` (a text of
/// the asked size, written as it is made, never held).
const SERVER: &str = r#"
while IFS= read -r line; do
  id=$(printf '%s' "$line" | sed -n 's/.*"id":\([0-9]*\).*/\1/p')
  case "$line" in
    *'"method":"initialize"'*)
      v=$(printf '%s' "$line" | sed -n 's/.*"protocolVersion":"\([^"]*\)".*/\1/p')
      printf '{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"%s","capabilities":{"tools":{}},"serverInfo":{"name":"big","version":"1"}}}\n' "$id" "$v" ;;
    *'"method":"tools/list"'*)
      printf '{"jsonrpc":"2.0","id":%s,"result":{"tools":[{"name":"big","description":"A big answer","inputSchema":{"type":"object","properties":{"bytes":{"type":"integer"}},"required":["bytes"]},"annotations":{"readOnlyHint":true}}]}}\n' "$id" ;;
    *'"method":"tools/call"'*)
      n=$(printf '%s' "$line" | sed -n 's/.*"bytes":\([0-9]*\).*/\1/p')
      printf '{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"' "$id"
      head -c "$n" /dev/zero | tr '\000' x
      printf '"}]}}\n' ;;
  esac
done
"#;

async fn host(options: ToolHostOptions) -> ToolHost {
    let host = ToolHost::with_options(options);
    let cfg = StdioServerConfig::new("sh").args(["-c", SERVER]);
    host.add_mcp_server("big", McpServerConfig::Stdio(cfg))
        .await
        .expect("the sh server starts");
    host
}

fn text(out: &lrg_chat::tools::ToolOutput) -> String {
    out.parts
        .iter()
        .filter_map(|p| match p {
            Part::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

/// Call `big` for `bytes`; the output and how long it took.
async fn big(host: &ToolHost, bytes: u64) -> (lrg_chat::tools::ToolOutput, Duration) {
    let started = Instant::now();
    let call = host.call("big", json!({ "bytes": bytes }), CancellationToken::new());
    let out = tokio::time::timeout(Duration::from_secs(90), call)
        .await
        .expect("the call ended");
    (out, started.elapsed())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_20_mb_result_is_an_error_naming_its_size_not_a_timeout() {
    let options = ToolHostOptions {
        call_timeout: Duration::from_secs(60),
        ..Default::default()
    };
    let host = host(options).await;
    let (out, took) = big(&host, 20_000_000).await;
    let said = text(&out);
    assert!(out.is_error, "{said}");
    assert!(said.contains("19.1 MiB"), "{said}");
    assert!(said.contains("over the 8 MiB cap"), "{said}");
    assert!(!said.contains("did not answer"), "{said}");
    // Answered as soon as it was read, far from the 60 s call timeout.
    eprintln!("a 20 MB result was refused in {took:?}: {said}");
    assert!(took < Duration::from_secs(30), "took {took:?}");
    // The connection is still good: the next call is answered.
    let (out, _) = big(&host, 10).await;
    assert!(!out.is_error, "{}", text(&out));
    assert_eq!(text(&out), "x".repeat(10));
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_cap_is_configurable_and_checked_on_the_decoded_result() {
    let options = ToolHostOptions {
        max_result_bytes: 1024 * 1024,
        ..Default::default()
    };
    let host = host(options).await;
    // Within twice the cap: read, then refused for its decoded size.
    let (out, _) = big(&host, 1_572_864).await;
    let said = text(&out);
    assert!(out.is_error, "{said}");
    assert!(said.contains("1.5 MiB, over the 1 MiB cap"), "{said}");
    // Far over it: dropped while read.
    let (out, _) = big(&host, 5_000_000).await;
    let said = text(&out);
    assert!(out.is_error, "{said}");
    assert!(said.contains("4.8 MiB, over the 1 MiB cap"), "{said}");
    // Under it: the whole result.
    let (out, _) = big(&host, 512 * 1024).await;
    assert!(!out.is_error);
    assert_eq!(text(&out).len(), 512 * 1024);
    host.shutdown().await;
}

// ------------------------------------------------------------ model answers

fn session_with(
    model: impl lrg_providers::ChatModel + 'static,
    config: SessionConfig,
) -> ChatSession {
    ChatSession::builder(Arc::new(FixedModel::new(model)))
        .config(config)
        .build()
}

fn errors(session: &ChatSession) -> Vec<serde_json::Value> {
    session
        .events()
        .entries()
        .iter()
        .map(|e| serde_json::to_value(e.as_ref()).unwrap())
        .filter(|e| e["type"] == "error")
        .collect()
}

#[tokio::test]
async fn an_answer_over_the_cap_ends_the_turn_and_is_not_kept() {
    // 2 MiB of text in 1 KiB words, against a 1 MiB cap.
    let word = format!("{} ", "a".repeat(1023));
    let turns = vec![
        ScriptedTurn {
            text: Some(word.repeat(2048)),
            ..Default::default()
        },
        ScriptedTurn {
            text: Some("Short.".into()),
            ..Default::default()
        },
    ];
    let config = SessionConfig {
        max_answer_bytes: 1024 * 1024,
        ..SessionConfig::default()
    };
    let session = session_with(ScriptedModel::new(turns), config);
    let outcome = tokio::time::timeout(Duration::from_secs(60), session.send("go").unwrap())
        .await
        .unwrap();
    let TurnOutcome::Failed { error } = outcome else {
        panic!("{outcome:?}");
    };
    let said = error.to_string();
    eprintln!("{said}");
    assert!(said.contains("past the 1 MiB cap"), "{said}");
    let errors = errors(&session);
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(errors[0]["message"].as_str().unwrap().contains("1 MiB cap"));
    // Only the user's message is kept: the cut answer is gone.
    let history = session.history();
    assert_eq!(history.len(), 1, "{history:?}");
    // The chat goes on.
    let outcome = tokio::time::timeout(Duration::from_secs(60), session.send("again").unwrap())
        .await
        .unwrap();
    assert!(
        matches!(outcome, TurnOutcome::Completed { .. }),
        "{outcome:?}"
    );
}

#[test]
fn answers_are_capped_at_4_mib_by_default() {
    assert_eq!(SessionConfig::default().max_answer_bytes, 4 * 1024 * 1024);
    assert_eq!(
        RetryPolicy::default().deadline,
        Some(Duration::from_secs(180))
    );
}

// ------------------------------------------------------------ a model that hangs

#[tokio::test]
async fn a_hanging_model_fails_at_the_first_byte_timeout_within_the_retry_deadline() {
    let server = wiremock::MockServer::start().await;
    wiremock::Mock::given(wiremock::matchers::method("POST"))
        .respond_with(
            wiremock::ResponseTemplate::new(200)
                .set_body_raw("data: [DONE]\n\n", "text/event-stream")
                .set_delay(Duration::from_secs(30)),
        )
        .mount(&server)
        .await;
    let transport = TransportConfig::new(Duration::from_secs(2), Duration::from_secs(30))
        .with_first_byte_timeout(Duration::from_millis(300));
    let config = OpenAiConfig::new(Dialect::VLLM, format!("{}/v1", server.uri()), "m")
        .with_transport(transport);
    // Many retries allowed; the deadline is what stops them.
    let retry = RetryPolicy {
        max_retries: 100,
        base_delay: Duration::from_millis(100),
        max_delay: Duration::from_millis(100),
        deadline: Some(Duration::from_millis(1500)),
    };
    let session = session_with(
        OpenAiChat::new(config).unwrap(),
        SessionConfig {
            retry,
            ..SessionConfig::default()
        },
    );
    let started = Instant::now();
    let outcome = tokio::time::timeout(Duration::from_secs(60), session.send("hi").unwrap())
        .await
        .unwrap();
    let took = started.elapsed();
    eprintln!("a hanging model failed after {took:?}");
    let TurnOutcome::Failed { error } = outcome else {
        panic!("{outcome:?}");
    };
    let said = error.to_string();
    eprintln!("{said}");
    assert!(said.contains("first-byte timeout"), "{said}");
    assert!(said.contains("retry deadline of 1.5 s"), "{said}");
    // 1.5 s of tries and one more timeout at most, far from 100 tries.
    assert!(took < Duration::from_secs(10), "took {took:?}");
    let tries = server.received_requests().await.unwrap().len();
    assert!((2..=6).contains(&tries), "{tries} tries");
}
