//! `lrg acp` driven as an editor drives it: a fixture ACP client built with
//! the `agent-client-protocol` crate's client side talks to the spawned
//! binary on a scripted model, with the demo MCP server as its tools.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    CancelNotification, ContentBlock, InitializeRequest, LoadSessionRequest, NewSessionRequest,
    NewSessionResponse, PermissionOptionKind, PromptRequest, RequestPermissionOutcome,
    RequestPermissionRequest, RequestPermissionResponse, SelectedPermissionOutcome,
    SessionConfigKind, SessionNotification, SessionUpdate, StopReason,
};
use agent_client_protocol::{Agent, ByteStreams, Client};
use common::Env;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::Command;
use tokio_util::compat::{TokioAsyncReadCompatExt, TokioAsyncWriteCompatExt};

/// No conversation may take longer; a hang fails the test instead.
const LIMIT: Duration = Duration::from_secs(60);

/// What the fixture client saw, and how it answers permission questions.
#[derive(Default)]
pub(crate) struct Seen {
    /// Every update, summarized as a line.
    pub(crate) updates: Vec<String>,
    /// Every permission question: the call's title and the option kinds.
    asked: Vec<String>,
    /// The option ids to answer with, in order (then: reject_once).
    answers: Vec<&'static str>,
}

pub(crate) type Shared = Arc<Mutex<Seen>>;

/// One line per update: what kind, and the part a person would read.
fn summary(update: &SessionUpdate) -> String {
    let text = |c: &ContentBlock| match c {
        ContentBlock::Text(t) => t.text.clone(),
        other => format!("{other:?}"),
    };
    match update {
        SessionUpdate::UserMessageChunk(c) => format!("user: {}", text(&c.content)),
        SessionUpdate::AgentMessageChunk(c) => format!("message: {}", text(&c.content)),
        SessionUpdate::AgentThoughtChunk(c) => format!("thought: {}", text(&c.content)),
        SessionUpdate::ToolCall(call) => format!(
            "tool_call {} {:?} {:?} {} {}",
            call.tool_call_id.0,
            call.kind,
            call.status,
            call.title,
            call.raw_input.as_ref().unwrap()
        ),
        SessionUpdate::ToolCallUpdate(u) => {
            let content = u
                .fields
                .content
                .iter()
                .flatten()
                .map(|c| match c {
                    agent_client_protocol::v1::schema::ToolCallContent::Content(c) => {
                        text(&c.content)
                    }
                    other => format!("{other:?}"),
                })
                .collect::<Vec<_>>()
                .join(" ");
            format!(
                "tool_call_update {} {:?} {content}",
                u.tool_call_id.0,
                u.fields.status.unwrap()
            )
            .trim_end()
            .to_string()
        }
        SessionUpdate::UsageUpdate(u) => format!("usage {}/{}", u.used, u.size),
        other => format!("other: {other:?}"),
    }
}

