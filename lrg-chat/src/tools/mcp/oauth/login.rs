//! Logging in to a server (authorization code + PKCE, loopback redirect),
//! logging out (revocation, RFC 7009) and where a server stands.

use std::collections::HashMap;
use std::time::{Duration, SystemTime};

use axum::extract::{Query, State};
use axum::response::IntoResponse;
use rmcp::transport::auth::{AuthorizationManager, AuthorizationMetadata, OAuthClientConfig};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::connect::has_static_auth;
use super::store::ServerCredentials;
use super::{AuthState, OAuthError, OAuthSettings, SharedTokenStore, describe};
use crate::tools::config::{HttpServerConfig, McpServerConfig};

/// The path of the loopback redirect.
const CALLBACK_PATH: &str = "/callback";

/// How long one request of discovery or revocation may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(15);

/// A login under way: the URL the person opens, and the loopback listener
/// waiting for the authorization server's redirect ([`PendingLogin::finish`]).
pub struct PendingLogin {
    url: String,
    redirect_uri: String,
    manager: AuthorizationManager,
    state: String,
    redirects: mpsc::Receiver<Redirect>,
    listener: CancellationToken,
    store: SharedTokenStore,
    server_url: String,
    registered: bool,
}

impl std::fmt::Debug for PendingLogin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The URL carries the state and the PKCE challenge: not shown.
        f.debug_struct("PendingLogin")
            .field("server_url", &self.server_url)
            .field("redirect_uri", &self.redirect_uri)
            .finish_non_exhaustive()
    }
}

/// What a finished login got.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LoginOutcome {
    /// The OAuth client lrg logged in as.
    pub client_id: String,
    /// Whether that client was registered dynamically for this login.
    pub registered: bool,
    /// The scopes granted.
    pub scopes: Vec<String>,
    /// When the access token expires, if the server said.
    pub expires_at: Option<SystemTime>,
}

/// What came to the loopback listener, already checked against the state.
type Redirect = Result<(String, Option<String>), OAuthError>;

/// The streamable-HTTP server of `cfg`, or why OAuth does not apply.
fn http_of(cfg: &McpServerConfig) -> Result<&HttpServerConfig, OAuthError> {
    match cfg {
        McpServerConfig::Http(h) if has_static_auth(h) => Err(OAuthError::NotApplicable(
            "its entry sets an Authorization header; remove it to log in with OAuth".to_owned(),
        )),
        McpServerConfig::Http(h) => Ok(h),
        McpServerConfig::Stdio(_) => Err(OAuthError::NotApplicable(
            "it is a child process (\"command\"); OAuth is for streamable-HTTP servers (\"url\")"
                .to_owned(),
        )),
    }
}

/// Discover the authorization server of the MCP server at `url` (the
/// manager holds its metadata): `Ok(None)` when it publishes none.
async fn discover(
    url: &str,
) -> Result<Option<(AuthorizationManager, AuthorizationMetadata)>, OAuthError> {
    let failed = |message: String| OAuthError::Discovery {
        url: url.to_owned(),
        message,
    };
    lrg_providers::transport::ensure_tls_provider();
    let mut manager = AuthorizationManager::new(url)
        .await
        .map_err(|e| failed(describe(&e)))?;
    let resolution = tokio::time::timeout(REQUEST_TIMEOUT * 2, manager.resolve_metadata())
        .await
        .map_err(|_| {
            failed(format!(
                "no answer within {} s",
                REQUEST_TIMEOUT.as_secs() * 2
            ))
        })?
        .map_err(|e| failed(describe(&e)))?;
    if !resolution.source.is_discovered() {
        return Ok(None);
    }
    manager.set_metadata(resolution.metadata.clone());
    Ok(Some((manager, resolution.metadata)))
}

