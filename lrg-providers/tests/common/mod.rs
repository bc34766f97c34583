//! Helpers shared by the provider adapter tests (each test binary uses a
//! different subset, hence the `dead_code` allowance).
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)] // test helpers may panic

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use wiremock::MockServer;

mod invariants;
#[allow(unused_imports)] // each test binary uses a different subset
pub use invariants::{Api, Broken, Invariants, mount_checked};

/// The JSON bodies of every request `server` received, in order.
pub async fn bodies(server: &MockServer) -> Vec<Value> {
    server
        .received_requests()
        .await
        .unwrap()
        .iter()
        .map(|r| r.body_json::<Value>().unwrap())
        .collect()
}

/// A server that answers every connection with `200`, `content_type` and
/// `first`, then goes quiet without closing: what a stalled model looks like
/// mid-answer. Returns `http://host:port`.
pub async fn stalling_server(content_type: &'static str, first: String) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let first = first.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 65_536];
                let _ = socket.read(&mut buf).await;
                let head = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: {content_type}\r\nconnection: close\r\n\r\n"
                );
                let _ = socket.write_all(head.as_bytes()).await;
                let _ = socket.write_all(first.as_bytes()).await;
                let _ = socket.flush().await;
                tokio::time::sleep(Duration::from_secs(60)).await;
            });
        }
    });
    format!("http://{addr}")
}

/// An in-memory `tracing` writer, to check what the adapters log.
#[derive(Clone, Default)]
pub struct LogBuffer(Arc<Mutex<Vec<u8>>>);

impl LogBuffer {
    /// Everything written so far.
    pub fn text(&self) -> String {
        String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
    }

    /// The process's one capture, installed as the global subscriber on
    /// first use. A global subscriber can be set once per process, and the
    /// tests are one process, so they share it: each looks for its own lines
    /// (or checks that no secret appears in anyone's). Global rather than
    /// scoped: a scoped subscriber races with other tests over tracing's
    /// per-callsite interest cache.
    pub fn global() -> LogBuffer {
        static GLOBAL: std::sync::OnceLock<LogBuffer> = std::sync::OnceLock::new();
        GLOBAL
            .get_or_init(|| {
                let logs = LogBuffer::default();
                tracing::subscriber::set_global_default(logs.subscriber()).unwrap();
                logs
            })
            .clone()
    }

    /// A TRACE-level, colourless subscriber writing here.
    pub fn subscriber(&self) -> impl tracing::Subscriber + Send + Sync + 'static {
        let writer = self.clone();
        tracing_subscriber::fmt()
            .with_max_level(tracing::Level::TRACE)
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .finish()
    }
}

