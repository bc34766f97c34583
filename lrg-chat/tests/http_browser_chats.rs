//! The owner's chat list on the page, in a real browser (headless Chromium
//! over WebDriver, as `http_browser.rs`): three kept chats, open the
//! second, rename it, delete the third, start new ones; the fragment keeps
//! the owner and their token through it all. And an accessibility check
//! with axe-core (`tests-fixtures/axe`, injected through WebDriver, never
//! served by the page): no serious or critical violation with an approval
//! waiting, the model menu open and the chat list open. Screenshots go to
//! `target/browser-screens/`.
//!
//! Needs `chromium` and `chromedriver`, and for the check `npm ci` in
//! `tests-fixtures/axe`; skips loudly without them, and fails under `CI`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::browser_support;
use crate::http_support;

use std::sync::Arc;
use std::time::Duration;

use browser_support::*;
use http_support::*;
use lrg_chat::http::{ChatSpec, MenuEntry};
use lrg_chat::store::JsonlStore;
use lrg_providers::{ChatModel, ModelLocation};
use serde_json::{Value, json};

fn menu() -> Vec<MenuEntry> {
    vec![
        MenuEntry::available("script", "first", ModelLocation::Local),
        MenuEntry::available("script", "second", ModelLocation::Local),
        MenuEntry::unavailable(
            "anthropic",
            "claude-sonnet-4-5",
            ModelLocation::Cloud,
            "no key: set ANTHROPIC_API_KEY",
        ),
    ]
}

fn answers(n: usize) -> Vec<lrg_providers::ScriptedTurn> {
    (1..=n).map(|i| text(&format!("Answer {i}."))).collect()
}

/// The page URL `lrg serve` prints: the chat, the owner and their token.
fn owner_url(link: &lrg_chat::http::ChatLink, owner_token: &str) -> String {
    format!("{}&owner=default&owner_token={owner_token}", link.page_url)
}

