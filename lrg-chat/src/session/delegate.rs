//! The session's side of sub-agents ([`crate::sub_agents`]): building a
//! sub-agent's session from its parent's, and bringing a finished
//! sub-agent's answer into the parent's history with a turn to react.

use std::sync::Arc;

use lrg_providers::{Message, Part, Role, ToolCall, ToolResult};
use serde_json::json;

use super::persist::Announce;
use super::{ChatSession, Shared, State, TurnOutcome, Work};
use crate::events::Event;
use crate::store::{SessionId, SessionStore};
use crate::sub_agents::{Finished, Manager, SUB_AGENT_RESULT, SubAgentInfo};
use crate::tools::ToolClass;

/// A store and the id a session is kept under in it.
pub(crate) type Kept = (Arc<dyn SessionStore>, SessionId);

/// The sub-agent manager of `shared`, when sub-agents are on.
pub(crate) fn sub_agent_manager(shared: &Shared) -> Option<&Manager> {
    shared.sub_agents.as_ref()
}

/// The sub-agent manager of `session`, when sub-agents are on (for the
/// HTTP routes of a chat's sub-agents).
pub(crate) fn sub_agents_of(session: &ChatSession) -> Option<&Manager> {
    session.shared.sub_agents.as_ref()
}

/// Publish `event` on `shared`'s log.
pub(crate) fn publish(shared: &Shared, event: Event) -> u64 {
    shared.publish(event)
}

/// How many user messages the conversation holds (what "per message"
/// limits count against).
pub(crate) fn user_message_count(shared: &Shared) -> usize {
    shared.lock().user_seqs.len()
}

/// The store and id `shared` is kept under.
pub(crate) fn store_of(shared: &Shared) -> Option<Kept> {
    shared
        .persister
        .as_ref()
        .map(|p| (p.store().clone(), p.id().clone()))
}

/// A session for sub-agent `id` of `parent`: the same model, tools (without
/// the sub-agent tools: sub-agents are one level deep), system prompt,
/// permissions and tunables, and the parent's store under its own id.
pub(crate) fn sub_agent_session(parent: &Shared, id: &str) -> (ChatSession, Option<Kept>) {
    let mut builder = ChatSession::builder(parent.models.clone())
        .tools(parent.tools.clone())
        .permissions(parent.permissions.clone())
        .target_counter(parent.target_counter.clone())
        .config(parent.config.clone())
        .local_only(parent.local_only.load(std::sync::atomic::Ordering::SeqCst));
    builder.system_prompt = parent.system_prompt.clone();
    builder.hooks = parent.hooks.to_vec();
    builder.approver = parent.approver.clone().map(|parent| {
        Arc::new(super::approver::ForSubAgent {
            parent,
            id: id.to_string(),
        }) as Arc<dyn super::Approver>
    });
    let stored =
        store_of(parent).and_then(|(store, _)| Some((store, id.parse::<SessionId>().ok()?)));
    if let Some((store, sub_id)) = &stored {
        builder = builder.store(store.clone(), sub_id.clone());
    }
    (builder.build(), stored)
}

/// The sub-agent side of the session's public API.
impl ChatSession {
    /// [`ChatSession::stop`], and stop the running sub-agents too: their
    /// answers do not come back. Returns whether anything was stopped.
    pub fn stop_with_sub_agents(&self) -> bool {
        let stopped = self.stop();
        let running = self
            .shared
            .sub_agents
            .as_ref()
            .map_or(0, |m| m.stop_running());
        stopped || running > 0
    }

    /// The sub-agents this session spawned, in order (empty when sub-agents
    /// are off).
    pub fn sub_agents(&self) -> Vec<SubAgentInfo> {
        self.shared
            .sub_agents
            .as_ref()
            .map(|m| m.list())
            .unwrap_or_default()
    }

    /// Sub-agent `id`'s own session (its events, its history), once it has
    /// started.
    pub fn sub_agent(&self, id: &str) -> Option<ChatSession> {
        self.shared.sub_agents.as_ref()?.session(id)
    }

