//! lrg against a second MCP implementation nobody here wrote: a small
//! server on the official Python SDK (`tests-fixtures/mcp-py/server.py`,
//! PyPI `mcp` 2.x), through the library: its tools listed and called, its
//! structured output checked against its output schema, its resource read,
//! its prompt expanded, its elicitation answered and its sampling request
//! answered by the chat's model.
//!
//! The SDK is taken from `$LRG_MCP_PYTHON` (a Python with `mcp`), else
//! `$HOME/.lrg-mcp-py-venv/bin/python`, which `.ci/run` installs. Without
//! it these tests say so and pass locally, and fail under `CI`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use lrg_chat::events::Event;
use lrg_chat::tools::{McpConfig, ResourceBody, ToolHost, ToolHostOptions, Tools};
use lrg_chat::{
    ChatSession, FixedModel, Mode, PermissionSettings, Permissions, QuestionAnswer, QuestionError,
};
use lrg_providers::ScriptedModel;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::session_support::{calls, finish, reply, wait_for};

const WAIT: Duration = Duration::from_secs(60);

/// The Python that has the SDK, or `None` (after a notice) when there is
/// none; panics instead under CI.
fn python() -> Option<PathBuf> {
    let python = std::env::var_os("LRG_MCP_PYTHON")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .map(|home| PathBuf::from(home).join(".lrg-mcp-py-venv/bin/python"))
        })?;
    let has_sdk = std::process::Command::new(&python)
        .args(["-c", "import mcp.server.mcpserver"])
        .output()
        .is_ok_and(|o| o.status.success());
    if has_sdk {
        return Some(python);
    }
    let why = format!(
        "{} cannot import the Python MCP SDK; install it with `python3 -m venv ~/.lrg-mcp-py-venv && \
         ~/.lrg-mcp-py-venv/bin/pip install -r tests-fixtures/mcp-py/requirements.txt` \
         (or set LRG_MCP_PYTHON)",
        python.display()
    );
    if std::env::var_os("CI").is_some() {
        panic!("the Python MCP SDK is required under CI: {why}");
    }
    eprintln!("SKIPPED: Python MCP SDK test: {why}");
    None
}

/// A host with the Python server as `py`.
async fn python_host() -> Option<Arc<ToolHost>> {
    let python = python()?;
    let script =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests-fixtures/mcp-py/server.py");
    let config = McpConfig::from_json(
        &json!({"mcpServers": {"py": {"command": python, "args": [script]}}}).to_string(),
    )
    .unwrap();
    let host = Arc::new(ToolHost::with_options(ToolHostOptions {
        connect_timeout: Duration::from_secs(60),
        ..Default::default()
    }));
    let failures = host.add_mcp_config(&config).await;
    assert!(failures.is_empty(), "{failures:?}");
    Some(host)
}

