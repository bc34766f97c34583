//! Tool servers' questions to the person (MCP elicitation) and roots,
//! through the library: a session on a scripted model calls
//! server-everything's capability-gated tools (`trigger-elicitation-request`,
//! `trigger-url-elicitation`, `get-roots-list`), and an in-process server
//! asks a form outside the spec's subset. server-everything needs the npm
//! fixtures (see `tools_npm`): without them these tests say so and pass
//! locally, and fail under `CI`.

use std::sync::Arc;
use std::time::Duration;

use lrg_chat::events::Event;
use lrg_chat::tools::{McpConfig, Root, ToolHost, ToolHostOptions, Tools};
use lrg_chat::{
    ChatSession, FixedModel, Mode, PermissionSettings, Permissions, QuestionAction, QuestionAnswer,
    QuestionError, SessionConfig,
};
use lrg_providers::{ScriptedModel, ScriptedTurn};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, CustomRequest,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, ServerRequest, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Value, json};

use crate::session_support::{calls, finish, reply, wait_for};
use crate::tools_npm::server_script;

const WAIT: Duration = Duration::from_secs(60);

/// A host with server-everything (`None` when the fixtures are missing).
async fn everything() -> Option<Arc<ToolHost>> {
    let script = server_script("server-everything")?;
    let config = McpConfig::from_json(
        &json!({"mcpServers": {"everything": {"command": "node", "args": [script, "stdio"]}}})
            .to_string(),
    )
    .unwrap();
    let host = Arc::new(ToolHost::with_options(ToolHostOptions {
        connect_timeout: Duration::from_secs(60),
        ..Default::default()
    }));
    let failures = host.add_mcp_config(&config).await;
    assert!(failures.is_empty(), "{failures:?}");
    Some(host)
}

/// The tools offered now, after the lists the servers said changed.
async fn names(host: &ToolHost) -> Vec<String> {
    host.list()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name)
        .collect()
}

/// A session on `turns` that runs every tool without asking.
fn session(host: &Arc<ToolHost>, turns: Vec<ScriptedTurn>, config: SessionConfig) -> ChatSession {
    let settings = PermissionSettings {
        mode: Mode::AutoAll,
        ..Default::default()
    };
    ChatSession::builder(Arc::new(FixedModel::new(ScriptedModel::new(turns))))
        .tools(host.clone())
        .permissions(Arc::new(Permissions::new(settings)))
        .config(config)
        .build()
}

/// The next `question` event's number and JSON.
async fn next_question(sub: &mut lrg_chat::Subscription) -> (u64, Value) {
    let entry = wait_for(sub, |e| matches!(e, Event::Question { .. })).await;
    let Event::Question { question_id, .. } = &entry.event else {
        unreachable!()
    };
    (*question_id, serde_json::to_value(entry.as_ref()).unwrap())
}

async fn tool_done(sub: &mut lrg_chat::Subscription) -> String {
    match &wait_for(sub, |e| matches!(e, Event::ToolDone { .. }))
        .await
        .event
    {
        Event::ToolDone { text, .. } => text.clone(),
        _ => unreachable!(),
    }
}