/// Run `lrg acp ARGS` in `env` and hold a conversation with it: `main`
/// gets the connection; the client records updates and answers questions.
pub(crate) async fn converse<R: Send + 'static>(
    env: &Env,
    args: &[&str],
    seen: Shared,
    main: impl AsyncFnOnce(ConnectionTo<Agent>) -> Result<R, agent_client_protocol::Error>,
) -> R {
    let mut child = Command::new(env!("CARGO_BIN_EXE_lrg"))
        .arg("acp")
        .args(args)
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
    let (updates, questions) = (seen.clone(), seen);
    let run = Client
        .v1()
        .name("fixture-editor")
        .on_receive_notification(
            async move |note: SessionNotification, _cx| {
                updates.lock().unwrap().updates.push(summary(&note.update));
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .on_receive_request(
            async move |req: RequestPermissionRequest, responder, _cx| {
                let answer = {
                    let mut seen = questions.lock().unwrap();
                    let kinds: Vec<_> = req.options.iter().map(|o| o.kind).collect();
                    seen.asked.push(format!(
                        "{} {kinds:?}",
                        req.tool_call.fields.title.clone().unwrap_or_default()
                    ));
                    if seen.answers.is_empty() {
                        "reject_once"
                    } else {
                        seen.answers.remove(0)
                    }
                };
                let kind_ok = req.options.iter().any(|o| *o.option_id.0 == *answer);
                assert!(kind_ok, "{answer} is not among the options offered");
                responder.respond(RequestPermissionResponse::new(
                    RequestPermissionOutcome::Selected(SelectedPermissionOutcome::new(answer)),
                ))
            },
            agent_client_protocol::on_receive_request!(),
        )
        .connect_with(ByteStreams::new(stdin, stdout), async move |cx| {
            cx.send_request(InitializeRequest::new(ProtocolVersion::V1))
                .block_task()
                .await?;
            main(cx).await
        });
    let result = tokio::time::timeout(LIMIT, run)
        .await
        .expect("the conversation with `lrg acp` timed out")
        .expect("the conversation failed");
    // Closing stdin ends `lrg acp`.
    let status = tokio::time::timeout(LIMIT, child.wait())
        .await
        .expect("`lrg acp` did not exit after stdin closed")
        .unwrap();
    assert!(status.success(), "lrg acp exited with {status}");
    result
}

fn demo_server() -> String {
    format!("{} demo-server", env!("CARGO_BIN_EXE_lrg"))
}

pub(crate) async fn new_session(cx: &ConnectionTo<Agent>) -> NewSessionResponse {
    cx.send_request(NewSessionRequest::new(std::env::temp_dir()))
        .block_task()
        .await
        .unwrap()
}

pub(crate) fn prompt(session: &NewSessionResponse, text: &str) -> PromptRequest {
    PromptRequest::new(
        session.session_id.clone(),
        vec![ContentBlock::from(text.to_string())],
    )
}

#[tokio::test]
async fn a_whole_prompt_streams_thoughts_text_and_a_tool_call() {
    let env = Env::new();
    env.file(
        "s.json",
        r#"[{"reasoning": "I should look.", "text": "Let me look.",
             "calls": [{"name": "list_notes"}], "usage": {"prompt_tokens": 90, "completion_tokens": 10}},
            {"text": "You have no notes."}]"#,
    );
    let seen = Shared::default();
    let demo = demo_server();
    let (session, stop) = converse(
        &env,
        &["--model", "script:s.json", "--mcp", &demo],
        seen.clone(),
        async |cx| {
            let session = new_session(&cx).await;
            let stop = cx
                .send_request(prompt(&session, "what notes do I have?"))
                .block_task()
                .await?
                .stop_reason;
            Ok((session, stop))
        },
    )
    .await;
    assert_eq!(stop, StopReason::EndTurn);
    // The model is a session option, on the session's model.
    let options = session.config_options.expect("config options");
    assert_eq!(&*options[0].id.0, "model");
    let SessionConfigKind::Select(select) = &options[0].kind else {
        panic!("the model option is not a select");
    };
    assert_eq!(&*select.current_value.0, "script:s.json");
    let seen = seen.lock().unwrap();
    insta::assert_snapshot!(seen.updates.join("\n"));
    assert!(seen.asked.is_empty(), "a read tool asked: {:?}", seen.asked);
}

