//! The Rust side against fake sidecars (small shell scripts standing in for
//! Python): garbage, silence, death, another protocol version, stale lines.
//! None of this needs mlx; every wait is bounded.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{msg, run, turn};
use lrg_mlx::{MlxConfig, MlxEngine};
use lrg_providers::ProviderError;
use lrg_providers::local_chat::{EngineRole, EngineStop, LocalEngine};
use serde_json::json;

const READY: &str = r#"{"type":"ready","protocol":2,"sidecar":"0.1.0","versions":{"python":"3","mlx":"0","mlx_lm":"0","llguidance":"1.9"},"device":"cpu","model":{"name":"fake","context_window":4096,"context_window_source":"config","vocab_size":10,"trimmable_cache":true}}"#;

/// Reads a generate request and sets `$id` to its id.
const READ_ID: &str =
    r#"read -r line; id=$(printf '%s' "$line" | sed -n 's/.*"id":\([0-9]*\).*/\1/p')"#;

/// A well-behaved reply to the request `$id`.
const ANSWER: &str = r#"echo "{\"type\":\"delta\",\"id\":$id,\"text\":\"{\\\"a\\\":\"}"; echo "{\"type\":\"delta\",\"id\":$id,\"text\":\"1}\"}"; echo "{\"type\":\"done\",\"id\":$id,\"stop\":\"done\",\"usage\":{\"prompt_tokens\":5,\"reused_tokens\":0,\"evaluated_tokens\":5,\"completion_tokens\":2}}""#;

struct Fake {
    dir: tempfile::TempDir,
}

impl Fake {
    /// A model directory and a "python" running `body` (bash) in it.
    fn new(body: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("config.json"), "{}").unwrap();
        let script = dir.path().join("python");
        std::fs::write(
            &script,
            format!("#!/usr/bin/env bash\ncd \"$(dirname \"$0\")\"\n{body}\n"),
        )
        .unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        Self { dir }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn config(&self) -> MlxConfig {
        MlxConfig::new(self.path())
            .with_python(self.path().join("python"))
            .with_startup_timeout(Duration::from_secs(5))
            .with_read_timeout(Duration::from_secs(5))
    }

    async fn start(&self) -> Result<MlxEngine, ProviderError> {
        tokio::time::timeout(Duration::from_secs(30), MlxEngine::start(self.config()))
            .await
            .expect("start hung")
    }
}

fn user_turn() -> lrg_providers::local_chat::EngineTurn {
    turn(
        vec![msg(EngineRole::User, "hi")],
        json!({"type": "object"}),
        1,
        0.0,
        10,
    )
}

/// The first run of the script takes `first`, later runs `later` (a counter
/// file beside it says which run this is).
fn first_then(first: &str, later: &str) -> String {
    format!("if [ -e started ]; then\n{later}\nelse\ntouch started\n{first}\nfi")
}

fn well_behaved() -> String {
    format!("echo '{READY}'\nwhile true; do {READ_ID}; [ -z \"$line\" ] && exit 0; {ANSWER}; done")
}

#[tokio::test]
async fn garbage_instead_of_the_handshake_is_a_protocol_error() {
    let fake = Fake::new("echo 'Loading weights... 100%'; sleep 60");
    let err = fake.start().await.unwrap_err();
    let ProviderError::Protocol { message } = &err else {
        panic!("{err:?}")
    };
    assert!(message.contains("Loading weights"), "{message}");
}

