//! The chat page in a real browser (headless Chromium driven over
//! WebDriver): open it with the token in the fragment, send a message to a
//! ScriptedModel, see the text stream in, approve a destructive call and see
//! its card finish with its image, reload and see the same conversation,
//! stop a turn midway, switch models after the question. Screenshots go to
//! `target/browser-screens/`.
//!
//! Needs `chromium` and `chromedriver` (Debian: `chromium`,
//! `chromium-driver`); skips loudly without them, and fails under `CI`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::browser_support;
use crate::http_support;

use std::sync::Arc;

use browser_support::*;
use futures::future::BoxFuture;
use http_support::*;
use lrg_chat::ChatSession;
use lrg_chat::events::Event;
use lrg_chat::http::{
    ChatOpener, ChatServer, ChatSpec, HttpConfig, MenuEntry, OpenError, OpenedChat, StandardOpener,
    StaticMenu,
};
use lrg_chat::session::{SessionConfig, SwitchableModel};
use lrg_providers::{ChatModel, ModelLocation, ProviderError, ScriptedModel, ScriptedTurn};
use serde_json::{Value, json};
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_whole_chat_in_a_real_browser() {
    let Some((chromium, driver)) = browser() else {
        return;
    };
    let first = Arc::new(ScriptedModel::named(
        "first",
        vec![
            ScriptedTurn {
                reasoning: Some("The user greets me; I answer briefly.".into()),
                ..slow(
                    "Hello! I can tidy your photos: tell me which ones to delete.",
                    120,
                )
            },
            // Slow enough that the call's streamed card can be seen.
            ScriptedTurn {
                delay_ms: Some(1_000),
                ..call("delete_photos", json!({"ids": [3, 4]}))
            },
            text("Deleted photos 3 and 4; the picture shows what is left."),
            slow(
                &"Once upon a time there was a very long story. ".repeat(40),
                150,
            ),
        ],
    ));
    let second = scripted(
        "second",
        vec![text("I am the second model, at your service.")],
    );
    let models = models(vec![("script:first", first), ("script:second", second)]);

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let menu = StaticMenu(vec![
        MenuEntry::available("script", "first", ModelLocation::Local),
        MenuEntry::available("script", "second", ModelLocation::Local),
        MenuEntry::available("ollama", "qwen3:8b", ModelLocation::Server)
            .with_sends_to("localhost:11434"),
        MenuEntry::available("openai", "gpt-4.1", ModelLocation::Cloud)
            .with_sends_to("api.openai.com"),
        MenuEntry::unavailable(
            "anthropic",
            "claude-sonnet-4-5",
            ModelLocation::Cloud,
            "no key: set ANTHROPIC_API_KEY",
        ),
    ]);
    let config = HttpConfig::new(AGENT)
        .allow_origin(base.clone())
        .defaults(ChatSpec::new().model("script:first"));
    let server = ChatServer::new(config, Arc::new(Opener { models }), Arc::new(menu));
    let app = server.router();
    tokio::spawn(async move { axum::serve(listener, app).await });
    let link = server.open_chat(ChatSpec::new()).await.unwrap();

    let (_driver, _profile, mut page) = launch(&chromium, &driver).await;

    // 1. Open the page with the token in the fragment.
    page.client
        .goto(&format!("{base}{}", link.page_url))
        .await
        .unwrap();
    page.wait(
        "document.getElementById('conn').textContent === 'live'",
        "the stream",
    )
    .await;
    page.wait(
        "document.getElementById('model-button').textContent.includes('script:first')",
        "the model",
    )
    .await;
    assert!(page.log_text().await.trim().is_empty());

    // Shift+Enter is a new line, not a send.
    page.type_in(&format!("first line{SHIFT}{ENTER}{RELEASE}second line"))
        .await;
    assert_eq!(
        page.js("return document.getElementById('input').value")
            .await,
        json!("first line\nsecond line")
    );
    page.js("document.getElementById('input').value = ''; return null")
        .await;

    // 2-3. Send a message; the text streams in.
    page.type_in(&format!("hello{ENTER}")).await;
    page.wait("document.querySelector('.user') && document.querySelector('.user').textContent === 'hello'", "the user message").await;
    page.wait(
        "document.querySelector('.turn.live .text') && document.querySelector('.turn.live .text').textContent.length > 0",
        "streamed text",
    )
    .await;
    let partial = page
        .js("return document.querySelector('.turn.live .text').textContent")
        .await;
    page.shot("streaming").await;
    page.wait(
        "document.querySelector('.turn:not(.live) .text')",
        "the finished turn",
    )
    .await;
    let full = page
        .js("return document.querySelector('.turn:not(.live) .text').textContent")
        .await;
    let (partial, full) = (partial.as_str().unwrap(), full.as_str().unwrap());
    assert!(
        full.starts_with(partial) && partial.len() < full.len(),
        "{partial:?} then {full:?}"
    );
    assert_eq!(
        page.js("return document.querySelector('details.thinking summary').textContent")
            .await,
        json!("Thinking")
    );
    page.wait("!document.getElementById('send').disabled", "idle")
        .await;

    // 4. The call shows while the model writes it (a live card from its
    // tool_call_delta), then it waits; approve it; its card finishes with the image.
    page.type_in(&format!("delete the blurry ones{ENTER}"))
        .await;
    page.wait(
        "document.querySelector('.turn.live .card.streaming .args') && document.querySelector('.turn.live .card.streaming .args').textContent.includes('\"ids\"')",
        "the call's streamed card",
    )
    .await;
    assert_eq!(
        page.js("return document.querySelector('.card.streaming .title').textContent")
            .await,
        json!("delete_photos")
    );
    page.shot("streaming-call").await;
    page.wait(
        "document.querySelector('.card .approval .approve-once')",
        "the approval box",
    )
    .await;
    assert_eq!(
        page.js("return document.querySelector('.card .badge').textContent")
            .await,
        json!("destructive")
    );
    assert_eq!(
        page.js("return document.querySelector('.card .title').textContent")
            .await,
        json!("Delete photos")
    );
    assert!(
        page.js("return !!document.querySelector('.approval .approve-always')")
            .await
            == json!(true)
    );
    page.shot("waiting-approval").await;
    page.click(".approval .approve-once").await;
    page.wait("document.querySelector('.card.done')", "the finished card")
        .await;
    page.wait("document.querySelector('.card.done img') && document.querySelector('.card.done img').naturalWidth === 48", "the image").await;
    page.wait(
        "document.querySelectorAll('.turn:not(.live) .text').length === 2",
        "the answer after the tool",
    )
    .await;
    page.js("document.querySelector('.card.done details.result').open = true; return null")
        .await;
    page.shot("tool-card-with-image").await;
    let before = page.log_text().await;
    assert!(before.contains("deleted 2 photos"), "{before}");

    // 5. Reload: the same conversation, rebuilt from the events.
    page.client.refresh().await.unwrap();
    page.wait("document.querySelector('.card.done img') && document.querySelector('.card.done img').naturalWidth === 48", "the image after reload").await;
    page.wait(
        "document.querySelectorAll('.turn:not(.live) .text').length === 2",
        "the turns after reload",
    )
    .await;
    page.js("document.querySelector('.card.done details.result').open = true; return null")
        .await;
    assert_eq!(
        page.log_text().await,
        before,
        "a reload shows the same conversation"
    );
    page.shot("after-reload").await;

    // 6. Stop a turn midway.
    page.type_in(&format!("tell me a long story{ENTER}")).await;
    page.wait(
        "document.querySelector('.turn.live .text') && document.querySelector('.turn.live .text').textContent.length > 20",
        "the story streaming",
    )
    .await;
    page.click("#stop").await;
    // What was shown stays, marked as stopped (or, when nothing was kept,
    // the line "Stopped.").
    page.wait(
        "document.querySelector('.turn.stopped .stopped-mark') || [...document.querySelectorAll('.notice')].some(n => n.textContent === 'Stopped.')",
        "stopped",
    )
    .await;
    let kept = page
        .js("const t = document.querySelector('.turn.stopped .text'); return t ? t.textContent : null")
        .await;
    if let Some(kept) = kept.as_str() {
        assert!(
            kept.len() > 20
                && "Once upon a time there was a very long story. "
                    .repeat(40)
                    .starts_with(kept),
            "the partial answer is kept: {kept:?}"
        );
        assert_eq!(
            page.js("return [...document.querySelectorAll('.notice')].filter(n => n.textContent === 'Stopped.').length").await,
            json!(0),
            "marked once, on the turn"
        );
    }
    page.wait(
        "document.getElementById('stop').disabled && !document.getElementById('send').disabled",
        "idle after stop",
    )
    .await;
    assert!(!page.log_text().await.contains("very long story. Once upon a time there was a very long story. Once upon a time there was a very long story. Once upon a time there was a very long story. Once upon a time there was a very long story. Once upon a time there was a very long story. Once upon a time there was a very long story. Once upon a time there was a very long story. Once upon a time there was a very long story. Once upon a time there was a very long story. Once upon a time"));
    page.shot("stopped").await;

    // The permissions panel.
    page.click("#perm-button").await;
    page.wait(
        "document.querySelector('#perm-panel select[data-tool=delete_photos]')",
        "the permissions panel",
    )
    .await;
    page.shot("permissions").await;
    page.click("#perm-button").await;

    // 7. Switch models: the menu, the question, then a new chat beside
    // this one; the question typed so far stays in the input.
    page.js("document.getElementById('input').value = 'a question typed'; return null")
        .await;
    page.click("#model-button").await;
    page.wait(
        "document.querySelector('#model-menu button[data-model=\"script:second\"]')",
        "the model menu",
    )
    .await;
    assert_eq!(
        page.js("return document.querySelector('#model-menu button[data-model=\"anthropic:claude-sonnet-4-5\"]').disabled").await,
        json!(true)
    );
    page.shot("model-menu").await;
    page.click("#model-menu button[data-model=\"script:second\"]")
        .await;
    page.wait(
        "!document.getElementById('modal').classList.contains('hidden')",
        "the question",
    )
    .await;
    assert_eq!(
        page.js("return document.getElementById('modal-confirm').textContent")
            .await,
        json!("New chat")
    );
    assert_eq!(
        page.js("return document.getElementById('modal-alt').textContent")
            .await,
        json!("Carry this conversation over to script:second")
    );
    page.shot("switch-question").await;
    page.click("#modal-confirm").await;
    page.wait(
        "document.getElementById('model-button').textContent.includes('script:second')",
        "the new model",
    )
    .await;
    page.wait(
        "document.getElementById('conn').textContent === 'live'",
        "the new stream",
    )
    .await;
    assert!(
        page.log_text().await.trim().is_empty(),
        "a new chat starts empty"
    );
    assert_eq!(
        page.js("return document.getElementById('input').value")
            .await,
        json!("a question typed")
    );
    // The old chat is kept and listed, a link back to it.
    assert_eq!(
        page.js("return [...document.querySelectorAll('#chats a')].map(a => a.textContent)")
            .await,
        json!(["Chat 1 (script:first)"])
    );
    assert!(
        page.js("return document.querySelector('#chats a').getAttribute('href')")
            .await
            .as_str()
            .unwrap()
            .contains(&link.session)
    );
    page.js("document.getElementById('input').value = ''; return null")
        .await;
    page.type_in(&format!("who are you?{ENTER}")).await;
    page.wait(
        "document.querySelector('.turn:not(.live) .text')",
        "the second model's answer",
    )
    .await;
    assert_eq!(
        page.js("return document.querySelector('.turn:not(.live) .text').textContent")
            .await,
        json!("I am the second model, at your service.")
    );
    let fragment = page.js("return location.hash").await;
    assert!(
        !fragment.as_str().unwrap().contains(&link.session),
        "the page moved to the new chat"
    );
    page.shot("second-model").await;

    // 8. Where the conversation goes, as the session tells it, shows above
    // the conversation; what the model does on its own is marked.
    let id = fragment
        .as_str()
        .unwrap()
        .split(['#', '&'])
        .find_map(|p| p.strip_prefix("session="))
        .unwrap()
        .to_string();
    server
        .session(&id)
        .expect("the new chat")
        .events()
        .publish(Event::SendsTo {
            provider: "ollama".into(),
            host: Some("localhost:11434".into()),
        });
    page.wait(
        "document.getElementById('sends-to').textContent === 'This conversation is sent to localhost:11434 (ollama).'",
        "where the conversation goes",
    )
    .await;
    // `busy.autonomous` is applied as the stream would deliver it.
    page.js("apply({type: 'busy', busy: true, autonomous: true}); apply({type: 'assistant_turn', text: 'Working on my own.', reasoning: ''}); apply({type: 'busy', busy: false}); return null").await;
    assert_eq!(
        page.js("return [...document.querySelectorAll('.turn.autonomous .text')].map(t => t.textContent)").await,
        json!(["Working on my own."])
    );
    assert_eq!(
        page.js("return document.querySelectorAll('.autonomous').length")
            .await,
        json!(1),
        "only what came while it worked on its own"
    );
    page.shot("sends-to-and-autonomous").await;

    // 9. The third choice: carry this conversation over, in place, with a
    // divider where the model changed.
    page.click("#model-button").await;
    page.wait(
        "document.querySelector('#model-menu button[data-model=\"script:first\"]')",
        "the model menu",
    )
    .await;
    page.click("#model-menu button[data-model=\"script:first\"]")
        .await;
    page.wait(
        "!document.getElementById('modal').classList.contains('hidden')",
        "the question",
    )
    .await;
    page.click("#modal-alt").await;
    page.wait(
        "[...document.querySelectorAll('.notice.divider')].some(n => n.textContent === 'Switched from script:second to script:first')",
        "the switch, drawn",
    )
    .await;
    page.wait(
        "document.getElementById('model-button').textContent.includes('script:first')",
        "the model, carried over",
    )
    .await;
    assert_eq!(
        page.js("return location.hash").await,
        fragment,
        "the same chat"
    );
    assert!(
        page.log_text()
            .await
            .contains("I am the second model, at your service."),
        "the conversation is kept"
    );
    page.shot("carried-over").await;

    // A narrow window stays usable.
    page.client.set_window_size(420, 820).await.unwrap();
    page.shot("narrow").await;
    assert_eq!(
        server.chat_count(),
        2,
        "the first chat is kept beside the second"
    );

    page.client.close().await.unwrap();
}