impl std::io::Write for LogBuffer {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Start a turn on `model` (whose server streams `first_text`, then stalls),
/// cancel it after that first delta, and check the stream ends at once with
/// just `End { Cancelled }`.
pub async fn assert_cancel_ends_at_once(
    model: &impl lrg_providers::ChatModel,
    request: lrg_providers::TurnRequest,
    first_text: &str,
) {
    use futures::StreamExt as _;
    use lrg_providers::{StopReason, TurnEvent};

    let cancel = tokio_util::sync::CancellationToken::new();
    let mut stream = model.turn(request, cancel.clone());
    let first = tokio::time::timeout(Duration::from_secs(10), stream.next())
        .await
        .expect("the first delta did not come in time");
    assert_eq!(
        first,
        Some(Ok(TurnEvent::TextDelta {
            text: first_text.into()
        }))
    );
    let started = std::time::Instant::now();
    cancel.cancel();
    let rest: Vec<_> = tokio::time::timeout(Duration::from_secs(5), stream.collect::<Vec<_>>())
        .await
        .expect("cancel must end the stream");
    assert_eq!(
        rest,
        vec![Ok(TurnEvent::End {
            stop: StopReason::Cancelled
        })]
    );
    assert!(started.elapsed() < Duration::from_secs(1));
}

/// Frame (as SSE) and decode `body` split into chunks of the given sizes:
/// the events, then the error that stopped decoding, if any.
fn decode_chunked(
    body: &[u8],
    sizes: &mut impl Iterator<Item = usize>,
    mut decoder: impl lrg_providers::wire::Decoder,
) -> Vec<Result<lrg_providers::TurnEvent, String>> {
    use lrg_providers::wire::{Framer, Framing};
    let mut framer = Framer::new(Framing::Sse);
    let (mut frames, mut out) = (Vec::new(), Vec::new());
    let mut rest = body;
    while !rest.is_empty() {
        let (chunk, tail) = rest.split_at(sizes.next().unwrap_or(1).clamp(1, rest.len()));
        framer.push(chunk, &mut frames);
        rest = tail;
    }
    framer.finish(&mut frames);
    let mut events = Vec::new();
    for frame in frames.drain(..) {
        if let Err(e) = decoder.decode(&frame, &mut out) {
            events.extend(out.drain(..).map(Ok));
            events.push(Err(e.to_string()));
            return events;
        }
    }
    let end = decoder.finish(&mut out);
    events.extend(out.drain(..).map(Ok));
    if let Err(e) = end {
        events.push(Err(e.to_string()));
    }
    events
}

/// Decoding the SSE `body` whole must give a clean turn, and every split of it
/// into chunks (sizes 1..=40 from many seeds) must give the same events.
pub fn assert_any_chunking_decodes_the_same<D: lrg_providers::wire::Decoder>(
    body: &str,
    new_decoder: impl Fn() -> D,
) {
    use lrg_providers::TurnEvent;
    let whole = decode_chunked(
        body.as_bytes(),
        &mut std::iter::repeat(body.len()),
        new_decoder(),
    );
    assert!(whole.iter().all(Result::is_ok), "{whole:?}");
    assert!(matches!(whole.last(), Some(Ok(TurnEvent::End { .. }))));
    // A small deterministic generator: chunk sizes 1..=40, many seeds.
    for seed in 1..200u64 {
        let mut state = seed;
        let mut sizes = std::iter::from_fn(|| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            Some((state >> 33) as usize % 40 + 1)
        });
        assert_eq!(
            decode_chunked(body.as_bytes(), &mut sizes, new_decoder()),
            whole,
            "seed {seed}"
        );
    }
}

/// How long a turn against a fake server may take before the test fails
/// rather than hangs.
const TURN_WAIT: Duration = Duration::from_secs(10);

/// One whole turn on `model`, collected.
pub async fn turn(
    model: &impl lrg_providers::ChatModel,
    request: lrg_providers::TurnRequest,
) -> Result<lrg_providers::AssistantTurn, lrg_providers::ProviderError> {
    let stream = model.turn(request, tokio_util::sync::CancellationToken::new());
    tokio::time::timeout(TURN_WAIT, lrg_providers::collect_turn(stream))
        .await
        .expect("the turn did not end in time")
}

/// Every event of one turn on `model`, errors included.
pub async fn events(
    model: &impl lrg_providers::ChatModel,
    request: lrg_providers::TurnRequest,
) -> Vec<Result<lrg_providers::TurnEvent, lrg_providers::ProviderError>> {
    use futures::StreamExt as _;
    let stream = model.turn(request, tokio_util::sync::CancellationToken::new());
    tokio::time::timeout(TURN_WAIT, stream.collect::<Vec<_>>())
        .await
        .expect("the turn did not end in time")
}

/// A one-message request with a short system prompt.
pub fn ask(text: &str) -> lrg_providers::TurnRequest {
    lrg_providers::TurnRequest::new(vec![lrg_providers::Message::user(text)])
        .system("You are terse.")
}

