//! The browser tests' harness: Chromium on its own chromedriver and
//! profile, a page to drive with small waits, screenshots to
//! `target/browser-screens/`, and the scripted chat opener the scenarios
//! share.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use fantoccini::{Client, ClientBuilder, Locator};
use futures::future::BoxFuture;
use lrg_chat::ChatSession;
use lrg_chat::http::{ChatOpener, ChatSpec, OpenError, OpenedChat};
use lrg_chat::session::SwitchableModel;
use lrg_chat::tools::ToolHost;
use lrg_providers::{ChatModel, Image, Part, ScriptedTurn, ToolAnnotations};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::http_support::Models;

/// A 48×48 PNG in four colours.
pub const PICTURE: &str = "iVBORw0KGgoAAAANSUhEUgAAADAAAAAwCAIAAADYYG7QAAAATElEQVR42u3OMQ0AIAwAMITtRgQiUIIcRKBkIrgwsY8mFdCWI0rEyhJNSEhISEhISEhISEjos9A9UaLvWUJISEhISEhISEhISOiz0ANsUcTTRTeWMwAAAABJRU5ErkJggg==";

fn find(names: &[&str]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    names.iter().find_map(|name| {
        std::env::split_paths(&path)
            .map(|dir| dir.join(name))
            .find(|p| p.is_file())
    })
}

/// Chromium and chromedriver, or a loud skip (a failure under CI).
pub fn browser() -> Option<(PathBuf, PathBuf)> {
    let chromium = find(&["chromium", "chromium-browser", "google-chrome"]);
    let driver = find(&["chromedriver"]);
    match (chromium, driver) {
        (Some(c), Some(d)) => Some((c, d)),
        (c, d) => {
            let why = format!(
                "the browser test needs chromium and chromedriver on PATH (found chromium: {}, chromedriver: {}); \
                 on Debian: apt-get install chromium chromium-driver",
                c.is_some(),
                d.is_some()
            );
            if std::env::var_os("CI").is_some() {
                panic!("{why}");
            }
            eprintln!("SKIPPED: {why}");
            None
        }
    }
}

#[derive(Deserialize, JsonSchema)]
pub struct Ids {
    /// Photos to delete.
    pub ids: Vec<u64>,
}

#[derive(Deserialize, JsonSchema)]
pub struct Html {
    /// What to show.
    pub html: String,
}

/// Opens chats on scripted models by id, with one destructive tool that
/// returns a picture, and a read-only one that returns what it is given
/// (hostile HTML, in the tests that give it some).
pub struct Opener {
    pub models: Models,
}

impl ChatOpener for Opener {
    fn open(&self, spec: ChatSpec) -> BoxFuture<'_, Result<OpenedChat, OpenError>> {
        Box::pin(async move {
            let id = spec.model.clone().unwrap_or_default();
            let model: Arc<dyn ChatModel> = self
                .models
                .lock()
                .unwrap()
                .get(&id)
                .cloned()
                .ok_or_else(|| OpenError::field("model", format!("unknown model {id}")))?;
            let info = model.info();
            let host = Arc::new(ToolHost::new());
            host.add_fn(
                "delete_photos",
                "Delete photos by id; shows what is left.",
                ToolAnnotations {
                    title: Some("Delete photos".into()),
                    ..Default::default()
                },
                |a: Ids| async move {
                    Ok::<_, String>(vec![
                        Part::text(format!("deleted {} photos; what is left:", a.ids.len())),
                        Part::Image(Image {
                            mime: "image/png".into(),
                            data: base64::engine::general_purpose::STANDARD
                                .decode(PICTURE)
                                .unwrap()
                                .into(),
                        }),
                    ])
                },
            )
            .unwrap();
            host.add_fn(
                "show_html",
                "Return the HTML it is given.",
                ToolAnnotations {
                    read_only_hint: Some(true),
                    ..Default::default()
                },
                |a: Html| async move { Ok::<_, String>(vec![Part::text(a.html)]) },
            )
            .unwrap();
            // Switchable: the page may carry the conversation over.
            let source = Arc::new(SwitchableModel::new(model));
            let builder = ChatSession::builder(source.clone()).tools(host.clone());
            Ok(OpenedChat::new(builder, info)
                .with_host(host)
                .with_source(source))
        })
    }
}

pub fn slow(text: &str, delay_ms: u64) -> ScriptedTurn {
    ScriptedTurn {
        text: Some(text.into()),
        delay_ms: Some(delay_ms),
        ..Default::default()
    }
}

pub struct Driver {
    process: Child,
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.process.kill();
        let _ = self.process.wait();
    }
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

