//! Typed answers on the real sidecar and the tiny random-weight model: the
//! reply branch of the grammar is the caller's schema, so whatever the model
//! samples, across 20 seeds, a typed answer validates (and a call is a valid
//! call). Without a Python that has mlx these tests print a notice and pass;
//! under `CI` they fail.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::sync::Arc;

use common::{engine, run};
use lrg_providers::local_chat::conformance::{self, Checked};
use lrg_providers::local_chat::{EngineStop, LocalChatModel};

async fn twenty_seeds(with_tools: bool) -> Vec<Checked> {
    let Some(engine) = engine().await else {
        return Vec::new();
    };
    let engine = Arc::new(engine);
    let model = LocalChatModel::new("mlx", engine.clone());
    let mut seen = Vec::new();
    for seed in 0..20 {
        let out = run(&engine, conformance::engine_turn(&model, with_tools, seed))
            .await
            .unwrap();
        eprintln!("seed {seed}: {}", out.text);
        assert_eq!(out.stop, EngineStop::Done, "seed {seed}: {}", out.text);
        seen.push(conformance::check(&out.text).unwrap_or_else(|e| panic!("seed {seed}: {e}")));
    }
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_typed_answer_validates_across_20_seeds() {
    let seen = twenty_seeds(false).await;
    assert!(
        seen.iter().all(|c| matches!(c, Checked::Typed(_))),
        "{seen:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_tools_every_answer_is_a_valid_call_or_a_valid_typed_answer() {
    let seen = twenty_seeds(true).await;
    if seen.is_empty() {
        return;
    }
    // Sampling reaches both kinds, so both were checked.
    assert!(
        seen.iter().any(|c| matches!(c, Checked::Typed(_))),
        "{seen:?}"
    );
    assert!(
        seen.iter().any(|c| matches!(c, Checked::Call(_))),
        "{seen:?}"
    );
}
