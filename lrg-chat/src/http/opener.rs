//! Opening a chat: what a client asks for ([`ChatSpec`]) and who prepares
//! the session ([`ChatOpener`]; [`StandardOpener`] for the usual case). The
//! opener hands back a builder: the server's session registry adds the store
//! and, for a resumed chat, its history.

use std::sync::Arc;

use futures::future::BoxFuture;
use lrg_providers::{ChatModel, ModelInfo, ModelLocation, ProviderError};

use crate::permissions::{PermissionSettings, Permissions};
use crate::session::{ChatSession, ChatSessionBuilder, SessionConfig, SwitchableModel};
use crate::tools::{McpConfig, ToolHost, ToolHostOptions};

/// What a chat is opened with. Fields left `None` take the server's
/// defaults ([`crate::http::HttpConfig::defaults`]).
///
/// It holds MCP server configurations, whose environment values and headers
/// are secrets: it is kept in memory only (to open the chat again on another
/// model) and never sent back to a client.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct ChatSpec {
    /// The model, `provider:model`.
    pub model: Option<String>,
    /// The tools: MCP servers.
    pub mcp_servers: Option<McpConfig>,
    /// The permission settings.
    pub permissions: Option<PermissionSettings>,
    /// The system prompt.
    pub system: Option<String>,
    /// Refuse models that send the conversation to a cloud (the session's
    /// "local only" lock).
    pub local_only: Option<bool>,
    /// Who the chat belongs to (see [`crate::http`]'s owners); `None`:
    /// [`crate::store::DEFAULT_OWNER`].
    pub owner: Option<String>,
    /// Tools the client runs itself (see [`crate::tools::client`]).
    pub client_tools: Vec<crate::tools::client::ClientToolSpec>,
    /// Let the model delegate tasks to sub-agents ([`crate::sub_agents`],
    /// with the default limits). The opener applies it
    /// ([`StandardOpener`] does).
    pub sub_agents: Option<bool>,
}

impl ChatSpec {
    /// A spec that takes every default.
    pub fn new() -> Self {
        Self::default()
    }

    /// Set the model.
    pub fn model(mut self, model: impl Into<String>) -> Self {
        self.model = Some(model.into());
        self
    }

    /// Set the MCP servers.
    pub fn mcp_servers(mut self, servers: McpConfig) -> Self {
        self.mcp_servers = Some(servers);
        self
    }

    /// Set the permission settings.
    pub fn permissions(mut self, settings: PermissionSettings) -> Self {
        self.permissions = Some(settings);
        self
    }

    /// Set the system prompt.
    pub fn system(mut self, prompt: impl Into<String>) -> Self {
        self.system = Some(prompt.into());
        self
    }

    /// Set the "local only" lock.
    pub fn local_only(mut self, on: bool) -> Self {
        self.local_only = Some(on);
        self
    }

    /// Set the owner.
    pub fn owner(mut self, owner: impl Into<String>) -> Self {
        self.owner = Some(owner.into());
        self
    }

    /// Turn sub-agents on or off.
    pub fn sub_agents(mut self, on: bool) -> Self {
        self.sub_agents = Some(on);
        self
    }

    /// The owner, [`crate::store::DEFAULT_OWNER`] when none is set.
    pub fn owner_or_default(&self) -> &str {
        self.owner.as_deref().unwrap_or(crate::store::DEFAULT_OWNER)
    }

    /// The model id, trimmed; a 400 naming `model` when there is none.
    pub fn model_id(&self) -> Result<&str, OpenError> {
        self.model
            .as_deref()
            .map(str::trim)
            .filter(|m| !m.is_empty())
            .ok_or_else(|| {
                OpenError::field("model", "no model given, and the server has no default")
            })
    }

    /// This spec with its empty fields taken from `defaults`.
    pub fn or(self, defaults: &ChatSpec) -> Self {
        Self {
            model: self.model.or_else(|| defaults.model.clone()),
            mcp_servers: self.mcp_servers.or_else(|| defaults.mcp_servers.clone()),
            permissions: self.permissions.or_else(|| defaults.permissions.clone()),
            system: self.system.or_else(|| defaults.system.clone()),
            local_only: self.local_only.or(defaults.local_only),
            owner: self.owner.or_else(|| defaults.owner.clone()),
            client_tools: if self.client_tools.is_empty() {
                defaults.client_tools.clone()
            } else {
                self.client_tools
            },
            sub_agents: self.sub_agents.or(defaults.sub_agents),
        }
    }
}

/// A chat that an opener prepared: everything but the store and the
/// resumed history, which the server's registry adds.
#[non_exhaustive]
pub struct OpenedChat {
    /// The session, not yet built.
    pub builder: ChatSessionBuilder,
    /// Its model.
    pub model: ModelInfo,
    /// Its tools, shut down when the chat ends; their list feeds the
    /// permissions panel.
    pub host: Option<Arc<ToolHost>>,
    /// Told to the person as `warning` events once the session is built
    /// (e.g. a tool server that did not start). Never secrets.
    pub warnings: Vec<String>,
    /// The session's model source, when the builder was made on one that
    /// can switch: then the chat's conversation can be carried over to
    /// another model in place (`POST …/model` with `carry_over: true`).
    pub source: Option<Arc<SwitchableModel>>,
}

