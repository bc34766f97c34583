//! Shared helpers of the HTTP tests: a server on a loopback port with
//! models chosen by id, requests with tokens, and an SSE reader.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt as _;
use lrg_chat::http::{ChatServer, HttpConfig, MenuEntry, StandardOpener, StaticMenu};
use lrg_chat::tools::{McpConfig, McpServerConfig, StdioServerConfig};
use lrg_providers::{ChatModel, ModelLocation, ProviderError, ScriptedModel, ScriptedTurn};
use serde_json::{Value, json};

/// How long any wait in a test may take before the test fails.
pub const WAIT: Duration = Duration::from_secs(20);

pub const AGENT: &str = "agent-token-for-tests-0123456789";

/// The models a test server can open chats on, by id.
pub type Models = Arc<Mutex<HashMap<String, Arc<dyn ChatModel>>>>;

pub fn models(list: Vec<(&str, Arc<dyn ChatModel>)>) -> Models {
    Arc::new(Mutex::new(
        list.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
    ))
}

pub fn scripted(name: &str, turns: Vec<ScriptedTurn>) -> Arc<dyn ChatModel> {
    Arc::new(ScriptedModel::named(name, turns))
}

pub fn text(t: &str) -> ScriptedTurn {
    ScriptedTurn {
        text: Some(t.into()),
        ..Default::default()
    }
}

pub fn call(name: &str, arguments: Value) -> ScriptedTurn {
    ScriptedTurn {
        calls: vec![lrg_providers::ScriptedCall {
            name: name.into(),
            arguments,
        }],
        ..Default::default()
    }
}

/// The `mcpServers` value running the test MCP server.
pub fn test_mcp() -> Value {
    json!({"test": {"command": env!("CARGO_BIN_EXE_lrg-test-mcp")}})
}

pub fn test_mcp_config() -> McpConfig {
    McpConfig::new(vec![(
        "test".into(),
        McpServerConfig::Stdio(StdioServerConfig::new(env!("CARGO_BIN_EXE_lrg-test-mcp"))),
    )])
}

pub struct Harness {
    pub server: ChatServer,
    pub router: axum::Router,
    pub base: String,
    pub client: reqwest::Client,
}

/// A server on a free loopback port; `tweak` adjusts its config.
pub async fn start(models: Models, tweak: impl FnOnce(HttpConfig) -> HttpConfig) -> Harness {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let resolver = models.clone();
    let opener = StandardOpener::new(move |id: &str| {
        let found = resolver.lock().unwrap().get(id).cloned();
        let id = id.to_string();
        Box::pin(async move {
            found.ok_or(ProviderError::Config {
                message: format!("unknown model {id}"),
            })
        })
    });
    let menu = StaticMenu(vec![
        MenuEntry::available("script", "first", ModelLocation::Local),
        MenuEntry::available("script", "second", ModelLocation::Local),
        MenuEntry::available("openai", "gpt-4.1", ModelLocation::Cloud)
            .with_sends_to("api.openai.com"),
        MenuEntry::unavailable(
            "anthropic",
            "claude-sonnet-4-5",
            ModelLocation::Cloud,
            "no key: set ANTHROPIC_API_KEY",
        ),
    ]);
    let config = tweak(HttpConfig::new(AGENT).allow_origin(base.clone()));
    let server = ChatServer::new(config, Arc::new(opener), Arc::new(menu));
    let router = server.router();
    let app = router.clone();
    tokio::spawn(async move { axum::serve(listener, app).await });
    Harness {
        server,
        router,
        base,
        client: {
            lrg_providers::transport::ensure_tls_provider();
            reqwest::Client::new()
        },
    }
}

/// A chat opened over HTTP: its id and token.
#[derive(Clone, Debug)]
pub struct Chat {
    pub id: String,
    pub token: String,
}

impl Chat {
    /// The chat an open answered with.
    pub fn of(v: &Value) -> Self {
        Chat {
            id: v["session"].as_str().unwrap().into(),
            token: v["chat_token"].as_str().unwrap().into(),
        }
    }
}

impl Harness {
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    pub async fn open(&self, body: Value) -> Chat {
        let (status, v) = self.open_raw(body).await;
        assert_eq!(status, 201, "{v}");
        Chat::of(&v)
    }

    /// `POST /v1/chat/sessions` with the agent token: status and body.
    pub async fn open_raw(&self, body: Value) -> (u16, Value) {
        let r = self
            .client
            .post(self.url("/v1/chat/sessions"))
            .bearer_auth(AGENT)
            .json(&body)
            .send()
            .await
            .unwrap();
        (r.status().as_u16(), r.json().await.unwrap())
    }

