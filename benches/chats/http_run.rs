//! The HTTP run: lrg's router (`lrg_chat::http::ChatServer`, what
//! `lrg serve` mounts) in a child process (`chats --lrg-serve BASE N`);
//! this process opens the N chats over HTTP, holds one SSE subscriber per
//! chat and posts the messages.
//!
//! The child answers commands on stdin, one JSON line each: `usage` (its
//! CPU, peak RSS, live heap and live tokio tasks) and `check ID...` (each
//! chat's history and numbered events, checked in the child).

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use futures::future::BoxFuture;
use lrg_chat::events::{Event, LogEntry};
use lrg_chat::http::{
    ChatOpener, ChatServer, ChatSpec, HttpConfig, Limits, MenuEntry, OpenError, OpenedChat,
    StaticMenu,
};
use lrg_chat::{ChatSession, FixedModel, Permissions};
use lrg_providers::wire::{Frame, SseFramer};
use lrg_providers::{ChatModel, ModelLocation};
use serde_json::{Value, json};
use tokio::io::AsyncBufReadExt as _;

use crate::check::{Trouble, history_problem};
use crate::child::Child;
use crate::fake_openai::{FakeOpenAi, message};
use crate::figures::Figures;
use crate::library::{MESSAGE_TIMEOUT, model, permissions, tools};
use crate::usage;

/// The argument that makes the bench binary lrg's HTTP server.
pub const SERVE_ARG: &str = "--lrg-serve";
const AGENT: &str = "agent-token-for-the-chats-bench-0123456789";
/// Opens and subscriptions in flight at once (setup, not measured).
const SETUP_CONCURRENCY: usize = 32;

/// Every chat on the one shared model, with its own `lookup` tool.
struct BenchOpener {
    model: Arc<dyn ChatModel>,
}

impl ChatOpener for BenchOpener {
    fn open(&self, _spec: ChatSpec) -> BoxFuture<'_, Result<OpenedChat, OpenError>> {
        Box::pin(async move {
            let host = tools();
            let builder = ChatSession::builder(Arc::new(FixedModel(self.model.clone())))
                .tools(host.clone())
                .permissions(Arc::new(Permissions::new(permissions())))
                .system_prompt("You look things up.");
            Ok(OpenedChat::new(builder, self.model.info()).with_host(host))
        })
    }
}

/// Run lrg's server (in the child process): `args` = [model base URL, N].
pub fn serve(args: &[String]) {
    let [base, n] = args else {
        panic!("{SERVE_ARG} wants BASE N, got {args:?}");
    };
    let n: usize = n.parse().expect("N");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let mut limits = Limits::default();
        limits.chats = n + 16;
        let config = HttpConfig::new(AGENT).limits(limits);
        let menu = StaticMenu(vec![MenuEntry::available(
            "openai",
            "gpt-4.1",
            ModelLocation::Cloud,
        )]);
        let opener = BenchOpener { model: model(base) };
        let server = ChatServer::new(config, Arc::new(opener), Arc::new(menu));
        let app = server.router();
        let port = listener.local_addr().expect("addr").port();
        tokio::spawn(async move { axum::serve(listener, app).await });
        crate::child::announce(port);
        let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            let answer = match line.split_whitespace().collect::<Vec<_>>().as_slice() {
                ["usage"] => json!({
                    "usage": usage::now(),
                    "tasks": tokio::runtime::Handle::current().metrics().num_alive_tasks(),
                }),
                ["check", ids @ ..] => check(&server, ids),
                _ => json!({"error": format!("unknown command {line:?}")}),
            };
            println!("{answer}");
        }
    });
}

/// Each chat's history and numbered events, checked.
fn check(server: &ChatServer, ids: &[&str]) -> Value {
    let mut problems = Vec::new();
    let mut trouble = Trouble::default();
    for id in ids {
        let Some(session) = server.session(id) else {
            problems.push(format!("chat {id} is gone"));
            continue;
        };
        if let Some(problem) = history_problem(&session.history()) {
            problems.push(format!("chat {id}: {problem}"));
        }
        trouble.add(Trouble::of(&session.events().entries()));
    }
    json!({"problems": problems, "errors": trouble.errors, "warnings": trouble.warnings})
}

/// A chat opened over HTTP.
struct Chat {
    id: String,
    token: String,
}

/// A chat's SSE body.
type EventStream = futures::stream::BoxStream<'static, reqwest::Result<bytes::Bytes>>;

/// What one chat's message came to.
struct Outcome {
    chat: usize,
    took: Duration,
    problem: Option<String>,
    resyncs: usize,
    /// Its event stream, kept open until the idle figures are taken.
    events: Option<EventStream>,
}

