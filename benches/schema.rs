//! Schema shaping for 40 typical tools: the corpus `lrg-providers` tests with
//! (two real MCP servers' tools, schemars-generated argument types, hand-written
//! choices), through `grammar_schema` + `split_choice` (a local model's turn)
//! and through `portable_tool_schema` for each cloud API. Goal: well under 1 ms
//! for all 40.

use std::hint::black_box;
use std::path::PathBuf;

use criterion::{Criterion, criterion_group, criterion_main};
use lrg_providers::schema::{SchemaTarget, grammar_schema, portable_tool_schema, split_choice};
use lrg_providers::typed::{StrictTarget, strict_schema};
use serde_json::Value;

const TOOLS: usize = 40;
const STRING_CAP: u32 = 1_000;

/// 40 input schemas, taken in turn from the fixture files.
fn tools() -> Vec<Value> {
    let dir =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../lrg-providers/tests/fixtures/schemas");
    let mut all = Vec::new();
    for file in [
        "mcp-server-everything.json",
        "mcp-server-filesystem.json",
        "choices.json",
        "schemars.json",
    ] {
        let path = dir.join(file);
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let tools: Vec<Value> =
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        all.extend(tools.into_iter().map(|tool| tool["inputSchema"].clone()));
    }
    assert!(!all.is_empty(), "no fixtures in {}", dir.display());
    all.iter().cycle().take(TOOLS).cloned().collect()
}

fn shaping(c: &mut Criterion) {
    let tools = tools();
    let mut group = c.benchmark_group("schema_40_tools");
    // For scale: copying the 40 schemas, which every shaping does at least once.
    group.bench_function("baseline_clone", |b| {
        b.iter(|| black_box(&tools).clone());
    });
    group.bench_function("grammar_schema+split_choice", |b| {
        b.iter(|| {
            let mut branches = 0;
            for tool in &tools {
                let shaped =
                    grammar_schema(black_box(tool), STRING_CAP).unwrap_or_else(|e| panic!("{e}"));
                branches += split_choice(shaped).unwrap_or_else(|e| panic!("{e}")).len();
            }
            branches
        });
    });
    for (name, target) in [
        ("openai", SchemaTarget::OpenAi),
        ("anthropic", SchemaTarget::Anthropic),
        ("gemini", SchemaTarget::Gemini),
    ] {
        group.bench_function(format!("portable_tool_schema/{name}"), |b| {
            b.iter(|| {
                for tool in &tools {
                    black_box(
                        portable_tool_schema(black_box(tool), target)
                            .unwrap_or_else(|e| panic!("{e}")),
                    );
                }
            });
        });
    }
    group.finish();
}

/// A typed answer's schema shaped to strict-mode rules, per request: the
/// largest schema of the corpus (by its JSON), against a deep copy of it.
/// `OutputSchema` keeps the shaped form, so a session pays this once per
/// schema; the figure is what a caller shaping per request would pay.
fn strict_shaping(c: &mut Criterion) {
    let largest = tools()
        .into_iter()
        .max_by_key(|schema| schema.to_string().len())
        .unwrap_or_else(|| panic!("no schema in the corpus"));
    let mut group = c.benchmark_group("typed_answer_largest_schema");
    group.bench_function("baseline_clone", |b| {
        b.iter(|| black_box(&largest).clone());
    });
    for (name, target) in [
        ("openai", StrictTarget::OpenAi),
        ("anthropic", StrictTarget::Anthropic),
    ] {
        group.bench_function(format!("strict_schema/{name}"), |b| {
            b.iter(|| black_box(strict_schema(black_box(&largest), target)));
        });
    }
    group.finish();
}

criterion_group!(benches, shaping, strict_shaping);
criterion_main!(benches);
