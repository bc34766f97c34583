//! [`ToolHost`]: the [`Tools`] of a session, gathered from Rust functions,
//! MCP servers (child processes, streamable HTTP, in-process) and named
//! uniquely.

use std::collections::HashMap;
use std::fmt::Display;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use futures::FutureExt as _;
use futures::future::BoxFuture;
use lrg_providers::{ToolAnnotations, ToolSpec};
use rmcp::{ServerHandler, ServiceExt as _};
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

mod catalog;
mod prompts;
mod resources;
mod roots;

use super::client::{ClientCall, ClientTool, RunsOn};
use super::config::{McpConfig, McpServerConfig};
use super::in_process::ServerEnd;
use super::mcp::{CallOutcome, Connector, InProcessStart, McpServer, not_started_output};
use super::names::is_valid_name;
use super::rust_fn::FnTool;
use super::validate::{self, ArgumentCheck};
use super::{ServerPolicy, ToolClass, ToolOutput, ToolPolicy, Tools, ToolsError};
use catalog::{Catalog, Target, unknown_tool};

/// Timeouts and limits of a [`ToolHost`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ToolHostOptions {
    /// How long one tool call may run before it is abandoned (and its MCP
    /// server stopped, to be restarted on the next call). Default 120 s.
    pub call_timeout: Duration,
    /// How long starting a server (spawn, handshake, tool listing) may take.
    /// Default 30 s: `npx` may download a package first.
    pub connect_timeout: Duration,
    /// The largest tool result taken, in bytes of text and image data.
    /// Default [`DEFAULT_MAX_RESULT_BYTES`] (8 MiB). A larger one becomes
    /// an error result naming its size, at once: a child-process server's
    /// answer is dropped as it is read (never held whole), and one over
    /// twice the cap never reaches the JSON parser. Over streamable HTTP,
    /// rmcp's own limit per event (16 MiB, raised to twice this cap when
    /// that is more) comes first.
    pub max_result_bytes: usize,
}

/// Default for [`ToolHostOptions::max_result_bytes`]: 8 MiB.
pub const DEFAULT_MAX_RESULT_BYTES: usize = 8 * 1024 * 1024;

impl Default for ToolHostOptions {
    fn default() -> Self {
        Self {
            call_timeout: Duration::from_secs(120),
            connect_timeout: Duration::from_secs(30),
            max_result_bytes: DEFAULT_MAX_RESULT_BYTES,
        }
    }
}

/// A tool source that could not be added or is not running.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("tool server `{server}`: {message}")]
pub struct ServerFailure {
    /// The server's name.
    pub server: String,
    /// What went wrong (never contains header or environment values).
    pub message: String,
}

/// A Rust function tool that could not be added.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot add tool `{name}`: {problem}")]
pub struct AddToolError {
    /// The tool's name.
    pub name: String,
    /// Why.
    pub problem: String,
}

/// Where an offered tool comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolSource {
    /// A Rust function added with [`ToolHost::add_fn`].
    Rust,
    /// A tool the app's front end runs ([`ToolHost::add_client_tool`]).
    Client,
    /// An MCP server.
    Mcp {
        /// The server's name.
        server: String,
        /// The tool's name on that server (the offered name may differ).
        tool: String,
    },
}

/// One offered tool, with what permissions and listings need.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolInfo {
    /// As offered to models (the unique name).
    pub spec: ToolSpec,
    /// Read, change or destructive, from the annotations.
    pub class: ToolClass,
    /// Where it comes from.
    pub source: ToolSource,
}

