//! The event log: replay after a reconnect, live-only deltas, lagging
//! subscribers, and the wire format.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::session_support;

use std::sync::Arc;

use lrg_chat::Answer;
use lrg_chat::events::{
    DeltaKind, Event, EventLog, ImageDescriptor, LAG_LIMIT, LogEntry, SkipReason, SubAgentAsk,
};
use lrg_chat::permissions::{AnswerKind, ApprovalReason, Mode, PermissionSettings};
use lrg_chat::tools::ToolClass;
use lrg_providers::Usage;
use lrg_providers::pricing::{Cost, Spend};
use serde_json::json;
use session_support::*;

fn note(i: usize) -> Event {
    Event::Warning {
        message: format!("event {i}"),
        retrying: false,
    }
}

async fn drain(sub: &mut lrg_chat::Subscription, n: usize) -> Vec<Arc<LogEntry>> {
    let mut out = Vec::new();
    for _ in 0..n {
        out.push(
            tokio::time::timeout(WAIT, sub.next())
                .await
                .unwrap()
                .unwrap(),
        );
    }
    out
}

#[tokio::test]
async fn reconnect_with_after_rebuilds_the_same_log() {
    let (session, _, _) = new_session(vec![
        calls(&[
            ("read_note", json!({"name": "todo"})),
            ("delete_notes", json!({"ids": [1]})),
        ]),
        reply("Done."),
    ]);
    // A live viewer from the start.
    let mut live = session.subscribe(0);
    let handle = session.send("tidy up").unwrap();
    let id = next_approval(&mut live).await;
    // A viewer that connects midway and reconnects later.
    let mid = session.events().last_seq();
    session.answer_approval(&id, Answer::Once).unwrap();
    finish(handle).await;
    let log = session.events().entries();
    let mut seen = Vec::new();
    let mut fresh = session.subscribe(0);
    while seen.len() < log.len() {
        let entry = tokio::time::timeout(WAIT, fresh.next())
            .await
            .unwrap()
            .unwrap();
        seen.push(entry);
    }
    assert_eq!(
        seen, log,
        "a viewer connecting after the fact replays the whole log"
    );

    let mut reconnect = session.subscribe(mid);
    let tail = drain(&mut reconnect, log.len() - mid as usize).await;
    assert_eq!(
        tail[..],
        log[mid as usize..],
        "after=seq gives exactly what followed"
    );
    let rebuilt: Vec<_> = log[..mid as usize].iter().chain(&tail).cloned().collect();
    assert_eq!(rebuilt, log);

    // The live viewer saw the same numbered events, with deltas in between.
    let mut live_numbered: Vec<Arc<LogEntry>> = Vec::new();
    let mut live_all = session.subscribe(0);
    while live_numbered.len() < log.len() {
        let entry = tokio::time::timeout(WAIT, live_all.next())
            .await
            .unwrap()
            .unwrap();
        if entry.seq.is_some() {
            live_numbered.push(entry);
        }
    }
    assert_eq!(live_numbered, log);

    // The wire format round-trips: what the CLI prints and the page reads.
    let lines: Vec<String> = log
        .iter()
        .map(|e| serde_json::to_string(e.as_ref()).unwrap())
        .collect();
    for (line, entry) in lines.iter().zip(&log) {
        let back: LogEntry = serde_json::from_str(line).unwrap();
        assert_eq!(&back, entry.as_ref(), "{line}");
    }
    assert_pairing(&session);
}

#[tokio::test]
async fn live_viewer_sees_deltas_before_the_turn() {
    let (session, _, _) = new_session(vec![lrg_providers::ScriptedTurn {
        reasoning: Some("hmm".into()),
        text: Some("two words".into()),
        ..Default::default()
    }]);
    let mut sub = session.subscribe(0);
    finish(session.send("hi").unwrap()).await;
    let mut got = Vec::new();
    loop {
        let entry = tokio::time::timeout(WAIT, sub.next())
            .await
            .unwrap()
            .unwrap();
        let end = matches!(entry.event, Event::Busy { busy: false, .. });
        got.push(serde_json::to_value(entry.as_ref()).unwrap());
        if end {
            break;
        }
    }
    snapshot!(got);
    assert!(
        session
            .events()
            .entries()
            .iter()
            .all(|e| !matches!(e.event, Event::Delta { .. })),
        "deltas are never kept"
    );
}

