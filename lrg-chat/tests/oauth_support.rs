//! An OAuth 2.1 authorization server and an MCP server behind it, in the
//! test process (axum on 127.0.0.1:0), shared by lrg-chat's and lrg-cli's
//! tests (`#[path]`): protected-resource metadata, authorization-server
//! metadata (OAuth or OpenID Connect), dynamic registration, an authorize
//! endpoint that approves at once (a redirect with a code), a token
//! endpoint that checks PKCE and refreshes (rotating refresh tokens),
//! revocation, and `/mcp` (an `echo` tool) that takes only a live bearer
//! token and otherwise answers 401 with a `WWW-Authenticate` challenge.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::{Form, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{ServerCapabilities, ServerConfig};
use rmcp::{ServerHandler, schemars, tool, tool_handler, tool_router};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

/// The pre-registered client the fake server knows.
pub const PRE_CLIENT_ID: &str = "pre-registered-client";
/// Its secret.
pub const PRE_CLIENT_SECRET: &str = "pre-registered-secret-5d8a1c";

/// How the fake server behaves.
#[derive(Clone, Debug)]
pub struct Behaviour {
    /// How long access tokens last, in seconds.
    pub expires_in: u64,
    /// Publish the AS metadata as OpenID Connect discovery instead.
    pub oidc: bool,
    /// Refuse every refresh with `invalid_grant`.
    pub refuse_refresh: bool,
    /// Redirect with this `state` instead of the one asked for.
    pub forged_state: Option<String>,
}

impl Default for Behaviour {
    fn default() -> Self {
        Self {
            expires_in: 3600,
            oidc: false,
            refuse_refresh: false,
            forged_state: None,
        }
    }
}

struct Grant {
    client_id: String,
    challenge: String,
    redirect_uri: String,
    scope: String,
}

#[derive(Default)]
pub struct Seen {
    /// Clients registered dynamically.
    pub registered: Vec<String>,
    /// Every token request's grant type, in order.
    pub token_requests: Vec<String>,
    /// PKCE checks that failed.
    pub pkce_failures: u32,
    /// Tokens revoked.
    pub revoked: u32,
    /// Every access token, in issue order.
    pub issued: Vec<String>,
    /// Every refresh token, in issue order.
    pub refresh_issued: Vec<String>,
    /// The `/mcp` requests refused for their token.
    pub refused: u32,
    /// The access tokens `/mcp` took.
    pub accepted: Vec<String>,
}

struct Inner {
    behaviour: Behaviour,
    base: String,
    clients: HashMap<String, Vec<String>>,
    codes: HashMap<String, Grant>,
    access: HashMap<String, Instant>,
    refresh: HashMap<String, (String, String)>,
    next: u64,
    seen: Seen,
}

/// The running servers.
#[derive(Clone)]
pub struct FakeAuth {
    inner: Arc<Mutex<Inner>>,
    /// `http://127.0.0.1:PORT`.
    pub base: String,
    stop: CancellationToken,
}

impl FakeAuth {
    /// The MCP endpoint.
    pub fn mcp_url(&self) -> String {
        format!("{}/mcp", self.base)
    }

    /// What the servers saw so far.
    pub fn seen<T>(&self, f: impl FnOnce(&Seen) -> T) -> T {
        f(&self.inner.lock().unwrap().seen)
    }

    /// Change how it behaves from now on.
    pub fn set(&self, f: impl FnOnce(&mut Behaviour)) {
        f(&mut self.inner.lock().unwrap().behaviour);
    }

    /// Make every access token issued so far invalid (as a server-side
    /// revocation does), keeping the refresh tokens.
    pub fn expire_access_tokens(&self) {
        self.inner.lock().unwrap().access.clear();
    }

    /// Stop serving.
    pub fn stop(&self) {
        self.stop.cancel();
    }