/// Start logging in to server `cfg`: discover its authorization server,
/// use the entry's pre-registered client or register one, listen for the
/// redirect on a random port of 127.0.0.1, and build the authorization URL
/// (PKCE S256, a random `state`). The caller shows or opens
/// [`PendingLogin::authorization_url`], then awaits [`PendingLogin::finish`].
/// The tokens go to `store`, under the server's URL.
pub async fn begin_login(
    cfg: &McpServerConfig,
    store: SharedTokenStore,
    client_name: &str,
) -> Result<PendingLogin, OAuthError> {
    let http = http_of(cfg)?;
    let settings = http.oauth.clone().unwrap_or_default();
    let Some((mut manager, _)) = discover(&http.url).await? else {
        return Err(OAuthError::NotApplicable(format!(
            "{} publishes no OAuth metadata (/.well-known/oauth-protected-resource or \
             /.well-known/oauth-authorization-server): it takes no OAuth login",
            http.url
        )));
    };
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
        .await
        .map_err(OAuthError::Redirect)?;
    let port = listener.local_addr().map_err(OAuthError::Redirect)?.port();
    let redirect_uri = format!("http://127.0.0.1:{port}{CALLBACK_PATH}");
    let scopes = if settings.scopes.is_empty() {
        manager.select_initial_scopes(&[]).await
    } else {
        settings.scopes.clone()
    };
    let scope_refs: Vec<&str> = scopes.iter().map(String::as_str).collect();
    let (registered, secret) = match &settings.client_id {
        Some(id) => {
            let mut client = OAuthClientConfig::new(id.clone(), redirect_uri.clone())
                .with_scopes(scopes.clone());
            if let Some(secret) = &settings.client_secret {
                client = client.with_client_secret(secret.clone());
            }
            manager
                .configure_client(client)
                .map_err(|e| OAuthError::Registration(describe(&e)))?;
            (false, None)
        }
        None => {
            let client = manager
                .register_client(client_name, &redirect_uri, &scope_refs)
                .await
                .map_err(|e| OAuthError::Registration(describe(&e)))?;
            (true, client.client_secret)
        }
    };
    manager.set_credential_store(ServerCredentials {
        store: store.clone(),
        url: http.url.clone(),
        client_secret: secret,
        refreshing: Default::default(),
    });
    let url = manager
        .get_authorization_url(&scope_refs)
        .await
        .map_err(|e| OAuthError::Registration(describe(&e)))?;
    let state = reqwest::Url::parse(&url)
        .ok()
        .and_then(|u| {
            u.query_pairs()
                .find(|(k, _)| k == "state")
                .map(|(_, v)| v.into_owned())
        })
        .ok_or_else(|| OAuthError::Token("the authorization URL carries no state".to_owned()))?;
    let (tx, redirects) = mpsc::channel(1);
    let stop = CancellationToken::new();
    let app = axum::Router::new()
        .route(CALLBACK_PATH, axum::routing::get(callback))
        .with_state(Callback {
            state: state.clone(),
            tx,
        });
    let until = stop.clone();
    tokio::spawn(async move {
        let served = axum::serve(listener, app)
            .with_graceful_shutdown(until.cancelled_owned())
            .await;
        if let Err(e) = served {
            tracing::warn!(error = %e, "the OAuth redirect listener failed");
        }
    });
    Ok(PendingLogin {
        url,
        redirect_uri,
        manager,
        state,
        redirects,
        listener: stop,
        store,
        server_url: http.url.clone(),
        registered,
    })
}

impl PendingLogin {
    /// The URL to open in a browser.
    pub fn authorization_url(&self) -> &str {
        &self.url
    }

    /// Where the authorization server sends the browser back
    /// (`http://127.0.0.1:PORT/callback`).
    pub fn redirect_uri(&self) -> &str {
        &self.redirect_uri
    }

    /// Wait (at most `timeout`) for the redirect, exchange its code for
    /// tokens (with the PKCE verifier) and store them. A redirect with
    /// another `state`, or an `error`, ends the login.
    pub async fn finish(mut self, timeout: Duration) -> Result<LoginOutcome, OAuthError> {
        let result = self.wait(timeout).await;
        self.listener.cancel();
        result
    }

    async fn wait(&mut self, timeout: Duration) -> Result<LoginOutcome, OAuthError> {
        let redirect = tokio::time::timeout(timeout, self.redirects.recv())
            .await
            .map_err(|_| OAuthError::TimedOut(timeout))?
            .ok_or_else(|| OAuthError::Token("the redirect listener stopped".to_owned()))?;
        let (code, issuer) = redirect?;
        tokio::time::timeout(
            REQUEST_TIMEOUT,
            self.manager
                .exchange_code_for_token_with_issuer(&code, &self.state, issuer.as_deref()),
        )
        .await
        .map_err(|_| {
            OAuthError::Token(format!(
                "the token endpoint did not answer within {} s",
                REQUEST_TIMEOUT.as_secs()
            ))
        })?
        .map_err(|e| OAuthError::Token(describe(&e)))?;
        let kept = self
            .store
            .load(&self.server_url)
            .await?
            .ok_or_else(|| OAuthError::Token("the tokens were not kept".to_owned()))?;
        Ok(LoginOutcome {
            client_id: kept.credentials.client_id.clone(),
            registered: self.registered,
            scopes: kept.credentials.granted_scopes.clone(),
            expires_at: kept.expires_at(),
        })
    }
}

#[derive(Clone)]
struct Callback {
    state: String,
    tx: mpsc::Sender<Redirect>,
}

