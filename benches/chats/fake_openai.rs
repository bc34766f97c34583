//! The fake model server: OpenAI Chat Completions, streamed, in its own
//! process (`chats --fake-openai`), so the bench process's CPU time is lrg's
//! alone.
//!
//! It is stateless: the answer depends on how many tool results the request
//! holds. None: a `lookup` call; one: another `lookup` call (other
//! arguments, so it is no identical repeat); two: the text reply. Each answer
//! is [`DELTAS`] deltas (argument fragments or text), 8 events per write.
//!
//! It times itself: per request, from the handler's start (the body read)
//! until hyper has taken the body's last chunk and dropped it. That is the
//! server's own time, including waits for a CPU it shares with lrg; it also
//! includes a wait for a full socket buffer, which never comes for these
//! 60 KB answers on loopback unless the client stops reading. `GET /stats`
//! hands the times over (and forgets them), keyed by the chat number the
//! user message names (`chat 17: …`).

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use futures::StreamExt as _;
use lrg_benches::{openai_chunk, openai_usage_chunk};
use serde_json::{Value, json};

use crate::child::Child;

/// The argument that makes the bench binary this server.
pub const ARG: &str = "--fake-openai";
/// Deltas per model turn.
pub const DELTAS: usize = 200;
/// The tool the model calls.
pub const TOOL: &str = "lookup";
/// Events per network write: a server flushing every few tokens.
const EVENTS_PER_WRITE: usize = 8;

const WORDS: &[&str] = &[
    "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet",
    "kilo", "lima", "mike",
];

fn word(i: usize) -> &'static str {
    WORDS[i % WORDS.len()]
}

/// The user message of chat `i`; the server reads the number back.
pub fn message(i: usize) -> String {
    format!("chat {i}: look it up twice, then answer")
}

fn chat_number(text: &str) -> Option<u64> {
    text.strip_prefix("chat ")?.split(':').next()?.parse().ok()
}

/// The model's final answer, the same for every chat.
pub fn reply_text() -> String {
    (0..DELTAS).map(|i| format!(" {}", word(i))).collect()
}

/// The arguments of call `step` (1 or 2), as the model writes them: a first
/// fragment, `DELTAS - 2` words, a last fragment.
fn argument_fragments(step: usize) -> Vec<String> {
    let mut out = Vec::with_capacity(DELTAS);
    out.push(format!("{{\"query\": \"step {step}:"));
    out.extend((1..DELTAS - 1).map(|i| format!(" {}", word(i))));
    out.push("\"}".to_string());
    out
}

/// The three answers, indexed by how many tool results the request holds.
pub fn answers() -> [Vec<Bytes>; 3] {
    let call = |step: usize| {
        let mut events = vec![openai_chunk(
            &json!({"role": "assistant", "content": null, "refusal": null}),
            None,
        )];
        for (i, fragment) in argument_fragments(step).into_iter().enumerate() {
            let call = if i == 0 {
                json!({"index": 0, "id": format!("call_{step}"), "type": "function",
                       "function": {"name": TOOL, "arguments": fragment}})
            } else {
                json!({"index": 0, "function": {"arguments": fragment}})
            };
            events.push(openai_chunk(&json!({"tool_calls": [call]}), None));
        }
        events.push(openai_chunk(&json!({}), Some("tool_calls")));
        finish(events)
    };
    let mut text = vec![openai_chunk(
        &json!({"role": "assistant", "content": "", "refusal": null}),
        None,
    )];
    text.extend(
        (0..DELTAS).map(|i| openai_chunk(&json!({"content": format!(" {}", word(i))}), None)),
    );
    text.push(openai_chunk(&json!({}), Some("stop")));
    [call(1), call(2), finish(text)]
}

/// Usage and `[DONE]` after `events`, grouped into writes.
fn finish(mut events: Vec<String>) -> Vec<Bytes> {
    events.push(openai_usage_chunk(400, DELTAS));
    events.push("data: [DONE]\n\n".to_string());
    events
        .chunks(EVENTS_PER_WRITE)
        .map(|c| Bytes::from(c.concat()))
        .collect()
}

