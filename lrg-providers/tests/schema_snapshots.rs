//! Snapshots of what schema shaping makes of a corpus of real tool schemas: two
//! MCP servers' tools, schemars-generated argument types, hand-written choices.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::schema_corpus;

use lrg_providers::schema::{SchemaTarget, grammar_schema, portable_tool_schema, split_choice};
use schema_corpus::{Tool, fixture, fixtures_dir, schemars_tools};
use serde_json::{Map, Value, json};

/// The argument string cap DESIGN.md gives local tool calls.
const CAP: u32 = 1_000;

/// Everything shaping makes of one tool's schema.
fn shapes(tool: &Tool) -> Value {
    let grammar =
        grammar_schema(&tool.schema, CAP).unwrap_or_else(|e| panic!("{}: {e}", tool.name));
    let branches = split_choice(grammar.clone()).unwrap_or_else(|e| panic!("{}: {e}", tool.name));
    let openai = portable_tool_schema(&tool.schema, SchemaTarget::OpenAi).unwrap();
    let anthropic = portable_tool_schema(&tool.schema, SchemaTarget::Anthropic).unwrap();
    let gemini = portable_tool_schema(&tool.schema, SchemaTarget::Gemini).unwrap();
    // OpenAI and Anthropic take the same JSON Schema; one snapshot covers both.
    assert_eq!(openai, anthropic, "{}", tool.name);
    let mut out = Map::new();
    out.insert("grammar".into(), grammar);
    if branches.len() > 1 {
        out.insert("grammar_choices".into(), Value::Array(branches));
    }
    out.insert("openai_anthropic".into(), openai);
    out.insert("gemini".into(), gemini);
    Value::Object(out)
}

fn snapshot_of(tools: &[Tool]) -> Value {
    Value::Object(
        tools
            .iter()
            .map(|tool| (tool.name.clone(), shapes(tool)))
            .collect(),
    )
}

#[test]
fn mcp_server_everything() {
    insta::assert_json_snapshot!(snapshot_of(&fixture("mcp-server-everything.json")));
}

#[test]
fn mcp_server_filesystem() {
    insta::assert_json_snapshot!(snapshot_of(&fixture("mcp-server-filesystem.json")));
}

#[test]
fn hand_written_choices() {
    insta::assert_json_snapshot!(snapshot_of(&fixture("choices.json")));
}

#[test]
fn schemars_types() {
    insta::assert_json_snapshot!(snapshot_of(&schemars_tools()));
}

/// `schemars.json` (used by the bench and the corpus tests) is what the types in
/// `schema_corpus` generate today.
#[test]
fn schemars_fixture_is_current() {
    let generated: Vec<Value> = schemars_tools()
        .into_iter()
        .map(|tool| json!({"name": tool.name.trim_start_matches("schemars/"), "inputSchema": tool.schema}))
        .collect();
    let path = fixtures_dir().join("schemars.json");
    let text = serde_json::to_string_pretty(&generated).unwrap() + "\n";
    if std::env::var_os("UPDATE_SCHEMA_FIXTURES").is_some() {
        std::fs::write(&path, &text).unwrap();
    }
    let saved = std::fs::read_to_string(&path).unwrap_or_default();
    // Compared as JSON, not text: key order depends on serde_json's
    // preserve_order, which feature unification may turn on.
    let saved: Value = serde_json::from_str(&saved).unwrap_or(Value::Null);
    assert!(
        saved == Value::Array(generated),
        "{} is stale: rerun with UPDATE_SCHEMA_FIXTURES=1",
        path.display()
    );
}
