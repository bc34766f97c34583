//! `lrg run` through the Responses API (OpenAI, xAI), a hosted
//! OpenAI-compatible row (OpenRouter) and an agent CLI (a fake `claude` on
//! `PATH`), as a user runs it; `lrg models` lists the agent CLIs with their
//! availability.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::{Env, Ran, ran};
use serde_json::{Value, json};
use wiremock::matchers::{header, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

const KEY: &str = "sk-test-2b7e151628aed2a6abf7158809cf4f3c";
const DEMO: &str = "lrg demo-server";

/// A Responses API event stream, each event with its `event:` line.
fn responses(events: &[Value]) -> ResponseTemplate {
    let body: String = events
        .iter()
        .enumerate()
        .map(|(n, e)| {
            let mut e = e.clone();
            e["sequence_number"] = json!(n);
            format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap())
        })
        .collect();
    ResponseTemplate::new(200).set_body_raw(body, "text/event-stream")
}

/// A turn that reasons (`encrypted`) and then calls `tool` with `args`.
fn reason_then_call(n: u32, encrypted: &str, tool: &str, args: &str) -> ResponseTemplate {
    let call_id = format!("call_{n}");
    responses(&[
        json!({"type": "response.created", "response": {"id": format!("resp_{n}"), "status": "in_progress", "output": []}}),
        json!({"type": "response.reasoning_summary_text.delta", "item_id": format!("rs_{n}"), "output_index": 0, "summary_index": 0, "delta": format!("Step {n}.")}),
        json!({"type": "response.output_item.done", "output_index": 0, "item": {"id": format!("rs_{n}"), "type": "reasoning",
            "summary": [{"type": "summary_text", "text": format!("Step {n}.")}], "encrypted_content": encrypted}}),
        json!({"type": "response.output_item.added", "output_index": 1, "item": {"id": format!("fc_{n}"), "type": "function_call", "call_id": call_id, "name": tool, "arguments": ""}}),
        json!({"type": "response.function_call_arguments.delta", "item_id": format!("fc_{n}"), "output_index": 1, "delta": args}),
        json!({"type": "response.output_item.done", "output_index": 1, "item": {"id": format!("fc_{n}"), "type": "function_call", "call_id": call_id, "name": tool, "arguments": args}}),
        json!({"type": "response.completed", "response": {"id": format!("resp_{n}"), "status": "completed", "output": [],
            "usage": {"input_tokens": 100, "output_tokens": 20, "output_tokens_details": {"reasoning_tokens": 12}}}}),
    ])
}

fn reply(text: &str) -> ResponseTemplate {
    responses(&[
        json!({"type": "response.created", "response": {"id": "resp_9", "status": "in_progress", "output": []}}),
        json!({"type": "response.output_text.delta", "item_id": "msg_9", "output_index": 0, "content_index": 0, "delta": text}),
        json!({"type": "response.completed", "response": {"id": "resp_9", "status": "completed", "output": [],
            "usage": {"input_tokens": 150, "output_tokens": 9}}}),
    ])
}

/// Run `lrg run ARGS PROMPT` with `vars`, off the test's runtime (the fake
/// servers live on it).
async fn run(args: &[&str], vars: &[(&str, String)]) -> Ran {
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    let vars: Vec<(String, String)> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect();
    tokio::task::spawn_blocking(move || {
        let env = Env::new();
        let mut cmd = env.lrg();
        cmd.arg("run").args(&args);
        for (k, v) in &vars {
            cmd.env(k, v);
        }
        ran(&mut cmd)
    })
    .await
    .unwrap()
}

async fn bodies(server: &MockServer) -> Vec<Value> {
    server
        .received_requests()
        .await
        .unwrap()
        .iter()
        .map(|r| r.body_json::<Value>().unwrap())
        .collect()
}

