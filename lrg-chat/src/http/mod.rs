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
//! same 403, byte for byte, headers included. With
//! [`HttpConfig::loopback_hosts_only`] (what `lrg serve` sets on a loopback
//! bind) a request whose `Host` is not `localhost`, `127.x.x.x` or `[::1]`
//! gets that 403 too, on every route and the page (DNS rebinding).
//!
//! What each token may do:
//!
//! - The **agent token** is the app's own trust. It opens chats and may
//!   give them `mcpServers` (which start programs and reach addresses: the
//!   app's to choose), `permissions`, `system`, `local_only`, keys, and a
//!   `model`. A model that names a program or a path on the server
//!   (`acp:COMMAND`, `script:FILE`, `replay:FILE`, `llama:FILE`, `mlx:DIR`,
//!   the agent CLIs) is taken only when it is the server's default or an
//!   available model of the menu, by its exact id, unless
//!   [`HttpConfig::allow_model_specs`] is on. A model's address is never
//!   taken from a request. [`HttpConfig::try_new`] refuses a token shorter
//!   than [`MIN_TOKEN_CHARS`].
//! - A **chat token** works its own chat: messages, stop, retry, clear,
//!   compact, approvals, its permissions (mode, rules, bulk limit, the
//!   local-only lock: no paths), its events, transcript and images, and
//!   ending it. It may switch only to an available model of its menu, by
//!   its exact id, and carries the agent's tools over; it can never name
//!   tools, a program, a path or an address.
//! - An **owner token** (minted by the agent token: `POST
//!   /v1/owners/{owner}/tokens`) lists, starts, opens, names and deletes
//!   the chats of one owner, and works every chat route of each of them as
//!   its chat token does; never another owner's. See [Owners](#owners).
//!
//! When a model that names a program or a path cannot be loaded, a request
//! gets one fixed 400 (the same for a missing, unreadable or malformed
//! file, never quoting it), and the reason goes to the log. Bodies are read
//! strictly: one JSON object, nothing after it, no unknown fields, an
//! object wherever one is expected.
//!
//! # Routes
//!
//! | route | token | what |
//! | --- | --- | --- |
//! | `POST /v1/chat/sessions` | agent | `{model?, mcpServers?, permissions?, system?, local_only?, client_key?, context_key?, replace?, carry_over?, owner?, sub_agents?}` → `201 {session, chat_token, page_url, opened}` (`200` when the keys name a live chat); `409 {error, stored_model}` (kind `other_model`) when the keys name a chat on another model and neither `replace` nor `carry_over` is set |
//! | `POST /v1/chat/sessions/{id}/messages` | chat (or its owner's) | `{text, images?: [{mime, data}], output_schema?}` or `{prompt: {server, name, arguments?}, output_schema?}` (a tool server's prompt, expanded; 404 for an unknown server or prompt, 400 naming a missing or unknown argument) → `202 {last_seq, saved?}` once the message is kept (see below); 409 while busy. With `output_schema` (a JSON Schema object) the message is typed ([`ChatSession::send_output`](crate::session::ChatSession::send_output)): its final `assistant_turn` carries the validated `json`; a schema that cannot be used is a 400 naming the problem, before anything is recorded |
//! | `GET /v1/chat/sessions/{id}/prompts` | chat | `{prompts: [{server, name, title?, description, arguments: [{name, description, required}]}], failed_servers: [{error}]}`: the prompts of the chat's tool servers ([`crate::tools::ToolHost::prompts`]) |
//! | `POST /v1/chat/sessions/{id}/stop` | chat | stop the running message |
//! | `POST /v1/chat/sessions/{id}/retry` | chat | `{text?}`: answer the last message again, with `text` in place of its text when given (an edit; 400 when empty) → `202 {last_seq, saved?}` once the rewind is kept |
//! | `POST /v1/chat/sessions/{id}/clear` | chat | empty the conversation → `200 {last_seq, saved?}` once the emptied chat is kept and `cleared` published |
//! | `POST /v1/chat/sessions/{id}/compact` | chat | summarize the conversation → `202 {last_seq, saved?}`; `compacted` follows once the summary is kept |
//! | `POST /v1/chat/sessions/{id}/approvals/{call_id}` | chat | `{answer: "once"\|"chat"\|"always"\|"deny", note?}` |
//! | `POST /v1/chat/sessions/{id}/questions/{question_id}` | chat | `{action: "accept"\|"decline"\|"cancel", content?}`: answer a tool server's `question` (content: the form's field values) → `200 {accepted}`; 400 names the field (`content.NAME`) and the question stays open; 404 when it is not open |
//! | `GET`, `PUT /v1/chat/sessions/{id}/permissions` | chat | `{mode, rules, bulk_limit, saved, local_only, tools}`; PUT `{mode?, rules?, bulk_limit?, local_only?}` |
//! | `GET /v1/chat/sessions/{id}/models` | chat | `{current, groups: [{provider, models}], cloud_consented}` (`cloud_consented`: the person agreed to send this chat to the current model's provider) |
//! | `POST /v1/chat/sessions/{id}/consent` | chat | `{provider, always?}`: the person agreed to send this chat to `provider`'s cloud; kept with the chat, and with `always` ("don't ask again") in the permission settings → `200 {provider, always, saved, settings_saved?}` |
//! | `POST /v1/chat/sessions/{id}/model` | chat | `{model, carry_over?}`, `model` an available id of `…/models` (else 400) → `201 {session, chat_token, page_url, opened}` of a new chat, this one kept and not ended; with `carry_over: true`, `200` with this same chat, now on `model`; 409 busy (`confirm`, from the two-step switch, is accepted and needs no answer) |
//! | `GET /v1/chat/sessions/{id}/events?after=N` | chat | SSE: one JSON event per `data:` line, `id:` is the seq |
//! | `GET /v1/chat/sessions/{id}/sub_agents` | chat | `{sub_agents: [{n, id, description, status, call_id, started_at, ended_at}]}`: the chat's sub-agents, by number, kept ones of earlier runs included (see [`crate::sub_agents`]) |
//! | `GET /v1/chat/sessions/{id}/sub_agents/{n}/events?after=N` | chat | SSE: sub-agent `n`'s own events, as `…/events`; 409 while it is queued |
//! | `GET /v1/chat/sessions/{id}/transcript` | chat | the conversation as rendered ([`crate::transcript::Transcript`]); headers `lrg-last-seq` (follow the events from there after a `resync`) and `lrg-first-kept-seq` (the oldest event the log keeps) |
//! | `GET /v1/chat/sessions/{id}/images/{call_id}/{n}` | chat | image `n` (from 0) a tool returned |
//! | `DELETE /v1/chat/sessions/{id}` | chat | end the chat and delete its stored copy |
//! | `POST /v1/owners/{owner}/tokens` | agent | → `201 {token, owner}`: a new owner token |
//! | `GET /v1/owners/{owner}/chats` | owner, or agent | → `200 {owner, chats: [{session, title, name, model, created_at, updated_at, running, live, archived}]}`, newest first |
//! | `POST /v1/owners/{owner}/chats` | owner, or agent | an open's body less `mcpServers` and keys (a model: the default or an available one of the menu) → `201 {session, chat_token, model}` |
//! | `POST /v1/owners/{owner}/chats/{session}/open` | owner, or agent | → `200 {session, chat_token, model}`: resumed from the store when not live |
//! | `PATCH /v1/owners/{owner}/chats/{session}` | owner, or agent | `{name}` (at most 200 characters; empty clears it) → `200` its list entry |
//! | `DELETE /v1/owners/{owner}/chats/{session}` | owner, or agent | → `204`: ended when live, deleted from the store |
//! | `GET /v1/ui/chat` | none (the `Host` rule holds) | the page |
//!
//! An acknowledgement (`202`, a clear's `200`) is given only once what it
//! acknowledges is durable in the store (appended and `sync_data`'d), so a
//! crash right after it loses nothing. When the store failed instead, the
//! chat goes on in memory only: the answer then carries `"saved": false`
//! (absent otherwise), and a `warning` event said why.
//!
//! Errors are `{"error": {"kind", "message"}}` ([`ApiErrorKind`]): 400 naming
//! the field, 403, 404, 409 busy, 413 too large, 429 too many.
//!
//! # Keyed chats and the store
//!
//! Chats live in a [`SessionRegistry`], over the store given with
//! [`HttpConfig::store`]. Opening with both `client_key` and `context_key`
//! (each 1–64 bytes of `[A-Za-z0-9._:@-]` with a letter or digit; one alone
//! is a 400 naming the rule) is create-or-resume, and `opened` says which:
//!
//! - `live`: the keys name a chat open now on the same model. The answer is
//!   that chat, with **the same chat token** (`200`): the agent token's
//!   holder may hold every chat token anyway, and a page already showing
//!   the chat keeps working.
//! - `resumed`: the keys name a stored chat on the same model (after a
//!   restart, or after it was put away idle). It is rebuilt under the same
//!   id with a new chat token (tokens are never stored), and its event log
//!   begins with its history as numbered events, so a page connecting with
//!   `after=0` shows the conversation.
//! - `created`: nothing was known.
//!
//! Keys that name a chat on another model are a `409` (kind `other_model`,
//! with the chat's `stored_model`), and nothing changes: a conversation is
//! not handed to another model unasked. The body says what to do instead:
//!
//! - `replace: true` → `replaced`: the old chat is archived (kept with its
//!   history and listed, its keys released; live, it goes on) and a new one
//!   starts under the keys.
//! - `carry_over: true` → `carried_over`: the chat is rebuilt on the new
//!   model under its id, without the old model's native parts, and a
//!   `model_switched` event follows its history.
//!
//! With keys and no `model`, the chat resumes on its own model.
//!
//! Every chat is kept in the store, keyed or not, and belongs to an owner
//! (see [Owners](#owners)), whose list finds it again after a restart. A
//! chat idle longer than [`HttpConfig::idle`] (with no page watching) is
//! put away to the store by [`ChatServer::evict_idle`]: its token stops
//! working, and opening it again (by its keys, or through its owner)
//! resumes it. When [`Limits::chats`] are open, the longest-idle one is put
//! away to make room. Without a store, chats are kept in memory only. `DELETE` deletes the stored copy under the store's lock, after
//! the chat has stopped, so no late write brings it back: nothing else
//! deletes a stored chat. Switching models (`POST …/model`) opens a new
//! chat under the same keys and keeps the old one (archived when keyed, and
//! live: its token goes on working), or, with `carry_over: true`, moves
//! this chat's conversation to the model in place.

