//! Sub-agents on the page, in a real browser: a card per sub-agent under
//! the call that spawned it, its live status and times, its approval
//! question answered on the chat's page, its transcript folded away and
//! read from its own stream, and the cards drawn again after a reload.
//! Served by `lrg serve --sub-agents`'s way: the server's default turns
//! them on for the chats the page opens.
//!
//! Needs `chromium` and `chromedriver`; skips loudly without them, and
//! fails under `CI`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::browser_support;
use crate::http_support;

use browser_support::*;
use http_support::*;
use lrg_chat::http::ChatSpec;
use serde_json::json;

use crate::http_sub_agents::{router, spawn};

/// The card of sub-agent `n`.
fn card(n: u64) -> String {
    format!(".card.sub-agent[data-sub$='::sub::{n}']")
}

#[tokio::test]
async fn the_page_shows_each_sub_agent_working_and_asks_its_questions() {
    let Some((chromium, driver)) = browser() else {
        return;
    };
    let models = router(
        vec![
            spawn(&["a", "b"]),
            text("Two helpers are on it."),
            text("One is in."),
            text("Both are in."),
        ],
        vec![
            (
                "a",
                vec![
                    call("delete_items", json!({"ids": [4, 5]})),
                    text("Deleted **both** items."),
                ],
            ),
            ("b", vec![text("Nothing to delete here.")]),
        ],
    );
    let h = start(models, |c| {
        c.defaults(
            ChatSpec::new()
                .model("script:first")
                .mcp_servers(test_mcp_config())
                .sub_agents(true),
        )
    })
    .await;
    let link = h.server.open_chat(ChatSpec::new()).await.unwrap();
    let (_driver, _profile, mut page) = launch(&chromium, &driver).await;
    page.open(&h.base, &link.page_url).await;

    page.type_in(&format!("clean up a and b{ENTER}")).await;
    page.wait(
        "document.querySelectorAll('#log .card.sub-agent').length === 2",
        "two sub-agent cards",
    )
    .await;
    // Under the call that spawned them, in order.
    assert_eq!(
        page.js(
            "const kids = [...document.getElementById('log').children]; \
             const s = kids.findIndex(k => k.dataset.call && k.querySelector('.title').textContent === 'spawn_sub_agent'); \
             return [s >= 0, (kids[s + 1].dataset.sub || '').endsWith('::sub::1'), (kids[s + 2].dataset.sub || '').endsWith('::sub::2')]"
        )
        .await,
        json!([true, true, true])
    );
    let a = card(1);
    page.wait(
        &format!("document.querySelector(\"{a}\").classList.contains('waiting')"),
        "sub-agent 1 to wait for its answer",
    )
    .await;
    let status = page
        .js(&format!(
            "return document.querySelector(\"{a} .status\").textContent"
        ))
        .await;
    assert_eq!(status, json!("waits for you (1 question below)"));
    assert_eq!(
        page.js(&format!(
            "return document.querySelector(\"{a} .title\").textContent"
        ))
        .await,
        json!("find a")
    );
    // Its question is in the log, said to be its own.
    page.wait(
        "document.querySelector('#log .card.from-sub-agent .approve-once')",
        "the sub-agent's question",
    )
    .await;
    let asked = page
        .js("return document.querySelector('#log .card.from-sub-agent').textContent")
        .await;
    let asked = asked.as_str().unwrap();
    assert!(
        asked.contains("asked by sub-agent 1 (find a)") && asked.contains("delete_items"),
        "{asked}"
    );
    page.wait(
        &format!(
            "document.querySelector(\"{} .status\").textContent === 'done'",
            card(2)
        ),
        "sub-agent 2 to be done",
    )
    .await;
    // Both cards and the question in view, for the screenshot.
    page.js(&format!(
        "document.querySelector(\"{a}\").scrollIntoView({{block: 'start'}}); return null"
    ))
    .await;
    page.shot("sub-agents-working").await;

    // Answered on the chat's page: it goes on, and ends.
    page.click(".card.from-sub-agent .approve-once").await;
    page.wait(
        &format!("document.querySelector(\"{a} .status\").textContent === 'done'"),
        "sub-agent 1 to be done",
    )
    .await;
    page.wait(
        "[...document.querySelectorAll('#log .turn .text')].some(t => t.textContent === 'Both are in.')",
        "the chat's reaction to both",
    )
    .await;
    page.idle().await;
    // Its times, as the server kept them.
    page.wait(
        &format!(
            "/^started .+ · took (under a second|\\d+ seconds?)$/.test(document.querySelector(\"{a} .times\").textContent)"
        ),
        "sub-agent 1's times",
    )
    .await;

    // Its transcript, read from its own stream when unfolded.
    page.click(&format!("{a} details.transcript summary")).await;
    page.wait(
        &format!(
            "[...document.querySelectorAll(\"{a} .sub-row.answer\")].some(r => r.textContent.includes('Deleted both items.'))"
        ),
        "sub-agent 1's transcript",
    )
    .await;
    let transcript = page
        .js(&format!(
            "return document.querySelector(\"{a} .transcript .body\").innerText"
        ))
        .await;
    let transcript = transcript.as_str().unwrap();
    assert!(transcript.starts_with("Task: task a"), "{transcript}");
    assert!(transcript.contains("→ delete_items"), "{transcript}");
    assert!(transcript.contains("· done"), "{transcript}");
    // Markdown, drawn as such; never markup from the stream.
    assert_eq!(
        page.js(&format!(
            "return document.querySelectorAll(\"{a} .sub-row.answer strong\").length"
        ))
        .await,
        json!(1)
    );
    page.js(&format!(
        "document.querySelector(\"{a}\").scrollIntoView({{block: 'start'}}); return null"
    ))
    .await;
    page.shot("sub-agent-transcript").await;

    // A reload draws the cards again, as they ended.
    page.open(&h.base, &link.page_url).await;
    page.wait(
        &format!(
            "document.querySelector(\"{a} .status\") && document.querySelector(\"{a} .status\").textContent === 'done' \
             && document.querySelector(\"{} .status\").textContent === 'done'",
            card(2)
        ),
        "the cards after a reload",
    )
    .await;
    assert_eq!(
        page.js("return document.querySelectorAll('#log .card.sub-agent').length")
            .await,
        json!(2)
    );
}
