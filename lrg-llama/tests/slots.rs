//! One engine shared by several chats: each chat's KV prefix kept in its
//! slot, saved to host memory and restored when chats outnumber slots,
//! turns of several chats decoded together, a stop in one leaving the others
//! going, release, load progress.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{msg, tiny_model};
use futures::StreamExt;
use lrg_llama::testing::{AnswerCaps, answer_schema, sample_tools};
use lrg_llama::{LlamaConfig, LlamaEngine};
use lrg_providers::local_chat::{
    EngineEvent, EngineMessage, EngineRole, EngineStop, EngineTurn, KvReuse, LoadProgress,
    LocalEngine, SequenceId,
};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

const SYSTEM: &str = "You are a careful assistant. Answer with a tool call or a reply.\n\
Tools:\n- read_file(path): read a file\n- write_file(path, content): write a file\n\
- list_directory(path, recursive?): list entries\n- run_command(command, timeout_s?)";

const CAPS: AnswerCaps = AnswerCaps {
    analysis: 40,
    argument: 24,
    reply: 60,
};

fn schema() -> Value {
    answer_schema(&sample_tools(4, &CAPS), &CAPS)
}

/// An engine on the tiny model with `slots` slots of 1,024 tokens each.
fn engine(slots: u32, kv_cache_mem: u64) -> LlamaEngine {
    LlamaEngine::load(
        LlamaConfig::new(tiny_model())
            .with_n_ctx(1024 * slots)
            .with_n_seq_max(slots)
            .with_kv_cache_mem(kv_cache_mem)
            .with_n_threads(1)
            .with_n_batch(256),
    )
    .unwrap()
}

fn turn(
    sequence: u64,
    messages: Vec<EngineMessage>,
    temperature: f32,
    max_tokens: u32,
) -> EngineTurn {
    EngineTurn {
        sequence: SequenceId(sequence),
        messages,
        schema: schema(),
        max_tokens,
        temperature,
        top_p: None,
        seed: Some(7),
    }
}

/// What a finished turn streamed.
#[derive(Debug)]
struct Reply {
    kv: Option<KvReuse>,
    text: String,
    stop: EngineStop,
    completion_tokens: u32,
}

async fn run_with(engine: &LlamaEngine, turn: EngineTurn, cancel: CancellationToken) -> Reply {
    tokio::time::timeout(Duration::from_secs(60), async {
        let mut stream = engine.generate(turn, cancel);
        let (mut kv, mut text) = (None, String::new());
        while let Some(ev) = stream.next().await {
            match ev.unwrap() {
                EngineEvent::Prefill { kv: k } => {
                    assert!(
                        kv.is_none() && text.is_empty(),
                        "one Prefill, before any delta"
                    );
                    kv = Some(k);
                }
                EngineEvent::Delta { text: t } => text.push_str(&t),
                EngineEvent::Done { usage, stop } => {
                    assert!(stream.next().await.is_none(), "events after Done");
                    return Reply {
                        kv,
                        text,
                        stop,
                        completion_tokens: usage.completion_tokens,
                    };
                }
                other => panic!("unexpected event {other:?}"),
            }
        }
        panic!("stream ended without Done");
    })
    .await
    .expect("turn timed out")
}

async fn run(engine: &LlamaEngine, turn: EngineTurn) -> Reply {
    run_with(engine, turn, CancellationToken::new()).await
}

fn first(user: &str) -> Vec<EngineMessage> {
    vec![msg(EngineRole::System, SYSTEM), msg(EngineRole::User, user)]
}

