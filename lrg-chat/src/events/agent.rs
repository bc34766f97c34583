//! The payloads of what an external agent (an ACP agent as a chat's model)
//! tells beside its answer: the slash commands it takes ([`AgentCommand`])
//! and its plan ([`PlanEntry`]).

use serde::{Deserialize, Serialize};

/// A slash command the chat's agent takes: sending `/name args` as a
/// message passes it to the agent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct AgentCommand {
    /// Its name, without the slash.
    pub name: String,
    /// What it does, as the agent says.
    pub description: String,
    /// What to write after the name, when the command takes input.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
}

impl AgentCommand {
    /// Command `name`, doing `description`, taking no input.
    pub fn new(name: impl Into<String>, description: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            description: description.into(),
            hint: None,
        }
    }

    /// The same, taking input described by `hint`.
    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }
}

/// One step of an agent's plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct PlanEntry {
    /// What the step does.
    pub content: String,
    /// How much it matters.
    pub priority: PlanPriority,
    /// Where it stands.
    pub status: PlanStatus,
}

impl PlanEntry {
    /// Step `content`, with its priority and status.
    pub fn new(content: impl Into<String>, priority: PlanPriority, status: PlanStatus) -> Self {
        Self {
            content: content.into(),
            priority,
            status,
        }
    }
}

/// How much a plan step matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PlanPriority {
    /// First.
    High,
    /// Normal.
    Medium,
    /// When there is time.
    Low,
}

/// Where a plan step stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PlanStatus {
    /// Not started.
    Pending,
    /// Being worked on.
    InProgress,
    /// Done.
    Completed,
}

impl PlanStatus {
    /// Its wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::InProgress => "in_progress",
            Self::Completed => "completed",
        }
    }
}
