//! One MCP server as a tool source: connecting (child process, streamable
//! HTTP or in-process), listing its tools, calling them, and reconnecting
//! after the server died or hung.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex as StdMutex, RwLock};
use std::time::Duration;

use futures::future::BoxFuture;
use lrg_providers::{ToolAnnotations, ToolSpec};
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CancelledNotificationParam, ClientRequest, JsonObject,
    ServerResult,
};
use rmcp::service::PeerRequestOptions;
use rmcp::service::{RunningService, ServiceError};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{Peer, RoleClient, ServiceExt as _};
use serde_json::Value;
use tokio::sync::{Mutex, RwLock as AsyncRwLock, broadcast};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::ToolOutput;
use super::child::{self, StderrTail};
use super::config::{HttpServerConfig, McpServerConfig, StdioServerConfig};
use super::content::output_from_mcp;
use super::in_process::{self, ServerEnd};
use super::validate::ArgumentCheck;

/// How long a stopping server gets to exit before the next step (rmcp then
/// escalates: close stdin, SIGTERM, SIGKILL).
const CLOSE_TIMEOUT: Duration = Duration::from_secs(10);

/// Starts an in-process server on the server's end of a message channel.
pub(crate) type InProcessStart = Arc<dyn Fn(ServerEnd) -> BoxFuture<'static, ()> + Send + Sync>;

/// How to (re)connect.
#[derive(Clone)]
pub(crate) enum Connector {
    Config(McpServerConfig),
    InProcess(InProcessStart),
}

/// A tool as one server offers it, with its compiled argument check.
#[derive(Debug)]
pub(crate) struct RemoteTool {
    /// The name the server knows it by.
    pub(crate) name: String,
    /// As offered to models, under the server's own name (the host renames).
    pub(crate) spec: ToolSpec,
    pub(crate) check: ArgumentCheck,
    /// The compiled `outputSchema`, when it declares one that compiles.
    pub(crate) output: Option<OutputCheck>,
}

mod handler;
mod prompts;
mod request;
mod resources;
mod structured;
pub use prompts::{ExpandedPrompt, McpPrompt, McpPromptArgument};
pub use request::{Listing, McpRequestError};
use resources::ServerCaps;
pub(crate) use resources::UpdateSender;
pub use resources::{
    McpResource, McpResourceTemplate, Page, ResourceBody, ResourceContents, ResourceUpdate,
};
use structured::OutputCheck;
pub(crate) use structured::show_to_model as show_structured;
pub(crate) mod link;
pub mod oauth;
pub(crate) mod roots;
pub(crate) mod sampling;
mod waiting;

pub(crate) use handler::LrgClient;
use link::Link;
use waiting::Cut;

type Client = RunningService<RoleClient, LrgClient>;

/// A live connection, shared by the calls running on it: each holds it
/// for reading (rmcp's `call_tool` fulfils `input_required` rounds through
/// it); closing takes it for writing, after cancelling its service so the
/// calls end.
type SharedClient = Arc<AsyncRwLock<Client>>;

enum Conn {
    /// Never connected, or stopped (the reason is in `McpServer::problem`).
    Down,
    Up {
        client: SharedClient,
        peer: Peer<RoleClient>,
        epoch: u64,
        /// The in-process server's task, ended when the server is replaced.
        server_task: Option<JoinHandle<()>>,
    },
    Closed,
}

/// One MCP server and its connection.
pub(crate) struct McpServer {
    pub(crate) name: String,
    connector: Connector,
    conn: Mutex<Conn>,
    tools: RwLock<Arc<Vec<Arc<RemoteTool>>>>,
    /// Last connection problem, for `ToolHost::failures`; `None` while up.
    problem: RwLock<Option<String>>,
    /// Bumped whenever this server's tool list changes (shared with the host).
    changes: Arc<AtomicU64>,
    epochs: AtomicU64,
    /// What the connection's handler shares: list-changed flags, running
    /// calls, roots.
    link: Arc<Link>,
    stderr: StderrTail,
    /// Background closes of replaced connections; awaited by shutdown.
    closing: StdMutex<Vec<JoinHandle<()>>>,
    connect_timeout: Duration,
    /// The largest tool result taken ([`super::ToolHostOptions::max_result_bytes`]).
    max_result: usize,
    /// What it declared at its last handshake besides tools.
    caps: RwLock<ServerCaps>,
    /// Where its `notifications/resources/updated` go (shared by the host).
    updates: broadcast::Sender<ResourceUpdate>,
    /// Where its OAuth tokens are kept (streamable HTTP; see [`oauth`]).
    tokens: Option<oauth::SharedTokenStore>,
    /// Held while its tokens are refreshed (one refresh at a time).
    refreshing: Arc<Mutex<()>>,
}

