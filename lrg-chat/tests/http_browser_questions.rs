//! A tool server's question and progress on the page, in a real browser:
//! an in-process MCP server reports progress, asks a form (text, email,
//! integer with bounds, a select, a boolean), and answers with what it got.
//! The page draws the form with its defaults, marks the field a bad answer
//! gets wrong, sends the good one, and shows the call's progress bar.
//!
//! Needs `chromium` and `chromedriver`; skips loudly without them, and
//! fails under `CI`.

use std::sync::Arc;

use futures::future::BoxFuture;
use lrg_chat::http::{ChatOpener, ChatSpec, MenuEntry, OpenError, OpenedChat};
use lrg_chat::session::SwitchableModel;
use lrg_chat::tools::ToolHost;
use lrg_chat::{ChatSession, Mode, PermissionSettings, Permissions};
use lrg_providers::{ChatModel, ModelLocation, ScriptedModel};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, CustomRequest,
    ListToolsResult, PaginatedRequestParams, ProgressNotificationParam, ServerCapabilities,
    ServerConfig, ServerRequest, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::json;

use crate::browser_support::{browser, launch};
use crate::http_support::{call, text};

/// Reports half its progress, asks, reports the rest, answers.
#[derive(Clone)]
struct Asker;

impl ServerHandler for Asker {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(vec![Tool::new(
            "sign_up",
            "signs the person up",
            serde_json::Map::new(),
        )]))
    }

    async fn call_tool(
        &self,
        _request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let token = context.meta.get_progress_token().expect("a progress token");
        let mut half = ProgressNotificationParam::new(token.clone(), 1.0);
        half.total = Some(2.0);
        half.message = Some("checking the list".into());
        let _ = context.peer.notify_progress(half).await;
        let params = json!({
            "mode": "form",
            "message": "Who is signing up?",
            "requestedSchema": {"type": "object", "required": ["name", "email"], "properties": {
                "name": {"type": "string", "title": "Name"},
                "email": {"type": "string", "format": "email", "title": "Email"},
                "seats": {"type": "integer", "minimum": 1, "maximum": 4, "default": 2},
                "plan": {"type": "string", "oneOf": [{"const": "p1", "title": "Basic"}, {"const": "p2", "title": "Pro"}], "default": "p2"},
                "news": {"type": "boolean", "default": true}
            }}
        });
        let answer = context
            .peer
            .send_request(ServerRequest::CustomRequest(CustomRequest::new(
                "elicitation/create",
                Some(params),
            )))
            .await;
        // Left at half way, so the page's bar can be seen before the result.
        let text = match answer {
            Ok(r) => format!("signed up: {}", serde_json::to_string(&r).unwrap()),
            Err(e) => format!("error: {e}"),
        };
        Ok(CallToolResult::success(vec![ContentBlock::text(text)]).into())
    }
}

struct QuestionOpener(Arc<dyn ChatModel>);

impl ChatOpener for QuestionOpener {
    fn open(&self, _spec: ChatSpec) -> BoxFuture<'_, Result<OpenedChat, OpenError>> {
        Box::pin(async move {
            let model = self.0.clone();
            let info = model.info();
            let host = Arc::new(ToolHost::new());
            host.add_in_process("club", || Asker)
                .await
                .map_err(|e| OpenError::field("mcpServers", e.to_string()))?;
            let settings = PermissionSettings {
                mode: Mode::AutoAll,
                ..Default::default()
            };
            let source = Arc::new(SwitchableModel::new(model));
            let builder = ChatSession::builder(source.clone())
                .tools(host.clone())
                .permissions(Arc::new(Permissions::new(settings)));
            Ok(OpenedChat::new(builder, info)
                .with_host(host)
                .with_source(source))
        })
    }
}

#[tokio::test]
async fn the_page_answers_a_form_and_shows_progress() {
    let Some((chromium, driver)) = browser() else {
        return;
    };
    let model: Arc<dyn ChatModel> = Arc::new(ScriptedModel::named(
        "first",
        vec![call("sign_up", json!({})), text("You are signed up.")],
    ));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let config = lrg_chat::http::HttpConfig::new(crate::http_support::AGENT)
        .allow_origin(base.clone())
        .defaults(ChatSpec::new().model("script:first".to_owned()));
    let server = lrg_chat::http::ChatServer::new(
        config,
        Arc::new(QuestionOpener(model)),
        Arc::new(lrg_chat::http::StaticMenu(vec![MenuEntry::available(
            "script",
            "first",
            ModelLocation::Local,
        )])),
    );
    let app = server.router();
    tokio::spawn(async move { axum::serve(listener, app).await });
    let link = server.open_chat(ChatSpec::new()).await.unwrap();
    let (_driver, _profile, mut page) = launch(&chromium, &driver).await;
    page.open(&base, &link.page_url).await;
    page.type_in(&format!("sign me up{}", crate::browser_support::ENTER))
        .await;
    page.wait(
        "document.querySelector('.card.question input[name=name]')",
        "the form",
    )
    .await;
    // Drawn from the schema: defaults filled in, a select for the choices.
    assert_eq!(
        page.js("return document.querySelector('.card.question input[name=seats]').value")
            .await,
        json!("2")
    );
    assert_eq!(
        page.js("return document.querySelector('.card.question select[name=plan]').value")
            .await,
        json!("p2")
    );
    assert_eq!(
        page.js("return document.querySelector('.card.question input[name=news]').checked")
            .await,
        json!(true)
    );
    // The call's progress bar, half way.
    page.wait(
        "document.querySelector('.card progress')",
        "the progress bar",
    )
    .await;
    assert_eq!(
        page.js("return document.querySelector('.card progress').value")
            .await,
        json!(1)
    );
    // A bad email is refused by the server side, and its field is marked.
    page.js("const f = document.querySelector('.card.question');
         f.querySelector('input[name=name]').value = 'Ada';
         const mail = f.querySelector('input[name=email]');
         mail.type = 'text'; mail.value = 'not-an-email';
         return null")
        .await;
    page.click(".card.question .buttons .primary").await;
    page.wait(
        "document.querySelector('.card.question .q-field.bad[data-field=email]')",
        "the bad field marked",
    )
    .await;
    page.shot("question-bad-field").await;
    page.js(
        "document.querySelector('.card.question input[name=email]').value = 'ada@example.com'; return null",
    )
    .await;
    page.click(".card.question .buttons .primary").await;
    page.wait(
        "document.querySelector('.card.question .status').textContent === 'answered'",
        "the answer",
    )
    .await;
    page.idle().await;
    let log = page.log_text().await;
    assert!(log.contains("You are signed up."), "{log}");
    page.shot("question-answered").await;
    // What the server got: the form's values, defaults included.
    let result = page
        .js("return document.querySelector('.card.done details.result pre').textContent")
        .await;
    let result = result.as_str().unwrap();
    for part in [
        r#""name":"Ada""#,
        r#""email":"ada@example.com""#,
        r#""seats":2"#,
        r#""plan":"p2""#,
        r#""news":true"#,
    ] {
        assert!(result.contains(part), "{part} not in {result}");
    }
}
