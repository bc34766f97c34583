//! [`AcpBackend`] against a fixture ACP agent built with the crate's agent
//! side (`tests/bin/acp_agent.rs`): every update kind, a permission round
//! trip through the chat's approvals, stop → `session/cancel`, a dead
//! agent started again by the next message; clear, retry and compact on an
//! agent that keeps its own conversation; its tool calls kept in the
//! history and shown again on resume.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::session_support;

use std::sync::Arc;

use lrg_chat::acp::{AcpBackend, AgentToolCall};
use lrg_chat::events::Event;
use lrg_chat::{Answer, ChatSession, FixedModel, TurnOutcome};
use lrg_providers::ProviderError;
use session_support::*;

fn chat() -> (ChatSession, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let agent = env!("CARGO_BIN_EXE_lrg-test-acp-agent").to_string();
    let backend = AcpBackend::new(vec![agent], dir.path()).unwrap();
    let session = ChatSession::builder(Arc::new(FixedModel::new(backend))).build();
    (session, dir)
}

/// Send `text`, answering the agent's one question with `answer`.
async fn exchange(session: &ChatSession, text: &str, answer: Answer) -> TurnOutcome {
    let mut sub = session.subscribe(session.events().last_seq());
    let handle = session.send(text).unwrap();
    let call = next_approval(&mut sub).await;
    session.answer_approval(&call, answer).unwrap();
    finish(handle).await
}

#[tokio::test]
async fn every_update_kind_becomes_a_chat_event() {
    let (session, _dir) = chat();
    let outcome = exchange(&session, "write it", Answer::Once).await;
    assert_eq!(
        outcome,
        TurnOutcome::Completed {
            text: "Writing a.txt.\nDone.".into(),
            json: None,
        }
    );
    snapshot!(log(&session));
    // The agent's tool call is kept with its answer, as the agent's: a
    // record, never a call for lrg's loop to run.
    let history = session.history();
    assert_eq!(history.len(), 2);
    assert_eq!(history[1].tool_calls().count(), 0);
    let kept: Vec<AgentToolCall> = history[1]
        .parts
        .iter()
        .filter_map(AgentToolCall::from_part)
        .collect();
    assert_eq!(kept.len(), 1, "{:?}", history[1]);
    assert_eq!(
        (kept[0].id.as_str(), kept[0].ok, kept[0].result.as_str()),
        ("t1", Some(true), "wrote a.txt")
    );
    assert_eq!(history[1].text(), "Writing a.txt.\nDone.");
}

/// The answer to `text`, which must complete.
async fn said(session: &ChatSession, text: &str) -> String {
    completed(finish(session.send(text).unwrap()).await)
}

fn completed(outcome: TurnOutcome) -> String {
    match outcome {
        TurnOutcome::Completed { text, .. } => text,
        other => panic!("not completed: {other:?}"),
    }
}

#[tokio::test]
async fn clear_starts_a_new_agent_session_that_is_told_nothing() {
    let (session, _dir) = chat();
    assert_eq!(said(&session, "who").await, "session s1");
    assert!(session.clear_kept().await.unwrap());
    // A new conversation: nothing of the old one is sent to the new session.
    assert_eq!(said(&session, "echo").await, "[s2] echo");
}

#[tokio::test]
async fn retry_replays_the_history_to_a_fresh_agent_session() {
    let (session, _dir) = chat();
    assert_eq!(said(&session, "who").await, "session s1");
    // In step with lrg's history: only the new message is sent.
    assert_eq!(said(&session, "echo this").await, "[s1] echo this");
    let again = completed(finish(session.retry_last().unwrap()).await);
    assert!(
        again.starts_with("[s2] [lrg] This conversation began in an earlier session."),
        "{again}"
    );
    assert!(
        again.contains("User: who\n\nAssistant: session s1"),
        "{again}"
    );
    assert!(again.ends_with("echo this"), "{again}");
    assert!(
        !again.contains("[s1] echo this"),
        "the retried answer was replayed: {again}"
    );
    // The next message stays on the fresh session.
    assert_eq!(said(&session, "who").await, "session s2");
}

#[tokio::test]
async fn compact_is_refused_and_never_sent_to_the_agent() {
    let (session, _dir) = chat();
    assert_eq!(said(&session, "who").await, "session s1");
    let outcome = finish(session.compact().unwrap()).await;
    let TurnOutcome::Failed { error } = &outcome else {
        panic!("compacted: {outcome:?}");
    };
    assert!(
        error.to_string().contains("keeps its own conversation"),
        "{error}"
    );
    // Nothing changed: same history, same agent session.
    assert_eq!(session.history().len(), 2);
    assert_eq!(said(&session, "who").await, "session s1");
}