/// A live viewer sees each call stream (`tool_call_delta`, named on its
/// first delta) before the numbered `tool_call`; the log keeps none of it.
#[tokio::test]
async fn live_viewer_sees_tool_call_deltas_before_the_call() {
    let (session, _, _) = new_session(vec![
        calls(&[("read_note", json!({"name": "todo"}))]),
        reply("Done."),
    ]);
    let mut sub = session.subscribe(0);
    finish(session.send("read it").unwrap()).await;
    let mut got = Vec::new();
    loop {
        let entry = tokio::time::timeout(WAIT, sub.next())
            .await
            .unwrap()
            .unwrap();
        let end = matches!(entry.event, Event::Busy { busy: false, .. });
        got.push(serde_json::to_value(entry.as_ref()).unwrap());
        if end {
            break;
        }
    }
    let at = |kind: &str| got.iter().position(|e| e["type"] == kind).unwrap();
    assert!(at("tool_call_delta") < at("tool_call"));
    let delta = &got[at("tool_call_delta")];
    assert_eq!(delta["seq"], serde_json::Value::Null, "live only");
    let call = &got[at("tool_call")];
    assert_eq!(delta["call_id"], call["call_id"]);
    let fragment: serde_json::Value =
        serde_json::from_str(delta["arguments_fragment"].as_str().unwrap()).unwrap();
    assert_eq!(fragment, call["arguments"]);
    snapshot!(got);
    assert!(
        session
            .events()
            .entries()
            .iter()
            .all(|e| !matches!(e.event, Event::ToolCallDelta { .. })),
        "tool-call deltas are never kept"
    );
}

