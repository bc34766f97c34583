//! Work a session hands out that outlives a turn, and its results coming
//! back: the entry point a delegation layer is built on ([`Delivery`],
//! [`ChatSession::deliver`]), and what the session asks of such a layer
//! ([`Delegation`]). Sub-agents ([`crate::sub_agents`]) are one; the session
//! knows nothing of them beyond this.
//!
//! An app can write its own delegation the same way: a [`crate::tools::Tools`]
//! whose call starts the work and returns at once, and which later hands the
//! result to [`ChatSession::deliver`] (the session of the call is
//! [`ChatSession::current`], kept as a [`super::WeakChatSession`]).

use std::any::Any;
use std::collections::VecDeque;
use std::sync::Arc;

use lrg_providers::{Message, Part, Role, ToolCall, ToolResult};
use serde_json::Value;
use tokio::sync::watch;

use super::persist::Announce;
use super::{ChatSession, SessionError, Shared, State, TurnOutcome, Work};
use crate::events::Event;
use crate::permissions::Answer;
use crate::store::{SessionId, SessionStore};
use crate::tools::{ToolClass, Tools};

/// A store and the id a session is kept under in it.
pub(crate) type Kept = (Arc<dyn SessionStore>, SessionId);

/// What the session needs of a delegation layer besides its tools: it is
/// told of stops and clears, routes the approval answers that are not its
/// own, and counts the layer's work in [`ChatSession::is_settled`].
pub(crate) trait Delegation: Send + Sync {
    /// Stop the work not started yet, and with `running` the running work
    /// too; how many were stopped or told to stop.
    fn stop(&self, running: bool) -> usize;
    /// The conversation was cleared: stop and forget everything (the
    /// session's `cleared` says enough).
    fn clear(&self);
    /// Pass on the answer to approval `call_id`, when the question is the
    /// layer's (a sub-agent's, say); `None` when it is not.
    fn answer_approval(&self, call_id: &str, answer: Answer) -> Option<Result<(), SessionError>>;
    /// The layer's approval questions now waiting, as the session shows them.
    fn pending_approvals(&self) -> Vec<String>;
    /// Whether nothing is queued or running.
    fn is_quiet(&self) -> bool;
    /// Bumped at every change of [`Delegation::is_quiet`].
    fn changes(&self) -> watch::Receiver<u64>;
    /// The layer itself, for its own API on the session.
    fn as_any(&self) -> &dyn Any;
}

/// Makes a session's delegation layer once the session exists: given the
/// session (weakly: it holds the layer), its id (its store id, or a random
/// one) and the tools it was built with, returns the tools to offer instead
/// and the layer.
pub(crate) type MakeDelegation = Box<
    dyn FnOnce(
            std::sync::Weak<Shared>,
            SessionId,
            Arc<dyn Tools>,
        ) -> (Arc<dyn Tools>, Arc<dyn Delegation>)
        + Send,
>;

/// A finished piece of work to bring into the conversation: it enters the
/// history as a call of `tool` with `arguments` and its result `text` (a
/// pair every model API accepts, where a bare message is refused by some
/// and misread by others), and the model gets a turn to react. See
/// [`ChatSession::deliver`].
#[non_exhaustive]
pub struct Delivery {
    /// The synthetic call's id: unique in the history, of letters, digits
    /// and `_` (what every API accepts in a call id).
    pub call_id: String,
    /// The synthetic call's tool (never offered as a tool, say
    /// `sub_agent_result`).
    pub tool: String,
    /// What the call's arguments say of the work (which task, by whom).
    pub arguments: Value,
    /// The result, as the model reads it.
    pub text: String,
    /// Whether the work succeeded (else the result is an error result).
    pub ok: bool,
    /// Run once it is in the history.
    entered: Option<Box<dyn FnOnce() + Send>>,
}

impl std::fmt::Debug for Delivery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Delivery")
            .field("call_id", &self.call_id)
            .field("tool", &self.tool)
            .field("ok", &self.ok)
            .finish_non_exhaustive()
    }
}

impl Delivery {
    /// The result `text` of work described by a call `call_id` of `tool`
    /// with `arguments`; `ok` says whether it succeeded.
    pub fn new(
        call_id: impl Into<String>,
        tool: impl Into<String>,
        arguments: Value,
        text: impl Into<String>,
        ok: bool,
    ) -> Self {
        Self {
            call_id: call_id.into(),
            tool: tool.into(),
            arguments,
            text: text.into(),
            ok,
            entered: None,
        }
    }

    /// Run `then` once it is in the history (to let go of what produced it,
    /// say: its result is all the conversation keeps of it).
    pub fn on_entered(mut self, then: impl FnOnce() + Send + 'static) -> Self {
        self.entered = Some(Box::new(then));
        self
    }
}