async fn answered(sub: &mut lrg_chat::Subscription) -> Value {
    let entry = wait_for(sub, |e| matches!(e, Event::QuestionAnswered { .. })).await;
    serde_json::to_value(entry.as_ref()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_form_is_asked_checked_and_answered() {
    let Some(host) = everything().await else {
        return;
    };
    tokio::time::timeout(WAIT, async {
        // Declared capabilities unlock the server's gated tools.
        let offered = names(&host).await;
        for gated in [
            "trigger-elicitation-request",
            "trigger-url-elicitation",
            "get-roots-list",
        ] {
            assert!(
                offered.iter().any(|n| n == gated),
                "{gated} missing: {offered:?}"
            );
        }
        assert!(
            offered.iter().any(|n| n == "trigger-sampling-request"),
            "sampling is declared: {offered:?}"
        );

        let chat = session(
            &host,
            vec![
                calls(&[("trigger-elicitation-request", json!({}))]),
                reply("thanks"),
            ],
            SessionConfig::default(),
        );
        let mut sub = chat.subscribe(0);
        let handle = chat.send("ask me").unwrap();
        let (id, event) = next_question(&mut sub).await;
        assert_eq!(event["type"], "question");
        assert_eq!(event["server"], "everything");
        assert_eq!(event["mode"], "form");
        assert!(event["tool_call_id"].is_string(), "{event}");
        assert_eq!(
            event["requested_schema"]["properties"]["integer"]["maximum"],
            100
        );
        assert_eq!(chat.pending_questions(), vec![id]);

        // A bad answer is refused naming its field; the question stays open.
        let refused = chat.answer_question(
            id,
            QuestionAnswer::accept(json!({"name": "Ada", "integer": 500})),
        );
        assert!(
            matches!(&refused, Err(QuestionError::Invalid { field, .. }) if field == "integer"),
            "{refused:?}"
        );
        let refused = chat.answer_question(
            id,
            QuestionAnswer::accept(json!({"email": "ada@example.com"})),
        );
        assert!(matches!(&refused, Err(QuestionError::Invalid { field, .. }) if field == "name"));
        assert_eq!(chat.pending_questions(), vec![id]);

        let content =
            json!({"name": "Ada", "check": true, "email": "ada@example.com", "integer": 7});
        chat.answer_question(id, QuestionAnswer::accept(content.clone()))
            .unwrap();
        assert_eq!(
            chat.answer_question(id, QuestionAnswer::decline()),
            Err(QuestionError::NoSuchQuestion(id)),
            "answered once"
        );
        let done = answered(&mut sub).await;
        assert_eq!(done["action"], "accept");
        assert_eq!(done["content"], content);
        let text = tool_done(&mut sub).await;
        assert!(
            text.contains("User provided the requested information"),
            "{text}"
        );
        assert!(
            text.contains("Name: Ada") && text.contains("Favorite Integer: 7"),
            "{text}"
        );
        finish(handle).await;
        host.shutdown().await;
    })
    .await
    .expect("the test took too long");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decline_stop_and_timeout_each_give_the_tool_an_answer() {
    let Some(host) = everything().await else {
        return;
    };
    tokio::time::timeout(WAIT, async {
        let ask = || {
            vec![
                calls(&[("trigger-elicitation-request", json!({}))]),
                reply("ok"),
            ]
        };
        // Declined by the person.
        let chat = session(&host, ask(), SessionConfig::default());
        let mut sub = chat.subscribe(0);
        let handle = chat.send("ask").unwrap();
        let (id, _) = next_question(&mut sub).await;
        chat.answer_question(id, QuestionAnswer::decline_with("not today"))
            .unwrap();
        assert!(tool_done(&mut sub).await.contains("declined"));
        finish(handle).await;

        // Cut short by a stop: cancelled, with the reason.
        let chat = session(&host, ask(), SessionConfig::default());
        let mut sub = chat.subscribe(0);
        let handle = chat.send("ask").unwrap();
        let (id, _) = next_question(&mut sub).await;
        chat.stop();
        let done = answered(&mut sub).await;
        assert_eq!(done["question_id"], id);
        assert_eq!(done["action"], QuestionAction::Cancel.as_str());
        assert!(
            done["reason"].as_str().unwrap().contains("stopped"),
            "{done}"
        );
        assert!(tool_done(&mut sub).await.contains("cancelled"));
        assert!(chat.pending_questions().is_empty());
        finish(handle).await;

        // Nobody answers in time.
        let config = SessionConfig {
            question_timeout: Duration::from_millis(300),
            ..Default::default()
        };
        let chat = session(&host, ask(), config);
        let mut sub = chat.subscribe(0);
        let handle = chat.send("ask").unwrap();
        next_question(&mut sub).await;
        let done = answered(&mut sub).await;
        assert!(
            done["reason"]
                .as_str()
                .unwrap()
                .contains("no answer within"),
            "{done}"
        );
        assert!(tool_done(&mut sub).await.contains("cancelled"));
        finish(handle).await;
        host.shutdown().await;
    })
    .await
    .expect("the test took too long");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_url_question_carries_its_url_and_is_never_opened() {
    let Some(host) = everything().await else {
        return;
    };
    tokio::time::timeout(WAIT, async {
        let chat = session(
            &host,
            vec![
                calls(&[(
                    "trigger-url-elicitation",
                    json!({"url": "https://example.com/verify"}),
                )]),
                reply("ok"),
            ],
            SessionConfig::default(),
        );
        let mut sub = chat.subscribe(0);
        let handle = chat.send("go").unwrap();
        let (id, event) = next_question(&mut sub).await;
        assert_eq!(event["mode"], "url", "{event}");
        assert_eq!(event["url"], "https://example.com/verify", "{event}");
        assert!(event.get("requested_schema").is_none());
        chat.answer_question(id, QuestionAnswer::Accept { content: None })
            .unwrap();
        tool_done(&mut sub).await;
        finish(handle).await;
        host.shutdown().await;
    })
    .await
    .expect("the test took too long");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn roots_are_listed_and_a_change_is_told() {
    let Some(host) = everything().await else {
        return;
    };
    tokio::time::timeout(WAIT, async {
        let first = tempfile::tempdir().unwrap();
        let second = tempfile::tempdir().unwrap();
        host.set_roots(vec![Root::dir(first.path()).unwrap()]).await;
        let cancel = tokio_util::sync::CancellationToken::new;
        let text = |out: lrg_chat::tools::ToolOutput| format!("{:?}", out.parts);
        let listed = text(host.call("get-roots-list", json!({}), cancel()).await);
        let uri = &host.roots()[0].uri;
        assert!(listed.contains(uri.as_str()), "{listed}");

        // The server asks again after `roots/list_changed`.
        host.set_roots(vec![Root::dir(second.path()).unwrap()])
            .await;
        let uri = host.roots()[0].uri.clone();
        let mut seen = String::new();
        for _ in 0..50 {
            seen = text(host.call("get-roots-list", json!({}), cancel()).await);
            if seen.contains(&uri) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(seen.contains(&uri), "{seen}");
        host.shutdown().await;
    })
    .await
    .expect("the test took too long");
}

/// An in-process server whose one tool asks a form with a nested object:
/// outside the subset.
#[derive(Clone)]
struct NestedForm;

impl ServerHandler for NestedForm {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let mut tool = Tool::new("ask_address", "asks for an address", serde_json::Map::new());
        tool.annotations = Some(rmcp::model::ToolAnnotations::from_raw(
            None,
            Some(true),
            None,
            None,
            None,
        ));
        Ok(ListToolsResult::with_all_items(vec![tool]))
    }

    async fn call_tool(
        &self,
        _request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let params = json!({
            "mode": "form",
            "message": "Where do you live?",
            "requestedSchema": {"type": "object", "properties": {
                "address": {"type": "object", "properties": {"street": {"type": "string"}}}
            }}
        });
        let answer = context
            .peer
            .send_request(ServerRequest::CustomRequest(CustomRequest::new(
                "elicitation/create",
                Some(params),
            )))
            .await;
        let text = match answer {
            Ok(r) => serde_json::to_string(&r).unwrap(),
            Err(e) => format!("error: {e}"),
        };
        Ok(CallToolResult::success(vec![ContentBlock::text(text)]).into())
    }
}

#[tokio::test]
async fn a_form_outside_the_subset_is_declined_with_the_reason() {
    let host = Arc::new(ToolHost::new());
    host.add_in_process("nested", || NestedForm).await.unwrap();
    let chat = session(
        &host,
        vec![calls(&[("ask_address", json!({}))]), reply("ok")],
        SessionConfig::default(),
    );
    let mut sub = chat.subscribe(0);
    let handle = chat.send("where").unwrap();
    let text = tool_done(&mut sub).await;
    assert!(text.contains("\"decline\""), "{text}");
    assert!(text.contains("nested objects"), "{text}");
    assert!(chat.pending_questions().is_empty());
    // The person is told why nothing was asked.
    let log = wait_for(&mut sub, |e| matches!(e, Event::Busy { busy: false, .. })).await;
    drop(log);
    let logs: Vec<_> = chat
        .events()
        .entries()
        .iter()
        .filter(|e| matches!(e.event, Event::ServerLog { .. }))
        .map(|e| serde_json::to_value(e.as_ref()).unwrap())
        .collect();
    assert_eq!(logs.len(), 1, "{logs:?}");
    assert!(
        logs[0]["message"].as_str().unwrap().contains("address"),
        "{logs:?}"
    );
    finish(handle).await;
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_is_answered_over_http() {
    use crate::http_support::{call, models, scripted, start, text};
    let Some(script) = server_script("server-everything") else {
        return;
    };
    tokio::time::timeout(WAIT, async {
        let h = start(
            models(vec![(
                "script:first",
                scripted(
                    "first",
                    vec![
                        call("trigger-elicitation-request", json!({})),
                        text("thanks"),
                    ],
                ),
            )]),
            |c| c,
        )
        .await;
        let chat = h
            .open(json!({"model": "script:first", "mcpServers": {
                "everything": {"command": "node", "args": [script, "stdio"]}}}))
            .await;
        let mut events = h.events(&chat, 0).await;
        h.post(&chat, "/messages", json!({"text": "ask me"})).await;
        let ask = events.until("approval_needed", |_| true).await;
        let call_id = ask["call_id"].as_str().unwrap().to_owned();
        h.post(
            &chat,
            &format!("/approvals/{call_id}"),
            json!({"answer": "once"}),
        )
        .await;
        let q = events.until("question", |_| true).await;
        assert_eq!(q["tool_call_id"], call_id.as_str(), "{q}");
        let id = q["question_id"].as_u64().unwrap();
        let route = format!("/questions/{id}");

        let (status, body) = h
            .post(
                &chat,
                &route,
                json!({"action": "accept", "content": {"integer": 5}}),
            )
            .await;
        assert_eq!(status, 400, "{body}");
        assert!(
            body["error"]["message"]
                .as_str()
                .unwrap()
                .contains("`content.name`"),
            "{body}"
        );
        let (status, _) = h
            .post(&chat, "/questions/999", json!({"action": "decline"}))
            .await;
        assert_eq!(status, 404);
        let (status, _) = h
            .post(&chat, "/questions/abc", json!({"action": "decline"}))
            .await;
        assert_eq!(status, 404);
        let (status, body) = h.post(&chat, &route, json!({"action": "maybe"})).await;
        assert_eq!(status, 400, "{body}");

        let (status, body) = h
            .post(
                &chat,
                &route,
                json!({"action": "accept", "content": {"name": "Ada"}}),
            )
            .await;
        assert_eq!(status, 200, "{body}");
        let (status, _) = h
            .post(
                &chat,
                &route,
                json!({"action": "accept", "content": {"name": "Ada"}}),
            )
            .await;
        assert_eq!(status, 404, "answered already");
        let answered = events.until("question_answered", |_| true).await;
        assert_eq!(answered["action"], "accept");
        let done = events.until("tool_done", |_| true).await;
        assert!(
            done["text"].as_str().unwrap().contains("Name: Ada"),
            "{done}"
        );
    })
    .await
    .expect("the test took too long");
}
