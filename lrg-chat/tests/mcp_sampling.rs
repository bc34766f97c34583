//! Tool servers that ask the model (MCP sampling), through the library:
//! server-everything's `trigger-sampling-request` asked, allowed and
//! denied; and an in-process server that asks from a local-only chat, from
//! within a sampled answer (the depth limit) and with 10 MB of messages.
//! server-everything needs the npm fixtures (see `tools_npm`): without
//! them those tests say so and pass locally, and fail under `CI`.

#![allow(deprecated)] // rmcp marks sampling deprecated (SEP-2577); servers still use it

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt as _;
use lrg_chat::events::Event;
use lrg_chat::session::SamplingModel;
use lrg_chat::tools::{McpConfig, ToolHost, ToolHostOptions, Tools};
use lrg_chat::{
    Answer, ChatSession, FixedModel, Mode, PermissionSettings, Permissions, Rule, SessionConfig,
};
use lrg_providers::{
    ChatModel, ModelInfo, ModelLocation, ScriptedModel, StopReason, TurnEvent, TurnRequest,
    TurnStream, Usage,
};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock,
    CreateMessageRequestParams, ListToolsResult, PaginatedRequestParams, SamplingMessage,
    ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

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

fn settings(mode: Mode, allow: &[&str]) -> Arc<Permissions> {
    let mut settings = PermissionSettings {
        mode,
        ..Default::default()
    };
    for tool in allow {
        settings.rules.insert((*tool).to_owned(), Rule::Allow);
    }
    Arc::new(Permissions::new(settings))
}

fn session(
    host: &Arc<ToolHost>,
    model: ScriptedModel,
    permissions: Arc<Permissions>,
    config: SessionConfig,
) -> ChatSession {
    ChatSession::builder(Arc::new(FixedModel::new(model)))
        .tools(host.clone())
        .permissions(permissions)
        .config(config)
        .build()
}

async fn tool_done(sub: &mut lrg_chat::Subscription) -> (bool, String) {
    match &wait_for(sub, |e| matches!(e, Event::ToolDone { .. }))
        .await
        .event
    {
        Event::ToolDone { ok, text, .. } => (*ok, text.clone()),
        _ => unreachable!(),
    }
}

