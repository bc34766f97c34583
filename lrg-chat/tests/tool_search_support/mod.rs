//! A generated MCP server with 300 tools (30 subjects × 10 actions), run in
//! process, and 50 tasks in plain words, each labelled with the tool that
//! does it: the fixture of the tool-search tests and bench.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool, ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::json;

#[path = "catalog.rs"]
mod catalog;
pub use catalog::*;

/// The in-process MCP server offering [`catalog`]; it counts the calls it
/// answers.
#[derive(Clone, Default)]
pub struct ManyTools {
    /// Calls answered.
    pub calls: Arc<AtomicUsize>,
}

impl ServerHandler for ManyTools {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let tools = catalog()
            .into_iter()
            .map(|(name, description, read_only)| {
                let schema = json!({
                    "type": "object",
                    "properties": {
                        "id": {"type": "string", "description": "Which one: its id or name."},
                        "text": {"type": "string", "description": "Words to search for, or the new content."}
                    }
                });
                let serde_json::Value::Object(schema) = schema else {
                    unreachable!()
                };
                let mut tool = Tool::new(name, description, schema);
                tool.annotations = Some(ToolAnnotations::from_raw(
                    None,
                    Some(read_only),
                    Some(!read_only),
                    None,
                    None,
                ));
                tool
            })
            .collect();
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let text = format!("{} done", request.name);
        Ok(CallToolResult::success(vec![ContentBlock::text(text)]).into())
    }
}
