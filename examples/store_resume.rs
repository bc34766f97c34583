//! A keyed chat that outlives its process, on the JSONL session store.
//!
//! A [`SessionRegistry`] over a [`JsonlStore`] opens chats by two keys (a
//! client and a context: here a user and a document): the first open
//! creates the chat, later ones resume it. The example opens a chat, sends
//! a message, then drops the registry, the store and the session — what a
//! restart does — and builds everything again over the same folder. Opening
//! with the same keys resumes the chat: its history is back, its event log
//! begins with that history (what a page shows on reconnecting), and the
//! next message reaches the model with the whole conversation.
//!
//! The store is one JSONL file per chat in a temporary folder here; an app
//! keeps it in its data folder (`JsonlStore::default_dir()`). The same code
//! runs on PostgreSQL with lrg-chat's `postgres` feature: put a `PgStore`
//! where the `JsonlStore` is (see `examples/README.md`).
//!
//! Run it with `cargo run -p lrg-examples --example store_resume`.

use std::path::Path;
use std::sync::Arc;

use lrg_chat::events::Event;
use lrg_chat::registry::{OpenRequest, Opened, RegistryConfig, SessionRegistry};
use lrg_chat::store::{JsonlStore, ModelBinding, SessionKeys, SessionStore};
use lrg_chat::{ChatSession, FixedModel, TurnOutcome};
use lrg_providers::{Role, ScriptedModel, ScriptedTurn};

fn answer(text: &str) -> ScriptedTurn {
    ScriptedTurn {
        text: Some(text.to_owned()),
        ..Default::default()
    }
}

/// What one process builds at its start: a store over `dir` and a registry
/// whose sessions run on `model`.
fn registry(dir: &Path, model: ScriptedModel) -> SessionRegistry {
    let store: Arc<dyn SessionStore> = Arc::new(JsonlStore::new(dir));
    let factory = move |_binding: &ModelBinding| {
        // The binding names the model the chat is kept with
        // (`provider:model`): an app resolves it to its `ChatModel` here.
        Ok(
            ChatSession::builder(Arc::new(FixedModel::new(model.clone())))
                .system_prompt("You keep notes for a user."),
        )
    };
    SessionRegistry::new(factory, RegistryConfig::default()).with_store(store)
}

async fn open(registry: &SessionRegistry) -> Result<Opened, Box<dyn std::error::Error>> {
    let keys = SessionKeys::new("alice", "shopping-list")?;
    let request = OpenRequest::keyed(keys, ModelBinding::new("script:notes"));
    Ok(registry.open(request).await?)
}

async fn send(session: &ChatSession, text: &str) -> Result<String, Box<dyn std::error::Error>> {
    println!("user: {text}");
    match session.send(text)?.await {
        TurnOutcome::Completed { text, .. } => {
            println!("model: {text}");
            Ok(text)
        }
        other => Err(format!("the message did not complete: {other:?}").into()),
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    println!("store: {}", dir.path().display());

    // The first process.
    {
        let model = ScriptedModel::new(vec![answer("Noted: oat milk.")]);
        let registry = registry(dir.path(), model);
        let opened = open(&registry).await?;
        println!("opened {} ({:?})", opened.id, opened.how);
        send(&opened.session, "Remember that I need oat milk.").await?;
        // Every step is appended and synced before its event is published;
        // nothing needs saving at the end. Dropping the registry gives the
        // chat's writer place back, so another process can take it.
    }

    // The next process: everything built again over the same folder.
    let model = ScriptedModel::new(vec![answer("You need oat milk and coffee beans.")]);
    let registry = registry(dir.path(), model.clone());
    let opened = open(&registry).await?;
    println!("opened {} again ({:?})", opened.id, opened.how);

    println!("history back from the store:");
    for message in opened.session.history() {
        println!("  {:?}: {}", message.role, message.text());
    }
    // A page connecting with `after=0` sees the same conversation.
    let replayed: Vec<String> = opened
        .session
        .events()
        .entries()
        .iter()
        .filter_map(|entry| match &entry.event {
            Event::UserMessage { .. } => Some("user_message".to_owned()),
            Event::AssistantTurn { .. } => Some("assistant_turn".to_owned()),
            _ => None,
        })
        .collect();
    println!("events replayed for viewers: {}", replayed.join(", "));

    send(
        &opened.session,
        "I also need coffee beans. What is on my list?",
    )
    .await?;
    let seen = model
        .requests()
        .last()
        .map(|request| {
            request
                .messages
                .iter()
                .filter(|m| m.role == Role::User)
                .count()
        })
        .unwrap_or(0);
    println!("the model saw {seen} user messages: the old one came back with the chat");
    if seen != 2 {
        return Err("the resumed chat lost its history".into());
    }
    Ok(())
}
