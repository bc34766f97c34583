//! `lrg models` and the provider table as a user meets them: every provider
//! in the help and in the listing, the catalog's groups, windows and
//! locality, and `--local-only`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::{Env, ran};
use lrg_providers::Provider;
use serde_json::Value;

fn models_json(env: &Env, extra: &[&str], vars: &[(&str, String)]) -> Value {
    let mut cmd = env.lrg();
    cmd.args(["models", "--json"]).args(extra);
    for (k, v) in vars {
        cmd.env(k, v);
    }
    let r = ran(&mut cmd);
    assert_eq!(r.code, 0, "{r:?}");
    serde_json::from_str(&r.stdout).unwrap()
}

fn ids(v: &Value) -> Vec<String> {
    v["providers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["provider"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn every_provider_is_in_the_help_and_every_listed_one_in_lrg_models() {
    let env = Env::new();
    let help = ran(env.lrg().args(["run", "--help"])).stdout;
    // Isolated from this machine's models and servers.
    let vars = [("LRG_MODELS_DIR", env.path("models").display().to_string())];
    let listed = ids(&models_json(&env, &[], &vars));
    for p in Provider::ALL {
        assert!(
            help.contains(&format!("  {p}:")),
            "{p} missing from help:\n{help}"
        );
        assert_eq!(
            listed.contains(&p.to_string()),
            p.spec().is_listed(),
            "{p} in `lrg models`: {listed:?}"
        );
    }
    let unknown = ran(env.lrg().args(["run", "--model", "nope:x", "hi"]));
    assert_eq!(unknown.code, 2);
    for p in Provider::ALL {
        assert!(unknown.stderr.contains(p.as_str()), "{p}: {unknown:?}");
    }
}

#[test]
fn local_only_leaves_the_clouds_out() {
    let env = Env::new();
    let vars = [("LRG_MODELS_DIR", env.path("models").display().to_string())];
    for (extra, env_on) in [(&["--local-only"][..], None), (&[][..], Some("1"))] {
        let mut vars = vars.to_vec();
        if let Some(on) = env_on {
            vars.push(("LRG_LOCAL_ONLY", on.to_string()));
        }
        let listed = ids(&models_json(&env, extra, &vars));
        assert!(!listed.is_empty());
        for id in &listed {
            let p: Provider = id.parse().unwrap();
            assert!(!p.is_cloud(), "{id} listed with --local-only");
        }
    }
}

#[test]
fn gguf_files_in_the_model_dir_are_listed_with_their_window() {
    use lrg_providers::catalog::gguf::fixture::{Value as G, gguf_bytes};
    let env = Env::new();
    std::fs::create_dir(env.path("models")).unwrap();
    std::fs::write(
        env.path("models").join("tiny.gguf"),
        gguf_bytes(&[
            ("general.architecture", G::Str("qwen3".into())),
            ("qwen3.context_length", G::U32(40_960)),
        ]),
    )
    .unwrap();
    let vars = [("LRG_MODELS_DIR", env.path("models").display().to_string())];
    let v = models_json(&env, &["--local-only"], &vars);
    let llama = v["providers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["provider"] == "llama")
        .unwrap();
    assert_eq!(llama["available"], cfg!(feature = "llama"), "{llama}");
    let m = &llama["models"][0];
    assert_eq!(m["context_window"], 40_960);
    assert_eq!(m["window_assumed"], false);
    assert_eq!(m["architecture"], "qwen3");
    assert_eq!(m["locality"], "local");
    // The human table shows the same.
    let mut cmd = env.lrg();
    cmd.args(["models", "--local-only"]);
    for (k, val) in &vars {
        cmd.env(k, val);
    }
    let r = ran(&mut cmd);
    assert!(r.stdout.contains("tiny.gguf"), "{r:?}");
    assert!(r.stdout.contains("40960 tokens"), "{r:?}");
}

#[test]
fn local_only_refuses_a_cloud_model_with_exit_2() {
    let env = Env::new();
    for (args, vars) in [
        (
            &["run", "--local-only", "--model", "openai:gpt-4.1", "hi"][..],
            &[][..],
        ),
        (
            &["run", "--model", "anthropic:claude-sonnet-4-5", "hi"][..],
            &[("LRG_LOCAL_ONLY", "1")][..],
        ),
    ] {
        let mut cmd = env.lrg();
        cmd.args(args)
            .env("OPENAI_API_KEY", "sk-x")
            .env("ANTHROPIC_API_KEY", "k");
        for (k, v) in vars {
            cmd.env(k, v);
        }
        let r = ran(&mut cmd);
        assert_eq!(r.code, 2, "{r:?}");
        assert!(r.stderr.contains("--local-only"), "{r:?}");
        assert!(r.stderr.contains("cloud"), "{r:?}");
        assert_eq!(r.stderr.lines().count(), 1, "one clear line: {r:?}");
    }
    // A local model runs as before.
    env.file("s.json", r#"[{"text":"hi"}]"#);
    let r = ran(env
        .lrg()
        .args(["run", "--local-only", "--model", "script:s.json", "hi"]));
    assert_eq!(r.code, 0, "{r:?}");
}

/// A host that is not this machine's loopback name, though it reaches the
/// fake server here: an IPv4-mapped IPv6 address.
fn remote_looking(uri: &str) -> String {
    uri.replace("127.0.0.1", "[::ffff:127.0.0.1]")
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_says_once_where_the_conversation_is_sent() {
    use wiremock::matchers::{method, path};
    use wiremock::{Mock, MockServer, ResponseTemplate};
    let server = MockServer::start().await;
    let body = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi.\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n";
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(ResponseTemplate::new(200).set_body_raw(body, "text/event-stream"))
        .mount(&server)
        .await;
    let base = format!("{}/v1", remote_looking(&server.uri()));
    let r = tokio::task::spawn_blocking(move || {
        let env = Env::new();
        ran(env
            .lrg()
            .args(["run", "--model", "openai:gpt-4.1", "hi"])
            .env("OPENAI_API_KEY", "sk-test")
            .env("OPENAI_BASE_URL", base))
    })
    .await
    .unwrap();
    if r.stderr.contains("cannot reach") {
        eprintln!("SKIPPED: this machine cannot reach IPv4-mapped IPv6 addresses: {r:?}");
        assert!(std::env::var_os("CI").is_none(), "{r:?}");
        return;
    }
    assert_eq!(r.code, 0, "{r:?}");
    let said: Vec<&str> = r
        .stderr
        .lines()
        .filter(|l| l.starts_with("This conversation is sent to"))
        .collect();
    assert_eq!(
        said,
        ["This conversation is sent to ::ffff:7f00:1"],
        "{r:?}"
    );
}

#[test]
fn chat_lists_models_and_switches_as_a_new_chat_after_asking() {
    let env = Env::new();
    env.file("one.json", r#"[{"text":"From one."}]"#);
    env.file("two.json", r#"[{"text":"From two."}]"#);
    let r = ran(env
        .lrg()
        .args(["chat", "--model", "script:one.json"])
        .env("LRG_MODELS_DIR", env.path("models"))
        .write_stdin("hi\n/models\n/model script:two.json\n\n/model script:two.json\nn\nhi\n"));
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(r.stdout, "From one.\nFrom two.\n", "{r:?}");
    for needle in [
        "ollama (your server)",
        "Carry this conversation over to script:two.json, or start a new chat on it \
         (this one is left behind)? [c = carry over, n = new chat, Enter = keep the current model]",
        "kept the current model",
        "New chat on script:two.json.",
    ] {
        assert!(r.stderr.contains(needle), "{needle}: {r:?}");
    }
}
