//! Hooks (`lrg_chat::hooks`) with real scripts: a `pre_tool_use` that
//! denies (also under `auto_all`), rewrites, asks; a `user_prompt_submit`
//! that blocks or adds context; a `post_tool_use` note; a `stop` that asks
//! for another turn (at most three times); and hooks that time out, print
//! garbage or crash, which decide nothing. Also a hook written in Rust.
#![cfg(unix)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::session_support;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use lrg_chat::events::Event;
use lrg_chat::hooks::{
    CommandHook, HookDecisionKind, HookError, HookEvent, HooksConfig, PreToolUse, SessionHooks,
    ToolVerdict,
};
use lrg_chat::permissions::{Mode, PermissionSettings};
use lrg_chat::{ChatSession, FixedModel, Permissions, SkipReason, TurnOutcome};
use lrg_providers::{Role, ScriptedModel, ScriptedTurn};
use serde_json::{Value, json};
use session_support::*;

/// A script in `dir`, made executable; its path.
fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt as _;
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// A session on `turns` with the test tools, `mode`, and these hooks.
fn hooked(
    turns: Vec<ScriptedTurn>,
    mode: Mode,
    hooks: Vec<Arc<dyn SessionHooks>>,
) -> (ChatSession, ScriptedModel, Arc<TestTools>) {
    let model = ScriptedModel::new(turns);
    let tools = TestTools::new();
    let permissions = Permissions::new(PermissionSettings {
        mode,
        ..Default::default()
    });
    let session = ChatSession::builder(Arc::new(FixedModel::new(model.clone())))
        .tools(tools.host.clone())
        .permissions(Arc::new(permissions))
        .hooks(hooks)
        .build();
    (session, model, tools)
}

fn command(event: HookEvent, path: &Path) -> Arc<dyn SessionHooks> {
    Arc::new(CommandHook::new(event, path.display().to_string()).named("guard"))
}

fn decisions(session: &ChatSession) -> Vec<(HookEvent, HookDecisionKind, Option<String>)> {
    session
        .events()
        .entries()
        .iter()
        .filter_map(|e| match &e.event {
            Event::HookDecision {
                event,
                decision,
                reason,
                ..
            } => Some((*event, *decision, reason.clone())),
            _ => None,
        })
        .collect()
}

fn warnings(session: &ChatSession) -> Vec<String> {
    session
        .events()
        .entries()
        .iter()
        .filter_map(|e| match &e.event {
            Event::Warning { message, .. } => Some(message.clone()),
            _ => None,
        })
        .collect()
}

fn skipped(session: &ChatSession) -> Vec<SkipReason> {
    session
        .events()
        .entries()
        .iter()
        .filter_map(|e| match &e.event {
            Event::ToolSkipped { reason, .. } => Some(*reason),
            _ => None,
        })
        .collect()
}

/// The text of the result the model got for its first call.
fn first_result(model: &ScriptedModel) -> String {
    let requests = model.requests();
    let second = &requests[1];
    second
        .messages
        .iter()
        .find(|m| m.role == Role::Tool)
        .map(|m| format!("{:?}", m.parts))
        .unwrap_or_default()
}

const DENY_DELETES: &str = r#"input=$(cat)
case "$input" in
  *'"tool":"delete_'*) echo '{"decision":"deny","reason":"deleting is not allowed here"}' ;;
  *) echo '{}' ;;
esac"#;

#[tokio::test]
async fn a_pre_tool_use_deny_blocks_even_under_auto_all() {
    let dir = tempfile::tempdir().unwrap();
    let guard = script(dir.path(), "guard.sh", DENY_DELETES);
    let (session, model, tools) = hooked(
        vec![
            calls(&[("delete_notes", json!({"ids": [1, 2]}))]),
            reply("I could not delete them."),
        ],
        Mode::AutoAll,
        vec![command(HookEvent::PreToolUse, &guard)],
    );
    let outcome = finish(session.send("delete notes 1 and 2").unwrap()).await;
    assert!(
        matches!(outcome, TurnOutcome::Completed { .. }),
        "{outcome:?}"
    );
    assert!(tools.calls().is_empty(), "the denied call never ran");
    assert_eq!(skipped(&session), vec![SkipReason::HookDenied]);
    assert_eq!(
        decisions(&session),
        vec![(
            HookEvent::PreToolUse,
            HookDecisionKind::Deny,
            Some("deleting is not allowed here".into())
        )]
    );
    let told = first_result(&model);
    assert!(told.contains("deleting is not allowed here"), "{told}");
    assert_pairing(&session);
}

