//! Tools the client runs: the app's own front end carries them out (show a
//! map, navigate, ask for a file) and sends the result back.
//!
//! [`ToolHost::add_client_tool`] offers one to the model and hands the app
//! a [`ClientCalls`] stream; each [`ClientCall`] is answered with
//! [`ChatSession::submit_tool_result`](crate::ChatSession::submit_tool_result).
//! Its `tool_call` event says `runs_on: "client"` (so a web page can answer
//! over HTTP instead: `POST …/tool_results/{call_id}`). A call that gets no
//! answer within [`SessionConfig::client_tool_timeout`](crate::SessionConfig::client_tool_timeout)
//! gets an error result; a stop cancels the calls that wait.
//!
//! A tool marked to end the turn ([`ToolHost::set_ends_turn`]; the OpenAI
//! Agents SDK's "stop at tools") runs, and then the message ends with its
//! result as the outcome, with no further model turn.

use std::pin::Pin;
use std::task::{Context, Poll};

use lrg_providers::ToolSpec;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::mpsc;

use super::host::{AddToolError, ToolHost};

/// A call to a client tool, for the app to carry out.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClientCall {
    /// The call's id: answer with it.
    pub call_id: String,
    /// The tool.
    pub tool: String,
    /// The arguments, checked against the tool's schema.
    pub arguments: Value,
}

/// A client tool as an app declares it for a chat it opens over HTTP
/// ([`crate::http::ChatSpec::client_tools`]).
#[derive(Debug, Clone, PartialEq)]
pub struct ClientToolSpec {
    /// The tool as offered to the model.
    pub spec: ToolSpec,
    /// Whether a call to it ends the message (see [`ToolHost::set_ends_turn`]).
    pub ends_turn: bool,
}

/// Where a tool runs, as a `tool_call` event says it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunsOn {
    /// In this process (a Rust function, an MCP server).
    #[default]
    Server,
    /// In the app's front end, which sends the result back.
    Client,
}

impl RunsOn {
    /// Whether it is [`RunsOn::Server`] (left out of events).
    pub fn is_server(&self) -> bool {
        *self == RunsOn::Server
    }
}

/// The calls to one client tool, as they come (see the [module
/// docs](self)). Ends when the tool host is dropped.
#[derive(Debug)]
pub struct ClientCalls(mpsc::UnboundedReceiver<ClientCall>);

impl ClientCalls {
    /// The next call, or `None` once no more can come.
    pub async fn next(&mut self) -> Option<ClientCall> {
        self.0.recv().await
    }
}

impl futures::Stream for ClientCalls {
    type Item = ClientCall;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<ClientCall>> {
        self.0.poll_recv(cx)
    }
}

/// A client tool as the host keeps it.
#[derive(Debug, Clone)]
pub(super) struct ClientTool {
    pub(super) spec: ToolSpec,
    pub(super) calls: mpsc::UnboundedSender<ClientCall>,
}

impl ToolHost {
    /// Offer `spec` as a tool the app runs itself (see the [module
    /// docs](self)): the calls to it come on the stream returned. Its name
    /// follows the same rules as a Rust tool's, and comes before the MCP
    /// servers' in the naming order.
    pub fn add_client_tool(&self, spec: ToolSpec) -> Result<ClientCalls, AddToolError> {
        let (sender, receiver) = mpsc::unbounded_channel();
        self.add_client(ClientTool {
            spec,
            calls: sender,
        })?;
        Ok(ClientCalls(receiver))
    }
}
