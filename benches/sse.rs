//! SSE delivery over real HTTP on loopback, beside the in-memory fan-out of
//! the same event log in the same run:
//!
//! - `1x1000`: one chat, 1,000 event streams;
//! - `1000x1`: 1,000 chats, one event stream each.
//!
//! Each iteration publishes a batch of events and waits until every
//! subscriber has received all of them; throughput is events delivered.
//!
//! Memory per subscriber is printed once per shape, as a line
//! `sse: memory per subscriber ...` on stdout: live heap bytes (a counting
//! allocator) per in-memory subscription, and per HTTP event stream (client
//! and server sides together: both live in this process) when the streams
//! are open, and again at the end of the run, as what closing them frees
//! (so the chats' own logs, which keep every event, are not counted): the
//! two agree when a stream's memory does not grow with the events sent.
//! Last, the server side alone: streams opened by a bare client (a socket
//! each, no HTTP library) and held open while the heap is read.

use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use futures::StreamExt as _;
use futures::future::BoxFuture;
use lrg_benches::{Counting, live_bytes};
use lrg_chat::events::{Event, EventLog};
use lrg_chat::http::{
    ChatLink, ChatOpener, ChatServer, ChatSpec, HttpConfig, Limits, OpenError, OpenedChat,
    StaticMenu,
};
use lrg_chat::{ChatSession, FixedModel};
use lrg_providers::{ChatModel, ScriptedModel};
use tokio::sync::Notify;

#[global_allocator]
static GLOBAL: Counting = Counting;

const BATCH: u64 = 50;
const SUBSCRIBERS: usize = 1_000;
/// How many bare streams measure the server side's memory.
const SERVER_SIDE_STREAMS: usize = 200;

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
    /// Live heap bytes per stream once they were all open.
    heap_at_open: isize,
    /// The tasks reading the streams.
    readers: Vec<tokio::task::JoinHandle<()>>,
    addr: std::net::SocketAddr,
    links: Vec<ChatLink>,
}