pub async fn start_driver(driver: &Path) -> (Driver, u16) {
    let port = free_port();
    let process = Command::new(driver)
        .arg(format!("--port={port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let driver = Driver { process };
    for _ in 0..100 {
        if tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
        {
            return (driver, port);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("chromedriver did not listen on port {port}");
}

pub struct Page {
    pub client: Client,
    pub shots: PathBuf,
    pub n: usize,
}

impl Page {
    pub async fn js(&self, script: &str) -> Value {
        self.client.execute(script, vec![]).await.unwrap()
    }

    /// Wait until `expr` (a JS expression) is truthy.
    pub async fn wait(&self, expr: &str, what: &str) {
        let script = format!("return !!({expr});");
        for _ in 0..200 {
            if self.js(&script).await == json!(true) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(75)).await;
        }
        let log = self
            .js("return document.getElementById('log').innerText")
            .await;
        panic!("timed out waiting for {what} ({expr}); the page shows: {log}");
    }

    pub async fn click(&self, css: &str) {
        self.client
            .find(Locator::Css(css))
            .await
            .unwrap_or_else(|e| panic!("no {css}: {e}"))
            .click()
            .await
            .unwrap();
    }

    pub async fn type_in(&self, text: &str) {
        self.client
            .find(Locator::Css("#input"))
            .await
            .unwrap()
            .send_keys(text)
            .await
            .unwrap();
    }

    pub async fn shot(&mut self, name: &str) -> PathBuf {
        self.n += 1;
        let path = self.shots.join(format!("{:02}-{name}.png", self.n));
        std::fs::write(&path, self.client.screenshot().await.unwrap()).unwrap();
        println!("screenshot: {}", path.display());
        path
    }

    pub async fn log_text(&self) -> String {
        self.js("return document.getElementById('log').innerText")
            .await
            .as_str()
            .unwrap()
            .to_string()
    }
}

/// Chromium on its own chromedriver and profile: the driver and profile
/// live as long as the page.
pub async fn launch(chromium: &Path, driver: &Path) -> (Driver, tempfile::TempDir, Page) {
    let (driver, port) = start_driver(driver).await;
    let profile = tempfile::tempdir().unwrap();
    let mut caps = serde_json::Map::new();
    caps.insert(
        "goog:chromeOptions".into(),
        json!({
            "binary": chromium,
            "args": [
                "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--disable-dev-shm-usage", "--window-size=1100,900",
                format!("--user-data-dir={}", profile.path().display()),
            ]
        }),
    );
    let client = ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
        .capabilities(caps)
        .connect(&format!("http://127.0.0.1:{port}"))
        .await
        .expect("a WebDriver session");
    let shots = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/browser-screens");
    std::fs::create_dir_all(&shots).unwrap();
    let page = Page {
        client,
        shots,
        n: 0,
    };
    (driver, profile, page)
}

pub const ENTER: &str = "\u{E007}";
pub const SHIFT: &str = "\u{E008}";
pub const RELEASE: &str = "\u{E000}";

/// A served chat app on scripted models (the [`Opener`]'s tools), on a
/// port of its own; the first model is the default.
pub struct App {
    pub server: lrg_chat::http::ChatServer,
    pub base: String,
}

pub async fn serve(
    list: Vec<(&str, Arc<dyn ChatModel>)>,
    menu: Vec<lrg_chat::http::MenuEntry>,
    tweak: impl FnOnce(lrg_chat::http::HttpConfig) -> lrg_chat::http::HttpConfig,
) -> App {
    let default = list[0].0.to_string();
    let models = crate::http_support::models(list);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let config = lrg_chat::http::HttpConfig::new(crate::http_support::AGENT)
        .allow_origin(base.clone())
        .defaults(ChatSpec::new().model(default));
    let server = lrg_chat::http::ChatServer::new(
        tweak(config),
        Arc::new(Opener { models }),
        Arc::new(lrg_chat::http::StaticMenu(menu)),
    );
    let app = server.router();
    tokio::spawn(async move { axum::serve(listener, app).await });
    App { server, base }
}

impl Page {
    /// Go to `url` (under `base`) and wait for the chat's stream.
    pub async fn open(&self, base: &str, url: &str) {
        self.client.goto(&format!("{base}{url}")).await.unwrap();
        self.wait(
            "document.getElementById('conn').textContent === 'live'",
            "the stream",
        )
        .await;
    }

    /// Wait until the chat is idle again (Send enabled).
    pub async fn idle(&self) {
        self.wait("!document.getElementById('send').disabled", "idle")
            .await;
    }

    /// The finished answers' texts, in order.
    pub async fn answers(&self) -> Vec<String> {
        serde_json::from_value(
            self.js("return [...document.querySelectorAll('#log .turn:not(.live) .text')].map(t => t.textContent)")
                .await,
        )
        .unwrap()
    }

    /// The user messages' texts, in order.
    pub async fn users(&self) -> Vec<String> {
        serde_json::from_value(
            self.js(
                "return [...document.querySelectorAll('#log .user.msg')].map(t => t.textContent)",
            )
            .await,
        )
        .unwrap()
    }
}