    /// Wait until no message runs (a person's, or a turn reacting to a
    /// sub-agent's answer).
    pub async fn wait_idle(&self) {
        let mut events = self.subscribe(self.shared.events.last_seq());
        while self.is_busy() {
            if events.next().await.is_none() {
                events = self.subscribe(self.shared.events.last_seq());
            }
        }
    }

    /// Whether nothing is left to do: no message running, no sub-agent
    /// queued or running, no answer waiting to come in (what makes a
    /// session safe to evict).
    pub fn is_settled(&self) -> bool {
        !self.is_busy() && self.shared.sub_agents.as_ref().is_none_or(|m| m.is_quiet())
    }

    /// Wait until nothing is left to do: no message running, no sub-agent
    /// queued or running, no answer waiting to come in. Without sub-agents,
    /// until the running message ends.
    pub async fn wait_settled(&self) {
        let mut events = self.subscribe(self.shared.events.last_seq());
        let mut changes = self
            .shared
            .sub_agents
            .as_ref()
            .map(|m| m.subscribe_changes());
        loop {
            if self.is_settled() {
                return;
            }
            tokio::select! {
                entry = events.next() => {
                    if entry.is_none() {
                        events = self.subscribe(self.shared.events.last_seq());
                    }
                }
                changed = async {
                    match changes.as_mut() {
                        Some(c) => c.changed().await.is_ok(),
                        None => std::future::pending().await,
                    }
                } => {
                    if !changed {
                        changes = None;
                    }
                }
            }
        }
    }
}

/// Bring the next finished sub-agent's answer into the parent's history and
/// start a turn to react to it, unless the parent is working (then the end
/// of that work calls this again).
pub(crate) fn deliver(shared: &Arc<Shared>) {
    let Some(manager) = &shared.sub_agents else {
        return;
    };
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    let mut state = shared.lock();
    if state.running.is_some() {
        return;
    }
    let Some(done) = manager.next_pending() else {
        return;
    };
    enter(&mut state, done);
    // Not awaited: the outcome is in the events, and the next result is
    // delivered when this turn ends.
    let parent = ChatSession {
        shared: shared.clone(),
    };
    drop(parent.start_as(&runtime, state, Work::message(), true));
}

/// After the parent's work ends: a stop lets waiting answers into the
/// history without a turn (the person asked for quiet; the caller's save
/// then announces them); otherwise the next one comes in with a turn of its
/// own.
pub(super) fn after_work(shared: &Arc<Shared>, outcome: &TurnOutcome) {
    let Some(manager) = &shared.sub_agents else {
        return;
    };
    if *outcome != TurnOutcome::Stopped {
        deliver(shared);
        return;
    }
    let mut state = shared.lock();
    if state.running.is_some() {
        return;
    }
    while let Some(done) = manager.next_pending() {
        enter(&mut state, done);
    }
}

/// Append `done` as a `sub_agent_result` call and its result — never a bare
/// message, which some APIs refuse and others misread — and queue the
/// events that show both, for the save that keeps them to publish (a
/// result a viewer saw comes back after a crash).
fn enter(state: &mut State, done: Finished) {
    let call = ToolCall {
        // Unique in the history (the numbers are), and of the characters
        // every API accepts in a call id.
        id: format!("sub_agent_result_{}", done.n),
        name: SUB_AGENT_RESULT.into(),
        arguments: json!({"sub_session_id": done.id, "description": done.description}),
    };
    state.announce.push(Announce::Events(vec![
        Event::ToolCall {
            call_id: call.id.clone(),
            tool: call.name.clone(),
            title: None,
            class: ToolClass::Read,
            arguments: call.arguments.clone(),
            targets: None,
            runs_on: Default::default(),
        },
        Event::ToolDone {
            call_id: call.id.clone(),
            ok: done.ok,
            text: done.text.clone(),
            images: Vec::new(),
            structured: None,
            resources: Vec::new(),
        },
    ]));
    state.history.push(Message {
        role: Role::Assistant,
        parts: vec![Part::ToolCall(call.clone())],
    });
    state.history.push(Message::tool_results([ToolResult::text(
        &call, done.text, !done.ok,
    )]));
}
