//! `ChatSession::deliver`: the entry point a delegation layer is built on
//! (sub-agents are one). A result handed in enters the history as a call and
//! its result, and claims an autonomous turn for the model to react; while
//! the session works it waits for the end of that work.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::session_support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use lrg_chat::events::Event;
use lrg_chat::session::Delivery;
use lrg_chat::{ChatSession, FixedModel};
use lrg_providers::{Part, Role, ScriptedModel, ScriptedTurn};
use serde_json::json;
use session_support::*;

const WAIT: Duration = Duration::from_secs(10);

fn session(turns: Vec<ScriptedTurn>) -> (ChatSession, ScriptedModel) {
    let model = ScriptedModel::new(turns);
    let session = ChatSession::builder(Arc::new(FixedModel::new(model.clone()))).build();
    (session, model)
}

fn job(n: u32, text: &str) -> Delivery {
    Delivery::new(
        format!("job_result_{n}"),
        "job_result",
        json!({"job": n}),
        text,
        true,
    )
}

#[tokio::test]
async fn a_delivered_result_enters_the_history_and_the_model_reacts_on_its_own() {
    let (session, model) = session(vec![reply("The job found 3 files.")]);
    let entered = Arc::new(AtomicBool::new(false));
    let seen = entered.clone();
    session.deliver(job(1, "3 files").on_entered(move || seen.store(true, Ordering::SeqCst)));
    tokio::time::timeout(WAIT, session.wait_settled())
        .await
        .expect("the reacting turn never ended");

    assert!(entered.load(Ordering::SeqCst), "on_entered never ran");
    // The model saw the result as a call and its result, then answered.
    let sent = &model.requests()[0].messages;
    let call = sent
        .iter()
        .flat_map(|m| &m.parts)
        .find_map(|p| match p {
            Part::ToolCall(c) => Some(c.clone()),
            _ => None,
        })
        .expect("no synthetic call was sent");
    assert_eq!(
        (call.id.as_str(), call.name.as_str()),
        ("job_result_1", "job_result")
    );
    assert_eq!(call.arguments, json!({"job": 1}));
    let history = session.history();
    assert_eq!(history.len(), 3, "{history:#?}");
    assert_eq!(history[1].role, Role::Tool);
    assert_eq!(history[2].text(), "The job found 3 files.");

    let events: Vec<Event> = session
        .events()
        .entries()
        .iter()
        .map(|e| e.event.clone())
        .collect();
    assert!(
        events.iter().any(|e| matches!(
            e,
            Event::Busy {
                busy: true,
                autonomous: true,
                ..
            }
        )),
        "no autonomous turn: {events:#?}"
    );
    assert!(events.iter().any(|e| matches!(
        e,
        Event::ToolDone { call_id, ok: true, text, .. } if call_id == "job_result_1" && text == "3 files"
    )));
}

#[tokio::test]
async fn results_delivered_while_it_works_wait_and_enter_one_per_turn() {
    let slow = ScriptedTurn {
        delay_ms: Some(200),
        ..reply("Working on your message.")
    };
    let (session, model) = session(vec![
        slow,
        reply("Seen the first job."),
        reply("Seen the second job."),
    ]);
    let handle = session.send("hello").unwrap();
    session.deliver(job(1, "first"));
    session.deliver(job(2, "second"));
    assert!(
        !session.is_settled(),
        "results are waiting: not settled yet"
    );
    tokio::time::timeout(WAIT, handle)
        .await
        .expect("message hung");
    tokio::time::timeout(WAIT, session.wait_settled())
        .await
        .expect("the reacting turns never ended");

    assert_eq!(model.turns_played(), 3);
    // The second reacting turn saw both results, the first only one.
    let calls_in = |i: usize| {
        model.requests()[i]
            .messages
            .iter()
            .flat_map(|m| &m.parts)
            .filter(|p| matches!(p, Part::ToolCall(_)))
            .count()
    };
    assert_eq!((calls_in(0), calls_in(1), calls_in(2)), (0, 1, 2));
}
