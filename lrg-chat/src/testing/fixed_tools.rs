//! [`FixedTools`]: a stand-in [`Tools`] for tests and benches that need a
//! tool list but not the tools behind it.

use std::sync::Arc;

use futures::future::BoxFuture;
use lrg_providers::ToolSpec;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::tools::{ToolOutput, Tools, ToolsError};

/// Tools with a fixed list, kept as one shared `Arc<[ToolSpec]>` the way
/// [`crate::tools::ToolHost`] keeps its list between changes (so
/// [`Tools::list_shared`] hands out that very `Arc`, and a test can check
/// that a session sends it on without copying). Every call, of any name
/// and with any arguments, answers `done`.
#[derive(Debug, Clone)]
pub struct FixedTools(Arc<[ToolSpec]>);

impl FixedTools {
    /// Offer `specs`; an `Arc<[ToolSpec]>` is kept as it is, not copied.
    pub fn new(specs: impl Into<Arc<[ToolSpec]>>) -> Self {
        Self(specs.into())
    }
}

impl Tools for FixedTools {
    fn list(&self) -> BoxFuture<'_, Result<Vec<ToolSpec>, ToolsError>> {
        let list = self.0.to_vec();
        Box::pin(async move { Ok(list) })
    }

    fn list_shared(&self) -> BoxFuture<'_, Result<Arc<[ToolSpec]>, ToolsError>> {
        let list = Arc::clone(&self.0);
        Box::pin(async move { Ok(list) })
    }

    fn call<'a>(
        &'a self,
        _name: &'a str,
        _arguments: Value,
        _cancel: CancellationToken,
    ) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async { ToolOutput::text("done") })
    }
}