/// The tools of a session: Rust functions and MCP servers behind one
/// [`Tools`] implementation.
///
/// - Names follow the rule in [`crate::tools`]: Rust functions first, then
///   servers in the order added; a later duplicate becomes `<server>__<tool>`.
/// - Arguments are checked against the tool's schema before the call.
/// - A server that dies or times out gives an error result with a warning
///   and is restarted on the next call to one of its tools.
/// - A server that cannot start does not stop the others: its tools are
///   simply missing from [`Tools::list`], and [`ToolHost::failures`] says why.
///
/// Call [`ToolHost::shutdown`] before dropping it to wait until every child
/// process has exited. Dropping without it still stops them (they are killed
/// when their handles drop), but does not wait.
pub struct ToolHost {
    options: ToolHostOptions,
    fns: RwLock<Vec<Arc<FnTool>>>,
    servers: RwLock<Vec<Arc<McpServer>>>,
    /// What servers' entries say of their own tools, by server.
    policies: RwLock<HashMap<String, ServerPolicy>>,
    /// Tools the app runs itself (see [`super::client`]).
    client: RwLock<Vec<ClientTool>>,
    /// Tools whose call ends the message (see [`ToolHost::set_ends_turn`]).
    ends_turn: RwLock<std::collections::HashSet<String>>,
    /// Bumped on every change to any source's tools.
    changes: Arc<AtomicU64>,
    catalog: RwLock<Arc<Catalog>>,
    closed: AtomicBool,
    /// The roots its servers are offered (see [`ToolHost::set_roots`]).
    roots: super::mcp::roots::Roots,
    /// Every server's `notifications/resources/updated`.
    resource_updates: tokio::sync::broadcast::Sender<super::ResourceUpdate>,
    /// Where streamable-HTTP servers' OAuth tokens are kept, if anywhere.
    tokens: RwLock<Option<super::oauth::SharedTokenStore>>,
}

impl std::fmt::Debug for ToolHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let servers: Vec<String> = read(&self.servers).iter().map(|s| s.name.clone()).collect();
        f.debug_struct("ToolHost")
            .field("options", &self.options)
            .field("rust_tools", &read(&self.fns).len())
            .field("servers", &servers)
            .finish()
    }
}

fn read<T: Clone>(lock: &RwLock<T>) -> T {
    lrg_providers::sync::read(lock).clone()
}

impl Default for ToolHost {
    fn default() -> Self {
        Self::new()
    }
}

impl ToolHost {
    /// An empty host with default timeouts.
    pub fn new() -> Self {
        Self::with_options(ToolHostOptions::default())
    }

    /// An empty host with the given timeouts.
    pub fn with_options(options: ToolHostOptions) -> Self {
        Self {
            options,
            fns: RwLock::new(Vec::new()),
            servers: RwLock::new(Vec::new()),
            policies: RwLock::new(HashMap::new()),
            client: RwLock::new(Vec::new()),
            ends_turn: RwLock::new(Default::default()),
            changes: Arc::new(AtomicU64::new(0)),
            catalog: RwLock::new(Arc::new(Catalog {
                built_from: u64::MAX,
                entries: Vec::new(),
                by_name: HashMap::new(),
                specs: Arc::from([]),
                held_back: Vec::new(),
            })),
            closed: AtomicBool::new(false),
            roots: Default::default(),
            resource_updates: tokio::sync::broadcast::channel(resources::UPDATES_KEPT).0,
            tokens: RwLock::new(None),
        }
    }

    /// Keep streamable-HTTP servers' OAuth tokens in `store` (see
    /// [`super::oauth`]): a server logged in to gets its access token,
    /// refreshed as needed; one that needs a login is listed by
    /// [`ToolHost::failures`] as "needs login: …" and its tools are left
    /// out. Set it before adding the servers. The host never opens a browser:
    /// logging in is the app's ([`super::oauth::begin_login`]).
    pub fn set_token_store(&self, store: super::oauth::SharedTokenStore) {
        *lrg_providers::sync::write(&self.tokens) = Some(store);
    }

    /// The timeouts in use.
    pub fn options(&self) -> ToolHostOptions {
        self.options
    }

