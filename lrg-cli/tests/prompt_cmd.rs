//! `lrg prompt` and the prompt sections as a user meets them: in a
//! repository with AGENTS.md files and a skill, `lrg prompt` prints each
//! section labelled and the tools, `--json` the same as data; `lrg run`
//! sends AGENTS.md to the model; `--memory` keeps what `remember` is given
//! when the call is approved.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::{Env, Ran, call_then_reply, ran};
use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

/// A repository in the scratch directory: `.git`, `AGENTS.md`,
/// `src/AGENTS.md` and a skill in `.lrg/skills/review/`.
fn repo() -> Env {
    let env = Env::new();
    let root = env.dir.path();
    std::fs::create_dir_all(root.join(".git")).unwrap();
    std::fs::create_dir_all(root.join("src")).unwrap();
    std::fs::create_dir_all(root.join(".lrg/skills/review")).unwrap();
    env.file(
        "AGENTS.md",
        "# Conventions\n\nRun `cargo fmt` before you finish.\n",
    );
    env.file("src/AGENTS.md", "Code here is async: never block.\n");
    env.file(
        ".lrg/skills/review/SKILL.md",
        "---\nname: review\ndescription: Review a change for bugs and style.\n---\nRead the diff.\n",
    );
    env
}

/// `lrg ARGS` run in `dir` under the scratch directory.
fn lrg_in(env: &Env, dir: &str, args: &[&str]) -> Ran {
    let mut cmd = env.lrg();
    cmd.current_dir(env.path(dir)).args(args);
    ran(&mut cmd)
}

/// `text` with the scratch directory's path written as `[TMP]`.
fn redacted(env: &Env, text: &str) -> String {
    let real = std::fs::canonicalize(env.dir.path()).unwrap();
    text.replace(&real.display().to_string(), "[TMP]")
        .replace(&env.dir.path().display().to_string(), "[TMP]")
}

#[test]
fn lrg_prompt_prints_each_section_labelled_then_the_tools() {
    let env = repo();
    let r = lrg_in(&env, "src", &["prompt", "--system", "Be brief."]);
    assert_eq!(r.code, 0, "{r:?}");
    insta::assert_snapshot!("prompt_text", redacted(&env, &r.stdout));
}

#[test]
fn lrg_prompt_json_gives_the_sections_the_tools_and_the_model() {
    let env = repo();
    env.file("memory.md", "- The user is Ada.\n");
    let r = lrg_in(
        &env,
        "src",
        &["prompt", "--json", "--memory", "../memory.md"],
    );
    assert_eq!(r.code, 0, "{r:?}");
    let json: Value = serde_json::from_str(&redacted(&env, &r.stdout)).unwrap();
    let names: Vec<&str> = json["sections"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["project", "project", "skills", "memory"]);
    assert_eq!(json["sections"][0]["source"], "[TMP]/AGENTS.md");
    assert_eq!(json["sections"][1]["source"], "[TMP]/src/AGENTS.md");
    assert_eq!(json["model"], Value::Null);
    insta::with_settings!({ sort_maps => true }, {
        insta::assert_json_snapshot!("prompt_json", json);
    });
}

#[test]
fn no_project_context_leaves_out_agents_md_and_the_projects_skills() {
    let env = repo();
    let r = lrg_in(&env, "src", &["prompt", "--json", "--no-project-context"]);
    assert_eq!(r.code, 0, "{r:?}");
    let json: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(json["sections"], json!([]));
    assert_eq!(json["tools"], json!([]));
    let r = lrg_in(&env, "src", &["prompt", "--no-project-context"]);
    assert!(r.stdout.contains("(no system prompt)"), "{r:?}");
}

#[test]
fn the_config_files_project_doc_names_are_read_in_their_order() {
    let env = repo();
    env.file("CLAUDE.md", "From CLAUDE.md.\n");
    std::fs::create_dir_all(env.path("config/lrg")).unwrap();
    env.file(
        "config/lrg/config.toml",
        "project_doc_names = [\"CLAUDE.md\", \"AGENTS.md\"]\n",
    );
    let r = lrg_in(&env, "", &["prompt", "--json"]);
    assert_eq!(r.code, 0, "{r:?}");
    let json: Value = serde_json::from_str(&r.stdout).unwrap();
    let texts: Vec<&str> = json["sections"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["name"] == "project")
        .map(|s| s["text"].as_str().unwrap())
        .collect();
    assert_eq!(texts.len(), 2, "{texts:?}");
    assert!(texts[0].ends_with("From CLAUDE.md."), "{texts:?}");
    assert!(texts[1].contains("Run `cargo fmt`"), "{texts:?}");
}

