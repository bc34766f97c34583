//! Progress, server logs and cancellation of MCP calls, through the
//! library: server-everything's `trigger-long-running-operation` (npm
//! fixtures; see `tools_npm`), and in-process servers that flood the
//! session with 10,000 progress notifications and 1,000 warnings, and one
//! that waits until it is cancelled.

// Logging is marked deprecated by SEP-2577; servers still send it.
#![allow(deprecated)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use lrg_chat::events::Event;
use lrg_chat::tools::{McpConfig, ToolHost, ToolHostOptions};
use lrg_chat::{ChatSession, FixedModel, Mode, PermissionSettings, Permissions};
use lrg_providers::{ScriptedModel, ScriptedTurn};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult,
    LoggingLevel, LoggingMessageNotificationParam, PaginatedRequestParams,
    ProgressNotificationParam, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::json;

use crate::session_support::{calls, finish, reply, wait_for};
use crate::tools_npm::server_script;

const WAIT: Duration = Duration::from_secs(60);

fn session(host: &Arc<ToolHost>, turns: Vec<ScriptedTurn>) -> ChatSession {
    let settings = PermissionSettings {
        mode: Mode::AutoAll,
        ..Default::default()
    };
    ChatSession::builder(Arc::new(FixedModel::new(ScriptedModel::new(turns))))
        .tools(host.clone())
        .permissions(Arc::new(Permissions::new(settings)))
        .build()
}

