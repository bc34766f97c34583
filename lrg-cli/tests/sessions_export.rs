//! `lrg sessions export KEY --test DIR`: a chat kept with a scripted model
//! and the demo MCP server becomes a recording and a scenario that `lrg
//! test DIR` passes offline; a changed tool description or result then
//! fails with the request diff; both `--match` modes; a `--record`ed chat
//! reuses its recording; a denied call is answered the same way again; a
//! chat kept without a setup is refused with what it lacks.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::{Env, ran};
use serde_json::Value;

const DEMO: &str = "lrg demo-server";

/// List the notes, read note 2, reply in two sentences.
const LIST_THEN_READ: &str = r#"[
  {"text": "Let me look.", "calls": [{"name": "list_notes", "arguments": {}}]},
  {"calls": [{"name": "read_note", "arguments": {"id": 2}}]},
  {"text": "Note 2 says: call the plumber about the kitchen sink. Shall I add a reminder?"}
]"#;

/// `lrg` with the chats kept in `store/` of the scratch directory.
fn kept(env: &Env) -> assert_cmd::Command {
    let mut cmd = env.lrg();
    cmd.env("LRG_STORE", env.path("store"))
        .env("USER", "tester");
    cmd
}

/// A kept run of `script` on the demo server under `key`.
fn keep(env: &Env, key: &str, script: &str, extra: &[&str], message: &str) {
    env.file("s.json", script);
    let r = ran(kept(env)
        .args([
            "run",
            "--model",
            "script:s.json",
            "--mcp",
            DEMO,
            "--session",
            key,
        ])
        .args(extra)
        .arg(message));
    assert_eq!(r.code, 0, "{r:?}");
}

fn export(env: &Env, key: &str, dir: &str, more: &[&str]) -> common::Ran {
    ran(kept(env)
        .args(["sessions", "export", key, "--test", dir])
        .args(more))
}

/// `lrg test DIR` with nothing from the outer environment (no network, no keys).
fn test(env: &Env, dir: &str) -> common::Ran {
    ran(env.lrg().args(["test", dir]))
}

/// Edit the recording `dir/name` as JSON.
fn edit_recording(env: &Env, file: &str, edit: impl FnOnce(&mut Value)) {
    let mut value: Value = serde_json::from_str(&env.read(file)).unwrap();
    edit(&mut value);
    env.file(file, &serde_json::to_string_pretty(&value).unwrap());
}