#[tokio::test]
async fn exit_code_2_denies_with_stderr_and_other_tools_pass() {
    let dir = tempfile::tempdir().unwrap();
    let guard = script(
        dir.path(),
        "guard.sh",
        r#"grep -q '"tool":"rename_note"' && { echo "renames need a ticket" >&2; exit 2; }; exit 0"#,
    );
    let (session, _model, tools) = hooked(
        vec![
            calls(&[
                ("rename_note", json!({"from": "a", "to": "b"})),
                ("read_note", json!({"name": "a"})),
            ]),
            reply("done"),
        ],
        Mode::AutoAll,
        vec![command(HookEvent::PreToolUse, &guard)],
    );
    finish(session.send("rename a, then read it").unwrap()).await;
    assert_eq!(
        tools.calls(),
        vec![("read_note".into(), json!({"name": "a"}))]
    );
    let decided = decisions(&session);
    assert_eq!(decided.len(), 1, "{decided:?}");
    assert_eq!(decided[0].2.as_deref(), Some("renames need a ticket"));
}

#[tokio::test]
async fn a_matcher_limits_a_hook_to_its_tools() {
    let dir = tempfile::tempdir().unwrap();
    let deny_all = script(
        dir.path(),
        "deny.sh",
        r#"cat >/dev/null; echo '{"decision":"deny","reason":"no"}'"#,
    );
    let config: HooksConfig = toml::from_str(&format!(
        "[[pre_tool_use]]\nmatcher = \"delete_*\"\ncommand = \"{}\"\ntimeout_s = 5\n",
        deny_all.display()
    ))
    .unwrap();
    let (session, _model, tools) = hooked(
        vec![
            calls(&[
                ("read_note", json!({"name": "x"})),
                ("delete_notes", json!({"ids": [1]})),
            ]),
            reply("ok"),
        ],
        Mode::AutoAll,
        config.into_hooks(None).unwrap(),
    );
    finish(session.send("read x, delete 1").unwrap()).await;
    assert_eq!(
        tools.calls(),
        vec![("read_note".into(), json!({"name": "x"}))]
    );
    assert_eq!(skipped(&session), vec![SkipReason::HookDenied]);
}

#[tokio::test]
async fn a_rewrite_is_validated_then_used() {
    let dir = tempfile::tempdir().unwrap();
    let rewrite = script(
        dir.path(),
        "rewrite.sh",
        r#"cat >/dev/null; echo '{"arguments":{"name":"safe"}}'"#,
    );
    let (session, _model, tools) = hooked(
        vec![
            calls(&[("read_note", json!({"name": "secret"}))]),
            reply("ok"),
        ],
        Mode::AutoRead,
        vec![command(HookEvent::PreToolUse, &rewrite)],
    );
    finish(session.send("read secret").unwrap()).await;
    assert_eq!(
        tools.calls(),
        vec![("read_note".into(), json!({"name": "safe"}))]
    );
    assert_eq!(decisions(&session)[0].1, HookDecisionKind::Rewrite);

    // A rewrite the schema rejects is the hook's failure: the model's
    // arguments run.
    let bad = script(
        dir.path(),
        "bad.sh",
        r#"cat >/dev/null; echo '{"arguments":{"title":7}}'"#,
    );
    let (session, _model, tools) = hooked(
        vec![calls(&[("read_note", json!({"name": "x"}))]), reply("ok")],
        Mode::AutoRead,
        vec![command(HookEvent::PreToolUse, &bad)],
    );
    finish(session.send("read x").unwrap()).await;
    assert_eq!(
        tools.calls(),
        vec![("read_note".into(), json!({"name": "x"}))]
    );
    let warned = warnings(&session);
    assert!(
        warned.iter().any(|w| w.contains("schema rejects")),
        "{warned:?}"
    );
    assert!(decisions(&session).is_empty());
}

