//! The PostgreSQL store against a real server: the conformance suite, each
//! check in a fresh database.
//!
//! The server: `LRG_TEST_PG` (a connection string) when set; otherwise a
//! throwaway one started here with `initdb` in a temp dir, listening only on
//! a Unix socket there (run as the `postgres` user when the tests run as
//! root, as initdb refuses root). Without PostgreSQL installed the test
//! skips with a loud reason, and fails under `CI`.
#![cfg(feature = "postgres")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod store_support;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use lrg_chat::store::{PgStore, SessionStore};
use store_support::*;

struct Pg {
    url: String,
}

impl Backend for Pg {
    fn store(&self) -> Arc<dyn SessionStore> {
        Arc::new(PgStore::new(&self.url).unwrap())
    }
}

/// A throwaway server, stopped (fast shutdown) on drop.
struct Server {
    child: Option<Child>,
    socket_dir: PathBuf,
    _dir: tempfile::TempDir,
    url: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(child) = &mut self.child {
            let _ = Command::new("kill")
                .args(["-INT", &child.id().to_string()])
                .status();
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = child.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn unavailable(why: &str) -> Option<Server> {
    if std::env::var_os("CI").is_some() {
        panic!("PostgreSQL is required under CI: {why}");
    }
    eprintln!(
        "SKIPPED: the PostgreSQL store tests need a server: {why}. \
         Install PostgreSQL (Debian: apt-get install postgresql) or set LRG_TEST_PG."
    );
    None
}

fn bin_dir() -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .flatten()
        .map(|e| e.path().join("bin"))
        .filter(|p| p.join("initdb").exists())
        .collect();
    dirs.sort();
    dirs.pop()
}

fn id_of(flag: &str) -> Option<u32> {
    let out = Command::new("id").args([flag, "postgres"]).output().ok()?;
    String::from_utf8(out.stdout).ok()?.trim().parse().ok()
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.starts_with(b"0\n"))
}

fn command(bin: &Path, ids: Option<(u32, u32)>) -> Command {
    let mut cmd = Command::new(bin);
    if let Some((uid, gid)) = ids {
        use std::os::unix::process::CommandExt as _;
        cmd.uid(uid).gid(gid);
    }
    cmd
}

fn start() -> Option<Server> {
    if let Ok(url) = std::env::var("LRG_TEST_PG") {
        return Some(Server {
            child: None,
            socket_dir: PathBuf::new(),
            _dir: tempfile::TempDir::new().unwrap(),
            url,
        });
    }
    let Some(bin) = bin_dir() else {
        return unavailable("no initdb under /usr/lib/postgresql/*/bin");
    };
    let ids = if is_root() {
        match (id_of("-u"), id_of("-g")) {
            (Some(u), Some(g)) => Some((u, g)),
            _ => return unavailable("running as root and there is no `postgres` user"),
        }
    } else {
        None
    };
    let dir = tempfile::Builder::new().prefix("lrg-pg").tempdir().unwrap();
    if let Some((uid, gid)) = ids {
        std::os::unix::fs::chown(dir.path(), Some(uid), Some(gid)).unwrap();
    }
    let data = dir.path().join("data");
    let init = command(&bin.join("initdb"), ids)
        .args([
            "-D",
            data.to_str().unwrap(),
            "-A",
            "trust",
            "-U",
            "lrg",
            "-E",
            "UTF8",
        ])
        .arg("--no-sync")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    if !init.status.success() {
        return unavailable(&format!(
            "initdb failed: {}",
            String::from_utf8_lossy(&init.stderr)
        ));
    }
    let socket_dir = dir.path().to_path_buf();
    let child = command(&bin.join("postgres"), ids)
        .args([
            "-D",
            data.to_str().unwrap(),
            "-k",
            socket_dir.to_str().unwrap(),
        ])
        .args(["-c", "listen_addresses=", "-c", "fsync=off", "-p", "5432"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let url = format!(
        "host={} port=5432 user=lrg dbname=postgres",
        socket_dir.display()
    );
    let server = Server {
        child: Some(child),
        socket_dir,
        _dir: dir,
        url,
    };
    let socket = server.socket_dir.join(".s.PGSQL.5432");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !socket.exists() {
        if Instant::now() > deadline {
            return unavailable("the server did not open its socket within 30 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Some(server)
}

/// A fresh database on `server` for one check.
async fn fresh(server: &Server, name: &str) -> Pg {
    let (client, connection) = tokio_postgres::connect(&server.url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    for sql in [
        format!("DROP DATABASE IF EXISTS {name}"),
        format!("CREATE DATABASE {name}"),
    ] {
        client.batch_execute(&sql).await.unwrap();
    }
    let url = server
        .url
        .replace("dbname=postgres", &format!("dbname={name}"));
    Pg { url }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_passes_the_conformance_suite() {
    let Some(server) = start() else { return };
    // Give a just-started server a moment to accept connections.
    let deadline = Instant::now() + Duration::from_secs(30);
    while tokio_postgres::connect(&server.url, tokio_postgres::NoTls)
        .await
        .is_err()
    {
        assert!(
            Instant::now() < deadline,
            "the server does not accept connections"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    round_trip_every_part(&fresh(&server, "lrg_round_trip").await).await;
    list_and_find_by_keys(&fresh(&server, "lrg_list").await).await;
    concurrent_appends(&fresh(&server, "lrg_concurrent").await).await;
    delete_during_append(&fresh(&server, "lrg_delete").await).await;
    rewrite_replaces(&fresh(&server, "lrg_rewrite").await).await;
    resume_trims_keeping_calls_paired(&fresh(&server, "lrg_trim").await).await;
    one_writer_at_a_time(&fresh(&server, "lrg_writer").await).await;
    open_calls_are_answered_on_load(&fresh(&server, "lrg_open_calls").await).await;
    ten_thousand_rows(&fresh(&server, "lrg_ten_thousand").await).await;
    sub_agents_go_with_their_parent(&fresh(&server, "lrg_sub_agents").await).await;
    let bad = PgStore::connect("host=/nonexistent/socket user=x dbname=y").await;
    assert!(bad.is_err());
}
