//! ACP agents as models in `lrg models`: a known agent (`codex-acp`) found
//! on a PATH the test sets (a fake that runs `lrg acp` on a script) is
//! listed with the models it offers, and `--model acp:codex-acp#MODEL` runs
//! it on one of them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::Value;

use crate::common::{self, Env};

/// `env` with a `codex-acp` on `bin/` that is `lrg acp` on a script.
#[cfg(unix)]
fn with_fake_agent() -> (Env, String) {
    use std::os::unix::fs::PermissionsExt as _;
    let env = Env::new();
    env.file("s.json", r#"[{"text": "hello from the agent"}]"#);
    std::fs::create_dir(env.path("bin")).unwrap();
    let agent = env.path("bin/codex-acp");
    std::fs::write(
        &agent,
        format!(
            "#!/bin/sh\nexec '{}' acp --model script:s.json \"$@\"\n",
            env!("CARGO_BIN_EXE_lrg")
        ),
    )
    .unwrap();
    std::fs::set_permissions(&agent, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!(
        "{}:{}",
        env.path("bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    (env, path)
}

#[cfg(unix)]
#[test]
fn a_known_agent_on_path_is_listed_with_its_models_and_runs_on_one() {
    let (env, path) = with_fake_agent();
    let r = common::ran(env.lrg().env("PATH", &path).args(["models", "--json"]));
    assert_eq!(r.code, 0, "{r:?}");
    let listed: Value = serde_json::from_str(&r.stdout).unwrap();
    let agents = listed["agents"].as_array().unwrap();
    assert_eq!(agents.len(), 1, "{listed:#}");
    assert_eq!(agents[0]["id"], "acp:codex-acp");
    assert_eq!(agents[0]["name"], "Codex (ACP)");
    assert!(agents[0].get("reason").is_none(), "{listed:#}");
    // `lrg acp` offers the model it runs on as its model option.
    let model = agents[0]["models"][0]["id"].as_str().unwrap().to_owned();
    assert_eq!(model, "acp:codex-acp#script:s.json", "{listed:#}");

    let r = common::ran(env.lrg().env("PATH", &path).args(["models"]));
    assert!(r.stdout.contains("ACP agents"), "{r:?}");
    assert!(r.stdout.contains("acp:codex-acp#script:s.json"), "{r:?}");

    let r = common::ran(
        env.lrg()
            .env("PATH", &path)
            .args(["run", "--model", &model, "hi"]),
    );
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(r.stdout, "hello from the agent\n");

    // A model the agent lacks is refused, naming those it has.
    let r = common::ran(env.lrg().env("PATH", &path).args([
        "run",
        "--model",
        "acp:codex-acp#no-such-model",
        "hi",
    ]));
    assert_ne!(r.code, 0, "{r:?}");
    assert!(
        r.stderr
            .contains("has no model `no-such-model`; it offers: script:s.json"),
        "{r:?}"
    );
}

#[cfg(unix)]
#[test]
fn local_only_lists_no_agents() {
    let (env, path) = with_fake_agent();
    let r = common::ran(
        env.lrg()
            .env("PATH", &path)
            .args(["models", "--json", "--local-only"]),
    );
    assert_eq!(r.code, 0, "{r:?}");
    let listed: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(listed["agents"], serde_json::json!([]), "{listed:#}");
}