#[tokio::test]
async fn ask_from_a_hook_asks_even_for_an_allowed_tool() {
    let dir = tempfile::tempdir().unwrap();
    let ask = script(
        dir.path(),
        "ask.sh",
        r#"cat >/dev/null; echo '{"decision":"ask","reason":"check this one"}'"#,
    );
    let (session, _model, tools) = hooked(
        vec![calls(&[("read_note", json!({"name": "x"}))]), reply("ok")],
        Mode::AutoAll,
        vec![command(HookEvent::PreToolUse, &ask)],
    );
    let mut sub = session.subscribe(0);
    let handle = session.send("read x").unwrap();
    let entry = wait_for(&mut sub, |e| matches!(e, Event::ApprovalNeeded { .. })).await;
    let Event::ApprovalNeeded {
        call_id, reason, ..
    } = &entry.event
    else {
        unreachable!()
    };
    assert_eq!(
        serde_json::to_value(reason).unwrap(),
        json!({"kind": "hook", "reason": "check this one"})
    );
    session
        .answer_approval(call_id, lrg_chat::Answer::Once)
        .unwrap();
    finish(handle).await;
    assert_eq!(tools.calls().len(), 1);
}

#[tokio::test]
async fn failing_hooks_decide_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let slow = script(dir.path(), "slow.sh", "sleep 30");
    let garbage = script(
        dir.path(),
        "garbage.sh",
        "cat >/dev/null; echo 'yes please'",
    );
    let crash = script(dir.path(), "crash.sh", "echo boom >&2; exit 3");
    let hooks: Vec<Arc<dyn SessionHooks>> = vec![
        Arc::new(
            CommandHook::new(HookEvent::PreToolUse, slow.display().to_string())
                .named("slow")
                .timeout(Duration::from_millis(300)),
        ),
        Arc::new(
            CommandHook::new(HookEvent::PreToolUse, garbage.display().to_string()).named("garbage"),
        ),
        Arc::new(
            CommandHook::new(HookEvent::PreToolUse, crash.display().to_string()).named("crash"),
        ),
    ];
    // Under ask_all a failed hook leaves the call to the rules: it asks.
    let (session, _model, tools) = hooked(
        vec![calls(&[("read_note", json!({"name": "x"}))]), reply("ok")],
        Mode::AskAll,
        hooks,
    );
    let mut sub = session.subscribe(0);
    let handle = session.send("read x").unwrap();
    let id = next_approval(&mut sub).await;
    session
        .answer_approval(&id, lrg_chat::Answer::Once)
        .unwrap();
    finish(handle).await;
    assert_eq!(tools.calls().len(), 1);
    assert!(decisions(&session).is_empty());
    let warned = warnings(&session).join("\n");
    assert!(
        warned.contains("hook `slow` (pre_tool_use) failed") && warned.contains("timed out"),
        "{warned}"
    );
    assert!(
        warned.contains("hook `garbage`") && warned.contains("not its JSON answer"),
        "{warned}"
    );
    assert!(
        warned.contains("hook `crash`") && warned.contains("status 3") && warned.contains("boom"),
        "{warned}"
    );
}

#[tokio::test]
async fn a_prompt_hook_blocks_or_adds_context() {
    let dir = tempfile::tempdir().unwrap();
    let gate = script(
        dir.path(),
        "gate.sh",
        r#"input=$(cat)
case "$input" in
  *password*) echo '{"decision":"block","reason":"never paste passwords"}' ;;
  *) echo '{"context":"The user is on the night shift."}' ;;