/// The redirect: checked here, so the browser is told how it went; the
/// first one decides the login (later ones are told it is over).
async fn callback(
    State(cb): State<Callback>,
    Query(query): Query<HashMap<String, String>>,
) -> axum::response::Response {
    use axum::http::StatusCode;
    let (status, text, redirect): (StatusCode, &str, Redirect) = if let Some(error) =
        query.get("error")
    {
        // The server's words, cut short: they are shown to the person.
        let mut said: String = error.chars().take(100).collect();
        if let Some(d) = query.get("error_description") {
            said.push_str(": ");
            said.extend(d.chars().take(200));
        }
        (
            StatusCode::OK,
            "The login was refused. You can close this tab.",
            Err(OAuthError::Denied(said)),
        )
    } else if query.get("state") != Some(&cb.state) {
        (
            StatusCode::BAD_REQUEST,
            "This redirect does not belong to the login lrg started (wrong state). Log in again.",
            Err(OAuthError::StateMismatch),
        )
    } else if let Some(code) = query.get("code") {
        (
            StatusCode::OK,
            "Logged in. You can close this tab and return to lrg.",
            Ok((code.clone(), query.get("iss").cloned())),
        )
    } else {
        (
            StatusCode::BAD_REQUEST,
            "The redirect carries no code.",
            Err(OAuthError::Denied(
                "the redirect carried no code".to_owned(),
            )),
        )
    };
    if cb.tx.try_send(redirect).is_err() {
        return (StatusCode::GONE, "This login is already over.").into_response();
    }
    (status, text).into_response()
}

/// Log out of server `cfg`: revoke its tokens where the authorization
/// server offers revocation (RFC 7009), then forget them. Returns whether
/// they were revoked; a failed revocation is logged and the tokens are
/// forgotten anyway (the person asked to be logged out here).
pub async fn logout(cfg: &McpServerConfig, store: &SharedTokenStore) -> Result<bool, OAuthError> {
    let http = http_of(cfg)?;
    let Some(kept) = store.load(&http.url).await? else {
        return Ok(false);
    };
    let revoked = match revoke(http, &kept).await {
        Ok(revoked) => revoked,
        Err(message) => {
            tracing::warn!(url = %http.url, %message, "revoking the OAuth tokens failed");
            false
        }
    };
    store.remove(&http.url).await?;
    Ok(revoked)
}

/// Revoke the refresh token (which ends the grant) and the access token.
async fn revoke(http: &HttpServerConfig, kept: &super::StoredTokens) -> Result<bool, String> {
    use oauth2::TokenResponse as _;
    let Some((_, metadata)) = discover(&http.url).await.map_err(|e| e.to_string())? else {
        return Ok(false);
    };
    let Some(endpoint) = metadata
        .additional_fields
        .get("revocation_endpoint")
        .and_then(|v| v.as_str())
    else {
        return Ok(false);
    };
    let Some(response) = &kept.credentials.token_response else {
        return Ok(false);
    };
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(REQUEST_TIMEOUT)
        .build()
        .map_err(|e| format!("no HTTP client: {e}"))?;
    let secret = http
        .oauth
        .as_ref()
        .and_then(|o: &OAuthSettings| o.client_secret.clone())
        .or_else(|| kept.client_secret.clone());
    let client_id = kept.credentials.client_id.as_str();
    let mut tokens = vec![(response.access_token().secret().as_str(), "access_token")];
    if let Some(refresh) = response.refresh_token() {
        tokens.insert(0, (refresh.secret().as_str(), "refresh_token"));
    }
    for (token, hint) in tokens {
        let mut form = vec![("token", token), ("token_type_hint", hint)];
        let mut request = client.post(endpoint);
        match &secret {
            Some(secret) => request = request.basic_auth(client_id, Some(secret)),
            None => form.push(("client_id", client_id)),
        }
        let answer = request
            .form(&form)
            .send()
            .await
            .map_err(|e| format!("the revocation endpoint could not be reached: {e}"))?;
        // RFC 7009: 200 whether or not the token was still valid.
        if !answer.status().is_success() {
            return Err(format!(
                "the revocation endpoint answered {}",
                answer.status()
            ));
        }
    }
    Ok(true)
}

/// Where server `cfg` stands: no OAuth, logged in, or needs a login. For a
/// server with neither tokens nor an `"oauth"` entry, its metadata is
/// looked up (it needs a login if it publishes any).
pub async fn auth_state(
    cfg: &McpServerConfig,
    store: &SharedTokenStore,
) -> Result<AuthState, OAuthError> {
    let McpServerConfig::Http(http) = cfg else {
        return Ok(AuthState::None);
    };
    if has_static_auth(http) {
        return Ok(AuthState::None);
    }
    if let Some(kept) = store
        .load(&http.url)
        .await?
        .filter(|k| k.has_access_token())
    {
        let expires_at = kept.expires_at();
        let refreshable = kept.refreshable();
        let expired = expires_at.is_some_and(|at| at <= SystemTime::now());
        return Ok(if expired && !refreshable {
            AuthState::NeedsLogin
        } else {
            AuthState::LoggedIn {
                expires_at,
                refreshable,
            }
        });
    }
    if http.oauth.is_some() {
        return Ok(AuthState::NeedsLogin);
    }
    Ok(match discover(&http.url).await {
        Ok(Some(_)) => AuthState::NeedsLogin,
        Ok(None) => AuthState::None,
        Err(e) => {
            tracing::debug!(url = %http.url, error = %e, "OAuth discovery for the auth state failed");
            AuthState::None
        }
    })
}
