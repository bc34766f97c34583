//! Session store benches: one step appended with `sync_data` (p50/p99
//! noted, then criterion's timing), loading and resuming a 10,000-row
//! session (goal: resume < 50 ms on JSONL), and 1,000 idle keyed sessions in
//! a registry (the time to open them, resident memory and the cost of
//! evicting them all, noted; with where an open's time goes: a keyed
//! lookup, a whole-directory scan, a create).
//! Noted figures go to stderr and, under `benches/run.sh`, into RESULTS.md
//! ([`lrg_benches::figure_note`]).
//!
//! With `--features postgres` and `LRG_BENCH_PG` set to a connection string,
//! the append and resume figures are measured on PostgreSQL too, side by
//! side (`benches/run.sh` starts a throwaway server when `initdb` is found).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{BatchSize, Criterion, criterion_group};
use lrg_benches::figure_note;
use lrg_chat::registry::{OpenRequest, RegistryConfig, SessionRegistry};
use lrg_chat::store::{
    JsonlStore, ModelBinding, SessionKeys, SessionMeta, SessionState, SessionStore,
};
use lrg_chat::{ChatSession, FixedModel};
use lrg_providers::{Message, Part, Role, ScriptedModel, ToolCall, ToolResult};
use serde_json::json;

/// One exchange: a question, a call, its result and the answer.
fn exchange(i: usize) -> Vec<Message> {
    let call = ToolCall {
        id: format!("c{i}"),
        name: "read_note".into(),
        arguments: json!({"name": format!("note {i}")}),
    };
    vec![
        Message::user(format!("What does note {i} say?")),
        Message {
            role: Role::Assistant,
            parts: vec![Part::text("Let me look."), Part::ToolCall(call.clone())],
        },
        Message::tool_results([ToolResult::text(&call, "buy milk and coffee beans", false)]),
        Message::assistant(format!("Note {i} says: buy milk and coffee beans.")),
    ]
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// p50/p99 of appending one step (a row and the state) with sync_data.
fn append_percentiles(name: &str, rt: &tokio::runtime::Runtime, store: &dyn SessionStore) {
    let meta = SessionMeta::new(ModelBinding::new("bench:model"));
    rt.block_on(store.create(&meta)).unwrap();
    let row = exchange(0);
    let state = SessionState::default();
    let mut times = Vec::with_capacity(500);
    for i in 0..500 {
        let start = Instant::now();
        rt.block_on(store.append(&meta.id, &row[i % 4..i % 4 + 1], &state))
            .unwrap();
        times.push(start.elapsed());
    }
    times.sort();
    figure_note(format!(
        "{name}: append one step with sync: p50 {:?}, p99 {:?} (500 steps)",
        percentile(&times, 0.5),
        percentile(&times, 0.99)
    ));
    rt.block_on(store.delete(&meta.id)).unwrap();
}

/// A released session of `rows` rows in `store`.
fn big_session(rt: &tokio::runtime::Runtime, store: &dyn SessionStore, rows: usize) -> SessionMeta {
    let meta = SessionMeta::new(ModelBinding::new("bench:model"));
    rt.block_on(store.create(&meta)).unwrap();
    let mut batch = Vec::new();
    for i in 0..rows / 4 {
        batch.extend(exchange(i));
        if batch.len() >= 400 {
            rt.block_on(store.append(&meta.id, &batch, &SessionState::default()))
                .unwrap();
            batch.clear();
        }
    }
    rt.block_on(store.append(&meta.id, &batch, &SessionState::default()))
        .unwrap();
    rt.block_on(store.release(&meta.id));
    meta
}

fn jsonl(c: &mut Criterion) {
    let rt = runtime();
    let dir = tempfile::TempDir::new().unwrap();
    let store = JsonlStore::new(dir.path());
    append_percentiles("jsonl", &rt, &store);

    let mut group = c.benchmark_group("store_jsonl");
    let meta = SessionMeta::new(ModelBinding::new("bench:model"));
    rt.block_on(store.create(&meta)).unwrap();
    let step = exchange(1);
    group.bench_function("append_step_sync", |b| {
        b.iter(|| {
            rt.block_on(store.append(&meta.id, &step[..1], &SessionState::default()))
                .unwrap()
        })
    });

    // A 10,000-row load or resume takes milliseconds: 10 samples, not 100.
    group.sample_size(10);
    let big = big_session(&rt, &store, 10_000);
    let path = store.path_of(&big.id);
    let bytes = std::fs::read(&path).unwrap();
    group.bench_function("load_10000_rows", |b| {
        b.iter(|| rt.block_on(store.load(&big.id)).unwrap())
    });
    // A bounded resume archives the older rows and rewrites the file: each
    // one starts from the full 10,000 rows.
    group.bench_function("resume_10000_rows", |b| {
        b.iter_batched(
            || {
                std::fs::write(&path, &bytes).unwrap();
            },
            |()| {
                let s = rt.block_on(store.resume(&big.id, 64)).unwrap();
                rt.block_on(store.release(&big.id));
                s
            },
            BatchSize::PerIteration,
        )
    });
    // The default resume keeps every row: a read, no rewrite.
    group.bench_function("resume_10000_rows_whole", |b| {
        b.iter_batched(
            || {
                std::fs::write(&path, &bytes).unwrap();
            },
            |()| {
                let s = rt.block_on(store.resume(&big.id, usize::MAX)).unwrap();
                rt.block_on(store.release(&big.id));
                s
            },
            BatchSize::PerIteration,
        )
    });
    group.finish();
}

/// What persisting before publishing costs a chat: one message (a call
/// turn, its result, the answer) on a JSONL store, from `send` to the
/// message being accepted (kept, its `user_message` shown: what an HTTP
/// `202` waits for) and to the end of the message. The fsyncs per message
/// are those a step paid before, moved ahead of the events.
fn kept_message(c: &mut Criterion) {
    let rt = runtime();
    let dir = tempfile::TempDir::new().unwrap();
    let store: Arc<dyn SessionStore> = Arc::new(JsonlStore::new(dir.path()));
    let turns = |n: usize| {
        let mut turns = Vec::new();
        for _ in 0..n {
            turns.push(
                serde_json::from_value(json!({"calls": [{"name": "look", "arguments": {}}]}))
                    .unwrap(),
            );
            turns.push(serde_json::from_value(json!({"text": "done"})).unwrap());
        }
        ScriptedModel::new(turns)
    };
    let session = |n: usize| {
        let meta = SessionMeta::new(ModelBinding::new("bench:model"));
        rt.block_on(store.create(&meta)).unwrap();
        ChatSession::builder(Arc::new(FixedModel::new(turns(n))))
            .store(store.clone(), meta.id)
            .build()
    };
    let mut group = c.benchmark_group("session_kept");
    let chat = session(100_000);
    // Timed to the acceptance only; the rest of the message runs untimed.
    group.bench_function("send_to_accepted", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let start = Instant::now();
                    let mut handle = chat.send("look").unwrap();
                    assert!(handle.accepted().await);
                    total += start.elapsed();
                    handle.await;
                }
                total
            })
        })
    });
    let chat = session(100_000);
    group.bench_function("message_with_one_call", |b| {
        b.iter(|| rt.block_on(async { chat.send("look").unwrap().await }))
    });
    group.finish();
}