//!
//! # Owners
//!
//! A chat belongs to an *owner*, a name of 1–64 characters of
//! `[A-Za-z0-9._-]` (a bad one is a 400 naming what is wrong): the `owner`
//! of `POST /v1/chat/sessions`, else [`DEFAULT_OWNER`](crate::store::DEFAULT_OWNER).
//! It is kept with the chat in the store. An owner token (256 random bits,
//! compared in constant time, kept in this process's memory only, as chat
//! tokens are) is minted by the agent token, or by the app
//! ([`ChatServer::owner_token`]: `lrg serve` prints the default owner's in
//! the page URL, `#session=…&token=…&owner=default&owner_token=…`). Each
//! owner holds at most 64 at once; minting more forgets the oldest. A
//! list's `title` is the chat's name, else its first user message clipped
//! to 80 characters, else "New chat"; `running` says a message is being
//! answered now, `live` that it is in memory; times are RFC 3339 UTC. A
//! wrong token, another owner's chat and an unknown one all get the one
//! 403.

mod auth;
mod body;
mod client_tools;
mod conn;
mod consent;
mod error;
mod fuzz_bodies;
mod guard;
mod menu;
mod model_rule;
mod open;
mod opener;
mod owner_auth;
mod owners;
#[cfg(feature = "acp")]
pub(crate) use owners::rfc3339;
mod page;
mod prompt_route;
mod prompts_route;
mod questions;
mod routes;
mod sessions;
mod sse;
mod sub_agents;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::routing::{get, post};
use serde::Serialize;