    /// Play the browser: open the authorization URL (the server approves
    /// at once), follow its redirect to the loopback listener, and return
    /// the listener's status.
    pub async fn approve(&self, authorization_url: &str) -> u16 {
        lrg_providers::transport::ensure_tls_provider();
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(Duration::from_secs(10))
            .build()
            .unwrap();
        let answer = client.get(authorization_url).send().await.unwrap();
        assert_eq!(answer.status().as_u16(), 302, "{:?}", answer.text().await);
        let location = answer.headers()["location"].to_str().unwrap().to_owned();
        client
            .get(&location)
            .send()
            .await
            .unwrap()
            .status()
            .as_u16()
    }
}

/// Start both servers.
pub async fn start(behaviour: Behaviour) -> FakeAuth {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let inner = Arc::new(Mutex::new(Inner {
        behaviour,
        base: base.clone(),
        clients: HashMap::new(),
        codes: HashMap::new(),
        access: HashMap::new(),
        refresh: HashMap::new(),
        next: 0,
        seen: Seen::default(),
    }));
    let stop = CancellationToken::new();
    use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
    use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
    let mcp: StreamableHttpService<Echo, LocalSessionManager> = StreamableHttpService::new(
        || Ok(Echo::new()),
        Default::default(),
        StreamableHttpServerConfig::default()
            .with_sse_keep_alive(None)
            .with_cancellation_token(stop.child_token()),
    );
    let guarded = axum::Router::new()
        .nest_service("/mcp", mcp)
        .layer(axum::middleware::from_fn_with_state(inner.clone(), bearer));
    let app = axum::Router::new()
        .route(
            "/.well-known/oauth-protected-resource/mcp",
            get(resource_metadata),
        )
        .route(
            "/.well-known/oauth-authorization-server/as",
            get(as_metadata_oauth),
        )
        .route(
            "/.well-known/openid-configuration/as",
            get(as_metadata_oidc),
        )
        .route("/as/register", post(register))
        .route("/as/authorize", get(authorize))
        .route("/as/token", post(token))
        .route("/as/revoke", post(revoke))
        .with_state(inner.clone())
        .merge(guarded);
    let s = stop.clone();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app)
            .with_graceful_shutdown(s.cancelled_owned())
            .await;
    });
    FakeAuth { inner, base, stop }
}

type Shared = State<Arc<Mutex<Inner>>>;

async fn resource_metadata(State(s): Shared) -> Response {
    let base = s.lock().unwrap().base.clone();
    axum::Json(json!({
        "resource": format!("{base}/mcp"),
        "authorization_servers": [format!("{base}/as")],
        "scopes_supported": ["mcp:tools"],
        "bearer_methods_supported": ["header"],
    }))
    .into_response()
}

fn as_metadata(base: &str) -> Value {
    json!({
        "issuer": format!("{base}/as"),
        "authorization_endpoint": format!("{base}/as/authorize"),
        "token_endpoint": format!("{base}/as/token"),
        "registration_endpoint": format!("{base}/as/register"),
        "revocation_endpoint": format!("{base}/as/revoke"),
        "response_types_supported": ["code"],
        "grant_types_supported": ["authorization_code", "refresh_token"],
        "code_challenge_methods_supported": ["S256"],
        "token_endpoint_auth_methods_supported": ["none", "client_secret_basic", "client_secret_post"],
        "scopes_supported": ["mcp:tools"],
    })
}

async fn as_metadata_oauth(State(s): Shared) -> Response {
    let s = s.lock().unwrap();
    if s.behaviour.oidc {
        return StatusCode::NOT_FOUND.into_response();
    }
    axum::Json(as_metadata(&s.base)).into_response()
}

async fn as_metadata_oidc(State(s): Shared) -> Response {
    let s = s.lock().unwrap();
    if !s.behaviour.oidc {
        return StatusCode::NOT_FOUND.into_response();
    }
    let mut m = as_metadata(&s.base);
    m["jwks_uri"] = json!(format!("{}/as/jwks", s.base));
    m["subject_types_supported"] = json!(["public"]);
    m["id_token_signing_alg_values_supported"] = json!(["RS256"]);
    axum::Json(m).into_response()
}