/// Every live `tool_progress` until the call's `tool_done`, as
/// `(progress, total)`.
async fn progress_until_done(
    sub: &mut lrg_chat::Subscription,
) -> (Vec<(f64, Option<f64>)>, String) {
    let mut seen = Vec::new();
    loop {
        let entry = wait_for(sub, |e| {
            matches!(e, Event::ToolProgress { .. } | Event::ToolDone { .. })
        })
        .await;
        match &entry.event {
            Event::ToolProgress {
                progress, total, ..
            } => {
                assert_eq!(entry.seq, None, "progress is live only");
                seen.push((*progress, *total));
            }
            Event::ToolDone { text, .. } => return (seen, text.clone()),
            _ => unreachable!(),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_everything_reports_each_step() {
    let Some(script) = server_script("server-everything") else {
        return;
    };
    tokio::time::timeout(WAIT, async {
        let config = McpConfig::from_json(
            &json!({"mcpServers": {"everything": {"command": "node", "args": [script, "stdio"]}}})
                .to_string(),
        )
        .unwrap();
        let host = Arc::new(ToolHost::with_options(ToolHostOptions {
            connect_timeout: Duration::from_secs(60),
            ..Default::default()
        }));
        assert!(host.add_mcp_config(&config).await.is_empty());
        let chat = session(
            &host,
            vec![
                calls(&[(
                    "trigger-long-running-operation",
                    json!({"duration": 1, "steps": 4}),
                )]),
                reply("done"),
            ],
        );
        let mut sub = chat.subscribe(0);
        let handle = chat.send("work").unwrap();
        let (seen, text) = progress_until_done(&mut sub).await;
        assert_eq!(
            seen,
            vec![
                (1.0, Some(4.0)),
                (2.0, Some(4.0)),
                (3.0, Some(4.0)),
                (4.0, Some(4.0))
            ],
            "one per step"
        );
        assert!(text.contains("Long running operation completed"), "{text}");
        finish(handle).await;
        host.shutdown().await;
    })
    .await
    .expect("the test took too long");
}

/// An in-process server whose tools flood (`flood`: 10,000 progress
/// notifications and 1,000 warnings as fast as it can) or wait until
/// cancelled (`wait`, which notes that it was).
#[derive(Clone, Default)]
struct Noisy {
    started: Arc<AtomicBool>,
    cancelled: Arc<AtomicBool>,
}

impl ServerHandler for Noisy {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_logging()
                .build(),
        )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let tool = |name: &str| {
            let mut tool = Tool::new(name.to_owned(), "noisy", serde_json::Map::new());
            tool.annotations = Some(rmcp::model::ToolAnnotations::from_raw(
                None,
                Some(true),
                None,
                None,
                None,
            ));
            tool
        };
        Ok(ListToolsResult::with_all_items(vec![
            tool("flood"),
            tool("wait"),
        ]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if request.name == "wait" {
            self.started.store(true, Ordering::SeqCst);
            context.ct.cancelled().await;
            self.cancelled.store(true, Ordering::SeqCst);
            return Ok(CallToolResult::success(vec![ContentBlock::text("cancelled")]).into());
        }
        let token = context.meta.get_progress_token().expect("a progress token");
        for i in 1..=10_000u32 {
            let mut p = ProgressNotificationParam::new(token.clone(), f64::from(i));
            p.total = Some(10_000.0);
            let _ = context.peer.notify_progress(p).await;
            if i % 10 == 0 {
                let line = LoggingMessageNotificationParam::new(
                    LoggingLevel::Warning,
                    json!(format!("warning {i}")),
                );
                let _ = context.peer.notify_logging_message(line).await;
            }
        }
        Ok(CallToolResult::success(vec![ContentBlock::text("flooded")]).into())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_progress_and_logs_is_coalesced() {
    let host = Arc::new(ToolHost::new());
    host.add_in_process("noisy", Noisy::default).await.unwrap();
    let chat = session(&host, vec![calls(&[("flood", json!({}))]), reply("ok")]);
    let mut sub = chat.subscribe(0);
    let started = Instant::now();
    let handle = chat.send("flood").unwrap();
    let (seen, text) = progress_until_done(&mut sub).await;
    let took = started.elapsed().as_secs_f64();
    assert_eq!(text, "flooded");
    assert_eq!(
        seen.last(),
        Some(&(10_000.0, Some(10_000.0))),
        "the last is shown"
    );
    // Each whole percent at most, plus ten a second.
    let most = 101 + (took * 10.0).ceil() as usize;
    assert!(
        seen.len() <= most,
        "{} progress events in {took:.2} s",
        seen.len()
    );
    assert!(seen.windows(2).all(|w| w[0].0 < w[1].0), "in order");
    finish(handle).await;
    let logs = chat
        .events()
        .entries()
        .iter()
        .filter(|e| matches!(e.event, Event::ServerLog { .. }))
        .count();
    // Ten a second reach the log; the rest go to tracing only.
    assert!(
        (1..=10 * (took.ceil() as usize + 1)).contains(&logs),
        "{logs} server_log events in {took:.2} s"
    );
    assert!(chat.events().last_seq() < 100, "the log is not flooded");
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_cancels_a_running_call_on_its_server() {
    let server = Noisy::default();
    let cancelled = server.cancelled.clone();
    let started = server.started.clone();
    let host = Arc::new(ToolHost::new());
    host.add_in_process("noisy", move || server.clone())
        .await
        .unwrap();
    let chat = session(&host, vec![calls(&[("wait", json!({}))]), reply("never")]);
    let mut sub = chat.subscribe(0);
    let handle = chat.send("wait").unwrap();
    wait_for(&mut sub, |e| matches!(e, Event::ToolRunning { .. })).await;
    while !started.load(Ordering::SeqCst) {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    chat.stop();
    let done = wait_for(&mut sub, |e| matches!(e, Event::ToolDone { .. })).await;
    let Event::ToolDone { ok, text, .. } = &done.event else {
        unreachable!()
    };
    assert!(!ok);
    assert!(text.contains("was told to cancel it"), "{text}");
    assert_eq!(finish(handle).await, lrg_chat::TurnOutcome::Stopped);
    // `notifications/cancelled` reached the server.
    for _ in 0..50 {
        if cancelled.load(Ordering::SeqCst) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(cancelled.load(Ordering::SeqCst), "the server was not told");
    host.shutdown().await;
}