/// How a call went, before the host adds names to it.
pub(crate) enum CallOutcome {
    Done(ToolOutput),
    /// The server could not be reached or died during the call; the output
    /// is the error for the model, the string the warning for the person.
    Failed(ToolOutput, String),
}

impl McpServer {
    pub(crate) fn new(
        name: String,
        connector: Connector,
        changes: Arc<AtomicU64>,
        connect_timeout: Duration,
        max_result: usize,
        roots: roots::Roots,
        updates: broadcast::Sender<ResourceUpdate>,
    ) -> Self {
        Self {
            link: Link::new(name.clone(), roots),
            name,
            connector,
            conn: Mutex::new(Conn::Down),
            tools: RwLock::new(Arc::new(Vec::new())),
            problem: RwLock::new(Some("not started yet".to_owned())),
            changes,
            epochs: AtomicU64::new(0),
            stderr: StderrTail::default(),
            closing: StdMutex::new(Vec::new()),
            connect_timeout,
            max_result,
            caps: RwLock::new(ServerCaps::default()),
            updates,
            tokens: None,
            refreshing: Arc::new(Mutex::new(())),
        }
    }

    /// Keep its OAuth tokens in `store` (set before it first connects).
    pub(crate) fn with_tokens(mut self, store: Option<oauth::SharedTokenStore>) -> Self {
        self.tokens = store;
        self
    }

    /// The tools from the last successful listing.
    pub(crate) fn tools(&self) -> Arc<Vec<Arc<RemoteTool>>> {
        lrg_providers::sync::read(&self.tools).clone()
    }

    fn client(&self) -> LrgClient {
        LrgClient {
            link: self.link.clone(),
            resource_updates: UpdateSender {
                server: self.name.clone(),
                tx: self.updates.clone(),
            },
        }
    }

    /// List the tools again if the server said they changed. A failure
    /// keeps the old list (the next call will find out what is wrong).
    pub(crate) async fn refresh_tools_if_changed(&self) {
        if !self.link.tools_changed.swap(false, Ordering::SeqCst) {
            return;
        }
        let peer = match &*self.conn.lock().await {
            Conn::Up { peer, .. } => peer.clone(),
            _ => return,
        };
        match tokio::time::timeout(self.connect_timeout, peer.list_all_tools()).await {
            Ok(Ok(tools)) => {
                self.set_tools(
                    tools
                        .into_iter()
                        .map(|t| Arc::new(remote_tool(t)))
                        .collect(),
                );
            }
            Ok(Err(e)) => {
                tracing::warn!(server = %self.name, error = %e, "listing changed tools failed")
            }
            Err(_) => tracing::warn!(server = %self.name, "listing changed tools timed out"),
        }
    }

    /// The current problem, if the server is not connected.
    pub(crate) fn problem(&self) -> Option<String> {
        let known = lrg_providers::sync::read(&self.problem).clone();
        if known.is_some() {
            return known;
        }
        // Up as far as we know; the process may have died since the last call.
        // (When the connection is busy being replaced, the answer can wait.)
        match self.conn.try_lock().as_deref() {
            Ok(Conn::Up { peer, .. }) if peer.is_transport_closed() => {
                Some("it stopped; it will be restarted on the next call".to_owned())
            }
            _ => None,
        }
    }

    fn set_problem(&self, p: Option<String>) {
        *lrg_providers::sync::write(&self.problem) = p;
    }

    /// Connect if not connected. `Ok(true)` when it had died unnoticed and
    /// was restarted.
    pub(crate) async fn ensure_connected(&self) -> Result<bool, String> {
        self.ready().await.map(|(_, _, fresh)| fresh)
    }