    /// Add an async Rust function as a tool.
    ///
    /// The input schema is derived from `A` with `schemars` (so `A` must be a
    /// struct: tool arguments are a JSON object); doc comments on its fields
    /// become argument descriptions. Arguments are checked against that
    /// schema, then deserialized into `A`. `Ok` values become the result
    /// (`String`, `&str` or a full [`ToolOutput`]); `Err` values become an
    /// error result with their `Display` text.
    ///
    /// Rust tools take precedence over MCP tools of the same name. The name
    /// must match `^[a-zA-Z0-9_-]{1,64}$` and not be used by another Rust tool.
    ///
    /// ```no_run
    /// # use lrg_chat::tools::ToolHost;
    /// # use lrg_providers::ToolAnnotations;
    /// #[derive(serde::Deserialize, schemars::JsonSchema)]
    /// struct Add {
    ///     /// The first number.
    ///     a: i64,
    ///     /// The second number.
    ///     b: i64,
    /// }
    /// let host = ToolHost::new();
    /// let read_only = ToolAnnotations { read_only_hint: Some(true), ..Default::default() };
    /// host.add_fn("add", "Add two numbers", read_only, |args: Add| async move {
    ///     Ok::<_, String>(format!("{}", args.a + args.b))
    /// })?;
    /// # Ok::<(), lrg_chat::tools::AddToolError>(())
    /// ```
    pub fn add_fn<A, F, Fut, O, E>(
        &self,
        name: impl Into<String>,
        description: impl Into<String>,
        annotations: ToolAnnotations,
        f: F,
    ) -> Result<(), AddToolError>
    where
        A: DeserializeOwned + JsonSchema + Send + 'static,
        F: Fn(A) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<O, E>> + Send + 'static,
        O: Into<ToolOutput>,
        E: Display,
    {
        let name = name.into();
        let fail = |problem: String| AddToolError {
            name: name.clone(),
            problem,
        };
        if !is_valid_name(&name) {
            return Err(fail(
                "names must be 1 to 64 characters of a-z, A-Z, 0-9, `_` or `-`".to_owned(),
            ));
        }
        let tool = FnTool::new(name.clone(), description.into(), annotations, f).map_err(fail)?;
        let mut fns = lrg_providers::sync::write(&self.fns);
        if fns.iter().any(|t| t.spec.name == name) {
            return Err(fail("another Rust tool has this name".to_owned()));
        }
        fns.push(Arc::new(tool));
        drop(fns);
        self.changes.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }

    /// Register a client tool (see [`super::client`]).
    pub(super) fn add_client(&self, tool: ClientTool) -> Result<(), AddToolError> {
        let name = tool.spec.name.clone();
        let fail = |problem: &str| AddToolError {
            name: name.clone(),
            problem: problem.to_owned(),
        };
        if !is_valid_name(&name) {
            return Err(fail(
                "names must be 1 to 64 characters of a-z, A-Z, 0-9, `_` or `-`",
            ));
        }
        let mut client = lrg_providers::sync::write(&self.client);
        if client.iter().any(|t| t.spec.name == name) {
            return Err(fail("another client tool has this name"));
        }
        client.push(tool);
        drop(client);
        self.changes.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }

    /// Make a call to `name` end the message: it runs, and its result is
    /// the outcome, with no further model turn (`on: false` undoes it).
    pub fn set_ends_turn(&self, name: &str, on: bool) {
        let mut ends = lrg_providers::sync::write(&self.ends_turn);
        if on {
            ends.insert(name.to_owned());
        } else {
            ends.remove(name);
        }
    }

    /// Add every server of a configuration, connecting to all of them at
    /// once. Returns the servers that failed to start (empty when all are
    /// up); they stay registered, keep their place in the naming order, and
    /// can be retried with [`ToolHost::retry_failed`].
    pub async fn add_mcp_config(&self, config: &McpConfig) -> Vec<ServerFailure> {
        for (server, policy) in &config.policies {
            self.set_server_policy(server, policy.clone());
        }
        let mut failures = Vec::new();
        let mut added = Vec::new();
        for (name, cfg) in &config.servers {
            match self.register(name.clone(), Connector::Config(cfg.clone())) {
                Ok(server) => added.push(server),
                Err(f) => failures.push(f),
            }
        }
        let results = futures::future::join_all(added.iter().map(|s| s.ensure_connected())).await;
        for (server, result) in added.iter().zip(results) {
            if let Err(message) = result {
                tracing::warn!(server = %server.name, %message, "tool server did not start");
                failures.push(ServerFailure {
                    server: server.name.clone(),
                    message,
                });
            }
        }
        failures
    }

    /// Add one MCP server (a child process or a streamable-HTTP endpoint)
    /// and connect to it. On failure it stays registered, as with
    /// [`ToolHost::add_mcp_config`].
    pub async fn add_mcp_server(
        &self,
        name: impl Into<String>,
        config: McpServerConfig,
    ) -> Result<(), ServerFailure> {
        let server = self.register(name.into(), Connector::Config(config))?;
        server
            .ensure_connected()
            .await
            .map(|_| ())
            .map_err(|message| ServerFailure {
                server: server.name.clone(),
                message,
            })
    }

