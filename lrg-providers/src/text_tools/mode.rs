//! [`ToolMode`]: whether a server (OpenAI-compatible, or Ollama's own API) gets tools natively, as
//! text in the family's format, or both; and [`TextTurn`], the request and
//! parser that mode gives for one turn.

use std::fmt;
use std::str::FromStr;

use super::prompt::render_result;
use super::{
    TextToolParser, ToolFormat, UnknownToolFormat, profile_for, render_call, tools_prompt,
};
use crate::{Message, Part, Role, TurnRequest};

/// How tool calls travel to and from a server.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum ToolMode {
    /// Tools and calls in the API's own fields (the server parses calls).
    #[default]
    Native,
    /// By the model's profile: natively where the usual servers parse the
    /// family's calls, else as text; in both cases text calls in the answer
    /// are parsed too, and a native call wins.
    Auto,
    /// Tools described in the system prompt and calls parsed from the text,
    /// in this format.
    Text(ToolFormat),
}

impl fmt::Display for ToolMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ToolMode::Native => f.write_str("native"),
            ToolMode::Auto => f.write_str("auto"),
            ToolMode::Text(format) => format.fmt(f),
        }
    }
}

impl FromStr for ToolMode {
    type Err = UnknownToolFormat;

    /// `native`, `auto`, or a [`ToolFormat`] name.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "native" => Ok(ToolMode::Native),
            "auto" => Ok(ToolMode::Auto),
            _ => s.parse().map(ToolMode::Text),
        }
    }
}

/// One turn's request as `mode` shapes it, and the parser for its answer.
#[derive(Debug)]
pub struct TextTurn {
    /// The request to send.
    pub request: TurnRequest,
    /// The parser for the answer's text; `None` in native mode or without tools.
    pub parser: Option<TextToolParser>,
}

impl TextTurn {
    /// Shape `request` for `model` under `mode`.
    pub fn new(mode: ToolMode, model: &str, mut request: TurnRequest) -> Self {
        if mode == ToolMode::Native || request.tools.is_empty() {
            return Self {
                request,
                parser: None,
            };
        }
        let profile = profile_for(model);
        let (format, native) = match mode {
            ToolMode::Text(format) => (format, false),
            _ => (profile.tool_format, profile.server_parses_tools),
        };
        // The family's format first, then fenced JSON.
        let mut parser =
            TextToolParser::chained(format.chain(), &request.tools).with_history(&request.messages);
        if profile.starts_in_reasoning {
            parser = parser.starting_in_reasoning();
        }
        if !native {
            let prompt = tools_prompt(format, &request.tools);
            request.system = Some(match request.system.take().filter(|s| !s.is_empty()) {
                Some(system) => format!("{system}\n\n{prompt}"),
                None => prompt,
            });
            request.tools = std::sync::Arc::from([]);
            request.messages =
                as_text_history(format, std::mem::take(&mut request.messages).into_vec()).into();
        }
        Self {
            request,
            parser: Some(parser),
        }
    }
}

/// The history with calls written as text in `format` and tool results as
/// user messages, for a server that was never told about tools.
fn as_text_history(format: ToolFormat, messages: Vec<Message>) -> Vec<Message> {
    messages
        .into_iter()
        .map(|message| {
            let parts = message
                .parts
                .into_iter()
                .flat_map(|part| match part {
                    Part::ToolCall(call) => vec![Part::Text {
                        text: render_call(format, &call.name, &call.arguments),
                    }],
                    Part::ToolResult(result) => {
                        let mut parts = vec![Part::Text {
                            text: render_result(format, &result.text_content()),
                        }];
                        parts.extend(
                            result
                                .parts
                                .into_iter()
                                .filter(|p| matches!(p, Part::Image(_))),
                        );
                        parts
                    }
                    other => vec![other],
                })
                .collect();
            let role = match message.role {
                Role::Tool => Role::User,
                other => other,
            };
            Message { role, parts }
        })
        .collect()
}