/// One turn on `model` driven the way a session drives it: a transient error
/// is retried (up to three times, at once), anything else ends it. Returns
/// the last error, or `None` when a turn succeeded.
pub async fn turn_with_retries(
    model: &impl lrg_providers::ChatModel,
    request: lrg_providers::TurnRequest,
) -> Option<lrg_providers::ProviderError> {
    let policy = lrg_providers::RetryPolicy {
        max_retries: 3,
        base_delay: Duration::from_millis(1),
        max_delay: Duration::from_millis(5),
        deadline: None,
    };
    let mut attempt = 0;
    loop {
        match turn(model, request.clone()).await {
            Ok(_) => return None,
            Err(e) if e.is_transient() && policy.allows(attempt + 1) => {
                attempt += 1;
                tokio::time::sleep(policy.delay(attempt, None)).await;
            }
            Err(e) => return Some(e),
        }
    }
}

/// Mount `response` on `POST path`, expecting exactly one request, run a turn
/// with retries, and check it failed as a context overflow without a retry.
pub async fn assert_overflow_not_retried(
    model: &impl lrg_providers::ChatModel,
    server: &MockServer,
    path: &str,
    response: wiremock::ResponseTemplate,
) {
    use wiremock::matchers;
    wiremock::Mock::given(matchers::method("POST"))
        .and(matchers::path(path))
        .respond_with(response)
        .expect(1)
        .mount(server)
        .await;
    let error = turn_with_retries(model, ask("hi")).await;
    assert!(
        matches!(
            error,
            Some(lrg_providers::ProviderError::ContextOverflow { .. })
        ),
        "{error:?}"
    );
    server.verify().await;
}

/// The tool-call deltas with `index` in `events`: the id and name its first
/// delta carried, and its fragments joined. Checks the contract on the way:
/// only the first delta names the call, and none comes after the call itself.
pub fn call_deltas(
    events: &[lrg_providers::TurnEvent],
    index: u32,
) -> (Option<(String, String)>, String) {
    use lrg_providers::TurnEvent;
    let mut first: Option<(String, String)> = None;
    let mut joined = String::new();
    let mut seen = 0;
    let mut called = false;
    for event in events {
        match event {
            TurnEvent::ToolCallDelta {
                index: i,
                id,
                name,
                arguments_fragment,
            } if *i == index => {
                assert!(
                    !called,
                    "a delta of call {index} after the call: {events:?}"
                );
                if seen == 0 {
                    first = id.clone().zip(name.clone());
                } else {
                    assert_eq!((id, name), (&None, &None), "only the first delta names it");
                }
                seen += 1;
                joined.push_str(arguments_fragment);
            }
            TurnEvent::ToolCall(call) if first.as_ref().is_some_and(|(id, _)| *id == call.id) => {
                called = true;
            }
            _ => {}
        }
    }
    assert!(seen > 0, "no delta for call {index}: {events:?}");
    (first, joined)
}

/// The events of a turn, failing the test on an error.
pub fn ok_events(
    events: Vec<Result<lrg_providers::TurnEvent, lrg_providers::ProviderError>>,
) -> Vec<lrg_providers::TurnEvent> {
    events.into_iter().map(|e| e.unwrap()).collect()
}

/// Fold `events` into the turn they make.
pub fn fold(events: &[lrg_providers::TurnEvent]) -> lrg_providers::AssistantTurn {
    let mut turn = lrg_providers::AssistantTurn::default();
    for event in events {
        turn.push(event.clone());
    }
    turn
}

/// The typed-answer schema the adapters' request-body tests send: a label
/// from a list, a bounded priority, and an optional note (which strict
/// shaping makes required and nullable).
pub fn triage_schema() -> lrg_providers::typed::OutputSchema {
    lrg_providers::typed::OutputSchema::new(serde_json::json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "triage",
        "type": "object",
        "properties": {
            "label": {"enum": ["bug", "feature"]},
            "priority": {"type": "integer", "minimum": 1, "maximum": 5},
            "note": {"type": "string", "maxLength": 200}
        },
        "required": ["label", "priority"]
    }))
    .unwrap()
}