/// The `encrypted_content` of the reasoning items a request sends back.
fn encrypted(body: &Value) -> Vec<String> {
    body["input"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["type"] == "reasoning")
        .map(|i| i["encrypted_content"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn responses_api_two_tool_calls_with_reasoning_sent_back() {
    let server = MockServer::start().await;
    for response in [
        reason_then_call(1, "ENC-1", "list_notes", "{}"),
        reason_then_call(2, "ENC-2", "read_note", r#"{"id":1}"#),
        reply("Note 1 says to buy oat milk and coffee beans."),
    ] {
        Mock::given(method("POST"))
            .and(path("/v1/responses"))
            .and(header("authorization", format!("Bearer {KEY}").as_str()))
            .respond_with(response)
            .up_to_n_times(1)
            .expect(1)
            .mount(&server)
            .await;
    }
    let vars = [
        ("OPENAI_API_KEY", KEY.to_string()),
        ("OPENAI_BASE_URL", format!("{}/v1", server.uri())),
    ];
    let r = run(
        &[
            "--model",
            "openai-responses:o4-mini",
            "--mcp",
            DEMO,
            "What does my first note say?",
        ],
        &vars,
    )
    .await;
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(
        r.stdout, "Note 1 says to buy oat milk and coffee beans.\n",
        "{r:?}"
    );
    assert!(r.stderr.contains("→ list_notes"), "{r:?}");
    assert!(r.stderr.contains("→ read_note"), "{r:?}");
    assert!(!format!("{}{}", r.stdout, r.stderr).contains(KEY));
    let bodies = bodies(&server).await;
    assert_eq!(bodies.len(), 3);
    assert_eq!(bodies[0]["store"], false);
    assert_eq!(bodies[0]["include"], json!(["reasoning.encrypted_content"]));
    // Each turn's reasoning goes back, in order, with the calls' outputs.
    assert_eq!(encrypted(&bodies[1]), ["ENC-1"]);
    assert_eq!(encrypted(&bodies[2]), ["ENC-1", "ENC-2"]);
    let outputs: Vec<&str> = bodies[2]["input"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["type"] == "function_call_output")
        .map(|i| i["call_id"].as_str().unwrap())
        .collect();
    assert_eq!(outputs, ["call_1", "call_2"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn xai_and_openrouter_use_their_own_keys() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/responses"))
        .and(header("authorization", format!("Bearer {KEY}").as_str()))
        .respond_with(reply("Hi from Grok."))
        .expect(1)
        .mount(&server)
        .await;
    let chunk = json!({"choices": [{"index": 0, "delta": {"content": "Hi from OpenRouter."}, "finish_reason": "stop"}]});
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .and(header("authorization", format!("Bearer {KEY}").as_str()))
        .respond_with(ResponseTemplate::new(200).set_body_raw(
            format!("data: {chunk}\n\ndata: [DONE]\n\n"),
            "text/event-stream",
        ))
        .expect(1)
        .mount(&server)
        .await;
    let base = format!("{}/v1", server.uri());
    let r = run(
        &["--model", "xai:grok-4", "hi"],
        &[("XAI_API_KEY", KEY.into()), ("XAI_BASE_URL", base.clone())],
    )
    .await;
    assert_eq!((r.code, r.stdout.as_str()), (0, "Hi from Grok.\n"), "{r:?}");
    let r = run(
        &["--model", "openrouter:openai/gpt-4.1", "hi"],
        &[
            ("OPENROUTER_API_KEY", KEY.into()),
            ("OPENROUTER_BASE_URL", base),
        ],
    )
    .await;
    assert_eq!(
        (r.code, r.stdout.as_str()),
        (0, "Hi from OpenRouter.\n"),
        "{r:?}"
    );
    // Without its key, each says which variable to set.
    let r = run(&["--model", "xai:grok-4", "hi"], &[]).await;
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("XAI_API_KEY"), "{r:?}");
}

/// A directory holding the fake agent CLI as `program`, to put on `PATH`.
#[cfg(unix)]
fn fake_cli(env: &Env, program: &str) -> String {
    let fixture = common::repo_root().join("lrg-providers/tests/fixtures/cli_agents/fake_cli.sh");
    let dir = env.path("bin");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(fixture, dir.join(program)).unwrap();
    format!(
        "{}:{}",
        dir.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

#[cfg(unix)]
#[test]
fn claude_cli_on_path_streams_the_answer() {
    let env = Env::new();
    let path = fake_cli(&env, "claude");
    let r = ran(env
        .lrg()
        .env("PATH", path)
        .args(["run", "--model", "claude-cli:sonnet", "hi"]));
    assert_eq!((r.code, r.stdout.as_str()), (0, "Hello there\n"), "{r:?}");
    assert!(
        r.stderr.contains("Greet back."),
        "reasoning on stderr: {r:?}"
    );
    let args = env.read("bin/args.1");
    assert!(args.lines().any(|l| l == "--strict-mcp-config"), "{args}");
    assert_eq!(env.read("bin/stdin.1"), "hi");
}

/// `--json` carries the usage breakdown: the fake claude reports cache reads
/// and writes, which count in the prompt tokens as the Messages API does.
#[cfg(unix)]
#[test]
fn json_usage_carries_cached_tokens() {
    let env = Env::new();
    let path = fake_cli(&env, "claude");
    let r = ran(env.lrg().env("PATH", path).args([
        "run",
        "--json",
        "--model",
        "claude-cli:sonnet",
        "hi",
    ]));
    assert_eq!(r.code, 0, "{r:?}");
    let usage: Value = r
        .stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|e| e["type"] == "usage")
        .expect("a usage event");
    assert_eq!(usage["prompt_tokens"], 18, "{usage}");
    assert_eq!(usage["completion_tokens"], 7, "{usage}");
    assert_eq!(usage["cached_prompt_tokens"], 5, "{usage}");
    assert_eq!(usage["cache_write_tokens"], 10, "{usage}");
    assert!(usage.get("reasoning_tokens").is_none(), "{usage}");
}

/// An agent CLI works lrg's tools: the fake `claude` answers the tools
/// described in its prompt with a Hermes `<tool_call>`, lrg runs it on the
/// MCP server, and the result goes back on the resumed session.
#[cfg(unix)]
#[test]
fn claude_cli_calls_an_mcp_tool_written_as_text() {
    let env = Env::new();
    let path = fake_cli(&env, "claude");
    std::fs::write(
        env.path("bin/tool_call"),
        r#"{"name": "list_notes", "arguments": {}}"#,
    )
    .unwrap();
    let r = ran(env.lrg().env("PATH", path).args([
        "run",
        "--model",
        "claude-cli:sonnet",
        "--mcp",
        DEMO,
        "what are my notes?",
    ]));
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stderr.contains("→ list_notes"), "{r:?}");
    assert!(
        r.stdout.ends_with("Done: the tool answered.\n"),
        "the reply follows the call: {r:?}"
    );
    assert!(!r.stdout.contains("<tool_call>"), "{r:?}");
    let args = env.read("bin/args.1");
    assert!(
        args.contains("<tools>") && args.contains("list_notes"),
        "{args}"
    );
    // Turn 2 resumes turn 1's session with only the tool's result.
    let args = env.read("bin/args.2");
    assert!(args.contains("--resume\nsess-1"), "{args}");
    let stdin = env.read("bin/stdin.2");
    assert!(
        stdin.starts_with("<tool_response>") && stdin.contains("1: Buy oat milk and coffee beans"),
        "{stdin}"
    );
}

#[cfg(unix)]
#[test]
fn models_lists_the_agent_clis_with_their_availability() {
    let env = Env::new();
    let path = fake_cli(&env, "codex");
    let r = ran(env.lrg().env("PATH", path).args(["models", "--json"]));
    assert_eq!(r.code, 0, "{r:?}");
    let listed: Value = serde_json::from_str(&r.stdout).unwrap();
    let text = listed.to_string();
    for provider in ["claude-cli", "codex-cli", "gemini-cli"] {
        assert!(text.contains(provider), "{provider} missing: {text}");
    }
    assert!(
        !text.contains(&env.path("bin").display().to_string()),
        "a path in the listing: {text}"
    );
}
