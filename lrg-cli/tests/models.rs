//! `lrg models` and the provider table as a user meets them: every provider
//! in the help and in the listing, the catalog's groups, windows and
//! locality, and `--local-only`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

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
