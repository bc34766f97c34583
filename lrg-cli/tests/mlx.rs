//! `--model mlx:DIR` end to end on a tiny random-weight model written
//! offline: the sidecar starts, its answers are constrained to lrg's format
//! (so even noise is a valid reply or a valid tool call), and the run ends
//! with a defined exit code. Needs `LRG_MLX_PYTHON` (or `python3`) with
//! mlx-lm and llguidance; skips loudly without, fails under `CI`.
#![cfg(feature = "mlx")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

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
