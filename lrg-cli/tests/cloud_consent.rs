//! `lrg chat` asks before a conversation goes to a provider's cloud once
//! per provider (not once per switch), and not at all for a provider the
//! permission settings say "don't ask again" for.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::{Env, ran};

const ASKS: &str = "runs in openai's cloud: this conversation would be sent to";

fn chat(env: &Env, stdin: &str) -> common::Ran {
    env.file("local.json", r#"[{"text":"From local."}]"#);
    ran(env
        .lrg()
        .args(["chat", "--model", "script:local.json", "--permissions"])
        .arg(env.path("permissions.json"))
        .env("OPENAI_API_KEY", "sk-test")
        .env("LRG_MODELS_DIR", env.path("models"))
        .write_stdin(stdin.to_string()))
}

#[test]
fn chat_asks_once_per_provider() {
    let env = Env::new();
    let r = chat(
        &env,
        "/model openai:gpt-4.1\n\n\
         /model openai:gpt-4.1\ny\n\
         /model script:local.json\n\
         /model openai:gpt-4o\n",
    );
    assert_eq!(r.code, 0, "{r:?}");
    // Declined, asked again, agreed; then back and to another openai
    // model without a question.
    assert_eq!(r.stderr.matches(ASKS).count(), 2, "{r:?}");
    assert!(
        r.stderr
            .contains("[y = yes, a = yes and don't ask again for openai, Enter = no]"),
        "{r:?}"
    );
    assert_eq!(
        r.stderr.matches("kept the current model").count(),
        1,
        "{r:?}"
    );
    for needle in [
        "New chat on openai:gpt-4.1.",
        "New chat on script:local.json.",
        "New chat on openai:gpt-4o.",
    ] {
        assert!(r.stderr.contains(needle), "{needle}: {r:?}");
    }
    // "y" is for this chat only: the settings say nothing of it.
    let settings = env.read("permissions.json");
    assert!(!settings.contains("cloud_consent"), "{settings}");
}

#[test]
fn dont_ask_again_is_kept_in_the_permission_settings() {
    let env = Env::new();
    let r = chat(&env, "/model openai:gpt-4.1\na\n");
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(r.stderr.matches(ASKS).count(), 1, "{r:?}");
    let settings: serde_json::Value = serde_json::from_str(&env.read("permissions.json")).unwrap();
    assert_eq!(settings["cloud_consent"], serde_json::json!(["openai"]));

    // Another chat, the same settings: no question for openai.
    let r = chat(&env, "/model openai:gpt-4o\n");
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(r.stderr.matches(ASKS).count(), 0, "{r:?}");
    assert!(r.stderr.contains("New chat on openai:gpt-4o."), "{r:?}");
}