#[test]
fn a_kept_chat_becomes_a_test_that_passes_offline_and_fails_when_a_tool_changes() {
    let env = Env::new();
    keep(
        &env,
        "doc:1",
        LIST_THEN_READ,
        &["--system", "Be brief.", "--temperature", "0.2"],
        "what does note 2 say?",
    );
    // A second message: the export replays the first one only.
    keep(
        &env,
        "doc:1",
        r#"[{"text": "Nothing else."}]"#,
        &[],
        "thanks",
    );

    let r = export(&env, "doc:1", "t", &[]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("wrote t/doc_1.test.yaml"), "{r:?}");
    assert!(
        r.stdout
            .contains("wrote t/doc_1.recording.json (rebuilt from the kept history)"),
        "{r:?}"
    );
    let scenario = env
        .read("t/doc_1.test.yaml")
        .replace(&env.dir.path().display().to_string(), "[DIR]")
        .replace(env!("CARGO_PKG_VERSION"), "[VERSION]");
    insta::assert_snapshot!("exported_scenario", scenario);
    let recording: Value = serde_json::from_str(&env.read("t/doc_1.recording.json")).unwrap();
    let exchanges = recording["exchanges"].as_array().unwrap();
    assert_eq!(exchanges.len(), 3, "{recording:#}");
    assert_eq!(exchanges[0]["request"]["system"], "Be brief.");
    assert_eq!(exchanges[0]["request"]["temperature"], 0.2);

    let passed = test(&env, "t");
    assert_eq!(passed.code, 0, "{passed:?}");
    assert!(passed.stdout.contains("1 passed, 0 failed"), "{passed:?}");

    // The tool's description now differs from the one the chat was offered.
    let original = env.read("t/doc_1.recording.json");
    edit_recording(&env, "t/doc_1.recording.json", |r| {
        for x in r["exchanges"].as_array_mut().unwrap() {
            for tool in x["request"]["tools"].as_array_mut().unwrap() {
                if tool["name"] == "list_notes" {
                    tool["description"] = "List all notes".into();
                }
            }
        }
    });
    let drift = test(&env, "t");
    assert_eq!(drift.code, 1, "{drift:?}");
    assert!(
        drift
            .stdout
            .contains("request 1 differs from the recorded one"),
        "{drift:?}"
    );
    assert!(
        drift
            .stdout
            .contains(r#"-      "description": "List all notes","#),
        "{drift:?}"
    );
    assert!(
        drift
            .stdout
            .contains(r#"+      "description": "List every note with its id","#),
        "{drift:?}"
    );

    // The tool's result now differs from the one the chat got.
    env.file(
        "t/doc_1.recording.json",
        &original.replace("Buy oat milk", "Buy soy milk"),
    );
    let drift = test(&env, "t");
    assert_eq!(drift.code, 1, "{drift:?}");
    assert!(
        drift
            .stdout
            .contains("request 2 differs from the recorded one"),
        "{drift:?}"
    );
    assert!(drift.stdout.contains("Buy soy milk"), "{drift:?}");
    assert!(drift.stdout.contains("Buy oat milk"), "{drift:?}");

    // Back as exported: it passes again.
    env.file("t/doc_1.recording.json", &original);
    assert_eq!(test(&env, "t").code, 0);
}

#[test]
fn match_contains_asserts_the_first_sentence_and_exact_all_of_the_reply() {
    let env = Env::new();
    keep(&env, "doc:2", LIST_THEN_READ, &[], "what does note 2 say?");
    // `--store` after the subcommand, as every `sessions` subcommand takes it.
    let store = env.path("store").display().to_string();
    let exact = ran(env.lrg().env("USER", "tester").args([
        "sessions", "export", "doc:2", "--test", "exact", "--store", &store,
    ]));
    assert_eq!(exact.code, 0, "{exact:?}");
    let contains = export(&env, "doc:2", "contains", &["--match", "contains"]);
    assert_eq!(contains.code, 0, "{contains:?}");
    let yaml = env.read("contains/doc_2.test.yaml");
    assert!(
        yaml.contains("contains:\n    - 'Note 2 says: call the plumber about the kitchen sink.'"),
        "{yaml}"
    );
    assert!(!yaml.contains("regex"), "{yaml}");
    assert_eq!(test(&env, "exact").code, 0);
    assert_eq!(test(&env, "contains").code, 0);

    // The model now words its reply's second sentence otherwise.
    for dir in ["exact", "contains"] {
        let file = format!("{dir}/doc_2.recording.json");
        let text = env
            .read(&file)
            .replace("Shall I add a reminder?", "Anything else?");
        env.file(&file, &text);
    }
    let contains = test(&env, "contains");
    assert_eq!(contains.code, 0, "{contains:?}");
    let exact = test(&env, "exact");
    assert_eq!(exact.code, 1, "{exact:?}");
    assert!(
        exact.stdout.contains("expected: the reply matches"),
        "{exact:?}"
    );
    assert!(exact.stdout.contains("Anything else?"), "{exact:?}");
}

#[test]
fn a_recorded_chat_reuses_its_recording() {
    let env = Env::new();
    keep(
        &env,
        "doc:3",
        LIST_THEN_READ,
        &["--record", "rec.json"],
        "what does note 2 say?",
    );
    let r = export(&env, "doc:3", "t", &["--json"]);
    assert_eq!(r.code, 0, "{r:?}");
    let out: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(
        out["reused"].as_str().unwrap(),
        env.path("rec.json").display().to_string()
    );
    assert_eq!(out["note"], Value::Null);
    // The first message's turns, as --record wrote them.
    let recorded: Value = serde_json::from_str(&env.read("rec.json")).unwrap();
    let exported: Value = serde_json::from_str(&env.read("t/doc_3.recording.json")).unwrap();
    assert_eq!(recorded, exported);
    let passed = test(&env, "t");
    assert_eq!(passed.code, 0, "{passed:?}");

    // A recording written over since is not reused: the export is rebuilt.
    env.file("rec.json", r#"{"format": "lrg-recording", "version": 1}"#);
    let r = export(&env, "doc:3", "again", &[]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stderr.contains("was not reused"), "{r:?}");
    assert!(r.stdout.contains("rebuilt from the kept history"), "{r:?}");
    assert_eq!(test(&env, "again").code, 0);
}

#[test]
fn a_denied_call_is_denied_again_with_its_note() {
    let env = Env::new();
    // No one answers a non-interactive run: the destructive call is denied.
    keep(
        &env,
        "doc:4",
        r#"[
          {"calls": [{"name": "delete_notes", "arguments": {"ids": [1]}}]},
          {"calls": [{"name": "list_notes", "arguments": {}}]},
          {"text": "I was not allowed to delete it."}
        ]"#,
        &[],
        "delete note 1",
    );
    let r = export(&env, "doc:4", "t", &[]);
    assert_eq!(r.code, 0, "{r:?}");
    let yaml = env.read("t/doc_4.test.yaml");
    assert!(yaml.contains("delete_notes: ask"), "{yaml}");
    assert!(yaml.contains("answer: deny"), "{yaml}");
    let passed = test(&env, "t");
    assert_eq!(passed.code, 0, "{passed:?}");
}

#[test]
fn a_chat_kept_without_a_setup_loads_and_says_what_export_lacks() {
    let env = Env::new();
    keep(&env, "doc:5", LIST_THEN_READ, &[], "what does note 2 say?");
    // As an lrg from before setups wrote it: no `setup` in any state.
    let store = env.path("store");
    let file = std::fs::read_dir(&store)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .unwrap();
    let text = std::fs::read_to_string(&file).unwrap();
    assert_eq!(text.matches("\"setup\"").count(), 1, "written once: {text}");
    let old: Vec<String> = text
        .lines()
        .map(|line| {
            let mut value: Value = serde_json::from_str(line).unwrap();
            if let Some(state) = value.get_mut("state").and_then(Value::as_object_mut) {
                state.remove("setup");
            }
            serde_json::to_string(&value).unwrap()
        })
        .collect();
    std::fs::write(&file, old.join("\n") + "\n").unwrap();

    let show = ran(kept(&env).args(["sessions", "show", "doc:5"]));
    assert_eq!(show.code, 0, "{show:?}");
    let r = export(&env, "doc:5", "t", &[]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("kept chat `doc:5` has no setup"), "{r:?}");
    assert!(
        r.stderr
            .contains("the MCP servers and the tools they offered"),
        "{r:?}"
    );
    assert!(!env.path("t/doc_5.test.yaml").exists());

    let missing = export(&env, "nope", "t", &[]);
    assert_eq!(missing.code, 2, "{missing:?}");
    assert!(
        missing.stderr.contains("no kept chat `nope`"),
        "{missing:?}"
    );
}

/// An OpenAI streaming answer.
fn sse(chunks: &[Value]) -> wiremock::ResponseTemplate {
    let mut body: String = chunks.iter().map(|c| format!("data: {c}\n\n")).collect();
    body.push_str("data: [DONE]\n\n");
    wiremock::ResponseTemplate::new(200).set_body_raw(body, "text/event-stream")
}

fn chunk(delta: Value, finish: Value) -> Value {
    serde_json::json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1,
        "model": "gpt-4.1", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 5}})
}