#[tokio::test]
async fn permission_questions_reach_the_client_and_its_answers_count() {
    let env = Env::new();
    env.file(
        "s.json",
        r#"[{"calls": [{"name": "add_note", "arguments": {"text": "milk"}}]},
            {"text": "Added."},
            {"calls": [{"name": "delete_notes", "arguments": {"ids": [1]}}]},
            {"text": "I did not delete it."}]"#,
    );
    let seen = Shared::default();
    seen.lock().unwrap().answers = vec!["allow_always", "reject_always"];
    let demo = demo_server();
    let stops = converse(
        &env,
        &["--model", "script:s.json", "--mcp", &demo],
        seen.clone(),
        async |cx| {
            let session = new_session(&cx).await;
            let mut stops = Vec::new();
            for text in ["note milk", "now delete it"] {
                let response = cx.send_request(prompt(&session, text)).block_task().await?;
                stops.push(response.stop_reason);
            }
            Ok(stops)
        },
    )
    .await;
    assert_eq!(stops, [StopReason::EndTurn, StopReason::EndTurn]);
    let seen = seen.lock().unwrap();
    let all = [
        PermissionOptionKind::AllowOnce,
        PermissionOptionKind::AllowAlways,
        PermissionOptionKind::RejectOnce,
        PermissionOptionKind::RejectAlways,
    ];
    assert_eq!(
        seen.asked,
        [format!("add_note {all:?}"), format!("delete_notes {all:?}")]
    );
    insta::assert_snapshot!(seen.updates.join("\n"));
    // "Allow always" and "reject always" wrote their rules to the settings
    // file: the one tool runs from now on, the other is no longer offered.
    let settings = env.read("config/lrg/permissions.json");
    assert!(
        settings.contains(r#""add_note": "allow""#)
            && settings.contains(r#""delete_notes": "block""#),
        "settings: {settings}"
    );
}

#[tokio::test]
async fn cancel_stops_the_turn_mid_stream() {
    let env = Env::new();
    let long = "word ".repeat(200);
    env.file(
        "s.json",
        &format!(r#"[{{"text": "{long}", "delay_ms": 20}}, {{"text": "Back again."}}]"#),
    );
    let seen = Shared::default();
    let watch = seen.clone();
    let (stop, again) = converse(
        &env,
        &["--model", "script:s.json"],
        seen.clone(),
        async |cx| {
            let session = new_session(&cx).await;
            let running = cx.send_request(prompt(&session, "talk")).block_task();
            let cancel = async {
                // Cancel once the answer has begun to stream.
                while watch.lock().unwrap().updates.is_empty() {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                cx.send_notification(CancelNotification::new(session.session_id.clone()))
            };
            let (response, sent) = futures::join!(running, cancel);
            sent?;
            // The session takes the next prompt.
            let again = cx
                .send_request(prompt(&session, "again"))
                .block_task()
                .await?;
            Ok((response?.stop_reason, again.stop_reason))
        },
    )
    .await;
    assert_eq!(stop, StopReason::Cancelled);
    assert_eq!(again, StopReason::EndTurn);
    let seen = seen.lock().unwrap();
    let streamed = seen
        .updates
        .iter()
        .filter(|u| u.starts_with("message: word"))
        .count();
    assert!(
        streamed > 0 && streamed < 200,
        "{streamed} words streamed before the cancel took effect"
    );
    assert_eq!(seen.updates.last().unwrap(), "message:  again.");
}

#[tokio::test]
async fn an_unknown_session_id_is_a_clear_error() {
    let env = Env::new();
    env.file("s.json", r#"[{"text": "hi"}]"#);
    let error = converse(
        &env,
        &["--model", "script:s.json"],
        Shared::default(),
        async |cx| {
            let request = PromptRequest::new("no-such-session", vec![ContentBlock::from("hi")]);
            Ok(cx.send_request(request).block_task().await.unwrap_err())
        },
    )
    .await;
    assert_eq!(error.code.value(), -32002, "{error:?}");
    assert!(
        error
            .message
            .contains("unknown session id `no-such-session`"),
        "{error:?}"
    );
}

#[tokio::test]
async fn a_malformed_line_is_answered_and_the_connection_goes_on() {
    let env = Env::new();
    env.file("s.json", r#"[{"text": "hi"}]"#);
    let mut child = Command::new(env!("CARGO_BIN_EXE_lrg"))
        .args(["acp", "--model", "script:s.json"])
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("XDG_CONFIG_HOME", env.path("config"))
        .current_dir(env.dir.path())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    stdin
        .write_all(b"{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\"\n")
        .await
        .unwrap();
    stdin
        .write_all(
            b"{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"initialize\",\"params\":{\"protocolVersion\":1}}\n",
        )
        .await
        .unwrap();
    let mut next = async || -> serde_json::Value {
        let line = tokio::time::timeout(LIMIT, lines.next_line())
            .await
            .expect("no answer from lrg acp")
            .unwrap()
            .expect("lrg acp closed stdout");
        serde_json::from_str(&line).unwrap()
    };
    let first = next().await;
    assert_eq!(first["error"]["code"], -32700, "{first}");
    let second = next().await;
    assert_eq!(second["id"], 2, "{second}");
    assert_eq!(second["result"]["agentInfo"]["name"], "lrg", "{second}");
    drop(stdin);
    let status = tokio::time::timeout(LIMIT, child.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success());
}

#[tokio::test]
async fn a_kept_session_loads_again_with_its_history() {
    let env = Env::new();
    env.file("s.json", r#"[{"text": "Hello there."}]"#);
    let store = env.path("sessions");
    let store = store.to_str().unwrap();
    let args = ["--model", "script:s.json", "--store", store];
    let id = converse(&env, &args, Shared::default(), async |cx| {
        let session = new_session(&cx).await;
        cx.send_request(prompt(&session, "hi")).block_task().await?;
        Ok(session.session_id)
    })
    .await;
    let seen = Shared::default();
    converse(&env, &args, seen.clone(), async |cx| {
        cx.send_request(LoadSessionRequest::new(id, std::env::temp_dir()))
            .block_task()
            .await?;
        Ok(())
    })
    .await;
    assert_eq!(
        seen.lock().unwrap().updates,
        ["user: hi", "message: Hello there."]
    );
}

#[tokio::test]
async fn a_kept_session_longer_than_the_event_log_loads_whole() {
    let env = Env::new();
    env.file("s.json", r#"[{"text": "Hello there."}]"#);
    let store = env.path("sessions");
    let args = [
        "--model",
        "script:s.json",
        "--store",
        store.to_str().unwrap(),
    ];
    let id = converse(&env, &args, Shared::default(), async |cx| {
        let session = new_session(&cx).await;
        cx.send_request(prompt(&session, "hi")).block_task().await?;
        Ok(session.session_id)
    })
    .await;
    // 2,100 more exchanges: 4,202 events, past the 4,096 a log keeps.
    let file = std::fs::read_dir(&store)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .unwrap();
    let mut text = std::fs::read_to_string(&file).unwrap();
    for i in 0..2100 {
        text.push_str(&format!(
            "{{\"row\":{{\"role\":\"user\",\"parts\":[{{\"type\":\"text\",\"text\":\"q{i}\"}}]}}}}\n\
             {{\"row\":{{\"role\":\"assistant\",\"parts\":[{{\"type\":\"text\",\"text\":\"a{i}\"}}]}}}}\n"
        ));
    }
    std::fs::write(&file, text).unwrap();
    let seen = Shared::default();
    converse(&env, &args, seen.clone(), async |cx| {
        cx.send_request(LoadSessionRequest::new(id, std::env::temp_dir()))
            .block_task()
            .await?;
        Ok(())
    })
    .await;
    let updates = seen.lock().unwrap().updates.clone();
    assert_eq!(updates.len(), 2 + 2 * 2100, "{:?}", &updates[..4]);
    assert_eq!(updates[..2], ["user: hi", "message: Hello there."]);
    assert_eq!(updates[updates.len() - 1], "message: a2099");
}

/// `lrg run --model acp:'lrg acp …'`: lrg driving lrg. The inner lrg's tool
/// calls show in the outer run, and its permission questions are the outer
/// run's approvals: denied (with a note) when nobody can answer, allowed with
/// `--yes`.
#[test]
fn lrg_runs_an_acp_agent_and_shows_its_tool_calls() {
    let env = Env::new();
    env.file(
        "s.json",
        r#"[{"reasoning": "Look first.", "text": "Let me look.", "calls": [{"name": "list_notes"}]},
            {"calls": [{"name": "add_note", "arguments": {"text": "milk"}}]},
            {"text": "Three notes; the new one was refused."}]"#,
    );
    // `lrg` means this binary, in acp: as in --mcp (it is not on PATH here).
    let agent = "acp:lrg acp --model script:s.json --mcp 'lrg demo-server'";
    let r = common::ran(env.lrg().args(["run", "--model", agent, "what notes?"]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        r.stdout,
        "Let me look.\n\nThree notes; the new one was refused.\n"
    );
    for line in [
        "→ list_notes {} [read]",
        "✓ list_notes 1: Buy oat milk",
        "→ add_note {\"text\":\"milk\"} [change]",
        "approval add_note: deny",
        "✗ add_note Not run: not allowed",
    ] {
        assert!(r.stderr.contains(line), "no {line:?} in:\n{}", r.stderr);
    }
    let r = common::ran(
        env.lrg()
            .args(["run", "--yes", "--model", agent, "what notes?"]),
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stderr.contains("✓ add_note added note 4"), "{}", r.stderr);
}

#[test]
fn an_acp_agent_that_does_not_start_is_a_clear_error() {
    let env = Env::new();
    let r = common::ran(
        env.lrg()
            .args(["run", "--model", "acp:no-such-agent-binary", "hi"]),
    );
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("cannot start ACP agent `no-such-agent-binary`")
            && r.stderr.contains("(is it installed and on PATH?)"),
        "{}",
        r.stderr
    );
}

#[tokio::test]
async fn choosing_another_model_starts_a_new_chat_on_it() {
    use agent_client_protocol::v1::schema::SetSessionConfigOptionRequest;
    let env = Env::new();
    env.file("a.json", r#"[{"text": "From a."}]"#);
    env.file("b.json", r#"[{"text": "From b."}]"#);
    let seen = Shared::default();
    let current = converse(
        &env,
        &["--model", "script:a.json"],
        seen.clone(),
        async |cx| {
            let session = new_session(&cx).await;
            let set = SetSessionConfigOptionRequest::new(
                session.session_id.clone(),
                "model",
                "script:b.json",
            );
            let options = cx.send_request(set).block_task().await?.config_options;
            cx.send_request(prompt(&session, "hi")).block_task().await?;
            let SessionConfigKind::Select(select) = &options[0].kind else {
                panic!("the model option is not a select");
            };
            Ok(select.current_value.0.to_string())
        },
    )
    .await;
    assert_eq!(current, "script:b.json");
    assert_eq!(
        seen.lock().unwrap().updates,
        ["message: From", "message:  b."]
    );
}

#[tokio::test]
async fn the_clients_mcp_servers_are_the_sessions_tools() {
    use agent_client_protocol::v1::schema::{McpServer, McpServerStdio};
    let env = Env::new();
    env.file(
        "s.json",
        r#"[{"calls": [{"name": "read_note", "arguments": {"id": 2}}]}, {"text": "Found it."}]"#,
    );
    let seen = Shared::default();
    converse(
        &env,
        &["--model", "script:s.json"],
        seen.clone(),
        async |cx| {
            let notes = McpServerStdio::new("notes", env!("CARGO_BIN_EXE_lrg"))
                .args(vec!["demo-server".to_string()]);
            let session = cx
                .send_request(
                    NewSessionRequest::new(env.dir.path())
                        .mcp_servers(vec![McpServer::Stdio(notes)]),
                )
                .block_task()
                .await?;
            cx.send_request(prompt(&session, "read note 2"))
                .block_task()
                .await?;
            Ok(())
        },
    )
    .await;
    let seen = seen.lock().unwrap();
    assert!(
        seen.updates.contains(
            &"tool_call_update call_1_1 Completed Call the plumber about the kitchen sink"
                .to_string()
        ),
        "{:#?}",
        seen.updates
    );
}

/// A `pre_tool_use` hook of lrg's config file stops a call under `lrg acp`
/// too, whatever the mode: the editor is never asked, the model is told.
#[cfg(unix)]
#[tokio::test]
async fn a_config_hook_denies_delete_under_acp() {
    use std::os::unix::fs::PermissionsExt as _;
    let env = Env::new();
    env.file(
        "guard.sh",
        "#!/bin/sh\ncat >/dev/null\necho '{\"decision\":\"deny\",\"reason\":\"deleting needs a ticket\"}'\n",
    );
    std::fs::set_permissions(env.path("guard.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::create_dir_all(env.path("config/lrg")).unwrap();
    env.file(
        "config/lrg/config.toml",
        &format!(
            "[[hooks.pre_tool_use]]\nmatcher = \"delete_*\"\ncommand = \"{}\"\n",
            env.path("guard.sh").display()
        ),
    );
    env.file(
        "s.json",
        r#"[{"calls": [{"name": "delete_notes", "arguments": {"ids": [1]}}]},
            {"text": "I did not delete it."}]"#,
    );
    let seen = Shared::default();
    let demo = demo_server();
    let stop = converse(
        &env,
        &[
            "--model",
            "script:s.json",
            "--mcp",
            &demo,
            "--mode",
            "auto_all",
        ],
        seen.clone(),
        async |cx| {
            let session = new_session(&cx).await;
            let response = cx
                .send_request(prompt(&session, "delete note 1"))
                .block_task()
                .await?;
            Ok(response.stop_reason)
        },
    )
    .await;
    assert_eq!(stop, StopReason::EndTurn);
    let seen = seen.lock().unwrap();
    assert!(
        seen.asked.is_empty(),
        "the editor was asked: {:?}",
        seen.asked
    );
    let updates = seen.updates.join("\n");
    assert!(updates.contains("deleting needs a ticket"), "{updates}");
}
