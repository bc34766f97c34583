//! Conformance checks of a kept chat that is never lost on reopen: archiving
//! ([`SessionStore::archive`]), moving to another model
//! ([`SessionStore::rebind`]), and the registry's policies for keys that
//! name a chat on another model, over any store.

use std::sync::Arc;

use lrg_chat::events::Event;
use lrg_chat::registry::{
    OpenRequest, OpenedHow, OtherModel, RegistryConfig, RegistryError, SessionRegistry,
};
use lrg_chat::store::{
    ListFilter, ModelBinding, SessionKeys, SessionMeta, SessionStore, StoreError,
};
use lrg_chat::{ChatSession, FixedModel};
use lrg_providers::{Message, NativePart, Part, Role, ScriptedModel};
use serde_json::json;

use super::{Backend, exchange, meta, state, within};

/// An archived chat keeps its history and its place in listings, and is
/// found by its archive id, but releases its keys: `find` passes it by and
/// a new chat takes them. The writer archives it in place and goes on
/// writing; any other handle is refused while one writes it.
pub async fn archive_releases_the_keys(backend: &dyn Backend) {
    let store = backend.store();
    let keys = SessionKeys::new("alice", "doc:archive").unwrap();
    let old = meta().with_keys(keys.clone());
    within(store.create(&old)).await.unwrap();
    within(store.append(&old.id, &exchange("a", 1), &state(1)))
        .await
        .unwrap();
    within(store.release(&old.id)).await;

    // Written by another handle (another process): refused, unchanged.
    let writer = backend.store();
    within(writer.resume(&old.id, usize::MAX)).await.unwrap();
    let err = within(store.archive(&old.id)).await.unwrap_err();
    assert!(matches!(err, StoreError::Locked { .. }), "{err}");
    let found = within(store.find(&keys)).await.unwrap().unwrap();
    assert_eq!(found.meta.id, old.id);
    assert!(!found.meta.archived);

    // The writer archives it in place, and goes on writing it.
    assert!(within(writer.archive(&old.id)).await.unwrap());
    assert!(
        within(store.find(&keys)).await.unwrap().is_none(),
        "its keys are released"
    );
    within(writer.append(&old.id, &exchange("b", 0), &state(2)))
        .await
        .unwrap();
    within(writer.release(&old.id)).await;
    let loaded = within(store.load(&old.id)).await.unwrap();
    assert!(loaded.meta.archived);
    assert_eq!(loaded.meta.archive_id(), Some(&old.id));
    assert_eq!(
        loaded.meta.keys.as_ref(),
        Some(&keys),
        "kept, for the record"
    );
    assert_eq!(loaded.meta.model, old.model);
    assert_eq!(loaded.rows, [exchange("a", 1), exchange("b", 0)].concat());
    let listed = within(store.list(&ListFilter::all())).await.unwrap();
    assert!(
        listed
            .iter()
            .any(|s| s.meta.id == old.id && s.meta.archived),
        "{listed:?}"
    );

    // A new chat takes the keys; the archived one stays.
    let new = meta().with_keys(keys.clone());
    within(store.create(&new)).await.unwrap();
    within(store.release(&new.id)).await;
    let found = within(backend.store().find(&keys)).await.unwrap().unwrap();
    assert_eq!(found.meta.id, new.id);
    assert!(within(store.load(&old.id)).await.unwrap().meta.archived);

    // Again: nothing changes; no such chat: false.
    assert!(within(store.archive(&old.id)).await.unwrap());
    assert!(!within(store.archive(&meta().id)).await.unwrap());
    // Still a chat like any other, read and resumed by its id.
    let resumed = within(store.resume(&old.id, usize::MAX)).await.unwrap();
    assert!(resumed.meta.archived);
    assert_eq!(resumed.rows, loaded.rows);
    within(store.release(&old.id)).await;
}

/// A chat moves to another model only under its writer, durably, with its
/// history as it was.
pub async fn rebind_moves_a_chat_to_another_model(backend: &dyn Backend) {
    let store = backend.store();
    let m = meta();
    within(store.create(&m)).await.unwrap();
    within(store.append(&m.id, &exchange("a", 1), &state(1)))
        .await
        .unwrap();
    let to = ModelBinding::new("openai:gpt-test");
    within(store.rebind(&m.id, &to)).await.unwrap();
    // Written on after the move, as before it.
    within(store.append(&m.id, &exchange("b", 0), &state(2)))
        .await
        .unwrap();
    within(store.release(&m.id)).await;
    let loaded = within(backend.store().load(&m.id)).await.unwrap();
    assert_eq!(loaded.meta.model, to);
    assert_eq!(loaded.meta.keys, m.keys);
    assert_eq!(loaded.rows, [exchange("a", 1), exchange("b", 0)].concat());
    let err = within(store.rebind(&m.id, &m.model)).await.unwrap_err();
    assert!(matches!(err, StoreError::NotOpen(_)), "{err}");
}

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

fn binding(model: &str) -> ModelBinding {
    ModelBinding::new(model)
}

