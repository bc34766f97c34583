//! Conformance check of what a chat list reads from a store: a chat's
//! owner, its name (given, changed and cleared, open here or not, kept
//! through later appends and by every other handle) and its first user
//! message, clipped.

use lrg_chat::store::{ListFilter, SessionStore};
use lrg_providers::Message;

use super::{Backend, exchange, meta, state, within};

async fn listed(
    store: &dyn SessionStore,
    owner: &str,
) -> Vec<(String, Option<String>, Option<String>)> {
    let mut filter = ListFilter::all();
    filter.owner = Some(owner.into());
    within(store.list(&filter))
        .await
        .unwrap()
        .into_iter()
        .map(|s| (s.meta.id.to_string(), s.meta.name, s.first_message))
        .collect()
}

pub async fn names_and_first_messages_are_listed(backend: &dyn Backend) {
    let store = backend.store();
    let m = meta().with_owner("alice");
    let id = m.id.to_string();
    within(store.create(&m)).await.unwrap();
    assert_eq!(
        listed(store.as_ref(), "alice").await,
        [(id.clone(), None, None)]
    );
    within(store.append(&m.id, &exchange("a", 1), &state(1)))
        .await
        .unwrap();
    let first = Some("question a".to_string());
    assert_eq!(
        listed(store.as_ref(), "alice").await,
        [(id.clone(), None, first.clone())]
    );
    assert!(listed(store.as_ref(), "bob").await.is_empty());

    // Named while this handle writes it; appends go on after the rename.
    assert!(within(store.rename(&m.id, Some("Plans"))).await.unwrap());
    within(store.append(&m.id, &exchange("b", 0), &state(2)))
        .await
        .unwrap();
    let named = Some("Plans".to_string());
    assert_eq!(
        listed(store.as_ref(), "alice").await,
        [(id.clone(), named.clone(), first.clone())]
    );
    within(store.release(&m.id)).await;
    let other = backend.store();
    let loaded = within(other.load(&m.id)).await.unwrap();
    assert_eq!(loaded.meta.name.as_deref(), Some("Plans"));
    assert_eq!(loaded.rows.len(), 6, "{:?}", loaded.rows);

    // Renamed and cleared by a handle that does not write it.
    assert!(within(other.rename(&m.id, Some("Tides"))).await.unwrap());
    assert_eq!(
        listed(other.as_ref(), "alice").await,
        [(id.clone(), Some("Tides".into()), first.clone())]
    );
    assert!(within(other.rename(&m.id, Some(""))).await.unwrap());
    assert_eq!(
        listed(other.as_ref(), "alice").await,
        [(id.clone(), None, first)]
    );
    let resumed = within(other.resume(&m.id, usize::MAX)).await.unwrap();
    assert_eq!((resumed.meta.name, resumed.rows.len()), (None, 6));
    within(other.release(&m.id)).await;

    // No such chat; and a long first message is clipped.
    let unknown = meta();
    assert!(!within(other.rename(&unknown.id, Some("x"))).await.unwrap());
    let long = meta().with_owner("carol");
    within(other.create(&long)).await.unwrap();
    let text = format!("{}\n\n{}", "word ".repeat(30), "tail");
    within(other.append(&long.id, &[Message::user(text)], &state(3)))
        .await
        .unwrap();
    let title = listed(other.as_ref(), "carol").await[0].2.clone().unwrap();
    assert_eq!(title.chars().count(), 81, "{title}");
    assert!(title.ends_with('…') && !title.contains('\n'), "{title}");
    within(other.release(&long.id)).await;
}