    /// `method` on the chat's `route` (after `/v1/chat/sessions/{id}`), with
    /// its token: the status and the JSON body (Null when not JSON).
    pub async fn call(
        &self,
        chat: &Chat,
        method: reqwest::Method,
        route: &str,
        body: Option<Value>,
    ) -> (u16, Value) {
        let mut req = self
            .client
            .request(
                method,
                self.url(&format!("/v1/chat/sessions/{}{route}", chat.id)),
            )
            .bearer_auth(&chat.token);
        if let Some(body) = body {
            req = req.json(&body);
        }
        let r = req.send().await.unwrap();
        let status = r.status().as_u16();
        let text = r.text().await.unwrap();
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    pub async fn post(&self, chat: &Chat, route: &str, body: Value) -> (u16, Value) {
        self.call(chat, reqwest::Method::POST, route, Some(body))
            .await
    }

    pub async fn get(&self, chat: &Chat, route: &str) -> (u16, Value) {
        self.call(chat, reqwest::Method::GET, route, None).await
    }

    pub async fn events(&self, chat: &Chat, after: u64) -> Events {
        let url = self.url(&format!("/v1/chat/sessions/{}/events", chat.id));
        self.events_at(chat, url, after).await
    }

    /// Sub-agent `n`'s own stream of `chat` (`GET …/sub_agents/{n}/events`).
    pub async fn sub_agent_events(&self, chat: &Chat, n: u64, after: u64) -> Events {
        let url = self.url(&format!(
            "/v1/chat/sessions/{}/sub_agents/{n}/events",
            chat.id
        ));
        self.events_at(chat, url, after).await
    }

    async fn events_at(&self, chat: &Chat, url: String, after: u64) -> Events {
        Events {
            stream: connect(&self.client, &url, &chat.token, after).await,
            client: self.client.clone(),
            url,
            token: chat.token.clone(),
            last_seq: after,
            buffer: String::new(),
            seen: Vec::new(),
            raw: String::new(),
            resyncs: 0,
        }
    }
}

/// One SSE event as read: its `id:` and its `data:` JSON.
#[derive(Debug, Clone, PartialEq)]
pub struct SseEvent {
    pub id: Option<u64>,
    pub data: Value,
}

type ByteStream =
    std::pin::Pin<Box<dyn futures::Stream<Item = reqwest::Result<bytes::Bytes>> + Send>>;

async fn connect(client: &reqwest::Client, url: &str, token: &str, after: u64) -> ByteStream {
    let r = client
        .get(format!("{url}?after={after}"))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-type"], "text/event-stream");
    Box::pin(r.bytes_stream())
}

/// An event stream read the way the page reads it: on `resync` it
/// reconnects with `after=` the last seq seen.
pub struct Events {
    stream: ByteStream,
    client: reqwest::Client,
    url: String,
    token: String,
    last_seq: u64,
    /// How many times it had to reconnect after `resync`.
    pub resyncs: usize,
    buffer: String,
    /// Every event read so far.
    pub seen: Vec<SseEvent>,
    /// Everything read, as text (for secret greps).
    pub raw: String,
}

impl Events {
    /// The next event (heartbeat comments skipped); None at the end.
    pub async fn next(&mut self) -> Option<SseEvent> {
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                let mut id = None;
                let mut data = String::new();
                for line in block.lines() {
                    if let Some(v) = line.strip_prefix("id:") {
                        id = Some(v.trim().parse().unwrap());
                    } else if let Some(v) = line.strip_prefix("data:") {
                        assert!(data.is_empty(), "one data line per event: {block:?}");
                        data = v.trim_start().to_string();
                    }
                }
                if data.is_empty() {
                    continue; // a heartbeat
                }
                let event = SseEvent {
                    id,
                    data: serde_json::from_str(&data).unwrap(),
                };
                if let (Some(id), Some(seq)) = (event.id, event.data["seq"].as_u64()) {
                    assert_eq!(id, seq, "id is the seq");
                    assert_eq!(
                        seq,
                        self.last_seq + 1,
                        "numbered events arrive in order, none lost"
                    );
                    self.last_seq = seq;
                }
                if event.data["type"] == "resync" {
                    self.resyncs += 1;
                    self.buffer.clear();
                    self.stream =
                        connect(&self.client, &self.url, &self.token, self.last_seq).await;
                    continue;
                }
                self.seen.push(event.clone());
                return Some(event);
            }
            let chunk = tokio::time::timeout(WAIT, self.stream.next())
                .await
                .expect("no event in time")?;
            let chunk = String::from_utf8(chunk.ok()?.to_vec()).unwrap();
            self.raw.push_str(&chunk);
            self.buffer.push_str(&chunk);
        }
    }

    /// Read until an event of `kind` (optionally matching `pred`) arrives.
    pub async fn until(&mut self, kind: &str, pred: impl Fn(&Value) -> bool) -> Value {
        loop {
            let e = self
                .next()
                .await
                .unwrap_or_else(|| panic!("stream ended before {kind}: {:?}", self.seen));
            if e.data["type"] == kind && pred(&e.data) {
                return e.data;
            }
        }
    }

    /// Read until the chat is idle again (`busy: false`).
    pub async fn idle(&mut self) -> Value {
        self.until("busy", |e| e["busy"] == false).await
    }
}
