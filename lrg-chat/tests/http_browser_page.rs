//! The page as a chat app, in a real browser (headless Chromium over
//! WebDriver, as `http_browser.rs`): Markdown rendered safely with copyable
//! code, hostile model output that runs nothing and fetches nothing, edit
//! and resend, 500 messages that keep the scroll position, a reload in the
//! middle of a stream, images attached, pasted and sent to the model, and
//! the small bugs a person hit (issue 28 §6). Screenshots go to
//! `target/browser-screens/`.
//!
//! Needs `chromium` and `chromedriver`; skips loudly without them, and
//! fails under `CI`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::browser_support;
use crate::http_support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use base64::Engine as _;
use browser_support::*;
use fantoccini::Locator;
use http_support::*;
use lrg_chat::http::MenuEntry;
use lrg_providers::{ChatModel, ModelLocation, Part, Role, ScriptedModel, ScriptedTurn};
use serde_json::{Value, json};

fn menu() -> Vec<MenuEntry> {
    vec![
        MenuEntry::available("script", "first", ModelLocation::Local),
        MenuEntry::unavailable(
            "anthropic",
            "claude-sonnet-4-5",
            ModelLocation::Cloud,
            "no key: set ANTHROPIC_API_KEY",
        ),
        MenuEntry::available("script", "second", ModelLocation::Local),
    ]
}

/// One scripted model, `script:first`, kept so its requests can be read.
async fn app_on(turns: Vec<ScriptedTurn>) -> (App, Arc<ScriptedModel>) {
    let model = Arc::new(ScriptedModel::named("first", turns));
    let dyn_model: Arc<dyn ChatModel> = model.clone();
    let app = serve(vec![("script:first", dyn_model)], menu(), |c| c).await;
    (app, model)
}

async fn post(
    app: &App,
    link: &lrg_chat::http::ChatLink,
    route: &str,
    body: Value,
) -> (u16, Value) {
    lrg_providers::transport::ensure_tls_provider();
    let res = reqwest::Client::new()
        .post(format!(
            "{}/v1/chat/sessions/{}{route}",
            app.base, link.session
        ))
        .bearer_auth(&link.chat_token)
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = res.status().as_u16();
    (status, res.json().await.unwrap_or(Value::Null))
}

/// The text of the last user message the model was sent, and its images.
fn last_user(model: &ScriptedModel, request: usize) -> (String, Vec<(String, Vec<u8>)>) {
    let requests = model.requests();
    let message = requests[request]
        .messages
        .iter()
        .rev()
        .find(|m| m.role == Role::User)
        .unwrap()
        .clone();
    let images = message
        .parts
        .iter()
        .filter_map(|p| match p {
            Part::Image(i) => Some((i.mime.clone(), i.data.to_vec())),
            _ => None,
        })
        .collect();
    (message.text(), images)
}