/// The chat's sampling events and their approvals, as JSON.
fn sampling_log(chat: &ChatSession) -> Vec<Value> {
    chat.events()
        .entries()
        .iter()
        .filter(|e| {
            matches!(
                &e.event,
                Event::SamplingRequest { .. } | Event::SamplingDone { .. }
            ) || matches!(&e.event, Event::ApprovalNeeded { call_id, .. } | Event::ApprovalAnswered { call_id, .. } if call_id.starts_with("sampling-"))
        })
        .map(|e| {
            let mut v = serde_json::to_value(e.as_ref()).unwrap();
            // The call id is the scripted model's own numbering.
            if v.get("tool_call_id").is_some() {
                v["tool_call_id"] = json!("[call]");
            }
            v
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_is_asked_answered_by_the_chats_model_and_billed() {
    let Some(host) = everything().await else {
        return;
    };
    tokio::time::timeout(WAIT, async {
        let offered: Vec<String> = host
            .list()
            .await
            .unwrap()
            .into_iter()
            .map(|t| t.name)
            .collect();
        assert!(
            offered.iter().any(|n| n == "trigger-sampling-request"),
            "the capability unlocks the tool: {offered:?}"
        );
        let mut sampled = reply("Paris is the capital of France.");
        sampled.usage = Some(Usage::new(21, 8));
        let model = ScriptedModel::new(vec![
            calls(&[(
                "trigger-sampling-request",
                json!({"prompt": "the capital of France?", "maxTokens": 40}),
            )]),
            sampled,
            reply("done"),
        ]);
        // The tool itself is allowed; the sampling is a class of its own and asks.
        let chat = session(
            &host,
            model.clone(),
            settings(Mode::AutoRead, &["trigger-sampling-request"]),
            SessionConfig::default(),
        );
        let mut sub = chat.subscribe(0);
        let handle = chat.send("ask the server").unwrap();
        let ask = wait_for(&mut sub, |e| matches!(e, Event::ApprovalNeeded { .. })).await;
        let ask = serde_json::to_value(ask.as_ref()).unwrap();
        assert_eq!(ask["call_id"], "sampling-1", "{ask}");
        assert_eq!(ask["tool"], "sampling/everything");
        assert_eq!(ask["reason"]["kind"], "sampling");
        assert_eq!(ask["arguments"]["max_tokens"], 40);
        assert!(
            ask["arguments"]["messages"][0]["text"]
                .as_str()
                .unwrap()
                .contains("the capital of France?"),
            "the card shows the server's messages: {ask}"
        );
        assert_eq!(chat.pending_approvals(), vec!["sampling-1".to_owned()]);
        chat.answer_approval("sampling-1", Answer::Once).unwrap();
        let (ok, text) = tool_done(&mut sub).await;
        assert!(ok, "{text}");
        assert!(text.contains("Paris is the capital of France."), "{text}");
        assert!(text.contains("\"role\": \"assistant\""), "{text}");
        let outcome = finish(handle).await;
        assert!(
            matches!(outcome, lrg_chat::TurnOutcome::Completed { .. }),
            "{outcome:?}"
        );

        // The model got the server's request, not the chat.
        let sent = &model.requests()[1];
        assert_eq!(
            sent.system.as_deref(),
            Some("You are a helpful test server.")
        );
        assert_eq!(sent.settings.max_tokens, Some(40));
        assert_eq!(sent.settings.temperature, Some(0.7));
        assert!(sent.tools.is_empty());
        assert_eq!(
            sent.messages.len(),
            1,
            "nothing of the chat: {:?}",
            sent.messages
        );

        // Its usage is in the chat's bill.
        let spend = chat.spend();
        assert!(
            spend.usage.prompt_tokens >= 21 && spend.usage.completion_tokens >= 8,
            "{spend:?}"
        );
        crate::snapshot!("sampling_events", sampling_log(&chat));
        host.shutdown().await;
    })
    .await
    .expect("the test took too long");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denied_request_tells_the_server_why_and_spends_nothing() {
    let Some(host) = everything().await else {
        return;
    };
    tokio::time::timeout(WAIT, async {
        let model = ScriptedModel::new(vec![
            calls(&[("trigger-sampling-request", json!({"prompt": "hi"}))]),
            reply("ok"),
        ]);
        let chat = session(
            &host,
            model.clone(),
            settings(Mode::AskAll, &["trigger-sampling-request"]),
            SessionConfig::default(),
        );
        let mut sub = chat.subscribe(0);
        let handle = chat.send("ask").unwrap();
        let id = crate::session_support::next_approval(&mut sub).await;
        assert_eq!(id, "sampling-1");
        chat.answer_approval(&id, Answer::deny_with("not with my tokens"))
            .unwrap();
        let (ok, text) = tool_done(&mut sub).await;
        assert!(!ok, "{text}");
        assert!(text.contains("did not let the model answer"), "{text}");
        assert!(text.contains("not with my tokens"), "{text}");
        finish(handle).await;
        let log = sampling_log(&chat);
        let done = log.iter().find(|e| e["type"] == "sampling_done").unwrap();
        assert_eq!(done["outcome"], "denied", "{done}");
        assert_eq!(model.requests().len(), 2, "no turn was spent on the server");
        host.shutdown().await;
    })
    .await
    .expect("the test took too long");
}

/// An in-process server whose tool asks the model: `prompt` as the one
/// message, or `bytes` of filler.
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
        let mut tool = Tool::new(
            "ask_model",
            "asks the client's model",
            serde_json::Map::new(),
        );
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
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = request.arguments.unwrap_or_default();
        let text = match args.get("bytes").and_then(Value::as_u64) {
            Some(n) => "x".repeat(n as usize),
            None => args
                .get("prompt")
                .and_then(Value::as_str)
                .unwrap_or("hello")
                .to_owned(),
        };
        let params = CreateMessageRequestParams::new(vec![SamplingMessage::user_text(text)], 20)
            .with_system_prompt("be brief");
        let text = match context.peer.create_message(params).await {
            Ok(result) => format!("answer: {}", serde_json::to_string(&result).unwrap()),
            Err(e) => format!("sampling failed: {e}"),
        };
        Ok(CallToolResult::success(vec![ContentBlock::text(text)]).into())
    }
}

async fn asker() -> Arc<ToolHost> {
    let host = Arc::new(ToolHost::new());
    host.add_in_process("asker", || Asker).await.unwrap();
    host
}

/// A scripted model that says it runs in a cloud.
struct Cloud(ScriptedModel);

impl ChatModel for Cloud {
    fn info(&self) -> ModelInfo {
        ModelInfo::new("cloudy", "big", ModelLocation::Cloud)
            .sends_to(Some("api.example.com".into()))
    }

    fn turn(&self, request: TurnRequest, cancel: CancellationToken) -> TurnStream {
        self.0.turn(request, cancel)
    }
}

#[tokio::test]
async fn a_local_only_chat_never_samples_a_cloud_model() {
    let host = asker().await;
    let cloud = ScriptedModel::new(vec![reply("from the cloud")]);
    let config = SessionConfig {
        sampling_model: Some(SamplingModel::new(Cloud(cloud.clone()))),
        ..Default::default()
    };
    let chat = session(
        &host,
        ScriptedModel::new(vec![calls(&[("ask_model", json!({}))]), reply("ok")]),
        settings(Mode::AutoAll, &[]),
        config,
    );
    chat.set_local_only(true);
    let mut sub = chat.subscribe(0);
    let handle = chat.send("ask").unwrap();
    let (_, text) = tool_done(&mut sub).await;
    assert!(text.contains("sampling failed"), "{text}");
    assert!(text.contains("local only"), "{text}");
    assert!(text.contains("api.example.com"), "{text}");
    finish(handle).await;
    assert_eq!(cloud.requests().len(), 0, "the cloud model was never asked");
    let log = sampling_log(&chat);
    assert_eq!(log[0]["type"], "sampling_request");
    assert_eq!(log[0]["model"], "cloudy:big");
    assert_eq!(log[1]["outcome"], "declined", "{log:?}");
    host.shutdown().await;
}

/// A model whose answer calls the asking tool again, and answers with
/// what that call gave.
struct Nesting {
    host: Arc<ToolHost>,
}

impl ChatModel for Nesting {
    fn info(&self) -> ModelInfo {
        ModelInfo::new("script", "nesting", ModelLocation::Local)
    }

    fn turn(&self, _request: TurnRequest, cancel: CancellationToken) -> TurnStream {
        let host = self.host.clone();
        let answer = async move {
            let out = host
                .call("ask_model", json!({"prompt": "again"}), cancel)
                .await;
            let text = out
                .parts
                .iter()
                .filter_map(|p| match p {
                    lrg_providers::Part::Text { text } => Some(text.clone()),
                    _ => None,
                })
                .collect::<String>();
            futures::stream::iter(vec![
                Ok(TurnEvent::TextDelta { text }),
                Ok(TurnEvent::End {
                    stop: StopReason::EndTurn,
                }),
            ])
        };
        Box::pin(futures::stream::once(answer).flatten())
    }
}

#[tokio::test]
async fn a_sampled_answer_cannot_sample_again() {
    let host = asker().await;
    let config = SessionConfig {
        sampling_model: Some(SamplingModel::new(Nesting { host: host.clone() })),
        ..Default::default()
    };
    let chat = session(
        &host,
        ScriptedModel::new(vec![calls(&[("ask_model", json!({}))]), reply("ok")]),
        settings(Mode::AutoAll, &[]),
        config,
    );
    let mut sub = chat.subscribe(0);
    let handle = chat.send("ask").unwrap();
    // `tool_done` fails the test if nested sampling hangs.
    let (_, text) = tool_done(&mut sub).await;
    // The outer request was answered, with the inner one's refusal.
    assert!(text.starts_with("answer: "), "{text}");
    assert!(text.contains("depth limit"), "{text}");
    finish(handle).await;
    let requests = sampling_log(&chat)
        .into_iter()
        .filter(|e| e["type"] == "sampling_request")
        .count();
    assert_eq!(requests, 1, "the nested request never reached the session");
    host.shutdown().await;
}

#[tokio::test]
async fn ten_megabytes_of_messages_are_declined_with_the_size() {
    let host = asker().await;
    let model = ScriptedModel::new(vec![
        calls(&[("ask_model", json!({"bytes": 10 * 1024 * 1024}))]),
        reply("ok"),
    ]);
    let chat = session(
        &host,
        model.clone(),
        settings(Mode::AutoAll, &[]),
        SessionConfig::default(),
    );
    let mut sub = chat.subscribe(0);
    let handle = chat.send("ask big").unwrap();
    let (_, text) = tool_done(&mut sub).await;
    assert!(text.contains("sampling failed"), "{text}");
    assert!(
        text.contains("10.0 MiB") && text.contains("the 1 MiB"),
        "{text}"
    );
    finish(handle).await;
    assert!(sampling_log(&chat).is_empty(), "nothing was asked or shown");
    let logged = chat.events().entries().iter().any(
        |e| matches!(&e.event, Event::ServerLog { message, .. } if message.contains("10.0 MiB")),
    );
    assert!(logged, "the person is told why");
    assert_eq!(model.requests().len(), 2, "the model never saw it");
    host.shutdown().await;
}
