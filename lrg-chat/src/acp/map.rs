//! Between lrg's types and ACP's: events as session updates, tool classes
//! as tool kinds, approval answers as permission options, prompts as user
//! input. Pure functions, so both directions are tested without a process.

use std::collections::HashMap;

use agent_client_protocol::v1::schema::{
    AvailableCommand, AvailableCommandInput, AvailableCommandsUpdate, ContentBlock, ContentChunk,
    EmbeddedResourceResource, McpServer, PermissionOption, PermissionOptionKind, Plan,
    PlanEntry as AcpPlanEntry, PlanEntryPriority, PlanEntryStatus, RequestPermissionOutcome,
    SessionUpdate, StopReason, ToolCall, ToolCallStatus, ToolCallUpdate, ToolCallUpdateFields,
    ToolKind, UnstructuredCommandInput, UsageUpdate,
};
use base64::Engine as _;
use lrg_providers::Image;

use crate::events::{AgentCommand, DeltaKind, Event, PlanEntry, PlanPriority, PlanStatus};
use crate::permissions::Answer;
use crate::session::{ApprovalRequest, TurnOutcome, UserInput};
use crate::tools::{HttpServerConfig, McpConfig, McpServerConfig, StdioServerConfig, ToolClass};

/// The ACP kind of a tool of this class: what an editor shows beside it.
pub(crate) fn tool_kind(class: ToolClass) -> ToolKind {
    match class {
        ToolClass::Read => ToolKind::Read,
        ToolClass::Change => ToolKind::Edit,
        ToolClass::Destructive => ToolKind::Delete,
    }
}

/// The four answers an editor offers, with the option ids lrg gives them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Choice {
    AllowOnce,
    AllowAlways,
    RejectOnce,
    RejectAlways,
}

impl Choice {
    const ALL: [Choice; 4] = [
        Choice::AllowOnce,
        Choice::AllowAlways,
        Choice::RejectOnce,
        Choice::RejectAlways,
    ];

    fn id(self) -> &'static str {
        match self {
            Choice::AllowOnce => "allow_once",
            Choice::AllowAlways => "allow_always",
            Choice::RejectOnce => "reject_once",
            Choice::RejectAlways => "reject_always",
        }
    }

    fn kind(self) -> PermissionOptionKind {
        match self {
            Choice::AllowOnce => PermissionOptionKind::AllowOnce,
            Choice::AllowAlways => PermissionOptionKind::AllowAlways,
            Choice::RejectOnce => PermissionOptionKind::RejectOnce,
            Choice::RejectAlways => PermissionOptionKind::RejectAlways,
        }
    }

    fn label(self) -> &'static str {
        match self {
            Choice::AllowOnce => "Allow once",
            Choice::AllowAlways => "Always allow this tool",
            Choice::RejectOnce => "Reject",
            Choice::RejectAlways => "Never offer this tool again",
        }
    }

    /// The option list of a question; "always" answers only where they mean
    /// something (a bulk question asks even for an allowed tool).
    pub(crate) fn options(offer_always: bool) -> Vec<PermissionOption> {
        Self::ALL
            .into_iter()
            .filter(|c| offer_always || matches!(c, Choice::AllowOnce | Choice::RejectOnce))
            .map(|c| PermissionOption::new(c.id(), c.label(), c.kind()))
            .collect()
    }

    /// The choice an editor's outcome names; a cancelled question (the
    /// turn was cancelled) or an unknown option id is a rejection.
    pub(crate) fn of(outcome: &RequestPermissionOutcome) -> Choice {
        match outcome {
            RequestPermissionOutcome::Selected(selected) => Self::ALL
                .into_iter()
                .find(|c| *selected.option_id.0 == *c.id())
                .unwrap_or(Choice::RejectOnce),
            _ => Choice::RejectOnce,
        }
    }

    /// lrg's answer. "Reject always" is a denial here plus a block rule the
    /// caller writes, so the tool is no longer offered.
    pub(crate) fn answer(self) -> Answer {
        match self {
            Choice::AllowOnce => Answer::Once,
            Choice::AllowAlways => Answer::Always,
            Choice::RejectOnce | Choice::RejectAlways => Answer::deny(),
        }
    }
}

