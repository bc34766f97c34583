//! `lrg resources`, `lrg prompts` and a scripted run against
//! server-everything (npm fixtures in tests-fixtures/mcp; skipped with a
//! notice without them, failed under `CI`): a fake OpenAI-compatible model
//! (wiremock) calls `get-resource-links`, follows a link with
//! `read_mcp_resource`, and calls `get-structured-content`, and `lrg run
//! --json` prints the typed links and the structured result.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

use crate::common::{Env, Ran, ran};

/// server-everything's entry script, or `None` (after a notice) when the
/// fixtures are not installed; panics instead under CI.
fn everything_script() -> Option<PathBuf> {
    let script = crate::common::repo_root().join(
        "tests-fixtures/mcp/node_modules/@modelcontextprotocol/server-everything/dist/index.js",
    );
    let node = std::process::Command::new("node")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if script.is_file() && node {
        return Some(script);
    }
    let why = if node {
        format!(
            "{} is missing; run `npm ci` in tests-fixtures/mcp",
            script.display()
        )
    } else {
        "node is not installed".to_owned()
    };
    assert!(
        std::env::var_os("CI").is_none(),
        "npm MCP fixtures are required under CI: {why}"
    );
    eprintln!("SKIPPED: resources_cmd: {why}");
    None
}

/// A scratch dir whose `mcp.json` names server-everything `everything`.
fn env_with_everything() -> Option<Env> {
    let script = everything_script()?;
    let env = Env::new();
    env.file(
        "mcp.json",
        &json!({"mcpServers": {"everything": {"command": "node",
            "args": [script.to_string_lossy(), "stdio"]}}})
        .to_string(),
    );
    Some(env)
}

fn lrg(env: &Env, args: &[&str]) -> Ran {
    ran(env.lrg().args(args))
}

#[test]
fn lrg_resources_lists_and_reads() {
    let Some(env) = env_with_everything() else {
        return;
    };
    let r = lrg(&env, &["resources", "--json", "--mcp-config", "mcp.json"]);
    assert_eq!(r.code, 0, "{r:?}");
    let out: Value = serde_json::from_str(&r.stdout).unwrap();
    let doc = out["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| {
            r["uri"]
                .as_str()
                .unwrap()
                .starts_with("demo://resource/static/document/")
        })
        .unwrap_or_else(|| panic!("{out}"))
        .clone();
    assert_eq!(doc["server"], "everything");
    assert!(
        doc["name"].is_string() && doc.get("mimeType").is_some(),
        "{doc}"
    );
    assert!(
        out["templates"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["uriTemplate"] == "demo://resource/dynamic/text/{resourceId}"),
        "{out}"
    );

    let r = lrg(
        &env,
        &[
            "resources",
            "--mcp-config",
            "mcp.json",
            "--read",
            "demo://resource/dynamic/text/3",
            "--server",
            "everything",
        ],
    );
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stdout
            .starts_with("Resource 3: This is a plaintext resource"),
        "{r:?}"
    );
    let r = lrg(
        &env,
        &[
            "resources",
            "--mcp-config",
            "mcp.json",
            "--read",
            "demo://resource/dynamic/text/3",
            "--server",
            "nobody",
        ],
    );
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr
            .contains("there is no tool server `nobody` (servers: everything)"),
        "{r:?}"
    );
    let r = lrg(
        &env,
        &["resources", "--mcp-config", "mcp.json", "--read", "x://y"],
    );
    assert_eq!(r.code, 2, "--read needs --server: {r:?}");
}

