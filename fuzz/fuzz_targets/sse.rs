//! Target `sse`: arbitrary bytes through `lrg_providers::fuzz::sse`, whose
//! seed corpus (`corpus/sse/`) also runs as the test
//! `lrg-providers/tests/fuzz_corpus.rs`.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    lrg_providers::fuzz::sse(data);
});