impl OpenedChat {
    /// A chat built by `builder`, running on `model`.
    pub fn new(builder: ChatSessionBuilder, model: ModelInfo) -> Self {
        Self {
            builder,
            model,
            host: None,
            warnings: Vec::new(),
            source: None,
        }
    }

    /// The switchable model source `builder` was made on (see
    /// [`OpenedChat::source`]).
    pub fn with_source(mut self, source: Arc<SwitchableModel>) -> Self {
        self.source = Some(source);
        self
    }

    /// Its tool host.
    pub fn with_host(mut self, host: Arc<ToolHost>) -> Self {
        self.host = Some(host);
        self
    }

    /// A warning for the person, published once the session is built.
    pub fn with_warning(mut self, message: impl Into<String>) -> Self {
        self.warnings.push(message.into());
        self
    }

    /// Stop its tool servers (a chat prepared but never used).
    pub(crate) async fn discard(self) {
        if let Some(host) = self.host {
            host.shutdown().await;
        }
    }
}

/// Why a chat could not be opened.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum OpenError {
    /// A field of the request is wrong (answered as a 400 naming it).
    #[error("`{field}`: {message}")]
    BadRequest {
        /// The field, as the request names it (`model`, `mcpServers`, ...).
        field: String,
        /// What is wrong, for a person.
        message: String,
    },
    /// Something else failed (a 500 with this message: keep it free of
    /// secrets and internal paths).
    #[error("{0}")]
    Failed(String),
}

impl OpenError {
    /// A bad field.
    pub fn field(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self::BadRequest {
            field: field.into(),
            message: message.into(),
        }
    }
}

/// Builds the session of a new chat.
pub trait ChatOpener: Send + Sync {
    /// Prepare a chat as `spec` says (defaults applied; `spec.model` set).
    fn open(&self, spec: ChatSpec) -> BoxFuture<'_, Result<OpenedChat, OpenError>>;

    /// The model `spec` names (with its "local only" lock checked), for a
    /// live chat whose conversation is carried over to it; nothing else of
    /// the chat changes. The default prepares a whole chat and keeps only
    /// its model, which needs [`OpenedChat::source`]; an opener that can
    /// tell its model more cheaply says so here.
    fn model(&self, spec: ChatSpec) -> BoxFuture<'_, Result<Arc<dyn ChatModel>, OpenError>> {
        Box::pin(async move {
            let opened = self.open(spec).await?;
            let model = opened.source.as_ref().map(|s| s.current());
            opened.discard().await;
            model.ok_or_else(|| {
                OpenError::field(
                    "carry_over",
                    "this server's chats stay on the model they were opened on: switch \
                     without `carry_over` for a new chat",
                )
            })
        })
    }
}

/// Turns a model id into a model.
pub type ResolveModel =
    dyn Fn(&str) -> BoxFuture<'static, Result<Arc<dyn ChatModel>, ProviderError>> + Send + Sync;

/// The usual opener: the model from a resolver, tools from the spec's MCP
/// servers on a fresh [`ToolHost`]; permissions from the spec in memory,
/// or, when the spec names none, the app's shared ones
/// ([`StandardOpener::permissions`]).
pub struct StandardOpener {
    resolve: Arc<ResolveModel>,
    config: SessionConfig,
    tool_options: ToolHostOptions,
    shared: Option<Arc<Permissions>>,
    prompt: crate::prompt::PromptContext,
    hooks: Vec<Arc<dyn crate::hooks::SessionHooks>>,
    /// The roots every chat's tool servers are offered (none by default).
    roots: Vec<crate::tools::Root>,
    /// Where its chats' servers find their OAuth tokens.
    tokens: Option<crate::tools::oauth::SharedTokenStore>,
}

impl std::fmt::Debug for StandardOpener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StandardOpener").finish_non_exhaustive()
    }
}

impl StandardOpener {
    /// An opener resolving model ids with `resolve`.
    pub fn new(
        resolve: impl Fn(&str) -> BoxFuture<'static, Result<Arc<dyn ChatModel>, ProviderError>>
        + Send
        + Sync
        + 'static,
    ) -> Self {
        Self {
            resolve: Arc::new(resolve),
            config: SessionConfig::default(),
            tool_options: ToolHostOptions::default(),
            shared: None,
            prompt: crate::prompt::PromptContext::default(),
            hooks: Vec::new(),
            roots: Vec::new(),
            tokens: None,
        }
    }

    /// Where every chat's streamable-HTTP servers find their OAuth tokens
    /// (see [`crate::tools::oauth`]). A server that needs a login is left
    /// out of the chat and named in its warnings with how to log in; the
    /// opener never opens a browser.
    pub fn token_store(mut self, store: crate::tools::oauth::SharedTokenStore) -> Self {
        self.tokens = Some(store);
        self
    }

