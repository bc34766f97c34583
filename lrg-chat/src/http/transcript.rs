//! `GET …/transcript`: the conversation as the model sees it, rendered for
//! a reader: text, reasoning, tool calls and results; images described (their
//! bytes are at `…/images/{call_id}/{n}`), provider-native parts left out.

use lrg_providers::{Message, Part, Role};
use serde::Serialize;
use serde_json::Value;

use crate::events::ImageDescriptor;

#[derive(Serialize)]
pub(crate) struct Transcript {
    messages: Vec<RenderedMessage>,
}

#[derive(Serialize)]
struct RenderedMessage {
    role: Role,
    parts: Vec<RenderedPart>,
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum RenderedPart {
    Text {
        text: String,
    },
    Reasoning {
        text: String,
    },
    Image {
        mime: String,
        bytes: usize,
    },
    ToolCall {
        call_id: String,
        tool: String,
        arguments: Value,
    },
    ToolResult {
        call_id: String,
        tool: String,
        ok: bool,
        text: String,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        images: Vec<ImageDescriptor>,
    },
}

pub(crate) fn render(history: &[Message]) -> Transcript {
    let messages = history
        .iter()
        .map(|m| RenderedMessage {
            role: m.role,
            parts: m.parts.iter().filter_map(render_part).collect(),
        })
        .collect();
    Transcript { messages }
}

fn render_part(part: &Part) -> Option<RenderedPart> {
    Some(match part {
        Part::Text { text } => RenderedPart::Text { text: text.clone() },
        Part::Reasoning { text } => RenderedPart::Reasoning { text: text.clone() },
        Part::Image(image) => RenderedPart::Image {
            mime: image.mime.clone(),
            bytes: image.data.len(),
        },
        Part::ToolCall(call) => RenderedPart::ToolCall {
            call_id: call.id.clone(),
            tool: call.name.clone(),
            arguments: call.arguments.clone(),
        },
        Part::ToolResult(result) => RenderedPart::ToolResult {
            call_id: result.call_id.clone(),
            tool: result.name.clone(),
            ok: !result.is_error,
            text: result.text_content(),
            images: ImageDescriptor::of_parts(&result.parts),
        },
        // Another provider's private form of a turn: not for readers.
        _ => return None,
    })
}

/// Image `n` of the result of call `call_id`.
pub(crate) fn image<'a>(
    history: &'a [Message],
    call_id: &str,
    n: usize,
) -> Option<&'a lrg_providers::Image> {
    history
        .iter()
        .flat_map(|m| m.parts.iter())
        .find_map(|p| match p {
            Part::ToolResult(r) if r.call_id == call_id => Some(r),
            _ => None,
        })?
        .parts
        .iter()
        .filter_map(|p| match p {
            Part::Image(image) => Some(image),
            _ => None,
        })
        .nth(n)
}
