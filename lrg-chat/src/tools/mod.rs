//! Tools the model can call: the [`Tools`] trait the session talks to, the
//! [`ToolClass`] that permissions are decided on, and [`ToolHost`], which
//! gathers tools from three sources:
//!
//! - MCP servers, from the configuration users already have
//!   ([`McpConfig`]: `{"mcpServers": {"name": {"command", "args", "env",
//!   "cwd"} | {"url", "headers"}}}`): child processes over stdio, and
//!   streamable-HTTP servers;
//! - rmcp servers running in this process ([`ToolHost::add_in_process`]);
//! - async Rust functions with a `schemars`-derived input schema
//!   ([`ToolHost::add_fn`]).
//!
//! # Names
//!
//! Offered names always match `^[a-zA-Z0-9_-]{1,64}$`, what every API
//! accepts: other characters in an MCP tool's name become `_`, and long names
//! are cut to 64 characters.
//!
//! When two sources offer the same name, precedence decides: **Rust
//! functions first, then MCP servers in the order they were added** (a
//! config file's servers in file order). The first keeps the bare name; a
//! later one is offered as `<server>__<tool>`; should that be taken too,
//! `_2`, `_3`, ... is appended. The rule is deterministic: the same sources
//! in the same order give the same names.
//!
//! # Calls
//!
//! Arguments are checked against the tool's input schema first; a mismatch
//! returns an error result that says what was wrong and repeats what the
//! schema expects. A server that dies or does not answer within
//! [`ToolHostOptions::call_timeout`] gives an error result plus a
//! [`ToolOutput::warning`], and is restarted on the next call. A call whose
//! cancel token is set before it starts does not start; a running call
//! finishes, except an MCP call still running 2 s after the stop: it is
//! cancelled (the server gets `notifications/cancelled`) and its result
//! says so.
//!
//! Tool results keep text as text and images as [`Part::Image`]; audio and
//! binary resources are described in a line of text. Resource links and
//! embedded resources are also kept typed ([`ToolOutput::resources`]). A
//! tool with an output schema ([`ToolSpec::output_schema`]) has its
//! `structuredContent` checked against it (a mismatch is an error result
//! saying what failed) and kept whole in [`ToolOutput::structured`]; the
//! model gets it as compact JSON unless the text already is that JSON.
//!
//! # Resources and prompts
//!
//! When any server declares resources, the model is offered three
//! read-class tools of lrg's own: `list_mcp_resources {server?, cursor?}`,
//! `list_mcp_resource_templates {server?}` and `read_mcp_resource {server,
//! uri}`, their output capped and saying so. The library reaches the same
//! through [`ToolHost::resources`], [`ToolHost::resource_templates`],
//! [`ToolHost::read_resource`] and [`ToolHost::subscribe_resource`] (whose
//! updates a session publishes as `resource_updated`), and servers' prompts
//! through [`ToolHost::prompts`], [`ToolHost::get_prompt`] and
//! [`ToolHost::complete_prompt_argument`].

use futures::future::BoxFuture;
use lrg_providers::{Part, ToolAnnotations, ToolSpec};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

mod capped;
pub mod client;
pub(crate) use capped::size as byte_size;
mod child;
pub mod config;
mod content;
pub mod elicitation;
mod host;
mod in_process;
mod inherit_env;
mod mcp;
pub mod names;
mod policy;
mod rust_fn;
pub mod search;
mod validate;

pub use config::{
    HttpServerConfig, InheritEnv, McpConfig, McpConfigError, McpServerConfig, StdioServerConfig,
};
pub use content::ResourceRef;
pub use host::{
    AddToolError, DEFAULT_MAX_RESULT_BYTES, ServerFailure, ToolHost, ToolHostOptions, ToolInfo,
    ToolSource,
};
pub(crate) use mcp::link as mcp_link;
pub use mcp::oauth;
pub use mcp::roots::Root;
pub(crate) use mcp::sampling as mcp_sampling;
pub use mcp::{
    ExpandedPrompt, Listing, McpPrompt, McpPromptArgument, McpRequestError, McpResource,
    McpResourceTemplate, Page, ResourceBody, ResourceContents, ResourceUpdate,
};
pub use policy::{ServerPolicy, ToolPolicy, Trust};
pub use rust_fn::NoArgs;
pub(crate) use validate::{ArgumentCheck, teach_runtime_error};
pub use validate::{TEACH_CAP, describe_arguments};

/// What a tool may do to the world, from its MCP annotations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolClass {
    /// `readOnlyHint: true`: changes nothing.
    Read,
    /// Not read-only and `destructiveHint: false`: changes, but destroys nothing.
    Change,
    /// Anything else, including a tool with no annotations at all.
    Destructive,
}

impl ToolClass {
    /// Classify a tool by its annotations; no annotations means destructive.
    pub fn from_annotations(a: &ToolAnnotations) -> Self {
        if a.read_only_hint == Some(true) {
            ToolClass::Read
        } else if a.destructive_hint == Some(false) {
            ToolClass::Change
        } else {
            ToolClass::Destructive
        }
    }
}