/// The text of a prompt, with its images; resource links and embedded text
/// resources become text, since lrg's tools (not the protocol) read files.
pub(crate) fn user_input(blocks: Vec<ContentBlock>) -> Result<UserInput, String> {
    let mut text = Vec::new();
    let mut images = Vec::new();
    for block in blocks {
        match block {
            ContentBlock::Text(t) => text.push(t.text),
            ContentBlock::Image(image) => {
                let data = base64::engine::general_purpose::STANDARD
                    .decode(image.data.as_bytes())
                    .map_err(|e| format!("an image of the prompt is not valid base64: {e}"))?;
                images.push(Image {
                    mime: image.mime_type,
                    data: data.into(),
                });
            }
            ContentBlock::ResourceLink(link) => text.push(format!("[{}]({})", link.name, link.uri)),
            ContentBlock::Resource(embedded) => match embedded.resource {
                EmbeddedResourceResource::TextResourceContents(r) => text.push(format!(
                    "<resource uri=\"{}\">\n{}\n</resource>",
                    r.uri, r.text
                )),
                _ => return Err("binary embedded resources are not supported".into()),
            },
            _ => return Err("audio and other content kinds are not supported".into()),
        }
    }
    if text.iter().all(|t| t.trim().is_empty()) && images.is_empty() {
        return Err("the prompt is empty".into());
    }
    Ok(UserInput {
        text: text.join("\n"),
        images,
    })
}

/// The client's MCP servers as lrg's tool configuration, in the client's
/// order. SSE servers are refused (the capability is not advertised).
pub(crate) fn mcp_config(servers: Vec<McpServer>) -> Result<McpConfig, String> {
    let mut out = Vec::new();
    for server in servers {
        let (name, config) = match server {
            McpServer::Stdio(s) => {
                let mut config =
                    StdioServerConfig::new(s.command.to_string_lossy().into_owned()).args(s.args);
                for var in s.env {
                    config = config.env(var.name, var.value);
                }
                (s.name, McpServerConfig::Stdio(config))
            }
            McpServer::Http(s) => {
                let mut config = HttpServerConfig::new(s.url);
                for header in s.headers {
                    config = config.header(header.name, header.value);
                }
                (s.name, McpServerConfig::Http(config))
            }
            McpServer::Sse(s) => {
                return Err(format!(
                    "MCP server `{}`: SSE transport is not supported; use stdio or HTTP",
                    s.name
                ));
            }
            _ => return Err("an MCP server of an unknown transport".into()),
        };
        out.push((name, config));
    }
    Ok(McpConfig::new(out))
}

/// How a prompt ends on the wire: a stop reason, or an error message.
pub(crate) fn stop_reason(outcome: &TurnOutcome) -> Result<StopReason, String> {
    match outcome {
        TurnOutcome::Completed { .. } => Ok(StopReason::EndTurn),
        // ACP prompts are never typed; said as an error should one be.
        TurnOutcome::Invalid { errors, .. } => Err(format!(
            "the answer does not match its schema: {}",
            errors.join("; ")
        )),
        TurnOutcome::Stopped => Ok(StopReason::Cancelled),
        TurnOutcome::StepsExhausted => Ok(StopReason::MaxTurnRequests),
        TurnOutcome::OverBudget { reason } => Err(reason.clone()),
        TurnOutcome::Failed { error } => Err(error.to_string()),
        // The hook's reason went out as a `hook_decision`, shown as a message.
        TurnOutcome::Blocked { .. } => Ok(StopReason::Refusal),
    }
}

/// Turns a session's events into ACP session updates, remembering what it
/// needs across events (whether a turn was streamed, why a hook denied).
#[derive(Debug, Default)]
pub(crate) struct Updates {
    /// Text was streamed as deltas for the current model turn, so its
    /// `assistant_turn` repeats it and is not sent again.
    streamed: bool,
    /// Why a hook denied a call, by call id, for the update that says it
    /// did not run.
    hook_denials: HashMap<String, String>,
}

