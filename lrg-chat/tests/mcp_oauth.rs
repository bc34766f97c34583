//! OAuth 2.1 for streamable-HTTP MCP servers, against the authorization
//! server and bearer-guarded MCP server of `oauth_support` (in this
//! process): discovery (OAuth and OpenID Connect metadata), dynamic and
//! pre-registered clients, PKCE, refresh before expiry and after a 401, a
//! refused refresh ("needs login", the chat goes on), revocation at logout
//! (then 401), a wrong `state`, and no token anywhere a person or a log
//! could see it. Every test runs under a timeout.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lrg_chat::store::SessionStore as _;
use lrg_chat::tools::oauth::{
    AuthState, FileTokenStore, MemoryTokenStore, OAuthError, OAuthSettings, SharedTokenStore,
    auth_state, begin_login, logout,
};
use lrg_chat::tools::{HttpServerConfig, McpServerConfig, ToolHost, ToolOutput, Tools};
use lrg_chat::{ChatSession, FixedModel, Permissions};
use lrg_providers::{Part, ScriptedModel, ToolAnnotations};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::oauth_support::{self, Behaviour, FakeAuth, PRE_CLIENT_ID, PRE_CLIENT_SECRET};
use crate::session_support::{calls, finish, reply};

const TEST_TIMEOUT: Duration = Duration::from_secs(60);
const LOGIN_WAIT: Duration = Duration::from_secs(10);

async fn within<F: Future>(f: F) -> F::Output {
    tokio::time::timeout(TEST_TIMEOUT, f)
        .await
        .expect("the test took too long")
}

fn server(fake: &FakeAuth) -> McpServerConfig {
    McpServerConfig::Http(HttpServerConfig::new(fake.mcp_url()))
}

/// Log in to `cfg` as the person would, the test playing the browser.
async fn login(fake: &FakeAuth, cfg: &McpServerConfig, store: &SharedTokenStore) {
    let pending = begin_login(cfg, store.clone(), "lrg tests").await.unwrap();
    let url = pending.authorization_url().to_owned();
    assert!(url.contains("code_challenge_method=S256"), "{url}");
    assert!(url.contains("state="), "{url}");
    assert!(pending.redirect_uri().starts_with("http://127.0.0.1:"));
    assert_eq!(fake.approve(&url).await, 200);
    pending.finish(LOGIN_WAIT).await.unwrap();
}

fn host_with(store: &SharedTokenStore) -> ToolHost {
    let host = ToolHost::new();
    host.set_token_store(store.clone());
    host
}

async fn echo(host: &ToolHost, text: &str) -> ToolOutput {
    host.call("echo", json!({"text": text}), CancellationToken::new())
        .await
}

