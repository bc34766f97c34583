//! The session loop driven by a ScriptedModel against the test tools: one
//! snapshot of the event log per scenario.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::session_support;

use std::sync::Arc;

use lrg_chat::events::{DeltaKind, Event};
use lrg_chat::permissions::{Mode, PermissionSettings, Rule};
use lrg_chat::session::STOPPED_NOTE;
use lrg_chat::{Answer, ChatSession, FixedModel, Permissions, SessionError, TurnOutcome};
use lrg_providers::{Part, ProviderError, Role, ScriptedError, ScriptedModel, ScriptedTurn, Usage};
use serde_json::json;
use session_support::*;

#[tokio::test]
async fn plain_reply() {
    let (session, model, _) = new_session(vec![reply("Hello there.")]);
    let outcome = finish(session.send("hi").unwrap()).await;
    assert_eq!(
        outcome,
        TurnOutcome::Completed {
            text: "Hello there.".into(),
            json: None,
        }
    );
    assert_pairing(&session);
    assert_eq!(session.history().len(), 2);
    assert_eq!(model.requests()[0].tools.len(), 5, "every tool offered");
    snapshot!(log(&session));
}

#[tokio::test]
async fn read_tool_runs_without_asking() {
    let (session, _, tools) = new_session(vec![
        calls(&[("read_note", json!({"name": "todo"}))]),
        reply("You need milk."),
    ]);
    let outcome = finish(session.send("what is on my todo note?").unwrap()).await;
    assert_eq!(
        outcome,
        TurnOutcome::Completed {
            text: "You need milk.".into(),
            json: None,
        }
    );
    assert_eq!(
        tools.calls(),
        vec![("read_note".to_string(), json!({"name": "todo"}))]
    );
    assert_pairing(&session);
    snapshot!(log(&session));
}

/// A destructive call answered with `answer`; returns the session after the
/// turn, with the approval's call id checked.
async fn destructive_answered(
    answer: Answer,
    second_call: bool,
) -> (ChatSession, Arc<TestTools>, Arc<Permissions>) {
    let mut turns = vec![calls(&[("delete_notes", json!({"ids": [1, 2]}))])];
    if second_call {
        turns.push(calls(&[("delete_notes", json!({"ids": [3]}))]));
    }
    turns.push(reply("Done."));
    let permissions = Arc::new(Permissions::default());
    let (session, _, tools) = session_with(turns, permissions.clone());
    let mut sub = session.subscribe(0);
    let handle = session.send("delete notes 1 and 2").unwrap();
    let call_id = next_approval(&mut sub).await;
    assert_eq!(call_id, "call_1_1");
    assert_eq!(session.pending_approvals(), vec![call_id.clone()]);
    session.answer_approval(&call_id, answer).unwrap();
    finish(handle).await;
    assert_pairing(&session);
    (session, tools, permissions)
}

#[tokio::test]
async fn destructive_call_allowed_once() {
    let (session, tools, permissions) = destructive_answered(Answer::Once, false).await;
    assert_eq!(tools.calls().len(), 1);
    assert!(permissions.settings().rules.is_empty());
    snapshot!(log(&session));
    // Once means once: the next message asks again.
    assert_eq!(
        session.answer_approval("call_1_1", Answer::Once),
        Err(SessionError::NoSuchApproval("call_1_1".into()))
    );
}

#[tokio::test]
async fn destructive_call_allowed_for_this_chat() {
    let (session, tools, permissions) = destructive_answered(Answer::ThisChat, true).await;
    assert_eq!(tools.calls().len(), 2, "the second call ran without asking");
    assert!(permissions.settings().rules.is_empty(), "no rule written");
    let log = log(&session);
    assert_eq!(
        log.iter()
            .filter(|e| e["type"] == "approval_needed")
            .count(),
        1
    );
    snapshot!(log);
}

