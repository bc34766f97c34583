//! What the agent streams, told to the chat: its answer as the turn's
//! deltas, its tool calls as the chat's tool events (and, once ended, as
//! [`AgentToolCall`] parts of the turn), its plan and commands as events of
//! their own, its usage as the turn's.

use std::sync::atomic::Ordering;

use agent_client_protocol::v1::schema::{
    AvailableCommand, AvailableCommandInput, ContentBlock, PermissionOptionKind, PlanEntryPriority,
    PlanEntryStatus, RequestPermissionOutcome, RequestPermissionRequest, SelectedPermissionOutcome,
    SessionUpdate, ToolCallContent, ToolCallStatus, ToolKind,
};
use serde_json::Value;

use lrg_providers::{TurnEvent, Usage};

use super::Inner;
use crate::acp::calls::AgentToolCall;
use crate::events::{AgentCommand, Event, PlanEntry, PlanPriority, PlanStatus};
use crate::permissions::Answer;
use crate::session::{ChatSession, WeakChatSession};
use crate::tools::ToolClass;

/// The agent's tool calls told to the chat so far in this turn.
pub(super) struct Shown<'a> {
    inner: &'a Inner,
    /// The chat whose turn this is.
    chat: Option<WeakChatSession>,
    /// The calls, in the order they came, as they stand.
    calls: Vec<AgentToolCall>,
    /// Some answer text was streamed in this turn.
    wrote: bool,
    /// A tool call was shown since the last answer text.
    tools_since_text: bool,
}

impl<'a> Shown<'a> {
    pub(super) fn new(inner: &'a Inner, chat: Option<WeakChatSession>) -> Self {
        Self {
            inner,
            chat,
            calls: Vec::new(),
            wrote: false,
            tools_since_text: false,
        }
    }

    fn chat(&self) -> Option<ChatSession> {
        self.chat.as_ref().and_then(WeakChatSession::upgrade)
    }

    fn publish(&self, event: Event) {
        if let Some(chat) = self.chat() {
            chat.publish_external(event);
        }
    }

    /// The turn event for an update, after telling the chat what is not
    /// part of the model's answer (tool calls, plan, commands).
    pub(super) fn update(&mut self, update: SessionUpdate) -> Option<TurnEvent> {
        let text = |block: ContentBlock| match block {
            ContentBlock::Text(t) => Some(t.text),
            _ => None,
        };
        match update {
            SessionUpdate::AgentMessageChunk(chunk) => text(chunk.content).map(|mut text| {
                // The agent's answer after its tool calls is a new
                // paragraph, as it would be in lrg's own loop.
                if std::mem::take(&mut self.tools_since_text) && self.wrote {
                    text.insert(0, '\n');
                }
                self.wrote = true;
                TurnEvent::TextDelta { text }
            }),
            SessionUpdate::AgentThoughtChunk(chunk) => {
                text(chunk.content).map(|text| TurnEvent::ReasoningDelta { text })
            }
            SessionUpdate::ToolCall(call) => {
                let id = call.tool_call_id.0.to_string();
                self.announce(&id, &call.title, call.kind, call.raw_input);
                self.status(&id, Some(call.status), call.content)
            }
            SessionUpdate::ToolCallUpdate(update) => {
                let id = update.tool_call_id.0.to_string();
                let fields = update.fields;
                let title = fields.title.unwrap_or_else(|| "tool".into());
                self.announce(
                    &id,
                    &title,
                    fields.kind.unwrap_or_default(),
                    fields.raw_input,
                );
                self.status(&id, fields.status, fields.content.unwrap_or_default())
            }
            SessionUpdate::Plan(plan) => {
                let entries = plan
                    .entries
                    .into_iter()
                    .map(|e| PlanEntry::new(e.content, priority(e.priority), status(e.status)))
                    .collect();
                self.publish(Event::Plan { entries });
                None
            }
            SessionUpdate::AvailableCommandsUpdate(update) => {
                let commands = update.available_commands.into_iter().map(command).collect();
                self.publish(Event::AgentCommands { commands });
                None
            }
            SessionUpdate::UsageUpdate(usage) => {
                // The agent tells how full its window is, not what one turn
                // read and wrote: the tokens in use count as read.
                let used = u32::try_from(usage.used).unwrap_or(u32::MAX);
                let size = u32::try_from(usage.size).unwrap_or(u32::MAX);
                self.inner.window.store(size, Ordering::Relaxed);
                Some(TurnEvent::Usage(Usage::new(used, 0)))
            }
            _ => None,
        }
    }

    /// The calls that never said how they ended, as parts of the turn (the
    /// turn is over: they are kept as they stand).
    pub(super) fn unfinished(&mut self) -> Vec<TurnEvent> {
        let model = self.inner.name();
        self.calls
            .drain(..)
            .filter(|c| c.ok.is_none())
            .map(|c| TurnEvent::Native(c.to_native(&model)))
            .collect()
    }