/// Resident memory of this process, in KiB (Linux; 0 elsewhere).
fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |pages| pages * 4)
}

/// 1,000 idle keyed sessions: memory they hold, and evicting them all.
fn idle_sessions() {
    let rt = runtime();
    let dir = tempfile::TempDir::new().unwrap();
    let model = ScriptedModel::new(vec![]);
    let registry = SessionRegistry::new(
        move |_: &ModelBinding| {
            Ok(ChatSession::builder(Arc::new(FixedModel::new(
                model.clone(),
            ))))
        },
        RegistryConfig::default()
            .idle(Duration::ZERO)
            .max_live(2_000),
    )
    .with_store(Arc::new(JsonlStore::new(dir.path())));
    let before = rss_kib();
    let start = Instant::now();
    for i in 0..1_000 {
        let keys = SessionKeys::new("bench", &format!("doc:{i}")).unwrap();
        rt.block_on(registry.open(OpenRequest::keyed(keys, ModelBinding::new("bench:model"))))
            .unwrap();
    }
    let opened = start.elapsed();
    let after = rss_kib();
    lookup_profile(&rt, dir.path());
    let start = Instant::now();
    let evicted = rt.block_on(registry.evict_idle());
    let evict = start.elapsed();
    assert_eq!(evicted, 1_000);
    figure_note(format!(
        "registry: 1,000 idle keyed sessions (JSONL): opened in {opened:?}; about {} KiB resident \
         ({} KiB each); evicting all took {evict:?} ({:?} each)",
        after.saturating_sub(before),
        after.saturating_sub(before) / 1_000,
        evict / 1_000
    ));
}

