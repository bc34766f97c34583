//! The HTTP API and the chat page: `/v1/chat/*` on axum, as a router an app
//! mounts ([`ChatServer::router`]) and that `lrg serve` runs.
//!
//! # Tokens
//!
//! Opening a chat (`POST /v1/chat/sessions`) takes the app's **agent token**
//! as `Authorization: Bearer …`. Each chat then has its own **chat token**
//! (256 random bits, compared in constant time), handed to the page in the
//! URL fragment (`/v1/ui/chat#session=…&token=…`), which browsers never send
//! to a server or write to a log. A request whose `Origin` is not one of
//! [`HttpConfig::allow_origin`] is refused even with the right token. A wrong
//! token, a foreign origin, an unknown chat and an ended chat all get the
//! same 403, byte for byte, headers included.
//!
//! # Routes
//!
//! | route | token | what |
//! | --- | --- | --- |
//! | `POST /v1/chat/sessions` | agent | `{model?, mcpServers?, permissions?, system?}` → `201 {session, chat_token, page_url}` |
//! | `POST /v1/chat/sessions/{id}/messages` | chat | `{text, images?: [{mime, data}]}` → 202; 409 while busy |
//! | `POST /v1/chat/sessions/{id}/stop` | chat | stop the running message |
//! | `POST /v1/chat/sessions/{id}/retry` | chat | answer the last message again → 202 |
//! | `POST /v1/chat/sessions/{id}/clear` | chat | empty the conversation |
//! | `POST /v1/chat/sessions/{id}/compact` | chat | summarize the conversation → 202 |
//! | `POST /v1/chat/sessions/{id}/approvals/{call_id}` | chat | `{answer: "once"\|"chat"\|"always"\|"deny", note?}` |
//! | `GET`, `PUT /v1/chat/sessions/{id}/permissions` | chat | `{mode, rules, bulk_limit, saved, tools}`; PUT `{mode?, rules?, bulk_limit?}` |
//! | `GET /v1/chat/sessions/{id}/models` | chat | `{current, groups: [{provider, models}]}` |
//! | `POST /v1/chat/sessions/{id}/model` | chat | `{model, confirm}` → `201 {session, chat_token, page_url}` of the new chat; 409 busy or unconfirmed |
//! | `GET /v1/chat/sessions/{id}/events?after=N` | chat | SSE: one JSON event per `data:` line, `id:` is the seq |
//! | `GET /v1/chat/sessions/{id}/transcript` | chat | the conversation as rendered |
//! | `GET /v1/chat/sessions/{id}/images/{call_id}/{n}` | chat | image `n` (from 0) a tool returned |
//! | `DELETE /v1/chat/sessions/{id}` | chat | end the chat |
//! | `GET /v1/ui/chat` | none | the page |
//!
//! Errors are `{"error": {"kind", "message"}}` ([`ErrorKind`]): 400 naming
//! the field, 403, 404, 409 busy, 413 too large, 429 too many.

mod auth;
mod error;
mod menu;
mod opener;
mod page;
mod routes;
mod sessions;
mod sse;
mod transcript;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::routing::{get, post};
use serde::Serialize;

pub use error::{ApiError, ErrorKind};
pub use menu::{MenuEntry, MenuGroup, ModelMenu, StaticMenu};
pub use opener::{ChatOpener, ChatSpec, OpenError, OpenedChat, ResolveModel, StandardOpener};

use sessions::Chats;

/// A fresh random token (256 bits, base64url), e.g. for an agent token.
pub fn generate_token() -> String {
    auth::new_token()
}

/// The limits of a server; each is answered with a clear 413 or 429.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Limits {
    /// Largest request body in bytes (413). Default 8 MiB (messages carry
    /// images).
    pub body_bytes: usize,
    /// Longest message text in characters (413). Default 100,000.
    pub message_chars: usize,
    /// Chats open at once for the agent token (429). Default 32.
    pub chats: usize,
    /// Event streams open at once on one chat (429). Default 8.
    pub subscribers_per_chat: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            body_bytes: 8 << 20,
            message_chars: 100_000,
            chats: 32,
            subscribers_per_chat: 8,
        }
    }
}

/// How a [`ChatServer`] is set up.
#[derive(Clone)]
pub struct HttpConfig {
    agent_token: String,
    allowed_origins: Vec<String>,
    limits: Limits,
    heartbeat: Duration,
    defaults: ChatSpec,
    base_path: String,
}

impl std::fmt::Debug for HttpConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpConfig")
            .field("agent_token", &"<redacted>")
            .field("allowed_origins", &self.allowed_origins)
            .field("limits", &self.limits)
            .field("heartbeat", &self.heartbeat)
            .finish_non_exhaustive()
    }
}

impl HttpConfig {
    /// A server whose chats are opened with `agent_token`.
    pub fn new(agent_token: impl Into<String>) -> Self {
        Self {
            agent_token: agent_token.into(),
            allowed_origins: Vec::new(),
            limits: Limits::default(),
            heartbeat: Duration::from_secs(15),
            defaults: ChatSpec::default(),
            base_path: String::new(),
        }
    }

