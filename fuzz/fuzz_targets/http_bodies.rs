//! Target `http_bodies`: arbitrary bytes through `lrg_chat::fuzz::http_bodies`
//! (byte 0 picks the route, the rest is its request body), whose seed corpus
//! (`corpus/http_bodies/`) also runs as the test `lrg-chat/tests/fuzz_corpus.rs`.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    lrg_chat::fuzz::http_bodies(data);
});
