//! How much of a model turn's CPU is the wire decoding alone: lrg's
//! `SseFramer` and `OpenAiDecoder` over the fake server's three answers, on
//! one thread, timed by that thread's CPU clock (so the load of the machine
//! does not count). It is the part of lrg's CPU per turn that grows with the
//! deltas, and a floor for it. Below it, the JSON floor: the same bytes cut
//! into lines and each frame only parsed by `serde_json` (into
//! `IgnoredAny`), which no decoder of this format can go under.

use std::time::Duration;

use lrg_providers::openai::{Dialect, OpenAiDecoder};
use lrg_providers::wire::{Decoder as _, Frame, SseFramer};

use crate::fake_openai::answers;
use crate::usage::thread_cpu;

const ROUNDS: u32 = 200;

/// CPU time to frame and decode one model turn (the mean of the three
/// answers).
pub fn cpu_per_turn() -> Duration {
    let answers = answers();
    let (mut frames, mut events) = (Vec::<Frame>::new(), Vec::new());
    let start = thread_cpu();
    for _ in 0..ROUNDS {
        for answer in &answers {
            let mut framer = SseFramer::default();
            let mut decoder = OpenAiDecoder::new(Dialect::OPENAI.reasoning_fields, &[]);
            for chunk in answer {
                framer.push(chunk, &mut frames);
                for frame in frames.drain(..) {
                    decoder.decode(&frame, &mut events).expect("decode");
                }
                events.clear();
            }
            framer.finish(&mut frames);
            decoder.finish(&mut events).expect("finish");
            std::hint::black_box(&events);
            events.clear();
        }
    }
    (thread_cpu() - start) / (ROUNDS * answers.len() as u32)
}

/// CPU time to cut one model turn's bytes into lines and parse each frame's
/// JSON into nothing (the mean of the three answers): the least any decoder
/// of this format pays.
pub fn json_floor_per_turn() -> Duration {
    let answers = answers();
    let start = thread_cpu();
    for _ in 0..ROUNDS {
        for answer in &answers {
            for chunk in answer {
                for line in chunk.split(|b| *b == b'\n') {
                    let Some(json) = line.strip_prefix(b"data: ") else {
                        continue;
                    };
                    if json != b"[DONE]" {
                        let parsed: serde::de::IgnoredAny =
                            serde_json::from_slice(json).expect("JSON");
                        std::hint::black_box(parsed);
                    }
                }
            }
        }
    }
    (thread_cpu() - start) / (ROUNDS * answers.len() as u32)
}