    fn announce(&mut self, id: &str, title: &str, kind: ToolKind, input: Option<Value>) {
        if self.calls.iter().any(|c| c.id == id) {
            return;
        }
        self.tools_since_text = true;
        let call = AgentToolCall {
            id: id.to_string(),
            title: title.to_string(),
            class: class_of(kind),
            arguments: input.unwrap_or_else(|| Value::Object(Default::default())),
            ok: None,
            result: String::new(),
        };
        if let Some(event) = call.events().into_iter().next() {
            self.publish(event);
        }
        self.calls.push(call);
    }

    /// Tell the chat where call `id` stands; once it ended, the part that
    /// keeps it in the history.
    fn status(
        &mut self,
        id: &str,
        status: Option<ToolCallStatus>,
        content: Vec<ToolCallContent>,
    ) -> Option<TurnEvent> {
        let call_id = id.to_string();
        match status {
            Some(ToolCallStatus::InProgress) => {
                self.publish(Event::ToolRunning { call_id });
                None
            }
            Some(ToolCallStatus::Completed | ToolCallStatus::Failed) => {
                let text = content
                    .into_iter()
                    .filter_map(|c| match c {
                        ToolCallContent::Content(c) => match c.content {
                            ContentBlock::Text(t) => Some(t.text),
                            _ => None,
                        },
                        _ => None,
                    })
                    .collect::<Vec<_>>()
                    .join("\n");
                let ok = status == Some(ToolCallStatus::Completed);
                let model = self.inner.name();
                let call = self.calls.iter_mut().find(|c| c.id == id)?;
                // An agent may say a call ended twice: told and kept once.
                if call.ok.is_some() {
                    return None;
                }
                call.ok = Some(ok);
                call.result = text;
                let native = call.to_native(&model);
                let done = call.events().into_iter().nth(1);
                if let Some(done) = done {
                    self.publish(done);
                }
                Some(TurnEvent::Native(native))
            }
            _ => None,
        }
    }

    /// Ask the chat, and pick the agent's option that says what it answered.
    pub(super) async fn ask(&mut self, req: &RequestPermissionRequest) -> RequestPermissionOutcome {
        let Some(chat) = self.chat() else {
            return RequestPermissionOutcome::Cancelled;
        };
        let id = req.tool_call.tool_call_id.0.to_string();
        let fields = &req.tool_call.fields;
        self.announce(
            &id,
            fields.title.as_deref().unwrap_or("tool"),
            fields.kind.unwrap_or_default(),
            fields.raw_input.clone(),
        );
        let offer_always = req
            .options
            .iter()
            .any(|o| o.kind == PermissionOptionKind::AllowAlways);
        let answer = chat.ask_approval(&id, offer_always).await;
        let wanted: &[PermissionOptionKind] = match answer {
            Answer::Once => &[PermissionOptionKind::AllowOnce],
            Answer::ThisChat | Answer::Always => &[
                PermissionOptionKind::AllowAlways,
                PermissionOptionKind::AllowOnce,
            ],
            Answer::Deny { .. } => &[
                PermissionOptionKind::RejectOnce,
                PermissionOptionKind::RejectAlways,
            ],
        };
        wanted
            .iter()
            .find_map(|kind| req.options.iter().find(|o| o.kind == *kind))
            .map_or(RequestPermissionOutcome::Cancelled, |o| {
                RequestPermissionOutcome::Selected(SelectedPermissionOutcome::new(
                    o.option_id.clone(),
                ))
            })
    }
}

fn command(c: AvailableCommand) -> AgentCommand {
    let made = AgentCommand::new(c.name, c.description);
    match c.input {
        Some(AvailableCommandInput::Unstructured(input)) => made.with_hint(input.hint),
        _ => made,
    }
}

fn priority(p: PlanEntryPriority) -> PlanPriority {
    match p {
        PlanEntryPriority::High => PlanPriority::High,
        PlanEntryPriority::Low => PlanPriority::Low,
        _ => PlanPriority::Medium,
    }
}

fn status(s: PlanEntryStatus) -> PlanStatus {
    match s {
        PlanEntryStatus::InProgress => PlanStatus::InProgress,
        PlanEntryStatus::Completed => PlanStatus::Completed,
        _ => PlanStatus::Pending,
    }
}

/// The permission class of an agent's tool kind; a kind that says nothing
/// counts as destructive, as an unannotated MCP tool does.
fn class_of(kind: ToolKind) -> ToolClass {
    match kind {
        ToolKind::Read | ToolKind::Search | ToolKind::Fetch | ToolKind::Think => ToolClass::Read,
        ToolKind::Edit | ToolKind::Move | ToolKind::SwitchMode => ToolClass::Change,
        _ => ToolClass::Destructive,
    }
}
