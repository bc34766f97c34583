//! Tool search (`lrg_chat::tools::search`, issue 30): the BM25 index over the
//! 300 generated tools of the tests' fixture, a `search_tools` query over
//! 1,000 of them, and, as notes: recall@5 over the 50 labelled tasks, and
//! the size of the first request's tools with search on against off (what
//! a model is sent before it has searched anything).

#![allow(clippy::expect_used)] // setup of a bench: failing loudly is the point

#[path = "../lrg-chat/tests/tool_search_support/catalog.rs"]
mod catalog;

use std::hint::black_box;
use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};
use lrg_chat::tools::search::{ToolIndex, ToolSearch};
use lrg_chat::tools::{ToolHost, Tools as _};
use lrg_chat::{ChatSession, FixedModel, SessionConfig};
use lrg_providers::{ScriptedModel, ScriptedTurn, ToolAnnotations, ToolSpec};
use serde_json::json;

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Args {
    /// Which one: its id or name.
    #[allow(dead_code)]
    id: Option<String>,
    /// Words to search for, or the new content.
    #[allow(dead_code)]
    text: Option<String>,
}

fn host_of(n: usize) -> Arc<ToolHost> {
    let host = Arc::new(ToolHost::new());
    for (name, description, read_only) in catalog::catalog_of(n) {
        let annotations = ToolAnnotations {
            read_only_hint: Some(read_only),
            ..Default::default()
        };
        host.add_fn(name, description, annotations, |_: Args| async {
            Ok::<_, String>("done")
        })
        .expect("a generated tool");
    }
    host
}

/// The tools of a first request as an OpenAI-style body sends them.
fn tools_bytes(tools: &[ToolSpec]) -> usize {
    tools
        .iter()
        .map(|t| {
            json!({"type": "function", "function": {"name": t.name,
                "description": t.description, "parameters": t.input_schema}})
            .to_string()
            .len()
        })
        .sum()
}

fn first_request_tools(
    host: &Arc<ToolHost>,
    search: ToolSearch,
    runtime: &tokio::runtime::Runtime,
) -> Vec<ToolSpec> {
    let model = ScriptedModel::new(vec![ScriptedTurn {
        text: Some("ok".into()),
        ..Default::default()
    }]);
    let session = ChatSession::builder(Arc::new(FixedModel::new(model.clone())))
        .config(SessionConfig {
            tool_search: search,
            ..SessionConfig::default()
        })
        .tools(host.clone())
        .build();
    runtime.block_on(async {
        let handle = session
            .send("What's the weather forecast for Lisbon tomorrow?")
            .expect("send");
        let _ = handle.await;
    });
    model.requests()[0].tools.to_vec()
}

fn bench(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let host300 = host_of(300);
    let specs300 = runtime.block_on(host300.list()).expect("list");
    let host1000 = host_of(1000);
    let specs1000 = runtime.block_on(host1000.list()).expect("list");
    let index300 = ToolIndex::new(&specs300);
    let index1000 = ToolIndex::new(&specs1000);

    let hits = catalog::TASKS
        .iter()
        .filter(|(task, tool)| index300.search(task, 5).contains(tool))
        .count();
    lrg_benches::figure_note(format!(
        "tool search recall@5 over {} labelled tasks, 300 tools: {:.2} ({hits} found)",
        catalog::TASKS.len(),
        hits as f64 / catalog::TASKS.len() as f64
    ));
    let off = first_request_tools(&host300, ToolSearch::Off, &runtime);
    let on = first_request_tools(&host300, ToolSearch::Auto, &runtime);
    let (off_bytes, on_bytes) = (tools_bytes(&off), tools_bytes(&on));
    lrg_benches::figure_note(format!(
        "first request with 300 tools: search off {} tools, {} bytes (~{} tokens); search on {} tools, \
         {} bytes (~{} tokens): {:.1}% of off (goal ≤ 15%)",
        off.len(),
        off_bytes,
        off_bytes / 3,
        on.len(),
        on_bytes,
        on_bytes / 3,
        100.0 * on_bytes as f64 / off_bytes as f64
    ));

    let mut g = c.benchmark_group("tool_search");
    g.bench_function("index_300_tools", |b| {
        b.iter(|| black_box(ToolIndex::new(black_box(&specs300))))
    });
    g.bench_function("search_1000_tools", |b| {
        b.iter(|| {
            black_box(index1000.search(black_box("what's the weather forecast in Lisbon"), 5))
        })
    });
    g.bench_function("search_300_tools", |b| {
        b.iter(|| black_box(index300.search(black_box("delete the old invoice"), 5)))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