async fn register(State(s): Shared, axum::Json(body): axum::Json<Value>) -> Response {
    let mut s = s.lock().unwrap();
    s.next += 1;
    let id = format!("dyn-client-{}", s.next);
    let uris: Vec<String> = body["redirect_uris"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    s.clients.insert(id.clone(), uris.clone());
    s.seen.registered.push(id.clone());
    (
        StatusCode::CREATED,
        axum::Json(
            json!({"client_id": id, "redirect_uris": uris, "token_endpoint_auth_method": "none"}),
        ),
    )
        .into_response()
}

async fn authorize(State(s): Shared, Query(q): Query<HashMap<String, String>>) -> Response {
    let mut s = s.lock().unwrap();
    let bad = |why: &str| (StatusCode::BAD_REQUEST, why.to_owned()).into_response();
    let (Some(client_id), Some(redirect_uri), Some(state)) =
        (q.get("client_id"), q.get("redirect_uri"), q.get("state"))
    else {
        return bad("client_id, redirect_uri and state are required");
    };
    if q.get("response_type").map(String::as_str) != Some("code") {
        return bad("response_type must be code");
    }
    if q.get("code_challenge_method").map(String::as_str) != Some("S256") {
        return bad("PKCE S256 is required");
    }
    let Some(challenge) = q.get("code_challenge") else {
        return bad("code_challenge is required");
    };
    let known = client_id == PRE_CLIENT_ID
        || s.clients
            .get(client_id)
            .is_some_and(|uris| uris.contains(redirect_uri));
    if !known || !redirect_uri.starts_with("http://127.0.0.1:") {
        return bad("unknown client or redirect_uri");
    }
    s.next += 1;
    let code = format!("code-{}-{}", s.next, rand_part());
    s.codes.insert(
        code.clone(),
        Grant {
            client_id: client_id.clone(),
            challenge: challenge.clone(),
            redirect_uri: redirect_uri.clone(),
            scope: q.get("scope").cloned().unwrap_or_default(),
        },
    );
    let state = s.behaviour.forged_state.clone().unwrap_or(state.clone());
    let mut location = reqwest::Url::parse(redirect_uri).unwrap();
    location
        .query_pairs_mut()
        .append_pair("code", &code)
        .append_pair("state", &state);
    (
        StatusCode::FOUND,
        [("location", location.to_string())],
        "redirecting",
    )
        .into_response()
}

fn rand_part() -> String {
    use std::hash::{BuildHasher as _, Hasher as _};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64,
    );
    format!("{:016x}", h.finish())
}

fn oauth_error(code: &str) -> Response {
    (StatusCode::BAD_REQUEST, axum::Json(json!({"error": code}))).into_response()
}

fn issue(s: &mut Inner, client_id: &str, scope: &str) -> Response {
    s.next += 1;
    let access = format!("at-{}-{}", s.next, rand_part());
    let refresh = format!("rt-{}-{}", s.next, rand_part());
    let lasts = Duration::from_secs(s.behaviour.expires_in);
    s.access.insert(access.clone(), Instant::now() + lasts);
    s.refresh
        .insert(refresh.clone(), (client_id.to_owned(), scope.to_owned()));
    s.seen.issued.push(access.clone());
    s.seen.refresh_issued.push(refresh.clone());
    axum::Json(json!({
        "access_token": access,
        "token_type": "Bearer",
        "expires_in": s.behaviour.expires_in,
        "refresh_token": refresh,
        "scope": scope,
    }))
    .into_response()
}

/// The client as the token request authenticates it: Basic auth, or the
/// form's `client_id` (and `client_secret`).
fn client_of(
    headers: &HeaderMap,
    form: &HashMap<String, String>,
) -> Option<(String, Option<String>)> {
    use base64::Engine as _;
    if let Some(basic) = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Basic "))
    {
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(basic)
            .ok()?;
        let text = String::from_utf8(decoded).ok()?;
        let (id, secret) = text.split_once(':')?;
        let unescape = |s: &str| {
            reqwest::Url::parse(&format!("http://x/?v={s}"))
                .ok()
                .and_then(|u| u.query_pairs().next().map(|(_, v)| v.into_owned()))
                .unwrap_or_default()
        };
        return Some((unescape(id), Some(unescape(secret))));
    }
    Some((
        form.get("client_id")?.clone(),
        form.get("client_secret").cloned(),
    ))
}