#[tokio::test]
async fn a_resumed_chat_shows_the_agents_tool_calls_and_replays_to_a_new_agent() {
    use lrg_chat::store::{JsonlStore, ModelBinding, RESUME_ROWS, SessionMeta, SessionStore};
    let dir = tempfile::tempdir().unwrap();
    let agent = env!("CARGO_BIN_EXE_lrg-test-acp-agent").to_string();
    let model = || {
        let backend = AcpBackend::new(vec![agent.clone()], dir.path()).unwrap();
        Arc::new(FixedModel::new(backend))
    };
    let store = Arc::new(JsonlStore::new(dir.path().join("sessions")));
    let meta = SessionMeta::new(ModelBinding::new("acp:agent"));
    store.create(&meta).await.unwrap();
    let first = ChatSession::builder(model())
        .store(store.clone(), meta.id.clone())
        .build();
    exchange(&first, "write it", Answer::Once).await;
    drop(first);
    store.release(&meta.id).await;
    let stored = store.resume(&meta.id, RESUME_ROWS).await.unwrap();
    let resumed = ChatSession::builder(model())
        .resumed(stored)
        .store(store.clone(), meta.id.clone())
        .build();
    let told: Vec<String> = resumed
        .events()
        .entries()
        .iter()
        .filter_map(|e| match &e.event {
            Event::ToolCall { call_id, tool, .. } => Some(format!("call {call_id} {tool}")),
            Event::ToolDone {
                call_id, ok, text, ..
            } => Some(format!("done {call_id} {ok} {text}")),
            _ => None,
        })
        .collect();
    assert_eq!(told, ["call t1 write a.txt", "done t1 true wrote a.txt"]);
    // A new agent process has not seen the chat: it is told it first.
    let answer = said(&resumed, "echo").await;
    assert!(answer.starts_with("[s1] [lrg]"), "{answer}");
    assert!(answer.contains("User: write it"), "{answer}");
    assert!(answer.contains("[ran write a.txt: done]"), "{answer}");
}

#[tokio::test]
async fn a_denied_question_is_the_agents_rejection() {
    let (session, _dir) = chat();
    let outcome = exchange(&session, "write it", Answer::deny_with("not now")).await;
    assert_eq!(
        outcome,
        TurnOutcome::Completed {
            text: "Writing a.txt.\nNot written.".into(),
            json: None,
        }
    );
    let done: Vec<_> = session
        .events()
        .entries()
        .iter()
        .filter_map(|e| match &e.event {
            Event::ToolDone { ok, text, .. } => Some((*ok, text.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(done, [(false, "the user said no".to_string())]);
}

#[tokio::test]
async fn stop_cancels_the_agents_turn() {
    let (session, _dir) = chat();
    let mut sub = session.subscribe(0);
    let handle = session.send("be slow").unwrap();
    wait_for(&mut sub, |e| matches!(e, Event::Delta { .. })).await;
    assert!(session.stop());
    assert_eq!(finish(handle).await, TurnOutcome::Stopped);
    // The agent heard the cancel: its next turn is answered normally, with
    // no tick of the cancelled one in it.
    let outcome = exchange(&session, "write it", Answer::Once).await;
    assert_eq!(
        outcome,
        TurnOutcome::Completed {
            text: "Writing a.txt.\nDone.".into(),
            json: None,
        }
    );
}

#[tokio::test]
async fn late_updates_of_a_stopped_prompt_never_show_in_the_next_turn() {
    let (session, _dir) = chat();
    let mut sub = session.subscribe(0);
    // The agent goes on sending `late` chunks after it answered the cancel.
    let handle = session.send("be slow and late").unwrap();
    wait_for(&mut sub, |e| matches!(e, Event::Delta { .. })).await;
    assert!(session.stop());
    assert_eq!(finish(handle).await, TurnOutcome::Stopped);
    // Its answer takes 200 ms, while the late chunks would still come.
    let outcome = finish(session.send("wait, who?").unwrap()).await;
    assert_eq!(
        outcome,
        TurnOutcome::Completed {
            text: "session s1".into(),
            json: None,
        }
    );
}

#[tokio::test]
async fn a_dead_agent_is_a_clear_error_and_the_next_message_starts_it_again() {
    let (session, _dir) = chat();
    let outcome = finish(session.send("die").unwrap()).await;
    let TurnOutcome::Failed {
        error: ProviderError::Other { message },
    } = &outcome
    else {
        panic!("not a failure: {outcome:?}");
    };
    assert!(
        message.contains("the agent exited")
            && message.contains("the next message starts it again"),
        "{message}"
    );
    let outcome = exchange(&session, "write it", Answer::Once).await;
    assert!(
        matches!(outcome, TurnOutcome::Completed { .. }),
        "{outcome:?}"
    );
}

#[tokio::test]
async fn chats_sharing_a_backend_each_have_their_own_agent_session() {
    let dir = tempfile::tempdir().unwrap();
    let agent = env!("CARGO_BIN_EXE_lrg-test-acp-agent").to_string();
    let backend = Arc::new(AcpBackend::new(vec![agent], dir.path()).unwrap());
    let chat = || ChatSession::builder(Arc::new(FixedModel(backend.clone()))).build();
    let (a, b) = (chat(), chat());
    let who = async |session: &ChatSession| match finish(session.send("who").unwrap()).await {
        TurnOutcome::Completed { text, .. } => text,
        other => panic!("{other:?}"),
    };
    assert_eq!(who(&a).await, "session s1");
    assert_eq!(who(&b).await, "session s2");
    assert_eq!(who(&a).await, "session s1");
}

#[tokio::test]
async fn a_typed_message_sends_the_schema_with_the_prompt() {
    let (session, _dir) = chat();
    let schema = serde_json::json!({
        "type": "object",
        "properties": {"ok": {"type": "boolean"}},
        "required": ["ok"]
    });
    let handle = session.send_with_schema("is it fine?", schema).unwrap();
    let answer = tokio::time::timeout(std::time::Duration::from_secs(30), handle)
        .await
        .expect("the agent was never told the schema");
    assert_eq!(answer, Ok(serde_json::json!({"ok": true})));
}
