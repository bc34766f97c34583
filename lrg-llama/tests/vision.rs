//! Images on the llama.cpp engine: a model without a projector is blind and
//! gets notes instead of images (never an error); projector problems are
//! clear errors at load time. With real weights (ignored by default):
//! `LRG_TEST_MODEL_GGUF=model.gguf LRG_TEST_MMPROJ_GGUF=mmproj.gguf cargo test
//! -p lrg-llama --test vision -- --ignored --nocapture`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{engine, msg, run, tiny_model, turn};
use lrg_llama::testing::{
    AnswerCaps, TinyProjectorSpec, answer_schema, sample_tools, tiny_png, write_tiny_projector,
};
use lrg_llama::{LlamaConfig, LlamaEngine};
use lrg_providers::local_chat::{EngineRole, IMAGE_SLOT, LocalChatModel, LocalEngine};
use lrg_providers::{
    ChatModel, Image, Message, Part, ProviderError, Role, ToolCall, ToolResult, TurnRequest,
    collect_turn,
};
use serde_json::json;
use tokio_util::sync::CancellationToken;

fn png_image() -> Image {
    Image {
        mime: "image/png".into(),
        data: tiny_png(32, 32, |x, y| [(x * 8) as u8, (y * 8) as u8, 128]).into(),
    }
}