    /// Add an rmcp server that runs inside this process: for apps that embed
    /// their own tools as an MCP server, and for tests. `make` builds a fresh
    /// server for each (re)connection. Client and server run rmcp's own
    /// services and hand each other the JSON-RPC messages as values (no
    /// serialization in between).
    pub async fn add_in_process<S, F>(
        &self,
        name: impl Into<String>,
        make: F,
    ) -> Result<(), ServerFailure>
    where
        S: ServerHandler,
        F: Fn() -> S + Send + Sync + 'static,
    {
        let name = name.into();
        let server_name = name.clone();
        let start: InProcessStart = Arc::new(move |io: ServerEnd| {
            let handler = make();
            let server_name = server_name.clone();
            async move {
                match handler.serve(io).await {
                    Ok(running) => {
                        let _ = running.waiting().await;
                    }
                    Err(e) => {
                        tracing::warn!(server = %server_name, error = %e, "in-process tool server did not start");
                    }
                }
            }
            .boxed()
        });
        let server = self.register(name, Connector::InProcess(start))?;
        server
            .ensure_connected()
            .await
            .map(|_| ())
            .map_err(|message| ServerFailure {
                server: server.name.clone(),
                message,
            })
    }

    fn register(
        &self,
        name: String,
        connector: Connector,
    ) -> Result<Arc<McpServer>, ServerFailure> {
        let fail = |message: &str| ServerFailure {
            server: name.clone(),
            message: message.to_owned(),
        };
        if self.closed.load(Ordering::SeqCst) {
            return Err(fail("the tool host was shut down"));
        }
        if name.trim().is_empty() {
            return Err(fail("a server needs a name"));
        }
        let mut servers = lrg_providers::sync::write(&self.servers);
        if servers.iter().any(|s| s.name == name) {
            return Err(fail("a server of this name was already added"));
        }
        let server = Arc::new(
            McpServer::new(
                name.clone(),
                connector,
                self.changes.clone(),
                self.options.connect_timeout,
                self.options.max_result_bytes,
                self.roots.clone(),
                self.resource_updates.clone(),
            )
            .with_tokens(read(&self.tokens)),
        );
        servers.push(server.clone());
        drop(servers);
        self.changes.fetch_add(1, Ordering::SeqCst);
        Ok(server)
    }

    /// What server `server`'s config says of its tools (see
    /// [`ServerPolicy`]); [`ToolHost::add_mcp_config`] sets it from each
    /// entry.
    pub fn set_server_policy(&self, server: &str, policy: ServerPolicy) {
        lrg_providers::sync::write(&self.policies).insert(server.to_owned(), policy);
        self.changes.fetch_add(1, Ordering::SeqCst);
    }

    /// Tools that servers' configs keep from being offered, as
    /// `(server, tool)`: `lrg tools` lists them as denied by config.
    pub fn held_back(&self) -> Vec<(String, String)> {
        self.catalog().held_back.clone()
    }

    /// Servers that are not running now, with the reason: those that failed
    /// to start, and those that died and were not restarted yet. For
    /// warnings shown to the person.
    pub fn failures(&self) -> Vec<ServerFailure> {
        read(&self.servers)
            .iter()
            .filter_map(|s| {
                s.problem().map(|message| ServerFailure {
                    server: s.name.clone(),
                    message,
                })
            })
            .collect()
    }

    /// Try again to start the servers that are not running; returns those
    /// that still fail.
    pub async fn retry_failed(&self) -> Vec<ServerFailure> {
        let down: Vec<Arc<McpServer>> = read(&self.servers)
            .into_iter()
            .filter(|s| s.problem().is_some())
            .collect();
        let results = futures::future::join_all(down.iter().map(|s| s.ensure_connected())).await;
        down.iter()
            .zip(results)
            .filter_map(|(s, r)| {
                r.err().map(|message| ServerFailure {
                    server: s.name.clone(),
                    message,
                })
            })
            .collect()
    }

    /// Fetch again the tool lists that servers said have changed.
    pub async fn refresh_changed(&self) {
        let servers = read(&self.servers);
        futures::future::join_all(servers.iter().map(|s| s.refresh_tools_if_changed())).await;
    }

    /// Every offered tool with its class and source, in precedence order
    /// (as of the last listing: see [`ToolHost::refresh_changed`]).
    pub fn tools(&self) -> Vec<ToolInfo> {
        self.catalog()
            .entries
            .iter()
            .map(|e| e.info.clone())
            .collect()
    }

    /// Stop every server and wait until child processes have exited. Later
    /// calls return an error result; listing returns an error.
    pub async fn shutdown(&self) {
        self.closed.store(true, Ordering::SeqCst);
        let servers = read(&self.servers);
        futures::future::join_all(servers.iter().map(|s| s.shutdown())).await;
    }