#[derive(Default)]
struct Stats {
    /// Server time per chat number, summed over its requests, in ns.
    per_chat: HashMap<u64, u64>,
}

struct Server {
    answers: [Vec<Bytes>; 3],
    stats: Mutex<Stats>,
}

/// Records the request's time when hyper drops the body: after its last chunk.
struct Timer {
    server: Arc<Server>,
    chat: u64,
    start: Instant,
}

impl Drop for Timer {
    fn drop(&mut self) {
        let ns = self.start.elapsed().as_nanos() as u64;
        let mut stats = self.server.stats.lock().unwrap_or_else(|e| e.into_inner());
        *stats.per_chat.entry(self.chat).or_default() += ns;
    }
}

async fn completions(State(server): State<Arc<Server>>, body: Bytes) -> Response {
    let start = Instant::now();
    let request: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => return (StatusCode::BAD_REQUEST, format!("bad JSON: {e}")).into_response(),
    };
    let messages = request["messages"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    let results = messages.iter().filter(|m| m["role"] == "tool").count();
    let chat = messages
        .iter()
        .find(|m| m["role"] == "user")
        .and_then(|m| m["content"].as_str())
        .and_then(chat_number);
    let (Some(chat), Some(answer)) = (chat, server.answers.get(results)) else {
        let why =
            format!("want a `chat N:` user message and at most 2 tool results, got {results}");
        return (StatusCode::BAD_REQUEST, why).into_response();
    };
    let timer = Timer {
        server: server.clone(),
        chat,
        start,
    };
    let chunks = futures::stream::iter(answer.clone()).map(move |c| {
        let _timed = &timer;
        Ok::<_, Infallible>(c)
    });
    (
        [("content-type", "text/event-stream")],
        Body::from_stream(chunks),
    )
        .into_response()
}

async fn stats(State(server): State<Arc<Server>>) -> axum::Json<Value> {
    let taken = std::mem::take(&mut *server.stats.lock().unwrap_or_else(|e| e.into_inner()));
    let per_chat: Vec<(u64, u64)> = taken.per_chat.into_iter().collect();
    axum::Json(json!({"per_chat": per_chat}))
}

/// Run the server (in the child process); exits when stdin closes.
pub fn serve() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let server = Arc::new(Server {
            answers: answers(),
            stats: Mutex::default(),
        });
        let app = axum::Router::new()
            .route("/v1/chat/completions", axum::routing::post(completions))
            .route("/stats", axum::routing::get(stats))
            .with_state(server);
        crate::child::announce(listener.local_addr().expect("addr").port());
        crate::child::exit_with_parent();
        axum::serve(listener, app).await.expect("serve");
    });
}

/// The server's times, taken from it.
pub struct ServerTimes {
    /// Per chat number, summed over its requests.
    pub per_chat: HashMap<u64, Duration>,
}

/// The fake server's process, killed when dropped.
pub struct FakeOpenAi {
    child: Child,
    /// Its OpenAI base URL (`http://127.0.0.1:PORT/v1`).
    pub base: String,
}

impl FakeOpenAi {
    /// Start it.
    pub fn spawn() -> Self {
        let child = Child::spawn(&[ARG]);
        let base = format!("http://127.0.0.1:{}/v1", child.port);
        Self { child, base }
    }

    /// The times it recorded since the last call.
    pub async fn take_times(&self) -> ServerTimes {
        let url = format!("http://127.0.0.1:{}/stats", self.child.port);
        let v: Value = reqwest::get(&url)
            .await
            .expect("GET /stats")
            .json()
            .await
            .expect("stats JSON");
        let ns = |v: &Value| Duration::from_nanos(v.as_u64().unwrap_or(0));
        ServerTimes {
            per_chat: v["per_chat"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|pair| (pair[0].as_u64().unwrap_or(u64::MAX), ns(&pair[1])))
                .collect(),
        }
    }
}
