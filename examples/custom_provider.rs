//! A `ChatModel` written from scratch for a made-up HTTP API, then used in
//! a session with a tool.
//!
//! The "Parrot API" (served by a tiny fake server in this process) takes
//! `POST /v1/generate` with the conversation as JSON and streams its answer
//! as NDJSON, one line per piece:
//!
//! ```text
//! {"kind":"text","text":"It is "}
//! {"kind":"call","id":"t1","tool":"clock","args":{}}
//! {"kind":"done","tokens_in":12,"tokens_out":5}
//! ```
//!
//! The adapter has the three parts every lrg adapter has:
//!
//! - the request: lrg's [`TurnRequest`] (system prompt, messages with their
//!   tool calls and results, tool specs) mapped to the API's JSON;
//! - the errors, classified: a 429 or 5xx (or a stream cut before `done`) is
//!   [`ProviderError::Transient`], with the server's `retry-after`, and the
//!   session retries it with backoff; a 401 is [`ProviderError::Auth`], a
//!   400 [`ProviderError::BadRequest`], and those end the turn at once;
//! - the answer: lines split by lrg's [`NdjsonFramer`] whatever the chunk
//!   boundaries, decoded by a [`Decoder`] into [`TurnEvent`]s.
//!
//! The fake server answers the first request with a 503 (so the session's
//! retry shows), then a tool call, then the answer.
//!
//! Run it with `cargo run -p lrg-examples --example custom_provider`.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use futures::StreamExt as _;
use lrg_chat::events::Event;
use lrg_chat::tools::{NoArgs, ToolHost};
use lrg_chat::{ChatSession, FixedModel, TurnOutcome};
use lrg_providers::wire::{Decoder, Frame, NdjsonFramer};
use lrg_providers::{
    ChatModel, Message, ModelInfo, ModelLocation, Part, ProviderError, RetryPolicy, Role,
    StopReason, ToolAnnotations, ToolCall, TurnEvent, TurnRequest, TurnStream, Usage,
};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

// ---- the adapter ----

/// A model behind the Parrot API.
struct ParrotModel {
    client: reqwest::Client,
    base_url: String,
    key: String,
}

/// One line of the API's answer.
#[derive(Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum Line {
    Text {
        text: String,
    },
    Call {
        id: String,
        tool: String,
        args: Value,
    },
    Done {
        tokens_in: u32,
        tokens_out: u32,
    },
    Error {
        message: String,
        retry: bool,
    },
}

/// Decodes the answer one NDJSON line at a time; remembers whether it
/// called a tool (for the stop reason) and whether `done` came.
#[derive(Default)]
struct ParrotDecoder {
    called: bool,
    done: bool,
}

impl Decoder for ParrotDecoder {
    fn decode(&mut self, frame: &Frame, out: &mut Vec<TurnEvent>) -> Result<(), ProviderError> {
        if frame.data.trim().is_empty() {
            return Ok(());
        }
        let line: Line =
            serde_json::from_str(&frame.data).map_err(|e| ProviderError::Protocol {
                message: format!("a line of the Parrot answer is not one this adapter knows: {e}"),
            })?;
        match line {
            Line::Text { text } => out.push(TurnEvent::TextDelta { text }),
            Line::Call { id, tool, args } => {
                self.called = true;
                out.push(TurnEvent::ToolCall(ToolCall {
                    id,
                    name: tool,
                    arguments: args,
                }));
            }
            Line::Done {
                tokens_in,
                tokens_out,
            } => {
                self.done = true;
                out.push(TurnEvent::Usage(Usage::new(tokens_in, tokens_out)));
            }
            // An error inside a 200 stream: the server says whether to retry.
            Line::Error { message, retry } => {
                return Err(if retry {
                    ProviderError::transient(message)
                } else {
                    ProviderError::Other { message }
                });
            }
        }
        Ok(())
    }

    fn finish(&mut self, out: &mut Vec<TurnEvent>) -> Result<(), ProviderError> {
        if !self.done {
            return Err(ProviderError::transient(
                "the Parrot answer was cut before its `done` line",
            ));
        }
        let stop = if self.called {
            StopReason::ToolCalls
        } else {
            StopReason::EndTurn
        };
        out.push(TurnEvent::End { stop });
        Ok(())
    }
}