async fn token(
    State(s): Shared,
    headers: HeaderMap,
    Form(form): Form<HashMap<String, String>>,
) -> Response {
    let mut s = s.lock().unwrap();
    let grant_type = form.get("grant_type").cloned().unwrap_or_default();
    s.seen.token_requests.push(grant_type.clone());
    let Some((client_id, secret)) = client_of(&headers, &form) else {
        return oauth_error("invalid_client");
    };
    if client_id == PRE_CLIENT_ID && secret.as_deref() != Some(PRE_CLIENT_SECRET) {
        return oauth_error("invalid_client");
    }
    match grant_type.as_str() {
        "authorization_code" => {
            let Some(grant) = form.get("code").and_then(|c| s.codes.remove(c)) else {
                return oauth_error("invalid_grant");
            };
            let verifier = form.get("code_verifier").cloned().unwrap_or_default();
            let challenge = oauth2::PkceCodeChallenge::from_code_verifier_sha256(
                &oauth2::PkceCodeVerifier::new(verifier),
            );
            if challenge.as_str() != grant.challenge {
                s.seen.pkce_failures += 1;
                return oauth_error("invalid_grant");
            }
            if grant.client_id != client_id || form.get("redirect_uri") != Some(&grant.redirect_uri)
            {
                return oauth_error("invalid_grant");
            }
            issue(&mut s, &client_id, &grant.scope)
        }
        "refresh_token" => {
            if s.behaviour.refuse_refresh {
                return oauth_error("invalid_grant");
            }
            let Some((owner, scope)) = form.get("refresh_token").and_then(|r| s.refresh.remove(r))
            else {
                return oauth_error("invalid_grant");
            };
            if owner != client_id {
                return oauth_error("invalid_grant");
            }
            issue(&mut s, &client_id, &scope)
        }
        _ => oauth_error("unsupported_grant_type"),
    }
}

async fn revoke(State(s): Shared, Form(form): Form<HashMap<String, String>>) -> Response {
    let mut s = s.lock().unwrap();
    if let Some(token) = form.get("token") {
        let a = s.access.remove(token).is_some();
        let r = s.refresh.remove(token).is_some();
        if a || r {
            s.seen.revoked += 1;
        }
    }
    StatusCode::OK.into_response()
}

async fn bearer(
    State(s): Shared,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let token = req
        .headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::to_owned);
    let challenge = {
        let mut s = s.lock().unwrap();
        let live = token
            .as_ref()
            .and_then(|t| s.access.get(t))
            .is_some_and(|until| *until > Instant::now());
        if live {
            s.seen.accepted.push(token.clone().unwrap_or_default());
            None
        } else {
            s.seen.refused += 1;
            Some(format!(
                "Bearer resource_metadata=\"{}/.well-known/oauth-protected-resource/mcp\", scope=\"mcp:tools\"",
                s.base
            ))
        }
    };
    match challenge {
        None => next.run(req).await,
        Some(c) => (StatusCode::UNAUTHORIZED, [("www-authenticate", c)], "").into_response(),
    }
}

#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
pub struct EchoArgs {
    /// The text to send back.
    pub text: String,
}

/// The MCP server behind the bearer check: one tool, `echo`.
#[derive(Clone)]
pub struct Echo {
    tool_router: ToolRouter<Self>,
}

impl Echo {
    fn new() -> Self {
        Self {
            tool_router: Self::tool_router(),
        }
    }
}

#[tool_router]
impl Echo {
    #[tool(description = "Send the text back", annotations(read_only_hint = true))]
    fn echo(&self, Parameters(args): Parameters<EchoArgs>) -> String {
        args.text
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for Echo {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }
}