impl Updates {
    /// The updates for one event. `replay`: the event is history being told
    /// again (`session/load`), so user messages are sent too.
    pub(crate) fn map(&mut self, event: &Event, replay: bool) -> Vec<SessionUpdate> {
        let chunk = |text: &str| ContentChunk::new(ContentBlock::from(text.to_string()));
        match event {
            Event::UserMessage { text, .. } if replay => {
                vec![SessionUpdate::UserMessageChunk(chunk(text))]
            }
            Event::Delta { kind, text } => {
                self.streamed = true;
                vec![match kind {
                    DeltaKind::Text => SessionUpdate::AgentMessageChunk(chunk(text)),
                    DeltaKind::Reasoning => SessionUpdate::AgentThoughtChunk(chunk(text)),
                }]
            }
            Event::AssistantTurn {
                reasoning, text, ..
            } => {
                let streamed = std::mem::take(&mut self.streamed);
                let mut out = Vec::new();
                if !streamed && !reasoning.is_empty() {
                    out.push(SessionUpdate::AgentThoughtChunk(chunk(reasoning)));
                }
                if !streamed && !text.is_empty() {
                    out.push(SessionUpdate::AgentMessageChunk(chunk(text)));
                }
                out
            }
            Event::ToolCall {
                call_id,
                tool,
                title,
                class,
                arguments,
                ..
            } => {
                let title = title.clone().unwrap_or_else(|| tool.clone());
                let call = ToolCall::new(call_id.clone(), title)
                    .kind(tool_kind(*class))
                    .status(ToolCallStatus::Pending)
                    .raw_input(arguments.clone());
                vec![SessionUpdate::ToolCall(call)]
            }
            Event::ToolRunning { call_id } => vec![status(call_id, ToolCallStatus::InProgress)],
            Event::ToolDone {
                call_id, ok, text, ..
            } => {
                let fields = ToolCallUpdateFields::new()
                    .status(if *ok {
                        ToolCallStatus::Completed
                    } else {
                        ToolCallStatus::Failed
                    })
                    .content(vec![ContentBlock::from(text.clone()).into()]);
                vec![SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
                    call_id.clone(),
                    fields,
                ))]
            }
            Event::ToolSkipped {
                call_id,
                reason,
                note,
            } => {
                let mut why = format!("Not run: {}", reason.describe());
                if let Some(note) = note {
                    why.push_str(&format!(" ({note})"));
                }
                if let Some(reason) = self.hook_denials.remove(call_id) {
                    why.push_str(&format!(": {reason}"));
                }
                let fields = ToolCallUpdateFields::new()
                    .status(ToolCallStatus::Failed)
                    .content(vec![ContentBlock::from(why).into()]);
                vec![SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
                    call_id.clone(),
                    fields,
                ))]
            }
            Event::Warning { message, retrying } => {
                // A retried turn starts over; what was streamed of it stays
                // on the editor's screen (ACP cannot take text back), so the
                // warning says so.
                if *retrying {
                    self.streamed = false;
                }
                vec![SessionUpdate::AgentThoughtChunk(chunk(&format!(
                    "\n[warning: {message}]\n"
                )))]
            }
            Event::Usage {
                usage,
                context_window,
                ..
            } => vec![SessionUpdate::UsageUpdate(UsageUpdate::new(
                u64::from(usage.prompt_tokens) + u64::from(usage.completion_tokens),
                u64::from(*context_window),
            ))],
            Event::Stopped => {
                self.streamed = false;
                Vec::new()
            }
            Event::HookDecision {
                call_id: Some(call_id),
                decision: crate::hooks::HookDecisionKind::Deny,
                reason,
                ..
            } => {
                if let Some(reason) = reason {
                    self.hook_denials.insert(call_id.clone(), reason.clone());
                }
                Vec::new()
            }
            // When lrg runs on an ACP agent, the editor sees that agent's
            // plan and commands as lrg's own (a `/name` message passes
            // through to the agent as it is).
            Event::Plan { entries } => {
                vec![SessionUpdate::Plan(Plan::new(
                    entries.iter().map(plan_entry).collect(),
                ))]
            }
            Event::AgentCommands { commands } => {
                vec![SessionUpdate::AvailableCommandsUpdate(
                    AvailableCommandsUpdate::new(commands.iter().map(available_command).collect()),
                )]
            }
            // A blocked message gets no answer: the editor shows why.
            Event::HookDecision {
                hook,
                decision: crate::hooks::HookDecisionKind::Block,
                reason,
                ..
            } => {
                let why = reason.as_deref().unwrap_or("no reason given");
                vec![SessionUpdate::AgentMessageChunk(chunk(&format!(
                    "A hook ({hook}) blocked this message: {why}"
                )))]
            }
            _ => Vec::new(),
        }
    }
}