#[tokio::test]
async fn clear_forgets_this_chat_grants() {
    let (session, _, tools) = session_with(
        vec![
            calls(&[("delete_notes", json!({"ids": [1]}))]),
            reply("Done."),
            calls(&[("delete_notes", json!({"ids": [2]}))]),
            reply("Done again."),
        ],
        Arc::new(Permissions::default()),
    );
    let mut sub = session.subscribe(0);
    let handle = session.send("delete note 1").unwrap();
    let id = next_approval(&mut sub).await;
    session.answer_approval(&id, Answer::ThisChat).unwrap();
    finish(handle).await;
    session.clear().unwrap();
    // A cleared chat is a new chat: the same tool asks again.
    let handle = session.send("delete note 2").unwrap();
    let id = next_approval(&mut sub).await;
    session.answer_approval(&id, Answer::Once).unwrap();
    finish(handle).await;
    assert_eq!(tools.calls().len(), 2);
    let asked = log(&session)
        .iter()
        .filter(|e| e["type"] == "approval_needed")
        .count();
    assert_eq!(asked, 2, "the grant did not outlive clear()");
}

#[tokio::test]
async fn destructive_call_allowed_always() {
    let (session, tools, permissions) = destructive_answered(Answer::Always, true).await;
    assert_eq!(tools.calls().len(), 2);
    assert_eq!(permissions.settings().rules["delete_notes"], Rule::Allow);
    snapshot!(log(&session));
}

#[tokio::test]
async fn always_writes_the_rule_to_a_bound_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("permissions.json");
    let permissions = Arc::new(Permissions::open(&path).unwrap());
    let (session, _, _) = session_with(
        vec![
            calls(&[("delete_notes", json!({"ids": [1]}))]),
            reply("Done."),
        ],
        permissions,
    );
    let mut sub = session.subscribe(0);
    let handle = session.send("delete note 1").unwrap();
    let id = next_approval(&mut sub).await;
    session.answer_approval(&id, Answer::Always).unwrap();
    finish(handle).await;
    let saved = wait_for(&mut sub, |e| matches!(e, Event::Permissions { .. })).await;
    assert!(
        matches!(saved.event, Event::Permissions { saved: true, .. }),
        "{saved:?}"
    );
    let on_disk: PermissionSettings =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(on_disk.rules["delete_notes"], Rule::Allow);
    assert_pairing(&session);
}

#[tokio::test]
async fn destructive_call_denied_with_a_note() {
    let (session, tools, _) =
        destructive_answered(Answer::deny_with("  only note 1, keep 2  "), false).await;
    assert!(tools.calls().is_empty(), "the denied call never ran");
    let history = session.history();
    let Part::ToolResult(result) = &history[2].parts[0] else {
        panic!("{history:?}")
    };
    assert!(result.is_error);
    assert_eq!(
        result.text_content(),
        "Not run: the user did not allow this call. The user's note: only note 1, keep 2"
    );
    snapshot!(log(&session));
}

#[tokio::test]
async fn bulk_limit_asks_even_when_allowed() {
    let permissions = Arc::new(Permissions::new(PermissionSettings {
        mode: Mode::AutoAll,
        bulk_limit: 3,
        ..Default::default()
    }));
    let (session, _, tools) = session_with(
        vec![
            calls(&[
                ("delete_notes", json!({"ids": [1, 2, 3]})),
                ("delete_notes", json!({"ids": [4, 5, 6, 7]})),
            ]),
            reply("Deleted three."),
        ],
        permissions,
    );
    let mut sub = session.subscribe(0);
    let handle = session.send("delete everything").unwrap();
    let id = next_approval(&mut sub).await;
    assert_eq!(
        id, "call_1_2",
        "three targets are within the limit, four are not"
    );
    session.answer_approval(&id, Answer::deny()).unwrap();
    finish(handle).await;
    assert_eq!(
        tools.calls(),
        vec![("delete_notes".to_string(), json!({"ids": [1, 2, 3]}))]
    );
    assert_pairing(&session);
    snapshot!(log(&session));
}

#[tokio::test]
async fn block_rule_hides_the_tool() {
    let permissions = Arc::new(Permissions::default());
    permissions.set_rule("delete_notes", Some(Rule::Block));
    let (session, model, tools) = session_with(
        // The model calls it anyway (a confused or injected model).
        vec![
            calls(&[("delete_notes", json!({"ids": [1]}))]),
            reply("I cannot delete notes."),
        ],
        permissions,
    );
    finish(session.send("delete note 1").unwrap()).await;
    let offered: Vec<String> = model.requests()[0]
        .tools
        .iter()
        .map(|t| t.name.clone())
        .collect();
    assert_eq!(
        offered,
        ["read_note", "rename_note", "slow_search", "snapshot"]
    );
    assert!(tools.calls().is_empty());
    assert_pairing(&session);
    snapshot!(log(&session));
}