pub use conn::{ServeOptions, default_max_connections, serve};
pub use error::{ApiError, ApiErrorKind};
pub(crate) use fuzz_bodies::http_bodies;
pub use menu::{MenuEntry, MenuGroup, ModelMenu, StaticMenu};
pub use opener::{ChatOpener, ChatSpec, OpenError, OpenedChat, ResolveModel, StandardOpener};

use crate::registry::{RegistryConfig, SessionRegistry};
use crate::session::ChatSession;
use crate::store::SessionStore;
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
    /// Chats open at once for the agent token (429 when every open chat is
    /// unkeyed or busy; otherwise the longest-idle keyed chat is put away to
    /// make room). Default 32.
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
    store: Option<Arc<dyn SessionStore>>,
    idle: Duration,
    allow_model_specs: bool,
    loopback_hosts_only: bool,
    max_kept_rows: Option<usize>,
}

impl std::fmt::Debug for HttpConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpConfig")
            .field("agent_token", &"<redacted>")
            .field("allowed_origins", &self.allowed_origins)
            .field("limits", &self.limits)
            .field("heartbeat", &self.heartbeat)
            .field("store", &self.store)
            .field("idle", &self.idle)
            .field("allow_model_specs", &self.allow_model_specs)
            .field("loopback_hosts_only", &self.loopback_hosts_only)
            .finish_non_exhaustive()
    }
}

