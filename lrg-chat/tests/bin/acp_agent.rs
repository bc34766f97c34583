//! A fixture ACP agent for the ACP backend's tests, built with the
//! `agent-client-protocol` crate's agent side (not with lrg's own).
//!
//! Every prompt streams each kind of update: a plan, advertised commands, a
//! thought, text, a tool call (kind `edit`) that asks permission, its
//! progress or failure, usage, more text. Prompts with special words:
//! `slow` streams `tick` until cancelled (with `late`, it goes on sending
//! `late` chunks for a while after answering the cancel); `die` exits at
//! once (exit code 3);
//! `echo` answers `[SESSION] ` and every text block it was sent, joined;
//! `who` answers with the session's id (`s1`, `s2`, ... in order of creation;
//! with `wait`, after 200 ms);
//! `which model` answers `model ID` (the session's model option);
//! a prompt carrying a typed answer's instructions answers `{"ok": true}`.
//!
//! Each session offers a model config option (category `model`) with two
//! models, `fast` (the default) and `deep`, set with
//! `session/set_config_option`.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    AgentCapabilities, AvailableCommand, AvailableCommandsUpdate, CancelNotification, ContentBlock,
    ContentChunk, InitializeRequest, InitializeResponse, NewSessionRequest, NewSessionResponse,
    PermissionOption, PermissionOptionKind, Plan, PlanEntry, PlanEntryPriority, PlanEntryStatus,
    PromptRequest, PromptResponse, RequestPermissionOutcome, RequestPermissionRequest,
    SessionConfigOption, SessionConfigOptionCategory, SessionConfigOptionValue,
    SessionConfigSelectOption, SessionId, SessionNotification, SessionUpdate,
    SetSessionConfigOptionRequest, SetSessionConfigOptionResponse, StopReason, ToolCall,
    ToolCallStatus, ToolCallUpdate, ToolCallUpdateFields, ToolKind, UsageUpdate,
};
use agent_client_protocol::{Agent, ByteStreams, Client};
use tokio_util::compat::{TokioAsyncReadCompatExt as _, TokioAsyncWriteCompatExt as _};

fn chunk(text: &str) -> ContentChunk {
    ContentChunk::new(ContentBlock::from(text.to_string()))
}

fn send(cx: &ConnectionTo<Client>, session: &SessionId, update: SessionUpdate) {
    cx.send_notification(SessionNotification::new(session.clone(), update))
        .unwrap();
}

/// Each session's model.
type Models = Arc<Mutex<HashMap<String, String>>>;

fn model_options(current: &str) -> Vec<SessionConfigOption> {
    let choices = vec![
        SessionConfigSelectOption::new("fast", "Fast model"),
        SessionConfigSelectOption::new("deep", "Deep model"),
    ];
    vec![
        SessionConfigOption::select("model", "Model", current.to_string(), choices)
            .category(SessionConfigOptionCategory::Model),
    ]
}