#[tokio::test]
async fn repeated_identical_call_is_refused() {
    let (session, model, tools) = new_session(vec![
        calls(&[("read_note", json!({"name": "todo"}))]),
        // Same arguments (keys in another order would compare equal too).
        calls(&[
            ("read_note", json!({"name": "todo"})),
            ("read_note", json!({"name": "shopping"})),
        ]),
        reply("Done."),
    ]);
    finish(session.send("read my notes").unwrap()).await;
    assert_eq!(tools.calls().len(), 2);
    let Part::ToolResult(refused) = &model.requests()[2].messages[4].parts[0] else {
        panic!()
    };
    assert!(
        refused.is_error && refused.text_content().contains("Do not repeat it"),
        "{refused:?}"
    );
    assert_pairing(&session);
    snapshot!(log(&session));
    // The check is per message: the next message may make the call again.
    let (session, _, tools) = new_session(vec![
        calls(&[("read_note", json!({"name": "todo"}))]),
        reply("a"),
        calls(&[("read_note", json!({"name": "todo"}))]),
        reply("b"),
    ]);
    finish(session.send("one").unwrap()).await;
    finish(session.send("two").unwrap()).await;
    assert_eq!(tools.calls().len(), 2);
    assert_pairing(&session);
}

#[tokio::test]
async fn stop_mid_stream() {
    let (session, _, _) = new_session(vec![ScriptedTurn {
        reasoning: Some("let me think about this".into()),
        text: Some("a long answer that will be cut off".into()),
        delay_ms: Some(20),
        ..Default::default()
    }]);
    let mut sub = session.subscribe(0);
    let handle = session.send("tell me a story").unwrap();
    let delta = wait_for(&mut sub, |e| {
        matches!(
            e,
            Event::Delta {
                kind: DeltaKind::Text,
                ..
            }
        )
    })
    .await;
    assert_eq!(delta.seq, None, "deltas are unnumbered");
    assert!(session.stop());
    assert_eq!(finish(handle).await, TurnOutcome::Stopped);
    let history = session.history();
    assert_eq!(history.len(), 2, "{history:?}");
    assert_eq!(history[1].role, Role::Assistant);
    let kept = history[1].text();
    assert!(
        kept.starts_with("a") && kept.ends_with(STOPPED_NOTE) && kept.len() > STOPPED_NOTE.len(),
        "what was shown is kept, then the note: {kept:?}"
    );
    assert!(
        !kept.contains("cut off"),
        "nothing streamed after the stop is kept: {kept:?}"
    );
    assert!(!session.is_busy());
    assert!(!session.stop(), "nothing left to stop");
    assert_pairing(&session);
    snapshot!(log(&session));
}

#[tokio::test]
async fn stop_while_an_approval_waits() {
    let (session, _, tools) = new_session(vec![
        calls(&[
            ("delete_notes", json!({"ids": [1]})),
            ("read_note", json!({"name": "x"})),
        ]),
        reply("never"),
    ]);
    let mut sub = session.subscribe(0);
    let handle = session.send("delete note 1").unwrap();
    let id = next_approval(&mut sub).await;
    session.stop();
    assert_eq!(finish(handle).await, TurnOutcome::Stopped);
    assert!(
        tools.calls().is_empty(),
        "the waiting call is denied and nothing new starts"
    );
    assert!(session.pending_approvals().is_empty());
    assert_eq!(
        session.answer_approval(&id, Answer::Once),
        Err(SessionError::NoSuchApproval(id))
    );
    assert_pairing(&session);
    snapshot!(log(&session));
}

#[tokio::test]
async fn stop_while_a_tool_runs() {
    let (session, model, tools) = new_session(vec![
        calls(&[
            ("slow_search", json!({})),
            ("read_note", json!({"name": "x"})),
        ]),
        reply("never"),
    ]);
    let mut sub = session.subscribe(0);
    let handle = session.send("search slowly").unwrap();
    wait_for(&mut sub, |e| matches!(e, Event::ToolRunning { .. })).await;
    session.stop();
    // The tool is not interrupted: it finishes, and its result is recorded.
    tools.gate.add_permits(1);
    assert_eq!(finish(handle).await, TurnOutcome::Stopped);
    assert_eq!(tools.calls().len(), 1, "the second call never started");
    assert_eq!(model.turns_played(), 1, "no model turn after the stop");
    let history = session.history();
    let Part::ToolResult(written) = &history[2].parts[0] else {
        panic!("{history:?}")
    };
    assert_eq!(written.text_content(), "found it");
    assert_eq!(history.last().unwrap().text(), STOPPED_NOTE);
    assert_pairing(&session);
    snapshot!(log(&session));
}

