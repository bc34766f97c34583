//! lrg-chat session benches: event-log fan-out (1 session × 100 subscribers,
//! 1,000 sessions × 1 subscriber), memory per idle session (counted by a
//! global allocator, noted before the timings with
//! [`lrg_benches::figure_note`], so it lands in RESULTS.md), and fitting a
//! 10,000-message history into a context window (measuring it each time, and
//! with the estimates a session keeps), and one message's model turn with
//! 40 tools (the session's own work: the model answers at once).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;
use std::sync::Arc;

use criterion::{BatchSize, BenchmarkId, Criterion, Throughput, criterion_group};
use lrg_benches::{Counting, figure_note, live_bytes};
use lrg_chat::context::{self, Budget, ContextPolicy};
use lrg_chat::events::{Event, EventLog};
use lrg_chat::testing::FixedTools;
use lrg_chat::tools::Tools;
use lrg_chat::{ChatSession, FixedModel, Permissions, TurnOutcome};
use lrg_providers::{
    ChatModel, Message, Messages, ModelInfo, ModelLocation, Part, Role, ScriptedModel,
    ScriptedTurn, StopReason, ToolCall, ToolResult, ToolSpec, TurnEvent, TurnRequest, TurnStream,
};
use serde_json::json;
use tokio_util::sync::CancellationToken;

/// Counts live heap bytes so the idle-session figure is measured, not guessed.
#[global_allocator]
static GLOBAL: Counting = Counting;

fn note(i: usize) -> Event {
    Event::ToolRunning {
        call_id: format!("call_{i}"),
    }
}

const EVENTS: usize = 1_000;

/// Publish `EVENTS` events into one log read by `subscribers` tasks; returns
/// when every subscriber has received every event.
async fn fan_out_one(subscribers: usize) {
    let log = EventLog::new();
    let readers: Vec<_> = (0..subscribers)
        .map(|_| {
            let mut sub = log.subscribe(0);
            tokio::spawn(async move {
                for _ in 0..EVENTS {
                    black_box(sub.next().await.expect("log alive"));
                }
            })
        })
        .collect();
    for i in 0..EVENTS {
        log.publish(note(i));
    }
    for r in readers {
        r.await.expect("reader");
    }
}

/// `sessions` logs with one subscriber each, `per_session` events each.
async fn fan_out_many(sessions: usize, per_session: usize) {
    let logs: Vec<EventLog> = (0..sessions).map(|_| EventLog::new()).collect();
    let readers: Vec<_> = logs
        .iter()
        .map(|log| {
            let mut sub = log.subscribe(0);
            tokio::spawn(async move {
                for _ in 0..per_session {
                    black_box(sub.next().await.expect("log alive"));
                }
            })
        })
        .collect();
    for i in 0..per_session {
        for log in &logs {
            log.publish(note(i));
        }
    }
    for r in readers {
        r.await.expect("reader");
    }
}

fn fan_out(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let mut group = c.benchmark_group("event_fan_out");
    group.sample_size(20);
    group.throughput(Throughput::Elements((100 * EVENTS) as u64));
    group.bench_function("1_session_x_100_subscribers_1000_events", |b| {
        b.to_async(&rt).iter(|| fan_out_one(100))
    });
    group.throughput(Throughput::Elements(100_000));
    group.bench_function("1000_sessions_x_1_subscriber_100_events", |b| {
        b.to_async(&rt).iter(|| fan_out_many(1_000, 100))
    });
    group.finish();
}

/// 2,500 exchanges of a user message, a tool call, its ~1,500-character
/// result and a reply: 10,000 messages, shared as a session keeps them.
fn long_history() -> Messages {
    let mut history: Vec<Message> = Vec::with_capacity(10_000);
    for n in 0..2_500 {
        let call = ToolCall {
            id: format!("call_{n}"),
            name: "search".into(),
            arguments: json!({"query": format!("q{n}"), "ids": [n, n + 1]}),
        };
        history.push(Message::user(format!("question {n}: what about item {n}?")));
        history.push(Message {
            role: Role::Assistant,
            parts: vec![Part::ToolCall(call.clone())],
        });
        history.push(Message::tool_results([ToolResult::text(
            &call,
            "result line. ".repeat(115),
            false,
        )]));
        history.push(Message::assistant(format!(
            "Item {n} is fine, here is why: {}",
            "because ".repeat(20)
        )));
    }
    history.into()
}