fn plan_entry(entry: &PlanEntry) -> AcpPlanEntry {
    let priority = match entry.priority {
        PlanPriority::High => PlanEntryPriority::High,
        PlanPriority::Medium => PlanEntryPriority::Medium,
        PlanPriority::Low => PlanEntryPriority::Low,
    };
    let status = match entry.status {
        PlanStatus::Pending => PlanEntryStatus::Pending,
        PlanStatus::InProgress => PlanEntryStatus::InProgress,
        PlanStatus::Completed => PlanEntryStatus::Completed,
    };
    AcpPlanEntry::new(entry.content.clone(), priority, status)
}

fn available_command(command: &AgentCommand) -> AvailableCommand {
    let made = AvailableCommand::new(command.name.clone(), command.description.clone());
    match &command.hint {
        Some(hint) => made.input(AvailableCommandInput::Unstructured(
            UnstructuredCommandInput::new(hint.clone()),
        )),
        None => made,
    }
}

/// The update a permission question carries: the call, as the question
/// itself describes it.
pub(crate) fn question(request: &ApprovalRequest) -> ToolCallUpdate {
    let fields = ToolCallUpdateFields::new()
        .status(ToolCallStatus::Pending)
        .title(request.label().to_string())
        .kind(tool_kind(request.class))
        .raw_input(request.arguments.clone());
    ToolCallUpdate::new(request.call_id.clone(), fields)
}

fn status(call_id: &str, status: ToolCallStatus) -> SessionUpdate {
    SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
        call_id.to_string(),
        ToolCallUpdateFields::new().status(status),
    ))
}

#[cfg(test)]
mod tests {
    use agent_client_protocol::v1::schema::SelectedPermissionOutcome;
    use serde_json::json;

    use super::*;
    use crate::SkipReason;

    #[test]
    fn an_agents_plan_and_commands_are_passed_on() {
        let mut u = Updates::default();
        let plan = Event::Plan {
            entries: vec![PlanEntry::new(
                "write a.txt",
                PlanPriority::High,
                PlanStatus::InProgress,
            )],
        };
        let [SessionUpdate::Plan(sent)] = &u.map(&plan, false)[..] else {
            panic!("not a plan");
        };
        assert_eq!(
            sent.entries,
            [AcpPlanEntry::new(
                "write a.txt",
                PlanEntryPriority::High,
                PlanEntryStatus::InProgress
            )]
        );
        let commands = Event::AgentCommands {
            commands: vec![
                AgentCommand::new("review", "review the changes"),
                AgentCommand::new("fix", "fix an issue").with_hint("issue number"),
            ],
        };
        let [SessionUpdate::AvailableCommandsUpdate(sent)] = &u.map(&commands, false)[..] else {
            panic!("not commands");
        };
        let told: Vec<(&str, bool)> = sent
            .available_commands
            .iter()
            .map(|c| (c.name.as_str(), c.input.is_some()))
            .collect();
        assert_eq!(told, [("review", false), ("fix", true)]);
    }

