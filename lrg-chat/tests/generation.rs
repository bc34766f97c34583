//! Generation settings through the loop: the session's defaults reach every
//! model turn, a message's own settings win over them for that message
//! only, a change applies from the next message, and an out-of-range value
//! ends the message with an error that names it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::session_support;

use std::sync::Arc;

use lrg_chat::events::{ErrorKind, Event};
use lrg_chat::{ChatSession, FixedModel, TurnOutcome};
use lrg_providers::{GenerationSettings, ScriptedModel};
use serde_json::json;
use session_support::{TestTools, calls, finish, reply};

fn session(model: &ScriptedModel, generation: GenerationSettings) -> ChatSession {
    ChatSession::builder(Arc::new(FixedModel::new(model.clone())))
        .tools(TestTools::new().host.clone())
        .generation(generation)
        .build()
}

#[tokio::test]
async fn session_settings_reach_every_turn_and_a_message_overrides_them() {
    let model = ScriptedModel::new(vec![
        calls(&[("echo", json!({"text": "a"}))]),
        reply("first"),
        reply("second"),
        reply("third"),
    ]);
    let defaults = GenerationSettings::new()
        .temperature(0.3)
        .seed(5)
        .stop(["END"]);
    let session = session(&model, defaults.clone());
    assert_eq!(session.generation(), defaults);

    // Both model turns of the first message (a tool call, then the answer)
    // carry the message's settings over the session's.
    let own = GenerationSettings::new().temperature(0.9).max_tokens(50);
    let outcome = finish(session.send_with("one", own).unwrap()).await;
    assert!(
        matches!(outcome, TurnOutcome::Completed { .. }),
        "{outcome:?}"
    );
    let merged = GenerationSettings::new()
        .temperature(0.9)
        .max_tokens(50)
        .seed(5)
        .stop(["END"]);
    let requests = model.requests();
    assert_eq!(requests.len(), 2);
    for request in &requests {
        assert_eq!(request.settings, merged);
    }

    // The next message has the session's settings alone.
    finish(session.send("two").unwrap()).await;
    assert_eq!(model.requests()[2].settings, defaults);

    // A change applies from the next message.
    let changed = GenerationSettings::new().top_p(0.5);
    session.set_generation(changed.clone());
    finish(session.send("three").unwrap()).await;
    assert_eq!(model.requests()[3].settings, changed);
}

#[tokio::test]
async fn an_out_of_range_setting_fails_the_message_and_names_it() {
    let model = ScriptedModel::new(vec![reply("never sent")]);
    let session = session(&model, GenerationSettings::new().temperature(0.5));
    let outcome = finish(
        session
            .send_with("hi", GenerationSettings::new().top_p(3.0))
            .unwrap(),
    )
    .await;
    assert!(matches!(outcome, TurnOutcome::Failed { .. }), "{outcome:?}");
    assert!(model.requests().is_empty(), "nothing was sent");
    let errors: Vec<(ErrorKind, String)> = session
        .events()
        .entries()
        .iter()
        .filter_map(|e| match &e.event {
            Event::Error { kind, message } => Some((*kind, message.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(errors[0].0, ErrorKind::Config);
    assert!(
        errors[0].1.contains("top_p must be between 0 and 1"),
        "{errors:?}"
    );
}
