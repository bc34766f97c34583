//! A tool server's question through `lrg acp`, end to end: a chat on a
//! scripted model calls server-everything's `trigger-elicitation-request`;
//! an editor that declared form elicitation in `initialize` is asked
//! (`elicitation/create`) and its answer reaches the server, and one that
//! did not has the question declined with "this editor cannot answer
//! questions". Needs node and the npm fixtures in tests-fixtures/mcp
//! (skipped with a notice without them, failed under `CI`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    ClientCapabilities, ContentBlock, CreateElicitationRequest, CreateElicitationResponse,
    ElicitationAcceptAction, ElicitationAction, ElicitationCapabilities, ElicitationContentValue,
    ElicitationFormCapabilities, ElicitationMode, InitializeRequest, NewSessionRequest,
    PermissionOptionKind, PromptRequest, RequestPermissionOutcome, RequestPermissionRequest,
    RequestPermissionResponse, SelectedPermissionOutcome, SessionNotification, SessionUpdate,
    StopReason, ToolCallContent,
};
use agent_client_protocol::{ByteStreams, Client};
use serde_json::json;
use tokio::process::Command;
use tokio_util::compat::{TokioAsyncReadCompatExt, TokioAsyncWriteCompatExt};

use crate::common::Env;

/// No conversation may take longer; a hang fails the test instead.
const LIMIT: Duration = Duration::from_secs(90);

/// The text of what server-everything said back, and the questions asked.
#[derive(Default)]
struct Seen {
    tool_results: Vec<String>,
    asked: Vec<String>,
}

fn env() -> Option<Env> {
    let script = crate::common::repo_root().join(
        "tests-fixtures/mcp/node_modules/@modelcontextprotocol/server-everything/dist/index.js",
    );
    let node = std::process::Command::new("node")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !(script.is_file() && node) {
        assert!(
            std::env::var_os("CI").is_none(),
            "node and the npm MCP fixtures are required under CI (run `npm ci` in tests-fixtures/mcp)"
        );
        eprintln!("SKIPPED: acp_questions: server-everything or node is missing");
        return None;
    }
    let env = Env::new();
    env.file(
        "mcp.json",
        &json!({"mcpServers": {"everything": {"command": "node",
            "args": [script.to_string_lossy(), "stdio"]}}})
        .to_string(),
    );
    env.file(
        "s.json",
        &crate::common::call_then_reply("trigger-elicitation-request", "{}", "thanks"),
    );
    Some(env)
}

/// One prompt through `lrg acp` by an editor that answers forms with
/// `answer` (`None`: it did not declare elicitation at all).
async fn ask_through_acp(
    env: &Env,
    answer: Option<BTreeMap<String, ElicitationContentValue>>,
) -> Seen {
    let mut child = Command::new(env!("CARGO_BIN_EXE_lrg"))
        .args([
            "acp",
            "--model",
            "script:s.json",
            "--mcp-config",
            "mcp.json",
        ])
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("OLLAMA_HOST", "http://127.0.0.1:9")
        .env("XDG_CONFIG_HOME", env.path("config"))
        .current_dir(env.dir.path())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let stdin = child.stdin.take().unwrap().compat_write();
    let stdout = child.stdout.take().unwrap().compat();
    let seen = Arc::new(Mutex::new(Seen::default()));
    let (updates, questions) = (seen.clone(), seen.clone());
    let declares = answer.is_some();
    let run = Client
        .v1()
        .name("fixture-editor")
        .on_receive_notification(
            async move |note: SessionNotification, _cx| {
                if let SessionUpdate::ToolCallUpdate(u) = &note.update {
                    for c in u.fields.content.iter().flatten() {
                        if let ToolCallContent::Content(c) = c
                            && let ContentBlock::Text(t) = &c.content
                        {
                            updates.lock().unwrap().tool_results.push(t.text.clone());
                        }
                    }
                }
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .on_receive_request(
            async move |req: RequestPermissionRequest, responder, _cx| {
                let allow = req
                    .options
                    .iter()
                    .find(|o| o.kind == PermissionOptionKind::AllowOnce)
                    .expect("an allow-once option")
                    .option_id
                    .clone();
                responder.respond(RequestPermissionResponse::new(
                    RequestPermissionOutcome::Selected(SelectedPermissionOutcome::new(allow)),
                ))
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |req: CreateElicitationRequest, responder, _cx| {
                assert!(
                    matches!(req.mode, ElicitationMode::Form(_)),
                    "{:?}",
                    req.mode
                );
                questions.lock().unwrap().asked.push(req.message.clone());
                let action = match &answer {
                    Some(content) => ElicitationAction::Accept(
                        ElicitationAcceptAction::new().content(content.clone()),
                    ),
                    None => ElicitationAction::Decline,
                };
                responder.respond(CreateElicitationResponse::new(action))
            },
            agent_client_protocol::on_receive_request!(),
        )
        .connect_with(ByteStreams::new(stdin, stdout), async move |cx| {
            let mut caps = ClientCapabilities::new();
            if declares {
                caps = caps.elicitation(
                    ElicitationCapabilities::new().form(ElicitationFormCapabilities::new()),
                );
            }
            cx.send_request(InitializeRequest::new(ProtocolVersion::V1).client_capabilities(caps))
                .block_task()
                .await?;
            let session = cx
                .send_request(NewSessionRequest::new(std::env::temp_dir()))
                .block_task()
                .await?;
            let done = cx
                .send_request(PromptRequest::new(
                    session.session_id,
                    vec![ContentBlock::from("sign me up".to_string())],
                ))
                .block_task()
                .await?;
            assert_eq!(done.stop_reason, StopReason::EndTurn);
            Ok(())
        });
    tokio::time::timeout(LIMIT, run)
        .await
        .expect("the conversation with `lrg acp` timed out")
        .expect("the conversation failed");
    drop(child);
    Arc::try_unwrap(seen)
        .ok()
        .expect("the client is gone")
        .into_inner()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn an_editor_that_answers_forms_is_asked_and_its_answer_reaches_the_server() {
    let Some(env) = env() else {
        return;
    };
    let answer = BTreeMap::from([
        (
            "name".to_string(),
            ElicitationContentValue::String("Ada".into()),
        ),
        (
            "email".to_string(),
            ElicitationContentValue::String("ada@example.com".into()),
        ),
    ]);
    let seen = ask_through_acp(&env, Some(answer)).await;
    assert_eq!(seen.asked.len(), 1, "{:?}", seen.asked);
    let result = seen.tool_results.join("\n");
    assert!(
        result.contains("Name: Ada") && result.contains("Email: ada@example.com"),
        "{result}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_editor_that_cannot_answer_has_the_question_declined() {
    let Some(env) = env() else {
        return;
    };
    let seen = ask_through_acp(&env, None).await;
    assert!(seen.asked.is_empty(), "{:?}", seen.asked);
    let result = seen.tool_results.join("\n");
    assert!(result.contains("declined"), "{result}");
    assert!(
        result.contains("this editor cannot answer questions"),
        "{result}"
    );
}
