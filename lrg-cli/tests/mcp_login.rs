//! `lrg mcp login | list | logout` as processes, against the OAuth
//! authorization server and bearer-guarded MCP server of lrg-chat's tests
//! (in this process): the login prints its URL (`--no-browser`), the test
//! plays the browser, and the tokens then reach `lrg tools`; logout revokes
//! them.

use std::io::{BufRead as _, BufReader};
use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;

use crate::common::{Env, ran};

#[path = "../../lrg-chat/tests/oauth_support.rs"]
mod oauth_support;

fn config(env: &Env, url: &str) -> String {
    env.file(
        "mcp.json",
        &format!(
            r#"{{"mcpServers": {{"web": {{"url": "{url}"}}, "local": {{"command": "true"}}}}}}"#
        ),
    )
}

fn list(env: &Env, cfg: &str) -> Value {
    let r = ran(env
        .lrg()
        .args(["mcp", "list", "--mcp-config", cfg, "--json"]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    serde_json::from_str(&r.stdout).unwrap()
}

fn auth_of(list: &Value, name: &str) -> String {
    list["servers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == name)
        .map(|s| s["auth"].as_str().unwrap().to_owned())
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn login_with_no_browser_then_tools_then_logout() {
    let fake = oauth_support::start(oauth_support::Behaviour::default()).await;
    let env = Env::new();
    let cfg = config(&env, &fake.mcp_url());
    let before = list(&env, &cfg);
    assert_eq!(auth_of(&before, "web"), "needs_login");
    assert_eq!(auth_of(&before, "local"), "none");

    let mut child = env
        .lrg_std()
        .args([
            "mcp",
            "login",
            "web",
            "--mcp-config",
            &cfg,
            "--no-browser",
            "--timeout",
            "30",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let url = tokio::task::spawn_blocking(move || {
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).unwrap();
        line.trim().to_owned()
    });
    let url = tokio::time::timeout(Duration::from_secs(30), url)
        .await
        .expect("the login printed no URL")
        .unwrap();
    assert!(url.contains("code_challenge_method=S256"), "{url}");
    assert_eq!(fake.approve(&url).await, 200);
    let status = tokio::time::timeout(
        Duration::from_secs(30),
        tokio::task::spawn_blocking(move || child.wait_with_output().unwrap()),
    )
    .await
    .expect("the login did not end")
    .unwrap();
    let stderr = String::from_utf8_lossy(&status.stderr).into_owned();
    assert!(status.status.success(), "{stderr}");
    assert!(stderr.contains("Logged in to `web`"), "{stderr}");

    // The token file is private, and the login shows in the list.
    let tokens = env.path("config/lrg/mcp-tokens.json");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&tokens).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    let after = list(&env, &cfg);
    assert_eq!(auth_of(&after, "web"), "logged_in");
    assert!(after["servers"][0]["expires_at"].as_u64().is_some());

    // Its tools are there for every command that starts the servers.
    let r = ran(env.lrg().args(["tools", "--mcp-config", &cfg, "--json"]));
    let tools: Value = serde_json::from_str(&r.stdout).unwrap();
    assert!(
        tools["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "echo" && t["server"] == "web"),
        "{}\n{}",
        r.stdout,
        r.stderr
    );
    let (issued, refresh) = fake.seen(|s| (s.issued.clone(), s.refresh_issued.clone()));
    for secret in issued.iter().chain(refresh.iter()) {
        assert!(!r.stdout.contains(secret.as_str()) && !r.stderr.contains(secret.as_str()));
        assert!(!stderr.contains(secret.as_str()));
    }

    let r = ran(env
        .lrg()
        .args(["mcp", "logout", "web", "--mcp-config", &cfg]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stderr.contains("revoked"), "{}", r.stderr);
    assert_eq!(fake.seen(|s| s.revoked), 2);
    assert_eq!(auth_of(&list(&env, &cfg), "web"), "needs_login");

    // Logged out: `lrg tools` says how to log in again.
    let r = ran(env.lrg().args(["tools", "--mcp-config", &cfg, "--json"]));
    let tools: Value = serde_json::from_str(&r.stdout).unwrap();
    let failed = tools["failed_servers"].to_string();
    assert!(
        failed.contains("needs login: run `lrg mcp login web`"),
        "{failed}"
    );
    fake.stop();
}

#[test]
fn mcp_help_texts() {
    let env = Env::new();
    for (name, args) in [
        ("mcp_help", vec!["mcp", "--help"]),
        ("mcp_login_help", vec!["mcp", "login", "--help"]),
    ] {
        let r = ran(env.lrg().args(&args));
        assert_eq!(r.code, 0, "{}", r.stderr);
        insta::assert_snapshot!(name, r.stdout);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn login_names_what_is_wrong() {
    let env = Env::new();
    let cfg = config(&env, "http://127.0.0.1:9/mcp");
    let r = ran(env
        .lrg()
        .args(["mcp", "login", "nope", "--mcp-config", &cfg, "--no-browser"]));
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("no server `nope`"), "{}", r.stderr);
    let r = ran(env.lrg().args([
        "mcp",
        "login",
        "local",
        "--mcp-config",
        &cfg,
        "--no-browser",
    ]));
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("child process"), "{}", r.stderr);
    let r = ran(env.lrg().args(["mcp", "list"]));
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("--mcp-config"), "{}", r.stderr);
}
