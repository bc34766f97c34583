//! Cost of the answer constraint on a large vocabulary, no model needed:
//! per-token mask computation plus commit (goal: mean under 100 µs), and
//! grammar construction per turn (goal: under 20 ms), for the answer schema
//! of 40 tools over a synthetic 128k-token BPE-like vocabulary.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use lrg_llama::ConstraintCompiler;
use lrg_llama::testing::{
    AnswerCaps, answer_schema, sample_answer, sample_tools, synthetic_tok_env,
};

fn constraint(c: &mut Criterion) {
    let env = synthetic_tok_env(128_000, 1);
    let compiler = ConstraintCompiler::new(&env).unwrap();
    let schema = answer_schema(&sample_tools(40, &AnswerCaps::DESIGN), &AnswerCaps::DESIGN);
    let answer = sample_answer();
    let tokens = env.tokenize_bytes(answer.as_bytes());

    // The walk must be one the constraint accepts, or the bench measures errors.
    let mut check = compiler.compile(&schema).unwrap();
    for &t in &tokens {
        assert!(
            check.allowed_tokens().unwrap().is_allowed(t),
            "token {t} of the sample answer refused"
        );
        check.commit(t).unwrap();
    }
    assert!(check.is_finished() || check.is_accepting());
    eprintln!(
        "walking a {}-byte answer in {} tokens",
        answer.len(),
        tokens.len()
    );

    let mut g = c.benchmark_group("constraint_40_tools_128k_vocab");
    g.bench_function("mask_and_commit_per_token", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            let mut done = 0;
            while done < iters {
                // A fresh grammar per walk, built outside the timed part.
                let mut c = compiler.compile(&schema).unwrap();
                for &t in &tokens {
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
    g.bench_function("grammar_construction_per_turn", |b| {
        b.iter(|| black_box(compiler.compile(black_box(&schema)).unwrap()));
    });
    g.bench_function("grammar_construction_and_first_mask", |b| {
        b.iter(|| {
            let mut c = compiler.compile(&schema).unwrap();
            black_box(c.allowed_tokens().unwrap())
        });
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(30).measurement_time(Duration::from_secs(8));
    targets = constraint
}
criterion_main!(benches);