const MARKDOWN: &str = "## Done\n\nI tidied **three** folders:\n\n- photos\n- *music*\n- ~~old~~ archive\n\n| Folder | Files |\n|--------|------:|\n| photos | 120 |\n| music | 48 |\n\n- [x] sort\n- [ ] back up\n\n```rust\nfn main() {\n    println!(\"<b>hi</b>\");\n}\n```\n\nSee [the docs](https://example.com/docs).";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn markdown_renders_with_a_copy_button_on_code_in_a_real_browser() {
    let Some((chromium, driver)) = browser() else {
        return;
    };
    let (app, _model) = app_on(vec![
        ScriptedTurn {
            reasoning: Some("The user wants **a summary**.".into()),
            ..slow(MARKDOWN, 40)
        },
        slow(
            "<think>Is it *really* done?</think>Yes: everything is done.",
            40,
        ),
    ])
    .await;
    let link = app
        .server
        .open_chat(lrg_chat::http::ChatSpec::new())
        .await
        .unwrap();
    let (_driver, _profile, mut page) = launch(&chromium, &driver).await;
    page.open(&app.base, &link.page_url).await;

    page.type_in(&format!("tidy up{ENTER}")).await;
    // Rendered while it streams (the live turn only).
    page.wait(
        "document.querySelector('.turn.live .text h2')",
        "a heading while streaming",
    )
    .await;
    page.wait(
        "document.querySelector('.turn:not(.live) .text .code')",
        "the finished turn",
    )
    .await;
    let t = ".turn:not(.live) .text";
    let got = page
        .js(&format!(
            "const t = document.querySelector('{t}'); return {{
               h2: t.querySelector('h2').textContent,
               strong: t.querySelector('p strong').textContent,
               items: [...t.querySelectorAll('ul:not(.contains-task-list) > li')].map(l => l.textContent),
               del: t.querySelector('s, del').textContent,
               head: [...t.querySelectorAll('table th')].map(c => c.textContent),
               cells: [...t.querySelectorAll('table td')].map(c => c.textContent),
               tasks: [...t.querySelectorAll('input[type=checkbox]')].map(c => [c.checked, c.disabled]),
               lang: t.querySelector('.code .lang').textContent,
               code: t.querySelector('.code pre code').textContent,
               link: [t.querySelector('a').href, t.querySelector('a').target, t.querySelector('a').rel],
               thinking: document.querySelector('.turn:not(.live) details.thinking .body strong').textContent,
               raw: t.innerHTML.includes('<b>'),
             }}"
        ))
        .await;
    assert_eq!(
        got,
        json!({
            "h2": "Done",
            "strong": "three",
            "items": ["photos", "music", "old archive"],
            "del": "old",
            "head": ["Folder", "Files"],
            "cells": ["photos", "120", "music", "48"],
            "tasks": [[true, true], [false, true]],
            "lang": "rust",
            "code": "fn main() {\n    println!(\"<b>hi</b>\");\n}\n",
            "link": ["https://example.com/docs", "_blank", "noopener noreferrer"],
            "thinking": "a summary",
            "raw": false,
        })
    );
    page.idle().await;
    page.shot("markdown").await;

    // Copy: the code, through the clipboard API (a page-visible hook: the
    // headless browser grants no clipboard permission to read it back).
    page.js("window.copied = null; navigator.clipboard.writeText = (t) => { window.copied = t; return Promise.resolve(); }; return null").await;
    page.click(".turn:not(.live) .code .copy-code").await;
    page.wait("window.copied !== null", "the copy").await;
    assert_eq!(
        page.js("return window.copied").await,
        json!("fn main() {\n    println!(\"<b>hi</b>\");\n}\n")
    );
    page.wait(
        "document.querySelector('.code .copy-code').textContent === 'Copied'",
        "the copy said",
    )
    .await;
    // The message's own Copy: its Markdown source.
    page.js(
        "window.copied = null; document.querySelector('.turn.last .act.copy').click(); return null",
    )
    .await;
    page.wait("window.copied !== null", "the message copied")
        .await;
    assert_eq!(page.js("return window.copied").await, json!(MARKDOWN));

    // <think>…</think> in the content is folded into Thinking.
    page.type_in(&format!("sure?{ENTER}")).await;
    page.wait(
        "document.querySelectorAll('.turn:not(.live) .text').length === 2",
        "the second answer",
    )
    .await;
    assert_eq!(
        page.js("const t = [...document.querySelectorAll('.turn:not(.live)')].pop(); return [t.querySelector('.text').textContent, t.querySelector('details.thinking').open, t.querySelector('details.thinking .body').textContent]").await,
        json!(["Yes: everything is done.", false, "Is it really done?"])
    );
    page.idle().await;
    page.shot("think-folded").await;

    // A 360 px window: nothing wider than the window (a code block and a
    // table scroll on their own).
    page.client.set_window_size(360, 740).await.unwrap();
    page.wait(
        "document.documentElement.scrollWidth <= window.innerWidth",
        "no page-wide overflow at 360 px",
    )
    .await;
    page.js("document.querySelector('.turn .code').scrollIntoView(); return null")
        .await;
    page.shot("narrow-360").await;
    page.client.close().await.unwrap();
}