fn failing(transient: bool, message: &str) -> ScriptedTurn {
    ScriptedTurn {
        error: Some(ScriptedError {
            transient,
            message: message.into(),
        }),
        ..Default::default()
    }
}

#[tokio::test]
async fn transient_error_is_retried() {
    let (session, model, _) =
        new_session(vec![failing(true, "server overloaded"), reply("Hello.")]);
    let outcome = finish(session.send("hi").unwrap()).await;
    assert_eq!(
        outcome,
        TurnOutcome::Completed {
            text: "Hello.".into(),
            json: None,
        }
    );
    assert_eq!(model.turns_played(), 2);
    assert_pairing(&session);
    snapshot!(log(&session));
}

#[tokio::test]
async fn transient_errors_past_the_retries_and_fatal_errors_end_the_turn() {
    let (session, _, _) = new_session(vec![failing(false, "the model refused")]);
    let outcome = finish(session.send("hi").unwrap()).await;
    assert_eq!(
        outcome,
        TurnOutcome::Failed {
            error: ProviderError::Other {
                message: "the model refused".into()
            }
        }
    );
    assert_pairing(&session);
    snapshot!("fatal_error", log(&session));

    let (session, model, _) = new_session(vec![
        failing(true, "busy"),
        failing(true, "busy"),
        failing(true, "busy"),
    ]);
    assert!(matches!(
        finish(session.send("hi").unwrap()).await,
        TurnOutcome::Failed { .. }
    ));
    assert_eq!(model.turns_played(), 3, "two retries");
    snapshot!("retries_exhausted", log(&session));
}

#[tokio::test]
async fn max_steps_exhausted() {
    let turns = (0..5)
        .map(|i| calls(&[("read_note", json!({"name": format!("n{i}")}))]))
        .collect();
    let model = ScriptedModel::new(turns);
    let tools = TestTools::new();
    let session = ChatSession::builder(Arc::new(FixedModel::new(model.clone())))
        .tools(tools.host.clone())
        .max_steps(3)
        .build();
    assert_eq!(
        finish(session.send("loop").unwrap()).await,
        TurnOutcome::StepsExhausted
    );
    assert_eq!(model.turns_played(), 3);
    assert_pairing(&session);
    snapshot!(log(&session));
}

#[tokio::test]
async fn invalid_arguments_go_back_to_the_model() {
    let (session, model, tools) = new_session(vec![
        calls(&[("read_note", json!({"title": "todo"}))]),
        calls(&[("read_note", json!({"name": "todo"}))]),
        reply("Milk."),
    ]);
    assert_eq!(
        finish(session.send("todo?").unwrap()).await,
        TurnOutcome::Completed {
            text: "Milk.".into(),
            json: None,
        }
    );
    let Part::ToolResult(error) = &model.requests()[1].messages[2].parts[0] else {
        panic!()
    };
    assert!(error.is_error, "{error:?}");
    assert!(
        error
            .text_content()
            .contains("Expected arguments: name (required): string"),
        "the host repeats what the schema expects: {error:?}"
    );
    assert_eq!(
        tools.calls().len(),
        1,
        "the invalid call never reached the function"
    );
    assert_pairing(&session);
    snapshot!(log(&session));
}

#[tokio::test]
async fn unknown_tool_gets_a_result_listing_the_tools() {
    let (session, _, tools) = new_session(vec![
        calls(&[("launch_rockets", json!({}))]),
        reply("Sorry."),
    ]);
    finish(session.send("launch").unwrap()).await;
    assert!(tools.calls().is_empty());
    let Part::ToolResult(r) = &session.history()[2].parts[0] else {
        panic!()
    };
    assert!(r.text_content().contains("read_note, rename_note"), "{r:?}");
    assert_pairing(&session);
}

