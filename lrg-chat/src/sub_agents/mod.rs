//! Sub-agents: a model delegates independent pieces of work to sessions of
//! their own, which run in the background while the chat goes on.
//!
//! Turned on per session with
//! [`ChatSessionBuilder::sub_agents`](crate::session::ChatSessionBuilder::sub_agents),
//! which offers the model three built-in tools:
//!
//! - `spawn_sub_agent {tasks: [{description, prompt}]}` returns at once
//!   ("Spawned N sub-agents: …"). Each task runs detached as its own
//!   [`ChatSession`]: a fresh history (its prompt only), the same model, tools,
//!   system prompt and permissions, id `{parent}::sub::{n}`, and none of these
//!   three tools (sub-agents are one level deep). At most
//!   [`SubAgents::max_concurrent`] run at once; the others queue. The parent
//!   is told with one `subtask_start` event per task.
//! - `list_sub_agents` and `read_sub_agent {id, offset, limit}` (a page of
//!   the transcript), over this session's own sub-agents only.
//!
//! When a sub-agent finishes, its final answer — and nothing else of its
//! work — enters the parent's history as a synthetic call of
//! `sub_agent_result {sub_session_id, description}` with its result (a pair
//! every model API accepts), and the parent gets a turn of its own to react
//! (`busy` with `autonomous: true`). Results that come while the parent
//! works wait for the end of that message and enter one per turn.
//!
//! # A layer on the session
//!
//! Sub-agents are built on the session's public entry points, not woven
//! into its loop: the three tools are a [`crate::tools::Tools`] wrapped
//! around the session's own, and a finished sub-agent's answer comes back
//! through [`ChatSession::deliver`]. An app's own delegation can be written
//! the same way (see [`crate::session::Delivery`]).
//!
//! A sub-agent's approval questions surface on the parent's stream as
//! `approval_needed` with a `sub_agent` label and a call id prefixed with the
//! sub-agent's id, answered on the parent like any other.
//!
//! A stop on the parent ([`ChatSession::stop`]) stops queued sub-agents;
//! [`ChatSession::stop_with_sub_agents`] stops the running ones too. A stopped
//! sub-agent's result is not sent to the parent (the model sees it stopped
//! in `list_sub_agents`). Clearing the parent stops them all and forgets
//! them. With a store, each sub-agent's transcript is kept under its own id
//! and deleted with its parent ([`crate::store::delete_sub_agents`]).
//!
//! The parent's stream says where each one is with `subtask_status`
//! (`running` as it starts; `done`, `failed` or `stopped` once its end is
//! kept). With a store, its task goes in its meta when it starts and its
//! end (status and time) in its last state, so [`stored`] lists a chat's
//! sub-agents after a restart ([`SubAgentInfo`] has their times).
//!
//! A finished sub-agent's session (its event log, its state) is released
//! once its result is in the parent's history (at once for a stopped one,
//! whose result never goes there): its transcript stays in the store.
//! Without a store only its history stays, in memory, for
//! `read_sub_agent`.

mod layer;
mod runner;
mod stored;
pub(crate) mod tools;

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use lrg_providers::Message;
use serde::{Deserialize, Serialize};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::events::Event;
use crate::session::{ChatSession, Delivery, Shared};
use crate::store::SessionId;

pub(crate) use layer::manager_of;
pub use stored::{SubAgentEnd, SubAgentTask, stored};
pub use tools::{LIST_SUB_AGENTS, READ_SUB_AGENT, SPAWN_SUB_AGENT, SUB_AGENT_RESULT};

/// Limits of the sub-agents of one session. See the [module docs](self).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SubAgents {
    /// How many run at once; more tasks queue (default 4).
    pub max_concurrent: usize,
    /// How many tasks one `spawn_sub_agent` call may hold (default 8).
    pub max_per_call: usize,
    /// How many may be spawned while working on one user message, the
    /// turns that react to sub-agents' results included (default 16).
    pub max_per_message: usize,
}

impl Default for SubAgents {
    fn default() -> Self {
        Self {
            max_concurrent: 4,
            max_per_call: 8,
            max_per_message: 16,
        }
    }
}

impl SubAgents {
    /// At most `n` at once (at least 1).
    pub fn max_concurrent(mut self, n: usize) -> Self {
        self.max_concurrent = n.max(1);
        self
    }

    /// At most `n` tasks per call.
    pub fn max_per_call(mut self, n: usize) -> Self {
        self.max_per_call = n;
        self
    }

    /// At most `n` spawned per user message.
    pub fn max_per_message(mut self, n: usize) -> Self {
        self.max_per_message = n;
        self
    }
}