#[test]
fn output_schema_shows_the_typed_instructions_the_session_adds() {
    let env = Env::new();
    env.file(
        "answer.json",
        r#"{"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}"#,
    );
    let r = lrg_in(
        &env,
        "",
        &[
            "prompt",
            "--json",
            "--system",
            "Count.",
            "--output-schema",
            "answer.json",
        ],
    );
    assert_eq!(r.code, 0, "{r:?}");
    let json: Value = serde_json::from_str(&r.stdout).unwrap();
    let sections = json["sections"].as_array().unwrap();
    assert_eq!(sections.len(), 2, "{json}");
    assert_eq!(sections[0]["text"], "Count.");
    assert_eq!(sections[1]["name"], "typed");
    assert_eq!(sections[1]["added_by"], "session");
    assert!(
        sections[1]["text"].as_str().unwrap().contains(
            r#"{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}"#
        ),
        "{json}"
    );
}

#[test]
fn a_skills_folder_that_does_not_exist_is_a_usage_error() {
    let env = repo();
    let r = lrg_in(&env, "", &["prompt", "--skills", "nowhere"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("--skills nowhere: not a folder"), "{r:?}");
}

/// A fake Ollama that answers "ok".
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
        .mount(&server)
        .await;
    server
}

#[tokio::test(flavor = "multi_thread")]
async fn lrg_run_in_a_repository_sends_its_agents_md() {
    let server = fake_ollama().await;
    let uri = server.uri();
    let r = tokio::task::spawn_blocking(move || {
        let env = repo();
        let mut cmd = env.lrg();
        cmd.current_dir(env.path("src"))
            .env("OLLAMA_HOST", uri)
            .args([
                "run",
                "--model",
                "ollama:qwen3:8b",
                "--system",
                "Be brief.",
                "hi",
            ]);
        ran(&mut cmd)
    })
    .await
    .unwrap();
    assert_eq!((r.code, r.stdout.as_str()), (0, "ok\n"), "{r:?}");
    let requests = server.received_requests().await.unwrap();
    let body: Value = requests
        .iter()
        .find(|r| r.url.path() == "/api/chat")
        .unwrap()
        .body_json()
        .unwrap();
    let system = body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "system")
        .and_then(|m| m["content"].as_str())
        .unwrap()
        .to_owned();
    assert!(
        system.starts_with("Be brief.\n\nProject instructions from AGENTS.md:\n\n# Conventions"),
        "{system}"
    );
    assert!(
        system.contains("src/AGENTS.md (nearer the working directory")
            && system.contains("Code here is async: never block."),
        "{system}"
    );
    assert!(system.contains("- review: Review a change for bugs and style."));
    // The skill can be loaded: its tool went with the request.
    let tools: Vec<&str> = body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(tools, ["load_skill"]);
}

#[test]
fn remember_writes_the_memory_file_once_approved_and_not_before() {
    let env = Env::new();
    env.file(
        "script.json",
        &call_then_reply("remember", r#"{"fact": "Ada likes tabs."}"#, "Noted."),
    );
    // Nobody to ask (stdin is not a terminal): the change-class call is denied.
    let r = ran(env.lrg().args([
        "run",
        "--model",
        "script:script.json",
        "--memory",
        "memory.md",
        "remember this",
    ]));
    assert_eq!(r.code, 0, "{r:?}");
    assert!(!env.path("memory.md").exists(), "{r:?}");
    // Approved (--yes): kept.
    let r = ran(env.lrg().args([
        "run",
        "--model",
        "script:script.json",
        "--memory",
        "memory.md",
        "--yes",
        "remember this",
    ]));
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(env.read("memory.md"), "- Ada likes tabs.\n");
}

/// The sections' names of the first chat of `lrg serve ARGS` in `env`'s
/// repository (`/prompt` with the printed page URL's token).
async fn served_sections(env: &Env, extra: &[&str]) -> Vec<String> {
    use std::io::{BufRead as _, BufReader};
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_lrg"))
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("OLLAMA_HOST", "http://127.0.0.1:9")
        .env("XDG_CONFIG_HOME", env.path("config"))
        .env("LRG_AGENT_TOKEN", "agent-secret-for-the-prompt-tests-0123")
        .current_dir(env.path("src"))
        .args(["serve", "--port", "0", "--model", "script:../turns.json"])
        .args(extra)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        let _ = tx.send(line);
    });
    let url = rx
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("lrg serve printed no URL");
    let (page, fragment) = url.trim().split_once('#').unwrap();
    let params: std::collections::HashMap<_, _> = fragment
        .split('&')
        .filter_map(|p| p.split_once('='))
        .collect();
    let origin = page.trim_end_matches("/v1/ui/chat");
    lrg_providers::transport::ensure_tls_provider();
    let r = reqwest::Client::new()
        .get(format!(
            "{origin}/v1/chat/sessions/{}/prompt",
            params["session"]
        ))
        .bearer_auth(params["token"])
        .send()
        .await
        .unwrap();
    let status = r.status();
    let body: Value = r.json().await.unwrap();
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(status, 200, "{body}");
    body["sections"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn served_chats_read_a_project_only_when_serve_names_one() {
    let env = repo();
    env.file("turns.json", r#"[{"text": "hi"}]"#);
    let none = served_sections(&env, &["--system", "Be brief."]).await;
    assert_eq!(none, ["base"]);
    let project = served_sections(&env, &["--system", "Be brief.", "--project", "."]).await;
    assert_eq!(project, ["base", "project", "project", "skills"]);
}