/// A chat longer than its event log keeps: the page loads after the log
/// forgot the chat's first events, is told to `resync`, rebuilds the whole
/// conversation from the transcript, follows the live events from there
/// (a message sent from the page is answered), and does it all again on a
/// reload.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chat_longer_than_its_event_log_is_shown_whole_in_a_real_browser() {
    let Some((chromium, driver)) = browser() else {
        return;
    };
    let answer = |i: usize| format!("Answer {i}: scripted reply number {i}.");
    let model = scripted(
        "first",
        (1..=8).map(|i| slow(&answer(i), 20)).collect::<Vec<_>>(),
    );
    let found = models(vec![("script:first", model)]);

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let opener = StandardOpener::new(move |id: &str| {
        let found = found.lock().unwrap().get(id).cloned();
        let id = id.to_string();
        Box::pin(async move {
            found.ok_or(ProviderError::Config {
                message: format!("unknown model {id}"),
            })
        })
    })
    .session_config(SessionConfig {
        max_kept_events: 8,
        ..SessionConfig::default()
    });
    let menu = StaticMenu(vec![MenuEntry::available(
        "script",
        "first",
        ModelLocation::Local,
    )]);
    let config = HttpConfig::new(AGENT)
        .allow_origin(base.clone())
        .defaults(ChatSpec::new().model("script:first"));
    let server = ChatServer::new(config, Arc::new(opener), Arc::new(menu));
    let app = server.router();
    tokio::spawn(async move { axum::serve(listener, app).await });
    let link = server.open_chat(ChatSpec::new()).await.unwrap();

    // Six messages before the page loads; the log forgets the first events.
    let session = server.session(&link.session).expect("the chat");
    for i in 1..=6 {
        let outcome = tokio::time::timeout(WAIT, session.send(format!("message {i}")).unwrap())
            .await
            .expect("the answer comes in time");
        assert!(
            matches!(outcome, lrg_chat::TurnOutcome::Completed { .. }),
            "message {i}: {outcome:?}"
        );
    }
    let log = session.events();
    assert_eq!(log.entries().len(), 8, "the log keeps its bound");
    assert!(
        log.first_kept_seq() > 1,
        "the log forgot its first events (first kept: {})",
        log.first_kept_seq()
    );
    println!(
        "the log keeps events {}..={}",
        log.first_kept_seq(),
        log.last_seq()
    );

    let (_driver, _profile, mut page) = launch(&chromium, &driver).await;
    let users = "[...document.querySelectorAll('#log .user')].map(u => u.textContent)";
    let answers =
        "[...document.querySelectorAll('#log .turn:not(.live) .text')].map(t => t.textContent)";
    let expect = |n: usize| {
        (
            json!((1..=n).map(|i| format!("message {i}")).collect::<Vec<_>>()),
            json!((1..=n).map(answer).collect::<Vec<_>>()),
        )
    };
    let whole = |n: usize| {
        format!(
            "document.querySelectorAll('#log .user').length === {n} && \
             document.querySelectorAll('#log .turn:not(.live) .text').length === {n}"
        )
    };

    // 1. Load the page: resync, the transcript, the whole conversation.
    page.client
        .goto(&format!("{base}{}", link.page_url))
        .await
        .unwrap();
    page.wait(
        "document.getElementById('conn').textContent === 'live'",
        "the stream",
    )
    .await;
    page.wait(&whole(6), "the whole conversation").await;
    let (want_users, want_answers) = expect(6);
    assert_eq!(page.js(&format!("return {users}")).await, want_users);
    assert_eq!(page.js(&format!("return {answers}")).await, want_answers);
    assert_eq!(
        page.js("return [lastSeq, transcriptSeq]").await,
        json!([log.last_seq(), log.last_seq()]),
        "the page was rebuilt from the transcript and follows from its last event"
    );
    assert_eq!(
        page.js("return document.querySelectorAll('#log .notice.error').length")
            .await,
        json!(0)
    );
    assert!(
        !page.log_text().await.contains("Older messages"),
        "the transcript is whole"
    );
    page.shot("resync-rebuilt").await;

    // 2. Send one more from the page: its answer comes over the live events.
    page.wait("!document.getElementById('send').disabled", "idle")
        .await;
    page.type_in(&format!("message 7{ENTER}")).await;
    page.wait(&whole(7), "the seventh answer").await;
    let (want_users, want_answers) = expect(7);
    assert_eq!(page.js(&format!("return {users}")).await, want_users);
    assert_eq!(page.js(&format!("return {answers}")).await, want_answers);
    page.wait("!document.getElementById('send').disabled", "idle again")
        .await;
    assert_eq!(page.js("return lastSeq").await, json!(log.last_seq()));
    let before = page.log_text().await;
    page.shot("resync-live-after").await;

    // 3. Reload: the log still forgot the start; rebuilt again, whole.
    assert!(log.first_kept_seq() > 1);
    page.client.refresh().await.unwrap();
    page.wait(
        "document.getElementById('conn').textContent === 'live'",
        "the stream after reload",
    )
    .await;
    page.wait(&whole(7), "the whole conversation after reload")
        .await;
    assert_eq!(page.js(&format!("return {users}")).await, want_users);
    assert_eq!(page.js(&format!("return {answers}")).await, want_answers);
    assert_eq!(
        page.log_text().await,
        before,
        "a reload shows the same conversation"
    );
    let rebuilt_at = log.last_seq();
    assert_eq!(
        page.js("return [lastSeq, transcriptSeq]").await,
        json!([rebuilt_at, rebuilt_at]),
        "rebuilt from the transcript again"
    );
    page.shot("resync-after-reload").await;

    // 4. Edit the last message of the rebuilt view: the edit replaces it,
    // once (the rewind reaches back past what the transcript drew).
    page.wait("!document.getElementById('send').disabled", "idle")
        .await;
    page.js("document.querySelector('.user.last .act.edit').click(); return null")
        .await;
    let area = page
        .client
        .find(fantoccini::Locator::Css(".user.editing .editor textarea"))
        .await
        .unwrap();
    area.clear().await.unwrap();
    area.send_keys(&format!("message 7, edited{ENTER}"))
        .await
        .unwrap();
    page.wait(
        &format!("[...document.querySelectorAll('#log .turn:not(.live) .text')].pop().textContent === {:?}", answer(8)),
        "the answer to the edit",
    )
    .await;
    let mut want: Vec<String> = (1..=6).map(|i| format!("message {i}")).collect();
    want.push("message 7, edited".into());
    assert_eq!(page.js(&format!("return {users}")).await, json!(want));
    let mut want: Vec<String> = (1..=6).map(answer).collect();
    want.push(answer(8));
    assert_eq!(page.js(&format!("return {answers}")).await, json!(want));

    page.client.close().await.unwrap();
}