/// An agent token too short or too repetitive to be one (see
/// [`HttpConfig::try_new`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the token has {chars} characters; a token needs at least {min}, of at least {distinct} \
     different ones: make one with `openssl rand -hex 16`",
    min = MIN_TOKEN_CHARS,
    distinct = MIN_DISTINCT_TOKEN_CHARS
)]
#[non_exhaustive]
pub struct WeakToken {
    /// How many characters it has.
    pub chars: usize,
}

/// The fewest characters an agent token may have (what `openssl rand -hex
/// 16` prints: 128 bits).
pub const MIN_TOKEN_CHARS: usize = auth::MIN_TOKEN_CHARS;

/// Whether `token` is long enough to be an agent token (a secret of this
/// kind: [`MIN_TOKEN_CHARS`] characters or more). Says nothing of the
/// token's content, so the error may be shown.
///
/// A token of one character repeated, or of a few (`aaaa…`, `abab…`), is
/// refused too: fewer than [`MIN_DISTINCT_TOKEN_CHARS`] different characters
/// is no random secret (32 random hex digits have about 14).
pub fn check_token(token: &str) -> Result<(), WeakToken> {
    let chars = token.chars().count();
    let mut seen: Vec<char> = token.chars().collect();
    seen.sort_unstable();
    seen.dedup();
    if chars < MIN_TOKEN_CHARS || seen.len() < MIN_DISTINCT_TOKEN_CHARS {
        Err(WeakToken { chars })
    } else {
        Ok(())
    }
}

/// The fewest different characters an agent token may have.
pub const MIN_DISTINCT_TOKEN_CHARS: usize = 8;

impl HttpConfig {
    /// A server whose chats are opened with `agent_token`, which is taken
    /// as it is: an app handing in a token from outside checks it with
    /// [`HttpConfig::try_new`] (or [`check_token`]); [`ChatServer::new`]
    /// logs an error for a weak one.
    pub fn new(agent_token: impl Into<String>) -> Self {
        Self {
            agent_token: agent_token.into(),
            allowed_origins: Vec::new(),
            limits: Limits::default(),
            heartbeat: Duration::from_secs(15),
            defaults: ChatSpec::default(),
            base_path: String::new(),
            store: None,
            idle: crate::registry::IDLE,
            allow_model_specs: false,
            loopback_hosts_only: false,
            max_kept_rows: None,
        }
    }

    /// As [`HttpConfig::new`], refusing an agent token shorter than
    /// [`MIN_TOKEN_CHARS`] (one a caller could guess).
    pub fn try_new(agent_token: impl Into<String>) -> Result<Self, WeakToken> {
        let agent_token = agent_token.into();
        check_token(&agent_token)?;
        Ok(Self::new(agent_token))
    }

    /// Let the agent token open chats on models that name a program or a
    /// path on the server (`acp:COMMAND`, `script:FILE`, `replay:FILE`,
    /// `llama:FILE`, `mlx:DIR`, agent CLIs) beyond those the menu offers.
    /// Off by default: the agent token then picks such models only by a
    /// menu id, and chat tokens never name a model outside their menu.
    pub fn allow_model_specs(mut self, allow: bool) -> Self {
        self.allow_model_specs = allow;
        self
    }