/// A fake OpenAI server: list_notes, then a reply.
async fn fake_openai() -> wiremock::MockServer {
    use wiremock::matchers::{method, path};
    let server = wiremock::MockServer::start().await;
    let call = serde_json::json!({"role": "assistant", "tool_calls": [{"index": 0, "id": "call_1",
        "type": "function", "function": {"name": "list_notes", "arguments": "{}"}}]});
    for turn in [
        sse(&[chunk(call, "tool_calls".into())]),
        sse(&[chunk(
            serde_json::json!({"role": "assistant", "content": "The first is oat milk."}),
            "stop".into(),
        )]),
    ] {
        wiremock::Mock::given(method("POST"))
            .and(path("/v1/chat/completions"))
            .respond_with(turn)
            .up_to_n_times(1)
            .expect(1)
            .mount(&server)
            .await;
    }
    server
}

/// The demo server behind a filter whose `sed` script (`changes.sed` in the
/// working directory) can change a tool's description or its result: a
/// real server that changed since the chat.
#[cfg(target_os = "linux")]
const CHANGING_DEMO: &str = "sh -c 'lrg demo-server | sed -u -f changes.sed'";

#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread")]
async fn a_chat_on_a_model_server_fails_its_test_once_its_tool_server_changes() {
    let server = fake_openai().await;
    let base = format!("{}/v1", server.uri());
    tokio::task::spawn_blocking(move || {
        let env = Env::new();
        // `lrg` itself on PATH, for the shell that runs the filter.
        let exe = assert_cmd::cargo::cargo_bin("lrg");
        let path = format!(
            "{}:{}",
            exe.parent().unwrap().display(),
            std::env::var("PATH").unwrap_or_default()
        );
        env.file("changes.sed", "");
        let r = ran(kept(&env)
            .args(["run", "--model", "openai:gpt-4.1", "--mcp", CHANGING_DEMO])
            .args(["--session", "web", "--max-tokens", "300", "first note?"])
            .env("PATH", &path)
            .env("OPENAI_API_KEY", "sk-test-not-a-real-key-0123456789")
            .env("OPENAI_BASE_URL", base));
        assert_eq!(r.code, 0, "{r:?}");
        let r = export(&env, "web", "t", &["--match", "contains"]);
        assert_eq!(r.code, 0, "{r:?}");
        let yaml = env.read("t/web.test.yaml");
        assert!(yaml.contains("model: openai:gpt-4.1"), "{yaml}");
        assert!(yaml.contains("max_tokens: 300"), "{yaml}");
        assert!(yaml.contains(CHANGING_DEMO), "the server verbatim: {yaml}");
        assert!(!yaml.contains("sk-test"), "{yaml}");
        assert!(!env.read("t/web.recording.json").contains("sk-test"));

        // No network, no key: the servers as they were pass.
        let test = |changes: &str| {
            env.file("changes.sed", changes);
            ran(env.lrg().args(["test", "t"]).env("PATH", &path))
        };
        let passed = test("");
        assert_eq!(passed.code, 0, "{passed:?}");

        let described = test("s/List every note with its id/List all notes/\n");
        assert_eq!(described.code, 1, "{described:?}");
        assert!(
            described
                .stdout
                .contains("request 1 differs from the recorded one"),
            "{described:?}"
        );
        assert!(
            described
                .stdout
                .contains(r#"+      "description": "List all notes","#),
            "{described:?}"
        );

        let answered = test("s/oat milk/soy milk/\n");
        assert_eq!(answered.code, 1, "{answered:?}");
        assert!(
            answered
                .stdout
                .contains("request 2 differs from the recorded one"),
            "{answered:?}"
        );
        assert!(answered.stdout.contains("soy milk"), "{answered:?}");
    })
    .await
    .unwrap();
}
