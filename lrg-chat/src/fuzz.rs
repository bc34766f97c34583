//! Bodies of lrg-chat's cargo-fuzz targets in `fuzz/`, here so that each
//! target's seed corpus runs as an ordinary test (`tests/fuzz_corpus.rs`)
//! through the same code. Not API.

use crate::tools::McpConfig;

/// Target `mcp_config`: the `mcpServers` configuration reader. Arbitrary text
/// never panics, and a file it accepts reads the same through
/// [`McpConfig::from_value`] (up to server order, which a JSON map may not keep).
pub fn mcp_config(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(config) = McpConfig::from_json(text) else {
        return;
    };
    let Ok(value) = serde_json::from_str(text) else {
        panic!("from_json accepted text that is not JSON");
    };
    let by_value = match McpConfig::from_value(value) {
        Ok(by_value) => by_value,
        Err(error) => panic!("from_json accepts what from_value refuses: {error}"),
    };
    let sorted = |mut config: McpConfig| {
        config.servers.sort_by(|a, b| a.0.cmp(&b.0));
        config
    };
    assert!(
        sorted(config) == sorted(by_value),
        "from_json and from_value read different servers"
    );
}

/// Target `http_bodies`: byte 0 picks a route of the HTTP API (open,
/// message, switch, approval, permissions), the rest is its request body,
/// read strictly as the route reads it. No panic; what is taken is one JSON
/// object; what is refused is a 400 or a 413.
pub fn http_bodies(data: &[u8]) {
    crate::http::http_bodies(data);
}