    /// Tell the connected server that the roots changed (one not connected
    /// asks for them when it connects).
    pub(crate) async fn roots_changed(&self) {
        let peer = match &*self.conn.lock().await {
            Conn::Up { peer, .. } => peer.clone(),
            _ => return,
        };
        if let Err(e) = peer.notify_roots_list_changed().await {
            tracing::debug!(server = %self.name, error = %e, "telling the server the roots changed failed");
        }
    }

    /// The live connection's peer and epoch, connecting first if needed;
    /// the flag says whether it replaced one that had died unnoticed.
    async fn ready(&self) -> Result<(Peer<RoleClient>, u64, bool), String> {
        self.connection()
            .await
            .map(|(_, peer, epoch, fresh)| (peer, epoch, fresh))
    }

    /// [`Self::ready`], with the connection itself (for rmcp's
    /// `RunningService` helpers, which answer `input_required` rounds).
    async fn connection(&self) -> Result<(SharedClient, Peer<RoleClient>, u64, bool), String> {
        let mut conn = self.conn.lock().await;
        // A server that went down during a call was already reported then;
        // one whose transport closed between calls was not (`silent`).
        let silent = match &*conn {
            Conn::Closed => return Err("the tool host was shut down".to_owned()),
            Conn::Up {
                client,
                peer,
                epoch,
                ..
            } if !peer.is_transport_closed() => {
                return Ok((client.clone(), peer.clone(), *epoch, false));
            }
            Conn::Up { .. } => true,
            Conn::Down => false,
        };
        let old = std::mem::replace(&mut *conn, Conn::Down);
        self.retire(old);
        match self.connect().await {
            Ok((client, server_task, tools)) => {
                let peer = client.peer().clone();
                self.set_caps(&peer);
                let epoch = self.epochs.fetch_add(1, Ordering::SeqCst) + 1;
                let client = Arc::new(AsyncRwLock::new(client));
                *conn = Conn::Up {
                    client: client.clone(),
                    peer: peer.clone(),
                    epoch,
                    server_task,
                };
                self.set_tools(tools);
                self.set_problem(None);
                Ok((client, peer, epoch, silent))
            }
            Err(e) => {
                self.stderr.settled().await;
                let e = self.with_stderr(e);
                *conn = Conn::Down;
                self.set_problem(Some(e.clone()));
                Err(e)
            }
        }
    }

