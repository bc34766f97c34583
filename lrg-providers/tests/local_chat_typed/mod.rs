//! Typed answers on a local engine: the reply branch of the answer grammar is
//! the caller's schema, the prompt says so, and the reply's JSON comes out as
//! the answer's text.

use lrg_providers::typed::{OutputMode, OutputSchema};

use super::*;

fn triage() -> OutputSchema {
    OutputSchema::new(json!({
        "additionalProperties": false,
        "properties": {
            "label": {"enum": ["bug", "feature", "question"], "type": "string"},
            "priority": {"maximum": 5, "minimum": 1, "type": "integer"},
            "tags": {"items": {"type": "string"}, "type": "array"}
        },
        "required": ["label", "priority"],
        "title": "Triage",
        "type": "object"
    }))
    .unwrap()
}

#[test]
fn the_reply_branch_is_the_schema_with_its_bounds_kept() {
    let engine = FakeEngine::answering("", &[1], EngineStop::Done);
    let local = model(engine);
    assert_eq!(local.info().output_mode, OutputMode::Grammar);
    let turn = local.engine_turn(&request().output(triage()));
    let branches = turn.schema["anyOf"].as_array().unwrap();
    let reply = &branches.last().unwrap()["properties"]["reply"];
    assert_eq!(reply["properties"]["priority"]["maximum"], json!(5));
    assert_eq!(reply["properties"]["priority"]["minimum"], json!(1));
    assert_eq!(reply["additionalProperties"], json!(false));
    assert_eq!(reply["required"], json!(["label", "priority"]));
    // Strings stay capped, like every string a local model writes.
    assert!(reply["properties"]["tags"]["items"]["maxLength"].is_u64());
    // The tool branches are still there: tools first, then the typed answer.
    assert_eq!(branches.len(), turn_without_output_branches());
    let system = &turn.messages[0].content;
    assert!(system.contains("<your answer as JSON>"), "{system}");
    assert!(system.contains("\"priority\""), "{system}");
}

fn turn_without_output_branches() -> usize {
    let engine = FakeEngine::answering("", &[1], EngineStop::Done);
    model(engine).engine_turn(&request()).schema["anyOf"]
        .as_array()
        .unwrap()
        .len()
}

#[tokio::test]
async fn a_typed_reply_streams_as_its_json_text_and_checks() {
    let answer = r#"{"analysis": "Crash on start.", "reply": {"label": "bug", "priority": 2, "tags": ["start"]}}"#;
    for sizes in [&[1][..], &[3, 7], &[1000]] {
        let engine = FakeEngine::answering(answer, sizes, EngineStop::Done);
        let turn = run(&model(engine), request().output(triage()))
            .await
            .unwrap();
        assert_eq!(turn.stop, Some(StopReason::EndTurn));
        assert!(turn.tool_calls().is_empty());
        let text = turn.text();
        assert_eq!(
            text,
            r#"{"label": "bug", "priority": 2, "tags": ["start"]}"#
        );
        assert_eq!(
            triage().check(&text).unwrap(),
            json!({"label": "bug", "priority": 2, "tags": ["start"]})
        );
    }
}

#[tokio::test]
async fn a_typed_request_can_still_call_a_tool() {
    let answer = r#"{"analysis": "Look first.", "call": {"read_file": {"path": "a.txt"}}}"#;
    let engine = FakeEngine::answering(answer, &[4], EngineStop::Done);
    let turn = run(&model(engine), request().output(triage()))
        .await
        .unwrap();
    assert_eq!(turn.stop, Some(StopReason::ToolCalls));
    assert_eq!(turn.tool_calls()[0].name, "read_file");
    assert_eq!(turn.text(), "");
}

#[tokio::test]
async fn a_schema_no_grammar_can_hold_fails_the_turn_before_the_engine_runs() {
    let recursive = OutputSchema::new(json!({
        "type": "object",
        "properties": {"kids": {"type": "array", "items": {"$ref": "#"}}}
    }))
    .unwrap();
    assert!(recursive.grammar().is_err());
    let engine = FakeEngine::answering("{}", &[1], EngineStop::Done);
    let error = run(&model(engine.clone()), request().output(recursive))
        .await
        .unwrap_err();
    assert!(
        error.to_string().contains("cannot give this typed answer"),
        "{error}"
    );
    assert!(engine.turns.lock().unwrap().is_empty());
}