    async fn call_inner(
        &self,
        name: &str,
        arguments: Value,
        cancel: CancellationToken,
    ) -> ToolOutput {
        if self.closed.load(Ordering::SeqCst) {
            return ToolOutput::error("The tools were shut down; the call did not run.");
        }
        let catalog = self.catalog();
        let Some(entry) = catalog
            .by_name
            .get(name)
            .and_then(|i| catalog.entries.get(*i))
        else {
            return unknown_tool(name, &catalog);
        };
        let check: &ArgumentCheck = match &entry.target {
            Target::Fn(f) => &f.check,
            Target::Client(_, check) => check,
            Target::Mcp { tool, .. } => &tool.check,
            Target::Resources(which) => which.check(),
        };
        let args = match validate::normalize_arguments(arguments) {
            Ok(a) => a,
            Err(original) => return ToolOutput::error(check.not_an_object(name, &original)),
        };
        let args_value = Value::Object(args);
        if let Err(message) = check.check(name, &args_value) {
            return ToolOutput::error(message);
        }
        if cancel.is_cancelled() {
            return not_started_output(name);
        }
        let Value::Object(args) = args_value else {
            return ToolOutput::error("internal error: arguments changed shape");
        };
        let timeout = self.options.call_timeout;
        let out = match &entry.target {
            Target::Fn(f) => f.call(Value::Object(args), timeout).await,
            // The session answers these itself (it waits for the app).
            Target::Client(..) => ToolOutput::error(format!(
                "`{name}` runs in the app's front end: only a chat session can call it"
            )),
            Target::Resources(which) => self.call_resource_tool(*which, &args).await,
            Target::Mcp { server, tool } => {
                match server.call(&tool.name, args, timeout, &cancel).await {
                    CallOutcome::Done(mut out) => {
                        if let Some(output) = &tool.output {
                            output.check(&tool.name, &mut out);
                        }
                        out
                    }
                    CallOutcome::Failed(mut out, warning) => {
                        tracing::warn!(server = %server.name, tool = %tool.name, "{warning}");
                        out.warning = Some(warning);
                        out
                    }
                }
            }
        };
        super::capped::capped(name, out, self.options.max_result_bytes)
    }
}

impl Tools for ToolHost {
    fn list(&self) -> BoxFuture<'_, Result<Vec<ToolSpec>, ToolsError>> {
        async move { self.list_shared().await.map(|specs| specs.to_vec()) }.boxed()
    }

    /// The kept list itself, until a source's tools change.
    fn list_shared(&self) -> BoxFuture<'_, Result<Arc<[ToolSpec]>, ToolsError>> {
        async move {
            if self.closed.load(Ordering::SeqCst) {
                return Err(ToolsError("the tool host was shut down".to_owned()));
            }
            self.refresh_changed().await;
            Ok(self.catalog().specs.clone())
        }
        .boxed()
    }

    fn call<'a>(
        &'a self,
        name: &'a str,
        arguments: Value,
        cancel: CancellationToken,
    ) -> BoxFuture<'a, ToolOutput> {
        self.call_inner(name, arguments, cancel).boxed()
    }

    fn policy(&self, name: &str) -> ToolPolicy {
        let catalog = self.catalog();
        let Some(entry) = catalog
            .by_name
            .get(name)
            .and_then(|i| catalog.entries.get(*i))
        else {
            return ToolPolicy::default();
        };
        let mut policy = match &entry.info.source {
            ToolSource::Mcp { server, tool } => lrg_providers::sync::read(&self.policies)
                .get(server)
                .map(|p| p.of(server, tool, entry.info.class))
                .unwrap_or_default(),
            _ => ToolPolicy::default(),
        };
        if matches!(entry.target, Target::Client(..)) {
            policy.runs_on = RunsOn::Client;
        }
        policy.ends_turn = lrg_providers::sync::read(&self.ends_turn).contains(name);
        policy
    }

    fn resource_updates(&self) -> Option<tokio::sync::broadcast::Receiver<super::ResourceUpdate>> {
        Some(ToolHost::resource_updates(self))
    }

    fn client_call(&self, call: &ClientCall) -> bool {
        let catalog = self.catalog();
        match catalog
            .by_name
            .get(&call.tool)
            .and_then(|i| catalog.entries.get(*i))
            .map(|e| &e.target)
        {
            // An app that dropped its stream answers over events, if at all.
            Some(Target::Client(tool, _)) => tool.calls.send(call.clone()).is_ok(),
            _ => false,
        }
    }
}
