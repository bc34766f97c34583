//! Target `mcp_config`: arbitrary bytes through `lrg_chat::fuzz::mcp_config`
//! (the `mcpServers` reader), whose seed corpus (`corpus/mcp_config/`) also
//! runs as the test `lrg-chat/tests/fuzz_corpus.rs`.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    lrg_chat::fuzz::mcp_config(data);
});