#[tokio::test]
async fn lagging_subscriber_gets_resync_and_is_dropped() {
    let log = EventLog::new();
    log.publish(note(0));
    let mut slow = log.subscribe(0);
    let mut keeping_up = log.subscribe(1);
    for i in 1..=LAG_LIMIT as usize {
        log.publish(note(i));
    }
    // Exactly LAG_LIMIT behind is still fine.
    let first = drain(&mut keeping_up, LAG_LIMIT as usize).await;
    assert_eq!(first.last().unwrap().seq, Some(LAG_LIMIT + 1));
    log.publish_live(Event::Delta {
        kind: DeltaKind::Text,
        text: "x".into(),
    });
    // The slow one replays its one kept event, then is LAG_LIMIT + 1 behind.
    let got = drain(&mut slow, 2).await;
    assert_eq!(got[0].seq, Some(1));
    snapshot!(serde_json::to_value(got[1].as_ref()).unwrap(), @r#"
    {
      "type": "resync"
    }
    "#);
    assert_eq!(
        tokio::time::timeout(WAIT, slow.next()).await.unwrap(),
        None,
        "dropped after resync"
    );
    // It reconnects with after= and catches up from the log.
    let mut again = log.subscribe(got[0].seq.unwrap());
    let caught_up = drain(&mut again, LAG_LIMIT as usize).await;
    assert_eq!(caught_up.first().unwrap().seq, Some(2));
    assert_eq!(caught_up.last().unwrap().seq, Some(LAG_LIMIT + 1));
    let delta = drain(&mut keeping_up, 1).await;
    assert_eq!(delta[0].seq, None);
}

#[tokio::test]
async fn replay_then_live_without_gaps_or_repeats() {
    let log = EventLog::new();
    for i in 0..10 {
        log.publish(note(i));
    }
    let mut sub = log.subscribe(5);
    log.publish_live(Event::Delta {
        kind: DeltaKind::Text,
        text: "live".into(),
    });
    for i in 10..20 {
        log.publish(note(i));
    }
    let got = drain(&mut sub, 16).await;
    let seqs: Vec<Option<u64>> = got.iter().map(|e| e.seq).collect();
    let mut expected: Vec<Option<u64>> = (6..=10).map(Some).collect();
    expected.push(None);
    expected.extend((11..=20).map(Some));
    assert_eq!(seqs, expected);
    // A subscriber asking past the end gets only what comes next.
    let mut future = log.subscribe(1_000);
    log.publish(note(20));
    assert_eq!(drain(&mut future, 1).await[0].seq, Some(21));
    assert_eq!(log.since(19).len(), 2);
}

#[tokio::test]
async fn dropping_the_log_ends_subscriptions() {
    let log = EventLog::new();
    let mut sub = log.subscribe(0);
    let waiter = tokio::spawn(async move { sub.next().await });
    tokio::task::yield_now().await;
    drop(log);
    let ended = tokio::time::timeout(WAIT, waiter).await.unwrap().unwrap();
    assert_eq!(ended, None);
}

#[tokio::test]
async fn many_subscribers_across_threads_see_the_same_sequence() {
    let log = Arc::new(EventLog::new());
    let mut readers = Vec::new();
    for _ in 0..8 {
        let mut sub = log.subscribe(0);
        readers.push(tokio::spawn(async move {
            let mut seqs = Vec::new();
            while seqs.len() < 500 {
                match sub.next().await {
                    Some(e) => seqs.extend(e.seq),
                    None => break,
                }
            }
            seqs
        }));
    }
    let writer = log.clone();
    tokio::spawn(async move {
        for i in 0..500 {
            writer.publish(note(i));
            if i % 50 == 0 {
                tokio::task::yield_now().await;
            }
        }
    });
    for reader in readers {
        let seqs = tokio::time::timeout(WAIT, reader).await.unwrap().unwrap();
        assert_eq!(seqs, (1..=500).collect::<Vec<u64>>());
    }
}

/// One of every event, as it goes over the wire: the documented schema.
/// One turn's usage, costing `cost`, as a total.
fn spend(cost: Cost) -> Spend {
    let mut total = Spend::default();
    total.add(Usage::new(4_100, 50).with_cached_prompt_tokens(4_000), cost);
    total
}

#[test]
fn wire_format_of_every_event() {
    let events = vec![
        Event::UserMessage {
            text: "delete the drafts".into(),
            images: 1,
        },
        Event::Delta {
            kind: DeltaKind::Reasoning,
            text: "The user".into(),
        },
        Event::ToolCallDelta {
            index: 0,
            call_id: Some("c1".into()),
            tool: Some("delete_notes".into()),
            arguments_fragment: r#"{"ids": ["#.into(),
        },
        Event::ToolCallDelta {
            index: 0,
            call_id: None,
            tool: None,
            arguments_fragment: "1, 2]}".into(),
        },
        Event::AssistantTurn {
            reasoning: "The user wants...".into(),
            text: "I will delete them.".into(),
            json: None,
            stopped: false,
        },
        Event::ToolCall {
            call_id: "c1".into(),
            tool: "delete_notes".into(),
            title: Some("Delete notes".into()),
            class: ToolClass::Destructive,
            arguments: json!({"ids": [1, 2]}),
            targets: Some(2),
            runs_on: Default::default(),
        },
        Event::ApprovalNeeded {
            call_id: "c1".into(),
            tool: "delete_notes".into(),
            title: Some("Delete notes".into()),
            class: ToolClass::Destructive,
            arguments: json!({"ids": [1, 2]}),
            targets: Some(2),
            reason: ApprovalReason::Mode {
                mode: Mode::AutoRead,
            },
            warnings: vec![
                "`delete_notes` does not say what it changes (no annotations), so it counts as destructive".into(),
            ],
            answers: AnswerKind::allowed(true),
            offer_always: true,
            sub_agent: None,
        },
        Event::ApprovalNeeded {
            call_id: "c1".into(),
            tool: "delete_notes".into(),
            title: None,
            class: ToolClass::Destructive,
            arguments: json!({"ids": [1, 2]}),
            targets: Some(500),
            reason: ApprovalReason::Bulk {
                targets: 500,
                limit: 200,
            },
            warnings: Vec::new(),
            answers: AnswerKind::allowed(false),
            offer_always: false,
            sub_agent: None,
        },
        Event::ApprovalNeeded {
            call_id: "c1".into(),
            tool: "rename_note".into(),
            title: None,
            class: ToolClass::Change,
            arguments: json!({"from": "a", "to": "b"}),
            targets: None,
            reason: ApprovalReason::Rule,
            warnings: Vec::new(),
            answers: AnswerKind::allowed(true),
            offer_always: true,
            sub_agent: None,
        },
        Event::ApprovalAnswered {
            call_id: "c1".into(),
            answer: Answer::ThisChat,
        },
        Event::ApprovalAnswered {
            call_id: "c1".into(),
            answer: Answer::deny_with("only the first"),
        },
        Event::ToolRunning {
            call_id: "c1".into(),
        },
        Event::ToolDone {
            call_id: "c1".into(),
            ok: true,
            text: "deleted 2 notes".into(),
            images: vec![ImageDescriptor::new(0, "image/png", 68)],
            structured: None,
            resources: Vec::new(),
        },
        Event::ToolSkipped {
            call_id: "c2".into(),
            reason: SkipReason::RepeatedCall,
            note: None,
        },
        Event::Warning {
            message: "tool server `notes` restarted".into(),
            retrying: false,
        },
        Event::Error {
            message: "authentication failed: bad key".into(),
            kind: lrg_chat::ErrorKind::Auth,
        },
        Event::Stopped,
        Event::Busy {
            busy: true,
            autonomous: false,
            message_total: None,
            chat_total: None,
        },
        Event::Usage {
            usage: Usage::new(4_100, 50)
                .with_cached_prompt_tokens(4_000)
                .with_reasoning_tokens(20),
            context_window: 8_192,
            cost: Cost::usd(0.0125),
            message_total: Some(spend(Cost::usd(0.0125))),
            chat_total: Some(spend(Cost {
                usd: Some(0.0125),
                priced: false,
            })),
        },
        Event::Busy {
            busy: false,
            autonomous: false,
            message_total: Some(spend(Cost::usd(0.0125))),
            chat_total: Some(spend(Cost::UNPRICED)),
        },
        Event::Permissions {
            settings: PermissionSettings::default(),
            saved: false,
            save_error: None,
        },
        Event::Rewound { to_seq: 5 },
        Event::Cleared,
        Event::Compacted {
            summary: "We deleted drafts.".into(),
        },
        Event::Resync,
        Event::Busy {
            busy: true,
            autonomous: true,
            message_total: None,
            chat_total: None,
        },
        Event::SubtaskStart {
            call_id: "c3".into(),
            sub_session_id: "0123456789abcdef0123456789abcdef::sub::1".into(),
            description: "find the drafts".into(),
        },
        Event::SubtaskStatus {
            sub_session_id: "0123456789abcdef0123456789abcdef::sub::1".into(),
            status: lrg_chat::sub_agents::SubAgentStatus::Done,
        },
        Event::ApprovalNeeded {
            call_id: "0123456789abcdef0123456789abcdef::sub::1::call_1_1".into(),
            tool: "delete_notes".into(),
            title: None,
            class: ToolClass::Destructive,
            arguments: json!({"ids": [3]}),
            targets: Some(1),
            reason: ApprovalReason::Mode {
                mode: Mode::AutoRead,
            },
            warnings: Vec::new(),
            answers: AnswerKind::allowed(true),
            offer_always: true,
            sub_agent: Some(SubAgentAsk::new(
                "0123456789abcdef0123456789abcdef::sub::1",
                "delete_notes",
                ToolClass::Destructive,
                json!({"ids": [3]}),
            )),
        },
    ];
    let lines: Vec<String> = events
        .into_iter()
        .enumerate()
        .map(|(i, event)| {
            let live = matches!(
                event,
                Event::Delta { .. } | Event::ToolCallDelta { .. } | Event::Resync
            );
            let seq = (!live).then_some(i as u64 + 1);
            let entry = LogEntry { seq, event };
            let line = serde_json::to_string(&entry).unwrap();
            assert_eq!(serde_json::from_str::<LogEntry>(&line).unwrap(), entry);
            line
        })
        .collect();
    insta::assert_snapshot!(lines.join("\n"));
}
