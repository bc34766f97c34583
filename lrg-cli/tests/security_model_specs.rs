//! Issue 24 §1, as an attacker drives `lrg serve`: a model id that names a
//! command or a path never runs or reads anything for a chat token, nor
//! for the agent token unless the server was started with
//! `--allow-model-specs`; and a model that could not be loaded is one fixed
//! answer, never the file's content nor whether it exists.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::security_support;

use std::time::Duration;

use security_support::{SCRIPT, serve};

const PWN: &str = r#"{"model": "acp:sh -c 'id > pwned.txt'", "confirm": true}"#;

/// The contents of a file that is not a script, which a script reader's
/// error quotes ("invalid type: string \"sk-…\""): a 400 passing that on
/// leaks the file.
const SECRET: &str = r#"["sk-THE-SECRET-IN-THE-FILE"]"#;

/// Wait a moment for a process that should not have been started.
async fn no_file(dir: &std::path::Path, name: &str) {
    for _ in 0..15 {
        assert!(
            !dir.join(name).exists(),
            "{name} was written: a command ran"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// When `answer` opened a chat (what the old code did), send its first
/// message, where an `acp:` agent's command runs, so that the file check
/// after it sees the harm rather than only the status.
async fn first_message_if_opened(s: &security_support::Served, answer: &security_support::Answer) {
    if answer.status != 201 {
        return;
    }
    let v = answer.json();
    let (id, token) = (
        v["session"].as_str().unwrap(),
        v["chat_token"].as_str().unwrap(),
    );
    let url = format!("{}/v1/chat/sessions/{id}/messages", s.origin);
    let _ = s.post(&url, token, r#"{"text": "hi"}"#).await;
}

#[tokio::test]
async fn a_chat_token_cannot_switch_to_a_command() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("turns.json"), SCRIPT).unwrap();
    let s = serve(dir.path(), "script:turns.json", &[]);
    let a = s.chat_post("/model", PWN).await;
    first_message_if_opened(&s, &a).await;
    no_file(dir.path(), "pwned.txt").await;
    assert_eq!(a.status, 400, "{a:?}");
    assert!(
        a.message()
            .starts_with("`model`: not one of this chat's models"),
        "{a:?}"
    );
    // A message on the chat (the first turn is where an agent's command
    // would run), then still no file.
    s.say_hi(&s.session, &s.token, 2).await;
    no_file(dir.path(), "pwned.txt").await;
    // Every kind of model that names a command or a path, and one the menu
    // lists as unavailable (no key): the same refusal, nothing looked at.
    for model in [
        "acp:touch pwned.txt",
        "script:turns.json",
        "replay:turns.json",
        "llama:/etc/passwd",
        "mlx:/",
        "claude-cli:--help",
        "openai:gpt-4.1",
    ] {
        let b = s.switch_to(model).await;
        assert_eq!(b.status, 400, "{model}: {b:?}");
        assert_eq!(b.body, a.body, "{model}: one answer for all");
    }
    no_file(dir.path(), "pwned.txt").await;
    // The chat is as it was.
    assert_eq!(
        s.get(&s.chat_url("/transcript"), &s.token).await.status,
        200
    );
}

#[tokio::test]
async fn the_agent_token_cannot_open_a_command_without_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("turns.json"), SCRIPT).unwrap();
    std::fs::write(dir.path().join("secret.json"), SECRET).unwrap();
    let s = serve(dir.path(), "script:turns.json", &[]);
    let a = s.open(r#"{"model": "acp:sh -c 'id > pwned.txt'"}"#).await;
    first_message_if_opened(&s, &a).await;
    no_file(dir.path(), "pwned.txt").await;
    assert_eq!(a.status, 400, "{a:?}");
    assert!(a.message().starts_with("`model`"), "{a:?}");
    assert!(a.message().contains("--allow-model-specs"), "{a:?}");
    no_file(dir.path(), "pwned.txt").await;
    // A path is refused before it is read: a file with a secret, a missing
    // file, a folder and a missing folder get the same answer.
    let secret = dir.path().join("secret.json");
    let ids = [
        format!("script:{}", secret.display()),
        format!("script:{}", dir.path().join("missing.json").display()),
        format!("mlx:{}", dir.path().display()),
        format!("mlx:{}", dir.path().join("missing").display()),
        "replay:secret.json".to_string(),
        "llama:secret.json".to_string(),
    ];
    for id in &ids {
        let b = s.open_model(id).await;
        assert_eq!((b.status, &b.body), (400, &a.body), "{id}");
    }
    // The server's own model stays open to the agent, named or not.
    assert_eq!(s.open("{}").await.status, 201);
    assert_eq!(
        s.open(r#"{"model": "script:turns.json"}"#).await.status,
        201
    );
}

#[tokio::test]
async fn with_allow_model_specs_the_agent_may_and_failures_look_alike() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("turns.json"), SCRIPT).unwrap();
    std::fs::write(
        dir.path().join("other.json"),
        r#"[{"text": "The other script."}]"#,
    )
    .unwrap();
    std::fs::write(dir.path().join("secret.json"), SECRET).unwrap();
    std::fs::create_dir(dir.path().join("a-dir")).unwrap();
    let s = serve(dir.path(), "script:turns.json", &["--allow-model-specs"]);
    // The agent opens a chat on a script of its choosing.
    let a = s.open(r#"{"model": "script:other.json"}"#).await;
    assert_eq!(a.status, 201, "{a:?}");
    let v = a.json();
    let t = s
        .say_hi(
            v["session"].as_str().unwrap(),
            v["chat_token"].as_str().unwrap(),
            2,
        )
        .await;
    assert_eq!(t["rows"][1]["text"], "The other script.");
    // A bad file and a missing one: byte-identical answers, no content.
    let secret = s
        .open_model(&format!(
            "script:{}",
            dir.path().join("secret.json").display()
        ))
        .await;
    let missing = s
        .open_model(&format!(
            "script:{}",
            dir.path().join("nope.json").display()
        ))
        .await;
    assert_eq!(secret.status, 400, "{secret:?}");
    assert!(!secret.body.contains("THE-SECRET"), "{secret:?}");
    assert_eq!(secret, missing);
    let replay = s.open_model("replay:secret.json").await;
    assert_eq!(replay, missing);
    // A folder and a missing folder, as `mlx:` names them.
    let folder = s
        .open_model(&format!("mlx:{}", dir.path().join("a-dir").display()))
        .await;
    let gone = s
        .open_model(&format!("mlx:{}", dir.path().join("gone").display()))
        .await;
    assert_eq!(folder.status, 400, "{folder:?}");
    assert_eq!(folder, gone);
    // A chat token still may not, flag or not.
    let b = s.chat_post("/model", PWN).await;
    assert_eq!(b.status, 400, "{b:?}");
    no_file(dir.path(), "pwned.txt").await;
}

#[tokio::test]
async fn the_chat_token_switch_answers_do_not_tell_files_apart() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("turns.json"), SCRIPT).unwrap();
    std::fs::write(dir.path().join("secret.json"), SECRET).unwrap();
    let s = serve(dir.path(), "script:turns.json", &["--allow-model-specs"]);
    let secret = s
        .switch_to(&format!(
            "script:{}",
            dir.path().join("secret.json").display()
        ))
        .await;
    let missing = s
        .switch_to(&format!(
            "script:{}",
            dir.path().join("nope.json").display()
        ))
        .await;
    assert_eq!(secret.status, 400, "{secret:?}");
    assert!(!secret.body.contains("THE-SECRET"), "{secret:?}");
    assert_eq!(secret, missing);
    let folder = s.switch_to(&format!("mlx:{}", dir.path().display())).await;
    let gone = s
        .switch_to(&format!("mlx:{}", dir.path().join("gone").display()))
        .await;
    assert_eq!(folder, gone);
    assert_eq!(folder, missing);
}
