//! MCP prompts against server-everything (npm fixtures; see `tools_npm`):
//! listing with arguments, expanding with arguments checked first,
//! argument completion (`completion/complete`), and over HTTP `GET
//! …/prompts` and `POST …/messages {prompt}` beside the system prompt's
//! `GET …/prompt`.

use std::collections::BTreeMap;
use std::time::Duration;

use lrg_chat::tools::{McpConfig, McpRequestError, ToolHost, ToolHostOptions};
use serde_json::{Value, json};

use crate::http_support::{models, scripted, start, text};
use crate::tools_npm::server_script;

const WAIT: Duration = Duration::from_secs(90);

fn args(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_everything_prompts_through_the_library() {
    let Some(script) = server_script("server-everything") else {
        return;
    };
    tokio::time::timeout(WAIT, async {
        let config = McpConfig::from_json(
            &json!({"mcpServers": {"everything": {"command": "node", "args": [script, "stdio"]}}})
                .to_string(),
        )
        .unwrap();
        let host = ToolHost::with_options(ToolHostOptions {
            connect_timeout: Duration::from_secs(60),
            ..Default::default()
        });
        assert!(host.add_mcp_config(&config).await.is_empty());
        let listing = host.prompts().await;
        assert!(listing.failures.is_empty(), "{:?}", listing.failures);
        let prompt = listing
            .items
            .iter()
            .find(|p| p.name == "args-prompt")
            .expect("args-prompt");
        assert_eq!(prompt.server, "everything");
        let listed = serde_json::to_value(prompt).unwrap();
        assert_eq!(listed["arguments"][0]["name"], "city");
        assert_eq!(listed["arguments"][0]["required"], true);
        assert_eq!(listed["arguments"][1]["name"], "state");
        assert_eq!(listed["arguments"][1]["required"], false);
        assert!(listed["arguments"][1].get("description").is_some());

        let expanded = host
            .get_prompt(
                "everything",
                "args-prompt",
                &args(&[("city", "Paris"), ("state", "TX")]),
            )
            .await
            .unwrap();
        assert_eq!(expanded.into_input().text, "What's weather in Paris, TX?");
        let missing = host
            .get_prompt("everything", "args-prompt", &BTreeMap::new())
            .await
            .unwrap_err();
        assert!(
            matches!(&missing, McpRequestError::Invalid { message }
                if message.starts_with("prompt `args-prompt` needs argument `city`")),
            "{missing}"
        );
        let unknown = host
            .get_prompt("everything", "no-such-prompt", &BTreeMap::new())
            .await
            .unwrap_err();
        assert!(
            unknown
                .to_string()
                .contains("has no prompt `no-such-prompt`"),
            "{unknown}"
        );

        // Completion narrows by what was typed and what was chosen.
        let departments = host
            .complete_prompt_argument(
                "everything",
                "completable-prompt",
                "department",
                "Eng",
                &BTreeMap::new(),
            )
            .await
            .unwrap();
        assert_eq!(departments, vec!["Engineering"]);
        let people = host
            .complete_prompt_argument(
                "everything",
                "completable-prompt",
                "name",
                "",
                &args(&[("department", "Sales")]),
            )
            .await
            .unwrap();
        assert_eq!(people, vec!["David", "Eve", "Frank"]);
        host.shutdown().await;
    })
    .await
    .expect("the test took too long");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prompts_over_http_list_and_send() {
    let Some(script) = server_script("server-everything") else {
        return;
    };
    tokio::time::timeout(WAIT, async {
        let h = start(
            models(vec![(
                "script:first",
                scripted("first", vec![text("Sunny.")]),
            )]),
            |c| c,
        )
        .await;
        let chat = h
            .open(json!({"model": "script:first", "mcpServers": {
                "everything": {"command": "node", "args": [script.to_string_lossy(), "stdio"]}}}))
            .await;
        let (status, listed) = h.get(&chat, "/prompts").await;
        assert_eq!(status, 200, "{listed}");
        let prompts = listed["prompts"].as_array().unwrap();
        let args_prompt = prompts
            .iter()
            .find(|p| p["name"] == "args-prompt")
            .unwrap_or_else(|| panic!("{listed}"));
        assert_eq!(args_prompt["server"], "everything");
        assert_eq!(args_prompt["arguments"][0]["required"], true);
        // The system prompt preview is still there, singular.
        let (status, preview) = h.get(&chat, "/prompt").await;
        assert_eq!(status, 200, "{preview}");
        assert!(preview.get("sections").is_some(), "{preview}");

        let (status, body) = h
            .post(
                &chat,
                "/messages",
                json!({"prompt": {"server": "everything", "name": "args-prompt"}}),
            )
            .await;
        assert_eq!(status, 400, "{body}");
        assert!(body.to_string().contains("needs argument `city`"), "{body}");
        let (status, body) = h
            .post(
                &chat,
                "/messages",
                json!({"prompt": {"server": "everything", "name": "nope"}}),
            )
            .await;
        assert_eq!(status, 404, "{body}");
        let (status, body) = h
            .post(
                &chat,
                "/messages",
                json!({"text": "hi", "prompt": {"server": "everything", "name": "args-prompt"}}),
            )
            .await;
        assert_eq!(status, 400, "{body}");

        let mut events = h.events(&chat, 0).await;
        let (status, body) = h
            .post(
                &chat,
                "/messages",
                json!({"prompt": {"server": "everything", "name": "args-prompt",
                                  "arguments": {"city": "Lyon"}}}),
            )
            .await;
        assert_eq!(status, 202, "{body}");
        let sent = events.until("user_message", |_| true).await;
        assert_eq!(sent["text"], "What's weather in Lyon?");
        let turn: Value = events.until("assistant_turn", |_| true).await;
        assert_eq!(turn["text"], "Sunny.");
    })
    .await
    .expect("the test took too long");
}

/// The page's prompt picker in a real browser: it lists server-everything's
/// prompts with a field per argument and sends one filled in; a result's
/// resource links, its structured content and a `resource_updated` are
/// drawn. Needs `chromium` and `chromedriver` (skips loudly without them,
/// fails under `CI`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_picks_a_prompt_and_shows_resources() {
    use crate::browser_support::{browser, launch};
    let Some(script) = server_script("server-everything") else {
        return;
    };
    let Some((chromium, driver)) = browser() else {
        return;
    };
    tokio::time::timeout(WAIT, async {
        // The standard opener, which starts the chat's `mcpServers`.
        let h = start(
            models(vec![("script:first", scripted("first", vec![text("Sunny.")]))]),
            |c| c,
        )
        .await;
        let (status, opened) = h
            .open_raw(json!({"model": "script:first", "mcpServers": {
                "everything": {"command": "node", "args": [script.to_string_lossy(), "stdio"]}}}))
            .await;
        assert_eq!(status, 201, "{opened}");
        let page_url = opened["page_url"].as_str().unwrap().to_owned();
        let (_driver, _profile, mut page) = launch(&chromium, &driver).await;
        page.open(&h.base, &page_url).await;

        page.click("#prompts-button").await;
        page.wait(
            "document.querySelector(\"#prompts-panel form[data-prompt='everything/args-prompt']\") !== null",
            "the prompt picker",
        )
        .await;
        page.shot("prompt-picker").await;
        page.js(
            "const f = document.querySelector(\"#prompts-panel form[data-prompt='everything/args-prompt']\");
             f.querySelector(\"input[name='city']\").value = 'Oslo';
             f.requestSubmit(); return null",
        )
        .await;
        page.wait(
            "[...document.querySelectorAll('#log .user.msg')].some(m => m.textContent.includes(\"What's weather in Oslo?\"))",
            "the expanded prompt as the message",
        )
        .await;
        page.idle().await;

        let events = [
            json!({"type": "tool_call", "call_id": "r1", "tool": "get-resource-links", "class": "read",
                   "arguments": {"count": 1}}),
            json!({"type": "tool_done", "call_id": "r1", "ok": true, "text": "links",
                   "structured": {"temperature": 21},
                   "resources": [{"server": "everything", "uri": "demo://resource/dynamic/text/2",
                                  "name": "Text Resource 2", "mimeType": "text/plain", "embedded": false}]}),
            json!({"type": "resource_updated", "server": "everything", "uri": "demo://resource/dynamic/text/1"}),
        ];
        for (i, event) in events.iter().enumerate() {
            let mut event = event.clone();
            event["seq"] = json!(5000 + i);
            page.js(&format!("apply({event}); return null")).await;
        }
        let shown = page.log_text().await;
        for want in [
            "Text Resource 2",
            "demo://resource/dynamic/text/2",
            "Structured result",
            "Resource updated: demo://resource/dynamic/text/1 (everything)",
        ] {
            assert!(shown.contains(want), "{want:?} not in the page:\n{shown}");
        }
        page.shot("resource-links").await;
    })
    .await
    .expect("the test took too long");
}
