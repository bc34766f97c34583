//! Connecting to a server with its stored tokens: the authorization
//! manager the transport's [`AuthClient`](rmcp::transport::auth::AuthClient)
//! asks for a token before each request (refreshing it shortly before it
//! expires, and once more when the server answers 401), and telling a
//! refused connection that needs a login from any other failure.

use std::error::Error;
use std::sync::Arc;

use rmcp::service::ClientInitializeError;
use rmcp::transport::auth::{AuthError, AuthorizationManager, OAuthClientConfig};
use rmcp::transport::streamable_http_client::AuthRequiredError;

use super::store::ServerCredentials;
use super::{SharedTokenStore, describe};
use crate::tools::config::HttpServerConfig;

/// Whether `cfg` sets its own `Authorization` header: then OAuth stays out.
pub(crate) fn has_static_auth(cfg: &HttpServerConfig) -> bool {
    cfg.headers
        .keys()
        .any(|k| k.eq_ignore_ascii_case("authorization"))
}

/// The manager for server `cfg`, when OAuth applies and tokens are kept:
/// `Ok(None)` for a server reached without OAuth, `Err` with the message
/// for the person (`needs_login` when no usable token is kept).
pub(crate) async fn authorized_manager(
    cfg: &HttpServerConfig,
    store: &SharedTokenStore,
    refreshing: Arc<tokio::sync::Mutex<()>>,
    needs_login: &str,
) -> Result<Option<AuthorizationManager>, String> {
    if has_static_auth(cfg) {
        return Ok(None);
    }
    let kept = store.load(&cfg.url).await.map_err(|e| e.to_string())?;
    let Some(kept) = kept.filter(|k| k.has_access_token()) else {
        // An entry that says it uses OAuth cannot work without a login; one
        // that does not may well be open (a 401 then says otherwise).
        return match cfg.oauth {
            Some(_) => Err(needs_login.to_owned()),
            None => Ok(None),
        };
    };
    // Expired with nothing to renew it: no request could succeed.
    let expired = kept
        .expires_at()
        .is_some_and(|at| at <= std::time::SystemTime::now());
    if expired && !kept.refreshable() {
        return Err(needs_login.to_owned());
    }
    lrg_providers::transport::ensure_tls_provider();
    let mut manager = AuthorizationManager::new(cfg.url.as_str())
        .await
        .map_err(|e| format!("OAuth: {}", describe(&e)))?;
    manager.set_credential_store(ServerCredentials {
        store: store.clone(),
        url: cfg.url.clone(),
        client_secret: kept.client_secret.clone(),
        refreshing,
    });
    // Discovered again at each connection: the resource indicator and the
    // token endpoint are the server's to change.
    let resolution = manager
        .resolve_metadata()
        .await
        .map_err(|e| format!("OAuth discovery failed: {}", describe(&e)))?;
    manager.set_metadata(resolution.metadata);
    // False when the authorization server changed since the login: its
    // tokens were dropped.
    if !manager
        .initialize_from_store()
        .await
        .map_err(|e| format!("OAuth: {}", describe(&e)))?
    {
        return Err(needs_login.to_owned());
    }
    let secret = cfg
        .oauth
        .as_ref()
        .and_then(|o| o.client_secret.clone())
        .or(kept.client_secret);
    if let Some(secret) = secret {
        // `initialize_from_store` configures the client without its secret.
        let client = OAuthClientConfig::new(kept.credentials.client_id.clone(), cfg.url.clone())
            .with_client_secret(secret);
        manager
            .configure_client(client)
            .map_err(|e| format!("OAuth: {}", describe(&e)))?;
    }
    Ok(Some(manager))
}

/// Whether a failed connection was the server asking for a login (a 401,
/// or a token that could not be had or renewed).
pub(crate) fn needs_login_in(e: &ClientInitializeError) -> bool {
    match e {
        ClientInitializeError::TransportError { error, .. } => chain_needs_login(error),
        other => chain_needs_login(other),
    }
}

/// Whether an error, or any error under it, says a login is needed.
pub(crate) fn chain_needs_login(e: &(dyn Error + 'static)) -> bool {
    let mut current = Some(e);
    while let Some(e) = current {
        if e.downcast_ref::<AuthRequiredError>().is_some()
            || matches!(
                e.downcast_ref::<AuthError>(),
                Some(AuthError::AuthorizationRequired | AuthError::TokenRefreshRejected(_))
            )
        {
            return true;
        }
        current = e.source();
    }
    false
}