#[cfg(feature = "postgres")]
fn postgres(c: &mut Criterion) {
    let Ok(url) = std::env::var("LRG_BENCH_PG") else {
        figure_note("postgres: LRG_BENCH_PG is not set; the PostgreSQL figures are skipped");
        return;
    };
    let rt = runtime();
    let store = rt
        .block_on(lrg_chat::store::PgStore::connect(&url))
        .unwrap();
    append_percentiles("postgres", &rt, &store);
    let mut group = c.benchmark_group("store_postgres");
    let meta = SessionMeta::new(ModelBinding::new("bench:model"));
    rt.block_on(store.create(&meta)).unwrap();
    let step = exchange(1);
    group.bench_function("append_step_sync", |b| {
        b.iter(|| {
            rt.block_on(store.append(&meta.id, &step[..1], &SessionState::default()))
                .unwrap()
        })
    });
    rt.block_on(store.delete(&meta.id)).unwrap();

    group.sample_size(10);
    let big = big_session(&rt, &store, 10_000);
    let rows = rt.block_on(store.load(&big.id)).unwrap().rows;
    assert_eq!(rows.len(), 10_000);
    group.bench_function("load_10000_rows", |b| {
        b.iter(|| rt.block_on(store.load(&big.id)).unwrap())
    });
    // A resume trims the rows: each one starts from the full 10,000 again
    // (put back untimed, as the JSONL figure rewrites its file).
    group.bench_function("resume_10000_rows", |b| {
        b.iter_batched(
            || {
                rt.block_on(async {
                    store.resume(&big.id, usize::MAX).await.unwrap();
                    store
                        .rewrite(&big.id, &rows, &SessionState::default())
                        .await
                        .unwrap();
                    store.release(&big.id).await;
                })
            },
            |()| {
                let s = rt.block_on(store.resume(&big.id, 64)).unwrap();
                rt.block_on(store.release(&big.id));
                s
            },
            BatchSize::PerIteration,
        )
    });
    group.finish();
    rt.block_on(store.delete(&big.id)).unwrap();
}

#[cfg(not(feature = "postgres"))]
fn postgres(_: &mut Criterion) {}

/// Where a keyed open's time goes, among `dir`'s 1,000 sessions: a keyed
/// lookup (the store's index) against a whole-directory scan (what every
/// lookup was before it), and a create (its syncs) in an empty directory.
fn lookup_profile(rt: &tokio::runtime::Runtime, dir: &std::path::Path) {
    use lrg_chat::store::ListFilter;
    let store = JsonlStore::new(dir);
    let keys = |i: usize| SessionKeys::new("bench", &format!("doc:{i}")).unwrap();
    // The first lookup builds the index (one read of every file).
    let start = Instant::now();
    assert!(rt.block_on(store.find(&keys(0))).unwrap().is_some());
    let first = start.elapsed();
    let start = Instant::now();
    for i in 0..200 {
        assert!(rt.block_on(store.find(&keys(i * 5))).unwrap().is_some());
    }
    let find = start.elapsed() / 200;
    let start = Instant::now();
    for i in 0..20 {
        let filter = ListFilter::keys(&keys(i * 50));
        assert_eq!(rt.block_on(store.list(&filter)).unwrap().len(), 1);
    }
    let scan = start.elapsed() / 20;
    let fresh = tempfile::TempDir::new().unwrap();
    let store = JsonlStore::new(fresh.path());
    let mut creates: Vec<Duration> = (0..200)
        .map(|i| {
            let mut meta = SessionMeta::new(ModelBinding::new("bench:model"));
            meta.keys = Some(keys(i));
            let start = Instant::now();
            rt.block_on(store.create(&meta)).unwrap();
            start.elapsed()
        })
        .collect();
    creates.sort();
    figure_note(format!(
        "registry: among 1,000 keyed sessions, a keyed lookup takes {find:?} (the first, which \
         builds the index, {first:?}); a whole-directory scan {scan:?}; a create p50 {:?}, p99 \
         {:?} (lock note + header synced side by side, then the directory)",
        percentile(&creates, 0.5),
        percentile(&creates, 0.99)
    ));
}

criterion_group!(benches, jsonl, kept_message, postgres);

fn main() {
    idle_sessions();
    benches();
    Criterion::default().configure_from_args().final_summary();
}
