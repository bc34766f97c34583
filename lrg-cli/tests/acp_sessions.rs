//! `lrg acp` beyond one prompt at a time: `--store` as an editor's session
//! picker uses it (`session/list` tells the kept sessions by folder, newest
//! first, and `session/resume` opens one again without telling its history a
//! second time), and `--sub-agents`, whose results start turns of their own
//! that the editor sees between its prompts.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::acp::{Shared, converse, prompt};
use crate::common;

use agent_client_protocol::v1::schema::{
    ListSessionsRequest, NewSessionRequest, ResumeSessionRequest, SessionId, StopReason,
};
use common::Env;

/// A session made in `dir`, with one prompt `text`; its id.
async fn session_in(
    cx: &agent_client_protocol::v1::ConnectionTo<agent_client_protocol::Agent>,
    dir: &std::path::Path,
    text: &str,
) -> Result<SessionId, agent_client_protocol::Error> {
    let session = cx
        .send_request(NewSessionRequest::new(dir))
        .block_task()
        .await?;
    cx.send_request(prompt(&session, text)).block_task().await?;
    Ok(session.session_id)
}

#[tokio::test]
async fn kept_sessions_are_listed_by_folder_and_resumed_without_their_history() {
    let env = Env::new();
    env.file(
        "s.json",
        r#"[{"text": "Hello there."}, {"text": "Again."}]"#,
    );
    let (a, b) = (env.path("project-a"), env.path("project-b"));
    std::fs::create_dir_all(&a).unwrap();
    std::fs::create_dir_all(&b).unwrap();
    let store = env.path("sessions");
    let args = [
        "--model",
        "script:s.json",
        "--store",
        store.to_str().unwrap(),
    ];
    let (first, second) = converse(&env, &args, Shared::default(), async |cx| {
        let first = session_in(&cx, &a, "hi from a").await?;
        // Times are in milliseconds: the second must be the newer one.
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        let second = session_in(&cx, &b, "hi from b").await?;
        Ok((first, second))
    })
    .await;

    let seen = Shared::default();
    let (all, in_a, stop) = converse(&env, &args, seen.clone(), async |cx| {
        let all = cx
            .send_request(ListSessionsRequest::new())
            .block_task()
            .await?;
        let in_a = cx
            .send_request(ListSessionsRequest::new().cwd(a.clone()))
            .block_task()
            .await?;
        cx.send_request(ResumeSessionRequest::new(first.clone(), a.clone()))
            .block_task()
            .await?;
        let session = agent_client_protocol::v1::schema::NewSessionResponse::new(first.clone());
        let response = cx
            .send_request(prompt(&session, "and now?"))
            .block_task()
            .await?;
        Ok((all, in_a, response.stop_reason))
    })
    .await;

    // Newest first, each with its folder and its first message as title.
    let listed: Vec<_> = all
        .sessions
        .iter()
        .map(|s| (s.session_id.clone(), s.cwd.clone(), s.title.clone()))
        .collect();
    assert_eq!(
        listed,
        [
            (second.clone(), b.clone(), Some("hi from b".to_string())),
            (first.clone(), a.clone(), Some("hi from a".to_string())),
        ]
    );
    assert!(
        all.sessions.iter().all(|s| s
            .updated_at
            .as_deref()
            .is_some_and(|t| t.ends_with('Z') && t.len() == 20)),
        "{:?}",
        all.sessions
    );
    assert!(all.next_cursor.is_none());
    let only_a: Vec<_> = in_a.sessions.iter().map(|s| s.session_id.clone()).collect();
    assert_eq!(only_a, [first]);

    // Resumed, not loaded: the old turn is not told again, the new one runs.
    assert_eq!(stop, StopReason::EndTurn);
    let updates = seen.lock().unwrap().updates.clone();
    assert!(
        !updates.iter().any(|u| u.contains("hi from a")),
        "resume told the history again: {updates:?}"
    );
    assert!(
        updates.iter().any(|u| u.starts_with("message: ")),
        "{updates:?}"
    );
}

#[tokio::test]
async fn without_a_store_there_is_nothing_to_list_or_resume() {
    let env = Env::new();
    env.file("s.json", r#"[{"text": "Hello there."}]"#);
    let args = ["--model", "script:s.json"];
    let (list, resume) = converse(&env, &args, Shared::default(), async |cx| {
        let list = cx
            .send_request(ListSessionsRequest::new())
            .block_task()
            .await
            .unwrap_err();
        let resume = cx
            .send_request(ResumeSessionRequest::new(
                "0123456789abcdef0123456789abcdef",
                std::env::temp_dir(),
            ))
            .block_task()
            .await
            .unwrap_err();
        Ok((list, resume))
    })
    .await;
    assert!(list.message.contains("not kept"), "{list:?}");
    assert!(resume.message.contains("--store"), "{resume:?}");
}

#[tokio::test]
async fn a_bad_cursor_is_a_clear_error() {
    let env = Env::new();
    env.file("s.json", r#"[{"text": "Hello there."}]"#);
    let store = env.path("sessions");
    let args = [
        "--model",
        "script:s.json",
        "--store",
        store.to_str().unwrap(),
    ];
    let err = converse(&env, &args, Shared::default(), async |cx| {
        Ok(cx
            .send_request(ListSessionsRequest::new().cursor("page-two".to_string()))
            .block_task()
            .await
            .unwrap_err())
    })
    .await;
    assert!(
        err.message.contains("`page-two` is not a cursor"),
        "{err:?}"
    );
}

/// The parent spawns one sub-agent; its turn and the sub-agent's first race
/// for the next two script turns, so both are plain replies; the last turn
/// is the parent's reaction to the sub-agent's answer.
const SUB_AGENT_SCRIPT: &str = r#"[
  {"calls": [{"name": "spawn_sub_agent", "arguments": {"tasks": [{"description": "count the notes", "prompt": "How many notes are there?"}]}}]},
  {"text": "Working on it."},
  {"text": "Working on it."},
  {"text": "The helper is done."}
]"#;

#[tokio::test]
async fn a_sub_agents_result_reaches_the_editor_after_the_prompt_ended() {
    let env = Env::new();
    env.file("s.json", SUB_AGENT_SCRIPT);
    let seen = Shared::default();
    let watched = seen.clone();
    let args = ["--model", "script:s.json", "--sub-agents"];
    let stop = converse(&env, &args, seen.clone(), async |cx| {
        let session = crate::acp::new_session(&cx).await;
        let response = cx
            .send_request(prompt(&session, "count my notes in the background"))
            .block_task()
            .await?;
        // The reaction is a turn no prompt asked for: it is told as it runs.
        for _ in 0..300 {
            if said(&watched.lock().unwrap().updates).ends_with("The helper is done.") {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        Ok(response.stop_reason)
    })
    .await;
    assert_eq!(stop, StopReason::EndTurn);
    let updates = seen.lock().unwrap().updates.clone();
    // The result came back as a call of its own, then the reaction's text.
    let result = updates
        .iter()
        .position(|u| u.starts_with("tool_call ") && u.contains(" sub_agent_result "));
    assert!(
        result.is_some(),
        "the autonomous turn was not told: {updates:?}"
    );
    let after = &updates[result.unwrap_or_default()..];
    assert_eq!(said(after), "The helper is done.", "{updates:?}");
}

/// The message chunks of `updates`, joined.
fn said(updates: &[String]) -> String {
    updates
        .iter()
        .filter_map(|u| u.strip_prefix("message: "))
        .collect()
}