/// A tool call and its result carrying a screenshot.
fn screenshot_conversation() -> Vec<Message> {
    vec![
        Message::user("What does the screen show?"),
        Message {
            role: Role::Assistant,
            parts: vec![Part::ToolCall(ToolCall {
                id: "call_1".into(),
                name: "screenshot".into(),
                arguments: json!({}),
            })],
        },
        Message::tool_results([ToolResult {
            call_id: "call_1".into(),
            name: "screenshot".into(),
            parts: vec![Part::text("taken"), Part::Image(png_image())],
            is_error: false,
        }]),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_projector_the_model_is_blind_and_an_image_becomes_a_note() {
    let engine = Arc::new(engine(2048));
    assert!(!engine.vision());
    let model = LocalChatModel::new("llama", engine.clone()).with_seed(Some(3));
    assert!(!model.info().vision);
    let request = TurnRequest::new(screenshot_conversation());
    // The note is in the prompt, in the image's place.
    let sent = model.engine_turn(&request);
    let last = &sent.messages.last().unwrap().content;
    assert!(
        last.contains("Result of screenshot: taken\n[image/png 32×32, not shown to this model]"),
        "{last}"
    );
    assert!(sent.messages.iter().all(|m| m.images.is_empty()));
    let answer = tokio::time::timeout(
        Duration::from_secs(120),
        collect_turn(model.turn(request, CancellationToken::new())),
    )
    .await
    .expect("the turn timed out")
    .unwrap();
    assert!(answer.stop.is_some(), "{answer:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_image_sent_straight_to_a_blind_engine_is_a_clear_error_and_the_next_turn_works() {
    let engine = engine(2048);
    let schema = answer_schema(&sample_tools(2, &AnswerCaps::DESIGN), &AnswerCaps::DESIGN);
    let mut user = msg(EngineRole::User, &format!("look {IMAGE_SLOT}"));
    user.images.push(png_image());
    let messages = vec![msg(EngineRole::System, "sys"), user];
    let err = run(&engine, turn(messages, schema.clone(), 1, 0.0, 8))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, ProviderError::Unsupported { message } if message.contains("--mmproj")),
        "{err:?}"
    );
    // A stray slot with no image is dropped, not an error.
    let messages = vec![
        msg(EngineRole::System, "sys"),
        msg(EngineRole::User, &format!("hi {IMAGE_SLOT}")),
    ];
    run(&engine, turn(messages, schema, 1, 0.0, 8))
        .await
        .unwrap();
}

#[test]
fn a_missing_projector_file_is_a_config_error_naming_the_flag() {
    let err = LlamaEngine::load(LlamaConfig::new(tiny_model()).with_mmproj("no-such-mmproj.gguf"))
        .unwrap_err();
    match err {
        ProviderError::Config { message } => {
            assert!(message.contains("--mmproj"), "{message}");
            assert!(message.contains("no-such-mmproj.gguf"), "{message}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_file_that_is_not_a_projector_is_a_config_error_at_load() {
    // The tiny text model is a GGUF, but no projector.
    let err = LlamaEngine::load(
        LlamaConfig::new(tiny_model())
            .with_n_threads(1)
            .with_mmproj(tiny_model()),
    )
    .unwrap_err();
    match err {
        ProviderError::Config { message } => {
            assert!(message.contains("--mmproj"), "{message}");
            assert!(
                message.contains("could not load the projector"),
                "{message}"
            );
        }
        other => panic!("{other:?}"),
    }
}

// ---------------------------------------------------------------- the tiny projector

/// The tiny projector for the tiny model, written once per test binary.
fn tiny_projector() -> std::path::PathBuf {
    static DIR: std::sync::OnceLock<tempfile::TempDir> = std::sync::OnceLock::new();
    let dir = DIR.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        write_tiny_projector(
            &dir.path().join("mmproj.gguf"),
            &TinyProjectorSpec::default(),
        )
        .unwrap();
        dir
    });
    dir.path().join("mmproj.gguf")
}

fn seeing_engine() -> LlamaEngine {
    LlamaEngine::load(
        LlamaConfig::new(tiny_model())
            .with_mmproj(tiny_projector())
            .with_n_ctx(2048)
            .with_n_threads(1)
            .with_n_batch(256),
    )
    .unwrap()
}

/// A user message showing `image` after some text.
fn user_with(text: &str, image: Image) -> lrg_providers::local_chat::EngineMessage {
    let mut m = msg(EngineRole::User, &format!("{text}\n{IMAGE_SLOT}"));
    m.images.push(image);
    m
}

fn schema() -> serde_json::Value {
    answer_schema(&sample_tools(2, &AnswerCaps::DESIGN), &AnswerCaps::DESIGN)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_tiny_projector_a_tool_result_image_reaches_the_model() {
    let engine = Arc::new(seeing_engine());
    assert!(engine.vision());
    let model = LocalChatModel::new("llama", engine.clone()).with_seed(Some(5));
    assert!(model.info().vision);
    let request = TurnRequest::new(screenshot_conversation());
    let sent = model.engine_turn(&request);
    assert_eq!(sent.messages.last().unwrap().images.len(), 1);
    let answer = tokio::time::timeout(
        Duration::from_secs(120),
        collect_turn(model.turn(request, CancellationToken::new())),
    )
    .await
    .expect("the turn timed out")
    .unwrap();
    assert!(answer.stop.is_some(), "{answer:?}");
    // The image's tokens are part of the prompt.
    let stats = engine.stats();
    assert!(stats.prompt_tokens > TinyProjectorSpec::default().tokens_per_image());
    assert_eq!(stats.tokens_reused, 0, "{stats:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_second_turn_reuses_the_image_and_evaluates_only_new_text() {
    let engine = seeing_engine();
    let image = png_image();
    let mut messages = vec![
        msg(EngineRole::System, "You describe images."),
        user_with("What is this?", image.clone()),
    ];
    let first = run(&engine, turn(messages.clone(), schema(), 1, 0.0, 24))
        .await
        .unwrap();
    let s1 = engine.stats();
    assert_eq!(s1.tokens_reused, 0, "{s1:?}");
    assert_eq!(s1.tokens_evaluated, s1.prompt_tokens, "{s1:?}");
    // The prompt is its text plus the image's tokens from the projector.
    let text = engine
        .tokenize_prompt(&[
            messages[0].clone(),
            msg(EngineRole::User, "What is this?\n"),
        ])
        .unwrap();
    assert_eq!(
        s1.prompt_tokens as usize,
        text.len() + TinyProjectorSpec::default().tokens_per_image() as usize,
        "{s1:?}"
    );

    messages.push(msg(EngineRole::Assistant, &first.text));
    messages.push(msg(EngineRole::User, "And the colours?"));
    run(&engine, turn(messages, schema(), 1, 0.0, 8))
        .await
        .unwrap();
    let s2 = engine.stats();
    println!("turn 1: {s1:?}\nturn 2: {s2:?}");
    // Everything up to turn 1's answer is reused, image included.
    assert!(s2.tokens_reused >= s1.prompt_tokens, "{s1:?} {s2:?}");
    assert!(
        s2.tokens_evaluated <= s2.prompt_tokens - s1.prompt_tokens,
        "only what follows turn 1's prompt is evaluated: {s1:?} {s2:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_image_replaced_by_a_note_is_evaluated_from_its_place() {
    let engine = seeing_engine();
    let system = msg(EngineRole::System, "You describe images.");
    let with_image = vec![system.clone(), user_with("Look:", png_image())];
    run(&engine, turn(with_image, schema(), 1, 0.0, 4))
        .await
        .unwrap();
    let s1 = engine.stats();
    // The same text, with a note where the image was.
    let with_note = vec![
        system.clone(),
        msg(EngineRole::User, "Look:\n[image omitted]"),
    ];
    run(&engine, turn(with_note.clone(), schema(), 1, 0.0, 4))
        .await
        .unwrap();
    let s2 = engine.stats();
    let before_image = engine
        .tokenize_prompt(&[system, msg(EngineRole::User, "Look:\n")])
        .unwrap();
    assert!(s2.tokens_reused > 0, "{s2:?}");
    assert!(
        (s2.tokens_reused as usize) < before_image.len(),
        "kept only text before the image: {s2:?}"
    );
    assert!(s1.prompt_tokens > 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_image_llama_cpp_cannot_decode_fails_that_turn_only() {
    let engine = seeing_engine();
    let garbage = Image {
        mime: "image/png".into(),
        data: b"\x89PNG not really".to_vec().into(),
    };
    let messages = vec![
        msg(EngineRole::System, "sys"),
        user_with("What is this?", garbage),
    ];
    let err = run(&engine, turn(messages, schema(), 1, 0.0, 4))
        .await
        .unwrap_err();
    match &err {
        ProviderError::BadRequest { message } => {
            assert!(message.contains("image 1"), "{message}");
            assert!(message.contains("could not be decoded"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    let messages = vec![
        msg(EngineRole::System, "sys"),
        user_with("What is this?", png_image()),
    ];
    run(&engine, turn(messages, schema(), 1, 0.0, 4))
        .await
        .unwrap();
}

// ---------------------------------------------------------------- real weights

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs real weights in LRG_TEST_MODEL_GGUF and LRG_TEST_MMPROJ_GGUF"]
async fn a_real_vision_model_sees_an_image_and_reuses_its_cache() {
    let model_path =
        std::env::var("LRG_TEST_MODEL_GGUF").expect("set LRG_TEST_MODEL_GGUF to a GGUF file");
    let mmproj = std::env::var("LRG_TEST_MMPROJ_GGUF")
        .expect("set LRG_TEST_MMPROJ_GGUF to the model's mmproj GGUF");
    let engine = tokio::task::spawn_blocking(move || {
        LlamaEngine::load(
            LlamaConfig::new(model_path)
                .with_mmproj(mmproj)
                .with_n_ctx(8192)
                .with_n_batch(2048),
        )
    })
    .await
    .unwrap()
    .unwrap();
    assert!(engine.vision());
    let engine = Arc::new(engine);
    let model = LocalChatModel::new("llama", engine.clone());
    assert!(model.info().vision);

    // A red square in a tool result.
    let red = Image {
        mime: "image/png".into(),
        data: tiny_png(64, 64, |_, _| [220, 20, 20]).into(),
    };
    let mut messages = screenshot_conversation();
    if let Some(Part::ToolResult(result)) = messages[2].parts.first_mut() {
        result.parts[1] = Part::Image(red);
    }
    let ask = |messages: Vec<Message>| {
        let model = model.clone();
        async move {
            tokio::time::timeout(
                Duration::from_secs(600),
                collect_turn(model.turn(
                    TurnRequest::new(messages).system("Describe images in one short sentence."),
                    CancellationToken::new(),
                )),
            )
            .await
            .expect("the turn timed out")
            .unwrap()
        }
    };
    let first = ask(messages.clone()).await;
    let stats1 = engine.stats();
    println!("turn 1: {first:?}\n{stats1:?}");
    assert!(first.stop.is_some());
    let reply = first.text();
    assert!(!reply.is_empty(), "{first:?}");

    // Turn 2 shares everything up to the answer: the image is not evaluated again.
    messages.push(first.into_message());
    messages.push(Message::user("And what colour is it, in one word?"));
    let second = ask(messages).await;
    let stats2 = engine.stats();
    println!("turn 2: {second:?}\n{stats2:?}");
    assert!(second.stop.is_some());
    assert!(
        stats2.tokens_reused >= stats1.prompt_tokens.saturating_sub(8),
        "turn 2 should reuse turn 1's prompt with its image: {stats1:?} {stats2:?}"
    );
    assert!(stats2.tokens_evaluated < stats1.prompt_tokens, "{stats2:?}");
}
