//! Calls to tools the app's front end runs ([`crate::tools::client`]): the
//! session hands the call out and waits for
//! [`ChatSession::submit_tool_result`], a timeout, or a stop.

use lrg_providers::ToolCall;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use super::{ChatSession, SessionError, Shared};
use crate::tools::ToolOutput;
use crate::tools::client::ClientCall;

/// Wait for the app's answer to `call`.
pub(super) async fn wait(
    shared: &Shared,
    call: &ToolCall,
    cancel: &CancellationToken,
) -> ToolOutput {
    let (sender, receiver) = oneshot::channel();
    // Registered before the call is handed out, so an answer sent at once
    // finds it.
    shared.lock().client_waits.insert(call.id.clone(), sender);
    shared.tools.client_call(&ClientCall {
        call_id: call.id.clone(),
        tool: call.name.clone(),
        arguments: call.arguments.clone(),
    });
    let timeout = shared.config.client_tool_timeout;
    let answer = tokio::select! {
        biased;
        _ = cancel.cancelled() => Err("Not run: the user stopped before the app answered this call."),
        answer = receiver => answer.map_err(|_| "The app went away before answering this call."),
        _ = tokio::time::sleep(timeout) => Err("timeout"),
    };
    shared.lock().client_waits.remove(&call.id);
    match answer {
        Ok(output) => output,
        Err("timeout") => ToolOutput::error(format!(
            "The app did not answer this call within {} s; it did not run. Do not repeat it \
             unless the user asks.",
            timeout.as_secs_f64()
        )),
        Err(why) => ToolOutput::error(why),
    }
}

impl ChatSession {
    /// Answer the client-tool call `call_id` (see [`crate::tools::client`])
    /// with `output`. Refused when no such call waits (never made, answered
    /// already, timed out or stopped).
    pub fn submit_tool_result(
        &self,
        call_id: &str,
        output: ToolOutput,
    ) -> Result<(), SessionError> {
        let sender = self.shared.lock().client_waits.remove(call_id);
        match sender {
            Some(sender) => sender
                .send(output)
                .map_err(|_| SessionError::NoSuchClientCall(call_id.to_owned())),
            None => Err(SessionError::NoSuchClientCall(call_id.to_owned())),
        }
    }

    /// The client-tool calls waiting for the app's answer, by call id.
    pub fn pending_client_calls(&self) -> Vec<String> {
        self.shared.lock().client_waits.keys().cloned().collect()
    }
}
