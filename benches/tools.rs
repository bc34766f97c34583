//! The cost `ToolHost` adds to a tool call: name lookup, the argument check
//! against the input schema (jsonschema), and the trip to the tool. Measured
//! for a Rust function tool, an in-process rmcp server (full MCP protocol, its
//! JSON-RPC messages handed over channels), a rejected call (the error message repeating the
//! schema), and a listing of 101 tools (`list_shared`, what the session asks
//! for before every model turn). Beside the in-process call: a
//! `read_mcp_resource` call to an in-process server (issue 25), on a host of
//! its own so the listing above keeps its 101 tools.

#![allow(clippy::expect_used)] // setup of a bench: failing loudly is the point

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use lrg_chat::tools::{ToolHost, Tools};
use lrg_providers::ToolAnnotations;
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{ServerCapabilities, ServerConfig};
use rmcp::{ServerHandler, tool, tool_handler, tool_router};
use serde_json::json;
use tokio_util::sync::CancellationToken;

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Move {
    /// Items to move.
    ids: Vec<u64>,
    /// Where to.
    folder: String,
    /// How to resolve clashes.
    on_clash: Option<Clash>,
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
enum Clash {
    Skip,
    Rename,
    Replace,
}

#[derive(Clone)]
struct Echo {
    tool_router: ToolRouter<Self>,
}

#[derive(serde::Deserialize, rmcp::schemars::JsonSchema)]
struct EchoArgs {
    text: String,
}

#[tool_router]
impl Echo {
    #[tool(description = "Send the text back", annotations(read_only_hint = true))]
    fn echo(&self, Parameters(a): Parameters<EchoArgs>) -> String {
        a.text
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for Echo {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }
}

/// An in-process server with one small text resource.
#[derive(Clone)]
struct Notes;

impl ServerHandler for Notes {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_resources()
                .enable_tools()
                .build(),
        )
    }

    async fn read_resource(
        &self,
        request: rmcp::model::ReadResourceRequestParams,
        _context: rmcp::service::RequestContext<rmcp::RoleServer>,
    ) -> Result<rmcp::model::ReadResourceResponse, rmcp::ErrorData> {
        let text = rmcp::model::ResourceContents::text("Buy milk. Call Ada.", request.uri);
        Ok(rmcp::model::ReadResourceResult::new(vec![text]).into())
    }
}

fn calls(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let host = ToolHost::new();
    host.add_fn(
        "move_items",
        "Move items",
        ToolAnnotations::default(),
        |m: Move| async move {
            let how = match m.on_clash {
                Some(Clash::Skip) => "skipping clashes",
                Some(Clash::Rename) => "renaming clashes",
                Some(Clash::Replace) | None => "replacing clashes",
            };
            Ok::<_, String>(format!("moved {} to {}, {how}", m.ids.len(), m.folder))
        },
    )
    .expect("add_fn");
    for i in 0..99 {
        host.add_fn(
            format!("tool_{i}"),
            "filler",
            ToolAnnotations::default(),
            |_: Move| async { Ok::<_, String>("") },
        )
        .expect("add_fn");
    }
    rt.block_on(host.add_in_process("mcp", || Echo {
        tool_router: Echo::tool_router(),
    }))
    .expect("in-process server");

    let valid = json!({"ids": [1, 2, 3, 4, 5, 6, 7, 8], "folder": "archive", "on_clash": "rename"});
    let invalid = json!({"ids": ["1"], "on_clash": "merge"});

    let mut g = c.benchmark_group("tools");
    g.bench_function("call_rust_fn", |b| {
        b.to_async(&rt).iter(|| async {
            black_box(
                host.call("move_items", valid.clone(), CancellationToken::new())
                    .await,
            )
        })
    });
    g.bench_function("reject_invalid_args", |b| {
        b.to_async(&rt).iter(|| async {
            black_box(
                host.call("move_items", invalid.clone(), CancellationToken::new())
                    .await,
            )
        })
    });
    g.bench_function("call_in_process_mcp", |b| {
        b.to_async(&rt).iter(|| async {
            black_box(
                host.call("echo", json!({"text": "hi"}), CancellationToken::new())
                    .await,
            )
        })
    });
    g.bench_function("list_101_tools", |b| {
        b.to_async(&rt)
            .iter(|| async { black_box(host.list_shared().await) })
    });
    let notes = ToolHost::new();
    rt.block_on(notes.add_in_process("notes", || Notes))
        .expect("in-process resource server");
    let read = json!({"server": "notes", "uri": "mem://notes/today"});
    g.bench_function("read_mcp_resource", |b| {
        b.to_async(&rt).iter(|| async {
            black_box(
                notes
                    .call("read_mcp_resource", read.clone(), CancellationToken::new())
                    .await,
            )
        })
    });
    g.finish();
    rt.block_on(host.shutdown());
    rt.block_on(notes.shutdown());
}

criterion_group!(benches, calls);
criterion_main!(benches);