#[test]
fn lrg_prompts_lists_their_arguments() {
    let Some(env) = env_with_everything() else {
        return;
    };
    let r = lrg(&env, &["prompts", "--json", "--mcp-config", "mcp.json"]);
    assert_eq!(r.code, 0, "{r:?}");
    let out: Value = serde_json::from_str(&r.stdout).unwrap();
    let p = out["prompts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "args-prompt")
        .unwrap_or_else(|| panic!("{out}"))
        .clone();
    assert_eq!(p["server"], "everything");
    assert_eq!(
        p["arguments"],
        json!([
            {"name": "city", "description": "Name of the city", "required": true},
            // The server's optional argument comes without its description.
            {"name": "state", "description": null, "required": false}
        ])
    );
    let r = lrg(&env, &["prompts", "--mcp-config", "mcp.json"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stdout
            .contains("/prompt everything/args-prompt city=… [state=…]"),
        "{r:?}"
    );
}

/// The fake model's answers, one per request in order: tool calls, then
/// a reply.
struct Script {
    turns: Vec<String>,
    next: AtomicUsize,
}

fn chunk(delta: Value, finish: Option<&str>) -> String {
    let c = json!({"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4.1",
                   "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
    format!("data: {c}\n\n")
}

fn tool_call(id: &str, name: &str, args: Value) -> String {
    let call = json!({"role": "assistant", "tool_calls": [{"index": 0, "id": id, "type": "function",
        "function": {"name": name, "arguments": args.to_string()}}]});
    format!(
        "{}{}data: [DONE]\n\n",
        chunk(call, None),
        chunk(json!({}), Some("tool_calls"))
    )
}

fn answer(text: &str) -> String {
    format!(
        "{}{}data: [DONE]\n\n",
        chunk(json!({"role": "assistant", "content": text}), None),
        chunk(json!({}), Some("stop"))
    )
}

impl Respond for Script {
    fn respond(&self, _request: &Request) -> ResponseTemplate {
        let n = self.next.fetch_add(1, Ordering::SeqCst);
        let body = self
            .turns
            .get(n)
            .cloned()
            .unwrap_or_else(|| answer("(no more turns)"));
        ResponseTemplate::new(200).set_body_raw(body, "text/event-stream")
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_model_follows_a_link_and_gets_structured_content() {
    let Some(env) = env_with_everything() else {
        return;
    };
    let server = MockServer::start().await;
    let turns = vec![
        tool_call("c1", "get-resource-links", json!({"count": 2})),
        tool_call(
            "c2",
            "read_mcp_resource",
            json!({"server": "everything", "uri": "demo://resource/dynamic/text/2"}),
        ),
        tool_call(
            "c3",
            "get-structured-content",
            json!({"location": "New York"}),
        ),
        answer("It is cloudy in New York."),
    ];
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(Script {
            turns,
            next: AtomicUsize::new(0),
        })
        .mount(&server)
        .await;
    let base = format!("{}/v1", server.uri());
    let dir = env.dir.path().to_path_buf();
    let r = tokio::task::spawn_blocking(move || {
        let mut cmd = env.lrg();
        cmd.current_dir(&dir)
            .env("OPENAI_API_KEY", "sk-test-resources-0123456789")
            .env("OPENAI_BASE_URL", base)
            .args([
                "run",
                "--json",
                "--model",
                "openai:gpt-4.1",
                "--mcp-config",
                "mcp.json",
                "what is there?",
            ]);
        ran(&mut cmd)
    })
    .await
    .unwrap();
    assert_eq!(r.code, 0, "{r:?}");
    let events: Vec<Value> = r
        .stdout
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let done = |id: &str| {
        events
            .iter()
            .find(|e| e["type"] == "tool_done" && e["call_id"] == id)
            .unwrap_or_else(|| panic!("no tool_done for {id}: {r:?}"))
            .clone()
    };
    let links = done("c1");
    assert_eq!(links["ok"], true, "{links}");
    assert_eq!(
        links["resources"][1]["uri"], "demo://resource/dynamic/text/2",
        "{links}"
    );
    assert_eq!(links["resources"][1]["server"], "everything");
    assert_eq!(links["resources"][1]["embedded"], false);
    let read = done("c2");
    assert!(
        read["text"]
            .as_str()
            .unwrap()
            .contains("Resource 2: This is a plaintext resource"),
        "{read}"
    );
    let weather = done("c3");
    assert_eq!(
        weather["structured"],
        json!({"temperature": 33, "conditions": "Cloudy", "humidity": 82}),
        "{weather}"
    );
    // What the model was sent: the link with how to read it, and the read.
    let requests = server.received_requests().await.unwrap();
    assert_eq!(requests.len(), 4);
    let last: Value = requests[3].body_json().unwrap();
    let sent = last["messages"].to_string();
    assert!(sent.contains("read_mcp_resource"), "{sent}");
    assert!(
        sent.contains("Resource 2: This is a plaintext resource"),
        "{sent}"
    );
    let tools: Vec<&str> = last["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert!(tools.contains(&"list_mcp_resource_templates"), "{tools:?}");
}

#[test]
fn chat_sends_a_prompt_and_names_what_a_missing_argument_may_be() {
    let Some(env) = env_with_everything() else {
        return;
    };
    env.file("s.json", r#"[{"text":"Sunny."}]"#);
    let r = ran(env
        .lrg()
        .args([
            "chat",
            "--model",
            "script:s.json",
            "--mcp-config",
            "mcp.json",
        ])
        .write_stdin(
            "/prompt everything/args-prompt city=Paris\n\
             /prompt everything/completable-prompt department=Sales\n\
             /prompt everything/nope\n",
        ));
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stderr.contains("prompt: What's weather in Paris?"),
        "{r:?}"
    );
    assert_eq!(r.stdout.trim(), "Sunny.", "{r:?}");
    // completion/complete offers three leaders for Sales: the person picks.
    assert!(
        r.stderr.contains(
            "everything/completable-prompt needs name=…; the server suggests: David, Eve, Frank"
        ),
        "{r:?}"
    );
    assert!(
        r.stderr.contains("no prompt everything/nope (prompts: "),
        "{r:?}"
    );
}
