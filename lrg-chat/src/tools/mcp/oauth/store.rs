//! Where OAuth tokens are kept between runs: [`TokenStore`], keyed by the
//! MCP server's URL, with a file ([`FileTokenStore`]) and a memory
//! ([`MemoryTokenStore`]) implementation; and the adapter that hands one
//! server's entry to rmcp as its `CredentialStore`.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures::future::BoxFuture;
use rmcp::transport::auth::{
    AuthError, CredentialRefreshGuard, CredentialStore, StoredCredentials,
};
use serde::{Deserialize, Serialize};

use super::store_key;

/// What is kept of one server's login.
#[derive(Clone, Serialize, Deserialize)]
#[non_exhaustive]
pub struct StoredTokens {
    /// rmcp's record: the client id, the token response (access and refresh
    /// tokens, expiry), the granted scopes, when the tokens came, the issuer.
    pub credentials: StoredCredentials,
    /// The secret a dynamic registration gave the client, if any (a
    /// pre-registered client's secret stays in the server's entry).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret: Option<String>,
}

impl StoredTokens {
    /// A record of `credentials`.
    pub fn new(credentials: StoredCredentials) -> Self {
        Self {
            credentials,
            client_secret: None,
        }
    }

    /// When the access token expires, if the server said how long it lasts.
    pub fn expires_at(&self) -> Option<SystemTime> {
        use oauth2::TokenResponse as _;
        let response = self.credentials.token_response.as_ref()?;
        let lasts = response.expires_in()?;
        let received = self.credentials.token_received_at?;
        Some(UNIX_EPOCH + Duration::from_secs(received) + lasts)
    }

    /// Whether a refresh token is kept.
    pub fn refreshable(&self) -> bool {
        use oauth2::TokenResponse as _;
        self.credentials
            .token_response
            .as_ref()
            .is_some_and(|r| r.refresh_token().is_some())
    }

    /// Whether there is an access token at all.
    pub fn has_access_token(&self) -> bool {
        self.credentials.token_response.is_some()
    }
}

impl fmt::Debug for StoredTokens {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // rmcp's own Debug of the credentials redacts the tokens.
        f.debug_struct("StoredTokens")
            .field("credentials", &self.credentials)
            .field(
                "client_secret",
                &self.client_secret.as_ref().map(|_| "<redacted>"),
            )
            .finish()
    }
}

/// A token store failed (the message never holds a token).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("OAuth token store: {0}")]
pub struct TokenStoreError(pub String);

/// Where OAuth tokens are kept, by MCP server URL. An app may keep them
/// where it keeps its own secrets (a keychain, a database) by implementing
/// this; [`FileTokenStore`] is what `lrg` uses.
pub trait TokenStore: Send + Sync {
    /// The tokens kept for the server at `server_url`.
    fn load<'a>(
        &'a self,
        server_url: &'a str,
    ) -> BoxFuture<'a, Result<Option<StoredTokens>, TokenStoreError>>;

    /// Keep `tokens` for the server at `server_url`, replacing what was kept.
    fn save<'a>(
        &'a self,
        server_url: &'a str,
        tokens: StoredTokens,
    ) -> BoxFuture<'a, Result<(), TokenStoreError>>;

    /// Forget the tokens of the server at `server_url` (nothing kept is fine).
    fn remove<'a>(&'a self, server_url: &'a str) -> BoxFuture<'a, Result<(), TokenStoreError>>;

    /// What the person is told to do when server `server` needs a login
    /// (after "needs login: "). Default: "run `lrg mcp login NAME`".
    fn login_hint(&self, server: &str) -> String {
        format!("run `lrg mcp login {server}`")
    }
}

/// The token file's contents.
#[derive(Default, Serialize, Deserialize)]
struct TokenFile {
    version: u32,
    /// By server URL ([`store_key`]).
    #[serde(default)]
    servers: BTreeMap<String, StoredTokens>,
}

/// Tokens in one JSON file that only its owner can read or write (0600 on
/// Unix; its folder is made 0700 when created). Writes replace the file
/// atomically; writes from this process are serialized.
pub struct FileTokenStore {
    path: PathBuf,
    /// Held across each read-change-write, so two saves keep both.
    lock: tokio::sync::Mutex<()>,
}