    #[test]
    fn tool_classes_become_kinds() {
        assert_eq!(tool_kind(ToolClass::Read), ToolKind::Read);
        assert_eq!(tool_kind(ToolClass::Change), ToolKind::Edit);
        assert_eq!(tool_kind(ToolClass::Destructive), ToolKind::Delete);
    }

    #[test]
    fn each_option_maps_onto_an_answer() {
        let pick = |id: &str| {
            Choice::of(&RequestPermissionOutcome::Selected(
                SelectedPermissionOutcome::new(id.to_string()),
            ))
        };
        assert_eq!(pick("allow_once").answer(), Answer::Once);
        assert_eq!(pick("allow_always").answer(), Answer::Always);
        assert_eq!(pick("reject_once").answer(), Answer::deny());
        assert_eq!(pick("reject_always"), Choice::RejectAlways);
        assert_eq!(pick("reject_always").answer(), Answer::deny());
        assert_eq!(pick("no_such_option"), Choice::RejectOnce);
        assert_eq!(
            Choice::of(&RequestPermissionOutcome::Cancelled),
            Choice::RejectOnce
        );
        assert_eq!(Choice::options(true).len(), 4);
        let bulk: Vec<_> = Choice::options(false).into_iter().map(|o| o.kind).collect();
        assert_eq!(
            bulk,
            [
                PermissionOptionKind::AllowOnce,
                PermissionOptionKind::RejectOnce
            ]
        );
    }

    #[test]
    fn streamed_turns_are_not_sent_twice_and_calls_keep_their_status() {
        let mut u = Updates::default();
        assert!(
            u.map(
                &Event::UserMessage {
                    text: "hi".into(),
                    images: 0
                },
                false
            )
            .is_empty()
        );
        let delta = Event::Delta {
            kind: DeltaKind::Text,
            text: "Hel".into(),
        };
        assert!(matches!(
            u.map(&delta, false)[..],
            [SessionUpdate::AgentMessageChunk(_)]
        ));
        let turn = Event::AssistantTurn {
            reasoning: String::new(),
            text: "Hello".into(),
            json: None,
            stopped: false,
        };
        assert!(u.map(&turn, false).is_empty());
        // A turn that was not streamed (a replay) is sent whole.
        assert_eq!(u.map(&turn, true).len(), 1);
        let call = Event::ToolCall {
            call_id: "c1".into(),
            tool: "delete_notes".into(),
            title: None,
            class: ToolClass::Destructive,
            arguments: json!({"ids": [1]}),
            targets: Some(1),
            runs_on: Default::default(),
        };
        let [SessionUpdate::ToolCall(announced)] = &u.map(&call, false)[..] else {
            panic!("not a tool call");
        };
        assert_eq!(announced.kind, ToolKind::Delete);
        assert_eq!(announced.status, ToolCallStatus::Pending);
        let asked = crate::ApprovalRequest::new(
            "c1",
            "delete_notes",
            ToolClass::Destructive,
            json!({"ids": [1]}),
            crate::permissions::ApprovalReason::Rule,
        );
        let question = question(&asked);
        assert_eq!(question.fields.title.as_deref(), Some("delete_notes"));
        assert_eq!(question.fields.kind, Some(ToolKind::Delete));
        assert_eq!(question.fields.raw_input, Some(json!({"ids": [1]})));
        let skipped = Event::ToolSkipped {
            call_id: "c1".into(),
            reason: SkipReason::NotAllowed,
            note: None,
        };
        let [SessionUpdate::ToolCallUpdate(update)] = &u.map(&skipped, false)[..] else {
            panic!("not an update");
        };
        assert_eq!(update.fields.status, Some(ToolCallStatus::Failed));
    }

    #[test]
    fn prompts_become_user_input() {
        let input =
            user_input(vec![ContentBlock::from("look at this".to_string())]).expect("text prompt");
        assert_eq!(input.text, "look at this");
        assert!(user_input(vec![]).is_err());
    }
}
