//! `lrg run --json` answering server-everything's sampling request with
//! the run's own model: a fake OpenAI-compatible model (wiremock) calls
//! `trigger-sampling-request`, then answers the server's request, then the
//! person. Needs the npm fixtures in tests-fixtures/mcp (skipped with a
//! notice without them, failed under `CI`).

use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

use crate::common::{Env, ran};

/// The fake model's turns, in order: the call, the sampled answer, the reply.
struct Turns(AtomicUsize);

fn sse(delta: Value, finish: &str) -> String {
    let chunk = |delta: Value, finish: Option<&str>| {
        json!({"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4.1",
               "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    };
    let usage = json!({"id": "c", "object": "chat.completion.chunk", "created": 1,
        "model": "gpt-4.1", "choices": [],
        "usage": {"prompt_tokens": 17, "completion_tokens": 5, "total_tokens": 22}});
    format!(
        "data: {}\n\ndata: {}\n\ndata: {usage}\n\ndata: [DONE]\n\n",
        chunk(delta, None),
        chunk(json!({}), Some(finish))
    )
}

impl Respond for Turns {
    fn respond(&self, _request: &Request) -> ResponseTemplate {
        let body = match self.0.fetch_add(1, Ordering::SeqCst) {
            0 => sse(
                json!({"role": "assistant", "tool_calls": [{"index": 0, "id": "c1", "type": "function",
                       "function": {"name": "trigger-sampling-request",
                                    "arguments": json!({"prompt": "name a colour", "maxTokens": 25}).to_string()}}]}),
                "tool_calls",
            ),
            1 => sse(json!({"role": "assistant", "content": "Teal."}), "stop"),
            _ => sse(json!({"role": "assistant", "content": "done"}), "stop"),
        };
        ResponseTemplate::new(200).set_body_raw(body, "text/event-stream")
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_answers_a_sampling_request_with_its_model() {
    let script = crate::common::repo_root().join(
        "tests-fixtures/mcp/node_modules/@modelcontextprotocol/server-everything/dist/index.js",
    );
    let node = std::process::Command::new("node")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !(script.is_file() && node) {
        assert!(
            std::env::var_os("CI").is_none(),
            "npm MCP fixtures are required under CI (run `npm ci` in tests-fixtures/mcp)"
        );
        eprintln!("SKIPPED: mcp_sampling_cli: server-everything or node is missing");
        return;
    }
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(Turns(AtomicUsize::new(0)))
        .mount(&server)
        .await;
    let env = Env::new();
    env.file(
        "mcp.json",
        &json!({"mcpServers": {"everything": {"command": "node",
            "args": [script.to_string_lossy(), "stdio"]}}})
        .to_string(),
    );
    let base = format!("{}/v1", server.uri());
    let r = tokio::task::spawn_blocking(move || {
        let mut cmd = env.lrg();
        cmd.env("OPENAI_API_KEY", "sk-test-sampling-0123456789")
            .env("OPENAI_BASE_URL", base)
            .args([
                "run",
                "--json",
                "--yes",
                "--model",
                "openai:gpt-4.1",
                "--mcp-config",
                "mcp.json",
                "go",
            ]);
        ran(&mut cmd)
    })
    .await
    .unwrap();
    assert_eq!(r.code, 0, "{r:?}");
    let lines: Vec<Value> = r
        .stdout
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let of_type = |t: &str| lines.iter().filter(|l| l["type"] == t).collect::<Vec<_>>();

    let asked = of_type("sampling_request");
    assert_eq!(asked.len(), 1, "{r:?}");
    assert_eq!(asked[0]["server"], "everything");
    assert_eq!(asked[0]["model"], "openai:gpt-4.1");
    assert_eq!(asked[0]["max_tokens"], 25);
    assert!(asked[0]["seq"].is_u64(), "numbered");
    // `--yes` answers its approval like a tool's.
    let approvals = of_type("approval_answered");
    assert!(
        approvals.iter().any(|a| a["call_id"] == "sampling-1"),
        "{r:?}"
    );
    let done = of_type("sampling_done");
    assert_eq!(done[0]["outcome"], "answered", "{r:?}");
    assert_eq!(done[0]["text"], "Teal.");
    assert_eq!(done[0]["usage"]["prompt_tokens"], 17);
    let text = of_type("tool_done")[0]["text"].as_str().unwrap().to_owned();
    assert!(
        text.contains("LLM sampling result") && text.contains("Teal."),
        "{text}"
    );

    // The model saw the server's request, with its settings, and no tools.
    let requests = server.received_requests().await.unwrap();
    assert_eq!(requests.len(), 3, "call, sampling, reply");
    let sampled: Value = serde_json::from_slice(&requests[1].body).unwrap();
    assert_eq!(sampled["messages"][0]["role"], "system");
    assert_eq!(
        sampled["messages"][0]["content"],
        "You are a helpful test server."
    );
    let asked_text = sampled["messages"][1]["content"].to_string();
    assert!(asked_text.contains("name a colour"), "{sampled}");
    assert!(sampled.get("tools").is_none(), "{sampled}");
    let budget = sampled
        .get("max_completion_tokens")
        .or_else(|| sampled.get("max_tokens"));
    assert_eq!(budget, Some(&json!(25)), "{sampled}");
    // Nothing of the run's key reaches the output.
    assert!(!r.stdout.contains("sk-test-sampling"), "{r:?}");
}