impl fmt::Debug for FileTokenStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FileTokenStore")
            .field("path", &self.path)
            .finish()
    }
}

impl FileTokenStore {
    /// A store in the file at `path` (created at the first save).
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self {
            path: path.into(),
            lock: tokio::sync::Mutex::new(()),
        }
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    async fn read(&self) -> Result<TokenFile, TokenStoreError> {
        let path = self.path.clone();
        blocking(move || read_file(&path)).await
    }

    async fn change(
        &self,
        change: impl FnOnce(&mut TokenFile) + Send + 'static,
    ) -> Result<(), TokenStoreError> {
        let _held = self.lock.lock().await;
        let path = self.path.clone();
        blocking(move || {
            let mut file = read_file(&path)?;
            change(&mut file);
            file.version = 1;
            let bytes = serde_json::to_vec_pretty(&file)
                .map_err(|e| TokenStoreError(format!("cannot encode the token file: {e}")))?;
            crate::atomic_file::write_private_atomic(&path, &bytes)
                .map_err(|e| TokenStoreError(format!("cannot write {}: {e}", path.display())))
        })
        .await
    }
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, TokenStoreError> + Send + 'static,
) -> Result<T, TokenStoreError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| TokenStoreError(format!("the token file task failed: {e}")))?
}

fn read_file(path: &Path) -> Result<TokenFile, TokenStoreError> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(TokenFile::default()),
        Err(e) => {
            return Err(TokenStoreError(format!(
                "cannot read {}: {e}",
                path.display()
            )));
        }
    };
    // serde's messages can quote the value they choke on (a token): only
    // the place is said.
    serde_json::from_str(&text).map_err(|e| {
        TokenStoreError(format!(
            "{} is not a valid token file (line {}, column {}); remove it and log in again",
            path.display(),
            e.line(),
            e.column()
        ))
    })
}

impl TokenStore for FileTokenStore {
    fn load<'a>(
        &'a self,
        server_url: &'a str,
    ) -> BoxFuture<'a, Result<Option<StoredTokens>, TokenStoreError>> {
        Box::pin(async move {
            let mut file = self.read().await?;
            Ok(file.servers.remove(&store_key(server_url)))
        })
    }

    fn save<'a>(
        &'a self,
        server_url: &'a str,
        tokens: StoredTokens,
    ) -> BoxFuture<'a, Result<(), TokenStoreError>> {
        let key = store_key(server_url);
        Box::pin(self.change(move |file| {
            file.servers.insert(key, tokens);
        }))
    }

    fn remove<'a>(&'a self, server_url: &'a str) -> BoxFuture<'a, Result<(), TokenStoreError>> {
        let key = store_key(server_url);
        Box::pin(async move {
            if !self.read().await?.servers.contains_key(&key) {
                return Ok(());
            }
            self.change(move |file| {
                file.servers.remove(&key);
            })
            .await
        })
    }
}

/// Tokens in memory only, for tests and apps that log in every run.
#[derive(Debug, Default)]
pub struct MemoryTokenStore {
    tokens: Mutex<HashMap<String, StoredTokens>>,
}

impl MemoryTokenStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }
}

impl TokenStore for MemoryTokenStore {
    fn load<'a>(
        &'a self,
        server_url: &'a str,
    ) -> BoxFuture<'a, Result<Option<StoredTokens>, TokenStoreError>> {
        let found = lrg_providers::sync::lock(&self.tokens)
            .get(&store_key(server_url))
            .cloned();
        Box::pin(async move { Ok(found) })
    }

    fn save<'a>(
        &'a self,
        server_url: &'a str,
        tokens: StoredTokens,
    ) -> BoxFuture<'a, Result<(), TokenStoreError>> {
        lrg_providers::sync::lock(&self.tokens).insert(store_key(server_url), tokens);
        Box::pin(async { Ok(()) })
    }

    fn remove<'a>(&'a self, server_url: &'a str) -> BoxFuture<'a, Result<(), TokenStoreError>> {
        lrg_providers::sync::lock(&self.tokens).remove(&store_key(server_url));
        Box::pin(async { Ok(()) })
    }
}