    /// Refuse, with the uniform 403, every request (the page included)
    /// whose `Host` is not a loopback name or address (`localhost`,
    /// `127.0.0.1`, `[::1]`, any port): a defence against DNS rebinding,
    /// beside the `Origin` check, for a server bound to loopback. Off by
    /// default; `lrg serve` turns it on for a loopback bind.
    pub fn loopback_hosts_only(mut self, on: bool) -> Self {
        self.loopback_hosts_only = on;
        self
    }

    /// Keep every chat in `store`, so it survives a restart: resumed by its
    /// keys, or listed and opened through its owner (default: in memory
    /// only).
    pub fn store(mut self, store: Arc<dyn SessionStore>) -> Self {
        self.store = Some(store);
        self
    }

    /// Keep at most `rows` history rows of a resumed keyed chat live; the
    /// older ones move to an archive beside it, never deleted (default
    /// `None`: every row; see [`RegistryConfig::max_kept_rows`]).
    pub fn max_kept_rows(mut self, rows: Option<usize>) -> Self {
        self.max_kept_rows = rows;
        self
    }

    /// How long a keyed chat may sit idle, with no page watching, before
    /// [`ChatServer::evict_idle`] puts it away to the store (default 30
    /// minutes).
    pub fn idle(mut self, idle: Duration) -> Self {
        self.idle = idle;
        self
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

/// How an open found its chat (see the [module docs](self)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum OpenedAs {
    /// A new chat.
    Created,
    /// The live chat the keys name, with its token.
    Live,
    /// The stored chat the keys name, rebuilt under its id.
    Resumed,
    /// The keys named a chat on another model; a new chat took its place
    /// and the old one was archived (kept, listed, not ended).
    Replaced,
    /// The conversation was carried over to another model: the keys' chat
    /// (`POST /v1/chat/sessions` with `carry_over: true`), or this chat in
    /// place (`POST …/model` with `carry_over: true`).
    CarriedOver,
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
    /// How it was found.
    pub opened: OpenedAs,
}

impl std::fmt::Debug for ChatLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatLink")
            .field("session", &self.session)
            .field("chat_token", &"<redacted>")
            .field("opened", &self.opened)
            .finish_non_exhaustive()
    }
}