/// A non-2xx answer as a [`ProviderError`]: what is worth retrying, and
/// what is not. The body is the server's text; never put the key in it.
fn classify(status: StatusCode, headers: &HeaderMap, body: String) -> ProviderError {
    let message = format!("Parrot API {status}: {body}");
    match status.as_u16() {
        429 | 500..=599 => ProviderError::Transient {
            message,
            retry_after: headers
                .get("retry-after")
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.parse::<u64>().ok())
                .map(Duration::from_secs),
        },
        401 | 403 => ProviderError::Auth { message },
        404 => ProviderError::ModelNotFound { message },
        _ => ProviderError::BadRequest { message },
    }
}

/// The conversation as the API wants it.
fn body_of(request: &TurnRequest) -> Value {
    let messages: Vec<Value> = request
        .messages
        .iter()
        .flat_map(|m: &Message| {
            let role = match m.role {
                Role::User => "user",
                Role::Assistant => "assistant",
                Role::Tool => "tool",
            };
            m.parts.iter().filter_map(move |part| match part {
                Part::Text { text } => Some(json!({"role": role, "text": text})),
                Part::ToolCall(c) => {
                    Some(json!({"role": role, "call": {"id": c.id, "tool": c.name, "args": c.arguments}}))
                }
                Part::ToolResult(r) => {
                    Some(json!({"role": role, "result": {"id": r.call_id, "text": r.text_content()}}))
                }
                // Images, reasoning and other providers' native parts: this
                // API takes none of them.
                _ => None,
            })
        })
        .collect();
    let tools: Vec<Value> = request
        .tools
        .iter()
        .map(|t| json!({"name": t.name, "description": t.description, "schema": t.input_schema}))
        .collect();
    json!({"system": request.system, "messages": messages, "tools": tools})
}

impl ChatModel for ParrotModel {
    fn info(&self) -> ModelInfo {
        ModelInfo::new("parrot", "parrot-1", ModelLocation::Server).context_window(Some(8_192))
    }

    fn turn(&self, request: TurnRequest, cancel: CancellationToken) -> TurnStream {
        let http = self
            .client
            .post(format!("{}/v1/generate", self.base_url))
            .bearer_auth(&self.key)
            .json(&body_of(&request));
        Box::pin(async_stream::stream! {
            let response = tokio::select! {
                () = cancel.cancelled() => {
                    yield Ok(TurnEvent::End { stop: StopReason::Cancelled });
                    return;
                }
                r = http.send() => r,
            };
            let response = match response {
                Ok(r) => r,
                // Could not connect, or the connection broke: worth a retry.
                Err(e) => {
                    yield Err(ProviderError::transient(format!("cannot reach the Parrot API: {e}")));
                    return;
                }
            };
            let status = response.status();
            if !status.is_success() {
                let headers = response.headers().clone();
                let body = response.text().await.unwrap_or_default();
                yield Err(classify(status, &headers, body));
                return;
            }
            let mut decoder = ParrotDecoder::default();
            let mut framer = NdjsonFramer::default();
            let mut body = response.bytes_stream();
            let (mut frames, mut events) = (Vec::new(), Vec::new());
            loop {
                let chunk = tokio::select! {
                    () = cancel.cancelled() => {
                        yield Ok(TurnEvent::End { stop: StopReason::Cancelled });
                        return;
                    }
                    c = body.next() => c,
                };
                let ended = match chunk {
                    Some(Ok(bytes)) => {
                        framer.push(&bytes, &mut frames);
                        false
                    }
                    Some(Err(e)) => {
                        yield Err(ProviderError::transient(format!("the Parrot stream broke: {e}")));
                        return;
                    }
                    None => {
                        framer.finish(&mut frames);
                        true
                    }
                };
                let mut failed = frames
                    .drain(..)
                    .find_map(|frame| decoder.decode(&frame, &mut events).err());
                if ended && failed.is_none() {
                    failed = decoder.finish(&mut events).err();
                }
                // What was decoded before a failure is still told.
                for event in events.drain(..) {
                    yield Ok(event);
                }
                if let Some(e) = failed {
                    yield Err(e);
                    return;
                }
                if ended {
                    return;
                }
            }
        })
    }
}

// ---- the fake server ----

