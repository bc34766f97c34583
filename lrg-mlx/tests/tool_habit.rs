//! The agent loop's two model turns through `LocalChatModel` on the
//! tool-habit model (random weights plus crafted circuits: call a tool first,
//! reply once a tool result is in the conversation). Greedy, so the outcome is
//! fixed: turn 1 calls `list_directory` with a schema-valid argument, turn 2,
//! with its result, replies. Without a Python that has mlx these tests print a
//! notice and pass; under `CI` they fail.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::sync::Arc;

use common::{STEP, config, start};
use lrg_providers::local_chat::LocalChatModel;
use lrg_providers::{
    ChatModel, Message, StopReason, ToolResult, ToolSpec, TurnRequest, collect_turn,
};
use serde_json::json;
use tokio_util::sync::CancellationToken;

fn tool(name: &str, input_schema: serde_json::Value) -> ToolSpec {
    ToolSpec {
        name: name.into(),
        description: format!("The {name} tool."),
        input_schema,
        annotations: Default::default(),
        output_schema: None,
    }
}

fn tools() -> Vec<ToolSpec> {
    let path = json!({"type": "object", "properties": {"path": {"type": "string"}},
                      "required": ["path"]});
    vec![
        tool("read_file", path.clone()),
        tool("list_directory", path),
        tool(
            "run_command",
            json!({"type": "object", "properties": {"command": {"type": "string"}},
                   "required": ["command"]}),
        ),
    ]
}

async fn answer(model: &LocalChatModel, messages: &[Message]) -> lrg_providers::AssistantTurn {
    let request = TurnRequest::new(messages.to_vec()).tools(tools());
    let turn = model.turn(request, CancellationToken::new());
    tokio::time::timeout(STEP, collect_turn(turn))
        .await
        .expect("the turn took too long")
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tool_habit_model_calls_then_replies_after_the_result() {
    let python = match lrg_mlx::testing::python_with_mlx() {
        Ok(p) => p,
        Err(why) if std::env::var_os("CI").is_some() => {
            panic!("the MLX tests need Python with mlx under CI: {why}")
        }
        Err(why) => {
            eprintln!("SKIPPED: MLX tool-habit test: {why}");
            return;
        }
    };
    let dir = tempfile::tempdir().unwrap();
    lrg_mlx::testing::write_tool_habit_model(&python, dir.path()).unwrap();
    let engine = start(config(&python, dir.path())).await.unwrap();
    let model = LocalChatModel::new("mlx", Arc::new(engine));

    let mut messages = vec![Message::user("What is in /tmp?")];
    let first = answer(&model, &messages).await;
    assert_eq!(first.stop, Some(StopReason::ToolCalls), "{first:?}");
    let calls = first.tool_calls();
    assert_eq!(calls.len(), 1, "{first:?}");
    let call = calls[0].clone();
    assert_eq!(call.name, "list_directory", "{first:?}");
    let schema = &tools()[1].input_schema;
    assert!(
        jsonschema::validator_for(schema)
            .unwrap()
            .is_valid(&call.arguments),
        "{call:?}"
    );
    assert!(first.text().is_empty(), "{first:?}");

    messages.push(first.into_message());
    let result = ToolResult::text(&call, "notes.txt\nphotos/", false);
    messages.push(Message::tool_results([result]));
    let second = answer(&model, &messages).await;
    assert_eq!(second.stop, Some(StopReason::EndTurn), "{second:?}");
    assert!(second.tool_calls().is_empty(), "{second:?}");
    assert_eq!(second.text(), "Here it is.", "{second:?}");
}
