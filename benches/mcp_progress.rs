//! Progress-notification throughput (issue 25): a tool server sends 10,000
//! `notifications/progress` a second during one call, and a session turns
//! them into coalesced live `tool_progress` events for a subscriber.
//!
//! The server is this bench run again as a child process (`--progress-server`),
//! speaking MCP over stdio as a real server does, so what this process's CPU
//! time counts is lrg's side alone: reading and decoding every notification,
//! matching it to its call, coalescing, publishing. Figures, over the flood
//! (the call's wall time):
//!
//! - notifications per second that reached lrg (the server paces itself at
//!   10,000/s, so this says whether lrg kept up);
//! - `tool_progress` events the subscriber got (coalescing: at most one per
//!   100 ms plus each whole percent, and the last);
//! - the session's CPU as a share of one core. Goal: under 5%.
//!
//! Written to `$CRITERION_HOME/summary.md` (benches/run.sh sets it) for
//! `bench-report`; run alone with `cargo bench -p lrg-benches --bench mcp_progress`.

#![allow(clippy::expect_used)] // setup of a bench: failing loudly is the point

use std::sync::Arc;
use std::time::{Duration, Instant};

use lrg_chat::events::Event;
use lrg_chat::tools::{McpConfig, ToolHost, ToolHostOptions, Tools};
use lrg_chat::{ChatSession, FixedModel, Mode, PermissionSettings, Permissions};
use lrg_providers::{ScriptedCall, ScriptedModel, ScriptedTurn};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult,
    PaginatedRequestParams, ProgressNotificationParam, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt as _};
use serde_json::json;

/// The argument that makes this binary the tool server.
const SERVER_ARG: &str = "--progress-server";

/// Notifications per second the server sends.
const RATE: u64 = 10_000;

/// How long the flood lasts.
const SECONDS: u64 = 3;

/// The row `benches/goals.toml` judges.
const CPU_ROW: &str = "session CPU, % of one core";

fn main() {
    if std::env::args().nth(1).as_deref() == Some(SERVER_ARG) {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime for the server");
        runtime.block_on(serve());
        return;
    }
    // `cargo bench` passes criterion's arguments (`--bench`): nothing to choose.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let figures = runtime.block_on(measure());
    report(&figures);
}

/// The server: one tool, `flood`, that reports `RATE × SECONDS` steps.
#[derive(Clone)]
struct Flood;

impl ServerHandler for Flood {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let mut tool = Tool::new("flood", "reports progress fast", serde_json::Map::new());
        tool.annotations = Some(rmcp::model::ToolAnnotations::from_raw(
            None,
            Some(true),
            None,
            None,
            None,
        ));
        Ok(ListToolsResult::with_all_items(vec![tool]))
    }

    async fn call_tool(
        &self,
        _request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let Some(token) = context.meta.get_progress_token() else {
            return Err(ErrorData::invalid_params("no progress token", None));
        };
        let total = RATE * SECONDS;
        let started = tokio::time::Instant::now();
        for i in 0..total {
            // Paced in bursts of 50 (every 5 ms): the rate holds without a
            // timer per notification.
            if i % 50 == 0 {
                tokio::time::sleep_until(started + Duration::from_micros(i * 1_000_000 / RATE))
                    .await;
            }
            let p = ProgressNotificationParam::new(token.clone(), (i + 1) as f64)
                .with_total(total as f64);
            if context.peer.notify_progress(p).await.is_err() {
                break;
            }
        }
        let text = format!("sent {total} in {:.2} s", started.elapsed().as_secs_f64());
        Ok(CallToolResult::success(vec![ContentBlock::text(text)]).into())
    }
}

async fn serve() {
    let Ok(service) = Flood.serve(rmcp::transport::stdio()).await else {
        return;
    };
    let _ = service.waiting().await;
}

struct Figures {
    sent: u64,
    wall: Duration,
    cpu: Duration,
    events: usize,
    last: f64,
}

/// This process's CPU time so far (user + system).
fn cpu_time() -> Duration {
    // SAFETY: getrusage writes only into the struct it is given; a zeroed
    // `rusage` is a valid value of that plain C struct.
    #[allow(unsafe_code)]
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let tv = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
    };
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

async fn measure() -> Figures {
    let exe = std::env::current_exe().expect("the bench's own path");
    let config = McpConfig::from_json(
        &json!({"mcpServers": {"flood": {"command": exe, "args": [SERVER_ARG]}}}).to_string(),
    )
    .expect("the server's config");
    let host = Arc::new(ToolHost::with_options(ToolHostOptions {
        call_timeout: Duration::from_secs(60),
        ..Default::default()
    }));
    let failures = host.add_mcp_config(&config).await;
    assert!(
        failures.is_empty(),
        "the server did not start: {failures:?}"
    );
    // Connected and listed before anything is timed.
    host.list().await.expect("the flood tool");
    let turns = vec![
        ScriptedTurn {
            calls: vec![ScriptedCall {
                name: "flood".into(),
                arguments: json!({}),
            }],
            ..Default::default()
        },
        ScriptedTurn {
            text: Some("done".into()),
            ..Default::default()
        },
    ];
    let settings = PermissionSettings {
        mode: Mode::AutoAll,
        ..Default::default()
    };
    let chat = ChatSession::builder(Arc::new(FixedModel::new(ScriptedModel::new(turns))))
        .tools(host.clone())
        .permissions(Arc::new(Permissions::new(settings)))
        .build();
    let mut sub = chat.subscribe(0);
    let cpu_before = cpu_time();
    let started = Instant::now();
    let handle = chat.send("flood").expect("the message");
    let (mut events, mut last) = (0, 0.0);
    let mut wall = Duration::ZERO;
    while let Some(entry) = sub.next().await {
        match &entry.event {
            Event::ToolProgress { progress, .. } => {
                events += 1;
                last = *progress;
            }
            Event::ToolDone { .. } => {
                wall = started.elapsed();
                break;
            }
            _ => {}
        }
    }
    let cpu = cpu_time().saturating_sub(cpu_before);
    let _ = handle.await;
    host.shutdown().await;
    Figures {
        sent: RATE * SECONDS,
        wall,
        cpu,
        events,
        last,
    }
}

fn report(f: &Figures) {
    let secs = f.wall.as_secs_f64().max(1e-9);
    let rate = f.sent as f64 / secs;
    let cpu_share = f.cpu.as_secs_f64() / secs * 100.0;
    let table = format!(
        "| {} progress notifications at {RATE}/s over stdio | value |\n\
         | --- | --- |\n\
         | notifications per second reaching lrg | {rate:.0} |\n\
         | tool_progress events the subscriber got | {} |\n\
         | last progress shown | {} |\n\
         | {CPU_ROW} | {cpu_share:.1} |\n",
        f.sent, f.events, f.last,
    );
    println!("{table}");
    let met = if cpu_share < 5.0 && f.last == f.sent as f64 {
        "met"
    } else {
        "NOT met"
    };
    lrg_benches::figure_note(format!(
        "goal (issue 25): 10,000 progress notifications/s reach a subscriber, coalesced, \
         with the session under 5% of one core: {met} ({rate:.0}/s, {} events, {cpu_share:.1}% CPU)",
        f.events
    ));
    if let Ok(dir) = std::env::var("CRITERION_HOME") {
        let _ = std::fs::create_dir_all(&dir);
        std::fs::write(std::path::Path::new(&dir).join("summary.md"), &table)
            .expect("write summary.md");
    }
}