const ITEMS: &str = "[...document.querySelectorAll('#chat-list li')].map(li => li.querySelector('.title').textContent)";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_chat_list_opens_renames_deletes_and_starts_chats_in_a_real_browser() {
    let Some((chromium, driver)) = browser() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let first: Arc<dyn ChatModel> =
        Arc::new(lrg_providers::ScriptedModel::named("first", answers(20)));
    let second: Arc<dyn ChatModel> =
        Arc::new(lrg_providers::ScriptedModel::named("second", answers(20)));
    let app = serve(
        vec![("script:first", first), ("script:second", second)],
        menu(),
        |c| c.store(Arc::new(JsonlStore::new(dir.path()))),
    )
    .await;
    // Three kept chats of the default owner, the third the newest.
    let mut links = Vec::new();
    for question in ["first question", "second question", "third question"] {
        let link = app.server.open_chat(ChatSpec::new()).await.unwrap();
        let session = app.server.session(&link.session).unwrap();
        tokio::time::timeout(WAIT, session.send(question).unwrap())
            .await
            .unwrap();
        links.push(link);
        // Distinct update times, newest last.
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let owner_token = app.server.owner_token("default").unwrap();
    let (_driver, _profile, mut page) = launch(&chromium, &driver).await;

    // 1. The printed URL: the chat, and the list beside it (open by default at 1100 px).
    page.open(&app.base, &owner_url(&links[0], &owner_token))
        .await;
    page.wait(
        "document.querySelectorAll('#chat-list li').length === 3",
        "the list",
    )
    .await;
    assert_eq!(
        page.js(&format!("return {ITEMS}")).await,
        json!(["third question", "second question", "first question"]),
        "newest first"
    );
    assert_eq!(
        page.js("return [getComputedStyle(document.getElementById('sidebar')).display !== 'none', document.querySelector('#chat-list li.current .title').textContent, document.querySelector('#chat-list li .meta').textContent.includes('script:first')]").await,
        json!([true, "first question", true])
    );
    page.shot("chat-list").await;

    // 2. Open the second: its conversation, and the fragment keeps the owner.
    page.click("#chat-list li:nth-child(2) .open-chat").await;
    page.wait("document.querySelector('.user.msg') && document.querySelector('.user.msg').textContent === 'second question'", "the second chat").await;
    page.wait(
        "document.getElementById('conn').textContent === 'live'",
        "its stream",
    )
    .await;
    let hash = page.js("return location.hash").await;
    let hash = hash.as_str().unwrap();
    assert!(
        hash.contains(&format!("session={}", links[1].session)),
        "{hash}"
    );
    assert!(
        hash.contains("owner=default") && hash.contains(&format!("owner_token={owner_token}")),
        "{hash}"
    );
    assert_eq!(page.answers().await, ["Answer 2."]);

    // 3. Rename it.
    page.click("#chat-list li.current .rename").await;
    page.wait("!document.getElementById('modal').classList.contains('hidden') && document.activeElement.id === 'modal-input'", "the name field").await;
    page.client
        .find(fantoccini::Locator::Css("#modal-input"))
        .await
        .unwrap()
        .send_keys(&format!("Photos, tidied{ENTER}"))
        .await
        .unwrap();
    page.wait(
        "document.querySelector('#chat-list li.current .title').textContent === 'Photos, tidied'",
        "the new name",
    )
    .await;
    page.shot("chat-renamed").await;

    // 4. Delete the third (the oldest), after a confirmation.
    page.click("#chat-list li:nth-child(3) .delete").await;
    page.wait(
        "!document.getElementById('modal').classList.contains('hidden')",
        "the confirmation",
    )
    .await;
    let question = page
        .js("return document.getElementById('modal-text').textContent")
        .await;
    assert!(
        question.as_str().unwrap().contains("first question"),
        "{question}"
    );
    page.shot("chat-delete-asks").await;
    page.click("#modal-confirm").await;
    page.wait(
        "document.querySelectorAll('#chat-list li').length === 2",
        "two left",
    )
    .await;
    let mut left: Vec<String> =
        serde_json::from_value(page.js(&format!("return {ITEMS}")).await).unwrap();
    left.sort();
    assert_eq!(left, ["Photos, tidied", "third question"]);
    assert!(app.server.session(&links[0].session).is_none(), "ended");

    // 5. Back to the deleted chat's page: it says so, and offers the list and New chat.
    page.client.back().await.unwrap();
    page.wait(
        "document.querySelector('.notice.ended .ended-actions')",
        "the ended page",
    )
    .await;
    page.shot("ended-offers-list").await;
    page.click(".ended-actions button.primary").await;
    page.wait("document.getElementById('conn').textContent === 'live' && document.querySelectorAll('#chat-list li').length === 3", "a new chat").await;
    assert_eq!(
        page.js("return [document.querySelector('#chat-list li.current .title').textContent, location.hash.includes('owner_token=')]").await,
        json!(["New chat", true])
    );

    // 6. New chat on a model picked from the menu.
    page.wait(
        "document.getElementById('model-button').textContent.includes('script:first')",
        "the menu loaded",
    )
    .await;
    page.click("#new-chat").await;
    page.wait(
        "document.querySelector('#new-models button[data-model=\"script:second\"]')",
        "the models",
    )
    .await;
    page.shot("new-chat-models").await;
    page.click("#new-models button[data-model=\"script:second\"]")
        .await;
    page.wait("document.getElementById('model-button').textContent.includes('script:second') && document.querySelectorAll('#chat-list li').length === 4", "the chat on script:second").await;
    page.type_in(&format!("hello second{ENTER}")).await;
    page.wait(
        "document.querySelectorAll('.turn:not(.live) .text').length === 1",
        "its answer",
    )
    .await;
    page.wait(
        "document.querySelector('#chat-list li.current .title').textContent === 'hello second'",
        "its title in the list",
    )
    .await;

    // 7. A reload keeps it all; the list alone (no chat) offers New chat.
    page.client.refresh().await.unwrap();
    page.wait("document.getElementById('conn').textContent === 'live' && document.querySelectorAll('#chat-list li').length === 4", "after reload").await;
    assert_eq!(page.users().await, ["hello second"]);
    page.client
        .goto(&format!(
            "{}/v1/ui/chat#owner=default&owner_token={owner_token}",
            app.base
        ))
        .await
        .unwrap();
    page.wait("document.querySelectorAll('#chat-list li').length === 4 && document.getElementById('conn').textContent === 'no chat'", "the list alone").await;
    assert_eq!(
        page.js("return document.getElementById('send').disabled")
            .await,
        json!(true)
    );
    page.shot("list-alone").await;

    // 8. A narrow window: the list is a drawer, closed until asked for.
    page.client.set_window_size(400, 800).await.unwrap();
    page.client
        .goto(&format!(
            "{}{}",
            app.base,
            owner_url(&links[1], &owner_token)
        ))
        .await
        .unwrap();
    page.wait(
        "document.getElementById('conn').textContent === 'live'",
        "the chat, narrow",
    )
    .await;
    page.wait(
        "document.body.classList.contains('side-closed')",
        "the drawer closed",
    )
    .await;
    page.shot("narrow-closed").await;
    page.click("#side-button").await;
    page.wait("!document.body.classList.contains('side-closed') && document.querySelectorAll('#chat-list li').length === 4", "the drawer").await;
    page.shot("narrow-drawer").await;
    // (A click in the strip the drawer leaves uncovered.)
    page.js("document.getElementById('main').dispatchEvent(new MouseEvent('click', { bubbles: true, clientX: 360, clientY: 400 })); return null").await;
    page.wait(
        "document.body.classList.contains('side-closed')",
        "closed by a click outside",
    )
    .await;
    page.client.close().await.unwrap();
}

/// axe-core's source (the pinned fixture), or a loud skip (a failure under CI).
fn axe_source() -> Option<String> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests-fixtures/axe/node_modules/axe-core/axe.min.js");
    match std::fs::read_to_string(&path) {
        Ok(source) => Some(source),
        Err(e) => {
            let why = format!(
                "the accessibility check needs axe-core ({}: {e}); run `npm ci` in tests-fixtures/axe",
                path.display()
            );
            if std::env::var_os("CI").is_some() {
                panic!("{why}");
            }
            eprintln!("SKIPPED: {why}");
            None
        }
    }
}

