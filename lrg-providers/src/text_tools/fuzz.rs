//! The invariants any input keeps, checked by the cargo-fuzz target and
//! the test that runs its seed corpus.

use super::{RECOVERY_TOOL, TextToolParser, ToolFormat};
use crate::{ToolSpec, TurnEvent};

/// Feeds `data` to a [`TextToolParser`]: the first byte picks the format
/// (its high bit: [starting in reasoning](TextToolParser::starting_in_reasoning)),
/// the second the chunk size, the rest is the answer text (lossy UTF-8). Checks
/// what holds for any input: no panic, text and reasoning out never longer
/// than the text in, at most one call per input byte, and every call names an
/// offered tool or is a [`RECOVERY_TOOL`] call. Shared by the cargo-fuzz target
/// (`fuzz/`) and the test that runs its seed corpus.
///
/// # Panics
///
/// When an invariant fails: that is what the fuzzer looks for.
#[doc(hidden)]
#[allow(clippy::panic)]
pub fn fuzz_parse(data: &[u8]) {
    let [format, chunk, rest @ ..] = data else {
        return;
    };
    // The high bit: a template that opened reasoning in the prompt.
    let in_reasoning = format & 0x80 != 0;
    let format = ToolFormat::ALL[usize::from(*format & 0x7f) % ToolFormat::ALL.len()];
    let chunk = usize::from(*chunk).max(1);
    let text = String::from_utf8_lossy(rest);
    let tool = |name: &str| ToolSpec {
        name: name.into(),
        description: String::new(),
        input_schema: serde_json::json!({"type": "object", "properties": {"city": {"type": "string"}, "n": {"type": "integer"}}}),
        annotations: Default::default(),
        output_schema: None,
    };
    let tools = [tool("get_weather"), tool("add")];
    let mut parser = TextToolParser::new(format, &tools);
    if in_reasoning {
        parser = parser.starting_in_reasoning();
    }
    let mut out = Vec::new();
    let mut at = 0;
    while at < text.len() {
        let mut end = (at + chunk).min(text.len());
        while !text.is_char_boundary(end) {
            end += 1;
        }
        parser.feed(&text[at..end], &mut out);
        at = end;
    }
    parser.finish(&mut out);
    let (mut shown, mut calls) = (0usize, 0usize);
    for event in &out {
        match event {
            TurnEvent::TextDelta { text } | TurnEvent::ReasoningDelta { text } => {
                shown += text.len();
            }
            TurnEvent::ToolCall(call) => {
                calls += 1;
                if call.name != RECOVERY_TOOL && !tools.iter().any(|t| t.name == call.name) {
                    panic!("a call to a tool that was not offered: {call:?}");
                }
            }
            other => panic!("the parser emitted {other:?}"),
        }
    }
    if shown > text.len() {
        panic!("{shown} bytes of text out for {} in", text.len());
    }
    if calls > text.len() {
        panic!("{calls} calls from {} bytes", text.len());
    }
}