/// Run the HTTP variant against a fresh fake server and lrg server.
pub fn run(n: usize) -> Figures {
    let fake = FakeOpenAi::spawn();
    let mut lrg = Child::spawn(&[SERVE_ARG, &fake.base, &n.to_string()]);
    let base = format!("http://127.0.0.1:{}", lrg.port);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let client = reqwest::Client::new();
    let at_start = lrg.ask("usage");
    let chats = rt.block_on(open_all(&client, &base, n));
    let before = lrg.ask("usage");
    let t0 = Instant::now();
    let outcomes = rt.block_on(async {
        let tasks: Vec<_> = chats
            .into_iter()
            .enumerate()
            .map(|(i, (chat, events))| {
                let (client, base) = (client.clone(), base.clone());
                tokio::spawn(async move { (one(&client, &base, i, &chat, events).await, chat) })
            })
            .collect();
        futures::future::join_all(tasks).await
    });
    let mut f = Figures {
        wall: t0.elapsed(),
        ..Figures::default()
    };
    let after = lrg.ask("usage");
    f.cpu_us = cpu(&after) - cpu(&before);
    f.max_rss_kib = after["usage"]["max_rss_kib"].as_u64().unwrap_or(0);

    let mut took = Vec::with_capacity(n);
    let mut chats = Vec::with_capacity(n);
    let mut streams = Vec::with_capacity(n);
    for outcome in outcomes {
        let (outcome, chat) = outcome.expect("chat task");
        f.resyncs += outcome.resyncs;
        match outcome.problem {
            Some(p) => f.failures.push(format!("chat {}: {p}", outcome.chat)),
            None => took.push((outcome.chat, outcome.took)),
        }
        streams.push(outcome.events);
        chats.push(chat);
    }
    let ids: Vec<&str> = chats.iter().map(|c| c.id.as_str()).collect();
    let checked = lrg.ask(&format!("check {}", ids.join(" ")));
    let list = |key: &str| checked[key].as_array().cloned().unwrap_or_default();
    f.errors = list("errors").len();
    f.warnings = list("warnings").len();
    for p in list("problems")
        .iter()
        .chain(&list("errors"))
        .chain(&list("warnings"))
    {
        f.failures.push(p.as_str().unwrap_or_default().to_string());
    }
    f.completed = took.len();
    f.times(&took, &rt.block_on(fake.take_times()));

    // Idle memory: the chats as they are now, their page still watching;
    // then unwatched (the subscriber's share); then deleted (the session's).
    let idle = lrg.ask("usage");
    f.tasks_alive = idle["tasks"].as_u64().unwrap_or(0) as usize;
    drop(streams);
    rt.block_on(async { tokio::time::sleep(Duration::from_millis(500)).await });
    let unwatched = lrg.ask("usage");
    rt.block_on(delete_all(&client, &base, &chats));
    let gone = lrg.ask("usage");
    f.tasks_after = gone["tasks"].as_u64().unwrap_or(0) as usize;
    f.per_session_bytes = (live(&unwatched) - live(&gone)) as f64 / n as f64;
    f.per_subscriber_bytes = Some((live(&idle) - live(&unwatched)) as f64 / n as f64);
    f.shared_bytes = live(&gone) - live(&at_start);
    f
}

fn cpu(usage: &Value) -> u64 {
    usage["usage"]["cpu_us"].as_u64().unwrap_or(0)
}

fn live(usage: &Value) -> i64 {
    usage["usage"]["live_bytes"].as_i64().unwrap_or(0)
}

/// Open `n` chats and one event stream on each.
async fn open_all(client: &reqwest::Client, base: &str, n: usize) -> Vec<(Chat, EventStream)> {
    futures::stream::iter(0..n)
        .map(|_| async {
            let opened: Value = client
                .post(format!("{base}/v1/chat/sessions"))
                .bearer_auth(AGENT)
                .json(&json!({"model": "openai:gpt-4.1"}))
                .send()
                .await
                .and_then(reqwest::Response::error_for_status)
                .expect("open a chat")
                .json()
                .await
                .expect("open's JSON");
            let chat = Chat {
                id: opened["session"].as_str().expect("session").to_string(),
                token: opened["chat_token"]
                    .as_str()
                    .expect("chat_token")
                    .to_string(),
            };
            let events = subscribe(client, base, &chat, 0).await.expect("subscribe");
            (chat, events)
        })
        .buffered(SETUP_CONCURRENCY)
        .collect()
        .await
}