impl Http {
    /// Close every stream; the heap bytes per stream that frees, or `None`
    /// when the server still holds some after a while.
    async fn close(&self) -> Option<isize> {
        let open = live_bytes();
        for reader in &self.readers {
            reader.abort();
        }
        // A closed stream is noticed at its next write: publish until the
        // server has let go of every subscription.
        let deadline = Instant::now() + Duration::from_secs(30);
        while self
            .sessions
            .iter()
            .any(|s| s.events().subscriber_count() > 0)
        {
            if Instant::now() > deadline {
                return None;
            }
            for s in &self.sessions {
                s.events().publish(event(0));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Some((open - live_bytes()) / self.readers.len().max(1) as isize)
    }

    /// Heap bytes per stream on the server side: `n` streams (spread over
    /// the chats) opened by a bare client, whose own share is a socket each.
    /// `None` when a stream could not be opened.
    async fn server_side(&self, n: usize) -> Option<isize> {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        let before = live_bytes();
        let mut sockets = Vec::with_capacity(n);
        for (link, session) in self.links.iter().zip(&self.sessions).cycle().take(n) {
            let mut socket = tokio::net::TcpStream::connect(self.addr).await.ok()?;
            // From the last event on: nothing to replay.
            let request = format!(
                "GET /v1/chat/sessions/{}/events?after={} HTTP/1.1\r\nhost: {}\r\n\
                 authorization: Bearer {}\r\n\r\n",
                link.session,
                session.events().last_seq(),
                self.addr,
                link.chat_token
            );
            socket.write_all(request.as_bytes()).await.ok()?;
            let mut head = [0u8; 1024];
            let read = socket.read(&mut head).await.ok()?;
            if !head[..read].starts_with(b"HTTP/1.1 200") {
                return None;
            }
            sockets.push(socket);
        }
        let per =
            (live_bytes() - before - (n * std::mem::size_of::<tokio::net::TcpStream>()) as isize)
                / n.max(1) as isize;
        drop(sockets);
        Some(per)
    }
}

/// Heap bytes per subscriber since `before`.
fn heap_per(before: isize, subscribers: usize) -> isize {
    (live_bytes() - before) / subscribers.max(1) as isize
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
    let addr = listener.local_addr().unwrap_or_else(|e| panic!("{e}"));
    let base = format!("http://{addr}");
    let server = ChatServer::new(
        HttpConfig::new("bench").limits(limits),
        Arc::new(Scripted),
        Arc::new(StaticMenu::default()),
    );
    // `into_make_service`: each connection shares the router (an `Arc`)
    // rather than rebuilding its route table (axum's default for a bare
    // `Router`, about 4 KiB a connection).
    let app = server.router().into_make_service();
    tokio::spawn(async move { axum::serve(listener, app).await });
    lrg_providers::transport::ensure_tls_provider();
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    let counter = Arc::new(Counter::default());
    let mut sessions = Vec::with_capacity(chats);
    let mut links = Vec::with_capacity(chats);
    for _ in 0..chats {
        let link = server
            .open_chat(ChatSpec::new().model("script:bench"))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        sessions.extend(server.session(&link.session));
        links.push(link);
    }
    // The chats are open: from here on, what grows is the streams.
    let before = resident_kib();
    let heap_before = live_bytes();
    let mut readers = Vec::with_capacity(chats * per_chat);
    for link in &links {
        for _ in 0..per_chat {
            let response = client
                .get(format!("{base}/v1/chat/sessions/{}/events", link.session))
                .bearer_auth(&link.chat_token)
                .send()
                .await
                .unwrap_or_else(|e| panic!("{e}"));
            let mut body = response.bytes_stream();
            let counter = counter.clone();
            readers.push(tokio::spawn(async move {
                // The last bytes of the previous chunk: a read may split
                // "\nid:" between two chunks.
                let mut tail = [0u8; 3];
                while let Some(Ok(chunk)) = body.next().await {
                    let mut seam = tail.to_vec();
                    seam.extend(chunk.iter().take(3));
                    let n = chunk.windows(4).filter(|w| w == b"\nid:").count()
                        + seam.windows(4).filter(|w| w == b"\nid:").count();
                    if chunk.len() >= 3 {
                        tail.copy_from_slice(&chunk[chunk.len() - 3..]);
                    } else {
                        tail.rotate_left(chunk.len());
                        tail[3 - chunk.len()..].copy_from_slice(&chunk);
                    }
                    if n > 0 {
                        counter.delivered.fetch_add(n as u64, Ordering::AcqRel);
                        counter.changed.notify_waiters();
                    }
                }
            }));
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
        heap_at_open: heap_per(heap_before, chats * per_chat),
        readers,
        addr,
        links,
    }
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    let mut group = c.benchmark_group("sse");
    group.sample_size(10);

    let shapes = [(1usize, SUBSCRIBERS), (SUBSCRIBERS, 1usize)];
    // Every in-memory run first: after an HTTP run the allocator holds the
    // freed buffers of 1,000 connections (malloc consolidation showed in a
    // profile of the in-memory run that followed one), which slowed the
    // baseline by up to 2x.
    let mut in_memory_heap = Vec::new();
    for (chats, per_chat) in shapes {
        let name = format!("{chats}x{per_chat}");
        let streams = (chats * per_chat) as u64;
        group.throughput(Throughput::Elements(BATCH * streams));

        // In memory: the same log fan-out, subscribers in tasks.
        let logs: Vec<Arc<EventLog>> = (0..chats).map(|_| Arc::new(EventLog::new())).collect();
        let counter = Arc::new(Counter::default());
        let heap_before = live_bytes();
        let mut readers = Vec::with_capacity(chats * per_chat);
        rt.block_on(async {
            for log in &logs {
                for _ in 0..per_chat {
                    let mut sub = log.subscribe(0);
                    let counter = counter.clone();
                    readers.push(tokio::spawn(async move {
                        while let Some(entry) = sub.next().await {
                            black_box(serde_json::to_string(&*entry).ok());
                            counter.delivered.fetch_add(1, Ordering::AcqRel);
                            counter.changed.notify_waiters();
                        }
                    }));
                }
            }
        });
        in_memory_heap.push(heap_per(heap_before, chats * per_chat));
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
        // Dropping the logs ends the subscriptions: wait for their tasks, so
        // that what they free does not land in the next measurement.
        drop(logs);
        rt.block_on(futures::future::join_all(readers));
    }

    for ((chats, per_chat), in_memory) in shapes.into_iter().zip(in_memory_heap) {
        let name = format!("{chats}x{per_chat}");
        let streams = (chats * per_chat) as u64;
        group.throughput(Throughput::Elements(BATCH * streams));
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
        let delivered = http.counter.delivered.load(Ordering::Acquire) / streams;
        let at_end = rt
            .block_on(http.close())
            .map_or_else(|| "? (streams did not close)".into(), |b| format!("{b} B"));
        let server_side = rt
            .block_on(http.server_side(SERVER_SIDE_STREAMS))
            .map_or_else(|| "? (a stream did not open)".into(), |b| format!("{b} B"));
        println!(
            "sse: memory per subscriber {name}: in-memory {in_memory} B; http {} B at open, \
             {at_end} after {delivered} events each (heap, client and server sides together); \
             server side alone {server_side}",
            http.heap_at_open,
        );
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
