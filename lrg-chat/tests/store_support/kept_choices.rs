//! Conformance check of what a person chose about where a chat goes: the
//! "local only" lock and the consent to a provider's cloud are kept with
//! the chat, over any store, and a resume through the registry restores
//! them; state written before either was kept loads with both off.

use std::sync::Arc;

use lrg_chat::registry::{OpenRequest, OpenedHow, RegistryConfig, SessionRegistry};
use lrg_chat::store::{ModelBinding, SessionKeys, SessionState, SessionStore};
use lrg_chat::{ChatSession, FixedModel};
use lrg_providers::ScriptedModel;

use super::{Backend, exchange, meta, within};

fn registry(store: Arc<dyn SessionStore>) -> SessionRegistry {
    let model = ScriptedModel::new(vec![]);
    SessionRegistry::new(
        move |_: &ModelBinding| {
            Ok(ChatSession::builder(Arc::new(FixedModel::new(
                model.clone(),
            ))))
        },
        RegistryConfig::default(),
    )
    .with_store(store)
}

pub async fn the_lock_and_consent_last_on_resume(backend: &dyn Backend) {
    // The store keeps the fields as written.
    let store = backend.store();
    let m = meta();
    within(store.create(&m)).await.unwrap();
    let mut locked = SessionState::default();
    locked.local_only = true;
    locked.cloud_consent = vec!["openai".into()];
    within(store.append(&m.id, &exchange("a", 1), &locked))
        .await
        .unwrap();
    within(store.release(&m.id)).await;
    let loaded = within(backend.store().load(&m.id)).await.unwrap();
    assert!(loaded.state.local_only);
    assert_eq!(loaded.state.cloud_consent, ["openai"]);

    // Through the registry: set on a live chat with no message after it,
    // put away, opened again by its keys.
    let keys = SessionKeys::new("alice", "doc:locked").unwrap();
    let first = registry(backend.store());
    let opened = within(first.open(OpenRequest::keyed(
        keys.clone(),
        ModelBinding::new("script:m"),
    )))
    .await
    .unwrap();
    assert!(!opened.session.local_only());
    assert!(!opened.session.cloud_consented("anthropic"));
    opened.session.set_local_only(true);
    assert_eq!(opened.session.consent_to_cloud("anthropic", false), None);
    assert!(within(opened.session.keep_state()).await);
    let id = opened.id.clone();
    assert!(within(first.release(&id)).await);

    let second = registry(backend.store());
    let resumed = within(second.open(OpenRequest::keyed(
        keys.clone(),
        ModelBinding::new("script:m"),
    )))
    .await
    .unwrap();
    assert_eq!(resumed.id, id);
    assert!(
        matches!(resumed.how, OpenedHow::Resumed { .. }),
        "{:?}",
        resumed.how
    );
    assert!(resumed.session.local_only(), "the lock was kept");
    assert!(
        resumed.session.cloud_consented("anthropic"),
        "the consent was kept"
    );
    assert!(!resumed.session.cloud_consented("openai"));

    // Unlocked, kept again: the next resume is unlocked.
    resumed.session.set_local_only(false);
    assert!(within(resumed.session.keep_state()).await);
    assert!(within(second.release(&id)).await);
    let third = registry(backend.store());
    let again = within(third.open(OpenRequest::keyed(keys, ModelBinding::new("script:m"))))
        .await
        .unwrap();
    assert!(!again.session.local_only(), "unlocked stays unlocked");
    assert!(again.session.cloud_consented("anthropic"));
    within(third.release(&id)).await;
}

/// A state written before the lock and consent were kept.
pub fn an_older_state_loads_unlocked() {
    let old: SessionState = serde_json::from_str(
        r#"{"granted":["delete_notes"],"usage":{"prompt_tokens":3,"completion_tokens":1},"updated_ms":5}"#,
    )
    .unwrap();
    assert!(!old.local_only);
    assert!(old.cloud_consent.is_empty());
    assert_eq!(old.granted, ["delete_notes"]);
    // And an unlocked state writes neither field, as older lrg wrote it.
    let text = serde_json::to_string(&old).unwrap();
    assert!(
        !text.contains("local_only") && !text.contains("cloud_consent"),
        "{text}"
    );
}
