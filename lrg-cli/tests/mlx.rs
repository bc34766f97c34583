//! `--model mlx:DIR` end to end on a tiny random-weight model written
//! offline: the sidecar starts, its answers are constrained to lrg's format
//! (so even noise is a valid reply or a valid tool call), and the run ends
//! with a defined exit code. With the tool-habit model (random weights plus
//! crafted circuits: call first, reply after a result) the whole agent loop
//! runs: a tool call, its result, a reply. Needs `LRG_MLX_PYTHON` (or `python3`) with
//! mlx-lm and llguidance; skips loudly without, fails under `CI`.
#![cfg(feature = "mlx")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::path::PathBuf;

use common::{Env, ran};

fn python() -> Option<PathBuf> {
    match lrg_mlx::testing::python_with_mlx() {
        Ok(p) => Some(p),
        Err(why) if std::env::var_os("CI").is_some() => {
            panic!("the MLX CLI test needs Python with mlx under CI: {why}")
        }
        Err(why) => {
            eprintln!("SKIPPED: lrg run --model mlx: test: {why}");
            None
        }
    }
}

fn events(r: &common::Ran) -> Vec<serde_json::Value> {
    r.stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn a_tiny_mlx_model_makes_schema_valid_tool_calls() {
    let Some(python) = python() else { return };
    let env = Env::new();
    // Biased to end strings early: every turn is a short, greedy tool call.
    lrg_mlx::testing::write_terse_tiny_model(&python, &env.path("tiny")).unwrap();
    let r = ran(env.lrg().env("LRG_MLX_PYTHON", &python).args([
        "run",
        "--json",
        "--model",
        "mlx:tiny",
        "--mcp",
        "lrg demo-server",
        "--max-steps",
        "2",
        "What notes do I have?",
    ]));
    assert_eq!(r.code, 3, "{r:?}");
    let lines = events(&r);
    assert_eq!(lines[0]["model"], "mlx:tiny", "{r:?}");
    let calls: Vec<&serde_json::Value> =
        lines.iter().filter(|l| l["type"] == "tool_call").collect();
    assert_eq!(calls.len(), 2, "{r:?}");
    for call in calls {
        // One of the demo server's tools, with arguments its schema accepts.
        match call["tool"].as_str().unwrap() {
            "list_notes" => {}
            "read_note" => assert!(call["arguments"]["id"].is_u64(), "{call}"),
            "add_note" => assert!(call["arguments"]["text"].is_string(), "{call}"),
            "delete_notes" => assert!(
                call["arguments"]["ids"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .all(serde_json::Value::is_u64),
                "{call}"
            ),
            other => panic!("not an offered tool: {other}"),
        }
    }
    let usage = lines.iter().find(|l| l["type"] == "usage").unwrap();
    assert_eq!(usage["context_window"], 32_768, "{r:?}");
}

/// The demo server's tools and their input schemas, as `lrg tools` lists them.
fn demo_schemas(env: &Env) -> serde_json::Map<String, serde_json::Value> {
    let r = ran(env.lrg().args([
        "tools",
        "--mcp",
        "lrg demo-server",
        "--json",
        "--schema",
        "openai",
    ]));
    assert_eq!(r.code, 0, "{r:?}");
    let listed: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    listed["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["name"].as_str().unwrap().to_string(), t["schema"].clone()))
        .collect()
}

#[test]
fn a_tiny_mlx_model_calls_a_tool_then_replies() {
    let Some(python) = python() else { return };
    let env = Env::new();
    lrg_mlx::testing::write_tool_habit_model(&python, &env.path("tiny")).unwrap();
    let r = ran(env.lrg().env("LRG_MLX_PYTHON", &python).args([
        "run",
        "--json",
        "--model",
        "mlx:tiny",
        "--mcp",
        "lrg demo-server",
        "What notes do I have?",
    ]));
    assert_eq!(r.code, 0, "{r:?}");
    let lines = events(&r);
    let numbered: Vec<&serde_json::Value> =
        lines.iter().filter(|l| l.get("seq").is_some()).collect();
    let kinds: Vec<&str> = numbered
        .iter()
        .map(|l| l["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        [
            "user_message",
            "busy",
            "usage",
            "assistant_turn",
            "tool_call",
            "tool_running",
            "tool_done",
            "usage",
            "assistant_turn",
            "busy"
        ],
        "{r:?}"
    );

    // The call: an offered tool, with arguments the server's schema accepts.
    let call = numbered[4];
    let schemas = demo_schemas(&env);
    let tool = call["tool"].as_str().unwrap();
    let schema = schemas
        .get(tool)
        .unwrap_or_else(|| panic!("not a demo tool: {call}"));
    let validator = jsonschema::validator_for(schema).unwrap();
    assert!(validator.is_valid(&call["arguments"]), "{call} vs {schema}");
    // Its result, from the real server.
    let done = numbered[6];
    assert_eq!(done["call_id"], call["call_id"], "{r:?}");
    assert_eq!(done["ok"], true, "{r:?}");
    assert!(
        done["text"]
            .as_str()
            .unwrap()
            .contains("Buy oat milk and coffee beans"),
        "{r:?}"
    );
    // Then a reply: text, no second call, no control token.
    let reply = numbered[8];
    assert_eq!(reply["text"], "Here it is.", "{r:?}");
    assert!(!r.stdout.contains("<|"), "a control token leaked: {r:?}");
    // Turn 2 reused turn 1's cache: only the new tokens were evaluated.
    let (first, second) = (numbered[2], numbered[7]);
    assert_eq!(first["context_window"], 32_768, "{r:?}");
    assert!(
        second["cached_prompt_tokens"].as_u64().unwrap()
            >= first["prompt_tokens"].as_u64().unwrap(),
        "{first} then {second}"
    );
}

#[test]
fn a_tiny_mlx_model_answers_in_one_turn() {
    let Some(python) = python() else { return };
    let env = Env::new();
    lrg_mlx::testing::write_tiny_model(&python, &env.path("tiny"), None).unwrap();
    let r = ran(env.lrg().env("LRG_MLX_PYTHON", &python).args([
        "run",
        "--json",
        "--model",
        "mlx:tiny",
        "--mcp",
        "lrg demo-server",
        "--max-steps",
        "1",
        "What notes do I have?",
    ]));
    // Random weights: a reply (0) or a call that hits the step limit (3).
    assert!(r.code == 0 || r.code == 3, "{r:?}");
    let lines = events(&r);
    assert!(lines.iter().any(|l| l["type"] == "assistant_turn"), "{r:?}");
    if r.code == 0 {
        assert!(!r.stdout.contains("<|"), "a control token leaked: {r:?}");
    }
}

#[test]
fn a_missing_python_is_a_usage_error_naming_the_fix() {
    let env = Env::new();
    std::fs::create_dir(env.path("model")).unwrap();
    std::fs::write(env.path("model/config.json"), "{}").unwrap();
    let r = ran(env
        .lrg()
        .env("LRG_MLX_PYTHON", "/nonexistent/python3")
        .args(["run", "--model", "mlx:model", "hi"]));
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr.contains("no Python at `/nonexistent/python3`"),
        "{r:?}"
    );
    assert!(r.stderr.contains("LRG_MLX_PYTHON"), "{r:?}");
}

#[test]
fn a_directory_that_is_not_a_model_is_a_usage_error() {
    let r = ran(Env::new()
        .lrg()
        .args(["run", "--model", "mlx:nowhere", "hi"]));
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("not an MLX model directory"), "{r:?}");
}
