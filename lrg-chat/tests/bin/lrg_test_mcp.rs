//! `lrg-test-mcp`: the test MCP server of lrg-chat over stdio (see
//! `test_server.rs`). Not for use outside the tests.

#[path = "test_server.rs"]
mod test_server;

use rmcp::ServiceExt as _;

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let server = match test_server::TestServer::standalone()
        .serve(rmcp::transport::stdio())
        .await
    {
        Ok(s) => s,
        Err(e) => {
            eprintln!("lrg-test-mcp: initialization failed: {e}");
            std::process::exit(2);
        }
    };
    if let Err(e) = server.waiting().await {
        eprintln!("lrg-test-mcp: {e}");
    }
}