/// Where a sub-agent is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum SubAgentStatus {
    /// Waiting for a free place ([`SubAgents::max_concurrent`]).
    Queued,
    /// Working.
    Running,
    /// Finished with an answer.
    Done,
    /// Ended with an error (or without an answer within its steps).
    Failed,
    /// Stopped by the person.
    Stopped,
    /// Cut off: no end was kept, so the process that ran it ended while it
    /// worked (what [`stored`] says of it; a sub-agent a process runs now
    /// is `running` in its parent's [`ChatSession::sub_agents`]).
    Interrupted,
}

impl SubAgentStatus {
    /// Whether it has ended.
    pub fn is_finished(self) -> bool {
        !matches!(self, Self::Queued | Self::Running)
    }

    /// Its wire name (`queued`, `running`, `done`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Queued => "queued",
            Self::Running => "running",
            Self::Done => "done",
            Self::Failed => "failed",
            Self::Stopped => "stopped",
            Self::Interrupted => "interrupted",
        }
    }
}

/// One sub-agent, as [`ChatSession::sub_agents`] (and [`stored`]) list it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct SubAgentInfo {
    /// Its session id, `{parent}::sub::{n}`.
    pub id: String,
    /// Its number among its parent's sub-agents (the `n` of its id), from 1.
    #[serde(default)]
    pub n: u64,
    /// The task's short description.
    pub description: String,
    /// Where it is.
    pub status: SubAgentStatus,
    /// The parent's `spawn_sub_agent` call that made it (empty for one
    /// kept before the call was).
    pub call_id: String,
    /// When it started, in milliseconds since the Unix epoch (`None` while
    /// it is queued).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_ms: Option<u64>,
    /// When it ended, in milliseconds since the Unix epoch (`None` until it
    /// has, and for one cut off).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_ms: Option<u64>,
}

struct Agent {
    n: u64,
    info: SubAgentInfo,
    prompt: String,
    /// Set when it starts; taken when it is released (see the module docs).
    session: Option<ChatSession>,
    /// Cancelled when it ends (or is stopped before it starts): its event
    /// streams end.
    ended: CancellationToken,
    /// Whether the store keeps its transcript (else its history stays here
    /// when it is released).
    stored: bool,
    /// Its history after its release, when no store keeps it.
    history: Option<Vec<Message>>,
}

impl Agent {
    /// Drop its session: what it did is in the store, or in `history`.
    fn release(&mut self) {
        if let Some(session) = self.session.take()
            && !self.stored
        {
            self.history = Some(session.history());
        }
    }
}

/// Where one sub-agent's events come from ([`Manager::view`]).
pub(crate) enum View {
    /// Not started yet.
    Queued,
    /// Its session: working, or ended and not yet released. `ended` is
    /// cancelled when it ends.
    Live {
        session: ChatSession,
        ended: CancellationToken,
    },
    /// Released, its history kept here (there is no store).
    Kept(Vec<Message>),
    /// Released, or of an earlier run of the chat: in the store, if anywhere.
    Stored(SessionId),
}

#[derive(Default)]
struct Agents {
    /// The last `n` given; `None` until the first spawn looked in the store.
    last: Option<u64>,
    list: Vec<Agent>,
    /// Ids of queued agents, oldest first.
    queue: VecDeque<String>,
    running: usize,
    /// (user messages so far, sub-agents spawned since the last one).
    per_message: (usize, usize),
}

/// The sub-agents of one session (held by its shared state).
pub(crate) struct Manager {
    /// Itself, for what outlives a call (a result's release, a runner).
    me: Weak<Manager>,
    config: SubAgents,
    parent: Weak<Shared>,
    /// The parent's id: its store id, or a random one when it is not stored.
    parent_id: SessionId,
    agents: Mutex<Agents>,
    /// Bumped at every change, for [`ChatSession::wait_settled`].
    changed: watch::Sender<u64>,
}

