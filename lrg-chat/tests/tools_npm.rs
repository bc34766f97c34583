//! ToolHost against the reference MCP servers from npm
//! (`@modelcontextprotocol/server-everything` and `server-filesystem`), run
//! with node from `tests-fixtures/mcp/node_modules` (`npm ci` there; `.ci/run`
//! does it). Without them these tests print a notice and pass locally, but
//! fail when the `CI` environment variable is set.

#![allow(clippy::unwrap_used, clippy::expect_used)] // helpers of tests, not only #[test] fns

use std::future::Future;
use std::path::PathBuf;
use std::time::Duration;

use lrg_chat::tools::{
    McpConfig, StdioServerConfig, ToolClass, ToolHost, ToolHostOptions, ToolOutput, Tools,
};
use lrg_providers::Part;
use serde_json::json;
use tokio_util::sync::CancellationToken;

const TEST_TIMEOUT: Duration = Duration::from_secs(90);

async fn within<F: Future>(f: F) -> F::Output {
    tokio::time::timeout(TEST_TIMEOUT, f)
        .await
        .expect("the test took too long")
}

/// The server's entry script, or `None` (after a notice) when the fixtures
/// are not installed; panics instead under CI.
pub(crate) fn server_script(package: &str) -> Option<PathBuf> {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests-fixtures/mcp/node_modules/@modelcontextprotocol")
        .join(package)
        .join("dist/index.js");
    let node = std::process::Command::new("node")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if script.is_file() && node {
        return Some(script);
    }
    let why = if node {
        format!(
            "{} is missing; run `npm ci` in tests-fixtures/mcp",
            script.display()
        )
    } else {
        "node is not installed".to_owned()
    };
    if std::env::var_os("CI").is_some() {
        panic!("npm MCP fixtures are required under CI: {why}");
    }
    eprintln!("SKIPPED: {package} test: {why}");
    None
}

fn text_of(out: &ToolOutput) -> String {
    out.parts
        .iter()
        .filter_map(|p| match p {
            Part::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn options() -> ToolHostOptions {
    ToolHostOptions {
        connect_timeout: Duration::from_secs(60),
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_everything_over_stdio() {
    let Some(script) = server_script("server-everything") else {
        return;
    };
    within(async {
        // Through the config format, as a user would write it.
        let config = McpConfig::from_json(
            &json!({"mcpServers": {"everything": {"command": "node", "args": [script, "stdio"]}}})
                .to_string(),
        )
        .unwrap();
        let host = ToolHost::with_options(options());
        let failures = host.add_mcp_config(&config).await;
        assert!(failures.is_empty(), "{failures:?}");

        let tools = host.tools();
        let class_of = |name: &str| tools.iter().find(|t| t.spec.name == name).map(|t| t.class);
        assert_eq!(class_of("echo"), Some(ToolClass::Read));
        assert_eq!(class_of("get-tiny-image"), Some(ToolClass::Read));
        assert!(class_of("get-sum").is_some());

        let cancel = CancellationToken::new;
        let out = host.call("echo", json!({"message": "hi"}), cancel()).await;
        assert_eq!(out, ToolOutput::text("Echo: hi"));

        let out = host
            .call("get-sum", json!({"a": 2, "b": 40}), cancel())
            .await;
        assert!(!out.is_error, "{out:?}");
        assert!(text_of(&out).contains("42"), "{out:?}");

        let out = host.call("get-tiny-image", json!({}), cancel()).await;
        let images: Vec<_> = out
            .parts
            .iter()
            .filter_map(|p| match p {
                Part::Image(i) => Some(i),
                _ => None,
            })
            .collect();
        assert_eq!(images.len(), 1, "{out:?}");
        assert_eq!(images[0].mime, "image/png");
        assert!(images[0].data.starts_with(b"\x89PNG"));

        // Our check answers before the server sees the call.
        let out = host.call("get-sum", json!({"a": "two"}), cancel()).await;
        assert!(out.is_error);
        let text = text_of(&out);
        assert!(
            text.starts_with("Invalid arguments for tool `get-sum`:"),
            "{text}"
        );
        assert!(text.contains("Expected arguments: "), "{text}");
        assert!(text.contains("a (required): number"), "{text}");

        // An embedded resource becomes text that names it.
        let out = host
            .call(
                "get-resource-reference",
                json!({"resourceType": "Text", "resourceId": 1}),
                cancel(),
            )
            .await;
        assert!(!out.is_error, "{out:?}");
        assert!(text_of(&out).contains("[resource "), "{out:?}");
        host.shutdown().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_filesystem_over_stdio() {
    let Some(script) = server_script("server-filesystem") else {
        return;
    };
    within(async {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::write(root.join("hello.txt"), "hello from disk").unwrap();
        let host = ToolHost::with_options(options());
        let server = StdioServerConfig::new("node")
            .args([script.display().to_string(), root.display().to_string()]);
        host.add_mcp_server("fs", lrg_chat::tools::McpServerConfig::Stdio(server))
            .await
            .unwrap();

        let tools = host.tools();
        let class_of = |name: &str| tools.iter().find(|t| t.spec.name == name).map(|t| t.class);
        assert_eq!(class_of("read_text_file"), Some(ToolClass::Read));
        assert_eq!(class_of("create_directory"), Some(ToolClass::Change));
        assert_eq!(class_of("write_file"), Some(ToolClass::Destructive));

        let path = root.join("hello.txt").display().to_string();
        let out = host
            .call(
                "read_text_file",
                json!({"path": path}),
                CancellationToken::new(),
            )
            .await;
        assert!(!out.is_error, "{out:?}");
        assert!(text_of(&out).contains("hello from disk"), "{out:?}");

        let outside = host
            .call(
                "read_text_file",
                json!({"path": "/etc/hostname"}),
                CancellationToken::new(),
            )
            .await;
        assert!(
            outside.is_error,
            "the server's own refusal is an error result: {outside:?}"
        );
        assert!(host.list().await.is_ok());
        host.shutdown().await;
    })
    .await;
}
