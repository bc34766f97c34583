//! The real engine on the tiny random-weight model: constrained answers, UTF-8
//! deltas, KV-cache reuse, cancellation, context overflow.
//!
//! The model's answers are gibberish; that they still always match the schema
//! is the point.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::{common_prefix, engine, msg, run, turn};
use futures::StreamExt;
use lrg_llama::testing::{AnswerCaps, answer_schema, sample_tools};
use lrg_llama::{LlamaConfig, LlamaEngine};
use lrg_providers::ProviderError;
use lrg_providers::local_chat::{EngineEvent, EngineRole, EngineStop, LocalEngine};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

const SYSTEM: &str = "You are a careful assistant. Answer with a tool call or a reply.\n\
Tools:\n- read_file(path): read a file\n- write_file(path, content): write a file\n\
- list_directory(path, recursive?): list entries\n- search_files(pattern, path?, max_results?)\n\
- run_command(command, timeout_s?)\n- fetch_url(url, method?)\n- create_issue(title, body, labels?)\n\
- send_email(to, subject, body)";

/// Small caps keep the random model's answers short; the tool set and the
/// schema's shape are the real ones.
const CAPS: AnswerCaps = AnswerCaps {
    analysis: 40,
    argument: 24,
    reply: 60,
};

fn chars(v: &Value) -> usize {
    v.as_str().map_or(0, |s| s.chars().count())
}

/// Checks the caps by hand too, so a validator that ignored maxLength could
/// not hide a grammar bug.
fn check_caps(answer: &Value) {
    assert!(
        chars(&answer["analysis"]) <= CAPS.analysis as usize,
        "{answer}"
    );
    assert!(chars(&answer["reply"]) <= CAPS.reply as usize, "{answer}");
    if let Some(call) = answer["call"].as_object() {
        assert_eq!(call.len(), 1, "{answer}");
        for args in call.values() {
            for v in args.as_object().unwrap().values() {
                assert!(chars(v) <= CAPS.argument as usize, "{answer}");
                if let Some(items) = v.as_array() {
                    assert!(
                        items.iter().all(|i| chars(i) <= CAPS.argument as usize),
                        "{answer}"
                    );
                }
            }
        }
    }
}