async fn subscribe(
    client: &reqwest::Client,
    base: &str,
    chat: &Chat,
    after: u64,
) -> Result<EventStream, String> {
    let response = client
        .get(format!(
            "{base}/v1/chat/sessions/{}/events?after={after}",
            chat.id
        ))
        .bearer_auth(&chat.token)
        .send()
        .await
        .and_then(reqwest::Response::error_for_status)
        .map_err(|e| format!("GET events: {e}"))?;
    Ok(response.bytes_stream().boxed())
}

async fn delete_all(client: &reqwest::Client, base: &str, chats: &[Chat]) {
    futures::stream::iter(chats)
        .for_each_concurrent(SETUP_CONCURRENCY, |chat| async move {
            let deleted = client
                .delete(format!("{base}/v1/chat/sessions/{}", chat.id))
                .bearer_auth(&chat.token)
                .send()
                .await;
            if let Err(e) = deleted.and_then(reqwest::Response::error_for_status) {
                eprintln!("chats: DELETE chat {}: {e}", chat.id);
            }
        })
        .await;
}

/// What a chat's subscriber has seen of its message.
#[derive(Default)]
struct Watch {
    last_seq: u64,
    sent: bool,
    calls: usize,
    done_ok: usize,
    turns: usize,
    resyncs: usize,
}

enum Seen {
    More,
    Done,
    Resync,
}

impl Watch {
    fn frame(&mut self, frame: &Frame) -> Result<Seen, String> {
        let entry: LogEntry = serde_json::from_str(&frame.data)
            .map_err(|e| format!("unreadable event {:?}: {e}", frame.data))?;
        if let Some(seq) = entry.seq {
            self.last_seq = seq;
        }
        Ok(match entry.event {
            Event::UserMessage { .. } => {
                self.sent = true;
                Seen::More
            }
            Event::ToolCall { .. } => {
                self.calls += 1;
                Seen::More
            }
            Event::ToolDone { ok: true, .. } => {
                self.done_ok += 1;
                Seen::More
            }
            Event::AssistantTurn { .. } => {
                self.turns += 1;
                Seen::More
            }
            Event::Busy { busy: false, .. } if self.sent => Seen::Done,
            Event::Resync => {
                self.resyncs += 1;
                Seen::Resync
            }
            Event::Error { message, .. } => return Err(format!("error event: {message}")),
            _ => Seen::More,
        })
    }
}

/// Post chat `i`'s message and read its event stream until it is done.
async fn one(
    client: &reqwest::Client,
    base: &str,
    i: usize,
    chat: &Chat,
    events: EventStream,
) -> Outcome {
    let sent = Instant::now();
    let mut watch = Watch::default();
    let mut events = Some(events);
    let result = tokio::time::timeout(MESSAGE_TIMEOUT, async {
        let posted = client
            .post(format!("{base}/v1/chat/sessions/{}/messages", chat.id))
            .bearer_auth(&chat.token)
            .json(&json!({"text": message(i)}))
            .send()
            .await
            .map_err(|e| format!("POST messages: {e}"))?;
        if posted.status() != reqwest::StatusCode::ACCEPTED {
            return Err(format!("POST messages: {}", posted.status()));
        }
        let mut framer = SseFramer::default();
        let mut frames = Vec::new();
        loop {
            let stream = events.as_mut().ok_or("no event stream")?;
            match stream.next().await {
                Some(Ok(bytes)) => framer.push(&bytes, &mut frames),
                Some(Err(e)) => return Err(format!("event stream: {e}")),
                None => return Err("the event stream ended".to_string()),
            }
            for frame in frames.drain(..) {
                match watch.frame(&frame)? {
                    Seen::More => {}
                    Seen::Done => return Ok(()),
                    Seen::Resync => {
                        framer = SseFramer::default();
                        events = Some(subscribe(client, base, chat, watch.last_seq).await?);
                        break;
                    }
                }
            }
        }
    })
    .await
    .unwrap_or_else(|_| Err(format!("not done in {MESSAGE_TIMEOUT:?}")));
    let took = sent.elapsed();
    let problem = match result {
        Err(e) => Some(e),
        Ok(()) if (watch.calls, watch.done_ok, watch.turns) != (2, 2, 3) => Some(format!(
            "saw {} tool calls, {} done, {} model turns; expected 2, 2, 3",
            watch.calls, watch.done_ok, watch.turns
        )),
        Ok(()) => None,
    };
    Outcome {
        chat: i,
        took,
        problem,
        resyncs: watch.resyncs,
        events,
    }
}