#[tokio::test]
async fn garbage_mid_turn_is_a_protocol_error_and_the_next_turn_restarts() {
    let fake = Fake::new(&first_then(
        &format!("echo '{READY}'\n{READ_ID}\necho 'Traceback (most recent call last):'\nsleep 60"),
        &well_behaved(),
    ));
    let engine = fake.start().await.unwrap();
    let err = run(&engine, user_turn()).await.unwrap_err();
    let ProviderError::Protocol { message } = &err else {
        panic!("{err:?}")
    };
    assert!(message.contains("Traceback"), "{message}");
    let out = run(&engine, user_turn()).await.unwrap();
    assert_eq!(out.text, r#"{"a":1}"#);
    assert_eq!(out.stop, EngineStop::Done);
    assert_eq!(engine.stats().starts, 2);
}

#[tokio::test]
async fn a_sidecar_that_dies_mid_turn_fails_it_and_the_next_turn_works() {
    let fake = Fake::new(&first_then(
        &format!(
            "echo '{READY}'\n{READ_ID}\necho \"{{\\\"type\\\":\\\"delta\\\",\\\"id\\\":$id,\\\"text\\\":\\\"{{\\\"}}\"\necho 'Segmentation fault' >&2\nexit 139"
        ),
        &well_behaved(),
    ));
    let engine = fake.start().await.unwrap();
    let err = run(&engine, user_turn()).await.unwrap_err();
    let ProviderError::Transient { message, .. } = &err else {
        panic!("{err:?}")
    };
    assert!(message.contains("exited during the turn"), "{message}");
    assert!(message.contains("139"), "{message}");
    assert!(message.contains("Segmentation fault"), "{message}");
    assert_eq!(run(&engine, user_turn()).await.unwrap().text, r#"{"a":1}"#);
}

#[tokio::test]
async fn a_silent_sidecar_times_out_instead_of_hanging() {
    let fake = Fake::new("sleep 60");
    let err = MlxEngine::start(
        fake.config()
            .with_startup_timeout(Duration::from_millis(500)),
    )
    .await
    .unwrap_err();
    let ProviderError::Other { message } = &err else {
        panic!("{err:?}")
    };
    assert!(message.contains("did not become ready"), "{message}");

    let fake = Fake::new(&first_then(
        &format!("echo '{READY}'\n{READ_ID}\nsleep 60"),
        &well_behaved(),
    ));
    let engine = MlxEngine::start(fake.config().with_read_timeout(Duration::from_millis(500)))
        .await
        .unwrap();
    let err = run(&engine, user_turn()).await.unwrap_err();
    let ProviderError::Transient { message, .. } = &err else {
        panic!("{err:?}")
    };
    assert!(message.contains("sent nothing"), "{message}");
    assert_eq!(run(&engine, user_turn()).await.unwrap().text, r#"{"a":1}"#);
}

#[tokio::test]
async fn another_protocol_version_is_refused_by_name() {
    let fake = Fake::new(&format!(
        "echo '{}'; sleep 60",
        READY.replace("\"protocol\":2", "\"protocol\":1")
    ));
    let err = fake.start().await.unwrap_err();
    let ProviderError::Config { message } = &err else {
        panic!("{err:?}")
    };
    assert!(message.contains("speaks protocol 1"), "{message}");
}

#[tokio::test]
async fn lines_of_another_request_are_skipped_by_id() {
    let stale = r#"echo '{"type":"delta","id":999,"text":"stale"}'; echo '{"type":"done","id":999,"stop":"cancelled","usage":{"prompt_tokens":1,"reused_tokens":0,"evaluated_tokens":1,"completion_tokens":1}}'"#;
    let fake = Fake::new(&format!(
        "echo '{READY}'\n{READ_ID}\n{stale}\n{ANSWER}\nsleep 60"
    ));
    let engine = fake.start().await.unwrap();
    let out = run(&engine, user_turn()).await.unwrap();
    assert_eq!(out.text, r#"{"a":1}"#);
    assert_eq!(engine.stats().prompt_tokens, 5);
}

#[tokio::test]
async fn fatal_lines_become_errors_that_say_what_to_do() {
    let fake = Fake::new(
        r#"echo '{"type":"fatal","kind":"missing_package","package":"mlx","message":"No module named mlx"}'; exit 3"#,
    );
    let err = fake.start().await.unwrap_err();
    let ProviderError::Config { message } = &err else {
        panic!("{err:?}")
    };
    assert!(message.contains("pip install"), "{message}");

    // Exiting without a word: the exit status and stderr are in the error.
    let fake = Fake::new("echo \"/usr/bin/python3: No module named lrg_mlx_sidecar\" >&2; exit 1");
    let err = fake.start().await.unwrap_err();
    let ProviderError::Config { message } = &err else {
        panic!("{err:?}")
    };
    assert!(
        message.contains("No module named lrg_mlx_sidecar"),
        "{message}"
    );
    assert!(message.contains("before it was ready"), "{message}");
}

#[tokio::test]
async fn missing_python_and_missing_model_are_named() {
    let fake = Fake::new(&well_behaved());
    let err = MlxEngine::start(
        fake.config()
            .with_python(PathBuf::from("/nonexistent/python3")),
    )
    .await
    .unwrap_err();
    let ProviderError::Config { message } = &err else {
        panic!("{err:?}")
    };
    assert!(
        message.contains("no Python at `/nonexistent/python3`"),
        "{message}"
    );
    assert!(message.contains(lrg_mlx::PYTHON_ENV), "{message}");

    let err = MlxEngine::start(
        fake.config()
            .with_python(fake.path().join("python"))
            .clone(),
    )
    .await
    .map(|e| e.model_name())
    .unwrap();
    assert_eq!(err, "fake");
    let nowhere = MlxConfig::new("/nonexistent/model").with_python(fake.path().join("python"));
    let err = MlxEngine::start(nowhere).await.unwrap_err();
    assert!(
        matches!(err, ProviderError::ModelNotFound { .. }),
        "{err:?}"
    );
}
