//! The library run: N `ChatSession`s in this process.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use futures::stream::FuturesUnordered;
use lrg_chat::permissions::{Mode, PermissionSettings};
use lrg_chat::tools::ToolHost;
use lrg_chat::{ChatSession, FixedModel, Permissions, TurnOutcome};
use lrg_providers::openai::{Dialect, OpenAiChat, OpenAiConfig};
use lrg_providers::transport::TransportConfig;
use lrg_providers::{ApiKey, ChatModel, ToolAnnotations};

use crate::check::{Trouble, history_problem};
use crate::fake_openai::{FakeOpenAi, TOOL, message, reply_text};
use crate::figures::Figures;
use crate::usage;

/// Longest a message may take before it counts as failed: generous, the
/// bench must not be flaky on a loaded machine.
pub const MESSAGE_TIMEOUT: Duration = Duration::from_secs(600);

/// The `lookup` tool's arguments.
#[derive(serde::Deserialize, schemars::JsonSchema)]
pub struct LookupArgs {
    /// What to look up.
    query: String,
}

/// The model every chat talks to: one client, as an app would share it,
/// with the transport's default pool unless `LRG_BENCH_POOL_IDLE` says how
/// many idle connections to keep (e.g. N, so that no turn reconnects).
pub fn model(base: &str) -> Arc<dyn ChatModel> {
    let mut transport = TransportConfig::default();
    if let Ok(v) = std::env::var("LRG_BENCH_POOL_IDLE") {
        let idle = v
            .parse()
            .unwrap_or_else(|_| panic!("LRG_BENCH_POOL_IDLE={v:?}: want a number"));
        transport = transport.with_pool_max_idle_per_host(idle);
    }
    let config = OpenAiConfig::new(Dialect::OPENAI, base, "gpt-4.1")
        .with_api_key(ApiKey::new("sk-bench"))
        .with_transport(transport);
    Arc::new(OpenAiChat::new(config).expect("OpenAiChat"))
}

/// A chat's tools: one Rust function, read-only.
pub fn tools() -> Arc<ToolHost> {
    let host = ToolHost::new();
    let read_only = ToolAnnotations {
        read_only_hint: Some(true),
        ..Default::default()
    };
    host.add_fn(
        TOOL,
        "Look something up",
        read_only,
        |args: LookupArgs| async move { Ok::<_, String>(format!("found {} bytes", args.query.len())) },
    )
    .expect("add lookup");
    Arc::new(host)
}

/// Permissions that let every tool run without asking.
pub fn permissions() -> PermissionSettings {
    PermissionSettings {
        mode: Mode::AutoAll,
        ..Default::default()
    }
}

/// Run the library variant against a fresh fake server.
pub fn run(n: usize) -> Figures {
    let server = FakeOpenAi::spawn();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let figures = rt.block_on(chats(n, &server));
    drop(rt);
    figures
}

async fn chats(n: usize, server: &FakeOpenAi) -> Figures {
    let model = model(&server.base);
    let before_sessions = usage::now();
    let sessions: Vec<ChatSession> = (0..n)
        .map(|_| {
            ChatSession::builder(Arc::new(FixedModel(model.clone())))
                .tools(tools())
                .permissions(Arc::new(Permissions::new(permissions())))
                .system_prompt("You look things up.")
                .build()
        })
        .collect();

    let start = usage::now();
    let t0 = Instant::now();
    let mut pending: FuturesUnordered<_> = sessions
        .iter()
        .enumerate()
        .map(|(i, session)| {
            let sent = Instant::now();
            let handle = session.send(message(i));
            async move {
                let outcome = match handle {
                    Ok(h) => tokio::time::timeout(MESSAGE_TIMEOUT, h)
                        .await
                        .map_err(|_| format!("no answer in {MESSAGE_TIMEOUT:?}")),
                    Err(e) => Err(e.to_string()),
                };
                (i, sent.elapsed(), outcome)
            }
        })
        .collect();
    let mut f = Figures::default();
    let mut took = Vec::with_capacity(n);
    let want = reply_text();
    while let Some((i, t, outcome)) = pending.next().await {
        match outcome {
            Ok(TurnOutcome::Completed { text, .. }) if text == want => took.push((i, t)),
            Ok(other) => f.failures.push(format!("chat {i}: {other:?}")),
            Err(e) => f.failures.push(format!("chat {i}: {e}")),
        }
    }
    f.wall = t0.elapsed();
    let end = usage::now();
    f.cpu_us = end.cpu_us - start.cpu_us;
    f.max_rss_kib = end.max_rss_kib;

    let mut trouble = Trouble::default();
    for (i, session) in sessions.iter().enumerate() {
        if let Some(problem) = history_problem(&session.history()) {
            f.failures.push(format!("chat {i}: {problem}"));
        }
        let t = Trouble::of(&session.events().entries());
        if let Some(e) = t.errors.first().or(t.warnings.first()) {
            f.failures.push(format!("chat {i}: {e}"));
        }
        trouble.add(t);
    }
    f.errors = trouble.errors.len();
    f.warnings = trouble.warnings.len();
    f.completed = took.len();
    f.times(&took, &server.take_times().await);

    // Idle memory: the sessions as they are now, against them gone.
    f.tasks_alive = tokio::runtime::Handle::current()
        .metrics()
        .num_alive_tasks();
    let with_sessions = usage::now().live_bytes;
    drop(sessions);
    tokio::task::yield_now().await;
    let without = usage::now().live_bytes;
    f.tasks_after = tokio::runtime::Handle::current()
        .metrics()
        .num_alive_tasks();
    f.per_session_bytes = (with_sessions - without) as f64 / n as f64;
    f.shared_bytes = without - before_sessions.live_bytes;
    // What of the shared memory is the model client's: its idle pooled
    // connections (one per chat that streamed at once), whose tasks end
    // when the client goes.
    drop(model);
    tokio::time::sleep(Duration::from_millis(500)).await;
    f.client_bytes = Some(without - usage::now().live_bytes);
    f
}