/// Counts the connections a local "foreign host" is sent.
async fn leak_listener() -> (u16, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let hits = Arc::new(AtomicUsize::new(0));
    let count = hits.clone();
    tokio::spawn(async move {
        while let Ok((_socket, _)) = listener.accept().await {
            count.fetch_add(1, Ordering::SeqCst);
        }
    });
    (port, hits)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_model_output_runs_nothing_and_fetches_nothing_in_a_real_browser() {
    let Some((chromium, driver)) = browser() else {
        return;
    };
    let (port, hits) = leak_listener().await;
    let leak = format!("http://127.0.0.1:{port}");
    let reply = format!(
        "Here:\n\n<img src=x onerror=\"window.__pwned='img'\"> <script>window.__pwned='script'</script>\n\n\
         <iframe src=\"{leak}/iframe\"></iframe>\n\n<style>body {{ background: url({leak}/style) }}</style>\n\n\
         <img src={leak}/raw-img>\n\n<a href=\"{leak}/raw-link\">raw</a>\n\n\
         [click me](javascript:window.__pwned='link') and [data](data:text/html,<script>window.__pwned='data'</script>) \
         and [vb](vbscript:msgbox)\n\n![a picture]({leak}/markdown-image.png)\n\n\
         <svg onload=\"window.__pwned='svg'\"></svg> <math><mi xlink:href=\"javascript:window.__pwned='math'\">x</mi></math>\n\n\
         [fine](https://example.com/)"
    );
    let tool_html = format!(
        "<img src={leak}/tool-img onerror=\"window.__pwned='tool'\"><script>window.__pwned='tool-script'</script>\nsecond line"
    );
    let (app, _model) = app_on(vec![
        text(&reply),
        call("show_html", json!({"html": tool_html})),
        text("Shown."),
    ])
    .await;
    let link = app
        .server
        .open_chat(lrg_chat::http::ChatSpec::new())
        .await
        .unwrap();
    let (_driver, _profile, mut page) = launch(&chromium, &driver).await;
    page.open(&app.base, &link.page_url).await;

    page.type_in(&format!("show me{ENTER}")).await;
    page.wait(
        "document.querySelector('.turn:not(.live) .text')",
        "the hostile reply",
    )
    .await;
    page.idle().await;
    page.type_in(&format!("and the tool{ENTER}")).await;
    page.wait("document.querySelector('.card.done')", "the tool's card")
        .await;
    page.wait(
        "document.querySelectorAll('.turn:not(.live) .text').length === 2",
        "the answer after the tool",
    )
    .await;
    page.idle().await;
    page.js("for (const d of document.querySelectorAll('.card details.result')) d.open = true; return null")
        .await;
    // Give anything that would run or load the time to do it.
    tokio::time::sleep(Duration::from_millis(800)).await;

    let got = page
        .js("const log = document.getElementById('log'); const t = document.querySelector('.turn:not(.live) .text'); return {
               pwned: window.__pwned === undefined ? null : String(window.__pwned),
               img: log.querySelectorAll('.turn img, .card pre img, .card .args img').length,
               tags: log.querySelectorAll('script, iframe, style, svg, math, object, embed').length,
               script_links: [...log.querySelectorAll('a')].filter(a => !/^(https?:|mailto:)/.test(a.getAttribute('href') || '')).length,
               links: [...t.querySelectorAll('a')].map(a => [a.getAttribute('href'), a.target, a.rel, a.textContent]),
               shown: t.textContent.includes('<script>window.__pwned') && t.textContent.includes('<img src=x onerror'),
               tool: [document.querySelector('.card.done details.result pre').textContent, document.querySelector('.card.done .args pre').textContent],
             }")
        .await;
    assert_eq!(got["pwned"], Value::Null, "{got}");
    assert_eq!(got["img"], json!(0), "{got}");
    assert_eq!(got["tags"], json!(0), "{got}");
    assert_eq!(got["script_links"], json!(0), "{got}");
    // Raw HTML is text (its URLs may be linked as text is); javascript:,
    // data: and vbscript: links are not links; a remote image is a link.
    let links: Vec<Vec<String>> = serde_json::from_value(got["links"].clone()).unwrap();
    for link in &links {
        assert!(link[0].starts_with("http"), "{link:?}");
        assert_eq!(link[1..3], ["_blank", "noopener noreferrer"], "{link:?}");
        assert_ne!(link[3], "raw", "a raw <a> is not a link");
        assert!(
            !link[3].contains("click me") && !link[3].contains("data"),
            "{link:?}"
        );
    }
    assert!(links.contains(&vec![
        format!("{leak}/markdown-image.png"),
        "_blank".into(),
        "noopener noreferrer".into(),
        "image: a picture".into()
    ]));
    assert!(
        links
            .iter()
            .any(|l| l[0] == "https://example.com/" && l[3] == "fine")
    );
    assert_eq!(
        got["shown"],
        json!(true),
        "raw HTML is shown as text: {got}"
    );
    assert_eq!(
        got["tool"],
        json!([tool_html, tool_html]),
        "tool output and arguments are plain text"
    );
    assert_eq!(
        hits.load(Ordering::SeqCst),
        0,
        "nothing was fetched from the foreign host"
    );
    page.shot("hostile-output").await;

    // A reload draws it all again: still nothing.
    page.client.refresh().await.unwrap();
    page.wait(
        "document.querySelector('.card.done')",
        "the card after reload",
    )
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        page.js("return window.__pwned === undefined").await,
        json!(true)
    );
    assert_eq!(hits.load(Ordering::SeqCst), 0);
    page.client.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_last_message_is_edited_and_sent_again_in_a_real_browser() {
    let Some((chromium, driver)) = browser() else {
        return;
    };
    let (app, model) = app_on(vec![
        text("Answer one."),
        text("Answer to the edit."),
        text("Answer regenerated."),
    ])
    .await;
    let link = app
        .server
        .open_chat(lrg_chat::http::ChatSpec::new())
        .await
        .unwrap();
    let (_driver, _profile, mut page) = launch(&chromium, &driver).await;
    page.open(&app.base, &link.page_url).await;

    page.type_in(&format!("hello{ENTER}")).await;
    page.wait(
        "document.querySelectorAll('.turn:not(.live) .text').length === 1",
        "the answer",
    )
    .await;
    page.idle().await;
    page.js("document.querySelector('.user.last .act.edit').click(); return null")
        .await;
    let area = page
        .client
        .find(Locator::Css(".user.editing .editor textarea"))
        .await
        .unwrap();
    assert_eq!(area.prop("value").await.unwrap().as_deref(), Some("hello"));
    area.clear().await.unwrap();
    area.send_keys("hello, edited").await.unwrap();
    page.shot("editing").await;
    area.send_keys(ENTER).await.unwrap();
    page.wait(
        "[...document.querySelectorAll('.turn:not(.live) .text')].map(t => t.textContent).join() === 'Answer to the edit.'",
        "the answer to the edit",
    )
    .await;
    page.idle().await;
    assert_eq!(page.users().await, ["hello, edited"]);
    assert_eq!(last_user(&model, 1).0, "hello, edited");
    assert_eq!(
        model.requests()[1]
            .messages
            .iter()
            .filter(|m| m.role == Role::User)
            .count(),
        1,
        "the edit replaced the message"
    );
    page.shot("edited").await;

    // Regenerate the last reply.
    page.js("document.querySelector('.turn.last .act.regen').click(); return null")
        .await;
    page.wait(
        "[...document.querySelectorAll('.turn:not(.live) .text')].map(t => t.textContent).join() === 'Answer regenerated.'",
        "the regenerated answer",
    )
    .await;
    page.idle().await;
    assert_eq!(last_user(&model, 2).0, "hello, edited");

    // A reload shows the same: the edit is the conversation.
    page.client.refresh().await.unwrap();
    page.wait(
        "document.querySelectorAll('.turn:not(.live) .text').length === 1",
        "after reload",
    )
    .await;
    assert_eq!(page.users().await, ["hello, edited"]);
    assert_eq!(page.answers().await, ["Answer regenerated."]);
    // What the model will see again (the history) holds the edit.
    lrg_providers::transport::ensure_tls_provider();
    let transcript: Value = reqwest::Client::new()
        .get(format!(
            "{}/v1/chat/sessions/{}/transcript",
            app.base, link.session
        ))
        .bearer_auth(&link.chat_token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let users: Vec<&str> = transcript["rows"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["type"] == "user")
        .map(|r| r["text"].as_str().unwrap())
        .collect();
    assert_eq!(users, ["hello, edited"]);

    // The route refuses a bad body.
    for bad in [
        json!({"text": ""}),
        json!({"txt": "x"}),
        json!({"text": 5}),
        json!([1]),
    ] {
        let (status, body) = post(&app, &link, "/retry", bad.clone()).await;
        assert_eq!(status, 400, "{bad} → {body}");
    }
    page.client.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_hundred_messages_keep_the_scroll_position_while_streaming_in_a_real_browser() {
    let Some((chromium, driver)) = browser() else {
        return;
    };
    let mut turns: Vec<ScriptedTurn> = (1..=250)
        .map(|i| text(&format!("Answer {i}, with **a little** Markdown.")))
        .collect();
    turns.push(slow(&"A long streamed answer. ".repeat(30), 80));
    let (app, _model) = app_on(turns).await;
    let link = app
        .server
        .open_chat(lrg_chat::http::ChatSpec::new())
        .await
        .unwrap();
    let session = app.server.session(&link.session).unwrap();
    for i in 1..=250 {
        tokio::time::timeout(WAIT, session.send(format!("message {i}")).unwrap())
            .await
            .unwrap();
    }
    let (_driver, _profile, mut page) = launch(&chromium, &driver).await;
    page.open(&app.base, &link.page_url).await;
    page.wait(
        "document.querySelectorAll('#log .user.msg').length === 250 && document.querySelectorAll('#log .turn:not(.live) .text').length === 250",
        "500 messages",
    )
    .await;
    // Scrolled up, reading: the stream must not pull the view down.
    page.js("document.getElementById('main').scrollTop = 3000; return null")
        .await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let before = page
        .js("return document.getElementById('main').scrollTop")
        .await;
    assert!(before.as_f64().unwrap() > 2900.0, "{before}");
    let (status, _) = post(&app, &link, "/messages", json!({"text": "one more"})).await;
    assert_eq!(status, 202);
    page.wait(
        "document.querySelector('.turn.live .text') && document.querySelector('.turn.live .text').textContent.length > 40",
        "the stream",
    )
    .await;
    assert_eq!(
        page.js("return document.getElementById('main').scrollTop")
            .await,
        before,
        "kept while streaming"
    );
    page.shot("500-scrolled-up").await;
    page.wait(
        "document.querySelectorAll('#log .turn:not(.live) .text').length === 251",
        "the streamed answer",
    )
    .await;
    assert_eq!(
        page.js("return document.getElementById('main').scrollTop")
            .await,
        before,
        "kept when it ends"
    );
    // At the bottom, the view follows the stream.
    page.js("const m = document.getElementById('main'); m.scrollTop = m.scrollHeight; return null")
        .await;
    page.client.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_in_the_middle_of_a_stream_shows_the_answer_once_in_a_real_browser() {
    let Some((chromium, driver)) = browser() else {
        return;
    };
    let story = "Once upon a time, in a **small** town, there was a page. ".repeat(12);
    let (app, _model) = app_on(vec![slow(&story, 100)]).await;
    let link = app
        .server
        .open_chat(lrg_chat::http::ChatSpec::new())
        .await
        .unwrap();
    let (_driver, _profile, mut page) = launch(&chromium, &driver).await;
    page.open(&app.base, &link.page_url).await;
    page.type_in(&format!("a story{ENTER}")).await;
    page.wait(
        "document.querySelector('.turn.live .text') && document.querySelector('.turn.live .text').textContent.length > 30",
        "the story streaming",
    )
    .await;
    page.client.refresh().await.unwrap();
    page.wait(
        "document.getElementById('conn').textContent === 'live'",
        "the stream after reload",
    )
    .await;
    // Mid-turn: the question is there, the page knows the chat is busy.
    page.wait("document.querySelectorAll('.user.msg').length === 1 && !document.getElementById('stop').disabled", "busy after reload").await;
    page.shot("reload-mid-stream").await;
    page.wait(
        "document.querySelectorAll('.turn:not(.live) .text').length === 1",
        "the answer after reload",
    )
    .await;
    page.idle().await;
    let rendered = page.answers().await;
    assert_eq!(rendered.len(), 1);
    assert_eq!(rendered[0], story.replace("**", "").trim_end());
    assert_eq!(page.users().await, ["a story"]);
    assert_eq!(
        page.js("return document.querySelectorAll('.turn.live').length")
            .await,
        json!(0)
    );

    // The server out of reach: said in words, with a countdown, and the
    // page comes back by itself (the page's fetch made to fail, then mended;
    // a new stream starts as after a cut connection).
    page.js("window.realFetch = window.fetch; window.fetch = () => Promise.reject(new TypeError('Failed to fetch')); generation++; stream(generation); return null").await;
    page.wait(
        "/^The server cannot be reached\\. Reconnecting in \\d+ s…$/.test(document.getElementById('banner').textContent) && /^reconnecting in \\d+ s…$/.test(document.getElementById('conn').textContent)",
        "the words and the countdown",
    )
    .await;
    page.shot("server-unreachable").await;
    page.js("window.fetch = window.realFetch; return null")
        .await;
    page.wait(
        "document.getElementById('conn').textContent === 'live' && document.getElementById('banner').classList.contains('hidden')",
        "back",
    )
    .await;
    page.client.close().await.unwrap();
}

/// A picture as bytes, and as a file to attach.
fn picture_file(dir: &std::path::Path) -> (Vec<u8>, std::path::PathBuf) {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(PICTURE)
        .unwrap();
    let path = dir.join("picture.png");
    std::fs::write(&path, &bytes).unwrap();
    (bytes, path)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn images_attached_and_pasted_reach_the_model_in_a_real_browser() {
    let Some((chromium, driver)) = browser() else {
        return;
    };
    let (app, model) = app_on(vec![text("I see four colours."), text("The same picture.")]).await;
    let link = app
        .server
        .open_chat(lrg_chat::http::ChatSpec::new())
        .await
        .unwrap();
    let (_driver, profile, mut page) = launch(&chromium, &driver).await;
    page.open(&app.base, &link.page_url).await;
    let (bytes, path) = picture_file(profile.path());

    // Through the file input the Attach button opens.
    page.client
        .find(Locator::Css("#file"))
        .await
        .unwrap()
        .send_keys(path.to_str().unwrap())
        .await
        .unwrap();
    page.wait(
        "document.querySelector('#attachments .thumb img')",
        "the thumbnail",
    )
    .await;
    page.type_in("what is this?").await;
    page.shot("attached").await;
    page.type_in(ENTER).await;
    page.wait(
        "document.querySelector('.user.msg .thumbs img')",
        "the image in the bubble",
    )
    .await;
    page.wait(
        "document.querySelectorAll('.turn:not(.live) .text').length === 1",
        "the answer",
    )
    .await;
    page.idle().await;
    assert_eq!(
        page.js("return document.querySelectorAll('#attachments .thumb').length")
            .await,
        json!(0)
    );
    let (said, images) = last_user(&model, 0);
    assert_eq!(said, "what is this?");
    assert_eq!(images, [("image/png".to_string(), bytes.clone())]);
    page.shot("image-sent").await;

    // Pasted; one removed again before sending.
    let paste = format!(
        "const b = atob('{PICTURE}'); const u = new Uint8Array(b.length); for (let i = 0; i < b.length; i++) u[i] = b.charCodeAt(i);
         for (const name of ['one.png', 'two.png']) {{
           const dt = new DataTransfer(); dt.items.add(new File([u], name, {{ type: 'image/png' }}));
           document.getElementById('input').dispatchEvent(new ClipboardEvent('paste', {{ clipboardData: dt, bubbles: true, cancelable: true }}));
         }} return null"
    );
    page.js(&paste).await;
    page.wait(
        "document.querySelectorAll('#attachments .thumb').length === 2",
        "two pasted",
    )
    .await;
    page.click("#attachments .thumb .remove").await;
    page.wait(
        "document.querySelectorAll('#attachments .thumb').length === 1",
        "one left",
    )
    .await;
    page.type_in(&format!("and this?{ENTER}")).await;
    page.wait(
        "document.querySelectorAll('.turn:not(.live) .text').length === 2",
        "the second answer",
    )
    .await;
    page.idle().await;
    let (_, images) = last_user(&model, 1);
    assert_eq!(images, [("image/png".to_string(), bytes)]);

    // Over the server's limit: said, and not sent.
    page.js("menuData.limits = { body_bytes: 100 }; return null")
        .await;
    page.js(&paste).await;
    page.wait(
        "document.querySelector('#attachments .said.error')",
        "the limit said",
    )
    .await;
    let said = page
        .js("return document.querySelector('#attachments .said').textContent")
        .await;
    assert!(said.as_str().unwrap().contains("too large"), "{said}");
    page.type_in(&format!("too big{ENTER}")).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(page.users().await.len(), 2, "not sent");
    page.shot("image-too-large").await;
    // A model known not to see images is said before sending.
    page.js("menuData.limits = null; current.vision = false; drawAttachments(); return null")
        .await;
    let said = page
        .js("return document.querySelector('#attachments .said').textContent")
        .await;
    assert!(
        said.as_str().unwrap().contains("does not see images"),
        "{said}"
    );
    page.js("clearAttachments(true); document.getElementById('input').value = ''; return null")
        .await;

    // A text file dropped in becomes a quoted block of the message.
    page.js("const dt = new DataTransfer(); dt.items.add(new File(['line one\\nline ```two```\\n'], 'notes.txt', { type: 'text/plain' }));
             document.querySelector('footer').dispatchEvent(new DragEvent('drop', { dataTransfer: dt, bubbles: true, cancelable: true })); return null").await;
    page.wait(
        "document.getElementById('input').value.includes('notes.txt')",
        "the quoted file",
    )
    .await;
    assert_eq!(
        page.js("return document.getElementById('input').value")
            .await,
        json!("notes.txt:\n````\nline one\nline ```two```\n````\n")
    );
    page.client.close().await.unwrap();
}

/// The small bugs of issue 28 §6, each as a person met it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bugs_a_person_hit_stay_fixed_in_a_real_browser() {
    let Some((chromium, driver)) = browser() else {
        return;
    };
    let (app, _model) = app_on(vec![
        call("delete_photos", json!({"ids": [7, 9]})),
        text("Fine, I left them."),
        text("Noted."),
        slow(
            "Summary: the person asked about photos; nothing was deleted.",
            150,
        ),
        slow(&"Streaming on and on. ".repeat(40), 100),
    ])
    .await;
    let link = app
        .server
        .open_chat(lrg_chat::http::ChatSpec::new())
        .await
        .unwrap();
    let (_driver, _profile, mut page) = launch(&chromium, &driver).await;
    page.open(&app.base, &link.page_url).await;
    let disabled = "['retry', 'compact', 'clear'].map(id => document.getElementById(id).disabled)";

    // An empty chat: nothing to retry, compact or clear; it says so in words.
    page.wait(
        "document.getElementById('model-button').textContent.includes('script:first')",
        "the model",
    )
    .await;
    assert_eq!(
        page.js(&format!("return {disabled}")).await,
        json!([true, true, true])
    );
    assert_eq!(
        page.js("return getComputedStyle(document.getElementById('empty')).display !== 'none'")
            .await,
        json!(true)
    );
    page.shot("empty-chat").await;

    // The served page says "1 item", never "item(s)".
    lrg_providers::transport::ensure_tls_provider();
    let html = reqwest::get(format!("{}/v1/ui/chat", app.base))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(!html.contains("item(s)") && !html.contains("image(s)"));
    assert_eq!(
        page.js("return [plural(1, 'model turn'), plural(2, 'model turn')]")
            .await,
        json!(["1 model turn", "2 model turns"])
    );

    // The model menu: available first, the others folded; an outside click closes it.
    page.click("#model-button").await;
    page.wait(
        "document.querySelector('#model-menu button[data-model]')",
        "the menu",
    )
    .await;
    assert_eq!(
        page.js("const m = document.getElementById('model-menu'); return [[...m.querySelectorAll(':scope > button')].map(b => b.dataset.model), m.querySelector('details.unavailable summary').textContent, m.querySelector('details.unavailable').open, !!m.querySelector('details.unavailable button[data-model=\"anthropic:claude-sonnet-4-5\"]:disabled')]").await,
        json!([["script:first", "script:second"], "Not available (1)", false, true])
    );
    page.shot("model-menu-available-first").await;
    page.click("#empty").await;
    page.wait(
        "document.getElementById('model-menu').classList.contains('hidden')",
        "the menu closed by a click outside",
    )
    .await;

    // A destructive approval shows what it is aimed at; focus moves to it;
    // Enter in the note field denies; the note shows once, also after a reload.
    page.type_in(&format!("delete 7 and 9{ENTER}")).await;
    page.wait(
        "document.querySelector('.card .approval .approve-once')",
        "the approval",
    )
    .await;
    page.wait(
        "document.activeElement && document.activeElement.classList.contains('approve-once')",
        "focus on the approval",
    )
    .await;
    assert_eq!(
        page.js("const c = document.querySelector('.card'); return [[...c.querySelectorAll('.targets li')].map(l => l.textContent), c.querySelector('.args').textContent]").await,
        json!([["7", "9"], "ids: [7, 9]"])
    );
    page.shot("approval-targets").await;
    let note = page
        .client
        .find(Locator::Css(".card .approval .deny-note"))
        .await
        .unwrap();
    note.send_keys(&format!("not those two{ENTER}"))
        .await
        .unwrap();
    page.wait("document.querySelector('.card.skipped')", "denied by Enter")
        .await;
    page.wait(
        "document.querySelectorAll('.turn:not(.live) .text').length === 1",
        "the answer",
    )
    .await;
    page.idle().await;
    let notes = "[...document.querySelectorAll('.card .note')].map(n => n.textContent)";
    assert_eq!(
        page.js(&format!("return {notes}")).await,
        json!(["Your note: not those two"])
    );
    page.client.refresh().await.unwrap();
    page.wait("document.querySelector('.card.skipped') && document.querySelectorAll('.turn:not(.live) .text').length === 1", "after reload").await;
    assert_eq!(
        page.js(&format!("return {notes}")).await,
        json!(["Your note: not those two"]),
        "once after a reload too"
    );
    page.idle().await;
    assert_eq!(
        page.js(&format!("return {disabled}")).await,
        json!([false, false, false])
    );

    // Retry warnings fold once the turn ends (events as the stream brings them).
    page.js("apply({type: 'busy', busy: true}); apply({type: 'warning', retrying: true, message: 'The server is busy; trying again in 1 s.'}); apply({type: 'warning', retrying: true, message: 'The server is busy; trying again in 2 s.'}); apply({type: 'busy', busy: false}); return null").await;
    assert_eq!(
        page.js("const d = document.querySelector('details.retries'); return [d.querySelector('summary').textContent, d.open, d.querySelectorAll('.notice.warning').length, [...document.querySelectorAll('#log > .notice.warning')].length]").await,
        json!(["Retried 2 times", false, 2, 0])
    );
    page.shot("retries-folded").await;

    // The context meter resets after Clear, which asks first.
    page.js("apply({type: 'usage', prompt_tokens: 100, completion_tokens: 50, context_window: 1000}); return null").await;
    let meter = "document.querySelector('#context .label').textContent";
    assert_eq!(
        page.js(&format!("return {meter}")).await,
        json!("context 15% of 1,000")
    );
    page.click("#clear").await;
    page.wait(
        "!document.getElementById('modal').classList.contains('hidden')",
        "the question",
    )
    .await;
    assert_eq!(
        page.js("return document.getElementById('modal-confirm').textContent")
            .await,
        json!("Clear")
    );
    page.shot("clear-asks").await;
    page.click("#modal-cancel").await;
    assert_eq!(page.users().await.len(), 1, "cancel keeps the conversation");
    page.click("#clear").await;
    page.click("#modal-confirm").await;
    page.wait("[...document.querySelectorAll('.notice')].some(n => n.textContent === 'The conversation was cleared.')", "cleared").await;
    assert_eq!(
        page.js(&format!("return {meter}")).await,
        json!("context –")
    );
    assert_eq!(
        page.js(&format!("return {disabled}")).await,
        json!([true, true, true])
    );

    // Compact shows its progress.
    page.type_in(&format!("remember: no deleting{ENTER}")).await;
    page.wait(
        "document.querySelectorAll('.turn:not(.live) .text').length === 1",
        "the answer",
    )
    .await;
    page.idle().await;
    page.click("#compact").await;
    page.wait("document.querySelector('.notice.progress')", "the progress")
        .await;
    page.shot("compacting").await;
    page.wait(
        "document.querySelector('.turn.summary') && !document.querySelector('.notice.progress')",
        "the summary",
    )
    .await;
    page.idle().await;

    // Esc stops a turn; "/" comes back to the input.
    page.type_in(&format!("go on{ENTER}")).await;
    page.wait("document.querySelector('.turn.live .text') && document.querySelector('.turn.live .text').textContent.length > 10", "streaming").await;
    page.type_in("\u{E00C}").await;
    page.wait("document.querySelector('.turn.stopped') || [...document.querySelectorAll('.notice')].some(n => n.textContent === 'Stopped.')", "stopped by Esc").await;
    page.idle().await;
    page.js("document.getElementById('input').blur(); return null")
        .await;
    page.client
        .find(Locator::Css("body"))
        .await
        .unwrap()
        .send_keys("/")
        .await
        .unwrap();
    assert_eq!(
        page.js("return [document.activeElement.id, document.getElementById('input').value]")
            .await,
        json!(["input", ""])
    );

    // An ended chat's page says so; without the owner's token it cannot offer more.
    page.client
        .goto(&format!("{}/v1/ui/chat#session=nope&token=nope", app.base))
        .await
        .unwrap();
    page.wait("document.querySelector('.notice.ended')", "the ended page")
        .await;
    assert_eq!(
        page.js("return document.querySelectorAll('.ended-actions button').length")
            .await,
        json!(0)
    );
    page.client.close().await.unwrap();
}
