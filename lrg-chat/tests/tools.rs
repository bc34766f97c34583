//! ToolHost against real MCP servers: the `lrg-test-mcp` binary over stdio,
//! the same server in-process and over streamable HTTP, and Rust functions.
//! Every test runs under a timeout so nothing can hang CI.

#![allow(clippy::unwrap_used, clippy::expect_used)] // helpers of tests, not only #[test] fns

#[path = "bin/test_server.rs"]
mod test_server;

use std::future::Future;
use std::time::Duration;

use base64::Engine as _;
use lrg_chat::tools::{
    HttpServerConfig, McpConfig, McpConfigError, McpServerConfig, NoArgs, StdioServerConfig,
    ToolClass, ToolHost, ToolHostOptions, ToolOutput, ToolSource, Tools,
};
use lrg_providers::{Part, ToolAnnotations};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

const TEST_TIMEOUT: Duration = Duration::from_secs(60);

async fn within<F: Future>(f: F) -> F::Output {
    tokio::time::timeout(TEST_TIMEOUT, f)
        .await
        .expect("the test took too long")
}

fn stdio_server() -> McpServerConfig {
    McpServerConfig::Stdio(StdioServerConfig::new(env!("CARGO_BIN_EXE_lrg-test-mcp")))
}

async fn host_with_stdio(options: ToolHostOptions) -> ToolHost {
    let host = ToolHost::with_options(options);
    host.add_mcp_server("test", stdio_server())
        .await
        .expect("test server starts");
    host
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

async fn call(host: &ToolHost, name: &str, args: Value) -> ToolOutput {
    host.call(name, args, CancellationToken::new()).await
}

/// A call whose cancel token is set `ms` milliseconds after it started.
async fn call_stopped_after(host: &ToolHost, name: &str, args: Value, ms: u64) -> ToolOutput {
    let cancel = CancellationToken::new();
    let running = host.call(name, args, cancel.clone());
    let stopper = async {
        tokio::time::sleep(Duration::from_millis(ms)).await;
        cancel.cancel();
    };
    tokio::join!(running, stopper).0
}

/// Whether process `pid` exists; a zombie (exited, not reaped) still does.
fn is_alive(pid: u32) -> bool {
    std::process::Command::new("kill")
        .args(["-0", &pid.to_string()])
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

async fn wait_gone(pid: u32) -> bool {
    for _ in 0..100 {
        if !is_alive(pid) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdio_server_lists_tools_with_classes() {
    within(async {
        let host = host_with_stdio(ToolHostOptions::default()).await;
        let listed = host.list().await.unwrap();
        let tools = host.tools();
        assert_eq!(listed.len(), tools.len());
        let class_of = |name: &str| tools.iter().find(|t| t.spec.name == name).map(|t| t.class);
        assert_eq!(class_of("echo"), Some(ToolClass::Read));
        assert_eq!(class_of("write"), Some(ToolClass::Change));
        assert_eq!(class_of("delete_items"), Some(ToolClass::Destructive));
        assert_eq!(class_of("crash"), Some(ToolClass::Destructive));
        // "notes.read" is not a name APIs accept: offered sanitized.
        let notes = tools.iter().find(|t| t.spec.name == "notes_read").unwrap();
        assert_eq!(notes.source, ToolSource::Mcp { server: "test".into(), tool: "notes.read".into() });
        let summary: Vec<Value> = tools
            .iter()
            .map(|t| json!({"name": t.spec.name, "class": t.class, "description": t.spec.description, "input_schema": t.spec.input_schema}))
            .collect();
        insta::assert_json_snapshot!("stdio_tools", summary);
        host.shutdown().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdio_calls_text_image_and_tool_errors() {
    within(async {
        let host = host_with_stdio(ToolHostOptions::default()).await;
        let out = call(&host, "echo", json!({"text": "hello"})).await;
        assert_eq!(out, ToolOutput::text("hello"));

        let out = call(&host, "write", json!({"key": "k", "value": "v"})).await;
        assert_eq!(text_of(&out), "wrote k");
        let out = call(&host, "notes_read", json!({"text": "k"})).await;
        assert_eq!(
            text_of(&out),
            "v",
            "the sanitized name reaches the original tool"
        );

        let out = call(&host, "image", json!({})).await;
        assert!(!out.is_error);
        assert_eq!(out.parts[0], Part::text("here is the picture"));
        let Part::Image(img) = &out.parts[1] else {
            panic!("expected an image: {out:?}")
        };
        assert_eq!(img.mime, "image/png");
        let png = base64::engine::general_purpose::STANDARD
            .decode(test_server::TINY_PNG_BASE64)
            .unwrap();
        assert_eq!(&img.data[..], &png[..]);

        let out = call(&host, "fail", json!({"text": "x"})).await;
        assert!(out.is_error);
        assert_eq!(text_of(&out), "failed: x");
        assert_eq!(out.warning, None);

        // null arguments mean none; a JSON object sent as a string is read as one.
        assert!(!call(&host, "pid", Value::Null).await.is_error);
        let out = call(&host, "echo", Value::String(r#"{"text":"s"}"#.into())).await;
        assert_eq!(text_of(&out), "s");
        host.shutdown().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_arguments_say_what_was_wrong_and_what_is_expected() {
    within(async {
        let host = host_with_stdio(ToolHostOptions::default()).await;
        let wrong_type = call(&host, "delete_items", json!({"ids": ["a", 2]})).await;
        assert!(wrong_type.is_error);
        let missing = call(&host, "delete_items", json!({"mode": "shred"})).await;
        assert!(missing.is_error);
        let not_object = call(&host, "delete_items", json!([1, 2])).await;
        assert!(not_object.is_error);
        let unknown = call(&host, "delete_everything", json!({})).await;
        assert!(unknown.is_error);
        insta::assert_snapshot!("invalid_wrong_type", text_of(&wrong_type));
        insta::assert_snapshot!("invalid_missing", text_of(&missing));
        insta::assert_snapshot!("invalid_not_object", text_of(&not_object));
        assert!(
            text_of(&unknown)
                .starts_with("There is no tool named `delete_everything`. Available tools: ")
        );
        assert!(text_of(&unknown).contains("delete_items"));
        // Nothing was sent: the server would have answered "trashed 2 items".
        let ok = call(&host, "delete_items", json!({"ids": [1, 2]})).await;
        assert_eq!(text_of(&ok), "trashed 2 items");
        host.shutdown().await;
    })
    .await;
}

#[cfg(unix)] // process ids, `kill`
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_gives_error_and_warning_then_restarts() {
    within(async {
        let host = host_with_stdio(ToolHostOptions::default()).await;
        let pid1: u32 = text_of(&call(&host, "pid", json!({})).await)
            .parse()
            .unwrap();

        let out = call(&host, "crash", json!({})).await;
        assert!(out.is_error, "{out:?}");
        assert!(
            text_of(&out).contains("stopped while running `crash`"),
            "{out:?}"
        );
        let warning = out.warning.expect("a crash is a warning for the person");
        assert!(
            warning.contains("tool server `test` stopped during `crash`"),
            "{warning}"
        );
        assert!(warning.contains("restarted on the next call"), "{warning}");
        assert_eq!(host.failures().len(), 1);
        assert_eq!(host.failures()[0].server, "test");
        // Its tools stay offered, so the model can call them and restart it.
        assert!(host.list().await.unwrap().iter().any(|t| t.name == "echo"));

        let out = call(&host, "echo", json!({"text": "again"})).await;
        assert_eq!(text_of(&out), "again");
        assert!(!out.is_error);
        let pid2: u32 = text_of(&call(&host, "pid", json!({})).await)
            .parse()
            .unwrap();
        assert_ne!(pid1, pid2, "a new process answers");
        assert!(host.failures().is_empty());
        assert!(wait_gone(pid1).await, "the crashed process was reaped");
        host.shutdown().await;
    })
    .await;
}

#[cfg(unix)] // process ids, `kill`
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeout_stops_the_server_and_the_next_call_restarts_it() {
    within(async {
        let options = ToolHostOptions {
            call_timeout: Duration::from_millis(700),
            ..Default::default()
        };
        let host = host_with_stdio(options).await;
        let pid1: u32 = text_of(&call(&host, "pid", json!({})).await)
            .parse()
            .unwrap();
        let out = call(&host, "slow", json!({"seconds": 30})).await;
        assert!(out.is_error);
        assert!(
            text_of(&out).contains("did not answer within 0.7 s"),
            "{out:?}"
        );
        let warning = out.warning.unwrap();
        assert!(warning.contains("timed out on `slow`"), "{warning}");
        assert!(wait_gone(pid1).await, "the hung server was stopped");

        let out = call(&host, "slow", json!({"seconds": 0.01})).await;
        assert!(!out.is_error, "{out:?}");
        assert_eq!(text_of(&out), "slept 0.01 s");
        assert!(
            out.warning.is_none(),
            "a server stopped by us restarts silently: {out:?}"
        );
        host.shutdown().await;
    })
    .await;
}

#[cfg(unix)] // process ids, `kill`
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_died_between_calls_is_restarted_with_a_note() {
    within(async {
        let host = host_with_stdio(ToolHostOptions::default()).await;
        let pid: u32 = text_of(&call(&host, "pid", json!({})).await)
            .parse()
            .unwrap();
        // Killed from outside, not during a call.
        std::process::Command::new("kill")
            .arg("-9")
            .arg(pid.to_string())
            .status()
            .unwrap();
        assert!(wait_gone(pid).await);
        tokio::time::sleep(Duration::from_millis(200)).await;
        let failures = host.failures();
        assert_eq!(failures.len(), 1, "a silent death shows in failures()");
        assert!(
            failures[0].message.contains("restarted on the next call"),
            "{failures:?}"
        );
        let out = call(&host, "echo", json!({"text": "back"})).await;
        assert_eq!(text_of(&out), "back");
        let warning = out.warning.expect("the restart is reported");
        assert!(
            warning.contains("had stopped and was restarted"),
            "{warning}"
        );
        host.shutdown().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_before_start_skips_the_call_but_a_running_call_finishes() {
    within(async {
        let host = host_with_stdio(ToolHostOptions::default()).await;
        let cancel = CancellationToken::new();
        cancel.cancel();
        let out = host
            .call("write", json!({"key": "k", "value": "v"}), cancel)
            .await;
        assert!(out.is_error);
        assert_eq!(
            text_of(&out),
            "`write` was not run: the user stopped before it started."
        );
        assert_eq!(
            text_of(&call(&host, "notes_read", json!({"text": "k"})).await),
            "no note k"
        );

        let out = call_stopped_after(&host, "slow", json!({"seconds": 0.5}), 100).await;
        assert!(!out.is_error, "{out:?}");
        assert_eq!(text_of(&out), "slept 0.5 s");
        host.shutdown().await;
    })
    .await;
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct AddArgs {
    /// The first number.
    a: i64,
    /// The second number.
    b: i64,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rust_function_tools() {
    within(async {
        // Generous: printing a panic with a backtrace is slow in debug builds.
        let options = ToolHostOptions {
            call_timeout: Duration::from_secs(3),
            ..Default::default()
        };
        let host = ToolHost::with_options(options);
        let read = ToolAnnotations {
            read_only_hint: Some(true),
            ..Default::default()
        };
        host.add_fn(
            "add",
            "Add two numbers",
            read.clone(),
            |args: AddArgs| async move {
                args.a
                    .checked_add(args.b)
                    .map(|s| s.to_string())
                    .ok_or("overflow")
            },
        )
        .unwrap();
        host.add_fn(
            "picture",
            "A picture",
            read.clone(),
            |_: NoArgs| async move {
                Ok::<_, String>(ToolOutput::from(vec![Part::Image(lrg_providers::Image {
                    mime: "image/png".into(),
                    data: bytes::Bytes::from_static(b"\x89PNG"),
                })]))
            },
        )
        .unwrap();
        host.add_fn(
            "boom",
            "Panics",
            ToolAnnotations::default(),
            |_: NoArgs| async move {
                if true {
                    panic!("boom");
                }
                Ok::<String, String>(String::new())
            },
        )
        .unwrap();
        host.add_fn(
            "hang",
            "Never ends",
            ToolAnnotations::default(),
            |_: NoArgs| async move {
                tokio::time::sleep(Duration::from_secs(3600)).await;
                Ok::<String, String>(String::new())
            },
        )
        .unwrap();

        let specs = host.list().await.unwrap();
        let add = specs.iter().find(|s| s.name == "add").unwrap();
        insta::assert_json_snapshot!("rust_fn_schema", add.input_schema);
        assert_eq!(host.tools()[0].class, ToolClass::Read);
        assert_eq!(host.tools()[0].source, ToolSource::Rust);

        assert_eq!(
            call(&host, "add", json!({"a": 2, "b": 3})).await,
            ToolOutput::text("5")
        );
        let out = call(&host, "add", json!({"a": i64::MAX, "b": 1})).await;
        assert_eq!(out, ToolOutput::error("overflow"));
        let out = call(&host, "add", json!({"a": "2"})).await;
        assert!(out.is_error);
        insta::assert_snapshot!("rust_fn_invalid", text_of(&out));
        let out = call(&host, "picture", json!({})).await;
        assert!(matches!(&out.parts[0], Part::Image(i) if i.mime == "image/png"));
        let out = call(&host, "boom", json!({})).await;
        assert!(out.is_error);
        let warning = out.warning.unwrap();
        assert_eq!(warning, "Rust tool `boom` panicked: boom");
        let out = call(&host, "hang", json!({})).await;
        assert!(out.is_error);
        assert_eq!(out.warning.unwrap(), "Rust tool `hang` timed out after 3 s");

        // Adding: names are checked, duplicates refused, arguments must be an object.
        let err = host
            .add_fn("add", "", read.clone(), |_: NoArgs| async {
                Ok::<_, String>("")
            })
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "cannot add tool `add`: another Rust tool has this name"
        );
        let err = host
            .add_fn("bad name", "", read.clone(), |_: NoArgs| async {
                Ok::<_, String>("")
            })
            .unwrap_err();
        assert!(
            err.to_string().contains("names must be 1 to 64 characters"),
            "{err}"
        );
        let err = host
            .add_fn("num", "", read, |_: i64| async { Ok::<_, String>("") })
            .unwrap_err();
        assert!(err.to_string().contains("must be a struct"), "{err}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_tool_list_is_fetched_on_the_next_listing() {
    within(async {
        let host = host_with_stdio(ToolHostOptions::default()).await;
        let names = |specs: Vec<lrg_providers::ToolSpec>| -> Vec<String> {
            specs.into_iter().map(|s| s.name).collect()
        };
        assert!(!names(host.list().await.unwrap()).contains(&"extra".to_owned()));
        // Until a source's tools change, listing hands out the one kept list.
        let kept = host.list_shared().await.unwrap();
        assert!(std::sync::Arc::ptr_eq(
            &kept,
            &host.list_shared().await.unwrap()
        ));
        assert_eq!(kept.to_vec(), host.list().await.unwrap());
        assert_eq!(text_of(&call(&host, "grow", json!({})).await), "grown");
        // The notification travels on its own; give it a moment.
        let mut listed = false;
        for _ in 0..50 {
            if names(host.list().await.unwrap()).contains(&"extra".to_owned()) {
                listed = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(listed, "`extra` appears after tools/list_changed");
        let fresh = host.list_shared().await.unwrap();
        assert!(
            !std::sync::Arc::ptr_eq(&kept, &fresh),
            "a new list after the change"
        );
        assert_eq!(fresh.len(), kept.len() + 1);
        assert_eq!(
            text_of(&call(&host, "extra", json!({})).await),
            "extra tool"
        );
        host.shutdown().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_process_server() {
    within(async {
        let host = ToolHost::new();
        host.add_in_process("inproc", test_server::TestServer::embedded)
            .await
            .unwrap();
        let out = call(&host, "echo", json!({"text": "inside"})).await;
        assert_eq!(out, ToolOutput::text("inside"));
        let out = call(&host, "image", json!({})).await;
        assert!(matches!(&out.parts[1], Part::Image(_)));
        // `crash` is refused in-process: an MCP error, not a dead server.
        let out = call(&host, "crash", json!({})).await;
        assert!(out.is_error);
        assert!(
            text_of(&out).contains("only available over stdio"),
            "{out:?}"
        );
        assert!(out.warning.is_none());
        // A tool's own error (isError) comes back as such.
        let out = call(&host, "fail", json!({"text": "x"})).await;
        assert!(out.is_error);
        assert_eq!(text_of(&out), "failed: x");
        assert!(out.warning.is_none());
        // A stop during a call lets it finish, as over stdio.
        let out = call_stopped_after(&host, "slow", json!({"seconds": 0.3}), 50).await;
        assert_eq!(text_of(&out), "slept 0.3 s", "{out:?}");
        assert!(!out.is_error);
        host.shutdown().await;
        assert!(host.list().await.is_err());
        let out = call(&host, "echo", json!({"text": "late"})).await;
        assert!(out.is_error);
    })
    .await;
}

/// The test server behind axum on 127.0.0.1:0, refusing requests without
/// the `x-api-key: secret-key` header.
async fn http_server() -> (String, CancellationToken) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    serve_http(listener)
}

fn serve_http(listener: tokio::net::TcpListener) -> (String, CancellationToken) {
    use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
    use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
    let stop = CancellationToken::new();
    let service: StreamableHttpService<test_server::TestServer, LocalSessionManager> =
        StreamableHttpService::new(
            || Ok(test_server::TestServer::embedded()),
            Default::default(),
            StreamableHttpServerConfig::default()
                .with_sse_keep_alive(None)
                .with_cancellation_token(stop.child_token()),
        );
    let app = axum::Router::new()
        .nest_service("/mcp", service)
        .layer(axum::middleware::from_fn(
            |req: axum::extract::Request, next: axum::middleware::Next| async move {
                if req.headers().get("x-api-key").map(|v| v.as_bytes()) != Some(b"secret-key") {
                    return axum::http::StatusCode::UNAUTHORIZED.into_response();
                }
                next.run(req).await
            },
        ));
    let addr = listener.local_addr().unwrap();
    let s = stop.clone();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app)
            .with_graceful_shutdown(s.cancelled_owned())
            .await;
    });
    (format!("http://{addr}/mcp"), stop)
}

use axum::response::IntoResponse as _;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streamable_http_server_with_headers() {
    within(async {
        let (url, stop) = http_server().await;
        let host = ToolHost::with_options(ToolHostOptions {
            connect_timeout: Duration::from_secs(10),
            ..Default::default()
        });
        let good = HttpServerConfig::new(url.clone()).header("X-Api-Key", "secret-key");
        host.add_mcp_server("web", McpServerConfig::Http(good))
            .await
            .unwrap();
        let out = call(&host, "echo", json!({"text": "over http"})).await;
        assert_eq!(out, ToolOutput::text("over http"));
        let out = call(&host, "image", json!({})).await;
        assert!(matches!(&out.parts[1], Part::Image(_)));

        // Without the header the server refuses; the error names the server
        // and never shows header values.
        let bad = HttpServerConfig::new(url).header("X-Api-Key", "wrong-key");
        let failure = host
            .add_mcp_server("web2", McpServerConfig::Http(bad))
            .await
            .unwrap_err();
        assert_eq!(failure.server, "web2");
        assert!(!failure.to_string().contains("wrong-key"), "{failure}");
        assert_eq!(host.failures().len(), 1);
        host.shutdown().await;
        stop.cancel();
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_server_gone_gives_error_and_warning_then_reconnects() {
    within(async {
        let (url, stop) = http_server().await;
        let host = ToolHost::with_options(ToolHostOptions {
            connect_timeout: Duration::from_secs(10),
            call_timeout: Duration::from_secs(10),
            ..Default::default()
        });
        let cfg = HttpServerConfig::new(url.clone()).header("x-api-key", "secret-key");
        host.add_mcp_server("web", McpServerConfig::Http(cfg))
            .await
            .unwrap();
        assert_eq!(
            text_of(&call(&host, "echo", json!({"text": "1"})).await),
            "1"
        );

        stop.cancel();
        tokio::time::sleep(Duration::from_millis(300)).await;
        let out = call(&host, "echo", json!({"text": "2"})).await;
        assert!(out.is_error, "{out:?}");
        let warning = out.warning.unwrap();
        assert!(
            warning.starts_with("tool server `web` could not be reached for `echo`"),
            "{warning}"
        );

        // The server comes back on the same address: the next call reconnects.
        let addr = url
            .trim_start_matches("http://")
            .trim_end_matches("/mcp")
            .to_owned();
        let listener = tokio::net::TcpListener::bind(addr.as_str()).await.unwrap();
        let (_url, stop) = serve_http(listener);
        let out = call(&host, "echo", json!({"text": "3"})).await;
        assert_eq!(out, ToolOutput::text("3"));
        host.shutdown().await;
        stop.cancel();
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn collisions_rust_first_then_servers_in_order() {
    within(async {
        let host = ToolHost::new();
        host.add_fn(
            "echo",
            "Rust echo",
            ToolAnnotations::default(),
            |a: test_server::EchoArgs| async move { Ok::<_, String>(format!("rust:{}", a.text)) },
        )
        .unwrap();
        // Config order, not alphabetical: "zeta" comes first in the file.
        let config = McpConfig::from_json(&format!(
            r#"{{"mcpServers": {{
                "zeta": {{"command": {cmd}}},
                "alpha": {{"command": {cmd}}}
            }}}}"#,
            cmd = serde_json::to_string(env!("CARGO_BIN_EXE_lrg-test-mcp")).unwrap()
        ))
        .unwrap();
        let failures = host.add_mcp_config(&config).await;
        assert!(failures.is_empty(), "{failures:?}");
        host.add_in_process("in.proc", test_server::TestServer::embedded)
            .await
            .unwrap();

        let names: Vec<String> = host
            .list()
            .await
            .unwrap()
            .into_iter()
            .map(|t| t.name)
            .collect();
        let echoes: Vec<&String> = names.iter().filter(|n| n.contains("echo")).collect();
        assert_eq!(
            echoes,
            ["echo", "zeta__echo", "alpha__echo", "in_proc__echo"]
        );
        // zeta, first in the file, keeps the bare names no Rust tool took.
        assert!(names.contains(&"pid".to_owned()));
        assert!(names.contains(&"alpha__pid".to_owned()));
        assert_eq!(
            host.tools()
                .iter()
                .find(|t| t.spec.name == "pid")
                .unwrap()
                .source,
            ToolSource::Mcp {
                server: "zeta".into(),
                tool: "pid".into()
            }
        );

        assert_eq!(
            text_of(&call(&host, "echo", json!({"text": "x"})).await),
            "rust:x"
        );
        assert_eq!(
            text_of(&call(&host, "alpha__echo", json!({"text": "x"})).await),
            "x"
        );
        // Each prefixed name reaches its own server (different processes).
        let zeta_pid = text_of(&call(&host, "pid", json!({})).await);
        let alpha_pid = text_of(&call(&host, "alpha__pid", json!({})).await);
        assert_ne!(zeta_pid, alpha_pid);
        host.shutdown().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_cannot_start_does_not_take_the_others_down() {
    within(async {
        let host = ToolHost::new();
        let config = McpConfig::new(vec![
            (
                "missing".into(),
                McpServerConfig::Stdio(StdioServerConfig::new("/nonexistent/mcp-server")),
            ),
            (
                "exits".into(),
                McpServerConfig::Stdio(
                    StdioServerConfig::new("sh").args(["-c", "echo broken config >&2; exit 1"]),
                ),
            ),
            ("test".into(), stdio_server()),
        ]);
        let failures = host.add_mcp_config(&config).await;
        let failed: Vec<&str> = failures.iter().map(|f| f.server.as_str()).collect();
        assert_eq!(failed, ["missing", "exits"]);
        assert!(
            failures[0]
                .message
                .contains("cannot run `/nonexistent/mcp-server`"),
            "{}",
            failures[0]
        );
        assert!(
            failures[0].message.contains("is it installed and on PATH?"),
            "{}",
            failures[0]
        );
        assert!(
            failures[1].message.contains("broken config"),
            "stderr explains: {}",
            failures[1]
        );
        assert_eq!(host.failures(), failures);
        let names: Vec<String> = host
            .list()
            .await
            .unwrap()
            .into_iter()
            .map(|t| t.name)
            .collect();
        assert!(names.contains(&"echo".to_owned()));
        assert_eq!(host.retry_failed().await.len(), 2);
        let dup = host
            .add_mcp_server("test", stdio_server())
            .await
            .unwrap_err();
        assert_eq!(dup.message, "a server of this name was already added");
        host.shutdown().await;
    })
    .await;
}

#[cfg(unix)] // process ids, `kill`
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_and_drop_leave_no_process_behind() {
    within(async {
        let host = host_with_stdio(ToolHostOptions::default()).await;
        let pid: u32 = text_of(&call(&host, "pid", json!({})).await)
            .parse()
            .unwrap();
        assert!(is_alive(pid));
        host.shutdown().await;
        assert!(!is_alive(pid), "shutdown waits until the child is gone");

        let host = host_with_stdio(ToolHostOptions::default()).await;
        let pid: u32 = text_of(&call(&host, "pid", json!({})).await)
            .parse()
            .unwrap();
        drop(host);
        assert!(
            wait_gone(pid).await,
            "dropping the host stops and reaps the child"
        );
    })
    .await;
}

/// Dropping the runtime before the host (a sync `main` that built its own
/// runtime) neither panics nor leaves the server running.
#[cfg(target_os = "linux")]
#[test]
fn dropping_the_runtime_first_still_stops_the_server() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (host, pid) = rt.block_on(within(async {
        let host = host_with_stdio(ToolHostOptions::default()).await;
        let pid: u32 = text_of(&call(&host, "pid", json!({})).await)
            .parse()
            .unwrap();
        (host, pid)
    }));
    drop(rt);
    drop(host);
    // Killed; it may stay a zombie until this test binary exits, as nothing
    // is left to reap it.
    let running = || {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map(|stat| {
                !stat
                    .rsplit(')')
                    .next()
                    .unwrap_or("")
                    .trim_start()
                    .starts_with('Z')
            })
            .unwrap_or(false)
    };
    for _ in 0..100 {
        if !running() {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("the server process {pid} still runs");
}

#[test]
fn disabled_servers_are_named_not_configured() {
    let config = McpConfig::from_json(
        r#"{"mcpServers": {
            "on": {"command": "a"},
            "off": {"command": "b", "disabled": true},
            "half_written": {"disabled": true}
        }}"#,
    )
    .unwrap();
    let names: Vec<&str> = config.servers.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["on"]);
    assert_eq!(config.disabled, ["off", "half_written"]);
    let twice = McpConfig::from_json(
        r#"{"mcpServers": {"x": {"command": "a", "disabled": true}, "x": {"command": "b"}}}"#,
    );
    assert!(twice.is_err());
}

#[test]
fn config_parsing() {
    let config = McpConfig::from_json(
        r#"{
          "mcpServers": {
            "files": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"],
                      "env": {"API_KEY": "sk-very-secret"}, "cwd": "/tmp", "disabled": false},
            "remote": {"url": "https://example.com/mcp", "headers": {"Authorization": "Bearer tok-secret"}}
          },
          "otherClientSetting": 1
        }"#,
    )
    .unwrap();
    assert_eq!(config.servers[0].0, "files");
    let McpServerConfig::Stdio(files) = &config.servers[0].1 else {
        panic!()
    };
    assert_eq!(
        files.args,
        ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"]
    );
    assert_eq!(files.env["API_KEY"], "sk-very-secret");
    let McpServerConfig::Http(remote) = config.get("remote").unwrap() else {
        panic!()
    };
    assert_eq!(remote.url, "https://example.com/mcp");
    let debug = format!("{config:?}");
    assert!(!debug.contains("secret"), "{debug}");
    assert!(
        debug.contains("Authorization") && debug.contains("API_KEY"),
        "{debug}"
    );

    let err = |text: &str| McpConfig::from_json(text).unwrap_err().to_string();
    insta::assert_snapshot!(
        "config_errors",
        [
            err("not json"),
            err("[]"),
            err(r#"{"servers": {}}"#),
            err(r#"{"mcpServers": []}"#),
            err(r#"{"mcpServers": {"a": {"args": ["x"]}}}"#),
            err(r#"{"mcpServers": {"a": {"command": "x", "url": "http://h"}}}"#),
            err(r#"{"mcpServers": {"a": "npx"}}"#),
            err(r#"{"mcpServers": {"a": {"command": ["npx"]}}}"#),
            err(r#"{"mcpServers": {"a": {"command": "x", "args": "-y"}}}"#),
            err(r#"{"mcpServers": {"a": {"command": "x", "env": {"KEY": 123456}}}}"#),
            err(r#"{"mcpServers": {"a": {"url": "ftp://h"}}}"#),
            err(r#"{"mcpServers": {"a": {"url": "http://h", "headers": {"Authorization": "Bearer sk\nx"}}}}"#),
            err(r#"{"mcpServers": {"a": {"url": "http://h", "headers": {"Accept": "x"}}}}"#),
            err(r#"{"mcpServers": {"a": {"command": "x"}, "a": {"command": "y"}}}"#),
        ]
        .join("\n")
    );
    // No error repeats a value that may be secret.
    assert!(
        !err(r#"{"mcpServers": {"a": {"command": "x", "env": {"KEY": 123456}}}}"#)
            .contains("123456")
    );
    assert!(
        !err(r#"{"mcpServers": {"a": {"url": "http://h", "headers": {"X": "sk-1\nx"}}}}"#)
            .contains("sk-1")
    );

    // Round trip, order kept; a server entry inside an app's own config
    // is checked the same way.
    let text = serde_json::to_string(&config).unwrap();
    assert!(
        text.starts_with(r#"{"mcpServers":{"files":{"command":"npx""#),
        "{text}"
    );
    assert_eq!(serde_json::from_str::<McpConfig>(&text).unwrap(), config);
    #[derive(serde::Deserialize)]
    struct AppConfig {
        #[allow(dead_code)]
        search: McpServerConfig,
    }
    let e = serde_json::from_str::<AppConfig>(
        r#"{"search": {"url": "http://h", "headers": {"K": 99}}}"#,
    )
    .err()
    .unwrap()
    .to_string();
    assert!(
        e.contains("header \"K\" must have a string value, found a number"),
        "{e}"
    );
    assert!(!e.contains("99"), "{e}");

    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("none.json");
    assert!(matches!(
        McpConfig::from_file(&missing),
        Err(McpConfigError::Read { .. })
    ));
    let path = dir.path().join("mcp.json");
    std::fs::write(&path, "{oops").unwrap();
    let e = McpConfig::from_file(&path).unwrap_err().to_string();
    assert!(e.contains("mcp.json"), "{e}");
}