impl Manager {
    pub(crate) fn new(config: SubAgents, parent: Weak<Shared>, parent_id: SessionId) -> Arc<Self> {
        Arc::new_cyclic(|me| Self {
            me: me.clone(),
            config,
            parent,
            parent_id,
            agents: Mutex::default(),
            changed: watch::Sender::new(0),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Agents> {
        // Every critical section is a few pushes and counters.
        lrg_providers::sync::lock(&self.agents)
    }

    fn bump(&self) {
        self.changed.send_modify(|n| *n += 1);
    }

    /// Every sub-agent, in spawn order.
    pub(crate) fn list(&self) -> Vec<SubAgentInfo> {
        self.lock().list.iter().map(|a| a.info.clone()).collect()
    }

    /// Sub-agent `id`'s session, once it has started and until it is
    /// released.
    pub(crate) fn session(&self, id: &str) -> Option<ChatSession> {
        self.lock()
            .list
            .iter()
            .find(|a| a.info.id == id)
            .and_then(|a| a.session.clone())
    }

    /// Where sub-agent number `n`'s events come from; `None` when this run
    /// of the chat has none of that number (one of an earlier run may be
    /// in the store, under [`SessionId::sub_agent`] of the parent).
    pub(crate) fn view(&self, n: u64) -> Option<View> {
        let agents = self.lock();
        let agent = agents.list.iter().find(|a| a.n == n)?;
        Some(match (&agent.session, &agent.history) {
            (Some(session), _) => View::Live {
                session: session.clone(),
                ended: agent.ended.clone(),
            },
            (None, Some(history)) => View::Kept(history.clone()),
            (None, None) if agent.info.status == SubAgentStatus::Queued => View::Queued,
            // Stopped before it started: it did nothing.
            (None, None) if agent.info.started_ms.is_none() => View::Kept(Vec::new()),
            (None, None) => View::Stored(self.parent_id.sub_agent(n)),
        })
    }

    /// Sub-agent `id`'s history as this process holds it: its session's,
    /// the one kept after its release, or none (it never started); `None`
    /// when the store is where to look (released, or unknown here).
    pub(crate) fn history(&self, id: &str) -> Option<Vec<Message>> {
        let agents = self.lock();
        let agent = agents.list.iter().find(|a| a.info.id == id)?;
        match (&agent.session, &agent.history) {
            (Some(session), _) => Some(session.history()),
            (None, Some(history)) => Some(history.clone()),
            (None, None) if agent.info.started_ms.is_none() => Some(Vec::new()),
            (None, None) => None,
        }
    }

    /// Publish `event` on the parent's stream, if it is still there.
    fn publish(&self, event: Event) {
        if let Some(parent) = self.parent.upgrade() {
            crate::session::publish(&parent, event);
        }
    }

    /// Whether nothing is queued or running (a result waiting to enter
    /// the history waits in the parent: see [`ChatSession::is_settled`]).
    fn is_quiet(&self) -> bool {
        let agents = self.lock();
        agents.queue.is_empty() && agents.running == 0
    }

    /// The sub-agent and its call id for an approval `call_id` of the form
    /// `{sub-agent id}::{call id}`.
    fn route_approval(&self, call_id: &str) -> Option<(ChatSession, String)> {
        let agents = self.lock();
        agents.list.iter().find_map(|a| {
            let rest = call_id
                .strip_prefix(a.info.id.as_str())?
                .strip_prefix("::")?;
            Some((a.session.clone()?, rest.to_string()))
        })
    }

    /// The approval questions of the running sub-agents, as the parent
    /// shows them (`{sub-agent id}::{call id}`).
    fn pending_approvals(&self) -> Vec<String> {
        let sessions: Vec<(String, ChatSession)> = self
            .lock()
            .list
            .iter()
            .filter_map(|a| Some((a.info.id.clone(), a.session.clone()?)))
            .collect();
        sessions
            .into_iter()
            .flat_map(|(id, s)| {
                s.pending_approvals()
                    .into_iter()
                    .map(move |c| format!("{id}::{c}"))
            })
            .collect()
    }

    /// Release sub-agent number `n`: its result is in the parent's history,
    /// and that is all the parent gets of it.
    fn release(&self, n: u64) {
        if let Some(agent) = self.lock().list.iter_mut().find(|a| a.n == n) {
            agent.release();
        }
        self.bump();
    }

    /// Stop the queued sub-agents (they never start); returns how many.
    fn stop_queued(&self) -> usize {
        let stopped = self.take_queued();
        for id in &stopped {
            self.publish(Event::SubtaskStatus {
                sub_session_id: id.clone(),
                status: SubAgentStatus::Stopped,
            });
        }
        stopped.len()
    }

    /// Mark the queued sub-agents stopped (they never start); their ids.
    fn take_queued(&self) -> Vec<String> {
        let mut agents = self.lock();
        let queued: Vec<String> = agents.queue.drain(..).collect();
        let now = crate::store::now_ms();
        for agent in agents.list.iter_mut() {
            if queued.contains(&agent.info.id) {
                agent.info.status = SubAgentStatus::Stopped;
                agent.info.ended_ms = Some(now);
                agent.ended.cancel();
            }
        }
        drop(agents);
        self.bump();
        queued
    }

    /// Stop the running sub-agents; returns how many were told.
    fn stop_running(&self) -> usize {
        let running: Vec<ChatSession> = self
            .lock()
            .list
            .iter()
            .filter(|a| a.info.status == SubAgentStatus::Running)
            .filter_map(|a| a.session.clone())
            .collect();
        for session in &running {
            session.stop();
        }
        running.len()
    }

    /// Stop and forget every sub-agent, and delete their transcripts,
    /// which go with the parent's (the parent was cleared: its `cleared`
    /// says enough, so no `subtask_status` is published).
    fn clear(&self) {
        self.take_queued();
        self.stop_running();
        let mut agents = self.lock();
        for agent in &agents.list {
            agent.ended.cancel();
        }
        agents.list.clear();
        agents.running = 0;
        drop(agents);
        self.bump();
        let kept = self
            .parent
            .upgrade()
            .and_then(|p| crate::session::store_of(&p));
        if let (Some((store, id)), Ok(runtime)) = (kept, tokio::runtime::Handle::try_current()) {
            runtime.spawn(async move {
                if let Err(e) = crate::store::delete_sub_agents(store.as_ref(), &id).await {
                    tracing::warn!("cannot delete the sub-agents of {id}: {e}");
                }
            });
        }
    }

    /// Start queued sub-agents while there is room.
    pub(crate) fn start_queued(&self) {
        let (Some(parent), Some(me)) = (self.parent.upgrade(), self.me.upgrade()) else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        loop {
            let mut agents = self.lock();
            // The field is public: 0 would queue everything forever.
            if agents.running >= self.config.max_concurrent.max(1) {
                return;
            }
            let Some(id) = agents.queue.pop_front() else {
                return;
            };
            let Some(agent) = agents.list.iter_mut().find(|a| a.info.id == id) else {
                continue;
            };
            let (session, stored) = crate::session::child_session(&parent, &id);
            agent.session = Some(session.clone());
            agent.info.status = SubAgentStatus::Running;
            let started_ms = crate::store::now_ms();
            agent.info.started_ms = Some(started_ms);
            let task = runner::Task {
                prompt: agent.prompt.clone(),
                kept: SubAgentTask::new(agent.info.description.clone(), agent.info.call_id.clone()),
                started_ms,
            };
            agents.running += 1;
            drop(agents);
            self.bump();
            // Said here, not by its task: the parent's stream tells it in the
            // order it happened (after its `subtask_start`).
            crate::session::publish(
                &parent,
                Event::SubtaskStatus {
                    sub_session_id: id.clone(),
                    status: SubAgentStatus::Running,
                },
            );
            runtime.spawn(runner::run(
                me.clone(),
                parent.clone(),
                id,
                session,
                stored,
                task,
            ));
        }
    }

    /// Record how sub-agent `id` ended (at `ended_ms`; its transcript is
    /// in the store when `stored`), hand its result to the parent `parent`
    /// and say so on the parent's stream; returns false when it was
    /// forgotten meanwhile (the parent was cleared).
    fn finished(
        &self,
        parent: &Shared,
        id: &str,
        status: SubAgentStatus,
        text: String,
        ended_ms: u64,
        stored: bool,
    ) -> bool {
        let mut agents = self.lock();
        let Some(agent) = agents.list.iter_mut().find(|a| a.info.id == id) else {
            return false;
        };
        agent.info.status = status;
        agent.info.ended_ms = Some(ended_ms);
        agent.stored = stored;
        agent.ended.cancel();
        // A stopped one's result never goes to the parent: nothing to wait for.
        if status == SubAgentStatus::Stopped {
            agent.release();
        }
        let n = agent.n;
        let done = Delivery::new(
            // Unique in the history (the numbers are), and of the characters
            // every API accepts in a call id.
            format!("sub_agent_result_{n}"),
            SUB_AGENT_RESULT,
            serde_json::json!({"sub_session_id": id, "description": agent.info.description}),
            text,
            status == SubAgentStatus::Done,
        );
        agents.running = agents.running.saturating_sub(1);
        drop(agents);
        // A stop is the person's choice: no result, no turn to react to it.
        // Queued in the parent before the change is told, so that the parent
        // is never seen settled with a result still to come in.
        if status != SubAgentStatus::Stopped {
            let me = self.me.clone();
            let done = done.on_entered(move || {
                if let Some(manager) = me.upgrade() {
                    manager.release(n);
                }
            });
            crate::session::queue_delivery(parent, done);
        }
        self.bump();
        self.publish(Event::SubtaskStatus {
            sub_session_id: id.to_string(),
            status,
        });
        true
    }
}
