//! How sub-agents sit on a session: turned on by the builder, offered as a
//! [`Tools`] wrapped around the session's own, and told of the session's
//! stops and clears as its [`Delegation`]. Nothing of the session's loop
//! knows them.

use std::any::Any;
use std::sync::Arc;

use futures::future::BoxFuture;
use lrg_providers::ToolSpec;
use serde_json::Value;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::{Manager, SubAgentInfo, SubAgents, tools};
use crate::permissions::Answer;
use crate::session::{ChatSession, ChatSessionBuilder, Delegation, SessionError};
use crate::tools::{ResourceUpdate, ToolOutput, ToolPolicy, Tools, ToolsError, client};

impl ChatSessionBuilder {
    /// Let the model delegate tasks to sub-agents within `limits` (default
    /// off): it is offered `spawn_sub_agent`, `list_sub_agents` and
    /// `read_sub_agent`. See [`crate::sub_agents`].
    pub fn sub_agents(mut self, limits: SubAgents) -> Self {
        self.delegation = Some(Box::new(move |parent, parent_id, inner| {
            let manager = Manager::new(limits, parent, parent_id);
            let tools = Arc::new(SubAgentTools {
                inner,
                manager: manager.clone(),
            });
            (tools as Arc<dyn Tools>, manager as Arc<dyn Delegation>)
        }));
        self
    }
}

/// The sub-agent side of the session's public API.
impl ChatSession {
    /// [`ChatSession::stop`], and stop the running sub-agents too: their
    /// answers do not come back. Returns whether anything was stopped.
    pub fn stop_with_sub_agents(&self) -> bool {
        let stopped = self.stop();
        let running = manager_of(self).map_or(0, Manager::stop_running);
        stopped || running > 0
    }

    /// The sub-agents this session spawned, in order (empty when sub-agents
    /// are off).
    pub fn sub_agents(&self) -> Vec<SubAgentInfo> {
        manager_of(self).map(Manager::list).unwrap_or_default()
    }

    /// Sub-agent `id`'s own session (its events, its history), once it has
    /// started.
    pub fn sub_agent(&self, id: &str) -> Option<ChatSession> {
        manager_of(self)?.session(id)
    }
}

/// The sub-agents of `session`, when they are on.
pub(crate) fn manager_of(session: &ChatSession) -> Option<&Manager> {
    crate::session::delegation_of(session)?
        .as_any()
        .downcast_ref::<Manager>()
}

impl Delegation for Manager {
    fn stop(&self, running: bool) -> usize {
        let queued = self.stop_queued();
        queued + if running { self.stop_running() } else { 0 }
    }

    fn clear(&self) {
        Manager::clear(self);
    }

    fn answer_approval(&self, call_id: &str, answer: Answer) -> Option<Result<(), SessionError>> {
        let (sub, sub_call) = self.route_approval(call_id)?;
        Some(
            sub.answer_approval(&sub_call, answer)
                .map_err(|_| SessionError::NoSuchApproval(call_id.to_string())),
        )
    }

    fn pending_approvals(&self) -> Vec<String> {
        Manager::pending_approvals(self)
    }

    fn is_quiet(&self) -> bool {
        Manager::is_quiet(self)
    }

    fn changes(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// The session's tools with the three sub-agent tools added (a tool of the
/// same name from elsewhere gives way: the model could not tell them
/// apart).
struct SubAgentTools {
    inner: Arc<dyn Tools>,
    manager: Arc<Manager>,
}

impl Tools for SubAgentTools {
    fn list(&self) -> BoxFuture<'_, Result<Vec<ToolSpec>, ToolsError>> {
        Box::pin(async move { self.inner.list().await.map(tools::with_own) })
    }

    fn list_shared(&self) -> BoxFuture<'_, Result<Arc<[ToolSpec]>, ToolsError>> {
        // The inner list is shared: the three tools are added to a copy.
        Box::pin(async move {
            let specs = self.inner.list_shared().await?;
            Ok(tools::with_own(specs.to_vec()).into())
        })
    }

    fn call<'a>(
        &'a self,
        name: &'a str,
        arguments: Value,
        cancel: CancellationToken,
    ) -> BoxFuture<'a, ToolOutput> {
        if !tools::is_own(name) {
            return self.inner.call(name, arguments, cancel);
        }
        Box::pin(async move {
            // The session runs every call in its caller's scope (read here,
            // in the future it awaits): the call id is what ties a
            // sub-agent to the call that spawned it.
            let call_id = crate::tools::mcp_link::current_caller()
                .map(|c| c.call_id)
                .unwrap_or_default();
            tools::call(&self.manager, name, &call_id, &arguments).await
        })
    }

    fn policy(&self, name: &str) -> ToolPolicy {
        if tools::is_own(name) {
            return ToolPolicy::default();
        }
        self.inner.policy(name)
    }

    fn resource_updates(&self) -> Option<tokio::sync::broadcast::Receiver<ResourceUpdate>> {
        self.inner.resource_updates()
    }

    fn client_call(&self, call: &client::ClientCall) -> bool {
        self.inner.client_call(call)
    }
}