/// A typed answer (`output_schema` on the message, sent by the app over
/// HTTP): its text streams in as any answer's does, then the page shows the
/// validated JSON indented in a block with a Copy button that copies it
/// compact — through the clipboard API, or, without one, selected in a box.
/// A reload shows it again; a plain answer after it is prose.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_typed_answer_is_shown_as_json_with_a_copy_button_in_a_real_browser() {
    let Some((chromium, driver)) = browser() else {
        return;
    };
    let answer =
        r#"{"label":"bug","priority":2,"steps":["open the app","tap Save"],"duplicate_of":null}"#;
    let found = models(vec![(
        "script:first",
        scripted(
            "first",
            vec![slow(answer, 150), text("It is a bug, priority 2.")],
        ),
    )]);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let opener = StandardOpener::new(move |id: &str| {
        let found = found.lock().unwrap().get(id).cloned();
        let id = id.to_string();
        Box::pin(async move {
            found.ok_or(ProviderError::Config {
                message: format!("unknown model {id}"),
            })
        })
    });
    let menu = StaticMenu(vec![MenuEntry::available(
        "script",
        "first",
        ModelLocation::Local,
    )]);
    let config = HttpConfig::new(AGENT)
        .allow_origin(base.clone())
        .defaults(ChatSpec::new().model("script:first"));
    let server = ChatServer::new(config, Arc::new(opener), Arc::new(menu));
    let app = server.router();
    tokio::spawn(async move { axum::serve(listener, app).await });
    let link = server.open_chat(ChatSpec::new()).await.unwrap();

    let (_driver, _profile, mut page) = launch(&chromium, &driver).await;
    page.client
        .goto(&format!("{base}{}", link.page_url))
        .await
        .unwrap();
    page.wait(
        "document.getElementById('conn').textContent === 'live'",
        "the stream",
    )
    .await;

    // The app sends the typed message; the page only shows it.
    lrg_providers::transport::ensure_tls_provider();
    let schema = json!({
        "type": "object",
        "properties": {
            "label": {"enum": ["bug", "feature"]},
            "priority": {"type": "integer", "minimum": 1, "maximum": 5},
            "steps": {"type": "array", "items": {"type": "string"}},
            "duplicate_of": {"type": ["integer", "null"]}
        },
        "required": ["label", "priority", "steps"]
    });
    let sent = reqwest::Client::new()
        .post(format!("{base}/v1/chat/sessions/{}/messages", link.session))
        .bearer_auth(&link.chat_token)
        .json(&json!({"text": "Triage: Save crashes the app", "output_schema": schema}))
        .send()
        .await
        .unwrap();
    assert_eq!(sent.status(), 202);

    // The text streams in as it is written, then becomes the JSON block.
    page.wait(
        "document.querySelector('.turn.live .text') && document.querySelector('.turn.live .text').textContent.length > 0",
        "the streamed answer",
    )
    .await;
    page.wait(
        "document.querySelector('.turn .json-answer')",
        "the JSON block",
    )
    .await;
    let value: Value = serde_json::from_str(answer).unwrap();
    let pretty = serde_json::to_string_pretty(&value).unwrap();
    assert_eq!(
        page.js("return document.querySelector('.json-answer pre.json').textContent")
            .await,
        json!(pretty)
    );
    assert_eq!(
        page.js(
            "return getComputedStyle(document.querySelector('.json-answer pre.json')).whiteSpace"
        )
        .await,
        json!("pre"),
        "indentation kept"
    );
    let font = page
        .js("return getComputedStyle(document.querySelector('.json-answer pre.json')).fontFamily")
        .await;
    assert!(font.as_str().unwrap().contains("monospace"), "{font}");
    assert_eq!(
        page.js("return document.querySelector('.json-answer button.copy').textContent")
            .await,
        json!("Copy")
    );
    assert_eq!(
        page.js("return document.querySelectorAll('.turn:not(.live) .text').length")
            .await,
        json!(0),
        "the typed answer is not also shown as prose"
    );
    page.wait("!document.getElementById('send').disabled", "idle")
        .await;
    let shot = page.shot("typed-answer").await;
    let _ = std::fs::copy(&shot, std::env::temp_dir().join("lrg-typed-answer.png"));

    // Copy, through the clipboard API: the compact JSON.
    page.js("window.copied = null; navigator.clipboard.writeText = (t) => { window.copied = t; return Promise.resolve(); }; return null").await;
    page.click(".json-answer button.copy").await;
    page.wait("window.copied !== null", "the copy").await;
    assert_eq!(page.js("return window.copied").await, json!(answer));
    page.wait(
        "document.querySelector('.json-answer button.copy').textContent === 'Copied'",
        "the copy said",
    )
    .await;

    // Without a clipboard API: the compact JSON, selected in a box.
    page.js("Object.defineProperty(navigator, 'clipboard', { value: undefined, configurable: true }); return null").await;
    page.click(".json-answer button.copy").await;
    page.wait(
        "document.querySelector('.json-answer .copy-text')",
        "the selected JSON",
    )
    .await;
    assert_eq!(
        page.js("const a = document.querySelector('.json-answer .copy-text'); return [a.value, document.activeElement === a, a.selectionStart, a.selectionEnd]").await,
        json!([answer, true, 0, answer.len()])
    );
    page.shot("typed-answer-selected").await;

    // A plain message after it: prose, no JSON block.
    page.type_in(&format!("in words?{ENTER}")).await;
    page.wait(
        "document.querySelector('.turn:not(.live) .text')",
        "the plain answer",
    )
    .await;
    assert_eq!(
        page.js("return [document.querySelector('.turn:not(.live) .text').textContent, document.querySelectorAll('.json-answer').length]").await,
        json!(["It is a bug, priority 2.", 1])
    );

    // A reload replays the events: the block again.
    page.client.refresh().await.unwrap();
    page.wait(
        "document.querySelector('.json-answer pre.json')",
        "the JSON block after reload",
    )
    .await;
    assert_eq!(
        page.js("return document.querySelector('.json-answer pre.json').textContent")
            .await,
        json!(pretty)
    );
    page.client.close().await.unwrap();
}

