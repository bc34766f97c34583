//! The MCP server of lrg-chat's tests, written with rmcp: served over stdio
//! by the `lrg-test-mcp` binary, and in-process or over streamable HTTP by
//! the tests themselves (`#[path = "bin/test_server.rs"] mod test_server;`).
//!
//! Tools: `echo` (read), `write` (change), `delete_items` (no annotations:
//! destructive; takes an `ids` array), `image` (a 1x1 PNG), `crash` (exits
//! the process), `slow` (sleeps), `pid` (its process id), `notes.read` (a
//! name with a dot, to test sanitizing), `fail` (an isError result), `grow`
//! (lists `extra` from then on and sends `notifications/tools/list_changed`).
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    CallToolResult, ContentBlock, ListToolsResult, PaginatedRequestParams, ServerCapabilities,
    ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, schemars, tool, tool_handler, tool_router};

/// A 1x1 transparent PNG.
pub const TINY_PNG_BASE64: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==";

#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
pub struct EchoArgs {
    /// The text to send back.
    pub text: String,
}

#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
pub struct WriteArgs {
    /// Which note to write.
    pub key: String,
    /// Its new text.
    pub value: String,
}

#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
pub struct DeleteArgs {
    /// The items to delete.
    pub ids: Vec<u64>,
    /// Delete for good instead of moving to the trash.
    #[serde(default)]
    pub mode: Option<DeleteMode>,
}

#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum DeleteMode {
    Trash,
    Purge,
}

#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
pub struct SlowArgs {
    /// How long to sleep, in seconds.
    pub seconds: f64,
}

#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
pub struct NoArgs {}

/// The test server. `can_exit` is false in-process: `crash` must not end
/// the test binary.
#[derive(Clone)]
pub struct TestServer {
    tool_router: ToolRouter<Self>,
    notes: Arc<Mutex<BTreeMap<String, String>>>,
    can_exit: bool,
    /// Whether `grow` was called: only then is `extra` listed.
    grown: Arc<AtomicBool>,
}

impl TestServer {
    /// The server as the stdio binary runs it.
    pub fn standalone() -> Self {
        Self {
            tool_router: Self::tool_router(),
            notes: Default::default(),
            can_exit: true,
            grown: Default::default(),
        }
    }

    /// The server for in-process and HTTP use.
    pub fn embedded() -> Self {
        Self {
            tool_router: Self::tool_router(),
            notes: Default::default(),
            can_exit: false,
            grown: Default::default(),
        }
    }
}

#[tool_router]
impl TestServer {
    #[tool(description = "Send the text back", annotations(read_only_hint = true))]
    fn echo(&self, Parameters(args): Parameters<EchoArgs>) -> String {
        args.text
    }

    #[tool(
        description = "Write a note",
        annotations(read_only_hint = false, destructive_hint = false)
    )]
    fn write(&self, Parameters(args): Parameters<WriteArgs>) -> String {
        if let Ok(mut notes) = self.notes.lock() {
            notes.insert(args.key.clone(), args.value);
        }
        format!("wrote {}", args.key)
    }

    #[tool(
        name = "notes.read",
        description = "Read a note",
        annotations(read_only_hint = true)
    )]
    fn notes_read(&self, Parameters(args): Parameters<EchoArgs>) -> String {
        self.notes
            .lock()
            .ok()
            .and_then(|n| n.get(&args.text).cloned())
            .unwrap_or_else(|| format!("no note {}", args.text))
    }

    #[tool(description = "Delete items by id")]
    fn delete_items(&self, Parameters(args): Parameters<DeleteArgs>) -> String {
        let how = match args.mode {
            Some(DeleteMode::Purge) => "purged",
            _ => "trashed",
        };
        format!("{how} {} items", args.ids.len())
    }

    #[tool(description = "A tiny picture", annotations(read_only_hint = true))]
    fn image(&self, Parameters(_): Parameters<NoArgs>) -> CallToolResult {
        CallToolResult::success(vec![
            ContentBlock::text("here is the picture"),
            ContentBlock::image(TINY_PNG_BASE64, "image/png"),
        ])
    }

    #[tool(description = "Exit the server process at once")]
    fn crash(&self, Parameters(_): Parameters<NoArgs>) -> Result<String, ErrorData> {
        if !self.can_exit {
            return Err(ErrorData::invalid_request(
                "crash is only available over stdio",
                None,
            ));
        }
        eprintln!("lrg-test-mcp: crashing on purpose");
        std::process::exit(3);
    }

    #[tool(description = "Sleep, then answer", annotations(read_only_hint = true))]
    async fn slow(&self, Parameters(args): Parameters<SlowArgs>) -> String {
        tokio::time::sleep(Duration::from_secs_f64(args.seconds.clamp(0.0, 3600.0))).await;
        format!("slept {} s", args.seconds)
    }

    #[tool(
        description = "The server's process id",
        annotations(read_only_hint = true)
    )]
    fn pid(&self, Parameters(_): Parameters<NoArgs>) -> String {
        std::process::id().to_string()
    }

    #[tool(
        description = "Offer one more tool (`extra`) and tell the client",
        annotations(read_only_hint = false, destructive_hint = false)
    )]
    async fn grow(
        &self,
        Parameters(_): Parameters<NoArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> String {
        self.grown.store(true, Ordering::SeqCst);
        match ctx.peer.notify_tool_list_changed().await {
            Ok(()) => "grown".to_owned(),
            Err(e) => format!("could not notify: {e}"),
        }
    }

    #[tool(
        description = "Listed only after `grow`",
        annotations(read_only_hint = true)
    )]
    fn extra(&self, Parameters(_): Parameters<NoArgs>) -> String {
        "extra tool".to_owned()
    }

    #[tool(
        description = "Fail as a tool (isError)",
        annotations(read_only_hint = true)
    )]
    fn fail(&self, Parameters(args): Parameters<EchoArgs>) -> CallToolResult {
        CallToolResult::error(vec![ContentBlock::text(format!("failed: {}", args.text))])
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for TestServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .build(),
        )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let grown = self.grown.load(Ordering::SeqCst);
        let tools = self
            .tool_router
            .list_all()
            .into_iter()
            .filter(|t| grown || t.name != "extra")
            .collect();
        Ok(ListToolsResult::with_all_items(tools))
    }
}
