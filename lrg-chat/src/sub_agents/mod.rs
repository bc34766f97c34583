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

mod runner;
pub(crate) mod tools;

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use crate::session::{ChatSession, Shared};
use crate::store::SessionId;

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
}

impl SubAgentStatus {
    /// Whether it has ended.
    pub fn is_finished(self) -> bool {
        matches!(self, Self::Done | Self::Failed | Self::Stopped)
    }
}

/// One sub-agent, as [`ChatSession::sub_agents`] lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct SubAgentInfo {
    /// Its session id, `{parent}::sub::{n}`.
    pub id: String,
    /// The task's short description.
    pub description: String,
    /// Where it is.
    pub status: SubAgentStatus,
    /// The parent's `spawn_sub_agent` call that made it.
    pub call_id: String,
}

struct Agent {
    n: u64,
    info: SubAgentInfo,
    prompt: String,
    /// Set when it starts.
    session: Option<ChatSession>,
}

/// A sub-agent's final word, waiting to enter the parent's history.
pub(crate) struct Finished {
    pub(crate) n: u64,
    pub(crate) id: String,
    pub(crate) description: String,
    pub(crate) text: String,
    pub(crate) ok: bool,
}

#[derive(Default)]
struct Agents {
    /// The last `n` given; `None` until the first spawn looked in the store.
    last: Option<u64>,
    list: Vec<Agent>,
    /// Ids of queued agents, oldest first.
    queue: VecDeque<String>,
    running: usize,
    pending: VecDeque<Finished>,
    /// (user messages so far, sub-agents spawned since the last one).
    per_message: (usize, usize),
}

/// The sub-agents of one session (held by its shared state).
pub(crate) struct Manager {
    config: SubAgents,
    parent: Weak<Shared>,
    /// The parent's id: its store id, or a random one when it is not stored.
    parent_id: SessionId,
    agents: Mutex<Agents>,
    /// Bumped at every change, for [`ChatSession::wait_settled`].
    changed: watch::Sender<u64>,
}

impl Manager {
    pub(crate) fn new(config: SubAgents, parent: Weak<Shared>, parent_id: SessionId) -> Self {
        Self {
            config,
            parent,
            parent_id,
            agents: Mutex::default(),
            changed: watch::Sender::new(0),
        }
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

    /// Sub-agent `id`'s session, once it has started.
    pub(crate) fn session(&self, id: &str) -> Option<ChatSession> {
        self.lock()
            .list
            .iter()
            .find(|a| a.info.id == id)
            .and_then(|a| a.session.clone())
    }

    /// Whether nothing is queued, running or waiting to be delivered.
    pub(crate) fn is_quiet(&self) -> bool {
        let agents = self.lock();
        agents.queue.is_empty() && agents.running == 0 && agents.pending.is_empty()
    }

    pub(crate) fn subscribe_changes(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }

    /// The sub-agent and its call id for an approval `call_id` of the form
    /// `{sub-agent id}::{call id}`.
    pub(crate) fn route_approval(&self, call_id: &str) -> Option<(ChatSession, String)> {
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
    pub(crate) fn pending_approvals(&self) -> Vec<String> {
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

    /// The next finished result to enter the parent's history.
    pub(crate) fn next_pending(&self) -> Option<Finished> {
        let next = self.lock().pending.pop_front();
        if next.is_some() {
            self.bump();
        }
        next
    }

    /// Stop the queued sub-agents (they never start); returns how many.
    pub(crate) fn stop_queued(&self) -> usize {
        let mut agents = self.lock();
        let queued: Vec<String> = agents.queue.drain(..).collect();
        for agent in agents.list.iter_mut() {
            if queued.contains(&agent.info.id) {
                agent.info.status = SubAgentStatus::Stopped;
            }
        }
        drop(agents);
        self.bump();
        queued.len()
    }

    /// Stop the running sub-agents; returns how many were told.
    pub(crate) fn stop_running(&self) -> usize {
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

    /// Stop and forget every sub-agent (the parent was cleared).
    pub(crate) fn clear(&self) {
        self.stop_queued();
        self.stop_running();
        let mut agents = self.lock();
        agents.list.clear();
        agents.pending.clear();
        agents.running = 0;
        drop(agents);
        self.bump();
    }

    /// Start queued sub-agents while there is room.
    pub(crate) fn start_queued(&self) {
        let Some(parent) = self.parent.upgrade() else {
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
            let (session, stored) = crate::session::sub_agent_session(&parent, &id);
            agent.session = Some(session.clone());
            agent.info.status = SubAgentStatus::Running;
            let prompt = agent.prompt.clone();
            agents.running += 1;
            drop(agents);
            self.bump();
            runtime.spawn(runner::run(parent.clone(), id, session, stored, prompt));
        }
    }

    /// Record how sub-agent `id` ended; returns false when it was forgotten
    /// meanwhile (the parent was cleared).
    fn finished(&self, id: &str, status: SubAgentStatus, text: String) -> bool {
        let mut agents = self.lock();
        let Some(agent) = agents.list.iter_mut().find(|a| a.info.id == id) else {
            return false;
        };
        agent.info.status = status;
        let done = Finished {
            n: agent.n,
            id: id.to_string(),
            description: agent.info.description.clone(),
            text,
            ok: status == SubAgentStatus::Done,
        };
        agents.running = agents.running.saturating_sub(1);
        // A stop is the person's choice: no result, no turn to react to it.
        if status != SubAgentStatus::Stopped {
            agents.pending.push_back(done);
        }
        drop(agents);
        self.bump();
        true
    }
}

/// The manager of a parent, for the runner (which holds the parent alive).
fn manager_of(parent: &Arc<Shared>) -> Option<&Manager> {
    crate::session::sub_agent_manager(parent)
}
