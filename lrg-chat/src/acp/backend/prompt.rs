//! What a prompt sends: the last user message, and, to an agent session
//! that has not seen the conversation (lrg's history was retried, or the
//! chat resumed on a fresh agent), the history before it replayed as text.

use agent_client_protocol::v1::schema::{ContentBlock, ImageContent, TextContent};
use base64::Engine as _;

use lrg_providers::{Message, Part, Role};

use crate::acp::calls::AgentToolCall;

/// The most history a fresh agent session is sent, in characters; a longer
/// one is refused (clearing the chat starts over instead).
pub(super) const REPLAY_MAX: usize = 200_000;

/// What introduces a replayed history.
const REPLAY_HEADER: &str = "[lrg] This conversation began in an earlier session. \
It went as follows; continue from it and answer the last message.";

/// The last user message as a prompt: its text and images (the agent keeps
/// the conversation; lrg sends only what is new).
pub(super) fn last_prompt(messages: &[Message]) -> Result<Vec<ContentBlock>, String> {
    let last = messages
        .iter()
        .rev()
        .find(|m| m.role == Role::User)
        .ok_or("there is no user message to send")?;
    let mut blocks = Vec::new();
    for part in &last.parts {
        match part {
            Part::Text { text } => blocks.push(ContentBlock::Text(TextContent::new(text.clone()))),
            Part::Image(image) => blocks.push(ContentBlock::Image(ImageContent::new(
                base64::engine::general_purpose::STANDARD.encode(&image.data),
                image.mime.clone(),
            ))),
            _ => {}
        }
    }
    Ok(blocks)
}

/// The history before the last user message, as one text block for an
/// agent session that has not seen it: `None` when there is none (a new
/// or cleared chat), an error when it is longer than [`REPLAY_MAX`].
pub(super) fn replay(messages: &[Message]) -> Result<Option<ContentBlock>, String> {
    let last = messages.iter().rposition(|m| m.role == Role::User);
    let earlier = &messages[..last.unwrap_or(0)];
    let mut text = String::new();
    for message in earlier {
        let said = said(message);
        if said.is_empty() {
            continue;
        }
        let who = match message.role {
            Role::User => "User",
            Role::Assistant => "Assistant",
            Role::Tool => "Tool",
        };
        text.push_str(&format!("\n\n{who}: {said}"));
        if text.len() > REPLAY_MAX {
            return Err(format!(
                "the conversation is longer than the {REPLAY_MAX} characters a fresh agent \
                 session is sent again, so it cannot be answered anew: clear the chat to start over"
            ));
        }
    }
    if text.is_empty() {
        return Ok(None);
    }
    Ok(Some(ContentBlock::Text(TextContent::new(format!(
        "{REPLAY_HEADER}{text}"
    )))))
}

/// What one message said, as a line of the replay.
fn said(message: &Message) -> String {
    let mut lines = Vec::new();
    for part in &message.parts {
        match part {
            Part::Text { text } if !text.trim().is_empty() => lines.push(text.trim().to_string()),
            Part::Image(_) => lines.push("[an image]".to_string()),
            Part::ToolCall(call) => lines.push(format!("[called {}]", call.name)),
            Part::ToolResult(result) => lines.push(format!(
                "[{} answered: {}]",
                result.name,
                result.text_content()
            )),
            part => {
                if let Some(call) = AgentToolCall::from_part(part) {
                    let how = match call.ok {
                        Some(true) => "done",
                        Some(false) => "failed",
                        None => "not finished",
                    };
                    lines.push(format!("[ran {}: {how}]", call.title));
                }
            }
        }
    }
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(block: Option<ContentBlock>) -> Option<String> {
        match block {
            Some(ContentBlock::Text(t)) => Some(t.text),
            _ => None,
        }
    }

    #[test]
    fn a_new_conversation_replays_nothing() {
        let messages = vec![Message::user("hi")];
        assert_eq!(replay(&messages).map(text), Ok(None));
    }

    #[test]
    fn earlier_messages_are_replayed_and_the_last_is_not() {
        let messages = vec![
            Message::user("first"),
            Message::assistant("an answer"),
            Message::user("again"),
        ];
        let replayed = text(replay(&messages).unwrap()).unwrap();
        assert!(replayed.starts_with(REPLAY_HEADER), "{replayed}");
        assert!(
            replayed.ends_with("User: first\n\nAssistant: an answer"),
            "{replayed}"
        );
    }

    #[test]
    fn a_history_too_long_to_replay_is_refused_with_the_way_out() {
        let messages = vec![
            Message::user("x".repeat(REPLAY_MAX + 1)),
            Message::user("again"),
        ];
        let refused = replay(&messages).unwrap_err();
        assert!(refused.contains("clear the chat"), "{refused}");
    }
}
