//! A server's `sampling/createMessage` (the server asks the model): read
//! into what a session answers ([`SamplingAsk`]), checked first (its size,
//! that it comes during a call, that no sampled answer asks again), and
//! the session's answer written back as the server expects it.
//!
//! The session decides and answers (`session/sampling.rs`): the
//! permissions or the person allow it, the chat's model (or
//! `SessionConfig::sampling_model`) writes the answer.

// Sampling is marked deprecated by SEP-2577, yet servers of every revision
// before it (server-everything among them) use it.
#![allow(deprecated)]

use lrg_providers::{Message, Part, Role, StopReason, ToolResult, ToolSpec};
use rmcp::model::{
    ContentBlock, ContextInclusion, CreateMessageRequestParams, CreateMessageResult, ErrorCode,
    ErrorData, SamplingMessage, SamplingMessageContentBlock, ToolChoiceMode,
};
use serde_json::{Map, Value};

use super::super::capped::size;
use super::super::content::part_from_block;
use super::handler::Asking;
use super::link::Link;

/// The most a sampling request may carry, in bytes of text (messages,
/// system prompt, tool schemas) and decoded images together: 1 MiB. A
/// larger one is declined with its size before anything is asked or sent.
pub(crate) const MAX_SAMPLING_BYTES: usize = 1024 * 1024;

/// The JSON-RPC code of a sampling request lrg does not answer (the spec's
/// "user rejected sampling request").
const REFUSED: i32 = -1;

/// Whether the model should, may or must not call the request's tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ToolUse {
    Auto,
    Required,
    None,
}

/// A sampling request, read: what the session asks its model.
#[derive(Debug, Clone)]
pub(crate) struct SamplingAsk {
    pub(crate) server: String,
    /// The call it came during, when one call ran on the server.
    pub(crate) tool_call_id: Option<String>,
    pub(crate) messages: Vec<Message>,
    pub(crate) system_prompt: Option<String>,
    pub(crate) max_tokens: u32,
    pub(crate) temperature: Option<f32>,
    pub(crate) stop_sequences: Vec<String>,
    /// The server's tools for this answer (never lrg's own).
    pub(crate) tools: Vec<ToolSpec>,
    pub(crate) tool_use: ToolUse,
    /// `none`, `thisServer` or `allServers`, as the server asked.
    pub(crate) include_context: &'static str,
}

/// The model's answer.
#[derive(Debug, Clone)]
pub(crate) struct Sampled {
    /// `provider:model`.
    pub(crate) model: String,
    /// Text and tool calls, in order.
    pub(crate) parts: Vec<Part>,
    pub(crate) stop: Option<StopReason>,
}

/// Why a sampling request got no answer; the text goes to the server.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Refused {
    /// The person, a rule or lrg's limits said no.
    Declined(String),
    /// The model failed, or the chat stopped.
    Failed(String),
}

impl Refused {
    fn into_error(self) -> ErrorData {
        match self {
            Self::Declined(why) => ErrorData::new(ErrorCode(REFUSED), why, None),
            Self::Failed(why) => ErrorData::internal_error(why, None),
        }
    }
}

/// Answer a sampling request that came over `link`: checked here, then
/// decided and answered by the session of the call running on the server.
pub(super) async fn answer(
    link: &Link,
    params: CreateMessageRequestParams,
) -> Result<CreateMessageResult, ErrorData> {
    let Some((caller, tool_call_id, token)) = link.asker() else {
        return Err(Refused::Declined(
            "lrg only lets a tool server ask the model during a tool call".to_owned(),
        )
        .into_error());
    };
    let declined = |reason: String| {
        tracing::warn!(server = %link.server, %reason, "a sampling request was declined");
        caller.sink.server_log(
            &link.server,
            "warning",
            None,
            &format!("its sampling request was declined: {reason}"),
        );
        Refused::Declined(reason).into_error()
    };
    if link.sampling_nested() {
        return Err(declined(
            "a sampled answer cannot ask the model again (lrg's sampling depth limit is 1)"
                .to_owned(),
        ));
    }
    let ask = read(params, &link.server, tool_call_id).map_err(declined)?;
    // The call's own timeout waits while the person decides and the model
    // answers, as it does for a question.
    let _open = Asking::open(link, token);
    match caller.sink.sample(ask, caller.cancel.clone()).await {
        Ok(sampled) => Ok(result_of(sampled)),
        Err(refused) => Err(refused.into_error()),
    }
}

