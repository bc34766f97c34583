//! The transport between [`super::ToolHost`] and an in-process rmcp server:
//! the JSON-RPC messages themselves, handed over a pair of channels.
//!
//! Both ends still run rmcp's own services (handshake, request ids,
//! cancellation notifications, the server's handler dispatch), so the server
//! speaks MCP exactly as over stdio. What a byte pipe would add is left out:
//! serializing every message to a JSON line and parsing it back on the other
//! side, and the framing and buffer copies between: about a third of the
//! CPU time of a call when the pipe was a `tokio::io::duplex` (profiled).
//!
//! A message the client sends is, type for type, the message the server
//! receives (`TxJsonRpcMessage<RoleClient>` is `RxJsonRpcMessage<RoleServer>`),
//! so nothing is converted. When one end is dropped (its service stopped or
//! its task aborted), the other end's `receive` returns `None`, which rmcp
//! reports as the transport closing, as it would for a pipe at end of file.

use std::future::Future;

use rmcp::service::{RxJsonRpcMessage, ServiceRole, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::{RoleClient, RoleServer};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

/// The other end of the channel is gone: its service stopped.
#[derive(Debug, thiserror::Error)]
#[error("the in-process tool server's connection is closed")]
pub(crate) struct ChannelClosed;

/// One end of an in-process connection, for role `R`.
///
/// The channels are unbounded because rmcp bounds what reaches them: a
/// client's requests queue in its peer's bounded channel before its service
/// loop sends them, and a server's answers in its bounded sink proxy.
pub(crate) struct ChannelTransport<R: ServiceRole> {
    tx: UnboundedSender<TxJsonRpcMessage<R>>,
    rx: UnboundedReceiver<RxJsonRpcMessage<R>>,
}

/// The client's end of an in-process connection.
pub(crate) type ClientEnd = ChannelTransport<RoleClient>;
/// The server's end of an in-process connection.
pub(crate) type ServerEnd = ChannelTransport<RoleServer>;

/// A connected pair: what one end sends, the other receives.
pub(crate) fn pair() -> (ClientEnd, ServerEnd) {
    let (to_server, from_client) = unbounded_channel();
    let (to_client, from_server) = unbounded_channel();
    (
        ChannelTransport {
            tx: to_server,
            rx: from_server,
        },
        ChannelTransport {
            tx: to_client,
            rx: from_client,
        },
    )
}

impl<R: ServiceRole> Transport<R> for ChannelTransport<R> {
    type Error = ChannelClosed;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<R>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        // An unbounded send never waits, so the message is handed over now,
        // in the order rmcp's service loop sends them.
        std::future::ready(self.tx.send(item).map_err(|_| ChannelClosed))
    }

    fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<R>>> + Send {
        self.rx.recv()
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        // Refuse what the other end sends from now on; what it sent before
        // is dropped with this end.
        self.rx.close();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::AtomicU64;
    use std::time::Duration;

    use futures::FutureExt as _;
    use rmcp::handler::server::router::tool::ToolRouter;
    use rmcp::model::{ClientRequest, JsonRpcMessage, ServerCapabilities, ServerConfig};
    use rmcp::{ServerHandler, ServiceExt as _, tool, tool_handler, tool_router};
    use tokio_util::sync::CancellationToken;

    use super::*;
    use crate::tools::ToolOutput;
    use crate::tools::mcp::{CallOutcome, Connector, InProcessStart, McpServer};

    #[derive(Clone)]
    struct Small {
        tool_router: ToolRouter<Self>,
    }

    #[tool_router]
    impl Small {
        #[tool(description = "Answer")]
        fn hello(&self) -> String {
            "hello".to_owned()
        }

        #[tool(description = "Fail with a protocol error")]
        fn refuse(&self) -> Result<String, rmcp::ErrorData> {
            Err(rmcp::ErrorData::invalid_params("not today", None))
        }
    }

    #[tool_handler(router = self.tool_router)]
    impl ServerHandler for Small {
        fn get_info(&self) -> ServerConfig {
            ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
        }
    }

    /// The server's end, cut when a call to `hang_up` arrives: a server
    /// that goes away in the middle of a call (the server's service sees
    /// its input end, as a child process would see end of file).
    struct CutOnHangUp(Option<ServerEnd>);

    impl Transport<RoleServer> for CutOnHangUp {
        type Error = ChannelClosed;

        fn send(
            &mut self,
            item: TxJsonRpcMessage<RoleServer>,
        ) -> impl Future<Output = Result<(), ChannelClosed>> + Send + 'static {
            let sent = match &mut self.0 {
                Some(end) => end.tx.send(item).map_err(|_| ChannelClosed),
                None => Err(ChannelClosed),
            };
            std::future::ready(sent)
        }

        async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
            let message = self.0.as_mut()?.rx.recv().await?;
            let hang_up = matches!(&message, JsonRpcMessage::Request(r)
                if matches!(&r.request, ClientRequest::CallToolRequest(c) if c.params.name == "hang_up"));
            if hang_up {
                self.0 = None;
                return None;
            }
            Some(message)
        }

        async fn close(&mut self) -> Result<(), ChannelClosed> {
            self.0 = None;
            Ok(())
        }
    }

    /// An `McpServer` that starts a fresh `Small` on each connection, and
    /// hangs up on a call to `hang_up`.
    fn small_server() -> McpServer {
        let start: InProcessStart = Arc::new(|end: ServerEnd| {
            async move {
                let small = Small {
                    tool_router: Small::tool_router(),
                };
                if let Ok(running) = small.serve(CutOnHangUp(Some(end))).await {
                    let _ = running.waiting().await;
                }
            }
            .boxed()
        });
        McpServer::new(
            "small".to_owned(),
            Connector::InProcess(start),
            Arc::new(AtomicU64::new(0)),
            Duration::from_secs(10),
            crate::tools::DEFAULT_MAX_RESULT_BYTES,
            Default::default(),
            tokio::sync::broadcast::channel(16).0,
        )
    }

    async fn call(server: &McpServer, tool: &str) -> CallOutcome {
        let cancel = CancellationToken::new();
        let call = server.call(
            tool,
            serde_json::Map::new(),
            Duration::from_secs(10),
            &cancel,
        );
        tokio::time::timeout(Duration::from_secs(20), call)
            .await
            .expect("the call ended")
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_server_that_hangs_up_mid_call_fails_the_call_and_is_restarted() {
        let server = small_server();
        let CallOutcome::Done(out) = call(&server, "hello").await else {
            panic!("the first call failed");
        };
        assert_eq!(out, ToolOutput::text("hello"));

        let CallOutcome::Failed(out, warning) = call(&server, "hang_up").await else {
            panic!("a call the server hung up on succeeded");
        };
        assert!(out.is_error);
        assert!(
            warning.contains("stopped during `hang_up`")
                && warning.contains("the connection ended during the call"),
            "{warning}"
        );
        assert!(server.problem().is_some());

        // The next call connects to a fresh server.
        let CallOutcome::Done(out) = call(&server, "hello").await else {
            panic!("the call after the hang-up failed");
        };
        assert_eq!(out, ToolOutput::text("hello"));
        assert!(server.problem().is_none());
        server.shutdown().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_protocol_error_is_the_tools_error_and_the_server_stays_up() {
        let server = small_server();
        let CallOutcome::Done(out) = call(&server, "refuse").await else {
            panic!("a protocol error took the server down");
        };
        assert_eq!(
            out,
            ToolOutput::error("The tool `refuse` failed: not today")
        );
        assert!(server.problem().is_none());
        server.shutdown().await;
    }

    #[tokio::test]
    async fn each_end_sees_the_other_go() {
        let (mut client, server) = pair();
        drop(server);
        assert!(
            Transport::<RoleClient>::receive(&mut client)
                .await
                .is_none()
        );
        let ping = rmcp::model::ClientJsonRpcMessage::notification(
            rmcp::model::ClientNotification::InitializedNotification(Default::default()),
        );
        assert!(
            Transport::<RoleClient>::send(&mut client, ping)
                .await
                .is_err()
        );
    }
}