fn fitting(c: &mut Criterion) {
    let history = long_history();
    let info =
        |window| ModelInfo::new("bench", "m", ModelLocation::Local).context_window(Some(window));
    let policy = ContextPolicy::default();
    let mut group = c.benchmark_group("context_fit_10000_messages");
    group.throughput(Throughput::Elements(history.len() as u64));
    for window in [32_768u32, 1_000_000, 100_000_000] {
        let budget: Budget = policy.budget(&info(window), None);
        let fitted = context::fit(&history, &budget);
        figure_note(format!(
            "fit into {window} tokens: {} messages kept, {} results stripped, {} dropped, ~{} tokens",
            fitted.messages.len(),
            fitted.stripped_results,
            fitted.dropped_messages,
            fitted.estimated_tokens
        ));
        group.bench_with_input(BenchmarkId::from_parameter(window), &budget, |b, budget| {
            b.iter(|| context::fit(black_box(&history), budget))
        });
        // What a session does: estimates kept with the history, so a fit
        // measures nothing again.
        let mut estimates = context::Estimates::new();
        let sizes = estimates.update(&history, 0, budget.image_tokens).to_vec();
        group.bench_with_input(
            BenchmarkId::new("kept_estimates", window),
            &budget,
            |b, budget| b.iter(|| context::fit_estimated(black_box(&history), &sizes, budget)),
        );
    }
    group.bench_function("estimate_only", |b| {
        b.iter(|| context::estimate(black_box(&history), 600))
    });
    group.finish();
}

/// Live heap bytes per session, for `n` sessions built by `make`.
fn per_session<T>(n: usize, mut make: impl FnMut() -> T) -> (isize, Vec<T>) {
    let before = live_bytes();
    let mut kept = Vec::with_capacity(n);
    let vec_bytes = (n * std::mem::size_of::<T>()) as isize;
    for _ in 0..n {
        kept.push(make());
    }
    (
        (live_bytes() - before - vec_bytes) / n as isize + std::mem::size_of::<T>() as isize,
        kept,
    )
}

fn idle_memory() {
    const N: usize = 1_000;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let model = FixedModel::new(ScriptedModel::new(Vec::new()));
    let models: Arc<FixedModel> = Arc::new(model);
    let permissions = Arc::new(Permissions::default());
    let build = || {
        ChatSession::builder(models.clone())
            .permissions(permissions.clone())
            .build()
    };

    let (fresh, sessions) = per_session(N, build);
    drop(sessions);
    let (subscribed, pairs) = per_session(N, || {
        let s = build();
        let sub = s.subscribe(0);
        (s, sub)
    });
    drop(pairs);
    // After a ten-message conversation: history plus the kept event log.
    let turns: Vec<ScriptedTurn> = (0..10)
        .map(|i| ScriptedTurn {
            text: Some(format!("answer number {i}, a short one.")),
            ..Default::default()
        })
        .collect();
    let chatted = rt.block_on(async {
        let before = live_bytes();
        let mut kept = Vec::new();
        for _ in 0..100 {
            let session =
                ChatSession::builder(Arc::new(FixedModel::new(ScriptedModel::new(turns.clone()))))
                    .permissions(permissions.clone())
                    .build();
            for i in 0..10 {
                session
                    .send(format!("question number {i}?"))
                    .expect("idle")
                    .await;
            }
            kept.push(session);
        }
        let bytes = (live_bytes() - before) / 100;
        drop(kept);
        bytes
    });
    figure_note(format!(
        "memory per idle session: {fresh} B fresh, {subscribed} B with one subscriber, {chatted} B after 10 messages (history + event log + model)"
    ));
}

/// Answers every turn at once with a short text and keeps nothing of the
/// request, so a turn measures the session's own work.
struct Answers;

impl ChatModel for Answers {
    fn info(&self) -> ModelInfo {
        ModelInfo::new("bench", "answers", ModelLocation::Local)
    }

    fn turn(&self, _request: TurnRequest, _cancel: CancellationToken) -> TurnStream {
        Box::pin(futures::stream::iter([
            Ok(TurnEvent::TextDelta { text: "ok".into() }),
            Ok(TurnEvent::End {
                stop: StopReason::EndTurn,
            }),
        ]))
    }
}

/// 40 tools with file-tool-sized schemas.
fn forty_tools() -> Vec<ToolSpec> {
    (0..40)
        .map(|i| ToolSpec {
            name: format!("tool_{i}"),
            description: format!("Tool number {i}: reads, lists or searches files under a path."),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "Where, relative to the project."},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 1000},
                    "options": {
                        "type": "object",
                        "properties": {
                            "recursive": {"type": "boolean"},
                            "pattern": {"type": "string", "description": "A glob."}
                        }
                    }
                },
                "required": ["path"]
            }),
            annotations: Default::default(),
            output_schema: None,
        })
        .collect()
}

/// One user message answered in one model turn, on a fresh session with 40
/// tools offered.
fn session_turn(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let tools: Arc<dyn Tools> = Arc::new(FixedTools::new(forty_tools()));
    let models = Arc::new(FixedModel::new(Answers));
    let mut group = c.benchmark_group("session_turn");
    group.bench_function("one_message_40_tools", |b| {
        b.iter_batched(
            || {
                ChatSession::builder(models.clone())
                    .tools(tools.clone())
                    .build()
            },
            |session| {
                let outcome = rt.block_on(async { session.send("hello").expect("idle").await });
                assert!(
                    matches!(outcome, TurnOutcome::Completed { .. }),
                    "{outcome:?}"
                );
                session
            },
            BatchSize::SmallInput,
        )
    });
    group.finish();
}

criterion_group!(benches, fan_out, fitting, session_turn);

fn main() {
    idle_memory();
    benches();
    Criterion::default().configure_from_args().final_summary();
}
