//! The session's side of sub-agents ([`crate::sub_agents`]): building a
//! sub-agent's session from its parent's, and bringing a finished
//! sub-agent's answer into the parent's history with a turn to react.

use std::sync::Arc;

use lrg_providers::{Message, Part, Role, ToolCall, ToolResult};
use serde_json::json;

use super::{ChatSession, Shared, State, TurnOutcome, Work, start_work};
use crate::events::Event;
use crate::store::{SessionId, SessionStore};
use crate::sub_agents::{Finished, Manager, SUB_AGENT_RESULT};
use crate::tools::ToolClass;

/// A store and the id a session is kept under in it.
pub(crate) type Kept = (Arc<dyn SessionStore>, SessionId);

/// The sub-agent manager of `shared`, when sub-agents are on.
pub(crate) fn sub_agent_manager(shared: &Shared) -> Option<&Manager> {
    shared.sub_agents.as_ref()
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
    let stored =
        store_of(parent).and_then(|(store, _)| Some((store, id.parse::<SessionId>().ok()?)));
    if let Some((store, sub_id)) = &stored {
        builder = builder.store(store.clone(), sub_id.clone());
    }
    (builder.build(), stored)
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
    enter(shared, &mut state, done);
    // Not awaited: the outcome is in the events, and the next result is
    // delivered when this turn ends.
    drop(start_work(shared, &runtime, state, Work::Message, true));
}

/// After the parent's work ends: a stop lets waiting answers into the
/// history without a turn (the person asked for quiet); otherwise the next
/// one comes in with a turn of its own.
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
        enter(shared, &mut state, done);
    }
}

/// Append `done` as a `sub_agent_result` call and its result — never a bare
/// message, which some APIs refuse and others misread — and show both.
fn enter(shared: &Shared, state: &mut State, done: Finished) {
    let call = ToolCall {
        // Unique in the history (the numbers are), and of the characters
        // every API accepts in a call id.
        id: format!("sub_agent_result_{}", done.n),
        name: SUB_AGENT_RESULT.into(),
        arguments: json!({"sub_session_id": done.id, "description": done.description}),
    };
    shared.publish(Event::ToolCall {
        call_id: call.id.clone(),
        tool: call.name.clone(),
        title: None,
        class: ToolClass::Read,
        arguments: call.arguments.clone(),
        targets: None,
    });
    shared.publish(Event::ToolDone {
        call_id: call.id.clone(),
        ok: done.ok,
        text: done.text.clone(),
        images: Vec::new(),
    });
    state.history.push(Message {
        role: Role::Assistant,
        parts: vec![Part::ToolCall(call.clone())],
    });
    state.history.push(Message::tool_results([ToolResult::text(
        &call, done.text, !done.ok,
    )]));
}