    /// Keep what the server declared; a change (resources appear, say)
    /// changes what the host offers.
    fn set_caps(&self, peer: &Peer<RoleClient>) {
        let caps = peer
            .peer_info()
            .map(|info| ServerCaps::of(&info.capabilities))
            .unwrap_or_default();
        let old = std::mem::replace(&mut *lrg_providers::sync::write(&self.caps), caps);
        if old != caps {
            self.changes.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn set_tools(&self, tools: Vec<Arc<RemoteTool>>) {
        let tools = Arc::new(tools);
        let changed = {
            let current = self.tools();
            current.len() != tools.len()
                || current
                    .iter()
                    .zip(tools.iter())
                    .any(|(a, b)| a.spec != b.spec)
        };
        *lrg_providers::sync::write(&self.tools) = tools;
        if changed {
            self.changes.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// Call `tool`; reconnects first when the server is down.
    pub(crate) async fn call(
        &self,
        tool: &str,
        args: JsonObject,
        timeout: Duration,
        cancel: &CancellationToken,
    ) -> CallOutcome {
        let (client, peer, epoch, restarted) = match self.connection().await {
            Ok(r) => r,
            Err(e) => {
                return CallOutcome::Failed(
                    ToolOutput::error(format!(
                        "The tool server `{}` is not available, so `{tool}` did not run.",
                        self.name
                    )),
                    format!("tool server `{}` could not be started: {e}", self.name),
                );
            }
        };
        // The connection may have taken a while; a stop in the meantime wins.
        if cancel.is_cancelled() {
            return CallOutcome::Done(not_started_output(tool));
        }
        let mut params = CallToolRequestParams::new(tool.to_owned()).with_arguments(args);
        let span = crate::otel::mcp_span("tools/call", Some(tool), self.transport());
        if let Some(traceparent) = crate::otel::traceparent_of(&span) {
            params
                .meta
                .get_or_insert_with(Default::default)
                .set_traceparent(traceparent);
        }
        // rmcp gives every request its own `_meta.progressToken`: the
        // request's handle says which, and the call is known by it.
        let mut running = self.link.start_call(link::current_caller());
        let sent = tracing::Instrument::instrument(
            peer.send_request_with_option(
                ClientRequest::CallToolRequest(CallToolRequest::new(params.clone())),
                PeerRequestOptions::no_options(),
            ),
            span.clone(),
        )
        .await;
        let result = match sent {
            Err(e) => Ok(Err(e)),
            Ok(handle) => {
                let request_id = handle.id.clone();
                running.bind(link::token_text(&handle.progress_token.0));
                let request = async move {
                    match handle.await_response().await {
                        Ok(ServerResult::CallToolResult(r)) => Ok(r),
                        // A 2026-07-28 server wants input first: rmcp's helper
                        // asks again, fulfilling each round through our handler.
                        Ok(ServerResult::InputRequiredResult(_)) => {
                            client.read().await.call_tool(params).await
                        }
                        Ok(_) => Err(ServiceError::UnexpectedResponse),
                        Err(e) => Err(e),
                    }
                };
                let result = waiting::wait_for_call(
                    &self.link,
                    tracing::Instrument::instrument(request, span.clone()),
                    &running.token,
                    timeout,
                    cancel,
                )
                .await;
                // Its last progress goes out before its result.
                self.link.settle(&running.token).await;
                drop(running);
                if let Err(cut) = &result {
                    let why = match cut {
                        Cut::Stopped => "the user stopped",
                        Cut::TimedOut => "the call timed out",
                    };
                    let cancelled =
                        CancelledNotificationParam::new(Some(request_id), Some(why.to_owned()));
                    if let Err(e) = peer.notify_cancelled(cancelled).await {
                        tracing::debug!(server = %self.name, error = %e, "telling the server a call was cancelled failed");
                    }
                }
                result
            }
        };
        match &result {
            Ok(Ok(r)) if r.is_error == Some(true) => crate::otel::record_error(&span, "tool_error"),
            Ok(Ok(_)) => {}
            Ok(Err(_)) => crate::otel::record_error(&span, "mcp_error"),
            Err(Cut::Stopped) => crate::otel::record_error(&span, "stopped"),
            Err(Cut::TimedOut) => crate::otel::record_error(&span, "timeout"),
        }
        drop(span);
        let restart_note = restarted.then(|| {
            format!(
                "tool server `{}` had stopped and was restarted before this call",
                self.name
            )
        });
        match result {
            Ok(Ok(r)) => {
                let mut out = output_from_mcp(r, &self.name);
                out.warning = restart_note;
                CallOutcome::Done(out)
            }
            Ok(Err(ServiceError::McpError(e))) if e.code.0 == super::capped::OVERSIZED => {
                // Our transport dropped the answer for its size, at once.
                let bytes = e
                    .data
                    .as_ref()
                    .and_then(|d| d.get("bytes"))
                    .and_then(Value::as_u64)
                    .unwrap_or(0);
                let message = super::capped::oversized_message(tool, bytes, self.max_result);
                let mut out = ToolOutput::error(message);
                out.warning = restart_note;
                CallOutcome::Done(out)
            }
            Ok(Err(ServiceError::McpError(e))) => {
                // The server answered with a protocol error: it is alive.
                let mut out = ToolOutput::error(format!("The tool `{tool}` failed: {}", e.message));
                out.warning = restart_note;
                CallOutcome::Done(out)
            }
            Ok(Err(ServiceError::TransportClosed)) => {
                self.stderr.settled().await;
                let why = self.with_stderr("the connection ended during the call".to_owned());
                self.mark_down(epoch, why.clone()).await;
                CallOutcome::Failed(
                    ToolOutput::error(format!(
                        "The tool server `{}` stopped while running `{tool}`; the call has no result. \
                         The server will be restarted on the next call.",
                        self.name
                    )),
                    format!(
                        "tool server `{}` stopped during `{tool}` and will be restarted on the next call: {why}",
                        self.name
                    ),
                )
            }
            Ok(Err(ServiceError::TransportSend(e))) => {
                self.stderr.settled().await;
                // A token refused mid-chat (revoked, its refresh refused).
                let why = if oauth::chain_needs_login(&e) {
                    self.needs_login()
                } else {
                    self.with_stderr(root_cause(&e))
                };
                self.mark_down(epoch, why.clone()).await;
                CallOutcome::Failed(
                    ToolOutput::error(format!(
                        "The tool server `{}` could not be reached for `{tool}`; the call has no result. \
                         It will be restarted on the next call.",
                        self.name
                    )),
                    format!(
                        "tool server `{}` could not be reached for `{tool}` and will be restarted on the next call: {why}",
                        self.name
                    ),
                )
            }
            Ok(Err(e)) => {
                let mut out = ToolOutput::error(format!("The tool `{tool}` failed: {e}"));
                out.warning = restart_note;
                CallOutcome::Done(out)
            }
            Err(Cut::Stopped) => {
                let mut out = ToolOutput::error(format!(
                    "`{tool}` was stopped by the user while it ran; the tool server was told to \
                     cancel it, and it has no result."
                ));
                out.warning = restart_note;
                CallOutcome::Done(out)
            }
            Err(Cut::TimedOut) => {
                let secs = timeout.as_secs_f64();
                self.mark_down(
                    epoch,
                    format!("a call to `{tool}` timed out after {secs} s"),
                )
                .await;
                CallOutcome::Failed(
                    ToolOutput::error(format!(
                        "The tool `{tool}` did not answer within {secs} s and was stopped; the call has no result."
                    )),
                    format!(
                        "tool server `{}` timed out on `{tool}` after {secs} s; it was stopped and will be restarted on the next call",
                        self.name
                    ),
                )
            }
        }
    }

    /// Take connection `epoch` down (if still current) and close it in the background.
    async fn mark_down(&self, epoch: u64, why: String) {
        let mut conn = self.conn.lock().await;
        let current = matches!(&*conn, Conn::Up { epoch: e, .. } if *e == epoch);
        if current {
            let old = std::mem::replace(&mut *conn, Conn::Down);
            self.retire(old);
            self.set_problem(Some(why));
        }
    }

    /// Close a replaced connection without making the caller wait.
    fn retire(&self, old: Conn) {
        if let Conn::Up {
            client,
            server_task,
            ..
        } = old
        {
            let name = self.name.clone();
            let handle = tokio::spawn(async move {
                close_client(&name, client, server_task).await;
            });
            if let Ok(mut c) = self.closing.lock() {
                c.retain(|h| !h.is_finished());
                c.push(handle);
            }
        }
    }

    /// Close the connection for good and wait for the server to exit.
    pub(crate) async fn shutdown(&self) {
        let old = {
            let mut conn = self.conn.lock().await;
            std::mem::replace(&mut *conn, Conn::Closed)
        };
        if let Conn::Up {
            client,
            server_task,
            ..
        } = old
        {
            close_client(&self.name, client, server_task).await;
        }
        let pending: Vec<JoinHandle<()>> = match self.closing.lock() {
            Ok(mut c) => c.drain(..).collect(),
            Err(_) => Vec::new(),
        };
        for h in pending {
            let _ = h.await;
        }
        self.set_problem(Some("shut down".to_owned()));
    }

    async fn connect(
        &self,
    ) -> Result<(Client, Option<JoinHandle<()>>, Vec<Arc<RemoteTool>>), String> {
        let attempt = async {
            let (client, task) = match &self.connector {
                Connector::Config(McpServerConfig::Stdio(cfg)) => {
                    (self.connect_stdio(cfg).await?, None)
                }
                Connector::Config(McpServerConfig::Http(cfg)) => {
                    (self.connect_http(cfg).await?, None)
                }
                Connector::InProcess(start) => {
                    let (client_end, server_end) = in_process::pair();
                    let task = tokio::spawn(start(server_end));
                    match self.client().serve(client_end).await {
                        Ok(c) => (c, Some(task)),
                        Err(e) => {
                            task.abort();
                            return Err(format!("the in-process server did not initialize: {e}"));
                        }
                    }
                }
            };
            let tools = match client.peer().list_all_tools().await {
                Ok(t) => t,
                Err(e) => {
                    close_client(&self.name, Arc::new(AsyncRwLock::new(client)), task).await;
                    return Err(format!("listing its tools failed: {e}"));
                }
            };
            let tools = tools
                .into_iter()
                .map(|t| Arc::new(remote_tool(t)))
                .collect();
            Ok((client, task, tools))
        };
        let attempt = tracing::Instrument::instrument(
            attempt,
            crate::otel::mcp_span("initialize", None, self.transport()),
        );
        match tokio::time::timeout(self.connect_timeout, attempt).await {
            Ok(r) => r,
            Err(_) => Err(format!(
                "it did not finish starting within {} s",
                self.connect_timeout.as_secs_f64()
            )),
        }
    }

    /// Connect over streamable HTTP, with its stored OAuth tokens when it
    /// has any; a server that wants a login gets the message saying how.
    async fn connect_http(&self, cfg: &HttpServerConfig) -> Result<Client, String> {
        let needs_login = self.needs_login();
        let manager = match &self.tokens {
            Some(store) => {
                oauth::authorized_manager(cfg, store, self.refreshing.clone(), &needs_login).await?
            }
            None => None,
        };
        connect_http(self.client(), cfg, self.line_cap(), manager, &needs_login).await
    }

    /// What [`Self::problem`] says of a server that wants an OAuth login.
    fn needs_login(&self) -> String {
        match &self.tokens {
            Some(store) => format!("needs login: {}", store.login_hint(&self.name)),
            None => "needs login: it asks for an OAuth login, and this host keeps no tokens \
                     (ToolHost::set_token_store)"
                .to_owned(),
        }
    }

    async fn connect_stdio(&self, cfg: &StdioServerConfig) -> Result<Client, String> {
        let (transport, stderr) = child::spawn(cfg, self.line_cap())?;
        if let Some(stderr) = stderr {
            self.stderr.follow(&self.name, stderr);
        }
        self.client()
            .serve(transport)
            .await
            .map_err(|e| format!("MCP initialization failed: {e}"))
    }

    /// How the server is reached, for its spans.
    fn transport(&self) -> crate::otel::McpTransport {
        match &self.connector {
            Connector::Config(McpServerConfig::Stdio(_)) => crate::otel::McpTransport::Pipe,
            Connector::Config(McpServerConfig::Http(_)) => crate::otel::McpTransport::Tcp,
            Connector::InProcess(_) => crate::otel::McpTransport::InProcess,
        }
    }

    /// The largest message read from the server. The JSON of a result
    /// escapes its text (quotes, newlines, non-ASCII as `\u` escapes in some
    /// servers): twice the result cap, and the exact cap is checked on what
    /// it decodes to.
    fn line_cap(&self) -> usize {
        self.max_result.saturating_mul(2).saturating_add(64 * 1024)
    }

    /// `message`, followed by what a child process wrote to stderr last.
    fn with_stderr(&self, message: String) -> String {
        match self.connector {
            Connector::Config(McpServerConfig::Stdio(_)) => self.stderr.append_to(message),
            _ => message,
        }
    }
}

/// The innermost cause of an error: what a person can act on ("Connection
/// refused", "Broken pipe"), without the transport's type names.
fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut current = e;
    while let Some(next) = current.source() {
        current = next;
    }
    current.to_string()
}

/// The result of a call that a stop prevented from starting.
pub(crate) fn not_started_output(tool: &str) -> ToolOutput {
    ToolOutput::error(format!(
        "`{tool}` was not run: the user stopped before it started."
    ))
}

async fn connect_http(
    client: LrgClient,
    cfg: &HttpServerConfig,
    max_event: usize,
    auth: Option<rmcp::transport::auth::AuthorizationManager>,
    needs_login: &str,
) -> Result<Client, String> {
    let mut headers = HashMap::new();
    for (k, v) in &cfg.headers {
        let name = axum::http::HeaderName::from_bytes(k.as_bytes())
            .map_err(|_| format!("\"{k}\" is not a valid HTTP header name"))?;
        // Never echo the value: it is likely a token.
        let value = axum::http::HeaderValue::from_str(v).map_err(|_| {
            format!("the value of header \"{k}\" is not valid in HTTP (value not shown)")
        })?;
        headers.insert(name, value);
    }
    let mut config =
        StreamableHttpClientTransportConfig::with_uri(cfg.url.as_str()).custom_headers(headers);
    // rmcp's own limit (16 MiB) stays unless the result cap asks for more.
    config.max_sse_event_size = config.max_sse_event_size.max(max_event);
    // rmcp builds its own reqwest client, which needs a TLS provider installed.
    lrg_providers::transport::ensure_tls_provider();
    let served = match auth {
        // The manager is asked for a token before each request: refreshed
        // shortly before it expires, and once more after a 401.
        Some(manager) => {
            #[cfg(feature = "otel")]
            let http = crate::otel::mcp_http::TracedHttp::new()?;
            #[cfg(not(feature = "otel"))]
            let http = reqwest::Client::builder()
                // As rmcp's own client: no idle pool (delayed-ACK stalls). No
                // redirects: the bearer token stays with the configured host.
                .pool_max_idle_per_host(0)
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .map_err(|e| format!("cannot build the HTTP client: {e}"))?;
            let http = rmcp::transport::auth::AuthClient::new(http, manager);
            client
                .serve(StreamableHttpClientTransport::with_client(http, config))
                .await
        }
        None => {
            // With `otel`, a client that sends each call's `traceparent` header.
            #[cfg(feature = "otel")]
            let transport = StreamableHttpClientTransport::with_client(
                crate::otel::mcp_http::TracedHttp::new()?,
                config,
            );
            #[cfg(not(feature = "otel"))]
            let transport = StreamableHttpClientTransport::from_config(config);
            client.serve(transport).await
        }
    };
    served.map_err(|e| {
        if oauth::needs_login_in(&e) {
            needs_login.to_owned()
        } else {
            format!("cannot connect to {}: {e}", cfg.url)
        }
    })
}

async fn close_client(name: &str, client: SharedClient, server_task: Option<JoinHandle<()>>) {
    // Calls still running on it hold it for reading: its service is
    // cancelled first, so they end (the transport is gone), and then it
    // is closed as it exits.
    if let Ok(c) = client.try_read() {
        c.cancellation_token().cancel();
    } else if let Ok(c) = tokio::time::timeout(CLOSE_TIMEOUT, client.read()).await {
        c.cancellation_token().cancel();
    }
    match tokio::time::timeout(CLOSE_TIMEOUT, client.write()).await {
        Ok(mut client) => match client.close_with_timeout(CLOSE_TIMEOUT).await {
            Ok(Some(_)) => {}
            Ok(None) => tracing::warn!(server = name, "tool server did not close in time"),
            Err(e) => tracing::warn!(server = name, error = %e, "closing tool server failed"),
        },
        Err(_) => tracing::warn!(server = name, "tool server did not close in time"),
    }
    if let Some(task) = server_task {
        task.abort();
        let _ = task.await;
    }
}

fn remote_tool(t: rmcp::model::Tool) -> RemoteTool {
    let name = t.name.to_string();
    let input_schema = Value::Object((*t.input_schema).clone());
    let annotations = t
        .annotations
        .as_ref()
        .map(|a| ToolAnnotations {
            title: a.title.clone(),
            read_only_hint: a.read_only_hint,
            destructive_hint: a.destructive_hint,
            idempotent_hint: a.idempotent_hint,
            open_world_hint: a.open_world_hint,
        })
        .unwrap_or_default();
    let annotations = ToolAnnotations {
        title: annotations.title.clone().or_else(|| t.title.clone()),
        ..annotations
    };
    let description = t
        .description
        .as_deref()
        .map(str::to_owned)
        .or_else(|| t.title.clone())
        .unwrap_or_default();
    let check = ArgumentCheck::new(&name, &input_schema);
    let output_schema = t
        .output_schema
        .as_ref()
        .map(|s| Value::Object((**s).clone()));
    let output = output_schema
        .as_ref()
        .and_then(|s| OutputCheck::new(&name, s));
    RemoteTool {
        spec: ToolSpec {
            name: name.clone(),
            description,
            input_schema,
            annotations,
            output_schema,
        },
        name,
        check,
        output,
    }
}
