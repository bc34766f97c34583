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

use crate::store_support;

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
    archive_releases_the_keys(&fresh(&server, "lrg_archive").await).await;
    rebind_moves_a_chat_to_another_model(&fresh(&server, "lrg_rebind").await).await;
    the_registry_never_loses_a_chat_on_another_model(&fresh(&server, "lrg_reopen").await).await;
    the_lock_and_consent_last_on_resume(&fresh(&server, "lrg_kept_choices").await).await;
    names_and_first_messages_are_listed(&fresh(&server, "lrg_names").await).await;
    damage_is_refused_and_left_as_it_is(&fresh(&server, "lrg_damage").await).await;
    let bad = PgStore::connect("host=/nonexistent/socket user=x dbname=y").await;
    assert!(bad.is_err());
}

/// SQL on the test's database, as a person or another program would.
async fn sql(pg: &Pg, statement: &str, id: &str) -> u64 {
    let (client, connection) = tokio_postgres::connect(&pg.url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    client.execute(statement, &[&id]).await.unwrap()
}

/// What the database holds of session `id`: its head and its rows, as text.
async fn raw(pg: &Pg, id: &str) -> (String, Vec<String>) {
    let (client, connection) = tokio_postgres::connect(&pg.url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    let head = client
        .query_one(
            "SELECT version::TEXT || ' ' || meta || ' ' || state FROM lrg_sessions WHERE id = $1",
            &[&id],
        )
        .await
        .unwrap()
        .get(0);
    let rows = client
        .query(
            "SELECT n::TEXT || ' ' || row FROM lrg_session_rows WHERE session_id = $1 ORDER BY n",
            &[&id],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    (head, rows)
}

/// The JSONL store's damage rules, on PostgreSQL: a newer format, an
/// unreadable meta or an unreadable row refuses the load and the resume
/// with an error that says which, leaves the session as it is, is listed as
/// damaged with its keys (a damaged head), and a keyed open never starts a
/// second chat under the keys.
async fn damage_is_refused_and_left_as_it_is(pg: &Pg) {
    use lrg_chat::registry::{OpenRequest, RegistryConfig, SessionRegistry};
    use lrg_chat::store::{ListFilter, ModelBinding, SessionKeys, StoreError};
    use lrg_chat::{ChatSession, FixedModel};
    use lrg_providers::ScriptedModel;

    let store = pg.store();
    let keyed = |context: &str| {
        let keys = SessionKeys::new("alice", context).unwrap();
        (meta().with_keys(keys.clone()), keys)
    };
    let (newer, newer_keys) = keyed("doc:newer");
    let (bad_meta, bad_meta_keys) = keyed("doc:meta");
    let (bad_row, bad_row_keys) = keyed("doc:row");
    for m in [&newer, &bad_meta, &bad_row] {
        within(store.create(m)).await.unwrap();
        within(store.append(&m.id, &exchange("x", 1), &state(3)))
            .await
            .unwrap();
        within(store.release(&m.id)).await;
    }
    let (good, _) = keyed("doc:good");
    within(store.create(&good)).await.unwrap();
    within(store.release(&good.id)).await;

    sql(
        pg,
        "UPDATE lrg_sessions SET version = 99 WHERE id = $1",
        newer.id.as_str(),
    )
    .await;
    sql(
        pg,
        "UPDATE lrg_sessions SET meta = '{\"id\": 1' WHERE id = $1",
        bad_meta.id.as_str(),
    )
    .await;
    sql(
        pg,
        "UPDATE lrg_session_rows SET row = '\u{1}not json' WHERE session_id = $1 AND n = 1",
        bad_row.id.as_str(),
    )
    .await;
    let before = [
        raw(pg, newer.id.as_str()).await,
        raw(pg, bad_meta.id.as_str()).await,
        raw(pg, bad_row.id.as_str()).await,
    ];

    // A newer format says so, on load, resume and find.
    let store = pg.store();
    for err in [
        within(store.load(&newer.id)).await.unwrap_err(),
        within(store.resume(&newer.id, usize::MAX))
            .await
            .unwrap_err(),
        within(store.find(&newer_keys)).await.unwrap_err(),
    ] {
        assert!(
            matches!(err, StoreError::FutureVersion { found: 99, .. }),
            "{err}"
        );
        assert!(err.to_string().contains("written by a newer lrg"), "{err}");
    }
    // An unreadable meta: corrupt, naming what.
    for err in [
        within(store.load(&bad_meta.id)).await.unwrap_err(),
        within(store.resume(&bad_meta.id, usize::MAX))
            .await
            .unwrap_err(),
        within(store.find(&bad_meta_keys)).await.unwrap_err(),
    ] {
        assert!(err.is_damage(), "{err}");
        assert!(err.to_string().contains("unreadable meta"), "{err}");
    }
    // An unreadable row in the middle: the resume is refused, not trimmed
    // or repaired past it.
    for err in [
        within(store.load(&bad_row.id)).await.unwrap_err(),
        within(store.resume(&bad_row.id, usize::MAX))
            .await
            .unwrap_err(),
    ] {
        assert!(matches!(err, StoreError::Corrupt { line: 2, .. }), "{err}");
        assert!(err.to_string().contains("unreadable row"), "{err}");
    }
    // The failed resumes left no lock behind: the good session resumes.
    within(store.resume(&good.id, usize::MAX)).await.unwrap();
    within(store.release(&good.id)).await;

    // Listed as damaged, with their keys; never as readable.
    let damaged = within(store.damaged()).await.unwrap();
    let mut listed: Vec<_> = damaged
        .iter()
        .map(|d| (d.id.clone().unwrap(), d.keys.clone()))
        .collect();
    listed.sort_by(|a, b| a.0.cmp(&b.0));
    let mut expected = vec![
        (newer.id.clone(), Some(newer_keys.clone())),
        (bad_meta.id.clone(), Some(bad_meta_keys.clone())),
    ];
    expected.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(listed, expected);
    let readable: Vec<_> = within(store.list(&ListFilter::all()))
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.meta.id)
        .collect();
    assert!(!readable.contains(&newer.id) && !readable.contains(&bad_meta.id));

    // A keyed open under any of them: an error that says so, no new chat.
    let model = ScriptedModel::new(vec![]);
    let registry = SessionRegistry::new(
        move |_: &ModelBinding| {
            Ok(ChatSession::builder(Arc::new(FixedModel::new(
                model.clone(),
            ))))
        },
        RegistryConfig::default(),
    )
    .with_store(pg.store());
    let sessions = within(store.list(&ListFilter::all())).await.unwrap().len();
    for keys in [&newer_keys, &bad_meta_keys, &bad_row_keys] {
        let binding = meta().model;
        let err = within(registry.open(OpenRequest::keyed(keys.clone(), binding)))
            .await
            .err()
            .unwrap_or_else(|| panic!("a second chat was opened under {keys:?}"));
        assert!(
            err.to_string().contains("newer lrg") || err.to_string().contains("unreadable"),
            "{err}"
        );
    }
    assert_eq!(
        within(store.list(&ListFilter::all())).await.unwrap().len(),
        sessions,
        "no chat was created"
    );

    // Every damaged session is exactly as it was.
    let after = [
        raw(pg, newer.id.as_str()).await,
        raw(pg, bad_meta.id.as_str()).await,
        raw(pg, bad_row.id.as_str()).await,
    ];
    assert_eq!(before, after, "a damaged session was changed");
}