/// Answers the first request with a 503, then a call to `clock` while the
/// conversation has no tool result, then the time, read from that result.
async fn generate(
    State(requests): State<Arc<AtomicUsize>>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    if headers.get("authorization").and_then(|v| v.to_str().ok()) != Some("Bearer parrot-key") {
        return (StatusCode::UNAUTHORIZED, "unknown key").into_response();
    }
    let n = requests.fetch_add(1, Ordering::SeqCst) + 1;
    if n == 1 {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            [("retry-after", "0")],
            "warming up",
        )
            .into_response();
    }
    let result = body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .find_map(|m| m["result"]["text"].as_str());
    let lines = match result {
        None => vec![
            json!({"kind": "text", "text": "Let me look at the clock."}),
            json!({"kind": "call", "id": "t1", "tool": "clock", "args": {}}),
            json!({"kind": "done", "tokens_in": 40, "tokens_out": 9}),
        ],
        Some(time) => vec![
            json!({"kind": "text", "text": "It is "}),
            json!({"kind": "text", "text": format!("{time}.")}),
            json!({"kind": "done", "tokens_in": 60, "tokens_out": 4}),
        ],
    };
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    // Sent in chunks of 7 bytes, cutting lines anywhere: the framer
    // reassembles them.
    let chunks: Vec<Result<bytes::Bytes, std::io::Error>> = text
        .into_bytes()
        .chunks(7)
        .map(|c| Ok(bytes::Bytes::copy_from_slice(c)))
        .collect();
    (
        [("content-type", "application/x-ndjson")],
        axum::body::Body::from_stream(futures::stream::iter(chunks)),
    )
        .into_response()
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base_url = format!("http://{}", listener.local_addr()?);
    let app = axum::Router::new()
        .route("/v1/generate", axum::routing::post(generate))
        .with_state(Arc::new(AtomicUsize::new(0)));
    let server = tokio::spawn(async move { axum::serve(listener, app).await });
    println!("the Parrot API (fake) on {base_url}");

    lrg_providers::transport::ensure_tls_provider();
    let client = reqwest::Client::new();

    // A wrong key: fatal, not retried.
    let wrong = ParrotModel {
        client: client.clone(),
        base_url: base_url.clone(),
        key: "wrong".to_owned(),
    };
    let mut stream = wrong.turn(
        TurnRequest::new(vec![Message::user("hi")]),
        CancellationToken::new(),
    );
    if let Some(Err(e)) = stream.next().await {
        println!("with a wrong key: {e} (transient: {})", e.is_transient());
    }

    let model = ParrotModel {
        client,
        base_url,
        key: "parrot-key".to_owned(),
    };
    let tools = ToolHost::new();
    let read_only = ToolAnnotations {
        read_only_hint: Some(true),
        ..Default::default()
    };
    tools.add_fn("clock", "The time now", read_only, |_: NoArgs| async {
        Ok::<_, String>("12:00")
    })?;
    let session = ChatSession::builder(Arc::new(FixedModel::new(model)))
        .tools(Arc::new(tools))
        // Quick retries for the example; the default waits 0.5 s, doubling.
        .retry(RetryPolicy {
            base_delay: Duration::from_millis(20),
            ..RetryPolicy::default()
        })
        .build();

    let mut events = session.subscribe(0);
    let watcher = tokio::spawn(async move {
        while let Some(entry) = events.next().await {
            match &entry.event {
                Event::Warning { message, retrying } => {
                    println!("warning (retrying: {retrying}): {message}");
                }
                Event::ToolCall { tool, .. } => println!("model calls {tool}"),
                Event::ToolDone { text, .. } => println!("  result: {text}"),
                Event::AssistantTurn { text, .. } => println!("model: {text}"),
                Event::Usage { usage, .. } => println!(
                    "usage: {} in, {} out",
                    usage.prompt_tokens, usage.completion_tokens
                ),
                Event::Busy { busy: false, .. } => break,
                _ => {}
            }
        }
    });
    let outcome = session.send("What time is it?")?.await;
    watcher.await?;
    server.abort();
    match outcome {
        TurnOutcome::Completed { text, .. } if text.contains("12:00") => Ok(()),
        other => Err(format!("unexpected outcome: {other:?}").into()),
    }
}
