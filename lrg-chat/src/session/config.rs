//! [`SessionConfig`]: the tunables of a session, and how its system prompt is built.

use std::sync::Arc;

use lrg_providers::pricing::PriceTable;
use lrg_providers::{GenerationSettings, ModelInfo, RetryPolicy, ToolSpec};

use crate::context::ContextPolicy;

/// Default for [`SessionConfig::max_steps`].
pub const MAX_STEPS: usize = 12;

/// Tunables of a session.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionConfig {
    /// Model turns allowed per user message.
    pub max_steps: usize,
    /// How transient model errors are retried.
    pub retry: RetryPolicy,
    /// How the conversation is fitted into the window.
    pub context: ContextPolicy,
    /// The generation settings a session starts with (see
    /// [`super::ChatSessionBuilder::generation`]).
    pub generation: GenerationSettings,
    /// The largest model answer taken, in bytes of text, reasoning and
    /// tool-call arguments together. One that grows past it is cut off
    /// there: the turn ends with an error naming the size and the cap, and
    /// nothing of it is kept (as with a stop). Default
    /// [`DEFAULT_MAX_ANSWER_BYTES`] (4 MiB).
    pub max_answer_bytes: usize,
    /// The most numbered events the session's [`crate::events::EventLog`] keeps for
    /// viewers that reconnect; older ones are forgotten, and a viewer that
    /// asks for them is told to `resync` (it rebuilds from the transcript).
    /// Default [`crate::events::DEFAULT_MAX_KEPT_EVENTS`] (4,096).
    pub max_kept_events: usize,
    /// The most payload bytes the session's [`crate::events::EventLog`] keeps
    /// ([`crate::events::EventLog::retained_bytes`]), with the same effect. Default
    /// [`crate::events::DEFAULT_MAX_KEPT_EVENT_BYTES`] (32 MiB).
    pub max_kept_event_bytes: usize,
    /// Repairs a typed message gets ([`super::ChatSession::send_with_schema`]):
    /// an answer that does not match its schema is sent back with the
    /// problems, at most this many times, before the message ends with
    /// [`super::TurnOutcome::Invalid`]. Each repair is one model turn
    /// without tools, not counted in [`max_steps`](Self::max_steps). Default
    /// [`DEFAULT_TYPED_REPAIRS`] (2).
    pub typed_repairs: usize,
    /// What model turns cost (see [`lrg_providers::pricing`]): the built-in
    /// table by default; put a user's file over it with
    /// [`PriceTable::extend`]. Local and server models cost 0 unless priced.
    pub prices: Arc<PriceTable>,
    /// Limits on tokens and dollars per message, run and chat, checked
    /// before each model turn (see [`crate::CostBudget`]); none by default.
    pub budget: super::budget::CostBudget,
    /// Whether the model is offered every tool, or a few and
    /// `search_tools` (see [`crate::tools::search`]). Default
    /// [`ToolSearch::Auto`](crate::tools::search::ToolSearch::Auto): search
    /// above 30 tools, or above a tenth of a known window.
    pub tool_search: crate::tools::search::ToolSearch,
    /// How long a call to a client tool ([`crate::tools::client`]) waits
    /// for the app's answer before it gets an error result. Default 120 s
    /// (`DEFAULT_CLIENT_TOOL_TIMEOUT`).
    pub client_tool_timeout: std::time::Duration,
    /// How long an approval question waits for an answer (from the
    /// session's [`crate::Approver`] or from
    /// [`super::ChatSession::answer_approval`]); past it the call is denied
    /// and recorded as such (`tool_skipped` of reason `approval_timed_out`).
    /// Default `None`: it waits until answered or stopped.
    pub approval_timeout: Option<std::time::Duration>,
    /// How long a tool server's question to the person (MCP elicitation)
    /// stays open; past it the question is cancelled and the waiting tool
    /// gets that answer. The call's own timeout does not run while a
    /// question is open. Default [`super::DEFAULT_QUESTION_TIMEOUT`] (10
    /// minutes).
    pub question_timeout: std::time::Duration,
    /// The model that answers tool servers' sampling requests (MCP
    /// `sampling/createMessage`); `None`: the chat's current model. A chat
    /// that is local only never samples a cloud model, this one included
    /// (see [`crate::session::sampling`]).
    pub sampling_model: Option<super::SamplingModel>,
    /// Whether a sampling request whose `includeContext` is `thisServer` or
    /// `allServers` gets the chat's recent text (the last messages' text,
    /// at most 16 KiB, as context in its system prompt). Default `false`:
    /// it gets nothing from the chat history, whatever it asks.
    pub sampling_shares_history: bool,
}

/// Default for [`SessionConfig::client_tool_timeout`]: 120 s.
pub const DEFAULT_CLIENT_TOOL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(120);

/// Default for [`SessionConfig::typed_repairs`].
pub const DEFAULT_TYPED_REPAIRS: usize = 2;

/// Default for [`SessionConfig::max_answer_bytes`]: 4 MiB.
pub const DEFAULT_MAX_ANSWER_BYTES: usize = 4 * 1024 * 1024;

impl Default for SessionConfig {
    fn default() -> Self {
        Self {
            max_steps: MAX_STEPS,
            retry: RetryPolicy::default(),
            context: ContextPolicy::default(),
            generation: GenerationSettings::default(),
            max_answer_bytes: DEFAULT_MAX_ANSWER_BYTES,
            max_kept_events: crate::events::DEFAULT_MAX_KEPT_EVENTS,
            max_kept_event_bytes: crate::events::DEFAULT_MAX_KEPT_EVENT_BYTES,
            typed_repairs: DEFAULT_TYPED_REPAIRS,
            prices: Arc::new(PriceTable::built_in()),
            budget: super::budget::CostBudget::default(),
            tool_search: crate::tools::search::ToolSearch::default(),
            client_tool_timeout: DEFAULT_CLIENT_TOOL_TIMEOUT,
            approval_timeout: None,
            question_timeout: super::DEFAULT_QUESTION_TIMEOUT,
            sampling_model: None,
            sampling_shares_history: false,
        }
    }
}

/// Builds the system prompt for a turn from the model and the tools offered.
/// Called at every model turn, so an edit takes effect on the next one.
pub type SystemPromptFn = dyn Fn(&ModelInfo, &[ToolSpec]) -> Option<String> + Send + Sync;
