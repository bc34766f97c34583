//! Target `cli_agents`: arbitrary bytes through `lrg_providers::fuzz::cli_agents`, whose
//! seed corpus (`corpus/cli_agents/`) also runs as the test
//! `lrg-providers/tests/fuzz_corpus.rs`.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    lrg_providers::fuzz::cli_agents(data);
});