/// No whitespace outside string literals (the grammar is not whitespace-flexible).
fn is_compact(json: &str) -> bool {
    let (mut in_string, mut escaped) = (false, false);
    for c in json.chars() {
        if in_string {
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_string = false,
                _ => {}
            }
        } else if c == '"' {
            in_string = true;
        } else if c.is_whitespace() {
            return false;
        }
    }
    true
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_sampled_answer_matches_the_schema_across_20_seeds() {
    let engine = engine(2048);
    let schema = answer_schema(&sample_tools(8, &CAPS), &CAPS);
    let validator = jsonschema::validator_for(&schema).unwrap();
    let messages = vec![
        msg(EngineRole::System, SYSTEM),
        msg(EngineRole::User, "Please read /etc/hosts and tell me."),
    ];
    let mut seen_branches = std::collections::BTreeSet::new();
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
        assert!(
            is_compact(&out.text),
            "seed {seed}: whitespace outside strings in {}",
            out.text
        );
        assert!(out.usage.completion_tokens > 0 && out.usage.prompt_tokens > 0);
        let branch = answer["call"]
            .as_object()
            .and_then(|c| c.keys().next().cloned())
            .unwrap_or("reply".into());
        seen_branches.insert(branch);
    }
    // Sampling explores the schema rather than always taking one branch.
    assert!(seen_branches.len() > 1, "{seen_branches:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_length_holds_when_the_model_keeps_writing() {
    let engine = engine(2048);
    // A string that may be long but must stop at 12 characters.
    let schema = json!({
        "type": "object",
        "properties": {"note": {"type": "string", "maxLength": 12}},
        "required": ["note"],
        "additionalProperties": false
    });
    let messages = vec![msg(EngineRole::User, "Write a long note.")];
    let mut longest = 0;
    for seed in 0..20 {
        let out = run(
            &engine,
            turn(messages.clone(), schema.clone(), seed, 2.0, 400),
        )
        .await
        .unwrap();
        let v: Value = serde_json::from_str(&out.text).unwrap();
        let n = chars(&v["note"]);
        assert!(n <= 12, "seed {seed}: {n} chars in {}", out.text);
        longest = longest.max(n);
    }
    // At a high temperature some answers run into the cap.
    assert!(longest >= 8, "longest note was {longest} chars");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_byte_deltas_are_whole_characters_and_exact() {
    let engine = engine(2048);
    // 中, 文 and 語 have no token of their own in the tiny vocabulary, so they
    // are written byte by byte; é, 日, 😀 have one.
    let schema = json!({
        "type": "object",
        "properties": {
            "word": {"enum": ["日本語", "中文", "café", "→€😀", "ñandú"]},
            "text": {"type": "string", "pattern": "^[日本語中文é😀]{4,10}$"}
        },
        "required": ["word", "text"],
        "additionalProperties": false
    });
    let messages = vec![msg(EngineRole::User, "Say something in another script.")];
    let mut split_characters_seen = false;
    for seed in 0..10 {
        let out = run(
            &engine,
            turn(messages.clone(), schema.clone(), seed, 1.0, 200),
        )
        .await
        .unwrap();
        assert_eq!(out.stop, EngineStop::Done);
        assert!(
            out.deltas
                .iter()
                .all(|d| !d.is_empty() && !d.contains('\u{FFFD}')),
            "{:?}",
            out.deltas
        );
        let v: Value = serde_json::from_str(&out.text).unwrap();
        let text = v["text"].as_str().unwrap();
        assert!((4..=10).contains(&text.chars().count()), "{text}");
        assert!(text.chars().all(|c| "日本語中文é😀".contains(c)), "{text}");
        // Fewer deltas than tokens means some token ended mid-character and
        // its bytes were held back until the character was whole.
        if out.deltas.len() < out.usage.completion_tokens as usize {
            split_characters_seen = true;
        }
    }
    assert!(
        split_characters_seen,
        "no answer split a character across tokens"
    );
}

fn history_schema() -> Value {
    answer_schema(&sample_tools(8, &CAPS), &CAPS)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_second_turn_evaluates_only_the_new_tokens() {
    let engine = engine(4096);
    let first = vec![
        msg(EngineRole::System, SYSTEM),
        msg(EngineRole::User, "List the files in /tmp."),
    ];
    let out1 = run(&engine, turn(first.clone(), history_schema(), 1, 0.7, 3000))
        .await
        .unwrap();
    let s1 = engine.stats();
    assert_eq!(s1.tokens_reused, 0);
    assert_eq!(s1.tokens_evaluated, s1.prompt_tokens);
    assert_eq!(s1.tokens_generated, out1.usage.completion_tokens);

    let mut second = first.clone();
    second.push(msg(EngineRole::Assistant, &out1.text));
    second.push(msg(
        EngineRole::User,
        "Result of list_directory: {\"entries\":[\"a.txt\",\"b.txt\"]}",
    ));
    let prompt2 = engine.tokenize_prompt(&second).unwrap();
    run(
        &engine,
        turn(second.clone(), history_schema(), 2, 0.7, 3000),
    )
    .await
    .unwrap();
    let s2 = engine.stats();
    assert_eq!(s2.prompt_tokens as usize, prompt2.len());
    // Everything of turn 1's prompt is reused, whatever the tokenizer does
    // with the answer, and only the rest is evaluated.
    assert!(s2.tokens_reused >= s1.prompt_tokens, "{s1:?} {s2:?}");
    assert_eq!(s2.tokens_evaluated, s2.prompt_tokens - s2.tokens_reused);
    assert!(s2.tokens_evaluated < s2.prompt_tokens / 2, "{s2:?}");

    // The same conversation again: all but the last prompt token is reused
    // (its logits are needed to start the answer).
    run(&engine, turn(second, history_schema(), 3, 0.7, 3000))
        .await
        .unwrap();
    let s3 = engine.stats();
    assert!(s3.tokens_evaluated >= 1, "{s3:?}");
    assert!(s3.tokens_reused >= s2.prompt_tokens - 1, "{s2:?} {s3:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_earlier_message_drops_the_cache_from_that_point_only() {
    let engine = engine(4096);
    let before = vec![
        msg(EngineRole::System, SYSTEM),
        msg(EngineRole::User, "Read the file notes.txt please."),
        msg(
            EngineRole::Assistant,
            "{\"analysis\":\"read it\",\"call\":{\"read_file\":{\"path\":\"notes.txt\"}}}",
        ),
        msg(
            EngineRole::User,
            "Result of read_file: {\"text\":\"hello\"}",
        ),
    ];
    let mut after = before.clone();
    after[1] = msg(EngineRole::User, "Read the file todo.txt please.");
    let p_before = engine.tokenize_prompt(&before).unwrap();
    let p_after = engine.tokenize_prompt(&after).unwrap();
    let shared = common_prefix(&p_before, &p_after);
    let system_only = engine.tokenize_prompt(&before[..1]).unwrap();
    // The edit is after the system prompt and well before the end.
    assert!(
        shared > system_only.len() - 4 && shared < p_after.len() - 20,
        "{shared}"
    );

    run(&engine, turn(before, history_schema(), 5, 0.0, 3000))
        .await
        .unwrap();
    let cached = run(&engine, turn(after.clone(), history_schema(), 5, 0.0, 3000))
        .await
        .unwrap();
    let s = engine.stats();
    assert_eq!(s.tokens_reused as usize, shared, "{s:?}");
    assert_eq!(s.tokens_evaluated as usize, p_after.len() - shared, "{s:?}");

    // The cut cache gives the same greedy answer as a fresh engine.
    let fresh_engine = common::engine(4096);
    let fresh = run(&fresh_engine, turn(after, history_schema(), 5, 0.0, 3000))
        .await
        .unwrap();
    assert_eq!(fresh_engine.stats().tokens_reused, 0);
    assert_eq!(cached.text, fresh.text);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_stops_within_one_token() {
    let engine = engine(4096);
    // Long forced output, so the turn is far from done when cancelled.
    let schema = json!({
        "type": "object",
        "properties": {"essay": {"type": "string", "minLength": 2000, "maxLength": 3000}},
        "required": ["essay"]
    });
    let cancel = CancellationToken::new();
    let mut stream = engine.generate(
        turn(
            vec![msg(EngineRole::User, "Write.")],
            schema.clone(),
            9,
            1.0,
            3000,
        ),
        cancel.clone(),
    );
    let done = tokio::time::timeout(Duration::from_secs(60), async {
        let mut deltas = 0;
        let mut at_cancel = None;
        while let Some(ev) = stream.next().await {
            match ev.unwrap() {
                EngineEvent::Delta { .. } => {
                    deltas += 1;
                    if deltas == 5 {
                        // Cancel first: whatever the count is now, at most the
                        // token being computed may still be added.
                        cancel.cancel();
                        at_cancel = Some(engine.stats().tokens_generated);
                    }
                }
                EngineEvent::Done { usage, stop } => return (usage, stop, at_cancel.unwrap()),
                _ => {}
            }
        }
        panic!("no Done");
    })
    .await
    .unwrap();
    let (usage, stop, at_cancel) = done;
    assert_eq!(stop, EngineStop::Cancelled);
    assert!(
        usage.completion_tokens <= at_cancel + 1,
        "{} tokens after cancel at {at_cancel}",
        usage.completion_tokens
    );
    assert!(usage.completion_tokens < 2000);

    // Cancelled before it starts: no token at all. Then the engine still works.
    let cancel = CancellationToken::new();
    cancel.cancel();
    let mut stream = engine.generate(
        turn(vec![msg(EngineRole::User, "Write.")], schema, 9, 1.0, 30),
        cancel,
    );
    let first = tokio::time::timeout(Duration::from_secs(60), stream.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(
        matches!(first, EngineEvent::Done { stop: EngineStop::Cancelled, usage } if usage.completion_tokens == 0)
    );
    let out = run(
        &engine,
        turn(
            vec![msg(EngineRole::User, "Hi")],
            json!({"type": "boolean"}),
            1,
            0.0,
            10,
        ),
    )
    .await
    .unwrap();
    assert!(out.text == "true" || out.text == "false", "{}", out.text);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_tokens_stops_the_turn() {
    let engine = engine(2048);
    let schema = json!({"type": "string", "minLength": 500});
    let out = run(
        &engine,
        turn(vec![msg(EngineRole::User, "Go on.")], schema, 3, 1.0, 7),
    )
    .await
    .unwrap();
    assert_eq!(out.stop, EngineStop::MaxTokens);
    assert_eq!(out.usage.completion_tokens, 7);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_prompt_is_a_clear_context_overflow() {
    let engine = engine(256);
    assert_eq!(engine.context_window(), 256);
    let long = "word ".repeat(400);
    let err = run(
        &engine,
        turn(
            vec![msg(EngineRole::User, &long)],
            json!({"type": "boolean"}),
            1,
            0.0,
            5,
        ),
    )
    .await
    .unwrap_err();
    let ProviderError::ContextOverflow { message } = &err else {
        panic!("{err:?}")
    };
    let n = engine
        .tokenize_prompt(&[msg(EngineRole::User, &long)])
        .unwrap()
        .len();
    assert!(
        message.contains(&n.to_string()) && message.contains("256"),
        "{message}"
    );
    // The engine is still usable.
    let out = run(
        &engine,
        turn(
            vec![msg(EngineRole::User, "Hi")],
            json!({"type": "boolean"}),
            1,
            0.0,
            5,
        ),
    )
    .await
    .unwrap();
    assert_eq!(out.stop, EngineStop::Done);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_window_is_the_context_split_across_sequences() {
    let engine = LlamaEngine::load(
        LlamaConfig::new(common::tiny_model())
            .with_n_ctx(2048)
            .with_n_seq_max(4),
    )
    .unwrap();
    assert_eq!(engine.context_window(), 512);
    assert_eq!(engine.model_name(), "tiny");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_inputs_are_clear_errors() {
    let missing = LlamaEngine::load(LlamaConfig::new("/nonexistent/model.gguf")).unwrap_err();
    assert!(
        matches!(missing, ProviderError::ModelNotFound { .. }),
        "{missing:?}"
    );

    let dir = tempfile::tempdir().unwrap();
    let junk = dir.path().join("junk.gguf");
    std::fs::write(&junk, b"not a model").unwrap();
    let junk_err = LlamaEngine::load(LlamaConfig::new(&junk)).unwrap_err();
    assert!(
        matches!(junk_err, ProviderError::Config { .. }),
        "{junk_err:?}"
    );

    let engine = engine(1024);
    let mut with_image = msg(EngineRole::User, "look");
    with_image.images.push(lrg_providers::Image {
        mime: "image/png".into(),
        data: vec![1u8, 2, 3].into(),
    });
    let err = run(
        &engine,
        turn(vec![with_image], json!({"type": "boolean"}), 1, 0.0, 5),
    )
    .await
    .unwrap_err();
    assert!(matches!(err, ProviderError::Unsupported { .. }), "{err:?}");

    let err = run(
        &engine,
        turn(vec![msg(EngineRole::User, "x")], json!(42), 1, 0.0, 5),
    )
    .await
    .unwrap_err();
    assert!(matches!(err, ProviderError::BadRequest { .. }), "{err:?}");
}
