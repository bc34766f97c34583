//! Target `ndjson`: arbitrary bytes through `lrg_providers::fuzz::ndjson`, whose
//! seed corpus (`corpus/ndjson/`) also runs as the test
//! `lrg-providers/tests/fuzz_corpus.rs`.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    lrg_providers::fuzz::ndjson(data);
});