    /// Accept requests from pages of `origin` (`http://127.0.0.1:8080`:
    /// scheme, host and port, as browsers send it). Requests without an
    /// `Origin` are always accepted; any other origin gets the 403.
    pub fn allow_origin(mut self, origin: impl Into<String>) -> Self {
        self.allowed_origins
            .push(origin.into().trim_end_matches('/').to_string());
        self
    }

    /// The limits.
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// How often an idle event stream sends a heartbeat comment (default 15 s).
    pub fn heartbeat(mut self, every: Duration) -> Self {
        self.heartbeat = every;
        self
    }

    /// What a chat is opened with when the request leaves a field out.
    pub fn defaults(mut self, defaults: ChatSpec) -> Self {
        self.defaults = defaults;
        self
    }

    /// Where the router is mounted (e.g. `/lrg`), for the `page_url`s it
    /// hands out. Default: the root.
    pub fn base_path(mut self, path: impl Into<String>) -> Self {
        self.base_path = path.into().trim_end_matches('/').to_string();
        self
    }
}

/// A chat as its opener is told: the id, its token, and the page address
/// (relative to the server) with both in the fragment.
#[derive(Clone, Serialize)]
#[non_exhaustive]
pub struct ChatLink {
    /// The chat's id.
    pub session: String,
    /// Its token (Bearer for every route of the chat).
    pub chat_token: String,
    /// `/v1/ui/chat#session=…&token=…`.
    pub page_url: String,
}

impl std::fmt::Debug for ChatLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatLink")
            .field("session", &self.session)
            .field("chat_token", &"<redacted>")
            .finish_non_exhaustive()
    }
}

pub(crate) struct AppState {
    config: HttpConfig,
    opener: Arc<dyn ChatOpener>,
    menu: Arc<dyn ModelMenu>,
    chats: Chats,
}

/// The chats of one server and the router that serves them. Cheap to clone.
#[derive(Clone)]
pub struct ChatServer {
    state: Arc<AppState>,
}

impl std::fmt::Debug for ChatServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatServer")
            .field("chats", &self.state.chats.len())
            .finish_non_exhaustive()
    }
}

impl ChatServer {
    /// A server opening chats with `opener` and offering `menu`.
    pub fn new(config: HttpConfig, opener: Arc<dyn ChatOpener>, menu: Arc<dyn ModelMenu>) -> Self {
        Self {
            state: Arc::new(AppState {
                config,
                opener,
                menu,
                chats: Chats::default(),
            }),
        }
    }

    /// The routes (see the [module docs](self)).
    pub fn router(&self) -> Router {
        use axum::routing::MethodRouter;
        let chat = |r: MethodRouter<Arc<AppState>>| r.fallback(routes::method_not_allowed);
        Router::new()
            .route("/v1/chat/sessions", chat(post(routes::open)))
            .route(
                "/v1/chat/sessions/{id}",
                chat(axum::routing::delete(routes::end)),
            )
            .route(
                "/v1/chat/sessions/{id}/messages",
                chat(post(routes::message)),
            )
            .route("/v1/chat/sessions/{id}/stop", chat(post(routes::stop)))
            .route("/v1/chat/sessions/{id}/retry", chat(post(routes::retry)))
            .route("/v1/chat/sessions/{id}/clear", chat(post(routes::clear)))
            .route(
                "/v1/chat/sessions/{id}/compact",
                chat(post(routes::compact)),
            )
            .route(
                "/v1/chat/sessions/{id}/approvals/{call_id}",
                chat(post(routes::approval)),
            )
            .route(
                "/v1/chat/sessions/{id}/permissions",
                chat(get(routes::get_permissions).put(routes::put_permissions)),
            )
            .route("/v1/chat/sessions/{id}/models", chat(get(routes::models)))
            .route(
                "/v1/chat/sessions/{id}/model",
                chat(post(routes::switch_model)),
            )
            .route("/v1/chat/sessions/{id}/events", chat(get(routes::events)))
            .route(
                "/v1/chat/sessions/{id}/transcript",
                chat(get(routes::transcript)),
            )
            .route(
                "/v1/chat/sessions/{id}/images/{call_id}/{n}",
                chat(get(routes::image)),
            )
            .route("/v1/ui/chat", chat(get(page::page)))
            .fallback(routes::not_found)
            .layer(axum::middleware::map_response(routes::security_headers))
            .with_state(self.state.clone())
    }

    /// Open a chat from the app itself (no agent token needed): `lrg serve`
    /// opens the first one this way and prints its page URL.
    pub async fn open_chat(&self, spec: ChatSpec) -> Result<ChatLink, ApiError> {
        self.state.open_chat(spec).await
    }

    /// How many chats are open.
    pub fn chat_count(&self) -> usize {
        self.state.chats.len()
    }

    /// End every chat: streams close, running messages stop, a running tool
    /// finishes and its result is recorded, then tool servers stop.
    pub async fn shutdown(&self) {
        let chats = self.state.chats.drain();
        futures::future::join_all(chats.iter().map(|c| c.end())).await;
    }
}