/// A scripted model that says it runs in openai's cloud.
struct Cloudy(ScriptedModel);

impl ChatModel for Cloudy {
    fn info(&self) -> lrg_providers::ModelInfo {
        lrg_providers::ModelInfo::new("openai", "gpt-4.1", ModelLocation::Cloud)
            .sends_to(Some("api.openai.com".into()))
    }

    fn turn(
        &self,
        request: lrg_providers::TurnRequest,
        cancel: tokio_util::sync::CancellationToken,
    ) -> lrg_providers::TurnStream {
        self.0.turn(request, cancel)
    }
}

/// Opens every chat on one cloud model, all sharing one set of permission
/// settings (as `lrg serve` does), so "don't ask again" reaches them all.
struct SharedSettings {
    model: Arc<dyn ChatModel>,
    permissions: Arc<lrg_chat::permissions::Permissions>,
}

impl ChatOpener for SharedSettings {
    fn open(&self, _spec: ChatSpec) -> BoxFuture<'_, Result<OpenedChat, OpenError>> {
        Box::pin(async move {
            let source = Arc::new(SwitchableModel::new(self.model.clone()));
            let builder =
                ChatSession::builder(source.clone()).permissions(self.permissions.clone());
            Ok(OpenedChat::new(builder, self.model.info()).with_source(source))
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_asks_for_cloud_consent_once_per_provider_in_a_real_browser() {
    let Some((chromium, driver)) = browser() else {
        return;
    };
    let model: Arc<dyn ChatModel> = Arc::new(Cloudy(ScriptedModel::named(
        "cloud",
        (1..=6).map(|n| text(&format!("Answer {n}."))).collect(),
    )));
    let permissions = Arc::new(lrg_chat::permissions::Permissions::default());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let menu = StaticMenu(vec![
        MenuEntry::available("openai", "gpt-4.1", ModelLocation::Cloud)
            .with_sends_to("api.openai.com"),
    ]);
    let config = HttpConfig::new(AGENT)
        .allow_origin(base.clone())
        .defaults(ChatSpec::new().model("openai:gpt-4.1"));
    let opener = SharedSettings {
        model,
        permissions: permissions.clone(),
    };
    let server = ChatServer::new(config, Arc::new(opener), Arc::new(menu));
    let app = server.router();
    tokio::spawn(async move { axum::serve(listener, app).await });
    let (_driver, _profile, mut page) = launch(&chromium, &driver).await;

    let modal_shown = "!document.getElementById('modal').classList.contains('hidden')";
    let users = |n: usize| format!("document.querySelectorAll('.user.msg').length === {n}");
    let answers =
        |n: usize| format!("document.querySelectorAll('.turn:not(.live) .text').length === {n}");
    let open = async |page: &Page| {
        let link = server.open_chat(ChatSpec::new()).await.unwrap();
        page.client
            .goto(&format!("{base}{}", link.page_url))
            .await
            .unwrap();
        page.wait(
            "document.getElementById('conn').textContent === 'live' && document.getElementById('model-button').textContent.includes('openai:gpt-4.1')",
            "the chat",
        )
        .await;
    };

    // A chat on a cloud model asks before its first message goes out.
    open(&page).await;
    page.type_in(&format!("hello{ENTER}")).await;
    page.wait(modal_shown, "the consent question").await;
    assert_eq!(
        page.js("return [document.getElementById('modal-confirm').textContent, document.getElementById('modal-check-text').textContent, document.getElementById('modal-check').classList.contains('hidden')]").await,
        json!(["Send it", "Don't ask again for openai", false])
    );
    let question = page
        .js("return document.getElementById('modal-text').textContent")
        .await;
    assert!(
        question.as_str().unwrap().contains("api.openai.com"),
        "{question}"
    );
    page.shot("cloud-consent").await;
    page.click("#modal-confirm").await;
    page.wait(&answers(1), "the first answer").await;

    // Agreed for this chat: the next message goes without a question (the
    // message is only sent once no question stands in its way).
    page.type_in(&format!("again{ENTER}")).await;
    page.wait(&answers(2), "the second answer").await;
    assert_eq!(
        page.js(&format!("return {modal_shown}")).await,
        json!(false)
    );

    // A reload asks the server, which remembers it.
    page.client.refresh().await.unwrap();
    page.wait(&users(2), "the conversation after reload").await;
    page.wait(
        "document.getElementById('model-button').textContent.includes('openai:gpt-4.1')",
        "the model",
    )
    .await;
    page.type_in(&format!("after reload{ENTER}")).await;
    page.wait(&answers(3), "the answer after reload").await;
    assert_eq!(
        page.js(&format!("return {modal_shown}")).await,
        json!(false)
    );
    assert!(
        permissions.settings().cloud_consent.is_empty(),
        "this chat only"
    );

    // Another chat asks again; "don't ask again" is ticked this time.
    open(&page).await;
    page.type_in(&format!("second chat{ENTER}")).await;
    page.wait(modal_shown, "the question in another chat").await;
    page.click("#modal-check-box").await;
    page.click("#modal-confirm").await;
    page.wait(&answers(1), "the second chat's answer").await;
    assert!(
        permissions.settings().cloud_consent.contains("openai"),
        "{:?}",
        permissions.settings()
    );

    // A third chat does not ask at all.
    open(&page).await;
    page.type_in(&format!("third chat{ENTER}")).await;
    page.wait(&answers(1), "the third chat's answer").await;
    assert_eq!(
        page.js(&format!("return {modal_shown}")).await,
        json!(false)
    );
    page.client.close().await.unwrap();
}
