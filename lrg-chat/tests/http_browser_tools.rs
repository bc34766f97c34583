//! The page's rendering of hooks, tool search and client tools, in a real
//! browser: a `hook_decision` on its call's card and one of its own, a
//! `tool_skipped` of reason `hook_denied`, a hook's approval question, a
//! `tools_found` line, and a client tool's card. The events are applied as
//! the stream would deliver them (their server side is tested in
//! `hooks.rs`, `tool_search.rs` and `client_tools.rs`).
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

fn menu() -> Vec<MenuEntry> {
    vec![MenuEntry::available(
        "script",
        "first",
        ModelLocation::Local,
    )]
}

#[tokio::test]
async fn hooks_search_and_client_tools_are_shown_in_a_real_browser() {
    let Some((chromium, driver)) = browser() else {
        return;
    };
    let model: Arc<dyn ChatModel> = Arc::new(ScriptedModel::named("first", vec![text("hi")]));
    let app = serve(vec![("script:first", model)], menu(), |c| c).await;
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
    let events = [
        json!({"type": "tools_found", "query": "weather", "names": ["get_weather", "get_forecast"]}),
        json!({"type": "tool_call", "call_id": "c1", "tool": "delete_notes", "class": "destructive",
               "arguments": {"ids": [1]}}),
        json!({"type": "hook_decision", "hook": "guard.sh", "event": "pre_tool_use", "decision": "deny",
               "reason": "deleting needs a <b>ticket</b>", "call_id": "c1"}),
        json!({"type": "tool_skipped", "call_id": "c1", "reason": "hook_denied"}),
        json!({"type": "tool_call", "call_id": "c2", "tool": "read_note", "class": "read",
               "arguments": {"name": "x"}}),
        json!({"type": "approval_needed", "call_id": "c2", "reason": {"kind": "hook", "reason": "check it"},
               "offer_always": true}),
        json!({"type": "tool_call", "call_id": "c3", "tool": "show_map", "class": "read",
               "arguments": {"place": "Oslo"}, "runs_on": "client"}),
        json!({"type": "hook_decision", "hook": "gate", "event": "user_prompt_submit", "decision": "block",
               "reason": "never paste passwords"}),
    ];
    let events: Vec<serde_json::Value> = events
        .into_iter()
        .chain([
            json!({"type": "usage", "prompt_tokens": 1200, "completion_tokens": 300, "context_window": 8192,
                   "cost": {"usd": 0.0123, "priced": true},
                   "chat_total": {"prompt_tokens": 1200, "completion_tokens": 300, "turns": 1,
                                  "cost": {"usd": null, "priced": false}}}),
        ])
        .collect();
    for (i, event) in events.iter().enumerate() {
        let mut event = event.clone();
        event["seq"] = json!(1000 + i);
        page.js(&format!("apply({event}); return null")).await;
    }
    let text = page.log_text().await;
    for shown in [
        "Searched the tools for “weather”: get_weather, get_forecast",
        "Hook guard.sh (before the call) — deny: deleting needs a <b>ticket</b>",
        "not run: denied by a hook",
        "A hook asks: check it",
        "runs in the app",
        "waits for the app",
        "Hook gate (before the message) — block: never paste passwords",
    ] {
        assert!(text.contains(shown), "{shown:?} not in the page:\n{text}");
    }
    // An unknown price is never shown as $0.
    assert_eq!(
        page.js("return document.getElementById('cost').textContent")
            .await,
        json!("unpriced · 1,500 tokens")
    );
    // A hook's reason is text, never markup.
    assert_eq!(
        page.js("return document.querySelectorAll('#log .hook b').length")
            .await,
        json!(0)
    );
    page.shot("hooks-search-client-tools").await;

    // "Show the system prompt": what the next turn sends, from GET …/prompt.
    page.click("#prompt-button").await;
    page.wait(
        "document.getElementById('prompt-panel').textContent.includes('The system prompt of the next turn')",
        "the prompt panel",
    )
    .await;
    let panel = page
        .js("return document.getElementById('prompt-panel').textContent")
        .await;
    assert!(
        panel.as_str().unwrap().contains("Tools offered"),
        "the panel lists the tools: {panel}"
    );
    page.shot("prompt-panel").await;
}
