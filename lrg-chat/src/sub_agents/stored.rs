//! What the store keeps of a sub-agent besides its transcript: its task in
//! its meta ([`SubAgentTask`], written when it starts) and how it ended in
//! its last state ([`SubAgentEnd`], written once, when it ends). From them
//! [`stored`] lists a chat's sub-agents after a restart, for `GET
//! …/sub_agents` and `lrg sessions show`.

use serde::{Deserialize, Serialize};

use super::{SubAgentInfo, SubAgentStatus};
use crate::store::{ListFilter, SessionId, SessionStore, StoreError, now_ms};

/// The task a sub-agent was spawned with, kept in its meta
/// ([`crate::store::SessionMeta::sub_agent`]). Its prompt is the first
/// message of its transcript.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct SubAgentTask {
    /// The task's short description.
    pub description: String,
    /// The parent's `spawn_sub_agent` call that made it.
    pub call_id: String,
}

impl SubAgentTask {
    /// The task `description`, spawned by the parent's call `call_id`.
    pub fn new(description: impl Into<String>, call_id: impl Into<String>) -> Self {
        Self {
            description: description.into(),
            call_id: call_id.into(),
        }
    }
}

/// How and when a sub-agent ended, kept as its last state
/// ([`crate::store::SessionState::sub_agent_end`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct SubAgentEnd {
    /// How it ended (never `queued` or `running`).
    pub status: SubAgentStatus,
    /// When, in milliseconds since the Unix epoch.
    pub ended_ms: u64,
}

/// The sub-agents of session `parent` that `store` keeps, by number: each
/// started one, with its task, status and times (it started when its
/// session was created). One with no end recorded was cut off while it
/// worked (its process ended) and is listed as
/// [`SubAgentStatus::Interrupted`], unless another process runs it now.
/// Sub-agents that never started (queued, then stopped) left nothing to
/// list. A sub-agent that cannot be read is left out, and logged.
pub async fn stored(
    store: &dyn SessionStore,
    parent: &SessionId,
) -> Result<Vec<SubAgentInfo>, StoreError> {
    let mut found = Vec::new();
    for summary in store.list(&ListFilter::all()).await? {
        let id = &summary.meta.id;
        if id.parent().as_ref() != Some(parent) {
            continue;
        }
        let Some(n) = id.sub_agent_number() else {
            continue;
        };
        let end = match store.load(id).await {
            Ok(kept) => kept.state.sub_agent_end,
            Err(e) => {
                tracing::warn!("sub-agent {id} cannot be read: {e}");
                continue;
            }
        };
        let task = summary.meta.sub_agent.clone();
        found.push(SubAgentInfo {
            id: id.to_string(),
            n,
            // Kept before tasks were: its prompt says what it was for.
            description: task
                .as_ref()
                .map(|t| t.description.clone())
                .or_else(|| summary.first_message.clone())
                .unwrap_or_default(),
            status: end.map_or(SubAgentStatus::Interrupted, |e| e.status),
            call_id: task.map(|t| t.call_id).unwrap_or_default(),
            started_ms: Some(summary.meta.created_ms),
            ended_ms: end.map(|e| e.ended_ms),
        });
    }
    found.sort_by_key(|a| a.n);
    Ok(found)
}

/// Keep how sub-agent `id` ended as its last state, after its last save
/// (its runner still holds the writer's place); returns when, in
/// milliseconds since the Unix epoch.
pub(super) async fn keep_end(
    store: &dyn SessionStore,
    id: &SessionId,
    status: SubAgentStatus,
) -> Result<u64, StoreError> {
    let ended_ms = now_ms();
    let mut state = store.load(id).await?.state;
    state.sub_agent_end = Some(SubAgentEnd { status, ended_ms });
    state.updated_ms = ended_ms;
    store.append(id, &[], &state).await?;
    Ok(ended_ms)
}
