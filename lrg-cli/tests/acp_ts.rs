//! `lrg acp` driven by a second, independent ACP implementation: a client
//! on the official TypeScript SDK (`tests-fixtures/acp-ts/client.mjs`, its
//! package installed by `.ci/run` with `npm ci`). A whole prompt with a
//! tool call and a permission, then `session/list`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::path::PathBuf;
use std::time::Duration;

use common::Env;
use serde_json::{Value, json};

/// The fixture client, or `None` (a loud skip; a failure under CI) when
/// node or the SDK is missing.
fn client() -> Option<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests-fixtures/acp-ts");
    let sdk = dir.join("node_modules/@agentclientprotocol/sdk/package.json");
    let node = std::process::Command::new("node")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if node && sdk.is_file() {
        return Some(dir.join("client.mjs"));
    }
    let why = if node {
        format!(
            "{} is missing; run `npm ci` in tests-fixtures/acp-ts",
            sdk.display()
        )
    } else {
        "node is not installed".to_owned()
    };
    assert!(
        std::env::var_os("CI").is_none(),
        "the TypeScript ACP client is required under CI: {why}"
    );
    eprintln!("SKIPPED: the TypeScript SDK client test: {why}");
    None
}

/// Run the fixture client against `lrg acp ARGS` in `env`'s folder.
async fn drive(env: &Env, args: &[&str], prompts: &[&str], answer: &str) -> Value {
    let script = client().expect("checked by the caller");
    let mut acp_args = vec!["acp"];
    acp_args.extend_from_slice(args);
    let config = json!({
        "command": env!("CARGO_BIN_EXE_lrg"),
        "args": acp_args,
        "cwd": env.dir.path(),
        "prompts": prompts,
        "answer": answer,
    });
    let run = tokio::process::Command::new("node")
        .arg(script)
        .arg(config.to_string())
        .env("XDG_CONFIG_HOME", env.path("config"))
        .env("OLLAMA_HOST", "http://127.0.0.1:9")
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(60), run)
        .await
        .expect("the TypeScript client timed out")
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the client failed ({}): {stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

#[tokio::test]
async fn the_typescript_sdk_drives_a_whole_prompt_with_a_permission() {
    if client().is_none() {
        return;
    }
    let env = Env::new();
    env.file(
        "s.json",
        r#"[{"calls": [{"name": "add_note", "arguments": {"text": "milk"}}]},
            {"text": "Added."}]"#,
    );
    let demo = format!("{} demo-server", env!("CARGO_BIN_EXE_lrg"));
    let store = env.path("sessions");
    let args = [
        "--model",
        "script:s.json",
        "--mcp",
        &demo,
        "--store",
        store.to_str().unwrap(),
    ];
    let seen = drive(&env, &args, &["note milk"], "allow_once").await;

    assert_eq!(seen["protocolVersion"], 1);
    assert_eq!(seen["agent"], "lrg");
    assert_eq!(seen["loadSession"], true);
    assert_eq!(seen["sessionCapabilities"], json!(["list", "resume"]));
    assert_eq!(seen["configOptions"], json!(["model"]));
    assert_eq!(
        seen["asked"],
        json!([{"title": "add_note",
                "options": ["allow_once", "allow_always", "reject_once", "reject_always"]}])
    );
    assert_eq!(
        seen["updates"],
        json!([
            r#"tool_call add_note edit pending {"text":"milk"}"#,
            "tool_call_update in_progress",
            "tool_call_update completed",
            "message: Added."
        ])
    );
    assert_eq!(seen["stops"], json!(["end_turn"]));
    assert_eq!(
        seen["listed"],
        json!([{"sessionId": seen["sessionId"], "cwd": env.dir.path(), "title": "note milk"}])
    );
    assert_eq!(seen["agentExit"], 0);
}

#[tokio::test]
async fn a_rejection_from_the_typescript_sdk_keeps_the_tool_from_running() {
    if client().is_none() {
        return;
    }
    let env = Env::new();
    env.file(
        "s.json",
        r#"[{"calls": [{"name": "add_note", "arguments": {"text": "milk"}}]},
            {"text": "I did not add it."}]"#,
    );
    let demo = format!("{} demo-server", env!("CARGO_BIN_EXE_lrg"));
    let args = ["--model", "script:s.json", "--mcp", &demo];
    let seen = drive(&env, &args, &["note milk"], "reject_once").await;
    // No store: nothing to list, and the capabilities say so.
    assert_eq!(seen["loadSession"], false);
    assert_eq!(seen["sessionCapabilities"], json!([]));
    assert_eq!(seen["listed"], Value::Null);
    let updates = seen["updates"].as_array().unwrap();
    assert!(
        !updates.iter().any(|u| u == "tool_call_update completed"),
        "{updates:?}"
    );
    assert!(
        updates.iter().any(|u| u == "tool_call_update failed"),
        "{updates:?}"
    );
    assert_eq!(seen["stops"], json!(["end_turn"]));
}
