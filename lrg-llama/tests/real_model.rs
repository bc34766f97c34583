//! Smoke test with real weights: `LRG_TEST_MODEL_GGUF=/path/model.gguf cargo
//! test -p lrg-llama --test real_model -- --ignored --nocapture`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{msg, run, turn};
use lrg_llama::testing::{AnswerCaps, answer_schema, sample_tools};
use lrg_llama::{LlamaConfig, LlamaEngine};
use lrg_providers::local_chat::{EngineRole, EngineStop};
use serde_json::Value;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs real weights in LRG_TEST_MODEL_GGUF"]
async fn a_real_model_answers_within_the_schema_and_reuses_its_cache() {
    let path =
        std::env::var("LRG_TEST_MODEL_GGUF").expect("set LRG_TEST_MODEL_GGUF to a GGUF file");
    let engine = tokio::task::spawn_blocking(move || {
        LlamaEngine::load(LlamaConfig::new(path).with_n_ctx(8192))
    })
    .await
    .unwrap()
    .unwrap();
    let tools = sample_tools(8, &AnswerCaps::DESIGN);
    let schema = answer_schema(&tools, &AnswerCaps::DESIGN);
    let validator = jsonschema::validator_for(&schema).unwrap();
    let system = "You are a helpful assistant with tools. Answer in JSON: think briefly in \"analysis\", \
                  then either \"call\" one tool or \"reply\" to the user.\nTools: read_file(path), \
                  write_file(path, content), list_directory(path), search_files(pattern), run_command(command), \
                  fetch_url(url), create_issue(title, body), send_email(to, subject, body).";
    let mut messages = vec![
        msg(EngineRole::System, system),
        msg(EngineRole::User, "What is in /etc/hosts?"),
    ];
    let out = run(&engine, turn(messages.clone(), schema.clone(), 1, 0.0, 400))
        .await
        .unwrap();
    println!("turn 1: {}\n{:?}", out.text, engine.stats());
    assert_eq!(out.stop, EngineStop::Done);
    let answer: Value = serde_json::from_str(&out.text).unwrap();
    assert!(validator.is_valid(&answer), "{answer}");

    messages.push(msg(EngineRole::Assistant, &out.text));
    messages.push(msg(
        EngineRole::User,
        "Result of read_file: {\"text\":\"127.0.0.1 localhost\"}",
    ));
    let out = run(&engine, turn(messages, schema, 1, 0.0, 400))
        .await
        .unwrap();
    let stats = engine.stats();
    println!("turn 2: {}\n{stats:?}", out.text);
    assert!(validator.is_valid(&serde_json::from_str::<Value>(&out.text).unwrap()));
    assert!(
        stats.tokens_evaluated < stats.prompt_tokens / 2,
        "{stats:?}"
    );
}
