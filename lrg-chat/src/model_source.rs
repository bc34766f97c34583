//! Where a session gets its model from, turn by turn.

use std::sync::Arc;

use futures::future::BoxFuture;
use lrg_providers::{ChatModel, ProviderError};

/// Resolves the model for one turn.
///
/// A session asks again for every model turn and drops the model when the
/// turn ends: it never holds an engine, so the app can unload or swap models
/// between turns (a held local engine would keep the old weights alive).
pub trait ModelSource: Send + Sync {
    /// The model to run the next turn on. An error ends the turn with an
    /// `error` event (and is retried first when transient).
    fn resolve(&self) -> BoxFuture<'_, Result<Arc<dyn ChatModel>, ProviderError>>;
}

/// Always the same model: for cloud models, servers and tests.
#[derive(Clone)]
pub struct FixedModel(pub Arc<dyn ChatModel>);

impl FixedModel {
    /// A source that always resolves to `model`.
    pub fn new(model: impl ChatModel + 'static) -> Self {
        Self(Arc::new(model))
    }
}

impl std::fmt::Debug for FixedModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let info = self.0.info();
        write!(f, "FixedModel({}:{})", info.provider, info.model)
    }
}

impl ModelSource for FixedModel {
    fn resolve(&self) -> BoxFuture<'_, Result<Arc<dyn ChatModel>, ProviderError>> {
        let model = self.0.clone();
        Box::pin(async move { Ok(model) })
    }
}