/// What one tool call produced.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutput {
    /// Text and images the tool returned (or the error text).
    pub parts: Vec<Part>,
    /// Whether the call failed.
    pub is_error: bool,
    /// Something the person should be told about besides the result (a tool
    /// server died and will be restarted, ...). Becomes a `warning` event.
    pub warning: Option<String>,
    /// The tool's structured result (MCP `structuredContent`), when it gave
    /// one; checked against its output schema. The model gets it as JSON
    /// text among `parts` (unless the text already is that JSON); front
    /// ends get it whole in `tool_done`.
    pub structured: Option<Value>,
    /// The resources the result links to or embeds (MCP `resource_link`
    /// and `resource` content), for front ends to show; the model reads
    /// them as text parts, with how to read a link.
    pub resources: Vec<ResourceRef>,
}

impl ToolOutput {
    /// A successful text result.
    pub fn text(text: impl Into<String>) -> Self {
        Self {
            parts: vec![Part::text(text)],
            is_error: false,
            warning: None,
            structured: None,
            resources: Vec::new(),
        }
    }

    /// A failed call with a message for the model.
    pub fn error(text: impl Into<String>) -> Self {
        Self {
            parts: vec![Part::text(text)],
            is_error: true,
            warning: None,
            structured: None,
            resources: Vec::new(),
        }
    }
}

impl From<String> for ToolOutput {
    fn from(text: String) -> Self {
        ToolOutput::text(text)
    }
}

impl From<&str> for ToolOutput {
    fn from(text: &str) -> Self {
        ToolOutput::text(text)
    }
}

impl From<Vec<Part>> for ToolOutput {
    fn from(parts: Vec<Part>) -> Self {
        Self {
            parts,
            is_error: false,
            warning: None,
            structured: None,
            resources: Vec::new(),
        }
    }
}

/// A failure to reach the tools at all (listing failed).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("tools unavailable: {0}")]
pub struct ToolsError(pub String);

/// The tools a session offers: listing and calling.
///
/// The session never calls a tool that is not in the last `list()`; `call`
/// never fails outright: every failure (unknown tool, invalid arguments, a
/// crashed server, a timeout) is an error [`ToolOutput`] the model can read.
pub trait Tools: Send + Sync {
    /// Every tool, as offered to models (names unique).
    fn list(&self) -> BoxFuture<'_, Result<Vec<ToolSpec>, ToolsError>>;

    /// The same list, shared: what the session asks for before every model
    /// turn. An implementation that keeps its list (as [`ToolHost`] does,
    /// until a source's tools change) hands out the one copy instead of a
    /// deep copy of every schema; the default copies [`Tools::list`].
    fn list_shared(&self) -> BoxFuture<'_, Result<std::sync::Arc<[ToolSpec]>, ToolsError>> {
        Box::pin(async move { self.list().await.map(std::sync::Arc::from) })
    }

    /// Call `name` with `arguments`. `cancel` is a hint: a running tool is
    /// allowed to finish, but one not yet started should not start.
    fn call<'a>(
        &'a self,
        name: &'a str,
        arguments: Value,
        cancel: CancellationToken,
    ) -> BoxFuture<'a, ToolOutput>;

    /// What the tools' own configuration says of `name` (an `mcpServers`
    /// entry's `trust`, `autoApprove` and `tools.always`; see
    /// [`ToolPolicy`]). Default: nothing.
    fn policy(&self, name: &str) -> ToolPolicy {
        let _ = name;
        ToolPolicy::default()
    }

    /// The updates of resources subscribed to
    /// ([`ToolHost::subscribe_resource`]), from now on; a session turns
    /// each into a `resource_updated` event. Default: none.
    fn resource_updates(&self) -> Option<tokio::sync::broadcast::Receiver<ResourceUpdate>> {
        None
    }

    /// Hand a call of a client tool ([`ToolPolicy::runs_on`] is
    /// [`client::RunsOn::Client`]) to the app's stream; whether someone
    /// took it. Default: no one.
    fn client_call(&self, call: &client::ClientCall) -> bool {
        let _ = call;
        false
    }
}

/// What the model is told when it calls a tool that does not exist: the one
/// wording, used by the session loop and by every [`Tools`] of this crate.
pub(crate) fn unknown_tool_message(name: &str, available: &[&str]) -> String {
    // A long list helps no one: the model was offered these in the request.
    const SHOWN: usize = 50;
    if available.is_empty() {
        return format!("There is no tool named `{name}`, and no tools are available.");
    }
    let mut list = available[..available.len().min(SHOWN)].join(", ");
    if available.len() > SHOWN {
        list.push_str(", ...");
    }
    format!("There is no tool named `{name}`. Available tools: {list}.")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_from_annotations() {
        let mut a = ToolAnnotations::default();
        assert_eq!(ToolClass::from_annotations(&a), ToolClass::Destructive);
        a.destructive_hint = Some(false);
        assert_eq!(ToolClass::from_annotations(&a), ToolClass::Change);
        a.read_only_hint = Some(true);
        assert_eq!(ToolClass::from_annotations(&a), ToolClass::Read);
        a.read_only_hint = Some(false);
        a.destructive_hint = Some(true);
        assert_eq!(ToolClass::from_annotations(&a), ToolClass::Destructive);
    }
}