/// Keys that name a chat on another model: refused with nothing changed
/// (the default), carried over (the history goes on there without the old
/// model's native parts, and says so), or replaced (the old chat archived,
/// live ones staying live). Never deleted.
pub async fn the_registry_never_loses_a_chat_on_another_model(backend: &dyn Backend) {
    let keys = SessionKeys::new("alice", "doc:reopen").unwrap();
    let thinking = NativePart {
        provider: "anthropic".into(),
        model: "claude-test".into(),
        value: json!({"type": "thinking", "signature": "sig"}),
    };
    let rows = vec![
        Message::user("hi"),
        Message {
            role: Role::Assistant,
            parts: vec![
                Part::Native(thinking),
                Part::Text {
                    text: "hello".into(),
                },
            ],
        },
    ];
    let kept = SessionMeta::new(binding("anthropic:claude-test")).with_keys(keys.clone());
    let id = kept.id.clone();
    let store = backend.store();
    within(store.create(&kept)).await.unwrap();
    within(store.append(&id, &rows, &state(1))).await.unwrap();
    within(store.release(&id)).await;
    let before = within(store.load(&id)).await.unwrap();

    // Another model, no policy: refused, nothing changed, nothing built.
    let first = registry(backend.store());
    assert_eq!(
        within(first.kept_model(&keys)).await.unwrap(),
        Some(binding("anthropic:claude-test"))
    );
    let err = within(first.open(OpenRequest::keyed(keys.clone(), binding("openai:gpt-test"))))
        .await
        .unwrap_err();
    match &err {
        RegistryError::OtherModel {
            id: refused,
            stored_model,
            asked_model,
        } => {
            assert_eq!(refused, &id);
            assert_eq!(stored_model, "anthropic:claude-test");
            assert_eq!(asked_model, "openai:gpt-test");
        }
        other => panic!("not refused: {other}"),
    }
    assert!(err.to_string().contains("anthropic:claude-test"), "{err}");
    assert!(first.is_empty());
    assert_eq!(within(store.load(&id)).await.unwrap(), before);

    // Carried over: the same chat, on the new model, without the old
    // model's native parts; the switch follows its history.
    let carried = within(
        first.open(
            OpenRequest::keyed(keys.clone(), binding("openai:gpt-test"))
                .on_other_model(OtherModel::CarryOver),
        ),
    )
    .await
    .unwrap();
    assert_eq!(carried.id, id);
    assert_eq!(
        carried.how,
        OpenedHow::CarriedOver {
            from: "anthropic:claude-test".into(),
            rows: 2
        }
    );
    let history = carried.session.history();
    assert_eq!(history[0], Message::user("hi"));
    assert_eq!(history[1], Message::assistant("hello"));
    let entries = carried.session.events().entries();
    let last = entries.last().unwrap();
    assert_eq!(
        last.event,
        Event::ModelSwitched {
            from: "anthropic:claude-test".into(),
            to: "openai:gpt-test".into()
        }
    );
    assert!(last.seq.is_some(), "numbered");
    let stored = within(store.load(&id)).await.unwrap();
    assert_eq!(stored.meta.model, binding("openai:gpt-test"));
    assert_eq!(stored.rows, history);
    assert_eq!(
        within(first.kept_model(&keys)).await.unwrap(),
        Some(binding("openai:gpt-test"))
    );

    // Live on the new model: it answers itself; another model is refused.
    let live = within(first.open(OpenRequest::keyed(keys.clone(), binding("openai:gpt-test"))))
        .await
        .unwrap();
    assert_eq!((live.how, live.id), (OpenedHow::Live, id.clone()));
    let err = within(first.open(OpenRequest::keyed(keys.clone(), binding("script:third"))))
        .await
        .unwrap_err();
    assert!(matches!(err, RegistryError::OtherModel { .. }), "{err}");
    assert!(first.is_live(&id));

    // Replaced while live: the old chat is archived and stays live, a new
    // chat takes the keys.
    let replaced = within(
        first.open(
            OpenRequest::keyed(keys.clone(), binding("script:third"))
                .on_other_model(OtherModel::Replace),
        ),
    )
    .await
    .unwrap();
    assert_ne!(replaced.id, id);
    assert_eq!(
        replaced.how,
        OpenedHow::Replaced {
            archived: id.clone(),
            old_model: "openai:gpt-test".into()
        }
    );
    assert!(first.is_live(&id), "the old chat goes on");
    let old = within(store.load(&id)).await.unwrap();
    assert!(old.meta.archived);
    assert_eq!(old.rows, history);
    let found = within(store.find(&keys)).await.unwrap().unwrap();
    assert_eq!(found.meta.id, replaced.id);
    // Put away, so another registry may take them at once.
    first.release(&id).await;
    first.release(&replaced.id).await;
    drop(first);

    // After a restart: the keys resume the new chat, and replacing a stored
    // one archives it too. Nothing was ever deleted.
    let second = registry(backend.store());
    let again = within(second.open(OpenRequest::keyed(keys.clone(), binding("script:third"))))
        .await
        .unwrap();
    assert_eq!(
        (again.how, again.id.clone()),
        (OpenedHow::Resumed { rows: 0 }, replaced.id.clone())
    );
    second.release(&again.id).await;
    let third = within(
        second.open(
            OpenRequest::keyed(keys.clone(), binding("openai:gpt-test"))
                .on_other_model(OtherModel::Replace),
        ),
    )
    .await
    .unwrap();
    assert!(matches!(&third.how, OpenedHow::Replaced { archived, .. } if *archived == replaced.id));
    let all = within(store.list(&ListFilter::all())).await.unwrap();
    let mine: Vec<_> = all
        .iter()
        .filter(|s| s.meta.keys.as_ref() == Some(&keys))
        .map(|s| (s.meta.id.clone(), s.meta.archived))
        .collect();
    assert_eq!(mine.len(), 3, "{mine:?}");
    assert_eq!(mine.iter().filter(|(_, archived)| *archived).count(), 2);
}
