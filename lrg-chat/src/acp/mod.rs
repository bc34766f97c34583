//! The Agent Client Protocol (ACP), both ways. Feature `acp`.
//!
//! - lrg as an agent that editors (Zed and other ACP clients) drive over
//!   stdio: [`serve`], below.
//! - An external ACP agent as the model of a chat: [`AcpBackend`], on the
//!   agent's own model or one it offers (`acp:COMMAND#MODEL`, see
//!   [`lrg_providers::AcpModelId`]; [`agent_models`] lists them).
//!
//! [`serve`] answers one client on a byte stream (`lrg acp` serves stdin and
//! stdout): `initialize`, `session/new` (the client's MCP servers join the
//! app's own tools), `session/prompt` (the chat's events streamed as
//! `session/update`s: message and thought chunks, tool calls with their kind
//! and status, usage), `session/request_permission` for every approval the
//! permissions ask for, `session/cancel` (stops the turn), the model as a
//! session config option, and `session/load`, `session/resume` and
//! `session/list` when the app keeps sessions in a store. Sessions are built
//! by the app through a [`SessionFactory`]: this crate knows models only as
//! [`ChatModel`](lrg_providers::ChatModel)s.
//!
//! The mapping:
//!
//! | lrg | ACP |
//! |---|---|
//! | `delta` (text / reasoning) | `agent_message_chunk` / `agent_thought_chunk` |
//! | `tool_call` | `tool_call`, kind from the class (read → `read`, change → `edit`, destructive → `delete`), status `pending` |
//! | `tool_running` / `tool_done` / `tool_skipped` | `tool_call_update`: `in_progress` / `completed` or `failed` / `failed` |
//! | `approval_needed` | `session/request_permission`: allow once → once, allow always → always (writes the allow rule), reject → deny, reject always → deny and a block rule |
//! | `usage` | `usage_update` (tokens in the window, window size) |
//! | `warning` | a thought chunk `[warning: …]` |
//! | `plan` / `agent_commands` (lrg itself on an ACP agent) | `plan` / `available_commands_update` |
//! | `question` (a tool server asks, MCP elicitation) | `elicitation/create` in form or URL mode when the client declared that mode in `initialize`, its answer the question's; else declined with [`CANNOT_ASK`] |
//! | completed / stopped / step limit / error | `end_turn` / `cancelled` / `max_turn_requests` / a JSON-RPC error naming it |

mod agent;
mod backend;
mod calls;
mod map;
mod questions;

use std::path::PathBuf;
use std::sync::Arc;

use futures::future::BoxFuture;

use crate::session::ChatSession;
use crate::tools::{McpConfig, ToolHost};

pub use agent::{serve, serve_stdio};
pub use backend::{AcpBackend, AgentModel, AgentModels, agent_models};
pub use calls::AgentToolCall;
pub(crate) use calls::row_events as agent_call_events;
pub use questions::CANNOT_ASK;

/// The id of the model session config option.
pub const MODEL_OPTION: &str = "model";

/// Builds the sessions an ACP client asks for; the app implements it
/// (`lrg acp` with its flags: model, tools, permissions, store).
pub trait SessionFactory: Send + Sync + 'static {
    /// A new session: `spec.mcp` are the client's MCP servers, to offer
    /// beside the app's own tools; `spec.model` the model the client chose
    /// (`None`: the app's default).
    fn open(&self, spec: SessionSpec) -> BoxFuture<'_, Result<AcpSession, AcpError>>;

    /// Whether sessions are kept, so `session/load` can resume them
    /// (default: no).
    fn can_load(&self) -> bool {
        false
    }

    /// Resume the kept session `id` (a [`crate::store::SessionId`]) on the
    /// model it was made with; its history is told to the client again.
    fn load<'a>(
        &'a self,
        id: &'a str,
        spec: SessionSpec,
    ) -> BoxFuture<'a, Result<AcpSession, AcpError>> {
        let _ = spec;
        Box::pin(async move {
            Err(AcpError::Unsupported(format!(
                "cannot load session `{id}`: sessions are not kept (no store)"
            )))
        })
    }

    /// The kept sessions a client may load or resume (`session/list`),
    /// newest first; with `cwd`, only those made in that folder. Only asked
    /// when [`SessionFactory::can_load`] says sessions are kept.
    fn list(&self, cwd: Option<PathBuf>) -> BoxFuture<'_, Result<Vec<SessionListing>, AcpError>> {
        let _ = cwd;
        Box::pin(async {
            Err(AcpError::Unsupported(
                "sessions are not kept (no store), so there are none to list".into(),
            ))
        })
    }

    /// The models a client may choose from (the `model` config option,
    /// which lists the session's own model too, first when this lacks it).
    fn models(&self) -> BoxFuture<'_, Vec<ModelChoice>> {
        Box::pin(async { Vec::new() })
    }
}

