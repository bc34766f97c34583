//! Target `recording`: arbitrary bytes through `lrg_providers::fuzz::recording`, whose
//! seed corpus (`corpus/recording/`) also runs as the test
//! `lrg-providers/tests/fuzz_corpus.rs`.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    lrg_providers::fuzz::recording(data);
});