/// One server's entry of a [`TokenStore`], as rmcp's `CredentialStore`.
pub(crate) struct ServerCredentials {
    pub(crate) store: Arc<dyn TokenStore>,
    pub(crate) url: String,
    /// Kept with the tokens on every save (a dynamic registration's).
    pub(crate) client_secret: Option<String>,
    /// Shared by the connections of one host to this server, so that two
    /// refreshing at once do not both spend the refresh token.
    pub(crate) refreshing: Arc<tokio::sync::Mutex<()>>,
}

fn store_error(e: TokenStoreError) -> AuthError {
    AuthError::CredentialStoreError(e.0)
}

#[async_trait::async_trait]
impl CredentialStore for ServerCredentials {
    async fn load(&self) -> Result<Option<StoredCredentials>, AuthError> {
        Ok(self
            .store
            .load(&self.url)
            .await
            .map_err(store_error)?
            .map(|t| t.credentials))
    }

    async fn save(&self, credentials: StoredCredentials) -> Result<(), AuthError> {
        let tokens = StoredTokens {
            credentials,
            client_secret: self.client_secret.clone(),
        };
        self.store
            .save(&self.url, tokens)
            .await
            .map_err(store_error)
    }

    async fn clear(&self) -> Result<(), AuthError> {
        self.store.remove(&self.url).await.map_err(store_error)
    }

    async fn on_refresh_token_rejected(
        &self,
        credentials: &StoredCredentials,
    ) -> Result<(), AuthError> {
        // A refused refresh token is dead: forgetting it makes the server
        // say "needs login" at once instead of trying it again and again.
        // Only if it is still the one kept (another process may have
        // logged in since).
        let kept = self.store.load(&self.url).await.map_err(store_error)?;
        let same = kept.as_ref().is_some_and(|k| {
            serde_json::to_value(&k.credentials.token_response).ok()
                == serde_json::to_value(&credentials.token_response).ok()
        });
        if same {
            self.store.remove(&self.url).await.map_err(store_error)?;
        }
        Ok(())
    }

    async fn acquire_refresh_guard(&self) -> Result<Option<CredentialRefreshGuard>, AuthError> {
        let guard = self.refreshing.clone().lock_owned().await;
        Ok(Some(CredentialRefreshGuard::new(guard)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens(access: &str) -> StoredTokens {
        let response: rmcp::transport::auth::OAuthTokenResponse =
            serde_json::from_value(serde_json::json!({
                "access_token": access,
                "token_type": "Bearer",
                "expires_in": 3600,
                "refresh_token": "r-1",
            }))
            .unwrap();
        StoredTokens::new(StoredCredentials::new(
            "client".into(),
            Some(response),
            vec![],
            Some(1_000),
        ))
    }

    #[tokio::test]
    async fn the_file_is_private_and_keyed_by_url() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lrg").join("mcp-tokens.json");
        let store = FileTokenStore::new(&path);
        assert!(store.load("http://a/mcp").await.unwrap().is_none());
        store.save("http://a/mcp/", tokens("at-a")).await.unwrap();
        store.save("http://b/mcp", tokens("at-b")).await.unwrap();
        let a = store.load("http://a/mcp").await.unwrap().unwrap();
        assert!(a.refreshable());
        assert_eq!(
            a.expires_at(),
            Some(UNIX_EPOCH + Duration::from_secs(1_000 + 3600))
        );
        assert!(!format!("{a:?}").contains("at-a"));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        store.remove("http://a/mcp").await.unwrap();
        assert!(store.load("http://a/mcp").await.unwrap().is_none());
        assert!(store.load("http://b/mcp").await.unwrap().is_some());
        store.remove("http://never/mcp").await.unwrap();
    }

    #[tokio::test]
    async fn a_damaged_file_is_named_without_its_contents() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.json");
        std::fs::write(&path, "{\"servers\": {\"x\": \"at-secret\"").unwrap();
        let e = FileTokenStore::new(&path).load("x").await.unwrap_err();
        assert!(e.0.contains("not a valid token file"), "{e}");
        assert!(!e.0.contains("at-secret"), "{e}");
    }
}
