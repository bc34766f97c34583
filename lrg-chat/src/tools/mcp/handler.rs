//! Our side of an MCP connection: what the client declares and how it
//! answers the requests and notifications a server sends it.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use rmcp::model::{ClientCapabilities, ClientConfig, Implementation};
use rmcp::service::NotificationContext;
use rmcp::{ClientHandler, RoleClient};

/// Our side of an MCP connection: notes when the server says its tool list
/// changed, so the next listing fetches it again.
#[derive(Clone)]
pub(crate) struct LrgClient {
    pub(super) tools_changed: Arc<AtomicBool>,
}

impl ClientHandler for LrgClient {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("lrg", env!("CARGO_PKG_VERSION")),
        )
    }

    fn on_tool_list_changed(
        &self,
        _context: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + Send + '_ {
        self.tools_changed.store(true, Ordering::SeqCst);
        std::future::ready(())
    }
}