/// What a client asked a session to be.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct SessionSpec {
    /// The client's working directory for the session.
    pub cwd: PathBuf,
    /// The client's MCP servers.
    pub mcp: McpConfig,
    /// The model the client chose (`provider:model`), when it chose one.
    pub model: Option<String>,
}

impl SessionSpec {
    /// A session in `cwd` with no client servers and the default model.
    pub fn new(cwd: impl Into<PathBuf>) -> Self {
        Self {
            cwd: cwd.into(),
            ..Self::default()
        }
    }

    /// The same, on `model`.
    pub fn with_model(mut self, model: impl Into<String>) -> Self {
        self.model = Some(model.into());
        self
    }

    /// The same, with these client servers.
    pub fn with_mcp(mut self, mcp: McpConfig) -> Self {
        self.mcp = mcp;
        self
    }
}

/// One kept session, as `session/list` tells it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SessionListing {
    /// Its id, which `session/load` and `session/resume` take.
    pub id: String,
    /// The folder it was made in (absolute).
    pub cwd: PathBuf,
    /// What a session picker shows: its name, else its first message.
    pub title: Option<String>,
    /// When it last changed, in milliseconds since the Unix epoch.
    pub updated_ms: Option<u64>,
}

impl SessionListing {
    /// Session `id`, made in `cwd`, with no title or time yet.
    pub fn new(id: impl Into<String>, cwd: impl Into<PathBuf>) -> Self {
        Self {
            id: id.into(),
            cwd: cwd.into(),
            title: None,
            updated_ms: None,
        }
    }

    /// The same, titled `title`.
    pub fn with_title(mut self, title: impl Into<String>) -> Self {
        self.title = Some(title.into());
        self
    }

    /// The same, last changed at `ms` (milliseconds since the Unix epoch).
    pub fn updated(mut self, ms: u64) -> Self {
        self.updated_ms = Some(ms);
        self
    }
}

/// A session a [`SessionFactory`] built.
#[non_exhaustive]
pub struct AcpSession {
    /// The chat.
    pub session: ChatSession,
    /// Its model, `provider:model` (the config option's current value).
    pub model: String,
    /// Its tools, shut down when the session ends (the client's servers
    /// are this session's alone).
    pub host: Option<Arc<ToolHost>>,
}

impl AcpSession {
    /// `session`, running on `model`.
    pub fn new(session: ChatSession, model: impl Into<String>) -> Self {
        Self {
            session,
            model: model.into(),
            host: None,
        }
    }

    /// The same, owning `host` (shut down with the session).
    pub fn with_host(mut self, host: Arc<ToolHost>) -> Self {
        self.host = Some(host);
        self
    }
}

/// One choice of the `model` config option.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ModelChoice {
    /// `provider:model`.
    pub id: String,
    /// What a person reads.
    pub name: String,
}

impl ModelChoice {
    /// A choice of `id`, shown as `name`.
    pub fn new(id: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            name: name.into(),
        }
    }
}

/// Why an ACP request failed; sent to the client as the error's message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AcpError {
    /// The session could not be built (a model that does not connect, a
    /// store that cannot be written).
    #[error("{0}")]
    Session(String),
    /// The client named something that does not exist.
    #[error("{0}")]
    NotFound(String),
    /// The client asked for something this agent does not do.
    #[error("{0}")]
    Unsupported(String),
    /// The client's request does not make sense here.
    #[error("{0}")]
    Invalid(String),
    /// The connection itself failed.
    #[error("ACP connection: {0}")]
    Connection(String),
}
