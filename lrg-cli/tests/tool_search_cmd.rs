//! Tool search and per-server tool config from the command line: `lrg
//! tools` lists a tool the server's config denies as denied (never
//! offered) and says where each verdict comes from; `lrg run --tool-search
//! on` offers `search_tools`, whose search is a `tools_found` event.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::{Env, ran};
use serde_json::Value;

fn demo_config(env: &Env) {
    let lrg = env!("CARGO_BIN_EXE_lrg");
    env.file(
        "mcp.json",
        &format!(
            r#"{{"mcpServers": {{"notes": {{"command": "{lrg}", "args": ["demo-server"],
                "tools": {{"deny": ["delete_*"]}}, "trust": "all"}}}}}}"#
        ),
    );
}

#[test]
fn lrg_tools_shows_config_denials_and_verdict_sources() {
    let env = Env::new();
    demo_config(&env);
    let r = ran(env.lrg().args([
        "tools",
        "--json",
        "--mcp-config",
        "mcp.json",
        "--deny",
        "read_note",
    ]));
    assert_eq!(r.code, 0, "{r:?}");
    let out: Value = serde_json::from_str(&r.stdout).unwrap();
    let tool = |name: &str| {
        out["tools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("{name} missing: {out}"))
    };
    let deleted = tool("delete_notes");
    assert_eq!(deleted["permission"], "denied");
    assert_eq!(deleted["because"], "server config");
    let added = tool("add_note");
    assert_eq!(added["permission"], "allow", "trust all: {added}");
    assert_eq!(added["because"], "server config");
    let read = tool("read_note");
    assert_eq!(read["permission"], "block");
    assert_eq!(read["because"], "rule", "the person's rule comes first");
}

#[test]
fn run_with_tool_search_on_answers_a_search() {
    let env = Env::new();
    demo_config(&env);
    env.file(
        "s.json",
        r#"[{"calls": [{"name": "search_tools", "arguments": {"query": "list my notes"}}]},
            {"calls": [{"name": "list_notes", "arguments": {}}]},
            {"text": "You have notes."}]"#,
    );
    let r = ran(env.lrg().args([
        "run",
        "--json",
        "--tool-search",
        "on",
        "--model",
        "script:s.json",
        "--mcp-config",
        "mcp.json",
        "show my notes",
    ]));
    assert_eq!(r.code, 0, "{r:?}");
    let found: Vec<Value> = r
        .stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["type"] == "tools_found")
        .collect();
    assert!(
        found
            .iter()
            .any(|e| e["query"] == "list my notes" && e["names"][0] == "list_notes"),
        "{r:?}"
    );
    assert!(r.stdout.contains(r#""type":"tool_done""#), "{r:?}");
    let r = ran(env.lrg().args([
        "run",
        "--tool-search",
        "sometimes",
        "--model",
        "script:s.json",
        "x",
    ]));
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("auto, on or off"), "{r:?}");
}
