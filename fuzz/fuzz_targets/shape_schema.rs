//! Arbitrary bytes, read as JSON, through `grammar_schema`, `split_choice` and
//! `portable_tool_schema`: no panic, always terminates, outputs that are again
//! acceptable inputs. The body is `lrg_providers::schema::fuzz_shape`, which the
//! test `schema_fuzz_corpus` also runs over this target's seed corpus.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    lrg_providers::schema::fuzz_shape(data);
});