    /// The roots every chat's MCP servers are offered (`roots/list`):
    /// none unless given, since a served chat's person may not be this
    /// machine's.
    pub fn roots(mut self, roots: Vec<crate::tools::Root>) -> Self {
        self.roots = roots;
        self
    }

    /// The hooks every chat runs (see [`crate::hooks`]).
    pub fn hooks(mut self, hooks: Vec<Arc<dyn crate::hooks::SessionHooks>>) -> Self {
        self.hooks = hooks;
        self
    }

    /// The permissions of every chat whose spec names none: shared, so an
    /// "always" answer in one chat holds in all of them, and saved when
    /// `permissions` is bound to a file (as `lrg chat` binds the same
    /// settings file). Without them, such a chat gets the defaults in
    /// memory.
    pub fn permissions(mut self, permissions: Arc<Permissions>) -> Self {
        self.shared = Some(permissions);
        self
    }

    /// The session tunables of every chat.
    pub fn session_config(mut self, config: SessionConfig) -> Self {
        self.config = config;
        self
    }

    /// Where every chat's prompt sections come from (default: none but the
    /// spec's system prompt; served chats read no project unless one is
    /// configured here).
    pub fn prompt_context(mut self, context: crate::prompt::PromptContext) -> Self {
        self.prompt = context;
        self
    }

    /// The tool host timeouts of every chat.
    pub fn tool_options(mut self, options: ToolHostOptions) -> Self {
        self.tool_options = options;
        self
    }
}

impl StandardOpener {
    /// The model `spec` names, refused when the spec is local only and the
    /// model would send the conversation to a cloud.
    async fn resolve(&self, spec: &ChatSpec) -> Result<Arc<dyn ChatModel>, OpenError> {
        let id = spec.model_id()?;
        let model = (self.resolve)(id)
            .await
            .map_err(|e| OpenError::field("model", e.to_string()))?;
        let info = model.info();
        if spec.local_only.unwrap_or(false) && info.location == ModelLocation::Cloud {
            return Err(OpenError::field(
                "model",
                format!(
                    "this chat is local only, and {id} would send it to {}; \
                     choose a model on this machine or your own server",
                    info.sends_to.as_deref().unwrap_or(&info.provider)
                ),
            ));
        }
        Ok(model)
    }
}

impl ChatOpener for StandardOpener {
    fn open(&self, spec: ChatSpec) -> BoxFuture<'_, Result<OpenedChat, OpenError>> {
        Box::pin(async move {
            let model = self.resolve(&spec).await?;
            let info = model.info();
            let local_only = spec.local_only.unwrap_or(false);
            let host = Arc::new(ToolHost::with_options(self.tool_options));
            if let Some(store) = &self.tokens {
                host.set_token_store(store.clone());
            }
            host.set_roots(self.roots.clone()).await;
            let failures = match &spec.mcp_servers {
                Some(servers) => host.add_mcp_config(servers).await,
                None => Vec::new(),
            };
            for tool in &spec.client_tools {
                // The front end answers over HTTP: the stream is not needed.
                let _calls = host
                    .add_client_tool(tool.spec.clone())
                    .map_err(|e| OpenError::field("client_tools", e.to_string()))?;
                host.set_ends_turn(&tool.spec.name, tool.ends_turn);
            }
            let permissions = match (spec.permissions, &self.shared) {
                (Some(settings), _) => Arc::new(Permissions::new(settings)),
                (None, Some(shared)) => shared.clone(),
                (None, None) => Arc::new(Permissions::new(PermissionSettings::default())),
            };
            // Switchable, so the person may carry the conversation over to
            // another model in place.
            let source = Arc::new(SwitchableModel::new(model));
            let mut builder = ChatSession::builder(source.clone())
                .tools(host.clone())
                .permissions(permissions)
                .local_only(local_only)
                .config(self.config.clone())
                .hooks(self.hooks.iter().cloned());
            if spec.sub_agents == Some(true) {
                builder = builder.sub_agents(crate::sub_agents::SubAgents::default());
            }
            let prompt = self.prompt.builder(spec.system.as_deref());
            let mut warnings: Vec<String> = failures.iter().map(ToString::to_string).collect();
            if let Err(e) = prompt.add_tools(&host) {
                warnings.push(e.to_string());
            }
            builder = builder.prompt(prompt);
            let mut opened = OpenedChat::new(builder, info)
                .with_host(host)
                .with_source(source);
            // A server that did not start is the person's to know about; its
            // message never holds environment or header values.
            for warning in warnings {
                opened = opened.with_warning(warning);
            }
            Ok(opened)
        })
    }

    fn model(&self, spec: ChatSpec) -> BoxFuture<'_, Result<Arc<dyn ChatModel>, OpenError>> {
        Box::pin(async move { self.resolve(&spec).await })
    }
}
