//! `lrg run` against server-everything's capability-gated tools, with a
//! fake OpenAI-compatible model (wiremock) scripted to call them: a form
//! question declined ("no one can answer in a non-interactive run") or
//! answered from `--answers FILE`, progress lines, and the roots (the
//! current directory and `--root`). Needs the npm fixtures in
//! tests-fixtures/mcp (skipped with a notice without them, failed under
//! `CI`).

use std::path::PathBuf;
use std::sync::Mutex;

use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

use crate::common::{Env, Ran, ran};

fn everything() -> Option<PathBuf> {
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
    assert!(
        std::env::var_os("CI").is_none(),
        "npm MCP fixtures are required under CI (run `npm ci` in tests-fixtures/mcp)"
    );
    eprintln!("SKIPPED: mcp_answers: server-everything or node is missing");
    None
}

/// The fake model: calls `tool` with `args` once, then answers "done".
struct OneCall(Mutex<Option<(String, Value)>>);

fn sse(delta: Value, finish: &str) -> String {
    let chunk = |delta: Value, finish: Option<&str>| {
        json!({"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4.1",
               "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    };
    format!(
        "data: {}\n\ndata: {}\n\ndata: [DONE]\n\n",
        chunk(delta, None),
        chunk(json!({}), Some(finish))
    )
}

impl Respond for OneCall {
    fn respond(&self, _request: &Request) -> ResponseTemplate {
        let body = match self.0.lock().unwrap().take() {
            Some((tool, args)) => sse(
                json!({"role": "assistant", "tool_calls": [{"index": 0, "id": "c1", "type": "function",
                       "function": {"name": tool, "arguments": args.to_string()}}]}),
                "tool_calls",
            ),
            None => sse(json!({"role": "assistant", "content": "done"}), "stop"),
        };
        ResponseTemplate::new(200).set_body_raw(body, "text/event-stream")
    }
}

/// `lrg run --json` with the model calling `tool`; its JSON lines.
async fn run(env: Env, tool: &str, args: Value, extra: &[&str]) -> (Ran, Vec<Value>) {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(OneCall(Mutex::new(Some((tool.to_owned(), args)))))
        .mount(&server)
        .await;
    let base = format!("{}/v1", server.uri());
    let extra: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
    let r = tokio::task::spawn_blocking(move || {
        let mut cmd = env.lrg();
        cmd.env("OPENAI_API_KEY", "sk-test-answers-0123456789")
            .env("OPENAI_BASE_URL", base)
            .args([
                "run",
                "--json",
                "--yes",
                "--model",
                "openai:gpt-4.1",
                "--mcp-config",
                "mcp.json",
            ])
            .args(&extra)
            .arg("go");
        ran(&mut cmd)
    })
    .await
    .unwrap();
    let lines = r
        .stdout
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    (r, lines)
}

fn env() -> Option<Env> {
    let script = everything()?;
    let env = Env::new();
    env.file(
        "mcp.json",
        &json!({"mcpServers": {"everything": {"command": "node",
            "args": [script.to_string_lossy(), "stdio"]}}})
        .to_string(),
    );
    Some(env)
}

fn of_type<'a>(lines: &'a [Value], t: &str) -> Vec<&'a Value> {
    lines.iter().filter(|l| l["type"] == t).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_declines_questions_unless_given_answers() {
    let Some(env) = env() else {
        return;
    };
    let (r, lines) = run(env, "trigger-elicitation-request", json!({}), &[]).await;
    assert_eq!(r.code, 0, "{r:?}");
    let q = of_type(&lines, "question");
    assert_eq!(q.len(), 1, "{r:?}");
    assert_eq!(q[0]["server"], "everything");
    assert_eq!(q[0]["mode"], "form");
    assert!(q[0]["seq"].is_u64(), "numbered");
    let a = of_type(&lines, "question_answered");
    assert_eq!(a[0]["action"], "decline", "{r:?}");
    assert_eq!(a[0]["reason"], "no one can answer in a non-interactive run");
    let done = of_type(&lines, "tool_done");
    let text = done[0]["text"].as_str().unwrap();
    assert!(text.contains("declined"), "{text}");
    // The server is told why.
    assert!(
        text.contains("no one can answer in a non-interactive run"),
        "{text}"
    );

    let Some(env) = self::env() else {
        return;
    };
    env.file(
        "answers.json",
        &json!({"everything": {"name": "Ada", "email": "ada@example.com"}}).to_string(),
    );
    let (r, lines) = run(
        env,
        "trigger-elicitation-request",
        json!({}),
        &["--answers", "answers.json"],
    )
    .await;
    assert_eq!(r.code, 0, "{r:?}");
    let a = of_type(&lines, "question_answered");
    assert_eq!(a[0]["action"], "accept", "{r:?}");
    // Fields the file leaves out take the form's defaults.
    assert_eq!(a[0]["content"]["name"], "Ada");
    assert_eq!(a[0]["content"]["integer"], 42);
    let text = of_type(&lines, "tool_done")[0]["text"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        text.contains("Name: Ada") && text.contains("Email: ada@example.com"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_answers_files_are_refused_or_declined() {
    let Some(env) = env() else {
        return;
    };
    env.file("answers.json", "[1, 2]");
    let (r, _) = run(
        env,
        "trigger-elicitation-request",
        json!({}),
        &["--answers", "answers.json"],
    )
    .await;
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("--answers answers.json"), "{r:?}");

    let Some(env) = self::env() else {
        return;
    };
    env.file(
        "answers.json",
        &json!({"everything": {"integer": 500}}).to_string(),
    );
    let (r, lines) = run(
        env,
        "trigger-elicitation-request",
        json!({}),
        &["--answers", "answers.json"],
    )
    .await;
    assert_eq!(r.code, 0, "{r:?}");
    let a = of_type(&lines, "question_answered");
    assert_eq!(a[0]["action"], "decline", "{r:?}");
    let reason = a[0]["reason"].as_str().unwrap();
    assert!(
        reason.contains("name") || reason.contains("integer"),
        "{reason}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn progress_lines_and_roots() {
    let Some(env) = env() else {
        return;
    };
    let (r, lines) = run(
        env,
        "trigger-long-running-operation",
        json!({"duration": 1, "steps": 3}),
        &[],
    )
    .await;
    assert_eq!(r.code, 0, "{r:?}");
    let progress: Vec<(f64, f64)> = of_type(&lines, "tool_progress")
        .iter()
        .map(|p| {
            (
                p["progress"].as_f64().unwrap(),
                p["total"].as_f64().unwrap(),
            )
        })
        .collect();
    assert_eq!(progress, vec![(1.0, 3.0), (2.0, 3.0), (3.0, 3.0)], "{r:?}");
    assert!(
        of_type(&lines, "tool_progress")[0].get("seq").is_none(),
        "live only"
    );

    let Some(env) = self::env() else {
        return;
    };
    let extra = tempfile::tempdir().unwrap();
    let extra_dir = extra.path().to_string_lossy().into_owned();
    let here = std::fs::canonicalize(env.dir.path()).unwrap();
    let (r, lines) = run(env, "get-roots-list", json!({}), &["--root", &extra_dir]).await;
    assert_eq!(r.code, 0, "{r:?}");
    let text = of_type(&lines, "tool_done")[0]["text"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(text.contains("(2 total)"), "{text}");
    assert!(
        text.contains(&format!("file://{}", here.display())),
        "{text}"
    );
}

/// `lrg chat` asks the form field by field in a terminal: a required field
/// left empty and a bad email are asked again, Enter keeps a default.
#[cfg(unix)]
#[test]
#[ignore = "flaky since session 11: about 1 run in 4 the next field's prompt never comes (a 30 s timeout mid-form); run with --ignored while it is investigated"]
fn lrg_chat_asks_field_by_field() {
    use rexpect::reader::Options;
    use rexpect::session::spawn_with_options;

    let Some(env) = env() else {
        return;
    };
    env.file(
        "s.json",
        &crate::common::call_then_reply("trigger-elicitation-request", "{}", "thanks"),
    );
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_lrg"));
    cmd.args([
        "chat",
        "--yes",
        "--model",
        "script:s.json",
        "--mcp-config",
        "mcp.json",
    ])
    .env_clear()
    .env("PATH", std::env::var("PATH").unwrap_or_default())
    .env("OLLAMA_HOST", "http://127.0.0.1:9")
    .env("XDG_CONFIG_HOME", env.path("config"))
    .env("XDG_DATA_HOME", env.path("data"))
    .env("TERM", "xterm")
    .current_dir(env.dir.path());
    let mut p = spawn_with_options(cmd, Options::new().timeout_ms(Some(30_000))).unwrap();
    p.exp_string("lrg chat").unwrap();
    p.exp_string("> ").unwrap();
    p.send_line("sign me up").unwrap();
    p.exp_string("everything asks (question 1)").unwrap();
    let (mut name_asked, mut email_asked) = (0, 0);
    // 13 fields, two of them asked twice.
    for _ in 0..15 {
        let before = p.exp_string(" > ").unwrap();
        let line = before.rsplit('\n').next().unwrap_or_default().to_owned();
        if line.contains("Your full, legal name") {
            // Left empty first: it is required, so it is asked again.
            name_asked += 1;
            p.send_line(if name_asked == 1 { "" } else { "Ada" })
                .unwrap();
        } else if line.contains("Your email address") {
            email_asked += 1;
            p.send_line(if email_asked == 1 {
                "not-an-email"
            } else {
                "ada@example.com"
            })
            .unwrap();
        } else {
            // Enter: the default, or nothing for an optional field.
            p.send_line("").unwrap();
        }
    }
    let rest = p.exp_string("thanks").unwrap();
    assert!(name_asked >= 2, "the empty required name was asked again");
    assert!(email_asked >= 2, "the bad email was asked again");
    assert!(
        rest.contains("question 1: accept") || rest.contains("User provided"),
        "{rest}"
    );
    p.send_control('d').unwrap();
    p.exp_eof().unwrap();
}
