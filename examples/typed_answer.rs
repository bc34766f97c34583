//! A typed answer: a bug report triaged into a `Triage` struct with
//! `ChatSession::send_typed`, offline on a scripted model.
//!
//! The model's first answer breaks the schema (a priority of 7, the most
//! being 5); the session sends it back with the problem in words, and the
//! second answer is deserialized. With a real model, put its `ChatModel`
//! where the `ScriptedModel` is: the schema then goes the strongest way the
//! backend allows (a grammar, a strict API mode, or the instructions), and
//! the answer is checked the same way whatever it is.
//!
//! Run it with `cargo run -p lrg-examples --example typed_answer`.

use std::sync::Arc;

use lrg_chat::events::Event;
use lrg_chat::{ChatSession, FixedModel, TypedError};
use lrg_providers::{ScriptedModel, ScriptedTurn};
use schemars::JsonSchema;
use serde::Deserialize;

/// What kind of report it is.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
enum Label {
    Bug,
    Feature,
    Question,
}

/// A bug report, triaged.
#[derive(Debug, Deserialize, JsonSchema)]
struct Triage {
    /// What kind of report it is.
    label: Label,
    /// 1 (can wait) to 5 (drop everything).
    #[schemars(range(min = 1, max = 5))]
    priority: u8,
}

fn answer(text: &str) -> ScriptedTurn {
    ScriptedTurn {
        text: Some(text.to_owned()),
        ..Default::default()
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let model = ScriptedModel::new(vec![
        answer(r#"{"label": "bug", "priority": 7}"#),
        answer(r#"{"label": "bug", "priority": 5}"#),
    ]);
    let session = ChatSession::builder(Arc::new(FixedModel::new(model)))
        .system_prompt("You triage the bug reports of a desktop app.")
        .build();

    // What the session says while it works: the repair shows as a warning.
    let mut events = session.subscribe(0);
    let watcher = tokio::spawn(async move {
        while let Some(entry) = events.next().await {
            match &entry.event {
                Event::Warning { message, .. } => println!("warning: {message}"),
                Event::AssistantTurn { text, json, .. } => {
                    let checked = if json.is_some() { "valid" } else { "not valid" };
                    println!("the model answered ({checked}): {text}");
                }
                Event::Busy { busy: false, .. } => break,
                _ => {}
            }
        }
    });

    let report = "The app crashes at start on every machine since the last update.";
    println!("report: {report}");
    let triage = session.send_typed::<Triage>(report)?.await;
    watcher.await?;
    match triage {
        Ok(triage) => {
            let urgent = if triage.priority >= 4 {
                "urgent"
            } else {
                "can wait"
            };
            println!(
                "triaged: {:?}, priority {} ({urgent})",
                triage.label, triage.priority
            );
            Ok(())
        }
        Err(TypedError::Invalid { last_text, errors }) => {
            Err(format!("no valid answer: {} (last: {last_text})", errors.join("; ")).into())
        }
        Err(other) => Err(other.into()),
    }
}