pub(crate) struct AppState {
    config: HttpConfig,
    opener: Arc<dyn ChatOpener>,
    menu: Arc<dyn ModelMenu>,
    chats: Chats,
    registry: SessionRegistry,
    owner_tokens: owner_auth::OwnerTokens,
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
        if let Err(e) = check_token(&config.agent_token) {
            tracing::error!("the agent token is weak, a caller could guess it: {e}");
        }
        let registry_config = RegistryConfig::default()
            .idle(config.idle)
            .max_live(config.limits.chats)
            .max_kept_rows(config.max_kept_rows);
        let mut registry = SessionRegistry::without_factory(registry_config);
        if let Some(store) = &config.store {
            registry = registry.with_store(store.clone());
        }
        Self {
            state: Arc::new(AppState {
                config,
                opener,
                menu,
                chats: Chats::default(),
                registry,
                owner_tokens: owner_auth::OwnerTokens::default(),
            }),
        }
    }

    /// The routes (see the [module docs](self)).
    ///
    /// Serve them with [`ChatServer::serve`] or [`serve`]: header, body and
    /// idle timeouts, a connection cap and a 403 throttle, for clients that
    /// may be hostile. (With `axum::serve`, pass
    /// `router.into_make_service()`: each connection then shares the
    /// router, where a bare `Router` is rebuilt for every connection, about
    /// 11 KiB each, held as long as an event stream stays open; measured by
    /// `benches/sse.rs`.)
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
                "/v1/chat/sessions/{id}/tool_results/{call_id}",
                chat(post(client_tools::post_tool_result)),
            )
            .route(
                "/v1/chat/sessions/{id}/questions/{question_id}",
                chat(post(questions::post_answer)),
            )
            .route(
                "/v1/chat/sessions/{id}/consent",
                chat(post(consent::post_consent)),
            )
            .route(
                "/v1/chat/sessions/{id}/model",
                chat(post(routes::switch_model)),
            )
            .route("/v1/chat/sessions/{id}/events", chat(get(routes::events)))
            .route(
                "/v1/chat/sessions/{id}/sub_agents",
                chat(get(sub_agents::list)),
            )
            .route(
                "/v1/chat/sessions/{id}/sub_agents/{n}/events",
                chat(get(sub_agents::events)),
            )
            .route(
                "/v1/chat/sessions/{id}/prompt",
                chat(get(prompt_route::get_prompt)),
            )
            .route(
                "/v1/chat/sessions/{id}/prompts",
                chat(get(prompts_route::list)),
            )
            .route(
                "/v1/chat/sessions/{id}/transcript",
                chat(get(routes::transcript)),
            )
            .route(
                "/v1/chat/sessions/{id}/images/{call_id}/{n}",
                chat(get(routes::image)),
            )
            .route("/v1/owners/{owner}/tokens", chat(post(owners::mint)))
            .route(
                "/v1/owners/{owner}/chats",
                chat(get(owners::list).post(owners::create)),
            )
            .route(
                "/v1/owners/{owner}/chats/{session}",
                chat(axum::routing::patch(owners::rename).delete(owners::delete)),
            )
            .route(
                "/v1/owners/{owner}/chats/{session}/open",
                chat(post(owners::open)),
            )
            .route("/v1/ui/chat", chat(get(page::page)))
            .fallback(routes::not_found)
            .layer(axum::middleware::from_fn_with_state(
                self.state.clone(),
                routes::host_guard,
            ))
            .layer(axum::middleware::map_response(routes::security_headers))
            .with_state(self.state.clone())
    }

    /// Open a chat from the app itself (no agent token needed): `lrg serve`
    /// opens the first one this way and prints its page URL.
    pub async fn open_chat(&self, spec: ChatSpec) -> Result<ChatLink, ApiError> {
        self.state
            .open_chat(
                spec,
                None,
                crate::registry::OtherModel::Refuse,
                open::Caller::App,
            )
            .await
    }

    /// A new token of `owner` (see [Owners](self#owners)), as `POST
    /// /v1/owners/{owner}/tokens` mints with the agent token: `lrg serve`
    /// mints the default owner's and prints it in the page URL. A bad
    /// owner name is the 400 naming what is wrong.
    pub fn owner_token(&self, owner: &str) -> Result<String, ApiError> {
        owner_auth::check_owner("owner", owner)?;
        Ok(self.state.owner_tokens.mint(owner))
    }

    /// How many chats are open.
    pub fn chat_count(&self) -> usize {
        self.state.chats.len()
    }

    /// The session of open chat `id` (for an app that also drives it
    /// directly).
    pub fn session(&self, id: &str) -> Option<ChatSession> {
        self.state.chats.get(id).map(|c| c.session.clone())
    }

    /// Put away every keyed chat idle longer than [`HttpConfig::idle`] with
    /// no page watching it (see the [module docs](self)); returns how many.
    pub async fn evict_idle(&self) -> usize {
        self.state.evict_idle().await
    }

    /// Run [`Self::evict_idle`] every `every`, until the server is dropped.
    pub fn spawn_sweeper(&self, every: Duration) -> tokio::task::JoinHandle<()> {
        crate::registry::every_while_alive(&self.state, every, |state| async move {
            state.evict_idle().await;
        })
    }

    /// End every chat: streams close, running messages stop, a running tool
    /// finishes and its result is recorded, then tool servers stop. Chats
    /// stay in the store (and its locks are given back), to be resumed by
    /// the next server, but for an unkeyed one nobody wrote in or named:
    /// there is nothing to come back to, and a list would fill with them
    /// (`lrg serve` opens one on every start).
    pub async fn shutdown(&self) {
        let chats = self.state.chats.drain();
        futures::future::join_all(chats.iter().map(|c| c.end())).await;
        for chat in &chats {
            let unnamed = self
                .state
                .registry
                .live_meta(&chat.id)
                .is_some_and(|m| m.name.is_none());
            if chat.keys.is_none() && unnamed && chat.session.history().is_empty() {
                if let Err(e) = self.state.registry.end(&chat.id).await {
                    tracing::warn!("an empty chat was left in the store: {e}");
                }
            } else {
                self.state.registry.release(&chat.id).await;
            }
        }
    }
}
