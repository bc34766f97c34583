//! SSE delivery over real HTTP on loopback, beside the in-memory fan-out of
//! the same event log in the same run:
//!
//! - `1x1000`: one chat, 1,000 event streams;
//! - `1000x1`: 1,000 chats, one event stream each.
//!
//! Each iteration publishes a batch of events and waits until every
//! subscriber has received all of them; throughput is events delivered.
//! Memory per subscriber (resident set growth while the streams are open) is
//! printed once per shape.

use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use futures::StreamExt as _;
use futures::future::BoxFuture;
use lrg_chat::events::{Event, EventLog};
use lrg_chat::http::{
    ChatOpener, ChatServer, ChatSpec, HttpConfig, Limits, OpenError, OpenedChat, StaticMenu,
};
use lrg_chat::{ChatSession, FixedModel};
use lrg_providers::{ChatModel, ScriptedModel};
use tokio::sync::Notify;

const BATCH: u64 = 50;
const SUBSCRIBERS: usize = 1_000;

fn event(i: u64) -> Event {
    Event::Warning {
        message: format!("event {i}: a line of about the size of a short delta"),
        retrying: false,
    }
}

/// Hands out sessions on a scripted model.
struct Scripted;

impl ChatOpener for Scripted {
    fn open(&self, _spec: ChatSpec) -> BoxFuture<'_, Result<OpenedChat, OpenError>> {
        Box::pin(async move {
            let model: Arc<dyn ChatModel> = Arc::new(ScriptedModel::new(vec![]));
            let info = model.info();
            let builder = ChatSession::builder(Arc::new(FixedModel(model)));
            Ok(OpenedChat::new(builder, info))
        })
    }
}

/// Counts numbered events delivered to all subscribers.
#[derive(Default)]
struct Counter {
    delivered: AtomicU64,
    changed: Notify,
}

impl Counter {
    async fn wait_for(&self, target: u64) {
        loop {
            let notified = self.changed.notified();
            if self.delivered.load(Ordering::Acquire) >= target {
                return;
            }
            notified.await;
        }
    }
}

fn resident_kib() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| {
            s.split_whitespace()
                .nth(1)
                .and_then(|p| p.parse::<u64>().ok())
        })
        .map_or(0, |pages| pages * 4)
}

struct Http {
    sessions: Vec<ChatSession>,
    counter: Arc<Counter>,
    _server: ChatServer,
}

/// A server with `chats` chats and `per_chat` streams on each, all read by
/// counting tasks.
async fn http_setup(chats: usize, per_chat: usize) -> Http {
    let mut limits = Limits::default();
    limits.chats = chats + 1;
    limits.subscribers_per_chat = per_chat + 1;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap_or_else(|e| panic!("bind: {e}"));
    let base = format!(
        "http://{}",
        listener.local_addr().unwrap_or_else(|e| panic!("{e}"))
    );
    let server = ChatServer::new(
        HttpConfig::new("bench").limits(limits),
        Arc::new(Scripted),
        Arc::new(StaticMenu::default()),
    );
    let app = server.router();
    tokio::spawn(async move { axum::serve(listener, app).await });
    lrg_providers::transport::ensure_tls_provider();
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    let counter = Arc::new(Counter::default());
    let before = resident_kib();
    let mut sessions = Vec::with_capacity(chats);
    for _ in 0..chats {
        let link = server
            .open_chat(ChatSpec::new().model("script:bench"))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        sessions.extend(server.session(&link.session));
        for _ in 0..per_chat {
            let response = client
                .get(format!("{base}/v1/chat/sessions/{}/events", link.session))
                .bearer_auth(&link.chat_token)
                .send()
                .await
                .unwrap_or_else(|e| panic!("{e}"));
            let mut body = response.bytes_stream();
            let counter = counter.clone();
            tokio::spawn(async move {
                while let Some(Ok(chunk)) = body.next().await {
                    let n = chunk.windows(4).filter(|w| w == b"\nid:").count() as u64;
                    if n > 0 {
                        counter.delivered.fetch_add(n, Ordering::AcqRel);
                        counter.changed.notify_waiters();
                    }
                }
            });
        }
    }
    let streams = (chats * per_chat) as u64;
    eprintln!(
        "sse {chats}x{per_chat}: ~{} KiB resident per open stream (client and server side together)",
        resident_kib().saturating_sub(before) / streams.max(1)
    );
    Http {
        sessions,
        counter,
        _server: server,
    }
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    let mut group = c.benchmark_group("sse");
    group.sample_size(10);

    for (chats, per_chat) in [(1usize, SUBSCRIBERS), (SUBSCRIBERS, 1usize)] {
        let name = format!("{chats}x{per_chat}");
        let streams = (chats * per_chat) as u64;
        group.throughput(Throughput::Elements(BATCH * streams));

        // In memory: the same log fan-out, subscribers in tasks.
        let logs: Vec<Arc<EventLog>> = (0..chats).map(|_| Arc::new(EventLog::new())).collect();
        let counter = Arc::new(Counter::default());
        rt.block_on(async {
            for log in &logs {
                for _ in 0..per_chat {
                    let mut sub = log.subscribe(0);
                    let counter = counter.clone();
                    tokio::spawn(async move {
                        while let Some(entry) = sub.next().await {
                            black_box(serde_json::to_string(&*entry).ok());
                            counter.delivered.fetch_add(1, Ordering::AcqRel);
                            counter.changed.notify_waiters();
                        }
                    });
                }
            }
        });
        group.bench_function(format!("in_memory_{name}"), |b| {
            b.to_async(&rt).iter_custom(|iters| {
                let (logs, counter) = (logs.clone(), counter.clone());
                async move {
                    let start = Instant::now();
                    for _ in 0..iters {
                        let target = counter.delivered.load(Ordering::Acquire) + BATCH * streams;
                        for i in 0..BATCH {
                            for log in &logs {
                                log.publish(event(i));
                            }
                        }
                        counter.wait_for(target).await;
                    }
                    start.elapsed()
                }
            })
        });

        let http = rt.block_on(http_setup(chats, per_chat));
        let http = Arc::new(http);
        group.bench_function(format!("http_{name}"), |b| {
            b.to_async(&rt).iter_custom(|iters| {
                let http = http.clone();
                async move {
                    let start = Instant::now();
                    for _ in 0..iters {
                        let target =
                            http.counter.delivered.load(Ordering::Acquire) + BATCH * streams;
                        for i in 0..BATCH {
                            for s in &http.sessions {
                                s.events().publish(event(i));
                            }
                        }
                        let waited = tokio::time::timeout(
                            Duration::from_secs(60),
                            http.counter.wait_for(target),
                        )
                        .await;
                        if waited.is_err() {
                            panic!("subscribers fell behind (lag limit): lower BATCH");
                        }
                    }
                    start.elapsed()
                }
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
