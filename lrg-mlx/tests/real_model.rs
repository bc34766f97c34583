//! Smoke test on real weights: `LRG_TEST_MLX_MODEL_DIR=/models/Qwen3-0.6B-4bit
//! LRG_MLX_PYTHON=… cargo test -p lrg-mlx --test all real_model -- --ignored`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::{config, five_tool_schema, msg, run, start, turn};
use lrg_providers::local_chat::{EngineRole, EngineStop, LocalEngine};
use serde_json::Value;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs real MLX weights in LRG_TEST_MLX_MODEL_DIR"]
async fn a_real_model_answers_in_the_schema_and_reuses_its_cache() {
    let dir = std::env::var_os("LRG_TEST_MLX_MODEL_DIR")
        .expect("set LRG_TEST_MLX_MODEL_DIR to an MLX model directory");
    let python = lrg_mlx::testing::python_with_mlx().unwrap();
    let engine = start(config(&python, dir.as_ref())).await.unwrap();
    eprintln!("{:?}", engine.info());
    assert!(engine.context_window() >= 2048);
    let first = vec![
        msg(
            EngineRole::System,
            "You are a helpful assistant with file tools.",
        ),
        msg(EngineRole::User, "Read the file /etc/hosts."),
    ];
    let out = run(
        &engine,
        turn(first.clone(), five_tool_schema(), 1, 0.0, 400),
    )
    .await
    .unwrap();
    eprintln!("{} {:?}", out.text, engine.stats());
    assert_eq!(out.stop, EngineStop::Done);
    let answer: Value = serde_json::from_str(&out.text).unwrap();
    assert!(answer["analysis"].is_string());

    let mut second = first;
    second.push(msg(EngineRole::Assistant, &out.text));
    second.push(msg(
        EngineRole::User,
        "Result of read_file: 127.0.0.1 localhost",
    ));
    run(&engine, turn(second, five_tool_schema(), 1, 0.0, 400))
        .await
        .unwrap();
    let stats = engine.stats();
    eprintln!("{stats:?}");
    assert!(
        stats.tokens_evaluated < stats.prompt_tokens / 2,
        "{stats:?}"
    );
}
