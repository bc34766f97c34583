//! The page's approval card, in a real browser, drawn from what the
//! `approval_needed` event carries: a question whose call has no card yet
//! (a sub-agent's: its `tool_call` is in its own stream) gets one from the
//! question itself; warnings are shown; only the answers allowed get a
//! button; an event from before `answers` existed falls back on
//! `offer_always`. The events are applied as the stream delivers them (the
//! server side is tested in `approver.rs` and `session.rs`).
//!
//! Needs `chromium` and `chromedriver`; skips loudly without them, and
//! fails under `CI`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::browser_support;
use crate::http_support;

use std::sync::Arc;

use browser_support::*;
use http_support::*;
use lrg_chat::http::MenuEntry;
use lrg_providers::{ChatModel, ModelLocation, ScriptedModel};
use serde_json::json;

#[tokio::test]
async fn the_approval_card_shows_what_the_question_carries() {
    let Some((chromium, driver)) = browser() else {
        return;
    };
    let model: Arc<dyn ChatModel> = Arc::new(ScriptedModel::named("first", vec![text("hi")]));
    let menu = vec![MenuEntry::available(
        "script",
        "first",
        ModelLocation::Local,
    )];
    let app = serve(vec![("script:first", model)], menu, |c| c).await;
    let link = app
        .server
        .open_chat(lrg_chat::http::ChatSpec::new())
        .await
        .unwrap();
    let (_driver, _profile, mut page) = launch(&chromium, &driver).await;
    page.open(&app.base, &link.page_url).await;
    page.wait(
        "document.getElementById('model-button').textContent.includes('script:first')",
        "the page",
    )
    .await;
    let sub = "0123456789abcdef0123456789abcdef::sub::1";
    let events = [
        // A sub-agent's bulk question: no card of its own before it.
        json!({"type": "approval_needed", "call_id": format!("{sub}::call_1_1"),
               "tool": "delete_notes", "title": "Delete notes", "class": "destructive",
               "arguments": {"ids": [1, 2, 3]}, "targets": 3,
               "reason": {"kind": "bulk", "targets": 3, "limit": 2},
               "warnings": ["`delete_notes` does not say what it changes (no annotations), so it counts as destructive"],
               "answers": ["once", "this_chat", "deny"], "offer_always": false,
               "sub_agent": {"sub_session_id": sub, "tool": "delete_notes", "class": "destructive",
                             "arguments": {"ids": [1, 2, 3]}}}),
        // The chat's own call, then its question, which allows "always".
        json!({"type": "tool_call", "call_id": "c2", "tool": "rename_note", "class": "change",
               "arguments": {"from": "a", "to": "b"}}),
        json!({"type": "approval_needed", "call_id": "c2", "tool": "rename_note", "class": "change",
               "arguments": {"from": "a", "to": "b"}, "reason": {"kind": "rule"},
               "warnings": ["a hook changed the arguments the model wrote: these are the ones that would run"],
               "answers": ["once", "this_chat", "always", "deny"], "offer_always": true}),
        // As an older server wrote it: no answers, only offer_always.
        json!({"type": "tool_call", "call_id": "c3", "tool": "read_note", "class": "read",
               "arguments": {"name": "x"}}),
        json!({"type": "approval_needed", "call_id": "c3", "reason": {"kind": "rule"},
               "offer_always": false}),
    ];
    for (i, event) in events.iter().enumerate() {
        let mut event = event.clone();
        event["seq"] = json!(1000 + i);
        page.js(&format!("apply({event}); return null")).await;
    }
    let card = |id: &str, inside: &str| {
        format!(
            "return [...document.querySelectorAll('#log .card')].filter(c => c.dataset.call === '{id}').map(c => c.querySelectorAll('{inside}').length)[0]"
        )
    };
    let sub_call = format!("{sub}::call_1_1");
    // The sub-agent's card was drawn from the question: title, target list,
    // arguments, the warning, and no "always" for a bulk question.
    let text = page
        .js(&format!(
            "return [...document.querySelectorAll('#log .card')].find(c => c.dataset.call === '{sub_call}').innerText"
        ))
        .await;
    let text = text.as_str().unwrap();
    for shown in [
        "Delete notes",
        "Aimed at 3 items",
        "more than the bulk limit of 2",
        "no annotations",
        "Allow once",
        "Allow in this chat",
        "Don't allow",
    ] {
        assert!(text.contains(shown), "{shown:?} not on the card:\n{text}");
    }
    assert!(!text.contains("Always allow"), "{text}");
    assert_eq!(page.js(&card(&sub_call, ".approve-always")).await, json!(0));
    assert_eq!(
        page.js(&card(&sub_call, ".notice.sub-agent")).await,
        json!(1)
    );
    // The chat's own call: its question on its card, "always" offered.
    assert_eq!(page.js(&card("c2", ".approve-always")).await, json!(1));
    assert_eq!(page.js(&card("c2", ".approval .warning")).await, json!(1));
    // The older event: "always" only if offer_always says so.
    assert_eq!(page.js(&card("c3", ".approve-once")).await, json!(1));
    assert_eq!(page.js(&card("c3", ".approve-always")).await, json!(0));
    // One card per call: the questions did not draw second ones.
    assert_eq!(
        page.js("return document.querySelectorAll('#log .card[data-call]').length")
            .await,
        json!(3)
    );
    page.js("document.querySelector('#log .card[data-call]').scrollIntoView({block: 'start'}); return null")
        .await;
    page.shot("approval-cards").await;
}