/// The serious and critical violations axe finds on the page as it is now.
async fn violations(page: &Page, axe: &str) -> Vec<Value> {
    page.client.execute(axe, vec![]).await.unwrap();
    let found = page
        .client
        .execute_async(
            "const done = arguments[arguments.length - 1];
             axe.run(document, { resultTypes: ['violations'] })
               .then((r) => done(r.passes.length < 10 ? [{ id: 'axe checked almost nothing', help: String(r.passes.length) }]
                 : r.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical')
                 .map((v) => ({ id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.slice(0, 5).map((n) => n.target.join(' ') + ': ' + n.failureSummary) }))))
               .catch((e) => done([{ id: 'axe failed', help: String(e) }]));",
            vec![],
        )
        .await
        .unwrap();
    serde_json::from_value(found).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_has_no_serious_accessibility_violation_in_a_real_browser() {
    let Some((chromium, driver)) = browser() else {
        return;
    };
    let Some(axe) = axe_source() else {
        return;
    };
    let first: Arc<dyn ChatModel> = Arc::new(lrg_providers::ScriptedModel::named(
        "first",
        vec![
            text("## Hello\n\nA list:\n\n- one\n- two\n\n```sh\nls -l\n```"),
            call("delete_photos", json!({"ids": [3, 4]})),
        ],
    ));
    let app = serve(vec![("script:first", first)], menu(), |c| c).await;
    let link = app.server.open_chat(ChatSpec::new()).await.unwrap();
    let owner_token = app.server.owner_token("default").unwrap();
    let (_driver, _profile, mut page) = launch(&chromium, &driver).await;
    page.open(&app.base, &owner_url(&link, &owner_token)).await;
    page.type_in(&format!("hello{ENTER}")).await;
    page.wait(
        "document.querySelector('.turn:not(.live) .code')",
        "the answer",
    )
    .await;
    page.idle().await;
    page.type_in(&format!("delete 3 and 4{ENTER}")).await;
    page.wait(
        "document.querySelector('.card .approval .approve-once')",
        "the approval",
    )
    .await;
    page.wait(
        "document.querySelectorAll('#chat-list li').length === 1",
        "the chat list",
    )
    .await;

    // An approval waiting, with the chat list open.
    let found = violations(&page, &axe).await;
    page.shot("axe-approval-and-list").await;
    assert!(
        found.is_empty(),
        "with an approval waiting and the list open: {found:#?}"
    );

    // The model menu open.
    page.click("#model-button").await;
    page.wait(
        "document.querySelector('#model-menu button[data-model]')",
        "the menu",
    )
    .await;
    page.js("document.querySelector('#model-menu details.unavailable').open = true; return null")
        .await;
    let found = violations(&page, &axe).await;
    page.shot("axe-menu").await;
    assert!(found.is_empty(), "with the model menu open: {found:#?}");
    page.client.close().await.unwrap();
}