/// The delegation layer of `session`, if it has one.
pub(crate) fn delegation_of(session: &ChatSession) -> Option<&Arc<dyn Delegation>> {
    session.shared.delegation.as_ref()
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

/// A session `id` working for `parent`: the same model, tools (those it was
/// built with, without what its delegation layer adds: a child delegates
/// nothing), system prompt, permissions, approver and tunables, and the
/// parent's store under its own id.
pub(crate) fn child_session(parent: &Shared, id: &str) -> (ChatSession, Option<Kept>) {
    let mut builder = ChatSession::builder(parent.models.clone())
        .tools(parent.base_tools.clone())
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

/// Hold `delivery` until it can enter the history (see [`deliver_next`]).
pub(crate) fn queue_delivery(shared: &Shared, delivery: Delivery) {
    shared.lock().deliveries.push_back(delivery);
}

/// What a session does with work it handed out, and its results.
impl ChatSession {
    /// Bring `delivery` into the history and start a turn of the model's own
    /// to react to it (`busy` with `autonomous: true`). While the session
    /// works, it waits for the end of that work, and results enter one per
    /// turn; a stop lets the waiting ones in without a turn (the person
    /// asked for quiet). Both are shown (`tool_call`, `tool_done`) once
    /// kept, so a result a viewer saw comes back after a crash.
    ///
    /// This is how sub-agents' answers come back ([`crate::sub_agents`]),
    /// and how an app's own background work can: a
    /// [`Tools`] whose call starts the work and
    /// returns at once, keeps the calling session
    /// ([`ChatSession::current`], as a [`super::WeakChatSession`]), and
    /// hands it the result here when the work ends.
    pub fn deliver(&self, delivery: Delivery) {
        queue_delivery(&self.shared, delivery);
        deliver_next(&self.shared);
    }

    /// Wait until no message runs (a person's, or a turn reacting to a
    /// delivered result).
    pub async fn wait_idle(&self) {
        let mut events = self.subscribe(self.shared.events.last_seq());
        while self.is_busy() {
            if events.next().await.is_none() {
                events = self.subscribe(self.shared.events.last_seq());
            }
        }
    }

    /// Whether nothing is left to do: no message running, no sub-agent
    /// queued or running, no result waiting to come in (what makes a
    /// session safe to evict).
    pub fn is_settled(&self) -> bool {
        !self.is_busy()
            && self.shared.lock().deliveries.is_empty()
            && self.shared.delegation.as_ref().is_none_or(|d| d.is_quiet())
    }

    /// Wait until nothing is left to do: no message running, no sub-agent
    /// queued or running, no result waiting to come in. Without sub-agents,
    /// until the running message ends.
    pub async fn wait_settled(&self) {
        let mut events = self.subscribe(self.shared.events.last_seq());
        let mut changes = self.shared.delegation.as_ref().map(|d| d.changes());
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

/// Bring the next waiting result into the history and start a turn to react
/// to it, unless the session is working (then the end of that work calls
/// this again).
pub(crate) fn deliver_next(shared: &Arc<Shared>) {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    let mut state = shared.lock();
    if state.running.is_some() {
        return;
    }
    let Some(done) = state.deliveries.pop_front() else {
        return;
    };
    let entered = enter(&mut state, done);
    // Not awaited: the outcome is in the events, and the next result is
    // delivered when this turn ends.
    let session = ChatSession {
        shared: shared.clone(),
    };
    drop(session.start_as(&runtime, state, Work::message(), true));
    entered.into_iter().for_each(|then| then());
}

/// After the session's work ends: a stop lets waiting results into the
/// history without a turn (the caller's save then announces them);
/// otherwise the next one comes in with a turn of its own.
pub(super) fn after_work(shared: &Arc<Shared>, outcome: &TurnOutcome) {
    if *outcome != TurnOutcome::Stopped {
        deliver_next(shared);
        return;
    }
    let mut state = shared.lock();
    if state.running.is_some() {
        return;
    }
    let waiting: VecDeque<Delivery> = std::mem::take(&mut state.deliveries);
    let entered: Vec<_> = waiting
        .into_iter()
        .filter_map(|done| enter(&mut state, done))
        .collect();
    drop(state);
    entered.into_iter().for_each(|then| then());
}

/// Append `done` as its call and result, and queue the events that show
/// both for the save that keeps them to publish; returns what to run once
/// the state is unlocked.
fn enter(state: &mut State, done: Delivery) -> Option<Box<dyn FnOnce() + Send>> {
    let call = ToolCall {
        id: done.call_id,
        name: done.tool,
        arguments: done.arguments,
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
    done.entered
}
