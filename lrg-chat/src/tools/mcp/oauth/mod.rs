//! OAuth 2.1 for streamable-HTTP MCP servers, on rmcp's `auth` client.
//!
//! - **Discovery**: the server's protected-resource metadata (RFC 9728),
//!   then its authorization server's metadata (RFC 8414 or OpenID Connect
//!   discovery), as rmcp's [`AuthorizationManager`] finds them.
//! - **The client**: a pre-registered one from the server's entry
//!   (`"oauth": {"client_id": …, "client_secret"?: …, "scopes": […]}`), else
//!   one registered dynamically (RFC 7591) at login.
//! - **Login** ([`begin_login`]): PKCE (S256), a loopback redirect on a
//!   random port of 127.0.0.1, and a `state` check; a redirect that carries
//!   another `state` ends the login with [`OAuthError::StateMismatch`].
//!   Nothing here opens a browser: the caller shows or opens the URL.
//! - **Tokens** live in a [`TokenStore`], keyed by the server's URL
//!   ([`FileTokenStore`]: a 0600 JSON file; an app may supply its own). A
//!   [`ToolHost`](crate::tools::ToolHost) given a store
//!   ([`ToolHost::set_token_store`](crate::tools::ToolHost::set_token_store))
//!   sends the access token to the server, refreshes it shortly before it
//!   expires and again when the server answers 401. When no token can be
//!   had (none stored, or the refresh was refused), the server is not
//!   started: [`ToolHost::failures`](crate::tools::ToolHost::failures) says
//!   "needs login: run `lrg mcp login NAME`" ([`TokenStore::login_hint`]),
//!   and the chat goes on without its tools.
//! - **Logout** ([`logout`]) revokes the tokens where the authorization
//!   server offers revocation (RFC 7009) and removes them from the store.
//!
//! Tokens, client secrets, codes and PKCE verifiers never appear in errors,
//! logs or `Debug` output.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;

mod connect;
mod login;
mod store;

pub(crate) use connect::{authorized_manager, chain_needs_login, needs_login_in};
pub use login::{LoginOutcome, PendingLogin, auth_state, begin_login, logout};
pub use store::{FileTokenStore, MemoryTokenStore, StoredTokens, TokenStore, TokenStoreError};

/// rmcp's OAuth types that this module's API names.
pub use rmcp::transport::auth::{AuthorizationManager, StoredCredentials};

/// How long login waits for the browser's redirect by default.
pub const DEFAULT_LOGIN_TIMEOUT: Duration = Duration::from_secs(300);

/// The `"oauth"` object of a streamable-HTTP server's entry: a client
/// registered with the server's authorization server beforehand. Without
/// a `client_id`, login registers one dynamically (with these scopes).
#[derive(Clone, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct OAuthSettings {
    /// The pre-registered client's id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
    /// Its secret, for a confidential client (a secret: `Debug` hides it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_secret: Option<String>,
    /// The scopes to ask for; none lets the server's metadata decide.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scopes: Vec<String>,
}

impl OAuthSettings {
    /// Settings of a pre-registered client.
    pub fn client(client_id: impl Into<String>) -> Self {
        Self {
            client_id: Some(client_id.into()),
            ..Self::default()
        }
    }

    /// With the client's secret.
    pub fn secret(mut self, secret: impl Into<String>) -> Self {
        self.client_secret = Some(secret.into());
        self
    }

    /// With the scopes to ask for.
    pub fn scopes<I, S>(mut self, scopes: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.scopes = scopes.into_iter().map(Into::into).collect();
        self
    }
}

impl fmt::Debug for OAuthSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OAuthSettings")
            .field("client_id", &self.client_id)
            .field(
                "client_secret",
                &self.client_secret.as_ref().map(|_| "<redacted>"),
            )
            .field("scopes", &self.scopes)
            .finish()
    }
}

/// Read an entry's `"oauth"` value. Errors never quote a value.
pub(crate) fn parse_settings(value: Option<&Value>) -> Result<Option<OAuthSettings>, String> {
    let map = match value {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Object(map)) => map,
        Some(other) => {
            return Err(format!(
                "\"oauth\" must be an object ({{\"client_id\", \"client_secret\", \"scopes\"}}), found {}",
                crate::tools::config::kind_of(other)
            ));
        }
    };
    let text = |key: &str| -> Result<Option<String>, String> {
        match map.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) if !s.trim().is_empty() => Ok(Some(s.clone())),
            Some(Value::String(_)) => Err(format!("\"oauth\".\"{key}\" is empty")),
            Some(other) => Err(format!(
                "\"oauth\".\"{key}\" must be a string, found {}",
                crate::tools::config::kind_of(other)
            )),
        }
    };
    let client_id = text("client_id")?;
    let client_secret = text("client_secret")?;
    if client_secret.is_some() && client_id.is_none() {
        return Err("\"oauth\" has a \"client_secret\" but no \"client_id\"".to_owned());
    }
    let scopes = match map.get("scopes") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => {
            let mut scopes = Vec::with_capacity(items.len());
            for (i, item) in items.iter().enumerate() {
                match item {
                    Value::String(s) if !s.is_empty() && !s.contains(char::is_whitespace) => {
                        scopes.push(s.clone())
                    }
                    Value::String(_) => {
                        return Err(format!(
                            "\"oauth\".\"scopes\"[{i}] must be one scope: not empty, no spaces"
                        ));
                    }
                    other => {
                        return Err(format!(
                            "\"oauth\".\"scopes\"[{i}] must be a string, found {}",
                            crate::tools::config::kind_of(other)
                        ));
                    }
                }
            }
            scopes
        }
        Some(other) => {
            return Err(format!(
                "\"oauth\".\"scopes\" must be an array of strings, found {}",
                crate::tools::config::kind_of(other)
            ));
        }
    };
    if let Some(unknown) = map
        .keys()
        .find(|k| !matches!(k.as_str(), "client_id" | "client_secret" | "scopes"))
    {
        return Err(format!(
            "\"oauth\" has an unknown key \"{unknown}\" (known: client_id, client_secret, scopes)"
        ));
    }
    Ok(Some(OAuthSettings {
        client_id,
        client_secret,
        scopes,
    }))
}