fn text_of(out: &lrg_chat::tools::ToolOutput) -> String {
    out.parts
        .iter()
        .filter_map(|p| match p {
            lrg_providers::Part::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

fn session(host: &Arc<ToolHost>, model: ScriptedModel) -> ChatSession {
    let settings = PermissionSettings {
        mode: Mode::AutoAll,
        ..Default::default()
    };
    ChatSession::builder(Arc::new(FixedModel::new(model)))
        .tools(host.clone())
        .permissions(Arc::new(Permissions::new(settings)))
        .build()
}

async fn tool_done(sub: &mut lrg_chat::Subscription) -> String {
    match &wait_for(sub, |e| matches!(e, Event::ToolDone { .. }))
        .await
        .event
    {
        Event::ToolDone { text, .. } => text.clone(),
        _ => unreachable!(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_structured_output_resources_and_prompts() {
    let Some(host) = python_host().await else {
        return;
    };
    tokio::time::timeout(WAIT, async {
        let tools = host.list().await.unwrap();
        let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
        for name in ["add", "weather", "register", "summarize"] {
            assert!(names.contains(&name), "{name} missing: {names:?}");
        }
        let weather = tools.iter().find(|t| t.name == "weather").unwrap();
        let schema = weather.output_schema.as_ref().expect("an output schema");
        assert_eq!(schema["properties"]["celsius"]["type"], "number");

        let cancel = CancellationToken::new;
        let added = host.call("add", json!({"a": 2, "b": 3}), cancel()).await;
        assert!(!added.is_error, "{added:?}");
        assert!(text_of(&added).contains("2 + 3 = 5"), "{added:?}");

        // Checked against the schema it declared, and kept typed.
        let out = host
            .call("weather", json!({"city": "Lyon"}), cancel())
            .await;
        assert!(!out.is_error, "{out:?}");
        assert_eq!(
            out.structured,
            Some(json!({"city": "Lyon", "celsius": 21.5, "conditions": "sunny"}))
        );
        // Arguments are checked before the call reaches the server.
        let bad = host.call("add", json!({"a": "two"}), cancel()).await;
        assert!(bad.is_error, "{bad:?}");

        let resources = host.resources().await;
        assert!(resources.failures.is_empty(), "{:?}", resources.failures);
        let greeting = resources
            .items
            .iter()
            .find(|r| r.uri == "fixture://greeting")
            .expect("the greeting resource");
        assert_eq!(greeting.server, "py");
        let read = host
            .read_resource("py", "fixture://greeting")
            .await
            .unwrap();
        assert_eq!(read.len(), 1);
        assert_eq!(
            read[0].body,
            ResourceBody::Text("Hello from the Python SDK".into())
        );

        let prompts = host.prompts().await;
        assert!(prompts.failures.is_empty(), "{:?}", prompts.failures);
        let review = prompts
            .items
            .iter()
            .find(|p| p.name == "review")
            .expect("the review prompt");
        let args = serde_json::to_value(&review.arguments).unwrap();
        assert_eq!(args[0]["name"], "language");
        assert_eq!(args[0]["required"], true);
        assert_eq!(args[1]["name"], "code");
        assert_eq!(args[1]["required"], false);
        let arguments = BTreeMap::from([("language".to_owned(), "Rust".to_owned())]);
        let expanded = host.get_prompt("py", "review", &arguments).await.unwrap();
        let text = expanded.messages[0].text();
        assert!(text.contains("Review this Rust code"), "{text}");
        assert!(text.contains("print(1)"), "its default: {text}");
        let missing = host.get_prompt("py", "review", &BTreeMap::new()).await;
        assert!(
            missing.is_err(),
            "a required argument is missing: {missing:?}"
        );
        host.shutdown().await;
    })
    .await
    .expect("the test took too long");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn its_elicitation_is_checked_and_answered() {
    let Some(host) = python_host().await else {
        return;
    };
    tokio::time::timeout(WAIT, async {
        let chat = session(
            &host,
            ScriptedModel::new(vec![calls(&[("register", json!({}))]), reply("done")]),
        );
        let mut sub = chat.subscribe(0);
        let handle = chat.send("register me").unwrap();
        let entry = wait_for(&mut sub, |e| matches!(e, Event::Question { .. })).await;
        let question = serde_json::to_value(entry.as_ref()).unwrap();
        assert_eq!(question["server"], "py");
        assert_eq!(question["mode"], "form");
        assert_eq!(
            question["requested_schema"]["properties"]["age"]["type"],
            "integer"
        );
        let id = question["question_id"].as_u64().unwrap();
        let refused = chat.answer_question(
            id,
            QuestionAnswer::accept(json!({"name": "Ada", "age": 200})),
        );
        assert!(
            matches!(&refused, Err(QuestionError::Invalid { field, .. }) if field == "age"),
            "the SDK's bound (le=150) is checked: {refused:?}"
        );
        chat.answer_question(
            id,
            QuestionAnswer::accept(json!({"name": "Ada", "age": 36})),
        )
        .unwrap();
        let text = tool_done(&mut sub).await;
        assert!(
            text.contains("registered Ada, 36, subscribe=False"),
            "{text}"
        );
        finish(handle).await;
        host.shutdown().await;
    })
    .await
    .expect("the test took too long");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn its_sampling_request_is_answered_by_the_chats_model() {
    let Some(host) = python_host().await else {
        return;
    };
    tokio::time::timeout(WAIT, async {
        let model = ScriptedModel::new(vec![
            calls(&[("summarize", json!({"text": "a long story about a cat"}))]),
            reply("A cat's tale."),
            reply("done"),
        ]);
        let chat = session(&host, model.clone());
        let mut sub = chat.subscribe(0);
        let handle = chat.send("summarize").unwrap();
        let text = tool_done(&mut sub).await;
        assert!(
            text.contains("summary by script:scripted: A cat's tale."),
            "{text}"
        );
        finish(handle).await;
        let sent = &model.requests()[1];
        assert_eq!(sent.system.as_deref(), Some("Answer in one line."));
        assert_eq!(sent.settings.max_tokens, Some(30));
        host.shutdown().await;
    })
    .await
    .expect("the test took too long");
}
