//! `--model llama:FILE` end to end on a tiny random-weight GGUF written
//! offline: the engine loads in-process, its answers are constrained to
//! lrg's format (so even noise is a valid reply or a valid tool call), and
//! the run ends with a defined exit code.
#![cfg(feature = "llama")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::{Env, ran};
use lrg_llama::testing::{
    TinyModelSpec, TinyProjectorSpec, write_tiny_model, write_tiny_projector,
};

#[test]
fn a_tiny_gguf_runs_offline_with_tools() {
    let env = Env::new();
    write_tiny_model(&env.path("tiny.gguf"), &TinyModelSpec::default()).unwrap();
    let r = ran(env.lrg().args([
        "run",
        "--json",
        "--model",
        "llama:tiny.gguf",
        "--mcp",
        "lrg demo-server",
        "--max-steps",
        "2",
        "What notes do I have?",
    ]));
    // Random weights: it may answer, or keep calling tools until the limit.
    assert!(r.code == 0 || r.code == 3, "{r:?}");
    let lines: Vec<serde_json::Value> = r
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // Named by the engine (the GGUF's own name), on the llama provider.
    assert!(
        lines[0]["model"].as_str().unwrap().starts_with("llama:"),
        "{r:?}"
    );
    assert!(lines.iter().any(|l| l["type"] == "assistant_turn"), "{r:?}");
    // Every call the model made was one of the offered tools.
    for call in lines.iter().filter(|l| l["type"] == "tool_call") {
        let tool = call["tool"].as_str().unwrap();
        assert!(
            ["add_note", "delete_notes", "list_notes", "read_note"].contains(&tool),
            "{call}"
        );
    }
}

#[test]
fn a_missing_gguf_is_a_usage_error() {
    let r = ran(Env::new()
        .lrg()
        .args(["run", "--model", "llama:nope.gguf", "hi"]));
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("llama:nope.gguf"), "{r:?}");
    assert!(r.stderr.contains("no such file"), "{r:?}");
}

#[test]
fn a_missing_mmproj_is_a_usage_error_naming_the_flag() {
    let env = Env::new();
    write_tiny_model(&env.path("tiny.gguf"), &TinyModelSpec::default()).unwrap();
    let r = ran(env.lrg().args([
        "run",
        "--model",
        "llama:tiny.gguf",
        "--mmproj",
        "no-such-mmproj.gguf",
        "hi",
    ]));
    assert_eq!(r.code, 2, "{r:?}");
    let line = r
        .stderr
        .lines()
        .find(|l| l.contains("no-such-mmproj.gguf"))
        .unwrap_or_else(|| panic!("no line names the file: {r:?}"));
    assert!(line.contains("--mmproj"), "{line}");
}

#[test]
fn lrg_mmproj_names_the_projector_too() {
    let env = Env::new();
    write_tiny_model(&env.path("tiny.gguf"), &TinyModelSpec::default()).unwrap();
    let r = ran(env.lrg().env("LRG_MMPROJ", "also-missing.gguf").args([
        "run",
        "--model",
        "llama:tiny.gguf",
        "hi",
    ]));
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("also-missing.gguf"), "{r:?}");
}

#[test]
fn a_projector_loads_with_its_model_and_the_run_works() {
    let env = Env::new();
    write_tiny_model(&env.path("tiny.gguf"), &TinyModelSpec::default()).unwrap();
    write_tiny_projector(&env.path("mmproj.gguf"), &TinyProjectorSpec::default()).unwrap();
    let r = ran(env.lrg().args([
        "run",
        "--json",
        "--model",
        "llama:tiny.gguf",
        "--mmproj",
        "mmproj.gguf",
        // Short: the random model's answer only has to arrive.
        "--max-tokens",
        "48",
        "What is in the picture?",
    ]));
    assert!(r.code == 0 || r.code == 3, "{r:?}");
    assert!(r.stdout.contains("\"assistant_turn\""), "{r:?}");
}

#[test]
fn a_file_that_is_not_a_projector_is_a_usage_error_naming_the_flag() {
    let env = Env::new();
    write_tiny_model(&env.path("tiny.gguf"), &TinyModelSpec::default()).unwrap();
    let r = ran(env.lrg().args([
        "run",
        "--model",
        "llama:tiny.gguf",
        "--mmproj",
        "tiny.gguf",
        "hi",
    ]));
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr
            .contains("could not load the projector (--mmproj) tiny.gguf"),
        "{r:?}"
    );
}