esac"#,
    );
    let (session, model, _tools) = hooked(
        vec![reply("hello night owl")],
        Mode::AutoRead,
        vec![command(HookEvent::UserPromptSubmit, &gate)],
    );
    let outcome = finish(session.send("my password is hunter2").unwrap()).await;
    assert_eq!(
        outcome,
        TurnOutcome::Blocked {
            reason: "never paste passwords".into()
        }
    );
    assert!(model.requests().is_empty(), "the model never saw it");
    let history = session.history();
    assert_eq!(history.len(), 2, "kept, with the note: {history:?}");
    assert!(history[1].text().contains("never paste passwords"));

    finish(session.send("hi").unwrap()).await;
    let request = &model.requests()[0];
    let last = request.messages.last().unwrap();
    assert_eq!(last.role, Role::User);
    assert!(
        last.text().contains("night shift"),
        "{:?}",
        request.messages
    );
    let kinds: Vec<HookDecisionKind> = decisions(&session).into_iter().map(|d| d.1).collect();
    assert_eq!(
        kinds,
        vec![HookDecisionKind::Block, HookDecisionKind::Context]
    );
}

#[tokio::test]
async fn a_post_tool_use_note_reaches_the_model() {
    let dir = tempfile::tempdir().unwrap();
    let note = script(
        dir.path(),
        "note.sh",
        r#"cat >/dev/null; echo '{"note":"this note is stale"}'"#,
    );
    let (session, model, _tools) = hooked(
        vec![calls(&[("read_note", json!({"name": "x"}))]), reply("ok")],
        Mode::AutoRead,
        vec![command(HookEvent::PostToolUse, &note)],
    );
    finish(session.send("read x").unwrap()).await;
    let told = first_result(&model);
    assert!(
        told.contains("buy milk") && told.contains("this note is stale"),
        "{told}"
    );
}

#[tokio::test]
async fn a_stop_hook_sends_the_model_back_at_most_three_times() {
    let dir = tempfile::tempdir().unwrap();
    let again = script(
        dir.path(),
        "again.sh",
        r#"cat >/dev/null; echo '{"decision":"continue","reason":"run the tests first"}'"#,
    );
    let (session, model, _tools) = hooked(
        vec![
            reply("one"),
            reply("two"),
            reply("three"),
            reply("four"),
            reply("five"),
        ],
        Mode::AutoRead,
        vec![command(HookEvent::Stop, &again)],
    );
    let outcome = finish(session.send("fix it").unwrap()).await;
    assert_eq!(
        outcome,
        TurnOutcome::Completed {
            text: "four".into(),
            json: None
        }
    );
    assert_eq!(model.turns_played(), 4, "the first answer and three more");
    let second = &model.requests()[1];
    assert!(
        second
            .messages
            .last()
            .unwrap()
            .text()
            .contains("run the tests first")
    );
    assert_eq!(decisions(&session).len(), 3);
}

/// A hook written in Rust: denies by name, no process.
struct NoDeletes;

impl SessionHooks for NoDeletes {
    fn name(&self) -> &str {
        "no-deletes"
    }

    fn pre_tool_use<'a>(
        &'a self,
        call: &'a PreToolUse,
    ) -> BoxFuture<'a, Result<ToolVerdict, HookError>> {
        Box::pin(async move {
            Ok(if call.tool.starts_with("delete_") {
                ToolVerdict::deny("not in Rust either")
            } else {
                ToolVerdict::default()
            })
        })
    }
}

#[tokio::test]
async fn a_rust_hook_denies_and_sub_events_are_json() {
    let (session, _model, tools) = hooked(
        vec![calls(&[("delete_notes", json!({"ids": [3]}))]), reply("no")],
        Mode::AutoAll,
        vec![Arc::new(NoDeletes)],
    );
    finish(session.send("delete 3").unwrap()).await;
    assert!(tools.calls().is_empty());
    let line: Value = session
        .events()
        .entries()
        .iter()
        .find(|e| matches!(e.event, Event::HookDecision { .. }))
        .map(|e| serde_json::to_value(e.as_ref()).unwrap())
        .unwrap();
    assert_eq!(line["type"], "hook_decision");
    assert_eq!(line["hook"], "no-deletes");
    assert_eq!(line["event"], "pre_tool_use");
    assert_eq!(line["decision"], "deny");
    assert_eq!(line["reason"], "not in Rust either");
    assert!(line["call_id"].is_string());
}
