//! `lrg demo-server`: a small MCP server over stdio, so lrg can be tried
//! offline with a real tool server (`--mcp 'lrg demo-server'`), and the
//! CLI's tests have one. It keeps a few notes in memory; its tools cover
//! the three permission classes: read, change and destructive.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{ServerCapabilities, ServerConfig};
use rmcp::{ServerHandler, ServiceExt as _, schemars, tool, tool_handler, tool_router};

use crate::exit::{CliError, Exit};

#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
struct NoArgs {}

#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
struct ReadArgs {
    /// The note's id.
    id: u64,
}

#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
struct AddArgs {
    /// The note's text.
    text: String,
}

#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
struct DeleteArgs {
    /// The ids of the notes to delete.
    ids: Vec<u64>,
}

#[derive(Clone)]
struct Notes {
    tool_router: ToolRouter<Self>,
    notes: Arc<Mutex<BTreeMap<u64, String>>>,
}

impl Notes {
    fn new() -> Self {
        let seed = [
            (1, "Buy oat milk and coffee beans"),
            (2, "Call the plumber about the kitchen sink"),
            (3, "Book train tickets for Friday"),
        ];
        let notes = seed
            .into_iter()
            .map(|(id, t)| (id, t.to_string()))
            .collect();
        Self {
            tool_router: Self::tool_router(),
            notes: Arc::new(Mutex::new(notes)),
        }
    }

    fn notes(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, String>> {
        lrg_providers::sync::lock(&self.notes)
    }
}

#[tool_router]
impl Notes {
    #[tool(
        description = "List every note with its id",
        annotations(read_only_hint = true)
    )]
    fn list_notes(&self, Parameters(_): Parameters<NoArgs>) -> String {
        let notes = self.notes();
        if notes.is_empty() {
            return "no notes".to_string();
        }
        notes
            .iter()
            .map(|(id, text)| format!("{id}: {text}"))
            .collect::<Vec<_>>()
            .join("\n")
    }

    #[tool(description = "Read one note", annotations(read_only_hint = true))]
    fn read_note(&self, Parameters(args): Parameters<ReadArgs>) -> String {
        self.notes()
            .get(&args.id)
            .cloned()
            .unwrap_or_else(|| format!("there is no note {}", args.id))
    }

    #[tool(
        description = "Add a note",
        annotations(read_only_hint = false, destructive_hint = false)
    )]
    fn add_note(&self, Parameters(args): Parameters<AddArgs>) -> String {
        let mut notes = self.notes();
        let id = notes.keys().next_back().map_or(1, |last| last + 1);
        notes.insert(id, args.text);
        format!("added note {id}")
    }

    #[tool(
        description = "Delete notes by id, for good",
        annotations(read_only_hint = false, destructive_hint = true)
    )]
    fn delete_notes(&self, Parameters(args): Parameters<DeleteArgs>) -> String {
        let mut notes = self.notes();
        let deleted = args
            .ids
            .iter()
            .filter(|id| notes.remove(id).is_some())
            .count();
        format!("deleted {deleted} note(s)")
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for Notes {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }
}

/// Serve the demo tools on stdin/stdout until the client goes away.
pub async fn serve() -> Result<Exit, CliError> {
    let server = Notes::new()
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|e| {
            CliError::failed(anyhow::anyhow!(
                "demo server: MCP initialization failed: {e}"
            ))
        })?;
    server
        .waiting()
        .await
        .map_err(|e| CliError::failed(anyhow::anyhow!("demo server: {e}")))?;
    Ok(Exit::Replied)
}