/// The conversation after `reply`, with a tool result as the next message.
fn next(mut messages: Vec<EngineMessage>, reply: &Reply, result: &str) -> Vec<EngineMessage> {
    messages.push(msg(EngineRole::Assistant, &reply.text));
    messages.push(msg(
        EngineRole::User,
        &format!("Result of read_file: {result}"),
    ));
    messages
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_chats_interleaved_keep_their_prefixes() {
    let engine = engine(2, 64 << 20);
    assert_eq!(engine.slots(), 2);
    let (a1, b1) = (first("Read /etc/hosts."), first("List the files in /tmp."));
    let ra1 = run(&engine, turn(1, a1.clone(), 0.0, 60)).await;
    let rb1 = run(&engine, turn(2, b1.clone(), 0.0, 60)).await;
    let a1_tokens = engine.tokenize_prompt(&a1).unwrap().len() as u32;
    let b1_tokens = engine.tokenize_prompt(&b1).unwrap().len() as u32;
    assert_eq!(ra1.kv.unwrap(), KvReuse::new(0, 0, a1_tokens));

    let a2 = next(a1, &ra1, "{\"text\":\"127.0.0.1 localhost\"}");
    let b2 = next(b1, &rb1, "{\"text\":\"a.txt b.txt\"}");
    let ra2 = run(&engine, turn(1, a2.clone(), 0.0, 60)).await;
    let rb2 = run(&engine, turn(2, b2.clone(), 0.0, 60)).await;
    for (name, reply, before) in [("a", &ra2, a1_tokens), ("b", &rb2, b1_tokens)] {
        let kv = reply.kv.unwrap();
        assert!(
            kv.kept >= before,
            "{name}: turn 1's prompt stays in its slot: {kv:?}"
        );
        assert_eq!((kv.restored, kv.dropped), (0, false), "{name}: {kv:?}");
        assert!(kv.prefilled < kv.kept, "{name}: {kv:?}");
    }
    let sa = engine.stats_of(SequenceId(1)).unwrap();
    assert_eq!(sa.tokens_reused, ra2.kv.unwrap().kept);

    // Turn 3 of both at once: decoded together, each still on its prefix,
    // each answer the one it gives alone.
    let a3 = next(a2, &ra2, "{\"text\":\"done\"}");
    let b3 = next(b2, &rb2, "{\"text\":\"done\"}");
    let (ra3, rb3) = tokio::join!(
        run(&engine, turn(1, a3.clone(), 0.0, 60)),
        run(&engine, turn(2, b3.clone(), 0.0, 60))
    );
    assert!(ra3.kv.unwrap().kept > ra2.kv.unwrap().kept, "{ra3:?}");
    assert!(rb3.kv.unwrap().kept > rb2.kv.unwrap().kept, "{rb3:?}");
    let alone = crate::engine(1, 0);
    let ra3_alone = run(&alone, turn(1, a3, 0.0, 60)).await;
    let rb3_alone = run(&alone, turn(2, b3, 0.0, 60)).await;
    assert_eq!(ra3.text, ra3_alone.text);
    assert_eq!(rb3.text, rb3_alone.text);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn more_chats_than_slots_are_saved_and_restored_byte_identical() {
    let engine = engine(2, 64 << 20);
    let chats: Vec<Vec<EngineMessage>> = ["Read /etc/hosts.", "List /tmp.", "Run uptime."]
        .iter()
        .map(|u| first(u))
        .collect();
    let mut replies = Vec::new();
    for (i, messages) in chats.iter().enumerate() {
        replies.push(run(&engine, turn(i as u64 + 1, messages.clone(), 0.0, 60)).await);
    }
    // Chat 3 took chat 1's slot (least recently used): chat 1 was saved, and
    // chat 3 kept the system prompt it shares with chat 1.
    assert!(engine.saved_state_bytes() > 0);
    let system = engine.tokenize_prompt(&chats[0][..1]).unwrap().len() as u32;
    let kv3 = replies[2].kv.unwrap();
    // (The system prompt alone ends in the generation prompt, which differs.)
    assert!(kv3.kept + 10 >= system, "{kv3:?} system {system}");

    let a2 = next(
        chats[0].clone(),
        &replies[0],
        "{\"text\":\"127.0.0.1 localhost\"}",
    );
    let restored = run(&engine, turn(1, a2.clone(), 0.0, 60)).await;
    let kv = restored.kv.unwrap();
    let a1_tokens = engine.tokenize_prompt(&chats[0]).unwrap().len() as u32;
    assert_eq!(kv.kept, 0, "{kv:?}");
    assert!(kv.restored >= a1_tokens, "{kv:?}");
    assert!(!kv.dropped);
    assert_eq!(
        engine.stats_of(SequenceId(1)).unwrap().tokens_restored,
        kv.restored
    );

    // The same turn on a fresh cache, same seed, greedy: the same bytes.
    let fresh = run(&engine_fresh(), turn(1, a2.clone(), 0.0, 60)).await;
    assert_eq!(fresh.kv.unwrap().prefilled, kv.reused() + kv.prefilled);
    assert_eq!(restored.text, fresh.text);
    assert_eq!(restored.stop, fresh.stop);
}

fn engine_fresh() -> LlamaEngine {
    engine(1, 0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_the_budget_a_chat_prefills_again_and_says_so() {
    // No room for any saved state.
    let engine = engine(1, 0);
    let a1 = first("Read /etc/hosts.");
    let ra1 = run(&engine, turn(1, a1.clone(), 0.0, 60)).await;
    run(&engine, turn(2, first("Something else entirely."), 0.0, 60)).await;
    assert_eq!(engine.saved_state_bytes(), 0);
    let a2 = next(a1.clone(), &ra1, "{\"text\":\"x\"}");
    let ra2 = run(&engine, turn(1, a2.clone(), 0.0, 60)).await;
    let kv = ra2.kv.unwrap();
    assert!(kv.dropped, "{kv:?}");
    assert_eq!(kv.restored, 0);
    let a1_tokens = engine.tokenize_prompt(&a1).unwrap().len() as u32;
    // Only the system prompt, shared with chat 2, was still there.
    assert!(kv.kept < a1_tokens && kv.prefilled > 0, "{kv:?}");
    assert_eq!(
        kv.kept + kv.prefilled,
        engine.tokenize_prompt(&a2).unwrap().len() as u32
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_during_a_batched_step_leaves_the_other_chat_going() {
    let engine = Arc::new(engine(2, 64 << 20));
    let long = json!({
        "type": "object",
        "properties": {"note": {"type": "string", "minLength": 2000, "maxLength": 3000}},
        "required": ["note"],
        "additionalProperties": false
    });
    let long_turn = move |sequence: u64| EngineTurn {
        schema: long.clone(),
        temperature: 1.0,
        ..turn(sequence, first("Write a very long note."), 1.0, 300)
    };
    let stop_a = CancellationToken::new();
    let mut a = engine.generate(long_turn(1), stop_a.clone());
    let b = {
        let engine = engine.clone();
        tokio::spawn(async move { run(&engine, long_turn(2)).await })
    };
    // Wait until both decode, then stop chat 1 mid-answer.
    tokio::time::timeout(Duration::from_secs(60), async {
        let mut deltas = 0;
        while deltas < 5 {
            if let Some(Ok(EngineEvent::Delta { .. })) = a.next().await {
                deltas += 1;
            }
        }
        while engine
            .stats_of(SequenceId(2))
            .map_or(0, |s| s.tokens_generated)
            < 5
        {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("both chats decode");
    let b_at_stop = engine.stats_of(SequenceId(2)).unwrap().tokens_generated;
    stop_a.cancel();
    let mut a_stop = None;
    while let Some(ev) = tokio::time::timeout(Duration::from_secs(30), a.next())
        .await
        .expect("chat 1 stops")
    {
        if let Ok(EngineEvent::Done { stop, .. }) = ev {
            a_stop = Some(stop);
        }
    }
    assert_eq!(a_stop, Some(EngineStop::Cancelled));
    let rb = b.await.unwrap();
    assert_eq!(rb.stop, EngineStop::MaxTokens, "{rb:?}");
    assert_eq!(rb.completion_tokens, 300);
    assert!(
        b_at_stop < 300,
        "chat 2 was still decoding when chat 1 stopped"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_that_falls_behind_holds_back_only_its_own_chat() {
    let engine = Arc::new(engine(2, 64 << 20));
    let long = json!({
        "type": "object",
        "properties": {"note": {"type": "string", "minLength": 2000, "maxLength": 3000}},
        "required": ["note"],
        "additionalProperties": false
    });
    let long_turn = move |sequence: u64| EngineTurn {
        schema: long.clone(),
        ..turn(sequence, first("Write a very long note."), 1.0, 200)
    };
    // Chat 1's stream is not read while chat 2 runs: far more than the
    // channel holds piles up for it.
    let mut unread = engine.generate(long_turn(1), CancellationToken::new());
    let rb = run(&engine, long_turn(2)).await;
    assert_eq!(
        (rb.stop, rb.completion_tokens),
        (EngineStop::MaxTokens, 200)
    );
    let paused_at = engine.stats_of(SequenceId(1)).unwrap().tokens_generated;
    assert!(
        paused_at < 200,
        "chat 1 paused for its reader at {paused_at}"
    );
    let mut stop = None;
    while let Some(ev) = tokio::time::timeout(Duration::from_secs(30), unread.next())
        .await
        .expect("chat 1 goes on once read")
    {
        if let Ok(EngineEvent::Done { stop: s, usage }) = ev {
            assert_eq!(usage.completion_tokens, 200);
            stop = Some(s);
        }
    }
    assert_eq!(stop, Some(EngineStop::MaxTokens));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn more_turns_at_once_than_slots_wait_their_turn() {
    let engine = Arc::new(engine(1, 64 << 20));
    let runs: Vec<_> = (1..=3u64)
        .map(|i| {
            let engine = engine.clone();
            tokio::spawn(async move {
                run(&engine, turn(i, first(&format!("Question {i}.")), 0.0, 30)).await
            })
        })
        .collect();
    for r in runs {
        let reply = r.await.unwrap();
        assert_ne!(reply.stop, EngineStop::Cancelled, "{reply:?}");
        assert!(reply.completion_tokens > 0);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn release_frees_the_slot_and_the_saved_state() {
    let engine = engine(1, 64 << 20);
    let a1 = first("Read /etc/hosts.");
    let b1 = first("List /tmp.");
    run(&engine, turn(1, a1, 0.0, 30)).await;
    let rb1 = run(&engine, turn(2, b1.clone(), 0.0, 30)).await;
    assert!(engine.saved_state_bytes() > 0, "chat 1 was saved");
    let resident = engine.resident_bytes().unwrap();

    engine.release(SequenceId(1));
    // Jobs run in order: once this returns, the release is done.
    engine.tokenize_prompt(&b1).unwrap();
    assert_eq!(engine.saved_state_bytes(), 0);
    assert!(engine.resident_bytes().unwrap() < resident);
    assert!(engine.stats_of(SequenceId(1)).is_none());

    engine.release(SequenceId(2));
    let b2 = next(b1, &rb1, "{\"text\":\"x\"}");
    let rb2 = run(&engine, turn(2, b2, 0.0, 30)).await;
    let kv = rb2.kv.unwrap();
    assert_eq!((kv.kept, kv.restored, kv.dropped), (0, 0, false), "{kv:?}");
}

#[test]
fn load_progress_is_reported_up_to_done() {
    let seen = Arc::new(Mutex::new(Vec::<f32>::new()));
    let sink = seen.clone();
    let progress = LoadProgress::new(move |f| sink.lock().unwrap().push(f));
    let engine =
        LlamaEngine::load_with_progress(LlamaConfig::new(tiny_model()).with_n_ctx(512), progress)
            .unwrap();
    assert!(engine.resident_bytes().unwrap() > 0);
    let seen = seen.lock().unwrap();
    assert!(!seen.is_empty());
    assert!(seen.windows(2).all(|w| w[0] <= w[1]), "{seen:?}");
    assert_eq!(seen.last().copied(), Some(1.0), "{seen:?}");
}
