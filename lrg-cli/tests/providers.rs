//! `lrg run` against a fake server per provider (wiremock): the reply is
//! streamed to stdout, the key from the environment is sent, and it never
//! shows up in stdout, stderr or a recording, even when the server echoes it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::{Env, Ran, ran};
use serde_json::{Value, json};
use wiremock::matchers::{header, method, path, query_param};
use wiremock::{Mock, MockServer, ResponseTemplate};

const KEY: &str = "sk-test-7c1e0f5a9b2d4e6f8a0b1c2d3e4f5a6b";

fn sse(events: &[Value], done: bool) -> ResponseTemplate {
    let mut body: String = events.iter().map(|e| format!("data: {e}\n\n")).collect();
    if done {
        body.push_str("data: [DONE]\n\n");
    }
    ResponseTemplate::new(200).set_body_raw(body, "text/event-stream")
}

fn openai_stream(text: &str) -> ResponseTemplate {
    let chunk = |delta: Value, finish: Value| {
        json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m",
               "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    };
    sse(
        &[
            chunk(json!({"role": "assistant", "content": text}), Value::Null),
            chunk(json!({}), json!("stop")),
        ],
        true,
    )
}

fn anthropic_stream(text: &str) -> ResponseTemplate {
    let events = [
        json!({"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant",
               "model": "claude-sonnet-4-5", "content": [], "stop_reason": null,
               "usage": {"input_tokens": 10, "output_tokens": 1}}}),
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}}),
        json!({"type": "content_block_stop", "index": 0}),
        json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 5}}),
        json!({"type": "message_stop"}),
    ];
    let body: String = events
        .iter()
        .map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap()))
        .collect();
    ResponseTemplate::new(200).set_body_raw(body, "text/event-stream")
}

fn gemini_stream(text: &str) -> ResponseTemplate {
    sse(
        &[
            json!({"candidates": [{"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": "STOP", "index": 0}],
                 "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15}}),
        ],
        false,
    )
}

fn ollama_stream(text: &str) -> ResponseTemplate {
    let lines = [
        json!({"model": "qwen3:8b", "message": {"role": "assistant", "content": text}, "done": false}),
        json!({"model": "qwen3:8b", "message": {"role": "assistant", "content": ""}, "done": true,
               "done_reason": "stop", "prompt_eval_count": 10, "eval_count": 5}),
    ];
    let body: String = lines.iter().map(|l| format!("{l}\n")).collect();
    ResponseTemplate::new(200).set_body_raw(body, "application/x-ndjson")
}

/// Run `lrg run --model MODEL --record rec.json hi` with `vars` set, in a
/// blocking thread (the fake server lives on this test's runtime).
async fn run(model: &str, vars: &[(&str, String)], extra: &[&str]) -> (Ran, String) {
    let model = model.to_string();
    let vars: Vec<(String, String)> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect();
    let extra: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
    tokio::task::spawn_blocking(move || {
        let env = Env::new();
        let mut cmd = env.lrg();
        cmd.args(["run", "--model", &model, "--record", "rec.json"])
            .args(&extra)
            .arg("hi");
        for (k, v) in &vars {
            cmd.env(k, v);
        }
        let r = ran(&mut cmd);
        let recording = std::fs::read_to_string(env.path("rec.json")).unwrap_or_default();
        (r, recording)
    })
    .await
    .unwrap()
}

fn assert_no_key(r: &Ran, recording: &str) {
    assert!(!r.stdout.contains(KEY), "key in stdout: {r:?}");
    assert!(!r.stderr.contains(KEY), "key in stderr: {r:?}");
    assert!(
        !recording.contains(KEY),
        "key in the recording: {recording}"
    );
    // Not even a recognizable piece of it.
    assert!(!format!("{}{}{recording}", r.stdout, r.stderr).contains(&KEY[8..24]));
}

#[tokio::test(flavor = "multi_thread")]
async fn openai() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .and(header("authorization", format!("Bearer {KEY}").as_str()))
        .respond_with(openai_stream("Hello from OpenAI."))
        .expect(1)
        .mount(&server)
        .await;
    let vars = [
        ("OPENAI_API_KEY", KEY.to_string()),
        ("OPENAI_BASE_URL", format!("{}/v1", server.uri())),
    ];
    let (r, recording) = run("openai:gpt-4.1", &vars, &[]).await;
    assert_eq!(
        (r.code, r.stdout.as_str()),
        (0, "Hello from OpenAI.\n"),
        "{r:?}"
    );
    assert!(
        recording.contains("\"provider\": \"openai\""),
        "{recording}"
    );
    assert!(recording.contains("Hello from OpenAI."), "{recording}");
    assert_no_key(&r, &recording);
}

#[tokio::test(flavor = "multi_thread")]
async fn anthropic() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/messages"))
        .and(header("x-api-key", KEY))
        .respond_with(anthropic_stream("Hello from Claude."))
        .expect(1)
        .mount(&server)
        .await;
    let vars = [
        ("ANTHROPIC_API_KEY", KEY.to_string()),
        ("ANTHROPIC_BASE_URL", server.uri()),
    ];
    let (r, recording) = run("anthropic:claude-sonnet-4-5", &vars, &[]).await;
    assert_eq!(
        (r.code, r.stdout.as_str()),
        (0, "Hello from Claude.\n"),
        "{r:?}"
    );
    assert_no_key(&r, &recording);
}

