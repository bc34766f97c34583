//! The seed corpus of the `text_tools` fuzz target (`fuzz/`), run as an
//! ordinary test through the very function the target runs, so CI exercises it
//! without cargo-fuzz or a nightly toolchain.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

#[test]
fn every_seed_of_text_tools_passes_the_fuzz_checks() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus/text_tools");
    let mut seeds: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.is_file())
        .collect();
    seeds.sort();
    assert!(
        seeds.len() >= 90,
        "only {} seeds in {}",
        seeds.len(),
        dir.display()
    );
    for seed in &seeds {
        let data = std::fs::read(seed).unwrap();
        // Every prefix too: a stream may end anywhere.
        for cut in (0..=data.len()).step_by(7).chain([data.len()]) {
            let outcome =
                std::panic::catch_unwind(|| lrg_providers::text_tools::fuzz_parse(&data[..cut]));
            assert!(
                outcome.is_ok(),
                "fuzz checks failed on {} cut at {cut}",
                seed.display()
            );
        }
    }
}
