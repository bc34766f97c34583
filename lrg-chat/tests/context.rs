//! Context fitting inside the loop: what the model is sent when the history
//! outgrows its window, while the session keeps the full history.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::session_support;

use std::sync::Arc;

use lrg_chat::context::RESULT_PLACEHOLDER;
use lrg_chat::{ChatSession, FixedModel};
use lrg_providers::{
    ChatModel, ModelInfo, Part, ScriptedModel, ScriptedTurn, TurnRequest, TurnStream, Usage,
};
use serde_json::json;
use session_support::*;
use tokio_util::sync::CancellationToken;

/// A scripted model that reports a small context window.
struct Windowed(ScriptedModel, u32);

impl ChatModel for Windowed {
    fn info(&self) -> ModelInfo {
        self.0.info().context_window(Some(self.1))
    }

    fn turn(&self, request: TurnRequest, cancel: CancellationToken) -> TurnStream {
        self.0.turn(request, cancel)
    }
}

fn result_text(request: &TurnRequest, index: usize) -> String {
    match &request.messages[index].parts[0] {
        Part::ToolResult(r) => r.text_content(),
        other => panic!("not a result: {other:?}"),
    }
}

#[tokio::test]
async fn old_tool_results_give_way_and_the_history_keeps_them() {
    let long_name = "n".repeat(4_000);
    let usage = Some(Usage::new(40, 1));
    let model = ScriptedModel::new(vec![
        ScriptedTurn {
            usage,
            ..calls(&[("read_note", json!({"name": long_name}))])
        },
        ScriptedTurn {
            usage,
            ..reply("Milk.")
        },
        reply("Still milk."),
    ]);
    let tools = TestTools::new();
    let session = ChatSession::builder(Arc::new(FixedModel::new(Windowed(model.clone(), 3_000))))
        .tools(tools.host.clone())
        .build();
    finish(session.send("q1").unwrap()).await;
    // Within the message the result is part of the last exchange: untouched.
    assert!(result_text(&model.requests()[1], 2).ends_with("buy milk"));
    finish(session.send("q2").unwrap()).await;
    let third = &model.requests()[2];
    assert_eq!(third.messages.len(), 5, "nothing dropped whole");
    assert_eq!(
        result_text(third, 2),
        RESULT_PLACEHOLDER,
        "the old result gave way"
    );
    assert_eq!(third.messages[4].text(), "q2");
    // The session's own history is never cut.
    let history = session.history();
    let Part::ToolResult(kept) = &history[2].parts[0] else {
        panic!()
    };
    assert!(kept.text_content().ends_with("buy milk"));
    let usage_events = session
        .events()
        .entries()
        .iter()
        .filter(|e| {
            matches!(
                e.event,
                lrg_chat::Event::Usage {
                    context_window: 3_000,
                    ..
                }
            )
        })
        .count();
    assert_eq!(usage_events, 2);
    assert_pairing(&session);
}

#[tokio::test]
async fn before_any_usage_the_overhead_is_assumed() {
    // 8,192 default window, 4,000 assumed overhead, 2,048 answer reserve:
    // about 2,100 tokens (6,400 characters) for the history.
    let model = ScriptedModel::new(vec![
        calls(&[("read_note", json!({"name": "x".repeat(4_500)}))]),
        reply("a"),
        reply("b"),
    ]);
    let tools = TestTools::new();
    let session = ChatSession::builder(Arc::new(FixedModel::new(model.clone())))
        .tools(tools.host.clone())
        .build();
    finish(session.send("q1").unwrap()).await;
    finish(session.send("q2").unwrap()).await;
    assert_eq!(result_text(&model.requests()[2], 2), RESULT_PLACEHOLDER);
    assert_pairing(&session);
}

/// A scripted model that cannot see images.
struct Blind(ScriptedModel);

impl ChatModel for Blind {
    fn info(&self) -> ModelInfo {
        self.0.info().vision(false)
    }

    fn turn(&self, request: TurnRequest, cancel: CancellationToken) -> TurnStream {
        self.0.turn(request, cancel)
    }
}

#[tokio::test]
async fn a_model_without_vision_gets_a_note_per_image_and_the_chat_goes_on() {
    let model = ScriptedModel::new(vec![
        calls(&[("snapshot", json!({}))]),
        reply("I cannot see it, but a picture was taken."),
    ]);
    let tools = TestTools::new();
    let session = ChatSession::builder(Arc::new(FixedModel::new(Blind(model.clone()))))
        .tools(tools.host.clone())
        .build();
    let outcome = finish(session.send("take a picture").unwrap()).await;
    assert!(
        matches!(outcome, lrg_chat::TurnOutcome::Completed { .. }),
        "{outcome:?}"
    );
    let second = &model.requests()[1];
    let Part::ToolResult(result) = &second.messages[2].parts[0] else {
        panic!("{second:?}")
    };
    assert_eq!(
        result.parts,
        [
            Part::text("a picture"),
            Part::text("[image/png 4 bytes, not shown to this model]")
        ]
    );
    // The session keeps the image itself, for a model that can see it.
    let history = session.history();
    let Part::ToolResult(kept) = &history[2].parts[0] else {
        panic!()
    };
    assert!(matches!(kept.parts[1], Part::Image(_)));
}
