//! Target `responses`: arbitrary bytes through `lrg_providers::fuzz::responses`, whose
//! seed corpus (`corpus/responses/`) also runs as the test
//! `lrg-providers/tests/fuzz_corpus.rs`.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    lrg_providers::fuzz::responses(data);
});
