//! The seed corpus of the `mcp_config` fuzz target (`fuzz/corpus/mcp_config/`),
//! run as an ordinary test through the function the target runs.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use lrg_providers::fuzz::corpus;

#[test]
fn mcp_config_seeds() {
    let mut parsed = 0;
    for (seed, data) in corpus("mcp_config", 3) {
        let outcome = std::panic::catch_unwind(|| lrg_chat::fuzz::mcp_config(&data));
        assert!(outcome.is_ok(), "fuzz checks failed on {}", seed.display());
        let text = String::from_utf8(data).unwrap();
        parsed += usize::from(lrg_chat::tools::McpConfig::from_json(&text).is_ok());
    }
    assert!(parsed >= 3, "only {parsed} seeds are valid configs");
}

/// The seed corpus of the `http_bodies` fuzz target
/// (`fuzz/corpus/http_bodies/`): byte 0 picks the route, the rest is its
/// body. Every seed passes the target's checks, and every route has one.
#[test]
fn http_bodies_seeds() {
    let mut routes = std::collections::BTreeSet::new();
    for (seed, data) in corpus("http_bodies", 10) {
        routes.insert(data.first().copied().unwrap_or_default() % 5);
        let outcome = std::panic::catch_unwind(|| lrg_chat::fuzz::http_bodies(&data));
        assert!(outcome.is_ok(), "fuzz checks failed on {}", seed.display());
    }
    assert_eq!(routes.len(), 5, "every route's body has a seed");
}
