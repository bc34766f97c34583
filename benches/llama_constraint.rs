//! Cost of the answer constraint on a large vocabulary, no model needed:
//! per-token mask computation plus commit (goal: mean under 100 µs), and
//! grammar construction per turn (goal: under 20 ms), for the answer schema
//! of 40 tools over a synthetic 128k-token BPE-like vocabulary — walking a
//! tool call, and walking a typed answer (the reply branch is a caller's
//! JSON Schema: the one schemars writes for a small struct, and one whose
//! strings are capped at a few characters, which costs more per token).

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{
    BenchmarkGroup, Criterion, criterion_group, criterion_main, measurement::WallTime,
};
use lrg_llama::ConstraintCompiler;
use lrg_llama::testing::{
    AnswerCaps, answer_schema, sample_answer, sample_tools, synthetic_tok_env,
};
use lrg_providers::local_chat::conformance;
use lrg_providers::typed::OutputSchema;
use serde_json::{Value, json};

/// The 40-tool answer schema with its reply branch typed by `typed` (what
/// `LocalChatModel` builds for a typed message).
fn typed_answer_schema(tools: &[(String, Value)], typed: &OutputSchema) -> Value {
    let mut schema = answer_schema(tools, &AnswerCaps::DESIGN);
    let reply = typed.grammar().unwrap().clone();
    let branches = schema["anyOf"].as_array_mut().unwrap();
    let last = branches.last_mut().unwrap();
    last["properties"]["reply"] = reply;
    schema
}

/// A typed answer as `send_typed::<Triage>()` asks for it: the schema
/// schemars writes for a struct with an enum, a `u8`, free strings, a list
/// of structs and an `Option`.
fn triage() -> (OutputSchema, Value) {
    let schema = OutputSchema::new(json!({
        "title": "Triage",
        "type": "object",
        "properties": {
            "label": {"type": "string", "enum": ["bug", "feature", "question"]},
            "priority": {"type": "integer", "format": "uint8", "minimum": 0, "maximum": 255},
            "summary": {"type": "string"},
            "steps": {"type": "array", "items": {
                "type": "object",
                "properties": {"do": {"type": "string"}, "done": {"type": "boolean"}},
                "required": ["do", "done"]
            }},
            "owner": {"type": ["string", "null"]}
        },
        "required": ["label", "priority", "summary", "steps"]
    }))
    .unwrap();
    let reply = json!({
        "label": "bug",
        "priority": 4,
        "summary": "The app crashes at start, before any window opens.",
        "steps": [{"do": "bisect the start-up", "done": false}, {"do": "patch", "done": false}],
        "owner": null
    });
    (schema, reply)
}

/// A whole local answer whose `reply` is `reply`.
fn typed_answer(reply: Value) -> String {
    json!({
        "analysis": "The crash happens before any window opens, so it is a bug in start-up; \
                     it blocks every user, hence a high priority.",
        "reply": reply
    })
    .to_string()
}

/// The conformance schema's reply: strings capped at 12–24 characters.
fn short_caps_reply() -> Value {
    json!({
        "label": "bug",
        "priority": 4,
        "summary": "crash at start",
        "owner": {"team": "desktop", "oncall": true},
        "steps": [{"do": "bisect", "ratio": 0.5}, {"do": "patch"}]
    })
}

fn walks(
    g: &mut BenchmarkGroup<'_, WallTime>,
    name: &str,
    compiler: &ConstraintCompiler,
    schema: &Value,
    tokens: &[u32],
) {
    // The walk must be one the constraint accepts, or the bench measures errors.
    let mut check = compiler.compile(schema).unwrap();
    for &t in tokens {
        assert!(
            check.allowed_tokens().unwrap().is_allowed(t),
            "{name}: token {t} of the sample answer refused"
        );
        check.commit(t).unwrap();
    }
    assert!(
        check.is_finished() || check.is_accepting(),
        "{name}: not accepted"
    );
    eprintln!("{name}: walking {} tokens", tokens.len());
    g.bench_function(format!("{name}mask_and_commit_per_token"), |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            let mut done = 0;
            while done < iters {
                // A fresh grammar per walk, built outside the timed part.
                let mut c = compiler.compile(schema).unwrap();
                for &t in tokens {
                    if done == iters {
                        break;
                    }
                    let start = Instant::now();
                    let mask = c.allowed_tokens().unwrap();
                    black_box(&mask);
                    c.commit(t).unwrap();
                    total += start.elapsed();
                    done += 1;
                }
            }
            total
        });
    });
    g.bench_function(format!("{name}grammar_construction_per_turn"), |b| {
        b.iter(|| black_box(compiler.compile(black_box(schema)).unwrap()));
    });
}

fn constraint(c: &mut Criterion) {
    let env = synthetic_tok_env(128_000, 1);
    let compiler = ConstraintCompiler::new(&env).unwrap();
    let tools = sample_tools(40, &AnswerCaps::DESIGN);
    let schema = answer_schema(&tools, &AnswerCaps::DESIGN);
    let tokens = env.tokenize_bytes(sample_answer().as_bytes());

    let mut g = c.benchmark_group("constraint_40_tools_128k_vocab");
    walks(&mut g, "", &compiler, &schema, &tokens);
    g.bench_function("grammar_construction_and_first_mask", |b| {
        b.iter(|| {
            let mut c = compiler.compile(&schema).unwrap();
            black_box(c.allowed_tokens().unwrap())
        });
    });
    let (schema, reply) = triage();
    let typed = typed_answer_schema(&tools, &schema);
    let typed_tokens = env.tokenize_bytes(typed_answer(reply).as_bytes());
    walks(&mut g, "typed_answer/", &compiler, &typed, &typed_tokens);
    // Short string caps cost more per token: near a cap llguidance must check
    // each token's length against what is left, for the whole vocabulary.
    let short = typed_answer_schema(&tools, &conformance::schema());
    let short_tokens = env.tokenize_bytes(typed_answer(short_caps_reply()).as_bytes());
    walks(
        &mut g,
        "typed_answer_short_caps/",
        &compiler,
        &short,
        &short_tokens,
    );
    g.finish();

    // Issue 30: the grammar a local model gets with 300 tools offered, and
    // with the subset tool search offers (the message's best matches, a few
    // found, `search_tools`).
    let mut g = c.benchmark_group("tool_search_grammar_128k_vocab");
    for n in [300, 12] {
        let schema = answer_schema(&sample_tools(n, &AnswerCaps::DESIGN), &AnswerCaps::DESIGN);
        g.bench_function(
            format!("grammar_construction_and_first_mask_{n}_tools"),
            |b| {
                b.iter(|| {
                    let mut c = compiler.compile(&schema).unwrap();
                    black_box(c.allowed_tokens().unwrap())
                });
            },
        );
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(30).measurement_time(Duration::from_secs(8));
    targets = constraint
}
criterion_main!(benches);
