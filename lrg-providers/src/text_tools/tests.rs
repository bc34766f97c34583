use serde_json::{Value, json};

use super::*;
use crate::{ToolCall, ToolSpec, TurnEvent};

fn tool(name: &str) -> ToolSpec {
    ToolSpec {
        name: name.into(),
        description: String::new(),
        input_schema: json!({"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}, "required": ["city"]}),
        annotations: Default::default(),
        output_schema: None,
    }
}

fn parse(format: ToolFormat, chunks: &[&str]) -> Vec<TurnEvent> {
    let mut p = TextToolParser::new(format, &[tool("get_weather"), tool("add")]);
    let mut out = Vec::new();
    for c in chunks {
        p.feed(c, &mut out);
    }
    p.finish(&mut out);
    out
}

fn call(id: &str, name: &str, arguments: Value) -> TurnEvent {
    TurnEvent::ToolCall(ToolCall {
        id: id.into(),
        name: name.into(),
        arguments,
    })
}

fn text(t: &str) -> TurnEvent {
    TurnEvent::TextDelta { text: t.into() }
}

#[test]
fn hermes_call_between_text_split_anywhere() {
    let got = parse(
        ToolFormat::Hermes,
        &[
            "Sure<",
            "tool_ca",
            "ll>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}</tool",
            "_call> done",
        ],
    );
    assert_eq!(
        got,
        vec![
            text("Sure"),
            call("call_0", "get_weather", json!({"city": "Paris"})),
            text(" done")
        ]
    );
}

#[test]
fn text_streams_as_soon_as_it_cannot_be_a_marker() {
    let mut p = TextToolParser::new(ToolFormat::Hermes, &[tool("get_weather")]);
    let mut out = Vec::new();
    p.feed("a < b and <t", &mut out);
    assert_eq!(out, vec![text("a < b and ")]);
    out.clear();
    p.feed("able>", &mut out);
    assert_eq!(out, vec![text("<table>")]);
}

#[test]
fn unknown_names_and_garbage_become_recovery_calls() {
    let got = parse(
        ToolFormat::Hermes,
        &[
            "<tool_call>{\"name\": \"nope\", \"arguments\": {}}</tool_call><tool_call>{{{</tool_call>",
        ],
    );
    assert_eq!(got.len(), 2);
    for event in &got {
        let TurnEvent::ToolCall(c) = event else {
            panic!("{event:?}")
        };
        assert_eq!(c.name, RECOVERY_TOOL);
        let r = recovery::Recovery::from_arguments(&c.arguments).unwrap();
        assert!(r.message.contains("<tool_call>"), "{}", r.message);
    }
}

fn reasoning(t: &str) -> TurnEvent {
    TurnEvent::ReasoningDelta { text: t.into() }
}

#[test]
fn a_parser_started_in_reasoning_leaves_it_only_before_reading_anything() {
    let tools = [tool("get_weather")];
    let mut separated = TextToolParser::new(ToolFormat::Hermes, &tools).starting_in_reasoning();
    separated.server_separates_reasoning();
    let mut out = Vec::new();
    separated.feed("Sunny.", &mut out);
    separated.finish(&mut out);
    assert_eq!(out, vec![text("Sunny.")]);

    let mut late = TextToolParser::new(ToolFormat::Hermes, &tools).starting_in_reasoning();
    let mut out = Vec::new();
    late.feed("Hmm", &mut out);
    late.server_separates_reasoning();
    late.feed(".</think>Sunny.", &mut out);
    late.finish(&mut out);
    assert_eq!(out, vec![reasoning("Hmm."), text("Sunny.")]);
}

#[test]
fn formats_without_a_reasoning_marker_ignore_a_template_that_opened_one() {
    for format in [ToolFormat::Llama3, ToolFormat::Harmony] {
        let got = {
            let mut p = TextToolParser::new(format, &[tool("get_weather")]).starting_in_reasoning();
            let mut out = Vec::new();
            p.feed("Sunny.", &mut out);
            p.finish(&mut out);
            out
        };
        assert_eq!(got, vec![text("Sunny.")], "{format}");
    }
}

#[test]
fn a_text_call_whose_name_fits_several_tools_is_not_guessed() {
    let tools = [tool("github__search"), tool("gitlab__search")];
    let mut p = TextToolParser::new(ToolFormat::Hermes, &tools);
    let mut out = Vec::new();
    p.feed(
        "<tool_call>{\"name\": \"functions.search\", \"arguments\": {\"city\": \"x\"}}</tool_call>",
        &mut out,
    );
    p.finish(&mut out);
    let [TurnEvent::ToolCall(call)] = &out[..] else {
        panic!("{out:?}");
    };
    assert_eq!(call.name, RECOVERY_TOOL);
    let message = recovery::Recovery::from_arguments(&call.arguments)
        .unwrap()
        .message;
    assert!(
        message.starts_with(
            "There is no tool named `functions.search`, and it fits several: github__search, gitlab__search."
        ),
        "{message}"
    );
    // One that fits exactly one is repaired.
    let mut p = TextToolParser::new(ToolFormat::Hermes, &tools);
    let mut out = Vec::new();
    p.feed(
        "<tool_call>{\"name\": \"mcp__gitlab__search\", \"arguments\": {}}</tool_call>",
        &mut out,
    );
    p.finish(&mut out);
    assert_eq!(out, vec![call_event("gitlab__search")]);
}

fn call_event(name: &str) -> TurnEvent {
    call("call_0", name, json!({}))
}
