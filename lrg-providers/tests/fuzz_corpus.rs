//! The seed corpora of the decoder fuzz targets (`fuzz/corpus/TARGET/`), run
//! as ordinary tests through the very functions the targets run
//! (`lrg_providers::fuzz`), so CI exercises them without cargo-fuzz or a
//! nightly toolchain: the decoders, `shape_schema` and `text_tools`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

/// Every seed of `target` (at least 3) through `body`.
fn run_corpus(target: &str, body: fn(&[u8])) {
    lrg_providers::fuzz::run_corpus(target, 3, body);
}

#[test]
fn sse_seeds() {
    run_corpus("sse", lrg_providers::fuzz::sse);
}

#[test]
fn ndjson_seeds() {
    run_corpus("ndjson", lrg_providers::fuzz::ndjson);
}

#[test]
fn openai_seeds() {
    run_corpus("openai", lrg_providers::fuzz::openai);
}

#[test]
fn anthropic_seeds() {
    run_corpus("anthropic", lrg_providers::fuzz::anthropic);
}

#[test]
fn gemini_seeds() {
    run_corpus("gemini", lrg_providers::fuzz::gemini);
}

#[test]
fn ollama_seeds() {
    run_corpus("ollama", lrg_providers::fuzz::ollama);
}

#[test]
fn answer_seeds() {
    run_corpus("answer", lrg_providers::fuzz::answer);
}

#[test]
fn recording_seeds() {
    run_corpus("recording", lrg_providers::fuzz::recording);
}

/// The seeds are real streams: each decodes to at least one event somewhere,
/// so a decoder that silently dropped everything would not pass the corpus.
#[test]
fn provider_seeds_are_real_streams() {
    use lrg_providers::wire::{Decoder, Framer, Framing};
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus/openai/text.sse");
    let data = std::fs::read(dir).unwrap();
    let mut framer = Framer::new(Framing::Sse);
    let mut frames = Vec::new();
    framer.push(&data, &mut frames);
    framer.finish(&mut frames);
    let mut decoder = lrg_providers::openai::OpenAiDecoder::new(&[], &[]);
    let mut events = Vec::new();
    for frame in &frames {
        decoder.decode(frame, &mut events).unwrap();
    }
    decoder.finish(&mut events).unwrap();
    let text: String = events
        .iter()
        .filter_map(|e| match e {
            lrg_providers::TurnEvent::TextDelta { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(text, "Hello \u{e9}\u{1F600}");
}

#[test]
fn responses_seeds() {
    run_corpus("responses", lrg_providers::fuzz::responses);
}

#[test]
fn cli_agents_seeds() {
    run_corpus("cli_agents", lrg_providers::fuzz::cli_agents);
}

#[test]
fn every_seed_of_shape_schema_passes_the_fuzz_checks() {
    lrg_providers::fuzz::run_corpus("shape_schema", 12, lrg_providers::schema::fuzz_shape);
}

#[test]
fn every_seed_of_text_tools_passes_the_fuzz_checks() {
    for (path, data) in lrg_providers::fuzz::corpus("text_tools", 90) {
        // Every prefix too: a stream may end anywhere.
        for cut in (0..=data.len()).step_by(7).chain([data.len()]) {
            let outcome =
                std::panic::catch_unwind(|| lrg_providers::text_tools::fuzz_parse(&data[..cut]));
            assert!(
                outcome.is_ok(),
                "fuzz checks failed on {} cut at {cut}",
                path.display()
            );
        }
    }
}
