//! The real sidecar on the tiny random-weight model: constrained answers,
//! prompt-cache reuse, cancellation, a killed sidecar, load errors.
//!
//! The model's answers are gibberish; that they still always match the schema
//! is the point. Without a Python that has mlx these tests print a notice and
//! pass; under `CI` they fail.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::time::Duration;

use common::{
    ANALYSIS_CAP, ARGUMENT_CAP, REPLY_CAP, STEP, config, engine, five_tool_schema,
    long_note_schema, msg, run, start, tiny_model, turn,
};
use futures::StreamExt;
use lrg_mlx::{MlxConfig, MlxEngine};
use lrg_providers::ProviderError;
use lrg_providers::local_chat::{EngineEvent, EngineRole, EngineStop, LocalEngine};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

const SYSTEM: &str = "You are a careful assistant. Answer with a tool call or a reply.\n\
Tools:\n- read_file(path, offset?)\n- write_file(path, content)\n- list_directory(path, recursive?)\n\
- run_command(command, timeout_s?)\n- create_issue(title, body, labels?)";

fn chars(v: &Value) -> usize {
    v.as_str().map_or(0, |s| s.chars().count())
}

/// The caps checked by hand too, so a validator ignoring maxLength could not
/// hide a grammar bug.
fn check_caps(answer: &Value) {
    assert!(
        chars(&answer["analysis"]) <= ANALYSIS_CAP as usize,
        "{answer}"
    );
    assert!(chars(&answer["reply"]) <= REPLY_CAP as usize, "{answer}");
    if let Some(call) = answer["call"].as_object() {
        for args in call.values() {
            for v in args.as_object().unwrap().values() {
                assert!(chars(v) <= ARGUMENT_CAP as usize, "{answer}");
                for item in v.as_array().into_iter().flatten() {
                    assert!(chars(item) <= ARGUMENT_CAP as usize, "{answer}");
                }
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_sampled_answer_matches_a_five_tool_schema_across_20_seeds() {
    let Some(engine) = engine().await else { return };
    let schema = five_tool_schema();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let messages = vec![
        msg(EngineRole::System, SYSTEM),
        msg(EngineRole::User, "Please read /etc/hosts and tell me."),
    ];
    let mut branches = std::collections::BTreeSet::new();
    for seed in 0..20 {
        let out = run(
            &engine,
            turn(messages.clone(), schema.clone(), seed, 1.0, 3000),
        )
        .await
        .unwrap();
        eprintln!(
            "seed {seed}: {} ({} tokens)",
            out.text, out.usage.completion_tokens
        );
        assert_eq!(out.stop, EngineStop::Done, "seed {seed}: {}", out.text);
        let answer: Value = serde_json::from_str(&out.text)
            .unwrap_or_else(|e| panic!("seed {seed}: not JSON ({e}): {}", out.text));
        let errors: Vec<String> = validator
            .iter_errors(&answer)
            .map(|e| e.to_string())
            .collect();
        assert!(errors.is_empty(), "seed {seed}: {errors:?} in {}", out.text);
        check_caps(&answer);
        // Control tokens (the fixture has <|im_end|>, <|channel|>, ...) never
        // reach an answer, and deltas are whole characters.
        assert!(!out.text.contains("<|"), "seed {seed}: {}", out.text);
        assert!(
            out.deltas
                .iter()
                .all(|d| !d.is_empty() && !d.contains('\u{FFFD}'))
        );
        assert!(out.usage.prompt_tokens > 0 && out.usage.completion_tokens > 0);
        branches.insert(
            answer["call"]
                .as_object()
                .and_then(|c| c.keys().next().cloned())
                .unwrap_or_else(|| "reply".into()),
        );
    }
    // Sampling explores the schema rather than always taking one branch.
    assert!(branches.len() > 1, "{branches:?}");
    // The grammar was compiled once and reused for the other 19 turns.
    assert!(engine.stats().grammar_reused);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tiny_top_p_samples_like_greedy_decoding() {
    let Some(engine) = engine().await else { return };
    let messages = vec![
        msg(EngineRole::System, SYSTEM),
        msg(EngineRole::User, "Please read /etc/hosts and tell me."),
    ];
    let greedy = run(
        &engine,
        turn(messages.clone(), five_tool_schema(), 0, 0.0, 3000),
    )
    .await
    .unwrap()
    .text;
    // At a high temperature the random model's answers differ by seed; with
    // top_p near 0 only the likeliest token is ever left to draw.
    let mut plain = std::collections::BTreeSet::new();
    for seed in 0..4 {
        let mut sampled = turn(messages.clone(), five_tool_schema(), seed, 1.5, 3000);
        let out = run(&engine, sampled.clone()).await.unwrap();
        plain.insert(out.text);
        sampled.top_p = Some(1e-6);
        let nucleus = run(&engine, sampled).await.unwrap();
        assert_eq!(nucleus.text, greedy, "seed {seed}");
    }
    assert!(plain.len() > 1, "sampling without top_p varied: {plain:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_second_turn_evaluates_only_the_new_tokens() {
    let Some(engine) = engine().await else { return };
    let first = vec![
        msg(EngineRole::System, SYSTEM),
        msg(EngineRole::User, "List the files in /tmp."),
    ];
    let out1 = run(
        &engine,
        turn(first.clone(), five_tool_schema(), 1, 0.7, 3000),
    )
    .await
    .unwrap();
    let s1 = engine.stats();
    assert_eq!(s1.tokens_reused, 0);
    assert_eq!(s1.tokens_evaluated, s1.prompt_tokens);
    assert_eq!(s1.tokens_generated, out1.usage.completion_tokens);
    assert!(!s1.grammar_reused);
    // Reused prompt tokens are reported as cached ones.
    assert_eq!(out1.usage.cached_prompt_tokens, Some(0));

    let mut second = first.clone();
    second.push(msg(EngineRole::Assistant, &out1.text));
    second.push(msg(
        EngineRole::User,
        "Result of list_directory: {\"entries\":[\"a.txt\",\"b.txt\"]}",
    ));
    let prompt2 = engine.tokenize_prompt(&second).await.unwrap();
    let out2 = run(
        &engine,
        turn(second.clone(), five_tool_schema(), 2, 0.7, 3000),
    )
    .await
    .unwrap();
    let s2 = engine.stats();
    assert_eq!(out2.usage.cached_prompt_tokens, Some(s2.tokens_reused));
    assert_eq!(s2.prompt_tokens as usize, prompt2.len());
    // All of turn 1's prompt is reused, whatever the tokenizer makes of the
    // answer, and only the rest is evaluated.
    assert!(s2.tokens_reused >= s1.prompt_tokens, "{s1:?} {s2:?}");
    assert_eq!(s2.tokens_evaluated, s2.prompt_tokens - s2.tokens_reused);
    assert!(s2.tokens_evaluated < s2.prompt_tokens / 2, "{s2:?}");
    assert!(s2.grammar_reused, "{s2:?}");

    // The same conversation again: everything but the last prompt token is
    // reused (its logits start the answer).
    run(&engine, turn(second, five_tool_schema(), 3, 0.7, 3000))
        .await
        .unwrap();
    let s3 = engine.stats();
    assert_eq!(s3.tokens_evaluated, 1, "{s3:?}");

    // A different conversation shares only the system prompt's tokens.
    let other = vec![
        msg(EngineRole::System, SYSTEM),
        msg(EngineRole::User, "Something else entirely."),
    ];
    run(&engine, turn(other, five_tool_schema(), 4, 0.7, 3000))
        .await
        .unwrap();
    let s4 = engine.stats();
    assert!(
        s4.tokens_reused > 0 && s4.tokens_reused < s1.prompt_tokens,
        "{s4:?}"
    );
    assert_eq!(s4.tokens_evaluated, s4.prompt_tokens - s4.tokens_reused);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_stops_within_one_token_and_the_next_turn_works() {
    let Some(engine) = engine().await else { return };
    let messages = vec![msg(EngineRole::User, "Write a long note.")];
    let cancel = CancellationToken::new();
    let mut stream = engine.generate(
        turn(messages.clone(), long_note_schema(), 1, 1.0, 2000),
        cancel.clone(),
    );
    let mut deltas = 0;
    let stop = tokio::time::timeout(STEP, async {
        while let Some(event) = stream.next().await {
            match event.unwrap() {
                EngineEvent::Delta { .. } => {
                    deltas += 1;
                    if deltas == 3 {
                        cancel.cancel();
                    }
                }
                EngineEvent::Done { stop, .. } => return stop,
                _ => {}
            }
        }
        panic!("no Done");
    })
    .await
    .unwrap();
    assert_eq!(stop, EngineStop::Cancelled);
    let stats = engine.stats();
    assert!(stats.tokens_after_cancel <= 1, "{stats:?}");
    assert!(stats.tokens_generated < 300, "{stats:?}");
    // Deltas already queued when the cancel came may still arrive; the
    // sidecar's count above is what bounds the work done after it.
    assert!(deltas >= 3);

    // Dropping the stream mid-turn cancels it too; the next turn is whole.
    let mut dropped = engine.generate(
        turn(messages.clone(), long_note_schema(), 2, 1.0, 2000),
        CancellationToken::new(),
    );
    assert!(matches!(
        tokio::time::timeout(STEP, dropped.next()).await.unwrap(),
        Some(Ok(EngineEvent::Prefill { .. }))
    ));
    assert!(matches!(
        tokio::time::timeout(STEP, dropped.next()).await.unwrap(),
        Some(Ok(EngineEvent::Delta { .. }))
    ));
    drop(dropped);
    let out = run(&engine, turn(messages, long_note_schema(), 3, 1.0, 2000))
        .await
        .unwrap();
    let note: Value = serde_json::from_str(&out.text).unwrap();
    assert_eq!(chars(&note["note"]), 300);
    assert_eq!(engine.stats().starts, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_sidecar_fails_the_turn_clearly_and_the_next_turn_works() {
    let Some(engine) = engine().await else { return };
    let messages = vec![msg(EngineRole::User, "Write a long note.")];
    let pid = engine.sidecar_pid().await.unwrap();
    let mut stream = engine.generate(
        turn(messages.clone(), long_note_schema(), 1, 1.0, 2000),
        CancellationToken::new(),
    );
    let err = tokio::time::timeout(STEP, async {
        let mut killed = false;
        while let Some(event) = stream.next().await {
            match event {
                Ok(EngineEvent::Delta { .. }) if !killed => {
                    let status = std::process::Command::new("kill")
                        .args(["-9", &pid.to_string()])
                        .status()
                        .unwrap();
                    assert!(status.success());
                    killed = true;
                }
                Ok(EngineEvent::Delta { .. }) => {}
                Ok(EngineEvent::Done { .. }) => panic!("the turn finished despite the kill"),
                Ok(_) => {}
                Err(e) => return e,
            }
        }
        panic!("the stream ended without an error");
    })
    .await
    .unwrap();
    let ProviderError::Transient { message, .. } = &err else {
        panic!("{err:?}")
    };
    assert!(message.contains("exited during the turn"), "{message}");
    assert!(message.contains("restarted"), "{message}");

    let out = run(&engine, turn(messages, long_note_schema(), 2, 1.0, 2000))
        .await
        .unwrap();
    assert_eq!(out.stop, EngineStop::Done);
    assert_eq!(engine.stats().starts, 2);
    assert_ne!(engine.sidecar_pid().await, Some(pid));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_handshake_reports_versions_and_the_window() {
    let Some((python, dir)) = tiny_model() else {
        return;
    };
    let engine = start(config(&python, &dir)).await.unwrap();
    let info = engine.info();
    assert_eq!(info.protocol, lrg_mlx::PROTOCOL_VERSION);
    assert!(!info.versions.mlx.is_empty() && !info.versions.llguidance.starts_with("0."));
    // The fixture's config names no window: 32,768 is assumed and said so.
    assert_eq!(engine.context_window(), 32_768);
    assert_eq!(info.model.context_window_source, "default");
    assert!(info.model.trimmable_cache);
    engine.shutdown().await;
    assert_eq!(engine.sidecar_pid().await, None);

    // A model that names its window, too small for the prompt.
    let small = tempfile::tempdir().unwrap();
    lrg_mlx::testing::write_tiny_model(&python, small.path(), Some(24)).unwrap();
    let engine = start(config(&python, small.path())).await.unwrap();
    assert_eq!(engine.context_window(), 24);
    assert_eq!(
        engine.info().model.context_window_source,
        "max_position_embeddings"
    );
    let long = "word ".repeat(40);
    let err = run(
        &engine,
        turn(
            vec![msg(EngineRole::User, &long)],
            five_tool_schema(),
            1,
            0.0,
            10,
        ),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(err, ProviderError::ContextOverflow { .. }),
        "{err:?}"
    );
    // The sidecar said so itself and keeps running.
    assert_eq!(engine.stats().starts, 1);
    assert!(engine.sidecar_pid().await.is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schema_llguidance_cannot_enforce_is_a_bad_request() {
    let Some(engine) = engine().await else { return };
    let schema = json!({"type": "object", "properties": {"a": {"$ref": "#/nope"}}});
    let err = run(
        &engine,
        turn(vec![msg(EngineRole::User, "hi")], schema, 1, 0.0, 10),
    )
    .await
    .unwrap_err();
    assert!(matches!(err, ProviderError::BadRequest { .. }), "{err:?}");
    assert!(engine.sidecar_pid().await.is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_directory_that_is_not_a_model_is_named() {
    let Some((python, _)) = tiny_model() else {
        return;
    };
    let empty = tempfile::tempdir().unwrap();
    let err = start(config(&python, empty.path())).await.unwrap_err();
    assert!(
        matches!(err, ProviderError::ModelNotFound { .. }),
        "{err:?}"
    );

    // config.json present but no weights: the sidecar's own load error.
    std::fs::write(
        empty.path().join("config.json"),
        r#"{"model_type": "llama"}"#,
    )
    .unwrap();
    let err = start(config(&python, empty.path())).await.unwrap_err();
    let ProviderError::Config { message } = &err else {
        panic!("{err:?}")
    };
    assert!(message.contains("could not load the model"), "{message}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_mlx_gives_the_pip_command() {
    // The real sidecar with an `mlx` that cannot be imported (a stand-in
    // package first on the path), so any Python 3 shows the error path.
    let fake = tempfile::tempdir().unwrap();
    std::fs::create_dir(fake.path().join("mlx")).unwrap();
    std::fs::write(
        fake.path().join("mlx/__init__.py"),
        "raise ImportError(\"No module named 'mlx.core'\", name='mlx')\n",
    )
    .unwrap();
    let model = tempfile::tempdir().unwrap();
    std::fs::write(model.path().join("config.json"), "{}").unwrap();
    let python = MlxConfig::new("").python;
    if !std::process::Command::new(&python)
        .args(["-c", "pass"])
        .status()
        .is_ok_and(|s| s.success())
    {
        if std::env::var_os("CI").is_some() {
            panic!("no Python at {} under CI", python.display());
        }
        eprintln!(
            "SKIPPED: missing-mlx test: no Python at {}",
            python.display()
        );
        return;
    }
    let config = MlxConfig::new(model.path())
        .with_python(&python)
        .with_startup_timeout(Duration::from_secs(60))
        .with_env("PYTHONPATH", fake.path().display().to_string());
    let err = match MlxEngine::start(config).await {
        Err(e) => e,
        Ok(_) => panic!("started without mlx"),
    };
    let ProviderError::Config { message } = &err else {
        panic!("{err:?}")
    };
    assert!(message.contains("cannot import mlx"), "{message}");
    assert!(message.contains("-m pip install \"mlx-lm"), "{message}");
    assert!(message.contains("llguidance>=1.9,<1.10"), "{message}");
}