#[tokio::test(flavor = "multi_thread")]
async fn gemini() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(
            "/v1beta/models/gemini-2.5-flash:streamGenerateContent",
        ))
        .and(query_param("alt", "sse"))
        .and(header("x-goog-api-key", KEY))
        .respond_with(gemini_stream("Hello from Gemini."))
        .expect(1)
        .mount(&server)
        .await;
    let vars = [
        ("GEMINI_API_KEY", KEY.to_string()),
        ("GEMINI_BASE_URL", server.uri()),
    ];
    let (r, recording) = run("gemini:gemini-2.5-flash", &vars, &[]).await;
    assert_eq!(
        (r.code, r.stdout.as_str()),
        (0, "Hello from Gemini.\n"),
        "{r:?}"
    );
    assert_no_key(&r, &recording);
}

#[tokio::test(flavor = "multi_thread")]
async fn ollama() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/api/chat"))
        .respond_with(ollama_stream("Hello from Ollama."))
        .expect(1)
        .mount(&server)
        .await;
    let (r, _) = run("ollama:qwen3:8b", &[("OLLAMA_HOST", server.uri())], &[]).await;
    assert_eq!(
        (r.code, r.stdout.as_str()),
        (0, "Hello from Ollama.\n"),
        "{r:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn lmstudio_at_a_given_address() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(openai_stream("Hello from LM Studio."))
        .expect(1)
        .mount(&server)
        .await;
    let base = format!("{}/v1", server.uri());
    let (r, recording) = run("lmstudio:qwen3-8b", &[], &["--base-url", &base]).await;
    assert_eq!(
        (r.code, r.stdout.as_str()),
        (0, "Hello from LM Studio.\n"),
        "{r:?}"
    );
    assert!(
        recording.contains("\"provider\": \"lmstudio\""),
        "{recording}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn server_with_its_own_key_never_gets_the_openai_key() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .and(header("authorization", format!("Bearer {KEY}").as_str()))
        .respond_with(openai_stream("Hello from vLLM."))
        .expect(1)
        .mount(&server)
        .await;
    let vars = [
        ("LRG_SERVER_URL", format!("{}/v1", server.uri())),
        ("LRG_SERVER_API_KEY", KEY.to_string()),
        ("OPENAI_API_KEY", "sk-must-not-be-sent".to_string()),
    ];
    let (r, recording) = run("server:my-model", &vars, &[]).await;
    assert_eq!(
        (r.code, r.stdout.as_str()),
        (0, "Hello from vLLM.\n"),
        "{r:?}"
    );
    assert_no_key(&r, &recording);
    for request in server.received_requests().await.unwrap() {
        let auth = request
            .headers
            .get("authorization")
            .unwrap()
            .to_str()
            .unwrap();
        assert!(!auth.contains("sk-must-not-be-sent"));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rejected_key_exits_1_and_is_not_echoed() {
    let server = MockServer::start().await;
    // A server that quotes the key back in its error, as some do.
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(ResponseTemplate::new(401).set_body_json(json!({"error": {
            "message": format!("Incorrect API key provided: {KEY}."), "type": "invalid_request_error",
            "code": "invalid_api_key"}})))
        .mount(&server)
        .await;
    let vars = [
        ("OPENAI_API_KEY", KEY.to_string()),
        ("OPENAI_BASE_URL", format!("{}/v1", server.uri())),
    ];
    for json in [false, true] {
        let extra: &[&str] = if json { &["--json"] } else { &[] };
        let (r, recording) = run("openai:gpt-4.1", &vars, extra).await;
        assert_eq!(r.code, 1, "{r:?}");
        assert!(
            format!("{}{}", r.stdout, r.stderr).contains("authentication failed"),
            "{r:?}"
        );
        assert_no_key(&r, &recording);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_error_is_retried_then_answered() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/api/chat"))
        .respond_with(ResponseTemplate::new(503).set_body_json(json!({"error": "server busy"})))
        .up_to_n_times(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/api/chat"))
        .respond_with(ollama_stream("Second time lucky."))
        .mount(&server)
        .await;
    let (r, recording) = run("ollama:qwen3:8b", &[("OLLAMA_HOST", server.uri())], &[]).await;
    assert_eq!(
        (r.code, r.stdout.as_str()),
        (0, "Second time lucky.\n"),
        "{r:?}"
    );
    assert!(r.stderr.contains("warning:"), "{r:?}");
    // Both attempts are in the recording, so a replay retries the same way.
    let rec: Value = serde_json::from_str(&recording).unwrap();
    assert_eq!(rec["exchanges"].as_array().unwrap().len(), 2);
    assert_eq!(rec["exchanges"][0]["error"]["kind"], "transient");
}

#[tokio::test(flavor = "multi_thread")]
async fn models_lists_reachable_providers_and_says_why_others_are_not() {
    let openai = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/v1/models"))
        .respond_with(
            ResponseTemplate::new(200).set_body_json(json!({"object": "list", "data": [
            {"id": "gpt-4.1", "object": "model", "created": 1, "owned_by": "system"}]})),
        )
        .mount(&openai)
        .await;
    let ollama = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/api/tags"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(json!({"models": [{"name": "qwen3:8b", "model": "qwen3:8b"}]})),
        )
        .mount(&ollama)
        .await;
    Mock::given(method("POST"))
        .and(path("/api/show"))
        .respond_with(ResponseTemplate::new(200).set_body_json(
            json!({"model_info": {"general.architecture": "qwen3", "qwen3.context_length": 40960}}),
        ))
        .mount(&ollama)
        .await;
    let vars = vec![
        ("OPENAI_API_KEY".to_string(), KEY.to_string()),
        (
            "OPENAI_BASE_URL".to_string(),
            format!("{}/v1", openai.uri()),
        ),
        ("OLLAMA_HOST".to_string(), ollama.uri()),
    ];
    let r = tokio::task::spawn_blocking(move || {
        let env = Env::new();
        let mut cmd = env.lrg();
        cmd.args(["models", "--json"]);
        for (k, v) in &vars {
            cmd.env(k, v);
        }
        ran(&mut cmd)
    })
    .await
    .unwrap();
    assert_eq!(r.code, 0, "{r:?}");
    assert!(!r.stdout.contains(KEY) && !r.stderr.contains(KEY));
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    let by = |name: &str| {
        v["providers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["provider"] == name)
            .unwrap()
            .clone()
    };
    assert_eq!(by("openai")["available"], true);
    assert_eq!(by("openai")["models"][0]["model"], "gpt-4.1");
    assert_eq!(by("ollama")["models"][0]["model"], "qwen3:8b");
    assert_eq!(by("ollama")["models"][0]["context_window"], 40960);
    assert_eq!(by("anthropic")["available"], false);
    assert!(
        by("anthropic")["reason"]
            .as_str()
            .unwrap()
            .contains("ANTHROPIC_API_KEY")
    );
    assert!(
        by("gemini")["reason"]
            .as_str()
            .unwrap()
            .contains("GEMINI_API_KEY")
    );
    assert!(
        by("server")["reason"]
            .as_str()
            .unwrap()
            .contains("LRG_SERVER_URL")
    );
    // LM Studio is probed at its fixed local address: reachable or not
    // depends on the machine, but it is always listed.
    assert!(by("lmstudio")["available"].is_boolean());
}

#[tokio::test(flavor = "multi_thread")]
async fn server_answering_with_a_hermes_text_call_runs_the_tool_with_tool_format_auto() {
    let server = MockServer::start().await;
    // The answer after the tool ran (its result is in the request).
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .and(wiremock::matchers::body_string_contains(
            "\"role\":\"tool\"",
        ))
        .respond_with(openai_stream("You have three notes."))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(openai_stream(
            "<think>List them.</think><tool_call>\n{\"name\": \"list_notes\", \"arguments\": {}}\n</tool_call>",
        ))
        .expect(1)
        .up_to_n_times(1)
        .mount(&server)
        .await;
    let vars = [("LRG_SERVER_URL", format!("{}/v1", server.uri()))];
    let (r, _) = run(
        "server:qwen3",
        &vars,
        &["--tool-format", "auto", "--mcp", "lrg demo-server"],
    )
    .await;
    assert_eq!(
        (r.code, r.stdout.as_str()),
        (0, "You have three notes.\n"),
        "{r:?}"
    );
    assert!(r.stderr.contains("→ list_notes {} [read]"), "{r:?}");
    assert!(!r.stdout.contains("tool_call"), "{r:?}");
}

/// Ollama's own API, with a model whose template has no tool support: with
/// `--tool-format hermes` the tools go in the system prompt, the Hermes text
/// the model answers with runs the tool, and its result goes back as text.
#[tokio::test(flavor = "multi_thread")]
async fn ollama_answering_with_a_hermes_text_call_runs_the_tool_with_tool_format_hermes() {
    let server = MockServer::start().await;
    // The answer after the tool ran (its result is in the request, as text).
    Mock::given(method("POST"))
        .and(path("/api/chat"))
        .and(wiremock::matchers::body_string_contains("<tool_response>"))
        .respond_with(ollama_stream("You have three notes."))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/api/chat"))
        .and(wiremock::matchers::body_string_contains("# Tools"))
        .respond_with(ollama_stream(
            "<tool_call>\n{\"name\": \"list_notes\", \"arguments\": {}}\n</tool_call>",
        ))
        .expect(1)
        .up_to_n_times(1)
        .mount(&server)
        .await;
    let (r, _) = run(
        "ollama:qwen3:8b",
        &[("OLLAMA_HOST", server.uri())],
        &["--tool-format", "hermes", "--mcp", "lrg demo-server"],
    )
    .await;
    assert_eq!(
        (r.code, r.stdout.as_str()),
        (0, "You have three notes.\n"),
        "{r:?}"
    );
    assert!(r.stderr.contains("→ list_notes {} [read]"), "{r:?}");
    assert!(!r.stdout.contains("tool_call"), "{r:?}");
    // The server was never sent tools natively.
    for request in server.received_requests().await.unwrap() {
        let body: Value = request.body_json().unwrap_or(Value::Null);
        assert!(body.get("tools").is_none(), "{body}");
    }
}

#[test]
fn an_unknown_tool_format_is_a_usage_error() {
    let r = ran(common::Env::new().lrg().args([
        "run",
        "--model",
        "server:qwen3",
        "--tool-format",
        "yaml",
        "hi",
    ]));
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("unknown tool format `yaml`"), "{r:?}");
}

/// `lrg run --json` on a call the server streams in fragments prints the
/// call's `tool_call_delta` lines, named on the first, before its numbered
/// `tool_call`, and their fragments join into the arguments.
#[tokio::test(flavor = "multi_thread")]
async fn json_run_prints_tool_call_deltas_before_the_call() {
    let server = MockServer::start().await;
    let chunk = |delta: Value, finish: Value| {
        json!({"id": "chatcmpl-2", "object": "chat.completion.chunk", "created": 1, "model": "m",
               "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    };
    let fragment =
        |text: &str| json!({"tool_calls": [{"index": 0, "function": {"arguments": text}}]});
    let call = sse(
        &[
            chunk(
                json!({"role": "assistant", "tool_calls": [{"index": 0, "id": "call_a", "type": "function",
                       "function": {"name": "find_notes", "arguments": ""}}]}),
                Value::Null,
            ),
            chunk(fragment("{\"query\":"), Value::Null),
            chunk(fragment(" \"milk\"}"), Value::Null),
            chunk(json!({}), json!("tool_calls")),
        ],
        true,
    );
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(call)
        .up_to_n_times(1)
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(openai_stream("No such tool."))
        .expect(1)
        .mount(&server)
        .await;
    let vars = [
        ("OPENAI_API_KEY", KEY.to_string()),
        ("OPENAI_BASE_URL", format!("{}/v1", server.uri())),
    ];
    let (r, _) = run("openai:gpt-4.1", &vars, &["--json"]).await;
    assert_eq!(r.code, 0, "{r:?}");
    let lines: Vec<Value> = r
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let deltas: Vec<usize> = (0..lines.len())
        .filter(|&i| lines[i]["type"] == "tool_call_delta")
        .collect();
    let call = lines
        .iter()
        .position(|l| l["type"] == "tool_call")
        .expect("a tool_call line");
    assert!(deltas.len() >= 2, "{}", r.stdout);
    assert!(deltas.iter().all(|&i| i < call), "{}", r.stdout);
    let first = &lines[deltas[0]];
    assert_eq!(
        (&first["call_id"], &first["tool"]),
        (&json!("call_a"), &json!("find_notes"))
    );
    assert!(first.get("seq").is_none(), "live only");
    let joined: String = deltas
        .iter()
        .map(|&i| lines[i]["arguments_fragment"].as_str().unwrap())
        .collect();
    assert_eq!(joined, r#"{"query": "milk"}"#);
    assert_eq!(lines[call]["arguments"], json!({"query": "milk"}));
}