/// Read a request: its size first (nothing of an oversized one is kept),
/// then its messages, settings and tools.
pub(crate) fn read(
    params: CreateMessageRequestParams,
    server: &str,
    tool_call_id: Option<String>,
) -> Result<SamplingAsk, String> {
    let bytes = request_bytes(&params);
    if bytes > MAX_SAMPLING_BYTES {
        return Err(format!(
            "the request carries {}, more than the {} lrg lets a server send the model",
            size(bytes as u64),
            size(MAX_SAMPLING_BYTES as u64)
        ));
    }
    params
        .validate()
        .map_err(|e| format!("the request is not valid: {e}"))?;
    if params.max_tokens == 0 {
        return Err("its maxTokens is 0: there is nothing to answer with".to_owned());
    }
    if params.messages.is_empty() {
        return Err("it has no messages".to_owned());
    }
    let mut messages = Vec::with_capacity(params.messages.len());
    // Tool results name their tool by the id of the call they answer.
    let mut call_names: Vec<(String, String)> = Vec::new();
    for (i, message) in params.messages.into_iter().enumerate() {
        messages.push(message_of(message, i + 1, &mut call_names)?);
    }
    let tool_use = match params.tool_choice.and_then(|c| c.mode) {
        Some(ToolChoiceMode::Required) => ToolUse::Required,
        Some(ToolChoiceMode::None) => ToolUse::None,
        _ => ToolUse::Auto,
    };
    let tools = params
        .tools
        .unwrap_or_default()
        .into_iter()
        .map(|t| super::remote_tool(t).spec)
        .collect();
    let include_context = match params.include_context {
        Some(ContextInclusion::ThisServer) => "thisServer",
        Some(ContextInclusion::AllServers) => "allServers",
        _ => "none",
    };
    Ok(SamplingAsk {
        server: server.to_owned(),
        tool_call_id,
        messages,
        system_prompt: params.system_prompt.filter(|s| !s.trim().is_empty()),
        max_tokens: params.max_tokens,
        // lrg's settings take 0 to 2, as every provider does.
        temperature: params.temperature.map(|t| t.clamp(0.0, 2.0)),
        stop_sequences: params
            .stop_sequences
            .unwrap_or_default()
            .into_iter()
            .filter(|s| !s.is_empty())
            .collect(),
        tools,
        tool_use,
        include_context,
    })
}

/// The request's size: text as it is, base64 data as the bytes it decodes to.
fn request_bytes(params: &CreateMessageRequestParams) -> usize {
    let block = |b: &SamplingMessageContentBlock| match b {
        SamplingMessageContentBlock::Text(t) => t.text.len(),
        SamplingMessageContentBlock::Image(i) => i.data.len() / 4 * 3,
        SamplingMessageContentBlock::Audio(a) => a.data.len() / 4 * 3,
        SamplingMessageContentBlock::ToolUse(u) => {
            u.name.len() + serde_json::to_string(&u.input).map_or(0, |s| s.len())
        }
        SamplingMessageContentBlock::ToolResult(r) => r
            .content
            .iter()
            .map(|c| match c {
                ContentBlock::Text(t) => t.text.len(),
                ContentBlock::Image(i) => i.data.len() / 4 * 3,
                other => serde_json::to_string(other).map_or(0, |s| s.len()),
            })
            .sum(),
        #[allow(unreachable_patterns)]
        _ => 0,
    };
    let messages: usize = params
        .messages
        .iter()
        .map(|m| m.content.iter().map(block).sum::<usize>())
        .sum();
    let tools = params
        .tools
        .as_ref()
        .map_or(0, |t| serde_json::to_string(t).map_or(0, |s| s.len()));
    messages + params.system_prompt.as_ref().map_or(0, String::len) + tools
}

/// One message of the request as lrg's; `n` counts from 1, for errors.
fn message_of(
    message: SamplingMessage,
    n: usize,
    call_names: &mut Vec<(String, String)>,
) -> Result<Message, String> {
    let mut parts = Vec::new();
    let mut results = Vec::new();
    for block in message.content.into_vec() {
        match block {
            SamplingMessageContentBlock::Text(t) => parts.push(Part::text(t.text)),
            SamplingMessageContentBlock::Image(i) => {
                let part = part_from_block(ContentBlock::Image(i));
                if matches!(part, Part::Text { .. }) {
                    return Err(format!("message {n}: its image could not be decoded"));
                }
                parts.push(part);
            }
            SamplingMessageContentBlock::Audio(_) => {
                return Err(format!(
                    "message {n} holds audio, which lrg does not send to models"
                ));
            }
            SamplingMessageContentBlock::ToolUse(u) => {
                call_names.push((u.id.clone(), u.name.clone()));
                parts.push(Part::ToolCall(lrg_providers::ToolCall {
                    id: u.id,
                    name: u.name,
                    arguments: Value::Object(u.input),
                }));
            }
            SamplingMessageContentBlock::ToolResult(r) => {
                let name = call_names
                    .iter()
                    .find(|(id, _)| *id == r.tool_use_id)
                    .map(|(_, name)| name.clone())
                    .unwrap_or_default();
                let mut content: Vec<Part> = r.content.into_iter().map(part_from_block).collect();
                if let Some(structured) = r.structured_content
                    && content.is_empty()
                {
                    content.push(Part::text(structured.to_string()));
                }
                results.push(ToolResult {
                    call_id: r.tool_use_id,
                    name,
                    parts: content,
                    is_error: r.is_error == Some(true),
                });
            }
            #[allow(unreachable_patterns)]
            _ => return Err(format!("message {n} holds content lrg does not know")),
        }
    }
    if !results.is_empty() {
        // `validate` made sure tool results come alone, in a user message.
        return Ok(Message::tool_results(results));
    }
    let role = match message.role {
        rmcp::model::Role::Assistant => Role::Assistant,
        _ => Role::User,
    };
    Ok(Message { role, parts })
}