#[tokio::test]
async fn images_from_tools_are_kept_in_the_history() {
    let (session, _, _) = new_session(vec![calls(&[("snapshot", json!({}))]), reply("A picture.")]);
    finish(session.send("take a picture").unwrap()).await;
    let Part::ToolResult(r) = &session.history()[2].parts[0] else {
        panic!()
    };
    let Part::Image(image) = &r.parts[1] else {
        panic!("{r:?}")
    };
    let descriptor = json!([{"index": 0, "mime": image.mime, "bytes": image.data.len()}]);
    let log = log(&session);
    assert!(
        log.iter()
            .any(|e| e["type"] == "tool_done" && e["images"] == descriptor),
        "{log:?}"
    );
    assert_pairing(&session);
}

#[tokio::test]
async fn busy_session_refuses_a_second_message() {
    let (session, _, tools) = new_session(vec![calls(&[("slow_search", json!({}))]), reply("ok")]);
    let handle = session.send("one").unwrap();
    assert_eq!(session.send("two").err(), Some(SessionError::Busy));
    assert_eq!(session.clear(), Err(SessionError::Busy));
    assert_eq!(session.retry_last().err(), Some(SessionError::Busy));
    tools.gate.add_permits(1);
    finish(handle).await;
    assert!(!session.is_busy());
    assert_pairing(&session);
}

#[tokio::test]
async fn system_prompt_is_built_every_turn() {
    let model = ScriptedModel::new(vec![
        calls(&[("read_note", json!({"name": "a"}))]),
        reply("x"),
        reply("y"),
    ]);
    let counter = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let c = counter.clone();
    let session = ChatSession::builder(Arc::new(FixedModel::new(model.clone())))
        .tools(TestTools::new().host.clone())
        .system_prompt_fn(move |info, tools| {
            let n = c.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Some(format!(
                "prompt {n} for {} with {} tools",
                info.model,
                tools.len()
            ))
        })
        .build();
    finish(session.send("a").unwrap()).await;
    finish(session.send("b").unwrap()).await;
    let systems: Vec<_> = model
        .requests()
        .into_iter()
        .map(|r| r.system.unwrap())
        .collect();
    assert_eq!(
        systems,
        [
            "prompt 0 for scripted with 5 tools",
            "prompt 1 for scripted with 5 tools",
            "prompt 2 for scripted with 5 tools"
        ]
    );
}

#[tokio::test]
async fn retry_last_regenerates_the_answer() {
    let (session, model, _) = new_session(vec![
        reply("first"),
        calls(&[("read_note", json!({"name": "a"}))]),
        reply("second"),
        reply("third"),
    ]);
    finish(session.send("q1").unwrap()).await;
    finish(session.send("q2").unwrap()).await;
    let outcome = finish(session.retry_last().unwrap()).await;
    assert_eq!(
        outcome,
        TurnOutcome::Completed {
            text: "third".into(),
            json: None,
        }
    );
    let texts: Vec<_> = session.history().iter().map(|m| m.text()).collect();
    assert_eq!(texts, ["q1", "first", "q2", "third"]);
    assert_eq!(model.requests()[3].messages.len(), 3, "sent q1, first, q2");
    assert_pairing(&session);
    snapshot!(log(&session));
}

#[tokio::test]
async fn clear_and_compact() {
    let (session, model, _) = new_session(vec![
        calls(&[("read_note", json!({"name": "todo"}))]),
        reply("You need milk."),
        ScriptedTurn {
            text: Some("The user asked about the todo note; it says buy milk.".into()),
            ..Default::default()
        },
        reply("Yes, milk."),
    ]);
    assert_eq!(
        session.compact().err(),
        Some(SessionError::NothingToCompact)
    );
    assert_eq!(
        session.retry_last().err(),
        Some(SessionError::NothingToRetry)
    );
    finish(session.send("todo?").unwrap()).await;
    let outcome = finish(session.compact().unwrap()).await;
    assert!(
        matches!(outcome, TurnOutcome::Completed { .. }),
        "{outcome:?}"
    );
    let compact_request = &model.requests()[2];
    assert!(compact_request.tools.is_empty(), "compaction is tool-free");
    assert!(
        compact_request
            .messages
            .last()
            .unwrap()
            .text()
            .starts_with("Summarize our conversation")
    );
    let history = session.history();
    assert_eq!(history.len(), 1);
    assert_eq!(history[0].role, Role::User);
    assert!(history[0].text().ends_with("it says buy milk."));
    finish(session.send("milk?").unwrap()).await;
    assert_eq!(
        model.requests()[3].messages.len(),
        2,
        "summary seed + the new message"
    );
    session.clear().unwrap();
    assert!(session.history().is_empty());
    assert_pairing(&session);
    snapshot!(log(&session));
}

