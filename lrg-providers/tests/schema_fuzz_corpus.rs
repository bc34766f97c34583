//! The seed corpus of the `shape_schema` fuzz target (`fuzz/`), run as an
//! ordinary test through the very function the target runs, so CI exercises it
//! without cargo-fuzz or a nightly toolchain.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

#[test]
fn every_seed_of_shape_schema_passes_the_fuzz_checks() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus/shape_schema");
    let mut seeds: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.is_file())
        .collect();
    seeds.sort();
    assert!(
        seeds.len() >= 12,
        "only {} seeds in {}",
        seeds.len(),
        dir.display()
    );
    for seed in &seeds {
        let data = std::fs::read(seed).unwrap();
        // A panic names the seed: the default hook prints the message, this the file.
        let outcome = std::panic::catch_unwind(|| lrg_providers::schema::fuzz_shape(&data));
        assert!(outcome.is_ok(), "fuzz checks failed on {}", seed.display());
    }
}