/// The answer as the server gets it.
fn result_of(sampled: Sampled) -> CreateMessageResult {
    let mut blocks = Vec::new();
    for part in sampled.parts {
        match part {
            Part::Text { text } if !text.is_empty() => {
                blocks.push(SamplingMessageContentBlock::text(text));
            }
            Part::ToolCall(call) => {
                let input = match call.arguments {
                    Value::Object(map) => map,
                    Value::Null => Map::new(),
                    other => Map::from_iter([("value".to_owned(), other)]),
                };
                blocks.push(SamplingMessageContentBlock::tool_use(
                    call.id, call.name, input,
                ));
            }
            _ => {}
        }
    }
    let stop = match &sampled.stop {
        _ if blocks
            .iter()
            .any(|b| matches!(b, SamplingMessageContentBlock::ToolUse(_))) =>
        {
            CreateMessageResult::STOP_REASON_TOOL_USE.to_owned()
        }
        Some(StopReason::MaxTokens) => CreateMessageResult::STOP_REASON_END_MAX_TOKEN.to_owned(),
        Some(StopReason::Other(other)) => other.clone(),
        _ => CreateMessageResult::STOP_REASON_END_TURN.to_owned(),
    };
    if blocks.is_empty() {
        blocks.push(SamplingMessageContentBlock::text(String::new()));
    }
    let message = if blocks.len() == 1 {
        SamplingMessage::new(rmcp::model::Role::Assistant, blocks.remove(0))
    } else {
        SamplingMessage::new_multiple(rmcp::model::Role::Assistant, blocks)
    };
    CreateMessageResult::new(message, sampled.model).with_stop_reason(stop)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_oversized_request_is_declined_with_its_size() {
        let big = "x".repeat(10 * 1024 * 1024);
        let params = CreateMessageRequestParams::new(vec![SamplingMessage::user_text(big)], 10);
        let err = read(params, "s", None).unwrap_err();
        assert!(err.contains("10 MiB") && err.contains("1 MiB"), "{err}");
    }

    #[test]
    fn settings_and_tool_turns_are_read() {
        let mut input = serde_json::Map::new();
        input.insert("city".into(), "Paris".into());
        let params = CreateMessageRequestParams::new(
            vec![
                SamplingMessage::user_text("weather?"),
                SamplingMessage::assistant_tool_use("t1", "weather", input),
                SamplingMessage::user_tool_result("t1", vec![ContentBlock::text("sunny")]),
            ],
            50,
        )
        .with_temperature(5.0)
        .with_stop_sequences(vec![String::new(), "END".into()])
        .with_tool_choice(rmcp::model::ToolChoice::none());
        let ask = read(params, "s", Some("c1".into())).unwrap();
        assert_eq!(ask.temperature, Some(2.0));
        assert_eq!(ask.stop_sequences, vec!["END".to_owned()]);
        assert_eq!(ask.tool_use, ToolUse::None);
        assert_eq!(ask.messages.len(), 3);
        assert_eq!(ask.messages[2].role, Role::Tool);
        let Part::ToolResult(r) = &ask.messages[2].parts[0] else {
            panic!("{:?}", ask.messages[2]);
        };
        assert_eq!(r.name, "weather");
        let unbalanced = CreateMessageRequestParams::new(
            vec![SamplingMessage::user_tool_result("nope", vec![])],
            5,
        );
        assert!(
            read(unbalanced, "s", None)
                .unwrap_err()
                .contains("not valid")
        );
    }

    #[test]
    fn an_answer_with_a_call_stops_for_tool_use() {
        let result = result_of(Sampled {
            model: "script:m".into(),
            parts: vec![
                Part::text("let me look"),
                Part::ToolCall(lrg_providers::ToolCall {
                    id: "1".into(),
                    name: "weather".into(),
                    arguments: serde_json::json!({"city": "Oslo"}),
                }),
            ],
            stop: Some(StopReason::ToolCalls),
        });
        let json = serde_json::to_value(&result).unwrap();
        assert_eq!(json["stopReason"], "toolUse");
        assert_eq!(json["role"], "assistant");
        assert_eq!(json["content"][1]["type"], "tool_use");
        assert_eq!(json["model"], "script:m");
    }
}