/// Where a server stands with OAuth ([`auth_state`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum AuthState {
    /// It takes no OAuth login: a child process, a server with its own
    /// `Authorization` header, or one that publishes no OAuth metadata.
    None,
    /// Tokens are stored.
    LoggedIn {
        /// When the access token expires, if the server said.
        expires_at: Option<std::time::SystemTime>,
        /// Whether a refresh token is kept (an expired access token is then
        /// renewed without a new login).
        refreshable: bool,
    },
    /// It needs `lrg mcp login NAME`: no tokens are stored, or the access
    /// token expired and cannot be refreshed.
    NeedsLogin,
}

/// Why a login, logout or token operation failed. Messages name what was
/// wrong and never hold a token, code, verifier or secret.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OAuthError {
    /// The server is not one OAuth applies to.
    #[error("{0}")]
    NotApplicable(String),
    /// Discovery found no usable authorization server.
    #[error("OAuth discovery failed for {url}: {message}")]
    Discovery {
        /// The MCP server's URL.
        url: String,
        /// What went wrong.
        message: String,
    },
    /// Dynamic client registration failed.
    #[error("registering lrg as an OAuth client failed: {0}")]
    Registration(String),
    /// The loopback redirect could not be set up.
    #[error("cannot listen for the login redirect on 127.0.0.1: {0}")]
    Redirect(std::io::Error),
    /// The redirect carried a `state` other than the one sent.
    #[error(
        "the login redirect carried the wrong `state` (a forged or stale redirect); log in again"
    )]
    StateMismatch,
    /// The authorization server refused (`error=` on the redirect).
    #[error("the authorization server refused the login: {0}")]
    Denied(String),
    /// No redirect came in time.
    #[error("no login redirect came within {} s", .0.as_secs())]
    TimedOut(Duration),
    /// Exchanging the code (or refreshing) failed.
    #[error("getting the tokens failed: {0}")]
    Token(String),
    /// The token store failed.
    #[error(transparent)]
    Store(#[from] TokenStoreError),
}

/// A store shared by the hosts of an app.
pub type SharedTokenStore = Arc<dyn TokenStore>;

/// The key a server's tokens are kept under: its URL without surrounding
/// space or a trailing `/`, so `…/mcp` and `…/mcp/` share one login.
pub(crate) fn store_key(url: &str) -> String {
    url.trim().trim_end_matches('/').to_owned()
}

/// The text of an rmcp auth error without anything secret: rmcp's own
/// messages hold no tokens, but an authorization server's error body
/// could, so it is cut to its first line and capped.
pub(crate) fn describe(e: &rmcp::transport::auth::AuthError) -> String {
    let text = e.to_string();
    text.lines()
        .next()
        .unwrap_or_default()
        .chars()
        .take(300)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn settings_parse_and_never_quote_values() {
        let s = parse_settings(Some(
            &json!({"client_id": "abc", "client_secret": "s3cret", "scopes": ["read", "write"]}),
        ))
        .unwrap()
        .unwrap();
        assert_eq!(s.client_id.as_deref(), Some("abc"));
        assert_eq!(s.scopes, ["read", "write"]);
        assert!(!format!("{s:?}").contains("s3cret"));
        assert_eq!(parse_settings(None).unwrap(), None);
        assert_eq!(
            parse_settings(Some(&json!({"scopes": ["a"]}))).unwrap(),
            Some(OAuthSettings::default().scopes(["a"]))
        );
        for (bad, says) in [
            (json!("x"), "must be an object"),
            (json!({"client_id": 3}), "\"client_id\" must be a string"),
            (json!({"client_secret": "s3cret"}), "no \"client_id\""),
            (
                json!({"scopes": ["a b"]}),
                "\"scopes\"[0] must be one scope",
            ),
            (
                json!({"client_id": "a", "secret": "s3cret"}),
                "unknown key \"secret\"",
            ),
        ] {
            let e = parse_settings(Some(&bad)).unwrap_err();
            assert!(e.contains(says), "{e}");
            assert!(!e.contains("s3cret"), "{e}");
        }
    }

    #[test]
    fn keys_ignore_a_trailing_slash() {
        assert_eq!(store_key(" http://a/mcp/ "), "http://a/mcp");
    }
}