fn text_of(out: &ToolOutput) -> String {
    out.parts
        .iter()
        .filter_map(|p| match p {
            Part::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discovery_registration_and_pkce_then_the_tools_work() {
    within(async {
        let fake = oauth_support::start(Behaviour::default()).await;
        let store: SharedTokenStore = Arc::new(MemoryTokenStore::new());
        let cfg = server(&fake);
        assert_eq!(
            auth_state(&cfg, &store).await.unwrap(),
            AuthState::NeedsLogin
        );

        let pending = begin_login(&cfg, store.clone(), "lrg tests").await.unwrap();
        assert_eq!(fake.approve(pending.authorization_url()).await, 200);
        let outcome = pending.finish(LOGIN_WAIT).await.unwrap();
        assert!(outcome.registered);
        assert!(outcome.client_id.starts_with("dyn-client-"), "{outcome:?}");
        assert!(outcome.expires_at.is_some());
        fake.seen(|s| {
            assert_eq!(s.registered.len(), 1);
            assert_eq!(s.token_requests, ["authorization_code"]);
            assert_eq!(s.pkce_failures, 0);
        });
        assert!(matches!(
            auth_state(&cfg, &store).await.unwrap(),
            AuthState::LoggedIn {
                refreshable: true,
                ..
            }
        ));

        let host = host_with(&store);
        host.add_mcp_server("web", cfg).await.unwrap();
        assert_eq!(text_of(&echo(&host, "over oauth").await), "over oauth");
        let issued = fake.seen(|s| s.issued[0].clone());
        assert!(fake.seen(|s| s.accepted.contains(&issued)));
        host.shutdown().await;
        fake.stop();
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oidc_discovery_a_preregistered_client_and_refresh_before_expiry() {
    within(async {
        let fake = oauth_support::start(Behaviour {
            oidc: true,
            expires_in: 2,
            ..Behaviour::default()
        })
        .await;
        let store: SharedTokenStore = Arc::new(MemoryTokenStore::new());
        let cfg = McpServerConfig::Http(
            HttpServerConfig::new(fake.mcp_url()).oauth(
                OAuthSettings::client(PRE_CLIENT_ID)
                    .secret(PRE_CLIENT_SECRET)
                    .scopes(["mcp:tools"]),
            ),
        );
        login(&fake, &cfg, &store).await;
        assert!(fake.seen(|s| s.registered.is_empty()), "no registration");

        let host = host_with(&store);
        host.add_mcp_server("web", cfg).await.unwrap();
        assert_eq!(text_of(&echo(&host, "one").await), "one");
        // (Discovery's unauthenticated probes of /mcp were refused.)
        let refused = fake.seen(|s| s.refused);
        // Past its expiry: renewed before the request (with the client's
        // secret), so the server never had to refuse one.
        tokio::time::sleep(Duration::from_millis(2100)).await;
        assert_eq!(text_of(&echo(&host, "two").await), "two");
        fake.seen(|s| {
            assert_eq!(s.token_requests, ["authorization_code", "refresh_token"]);
            assert_eq!(s.refused, refused, "refreshed before the server refused");
            assert_eq!(s.accepted.last(), s.issued.last());
        });
        host.shutdown().await;
        fake.stop();
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_401_refreshes_once_and_the_call_goes_through() {
    within(async {
        let fake = oauth_support::start(Behaviour::default()).await;
        let store: SharedTokenStore = Arc::new(MemoryTokenStore::new());
        let cfg = server(&fake);
        login(&fake, &cfg, &store).await;
        let host = host_with(&store);
        host.add_mcp_server("web", cfg).await.unwrap();
        assert_eq!(text_of(&echo(&host, "before").await), "before");

        fake.expire_access_tokens();
        let out = echo(&host, "after").await;
        assert_eq!(text_of(&out), "after", "{out:?}");
        fake.seen(|s| {
            assert!(s.refused >= 1);
            assert_eq!(
                s.token_requests.last().map(String::as_str),
                Some("refresh_token")
            );
        });
        // The renewed tokens are the ones kept.
        let kept = store.load(&fake.mcp_url()).await.unwrap().unwrap();
        assert!(kept.refreshable());
        assert!(host.failures().is_empty(), "{:?}", host.failures());
        host.shutdown().await;
        fake.stop();
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_refresh_needs_login_and_the_rest_goes_on() {
    within(async {
        let fake = oauth_support::start(Behaviour {
            expires_in: 1,
            refuse_refresh: true,
            ..Behaviour::default()
        })
        .await;
        let store: SharedTokenStore = Arc::new(MemoryTokenStore::new());
        let cfg = server(&fake);
        login(&fake, &cfg, &store).await;
        tokio::time::sleep(Duration::from_millis(1100)).await;

        let host = host_with(&store);
        host.add_fn(
            "local",
            "A tool of this process",
            ToolAnnotations::default(),
            |_: lrg_chat::tools::NoArgs| async { Ok::<_, String>("local ran") },
        )
        .unwrap();
        let started = std::time::Instant::now();
        let failure = host.add_mcp_server("web", cfg.clone()).await.unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(20), "no hang");
        assert_eq!(failure.message, "needs login: run `lrg mcp login web`");
        assert_eq!(host.failures(), [failure]);
        // The rest of the tools are there.
        let names: Vec<String> = host
            .list()
            .await
            .unwrap()
            .into_iter()
            .map(|t| t.name)
            .collect();
        assert_eq!(names, ["local"]);
        // The dead refresh token was dropped: the state says so at once.
        assert!(store.load(&fake.mcp_url()).await.unwrap().is_none());
        assert_eq!(
            auth_state(&cfg, &store).await.unwrap(),
            AuthState::NeedsLogin
        );
        host.shutdown().await;
        fake.stop();
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logout_revokes_and_the_server_then_refuses() {
    within(async {
        let fake = oauth_support::start(Behaviour::default()).await;
        let dir = tempfile::tempdir().unwrap();
        let store: SharedTokenStore = Arc::new(FileTokenStore::new(dir.path().join("t.json")));
        let cfg = server(&fake);
        login(&fake, &cfg, &store).await;
        let host = host_with(&store);
        host.add_mcp_server("web", cfg.clone()).await.unwrap();
        assert_eq!(text_of(&echo(&host, "in").await), "in");

        assert!(logout(&cfg, &store).await.unwrap(), "revoked");
        fake.seen(|s| assert_eq!(s.revoked, 2, "the refresh and the access token"));
        assert!(store.load(&fake.mcp_url()).await.unwrap().is_none());
        assert_eq!(
            auth_state(&cfg, &store).await.unwrap(),
            AuthState::NeedsLogin
        );

        // The live connection's token is dead: 401, and no way to renew it.
        let out = echo(&host, "out").await;
        assert!(out.is_error, "{out:?}");
        let failures = host.retry_failed().await;
        assert_eq!(failures.len(), 1, "{failures:?}");
        assert_eq!(failures[0].message, "needs login: run `lrg mcp login web`");
        assert!(fake.seen(|s| s.refused) >= 1);
        // A second logout has nothing to do.
        assert!(!logout(&cfg, &store).await.unwrap());
        host.shutdown().await;
        fake.stop();
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redirect_with_the_wrong_state_ends_the_login() {
    within(async {
        let fake = oauth_support::start(Behaviour {
            forged_state: Some("forged-state".into()),
            ..Behaviour::default()
        })
        .await;
        let store: SharedTokenStore = Arc::new(MemoryTokenStore::new());
        let cfg = server(&fake);
        let pending = begin_login(&cfg, store.clone(), "lrg tests").await.unwrap();
        assert_eq!(fake.approve(pending.authorization_url()).await, 400);
        let e = pending.finish(LOGIN_WAIT).await.unwrap_err();
        assert!(matches!(e, OAuthError::StateMismatch), "{e}");
        assert!(e.to_string().contains("wrong `state`"), "{e}");
        // No code was exchanged, nothing kept.
        fake.seen(|s| assert!(s.token_requests.is_empty()));
        assert!(store.load(&fake.mcp_url()).await.unwrap().is_none());

        // No redirect at all: the wait ends.
        let pending = begin_login(&cfg, store.clone(), "lrg tests").await.unwrap();
        let e = pending
            .finish(Duration::from_millis(200))
            .await
            .unwrap_err();
        assert!(matches!(e, OAuthError::TimedOut(_)), "{e}");
        fake.stop();
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oauth_does_not_apply_to_child_processes_or_static_headers() {
    within(async {
        let fake = oauth_support::start(Behaviour::default()).await;
        let store: SharedTokenStore = Arc::new(MemoryTokenStore::new());
        let stdio = McpServerConfig::Stdio(lrg_chat::tools::StdioServerConfig::new("true"));
        assert_eq!(auth_state(&stdio, &store).await.unwrap(), AuthState::None);
        let e = begin_login(&stdio, store.clone(), "lrg").await.unwrap_err();
        assert!(e.to_string().contains("child process"), "{e}");
        let headers = McpServerConfig::Http(
            HttpServerConfig::new(fake.mcp_url()).header("Authorization", "Bearer static-secret"),
        );
        assert_eq!(auth_state(&headers, &store).await.unwrap(), AuthState::None);
        let e = begin_login(&headers, store.clone(), "lrg")
            .await
            .unwrap_err();
        assert!(!e.to_string().contains("static-secret"), "{e}");
        fake.stop();
    })
    .await;
}

/// Everything written by the log's subscriber.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test(flavor = "current_thread")]
async fn no_token_appears_in_events_logs_errors_or_the_kept_chat() {
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    let _logs = tracing::subscriber::set_default(subscriber);
    within(async {
        let fake = oauth_support::start(Behaviour {
            expires_in: 2,
            ..Behaviour::default()
        })
        .await;
        let dir = tempfile::tempdir().unwrap();
        let store: SharedTokenStore = Arc::new(FileTokenStore::new(dir.path().join("t.json")));
        let cfg = McpServerConfig::Http(
            HttpServerConfig::new(fake.mcp_url())
                .oauth(OAuthSettings::client(PRE_CLIENT_ID).secret(PRE_CLIENT_SECRET)),
        );
        login(&fake, &cfg, &store).await;
        let host = Arc::new(host_with(&store));
        host.add_mcp_server("web", cfg.clone()).await.unwrap();

        // A chat whose model calls the tool twice, the token renewed between.
        let model = ScriptedModel::new(vec![
            calls(&[("echo", json!({"text": "first"}))]),
            reply("one"),
            calls(&[("echo", json!({"text": "second"}))]),
            reply("two"),
        ]);
        let sessions = dir.path().join("sessions");
        let kept = Arc::new(lrg_chat::store::JsonlStore::new(&sessions));
        let meta = crate::store_support::meta();
        kept.create(&meta).await.unwrap();
        let session = ChatSession::builder(Arc::new(FixedModel::new(model)))
            .tools(host.clone())
            .permissions(Arc::new(Permissions::default()))
            .store(kept, meta.id.clone())
            .build();
        finish(session.send("go").unwrap()).await;
        tokio::time::sleep(Duration::from_millis(2100)).await;
        fake.expire_access_tokens();
        finish(session.send("again").unwrap()).await;
        let events: Vec<String> = session
            .events()
            .entries()
            .iter()
            .map(|e| serde_json::to_string(e.as_ref()).unwrap())
            .collect();
        assert!(
            events.iter().any(|e| e.contains("second")),
            "the tool ran twice"
        );

        logout(&cfg, &store).await.unwrap();
        let out = echo(&host, "after logout").await;
        let failures = host.retry_failed().await;

        let mut everything = events.join("\n");
        everything.push_str(&format!("{out:?}\n{failures:?}\n{:?}\n", host.failures()));
        everything.push_str(&format!("{cfg:?}\n"));
        for file in walk(&sessions) {
            everything.push_str(&std::fs::read_to_string(file).unwrap_or_default());
        }
        everything.push_str(&String::from_utf8_lossy(&captured.0.lock().unwrap()));
        let (access, refresh) = fake.seen(|s| (s.issued.clone(), s.refresh_issued.clone()));
        assert!(access.len() >= 2, "the token was renewed: {access:?}");
        for secret in access
            .iter()
            .chain(refresh.iter())
            .map(String::as_str)
            .chain([PRE_CLIENT_SECRET])
        {
            assert!(!everything.contains(secret), "{secret} leaked");
        }
        host.shutdown().await;
        fake.stop();
    })
    .await;
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            files.extend(walk(&path));
        } else {
            files.push(path);
        }
    }
    files
}
