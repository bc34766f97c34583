//! lrg's HTTP API and chat page inside an app's own axum server: nested
//! under `/agent`, behind the app's own authentication, with chats opened
//! by the app for its signed-in users.
//!
//! - The app has its routes (`/`, `POST /chats`) and its auth middleware
//!   (here a header check, `x-app-user`, standing in for a session cookie
//!   or a JWT): a request without a known user gets the app's 401 before
//!   any lrg code runs, on lrg's routes too.
//! - `POST /chats` opens a chat for the user with
//!   [`ChatServer::open_chat`] (the app's own trust: no agent token goes
//!   over the wire) and hands back the chat's id, token and page address.
//! - Everything under `/agent` is lrg's router as it is
//!   ([`ChatServer::router`]); [`HttpConfig::base_path`] makes the page
//!   addresses it hands out point there. Each chat's routes take its own
//!   chat token as `Authorization: Bearer …`.
//!
//! The example serves on `127.0.0.1:0`, then plays the browser with
//! reqwest: it opens a chat, sends a message to the scripted model, reads
//! the events until the answer is done, fetches the page, and exits.
//!
//! Run it with `cargo run -p lrg-examples --example axum_embed`.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Json, Router};
use futures::StreamExt as _;
use lrg_chat::http::{ChatServer, ChatSpec, HttpConfig, MenuEntry, StandardOpener, StaticMenu};
use lrg_providers::{ChatModel, ModelLocation, ScriptedModel, ScriptedTurn};
use serde_json::{Value, json};

/// The app's users (a stand-in for its own user table).
const USERS: [&str; 2] = ["alice", "bob"];

/// Who the request is from, put there by [`auth`].
#[derive(Clone, Debug)]
struct User(String);

/// The app's own authentication, in front of every route, lrg's included.
async fn auth(mut request: Request, next: Next) -> Response {
    let user = request
        .headers()
        .get("x-app-user")
        .and_then(|v| v.to_str().ok())
        .filter(|name| USERS.contains(name))
        .map(str::to_owned);
    match user {
        Some(name) => {
            request.extensions_mut().insert(User(name));
            next.run(request).await
        }
        None => (StatusCode::UNAUTHORIZED, "sign in first").into_response(),
    }
}

/// `POST /chats`: a chat for the signed-in user.
async fn open_chat(
    State(lrg): State<ChatServer>,
    Extension(User(name)): Extension<User>,
) -> Response {
    let spec = ChatSpec::new().system(format!("You help {name}, a user of this app."));
    match lrg.open_chat(spec).await {
        Ok(link) => Json(json!({
            "session": link.session,
            "chat_token": link.chat_token,
            "page_url": link.page_url,
        }))
        .into_response(),
        // `ApiError` answers as lrg's JSON error, with its own status.
        Err(e) => e.into_response(),
    }
}

/// The lrg side: every chat opens on a scripted model (offline).
fn lrg_server() -> ChatServer {
    let opener = StandardOpener::new(|_model_id: &str| {
        let model: Arc<dyn ChatModel> = Arc::new(ScriptedModel::named(
            "greeter",
            vec![ScriptedTurn {
                text: Some("Hello! I am the app's assistant.".to_owned()),
                ..Default::default()
            }],
        ));
        Box::pin(async move { Ok(model) })
    });
    let menu = StaticMenu(vec![MenuEntry::available(
        "script",
        "greeter",
        ModelLocation::Local,
    )]);
    // The agent token opens chats over `POST /agent/v1/chat/sessions`; this
    // app opens them in-process instead, so it never leaves the server.
    let config = HttpConfig::new(lrg_chat::http::generate_token())
        .base_path("/agent")
        .defaults(ChatSpec::new().model("script:greeter"));
    ChatServer::new(config, Arc::new(opener), Arc::new(menu))
}

fn app(lrg: &ChatServer) -> Router {
    Router::new()
        .route(
            "/",
            get(|Extension(User(name)): Extension<User>| async move { format!("hello {name}") }),
        )
        .route("/chats", post(open_chat))
        .with_state(lrg.clone())
        .nest("/agent", lrg.router())
        .layer(axum::middleware::from_fn(auth))
}

/// Read the chat's event stream (SSE) until the answer is done.
async fn read_events(
    response: reqwest::Response,
) -> Result<Vec<Value>, Box<dyn std::error::Error>> {
    let mut events = Vec::new();
    let mut body = response.bytes_stream();
    let mut pending = String::new();
    while let Some(chunk) = body.next().await {
        pending.push_str(&String::from_utf8_lossy(&chunk?));
        while let Some(end) = pending.find('\n') {
            let line: String = pending.drain(..=end).collect();
            let Some(data) = line.trim_end().strip_prefix("data:") else {
                continue;
            };
            let event: Value = serde_json::from_str(data.trim())?;
            let done = event["type"] == "busy" && event["busy"] == false;
            events.push(event);
            if done {
                return Ok(events);
            }
        }
    }
    Err("the event stream ended before the answer".into())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let lrg = lrg_server();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}", listener.local_addr()?);
    let router = app(&lrg);
    let server =
        tokio::spawn(async move { axum::serve(listener, router.into_make_service()).await });
    println!("serving on {base}");

    lrg_providers::transport::ensure_tls_provider();
    let client = reqwest::Client::new();

    let anonymous = client.post(format!("{base}/chats")).send().await?;
    println!("POST /chats without a user: {}", anonymous.status());
    let anonymous = client
        .get(format!("{base}/agent/v1/ui/chat"))
        .send()
        .await?;
    println!(
        "GET /agent/v1/ui/chat without a user: {}",
        anonymous.status()
    );

    let opened: Value = client
        .post(format!("{base}/chats"))
        .header("x-app-user", "alice")
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    let id = opened["session"].as_str().ok_or("no session id")?;
    let token = opened["chat_token"].as_str().ok_or("no chat token")?;
    let page = opened["page_url"].as_str().ok_or("no page url")?;
    // The fragment carries the chat token: never log it in a real app.
    let page_path = page.split('#').next().unwrap_or(page);
    println!("alice's chat {id}, page at {page_path}#…");

    let chat = format!("{base}/agent/v1/chat/sessions/{id}");
    let sent = client
        .post(format!("{chat}/messages"))
        .header("x-app-user", "alice")
        .bearer_auth(token)
        .json(&json!({"text": "Hi, who are you?"}))
        .send()
        .await?;
    println!("POST …/messages: {} {}", sent.status(), sent.text().await?);

    let stream = client
        .get(format!("{chat}/events?after=0"))
        .header("x-app-user", "alice")
        .bearer_auth(token)
        .send()
        .await?
        .error_for_status()?;
    for event in read_events(stream).await? {
        match event["type"].as_str() {
            Some("user_message") => println!("event: user_message {}", event["text"]),
            Some("assistant_turn") => println!("event: assistant_turn {}", event["text"]),
            Some(other) => println!("event: {other}"),
            None => {}
        }
    }

    let wrong = client
        .get(format!("{chat}/transcript"))
        .header("x-app-user", "alice")
        .bearer_auth("not-the-token")
        .send()
        .await?;
    println!(
        "GET …/transcript with a wrong chat token: {}",
        wrong.status()
    );

    let html = client
        .get(format!("{base}{page_path}"))
        .header("x-app-user", "alice")
        .send()
        .await?
        .error_for_status()?
        .text()
        .await?;
    println!("the page: {} bytes of HTML", html.len());

    lrg.shutdown().await;
    server.abort();
    Ok(())
}