async fn answer(
    cx: ConnectionTo<Client>,
    req: PromptRequest,
    cancels: Arc<AtomicU64>,
    models: Models,
) -> StopReason {
    let all: String = req
        .prompt
        .iter()
        .filter_map(|b| match b {
            ContentBlock::Text(t) => Some(t.text.clone()),
            _ => None,
        })
        .collect();
    // The words that steer the fixture count in the message itself, not in
    // a history lrg replays ahead of it.
    let text: String = req
        .prompt
        .iter()
        .filter_map(|b| match b {
            ContentBlock::Text(t) if !t.text.starts_with("[lrg]") => Some(t.text.clone()),
            _ => None,
        })
        .collect();
    if text.contains("die") {
        std::process::exit(3);
    }
    // What lrg sent, every block of it: a replayed history shows.
    if text.contains("echo") {
        let said = format!("[{}] {all}", req.session_id.0);
        send(
            &cx,
            &req.session_id,
            SessionUpdate::AgentMessageChunk(chunk(&said)),
        );
        return StopReason::EndTurn;
    }
    // A typed message: lrg sends the schema's instructions with the prompt.
    if text.contains("JSON Schema of the answer") {
        send(
            &cx,
            &req.session_id,
            SessionUpdate::AgentMessageChunk(chunk(r#"{"ok": true}"#)),
        );
        return StopReason::EndTurn;
    }
    if text.contains("which model") {
        let model = models.lock().unwrap().get(&*req.session_id.0).cloned();
        let said = format!("model {}", model.unwrap_or_default());
        send(
            &cx,
            &req.session_id,
            SessionUpdate::AgentMessageChunk(chunk(&said)),
        );
        return StopReason::EndTurn;
    }
    if text.contains("who") {
        if text.contains("wait") {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let me = format!("session {}", req.session_id.0);
        send(
            &cx,
            &req.session_id,
            SessionUpdate::AgentMessageChunk(chunk(&me)),
        );
        return StopReason::EndTurn;
    }
    // A cancel counts for the prompts running when it arrives.
    let seen = cancels.load(Ordering::SeqCst);
    if text.contains("slow") {
        for _ in 0..400 {
            if cancels.load(Ordering::SeqCst) != seen {
                if text.contains("late") {
                    // Chunks sent after the cancelled prompt's answer, as a
                    // busy agent may still send them.
                    let (cx, session) = (cx.clone(), req.session_id.clone());
                    tokio::spawn(async move {
                        for _ in 0..30 {
                            send(
                                &cx,
                                &session,
                                SessionUpdate::AgentMessageChunk(chunk("late ")),
                            );
                            tokio::time::sleep(Duration::from_millis(10)).await;
                        }
                    });
                }
                return StopReason::Cancelled;
            }
            send(
                &cx,
                &req.session_id,
                SessionUpdate::AgentMessageChunk(chunk("tick ")),
            );
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        return StopReason::EndTurn;
    }
    send(
        &cx,
        &req.session_id,
        SessionUpdate::Plan(Plan::new(vec![
            PlanEntry::new(
                "write a.txt",
                PlanEntryPriority::High,
                PlanEntryStatus::InProgress,
            ),
            PlanEntry::new("check it", PlanEntryPriority::Low, PlanEntryStatus::Pending),
        ])),
    );
    send(
        &cx,
        &req.session_id,
        SessionUpdate::AvailableCommandsUpdate(AvailableCommandsUpdate::new(vec![
            AvailableCommand::new("review", "review the changes"),
        ])),
    );
    send(
        &cx,
        &req.session_id,
        SessionUpdate::AgentThoughtChunk(chunk("I will write it.")),
    );
    send(
        &cx,
        &req.session_id,
        SessionUpdate::AgentMessageChunk(chunk("Writing a.txt.")),
    );
    send(
        &cx,
        &req.session_id,
        SessionUpdate::ToolCall(
            ToolCall::new("t1", "write a.txt")
                .kind(ToolKind::Edit)
                .status(ToolCallStatus::Pending)
                .raw_input(serde_json::json!({"path": "a.txt"})),
        ),
    );
    let options = [
        ("yes", PermissionOptionKind::AllowOnce),
        ("always", PermissionOptionKind::AllowAlways),
        ("no", PermissionOptionKind::RejectOnce),
    ]
    .map(|(id, kind)| PermissionOption::new(id, id, kind))
    .to_vec();
    let asked = cx
        .send_request(RequestPermissionRequest::new(
            req.session_id.clone(),
            ToolCallUpdate::new("t1", ToolCallUpdateFields::new()),
            options,
        ))
        .block_task()
        .await
        .unwrap();
    let allowed = matches!(&asked.outcome,
        RequestPermissionOutcome::Selected(s) if &*s.option_id.0 != "no");
    let done = if allowed {
        send(
            &cx,
            &req.session_id,
            SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
                "t1",
                ToolCallUpdateFields::new().status(ToolCallStatus::InProgress),
            )),
        );
        ToolCallUpdateFields::new()
            .status(ToolCallStatus::Completed)
            .content(vec![ContentBlock::from("wrote a.txt".to_string()).into()])
    } else {
        ToolCallUpdateFields::new()
            .status(ToolCallStatus::Failed)
            .content(vec![
                ContentBlock::from("the user said no".to_string()).into(),
            ])
    };
    send(
        &cx,
        &req.session_id,
        SessionUpdate::ToolCallUpdate(ToolCallUpdate::new("t1", done)),
    );
    send(
        &cx,
        &req.session_id,
        SessionUpdate::UsageUpdate(UsageUpdate::new(120, 8000)),
    );
    send(
        &cx,
        &req.session_id,
        SessionUpdate::AgentMessageChunk(chunk(if allowed { "Done." } else { "Not written." })),
    );
    StopReason::EndTurn
}

#[tokio::main]
async fn main() {
    let cancels = Arc::new(AtomicU64::new(0));
    let on_cancel = cancels.clone();
    let sessions = AtomicU64::new(0);
    let models: Models = Arc::default();
    let (made, chosen) = (models.clone(), models.clone());
    Agent
        .v1()
        .name("fixture-agent")
        .on_receive_request(
            async move |_req: InitializeRequest, responder, _cx| {
                responder.respond(
                    InitializeResponse::new(ProtocolVersion::V1)
                        .agent_capabilities(AgentCapabilities::new()),
                )
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |_req: NewSessionRequest, responder, _cx| {
                let n = sessions.fetch_add(1, Ordering::SeqCst) + 1;
                let id = format!("s{n}");
                made.lock().unwrap().insert(id.clone(), "fast".into());
                responder.respond(NewSessionResponse::new(id).config_options(model_options("fast")))
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |req: SetSessionConfigOptionRequest, responder, _cx| {
                let SessionConfigOptionValue::ValueId { value } = req.value else {
                    panic!("the fixture's options are selects");
                };
                assert_eq!(&*req.config_id.0, "model");
                assert!(["fast", "deep"].contains(&&*value.0), "{value:?}");
                chosen
                    .lock()
                    .unwrap()
                    .insert(req.session_id.0.to_string(), value.0.to_string());
                responder.respond(SetSessionConfigOptionResponse::new(model_options(&value.0)))
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |req: PromptRequest, responder, cx: ConnectionTo<Client>| {
                let (conn, flag, models) = (cx.clone(), cancels.clone(), models.clone());
                cx.spawn(async move {
                    let stop = answer(conn, req, flag, models).await;
                    responder.respond(PromptResponse::new(stop))
                })
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_notification(
            async move |_note: CancelNotification, _cx| {
                on_cancel.fetch_add(1, Ordering::SeqCst);
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .connect_to(ByteStreams::new(
            tokio::io::stdout().compat_write(),
            tokio::io::stdin().compat(),
        ))
        .await
        .unwrap();
}
