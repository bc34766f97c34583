//! An external agent's models: the fixture agent offers `fast` (its
//! default) and `deep` in its model config option; [`agent_models`] lists
//! them from a throwaway session, and a backend made for one chooses it on
//! every agent session it opens.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::session_support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use lrg_chat::acp::{AcpBackend, agent_models};
use lrg_chat::{ChatSession, FixedModel, TurnOutcome};
use lrg_providers::{AcpModelId, ChatModel};
use session_support::*;

fn agent() -> String {
    env!("CARGO_BIN_EXE_lrg-test-acp-agent").to_string()
}

async fn said(session: &ChatSession, text: &str) -> TurnOutcome {
    tokio::time::timeout(Duration::from_secs(30), finish(session.send(text).unwrap()))
        .await
        .expect("the turn ended")
}

fn text(outcome: TurnOutcome) -> String {
    match outcome {
        TurnOutcome::Completed { text, .. } => text,
        other => panic!("not completed: {other:?}"),
    }
}

#[tokio::test]
async fn the_agents_models_are_listed_from_a_throwaway_session_and_cached() {
    let dir = tempfile::tempdir().unwrap();
    let listed = agent_models(vec![agent()], dir.path(), Duration::from_secs(20))
        .await
        .unwrap();
    assert_eq!(listed.current.as_deref(), Some("fast"));
    let ids: Vec<(&str, &str)> = listed
        .models
        .iter()
        .map(|m| (m.id.as_str(), m.name.as_str()))
        .collect();
    assert_eq!(ids, [("fast", "Fast model"), ("deep", "Deep model")]);
    // Asked again, the answer is reused: no agent is started.
    let at = Instant::now();
    let again = agent_models(vec![agent()], dir.path(), Duration::from_secs(20))
        .await
        .unwrap();
    assert_eq!(again, listed);
    assert!(
        at.elapsed() < Duration::from_millis(50),
        "{:?}",
        at.elapsed()
    );
}

#[tokio::test]
async fn an_agent_that_says_nothing_fails_the_listing_within_its_timeout() {
    let dir = tempfile::tempdir().unwrap();
    // `sleep` reads nothing and answers nothing: a stalled agent.
    let at = Instant::now();
    let e = agent_models(
        vec!["sleep".into(), "30".into()],
        dir.path(),
        Duration::from_millis(300),
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(at.elapsed() < Duration::from_secs(5), "{:?}", at.elapsed());
    assert!(e.contains("did not tell its models within 300 ms"), "{e}");
    assert!(e.contains("sleep 30"), "{e}");
}

#[tokio::test]
async fn a_chosen_model_is_set_on_every_agent_session() {
    let dir = tempfile::tempdir().unwrap();
    let backend = AcpBackend::on_model(vec![agent()], dir.path(), Some("deep".into())).unwrap();
    // The model id it reports names the agent and its model, and parses back.
    let info = backend.info();
    let id = AcpModelId::parse(&format!("{}:{}", info.provider, info.model)).unwrap();
    assert_eq!(id.model.as_deref(), Some("deep"));
    assert_eq!(shell_words::split(&id.command).unwrap(), [agent()]);
    let session = ChatSession::builder(Arc::new(FixedModel::new(backend))).build();
    assert_eq!(text(said(&session, "which model").await), "model deep");
    // A cleared chat is a new agent session: the model is chosen again.
    session.clear().unwrap();
    assert_eq!(text(said(&session, "which model").await), "model deep");

    let plain = AcpBackend::new(vec![agent()], dir.path()).unwrap();
    let session = ChatSession::builder(Arc::new(FixedModel::new(plain))).build();
    assert_eq!(text(said(&session, "which model").await), "model fast");
}

#[tokio::test]
async fn a_model_the_agent_lacks_fails_naming_those_it_has() {
    let dir = tempfile::tempdir().unwrap();
    let backend = AcpBackend::on_model(vec![agent()], dir.path(), Some("huge".into())).unwrap();
    let session = ChatSession::builder(Arc::new(FixedModel::new(backend))).build();
    let outcome = said(&session, "which model").await;
    let TurnOutcome::Failed { error, .. } = &outcome else {
        panic!("not failed: {outcome:?}");
    };
    let e = error.to_string();
    assert!(
        e.contains("has no model `huge`; it offers: fast, deep"),
        "{e}"
    );
}
