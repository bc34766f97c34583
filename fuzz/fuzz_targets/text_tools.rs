//! Arbitrary bytes through the text tool-call parsers: the first byte picks
//! the format, the second the chunk size, the rest is the answer text. No
//! panic, always terminates, output bounded by the input. The body is
//! `lrg_providers::text_tools::fuzz_parse`, which the test `text_tools_fuzz_corpus`
//! also runs over this target's seed corpus.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    lrg_providers::text_tools::fuzz_parse(data);
});
