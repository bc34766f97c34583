//! `--temperature`, `--max-tokens`, `--top-p`, `--seed` and `--stop` as a
//! user gives them: they reach a fake server's request body in the API's own
//! names, a reasoning model is spared what it refuses, and an out-of-range
//! value is a usage error (exit 2) that names the flag's rule.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::{Env, Ran, ran};
use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

const SETTINGS: &[&str] = &[
    "--temperature",
    "0.3",
    "--max-tokens",
    "64",
    "--top-p",
    "0.8",
    "--seed",
    "9",
    "--stop",
    "END",
    "--stop",
    "STOP",
];

/// `lrg run --model MODEL ARGS... hi` with `vars` set, in a blocking thread
/// (the fake server lives on this test's runtime).
async fn run(model: &str, vars: Vec<(&'static str, String)>, args: &[&str]) -> Ran {
    let model = model.to_string();
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    tokio::task::spawn_blocking(move || {
        let env = Env::new();
        let mut cmd = env.lrg();
        cmd.args(["run", "--model", &model]).args(&args).arg("hi");
        for (k, v) in vars {
            cmd.env(k, v);
        }
        ran(&mut cmd)
    })
    .await
    .unwrap()
}

async fn body(server: &MockServer) -> Value {
    let requests = server.received_requests().await.unwrap();
    let chat: Vec<_> = requests
        .iter()
        .filter(|r| r.method.as_str() == "POST")
        .collect();
    assert_eq!(chat.len(), 1, "one chat request");
    chat[0].body_json().unwrap()
}

/// A fake Ollama that answers "ok" to one chat request.
async fn fake_ollama() -> MockServer {
    let server = MockServer::start().await;
    let lines = [
        json!({"model": "qwen3:8b", "message": {"role": "assistant", "content": "ok"}, "done": false}),
        json!({"model": "qwen3:8b", "message": {"role": "assistant", "content": ""}, "done": true,
               "done_reason": "stop", "prompt_eval_count": 10, "eval_count": 5}),
    ];
    let stream: String = lines.iter().map(|l| format!("{l}\n")).collect();
    Mock::given(method("POST"))
        .and(path("/api/chat"))
        .respond_with(ResponseTemplate::new(200).set_body_raw(stream, "application/x-ndjson"))
        .expect(1)
        .mount(&server)
        .await;
    server
}

#[tokio::test(flavor = "multi_thread")]
async fn ollama_gets_every_setting_in_its_options() {
    let server = fake_ollama().await;
    let r = run(
        "ollama:qwen3:8b",
        vec![("OLLAMA_HOST", server.uri())],
        SETTINGS,
    )
    .await;
    assert_eq!((r.code, r.stdout.as_str()), (0, "ok\n"), "{r:?}");
    let options = &body(&server).await["options"];
    assert_eq!(options["num_predict"], 64);
    assert_eq!(options["temperature"], 0.3);
    assert_eq!(options["top_p"], 0.8);
    assert_eq!(options["seed"], 9);
    assert_eq!(options["stop"], json!(["END", "STOP"]));
}

#[tokio::test(flavor = "multi_thread")]
async fn an_openai_reasoning_model_gets_only_what_it_accepts() {
    let server = MockServer::start().await;
    let chunks = [
        json!({"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "o4-mini",
               "choices": [{"index": 0, "delta": {"role": "assistant", "content": "ok"}, "finish_reason": null}]}),
        json!({"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "o4-mini",
               "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
    ];
    let mut stream: String = chunks.iter().map(|c| format!("data: {c}\n\n")).collect();
    stream.push_str("data: [DONE]\n\n");
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(ResponseTemplate::new(200).set_body_raw(stream, "text/event-stream"))
        .expect(1)
        .mount(&server)
        .await;
    let vars = vec![
        (
            "OPENAI_API_KEY",
            "sk-test-generation-0123456789".to_string(),
        ),
        ("OPENAI_BASE_URL", format!("{}/v1", server.uri())),
    ];
    let r = run("openai:o4-mini", vars, SETTINGS).await;
    assert_eq!((r.code, r.stdout.as_str()), (0, "ok\n"), "{r:?}");
    let body = body(&server).await;
    assert_eq!(body["max_completion_tokens"], 64);
    assert_eq!(body["seed"], 9);
    for dropped in ["temperature", "top_p", "stop", "max_tokens"] {
        assert!(body.get(dropped).is_none(), "{dropped} in {body}");
    }
}

#[test]
fn out_of_range_settings_are_usage_errors() {
    let env = Env::new();
    env.file("s.json", r#"[{"text":"hi"}]"#);
    let run = |flags: &[&str]| {
        let mut args = vec!["run", "--model", "script:s.json"];
        args.extend_from_slice(flags);
        args.push("hi");
        args.iter().map(|s| s.to_string()).collect::<Vec<_>>()
    };
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            run(&["--temperature", "2.5"]),
            "temperature must be between 0 and 2, got 2.5",
        ),
        (run(&["--temperature", "warm"]), "`warm` is not a number"),
        (run(&["--max-tokens", "0"]), "--max-tokens <N>"),
        (run(&["--seed=-1"]), "--seed <N>"),
        (run(&["--stop", ""]), "--stop <TEXT>"),
        (
            vec!["chat".into(), "--top-p".into(), "1.5".into()],
            "top_p must be between 0 and 1, got 1.5",
        ),
        (
            vec!["serve".into(), "--temperature=-0.1".into()],
            "temperature must be between 0 and 2",
        ),
    ];
    for (args, expected) in &cases {
        let r = ran(env.lrg().args(args));
        assert_eq!(r.code, 2, "{args:?}: {r:?}");
        assert!(r.stderr.contains(expected), "{args:?}: {r:?}");
    }
}

#[test]
fn the_help_lists_the_settings() {
    let r = ran(Env::new().lrg().args(["run", "--help"]));
    for flag in [
        "--temperature <T>",
        "--max-tokens <N>",
        "--top-p <P>",
        "--seed <N>",
        "--stop <TEXT>",
    ] {
        assert!(r.stdout.contains(flag), "{flag}: {r:?}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_scenario_file_sets_them_in_its_generation_table() {
    let server = fake_ollama().await;
    let scenario = format!(
        r#"
model = "ollama:qwen3:8b"
base_url = "{}"
message = "hi"
expect.reply.contains = ["ok"]

[generation]
temperature = 0.25
seed = 7
stop = ["END"]
"#,
        server.uri()
    );
    let r = tokio::task::spawn_blocking(move || {
        let env = Env::new();
        env.file("settings.test.toml", &scenario);
        ran(env.lrg().args(["test", "settings.test.toml"]))
    })
    .await
    .unwrap();
    assert_eq!(r.code, 0, "{r:?}");
    let options = &body(&server).await["options"];
    assert_eq!(options["temperature"], 0.25);
    assert_eq!(options["seed"], 7);
    assert_eq!(options["stop"], json!(["END"]));
}

#[test]
fn a_scenario_setting_out_of_range_is_named_with_its_line() {
    let env = Env::new();
    env.file("s.json", r#"[{"text":"hi"}]"#);
    env.file(
        "bad.test.toml",
        "model = \"script:s.json\"\nmessage = \"hi\"\n\n[generation]\ntemperature = 5\n",
    );
    let r = ran(env.lrg().args(["test", "bad.test.toml"]));
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr.contains(
            "bad.test.toml:5: field `generation.temperature`: temperature must be between 0 and 2"
        ),
        "{r:?}"
    );
    let r = ran(env.lrg().args(["test", "--schema"]));
    assert!(r.stdout.contains("\"top_p\""), "{r:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn serve_gives_every_chat_the_settings() {
    use std::io::BufRead as _;
    use std::process::{Command, Stdio};
    use std::time::Duration;

    let server = fake_ollama().await;
    let env = Env::new();
    let mut child = Command::new(env!("CARGO_BIN_EXE_lrg"))
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("OLLAMA_HOST", server.uri())
        .env("LRG_AGENT_TOKEN", "agent-token-for-the-settings-test")
        .current_dir(env.dir.path())
        .args(["serve", "--port", "0", "--model", "ollama:qwen3:8b"])
        .args(["--temperature", "0.4", "--seed", "3", "--max-tokens", "77"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // The page URL, read on a thread so a silent server fails the test.
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = std::io::BufReader::new(stdout).read_line(&mut line);
        let _ = tx.send(line);
    });
    let url = rx.recv_timeout(Duration::from_secs(60)).unwrap();
    let (page, fragment) = url.trim().split_once('#').unwrap();
    let params: std::collections::HashMap<_, _> = fragment
        .split('&')
        .filter_map(|p| p.split_once('='))
        .collect();
    let origin = page.trim_end_matches("/v1/ui/chat");
    lrg_providers::transport::ensure_tls_provider();
    let sent = reqwest::Client::new()
        .post(format!(
            "{origin}/v1/chat/sessions/{}/messages",
            params["session"]
        ))
        .bearer_auth(params["token"])
        .header("origin", origin)
        .json(&json!({"text": "hi"}))
        .send()
        .await
        .unwrap();
    assert_eq!(sent.status(), 202);
    let mut chat = None;
    for _ in 0..100 {
        let requests = server.received_requests().await.unwrap();
        chat = requests
            .into_iter()
            .find(|r| r.url.path() == "/api/chat")
            .map(|r| r.body_json::<Value>().unwrap());
        if chat.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let _ = child.kill();
    let _ = child.wait();
    let body = chat.expect("the chat reached the model");
    let options = &body["options"];
    assert_eq!(options["temperature"], 0.4);
    assert_eq!(options["seed"], 3);
    assert_eq!(options["num_predict"], 77);
}
