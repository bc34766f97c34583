//! What a CLI is sent on stdin: only the new tail of the conversation when
//! it can resume its own session, else the whole conversation as a
//! transcript. The session id travels in the history as a native part of
//! the assistant message that ended it.

use serde_json::{Value, json};

use crate::{Message, NativePart, Part, Role, TurnRequest};

/// The `type` of the native part that keeps a CLI's session id.
pub const SESSION: &str = "cli_session";

/// The native part recording `id` as the session of `provider`/`model`.
pub(crate) fn session_part(provider: &str, model: &str, id: &str) -> NativePart {
    NativePart {
        provider: provider.to_string(),
        model: model.to_string(),
        value: json!({"type": SESSION, "id": id}),
    }
}

/// One turn's input for a CLI.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Prompt {
    /// The session to resume, when the history has one.
    pub resume: Option<String>,
    /// The text for stdin.
    pub text: String,
}

/// The prompt for `request`. `system_in_text`: the CLI has no flag for a
/// system prompt, so a fresh session gets it at the top of the text.
pub(crate) fn prompt(
    request: &TurnRequest,
    provider: &str,
    model: &str,
    system_in_text: bool,
) -> Prompt {
    let messages = &request.messages;
    if let Some((at, id)) = last_session(messages, provider, model) {
        let tail = &messages[at + 1..];
        if !tail.is_empty() {
            return Prompt {
                resume: Some(id),
                text: tail.iter().map(render).collect::<Vec<_>>().join("\n\n"),
            };
        }
    }
    let mut text = String::new();
    if system_in_text && let Some(system) = request.system.as_deref().filter(|s| !s.is_empty()) {
        text.push_str(&format!("Instructions: {system}\n\n"));
    }
    // Replay: everything before the latest user message as a transcript.
    let latest = messages
        .iter()
        .rposition(|m| m.role == Role::User)
        .unwrap_or(messages.len());
    let (before, after) = messages.split_at(latest);
    if !before.is_empty() {
        text.push_str("The conversation so far:\n\n");
        for message in before {
            text.push_str(&labelled(message));
            text.push_str("\n\n");
        }
        text.push_str("Continue it: answer the user's latest message.\n\n");
    }
    text.push_str(&after.iter().map(render).collect::<Vec<_>>().join("\n\n"));
    Prompt { resume: None, text }
}

fn last_session(history: &[Message], provider: &str, model: &str) -> Option<(usize, String)> {
    history.iter().enumerate().rev().find_map(|(at, m)| {
        if m.role != Role::Assistant {
            return None;
        }
        m.parts.iter().find_map(|p| match p {
            Part::Native(n)
                if n.belongs_to(provider, model)
                    && n.value.get("type").and_then(Value::as_str) == Some(SESSION) =>
            {
                n.value
                    .get("id")
                    .and_then(Value::as_str)
                    .map(|id| (at, id.to_string()))
            }
            _ => None,
        })
    })
}

fn labelled(message: &Message) -> String {
    let who = match message.role {
        Role::User => "User",
        Role::Assistant => "Assistant",
        Role::Tool => "Tool results",
    };
    format!("{who}: {}", render(message))
}

/// A message as plain text: these CLIs take text only, so an image becomes
/// a placeholder, a tool call or result a line saying what it was.
fn render(message: &Message) -> String {
    let mut out: Vec<String> = Vec::new();
    for part in &message.parts {
        match part {
            Part::Text { text } if !text.is_empty() => out.push(text.clone()),
            Part::Image(_) => out.push("[image omitted]".into()),
            Part::ToolCall(call) => {
                out.push(format!("[called {} with {}]", call.name, call.arguments))
            }
            Part::ToolResult(result) => out.push(format!(
                "[result of {}{}: {}]",
                result.name,
                if result.is_error { " (failed)" } else { "" },
                result.text_content()
            )),
            _ => {}
        }
    }
    out.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(messages: Vec<Message>) -> TurnRequest {
        TurnRequest {
            system: Some("Be brief.".into()),
            messages: messages.into(),
            ..Default::default()
        }
    }

    #[test]
    fn a_first_message_goes_alone() {
        let p = prompt(
            &request(vec![Message::user("hi")]),
            "claude-cli",
            "sonnet",
            false,
        );
        assert_eq!(
            p,
            Prompt {
                resume: None,
                text: "hi".into()
            }
        );
        let p = prompt(&request(vec![Message::user("hi")]), "gemini-cli", "m", true);
        assert_eq!(p.text, "Instructions: Be brief.\n\nhi");
    }

    #[test]
    fn a_known_session_sends_only_the_tail_and_a_lost_one_replays() {
        let mut answer = Message::assistant("hello");
        answer
            .parts
            .push(Part::Native(session_part("claude-cli", "sonnet", "s-1")));
        let history = vec![Message::user("hi"), answer, Message::user("and you?")];
        let p = prompt(&request(history.clone()), "claude-cli", "sonnet", false);
        assert_eq!(
            p,
            Prompt {
                resume: Some("s-1".into()),
                text: "and you?".into()
            }
        );
        // Another model's session is not ours: replay the conversation.
        let p = prompt(&request(history), "claude-cli", "opus", false);
        assert_eq!(p.resume, None);
        assert_eq!(
            p.text,
            "The conversation so far:\n\nUser: hi\n\nAssistant: hello\n\n\
             Continue it: answer the user's latest message.\n\nand you?"
        );
    }
}