#[tokio::test]
async fn usage_teaches_the_overhead() {
    let (session, _, _) = new_session(vec![ScriptedTurn {
        text: Some("ok".into()),
        usage: Some(Usage::new(1_234, 2)),
        ..Default::default()
    }]);
    finish(session.send("hi").unwrap()).await;
    let log = log(&session);
    let usage = log.iter().find(|e| e["type"] == "usage").unwrap();
    assert_eq!(
        usage,
        &json!({
            "seq": 3, "type": "usage", "prompt_tokens": 1234, "completion_tokens": 2,
            "context_window": 8192,
            // A local model: free, and so are the totals.
            "cost": {"usd": 0.0, "priced": true},
            "message_total": {
                "prompt_tokens": 1234, "completion_tokens": 2,
                "cost": {"usd": 0.0, "priced": true}, "turns": 1
            },
            "chat_total": {
                "prompt_tokens": 1234, "completion_tokens": 2,
                "cost": {"usd": 0.0, "priced": true}, "turns": 1
            }
        })
    );
}

/// Cached and reasoning counts reach the `usage` event and add up in the
/// session's totals; a turn that did not report them adds nothing to them.
#[tokio::test]
async fn usage_breakdown_reaches_events_and_totals() {
    let (session, _, _) = new_session(vec![
        ScriptedTurn {
            text: Some("one".into()),
            usage: Some(
                Usage::new(1_000, 40)
                    .with_cached_prompt_tokens(800)
                    .with_reasoning_tokens(30),
            ),
            ..Default::default()
        },
        ScriptedTurn {
            text: Some("two".into()),
            usage: Some(Usage::new(1_100, 10)),
            ..Default::default()
        },
    ]);
    finish(session.send("hi").unwrap()).await;
    finish(session.send("again").unwrap()).await;
    let log = log(&session);
    let usages: Vec<_> = log.iter().filter(|e| e["type"] == "usage").collect();
    assert_eq!(
        usages[0]["cached_prompt_tokens"], 800,
        "the breakdown is on the event"
    );
    assert_eq!(usages[0]["reasoning_tokens"], 30);
    assert!(
        usages[1].get("cached_prompt_tokens").is_none(),
        "unreported stays out: {}",
        usages[1]
    );
    assert_eq!(
        session.usage(),
        Usage::new(2_100, 50)
            .with_cached_prompt_tokens(800)
            .with_reasoning_tokens(30)
    );
}

struct PanickingTools;

impl lrg_chat::tools::Tools for PanickingTools {
    fn list(
        &self,
    ) -> futures::future::BoxFuture<
        '_,
        Result<Vec<lrg_providers::ToolSpec>, lrg_chat::tools::ToolsError>,
    > {
        Box::pin(async { Ok(session_support::test_specs()) })
    }

    fn call<'a>(
        &'a self,
        _name: &'a str,
        _arguments: serde_json::Value,
        _cancel: tokio_util::sync::CancellationToken,
    ) -> futures::future::BoxFuture<'a, lrg_chat::tools::ToolOutput> {
        Box::pin(async { panic!("tool bug") })
    }
}

#[tokio::test]
async fn a_panicking_tool_fails_the_turn_but_not_the_session() {
    let model = ScriptedModel::new(vec![
        calls(&[
            ("read_note", json!({"name": "a"})),
            ("read_note", json!({"name": "b"})),
        ]),
        reply("recovered"),
    ]);
    let session = ChatSession::builder(Arc::new(FixedModel::new(model)))
        .tools(Arc::new(PanickingTools))
        .build();
    let outcome = finish(session.send("go").unwrap()).await;
    assert_eq!(
        outcome,
        TurnOutcome::Failed {
            error: ProviderError::Other {
                message: "internal error while working on the message: tool bug".into()
            }
        }
    );
    assert!(!session.is_busy());
    assert_pairing(&session);
    assert_eq!(
        session.history().len(),
        3,
        "user, calls, error results for both"
    );
    // The session goes on.
    assert_eq!(
        finish(session.send("again").unwrap()).await,
        TurnOutcome::Completed {
            text: "recovered".into(),
            json: None,
        }
    );
    assert_pairing(&session);
}
