//! `lrg` writing into a pipe whose reader went away (`lrg tools --json |
//! head -1`), or onto a full disk (`/dev/full`), as a process: no panic, the
//! work stops and ends as it normally ends (tool servers stopped, a kept
//! chat saved), exit 0 when the reader went away, and one line on stderr
//! with exit 1 when a write failed otherwise. And a stderr nobody reads
//! costs nothing but the messages.
//!
//! Tool servers left behind are found by a marker in their environment
//! (`lrg` passes its own to the servers it starts), read from `/proc`.
#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use common::{Env, TIMEOUT, ran, repo_root};

const DEMO: &str = "lrg demo-server";
/// The environment variable that marks this test's processes.
const MARK: &str = "LRG_CLOSED_STDOUT_TEST";
/// How long killed tool servers may take to be gone.
const GONE_WITHIN: Duration = Duration::from_secs(10);

/// Where `lrg`'s stdout goes.
#[derive(Debug, Clone, Copy)]
enum Stdout {
    /// A pipe whose read end is closed before `lrg` starts: its first
    /// write fails.
    ClosedPipe,
    /// A pipe whose reader takes the first line and then closes it.
    FirstLineThenClosed,
    /// `/dev/full`: every write fails with "no space left".
    Full,
}

#[derive(Debug)]
struct Ended {
    code: Option<i32>,
    stderr: String,
    /// What was read from stdout (the first line, or nothing).
    first_line: String,
}

/// Run `cmd` (from [`Env::lrg_std`]) with `stdout`, wait for it (bounded),
/// and check that it left no tool server running.
fn run(cmd: Command, stdout: Stdout) -> Ended {
    run_with_input(cmd, stdout, "")
}

/// [`run`], with `input` on stdin.
fn run_with_input(mut cmd: Command, stdout: Stdout, input: &str) -> Ended {
    let mark = format!("{}-{:?}", std::process::id(), std::thread::current().id());
    cmd.env(MARK, &mark)
        .stdin(Stdio::piped())
        .stderr(Stdio::piped());
    let mut reader = None;
    match stdout {
        Stdout::ClosedPipe => {
            // No reader at all: a write gets EPIPE, whenever it comes.
            let (read, write) = std::io::pipe().unwrap();
            drop(read);
            cmd.stdout(write);
        }
        Stdout::FirstLineThenClosed => {
            let (read, write) = std::io::pipe().unwrap();
            cmd.stdout(write);
            reader = Some(read);
        }
        Stdout::Full => {
            let full = std::fs::OpenOptions::new()
                .write(true)
                .open("/dev/full")
                .unwrap();
            cmd.stdout(full);
        }
    }
    let mut child = cmd.spawn().unwrap();
    // The command holds the pipe's write end: only the child may keep it.
    drop(cmd);
    let mut first_line = String::new();
    if let Some(read) = reader {
        BufReader::new(read).read_line(&mut first_line).unwrap();
        // Dropped here: the reader goes away.
    }
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(input.as_bytes()).unwrap();
    drop(stdin);
    let mut stderr = child.stderr.take().unwrap();
    let stderr = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });

    let status = wait(&mut child);
    assert_no_server_left(&mark);
    let ended = Ended {
        code: status.code(),
        stderr: stderr.join().unwrap(),
        first_line,
    };
    assert!(
        !ended.stderr.contains("panicked") && !ended.stderr.contains("Broken pipe"),
        "{ended:?}"
    );
    ended
}

/// Wait for `child` to end, killing it past [`TIMEOUT`].
fn wait(child: &mut Child) -> ExitStatus {
    let deadline = Instant::now() + TIMEOUT;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("lrg did not end within {TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Live processes (not zombies) whose environment holds this marker: the
/// tool servers a run started.
fn marked(mark: &str) -> Vec<String> {
    let needle = format!("{MARK}={mark}");
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        if entry.file_name().to_string_lossy().parse::<u32>().is_err() {
            continue;
        }
        let Ok(environ) = std::fs::read(entry.path().join("environ")) else {
            continue;
        };
        if !environ
            .split(|b| *b == 0)
            .any(|var| var == needle.as_bytes())
        {
            continue;
        }
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        // The state is the field after the command name's parenthesis.
        let state = stat
            .rsplit_once(") ")
            .and_then(|(_, rest)| rest.chars().next());
        if matches!(state, None | Some('Z' | 'X')) {
            continue;
        }
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        found.push(format!(
            "{}: {}",
            entry.file_name().to_string_lossy(),
            String::from_utf8_lossy(&cmdline).replace('\0', " ")
        ));
    }
    found
}

fn assert_no_server_left(mark: &str) {
    // A server killed at the end may take a moment to be gone: bounded.
    let deadline = Instant::now() + GONE_WITHIN;
    loop {
        let left = marked(mark);
        if left.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "tool servers still running after lrg ended: {left:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The one line a failed write leaves on stderr.
fn assert_full_disk_line(ended: &Ended) {
    assert_eq!(ended.code, Some(1), "{ended:?}");
    // A chat's prompt (`> `, no newline) may come before it.
    let lines: Vec<&str> = ended
        .stderr
        .lines()
        .filter(|l| l.contains("stdout"))
        .map(|l| l.trim_start_matches("> "))
        .collect();
    assert_eq!(
        lines,
        ["lrg: cannot write the output to stdout: No space left on device (os error 28)"],
        "{ended:?}"
    );
}

fn hello_run(env: &Env) -> Command {
    let mut cmd = env.lrg_std();
    cmd.current_dir(repo_root()).args([
        "run",
        "--model",
        "replay:examples/recordings/hello.json",
        "--mcp",
        DEMO,
        "--json",
        "What notes do I have?",
    ]);
    cmd
}

#[test]
fn the_leftover_check_sees_a_running_server() {
    // Without this, "no server left" could pass because the check is blind.
    let env = Env::new();
    let mark = "control";
    let mut server = env
        .lrg_std()
        .arg("demo-server")
        .env(MARK, mark)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + GONE_WITHIN;
    while marked(mark).is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let seen = marked(mark);
    server.kill().unwrap();
    server.wait().unwrap();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert!(seen[0].contains("demo-server"), "{seen:?}");
    assert_no_server_left(mark);
}

#[test]
fn tools_json_into_a_closed_pipe_exits_0_and_stops_its_server() {
    let env = Env::new();
    let mut cmd = env.lrg_std();
    cmd.args(["tools", "--mcp", DEMO, "--json"]);
    let ended = run(cmd, Stdout::ClosedPipe);
    assert_eq!(ended.code, Some(0), "{ended:?}");
    assert_eq!(ended.stderr, "", "{ended:?}");
}

#[test]
fn listings_into_a_closed_pipe_exit_0_quietly() {
    let env = Env::new();
    let models_dir = env.path("models").display().to_string();
    let listings: [&[&str]; 4] = [
        &["models"],
        &["models", "--json"],
        &["tools", "--mcp", DEMO],
        &["test", "--schema"],
    ];
    for args in listings {
        let mut cmd = env.lrg_std();
        cmd.args(args).env("LRG_MODELS_DIR", &models_dir);
        let ended = run(cmd, Stdout::ClosedPipe);
        assert_eq!(ended.code, Some(0), "{args:?}: {ended:?}");
        assert_eq!(ended.stderr, "", "{args:?}: {ended:?}");
    }
}

#[test]
fn a_run_into_a_closed_pipe_stops_and_leaves_no_server() {
    let env = Env::new();
    let ended = run(hello_run(&env), Stdout::ClosedPipe);
    assert_eq!(ended.code, Some(0), "{ended:?}");
    assert_eq!(ended.stderr, "", "{ended:?}");
}

#[test]
fn a_run_whose_reader_leaves_after_the_first_line_ends_quietly() {
    let env = Env::new();
    let ended = run(hello_run(&env), Stdout::FirstLineThenClosed);
    assert!(
        ended.first_line.starts_with(r#"{"type":"lrg_events","#),
        "{ended:?}"
    );
    assert_eq!(ended.code, Some(0), "{ended:?}");
    assert_eq!(ended.stderr, "", "{ended:?}");
}

#[test]
fn a_kept_run_into_a_closed_pipe_is_still_saved() {
    let env = Env::new();
    env.file(
        "s.json",
        r#"[{"text":"Let me look.","calls":[{"name":"list_notes","arguments":{}}]},
            {"text":"You have three notes."}]"#,
    );
    let kept = |args: &[&str]| {
        let mut cmd = env.lrg_std();
        cmd.env("XDG_DATA_HOME", env.path("data"))
            .env("USER", "tester")
            .args(args);
        cmd
    };
    let ended = run(
        kept(&[
            "run",
            "--model",
            "script:s.json",
            "--mcp",
            DEMO,
            "--session",
            "doc:1",
            "what notes?",
        ]),
        Stdout::ClosedPipe,
    );
    assert_eq!(ended.code, Some(0), "{ended:?}");

    let shown = ran(env
        .lrg()
        .env("XDG_DATA_HOME", env.path("data"))
        .env("USER", "tester")
        .args(["sessions", "show", "doc:1"]));
    assert_eq!(shown.code, 0, "{shown:?}");
    assert!(shown.stdout.starts_with("you: what notes?\n"), "{shown:?}");

    for args in [&["sessions"][..], &["sessions", "show", "doc:1"]] {
        let ended = run(kept(args), Stdout::ClosedPipe);
        assert_eq!(ended.code, Some(0), "{args:?}: {ended:?}");
        assert_eq!(ended.stderr, "", "{args:?}: {ended:?}");
        assert_full_disk_line(&run(kept(args), Stdout::Full));
    }
}

#[test]
fn output_onto_a_full_disk_is_one_line_and_exit_1() {
    let env = Env::new();
    let models_dir = env.path("models").display().to_string();
    let mut models = env.lrg_std();
    models
        .args(["models", "--json"])
        .env("LRG_MODELS_DIR", &models_dir);
    let mut tools = env.lrg_std();
    tools.args(["tools", "--mcp", DEMO]);
    for cmd in [models, tools, hello_run(&env)] {
        assert_full_disk_line(&run(cmd, Stdout::Full));
    }
}

#[test]
fn serve_and_chat_end_when_their_output_cannot_be_written() {
    let env = Env::new();
    env.file("s.json", r#"[{"text":"Hello there."},{"text":"Again."}]"#);
    // The URL nobody can read: the server stops at once.
    let serve = || {
        let mut cmd = env.lrg_std();
        cmd.args(["serve", "--model", "script:s.json", "--port", "0"]);
        cmd
    };
    let ended = run(serve(), Stdout::ClosedPipe);
    assert_eq!(ended.code, Some(0), "{ended:?}");
    assert!(ended.stderr.ends_with("lrg: stopped\n"), "{ended:?}");
    assert_full_disk_line(&run(serve(), Stdout::Full));

    // The chat ends after the first reply it could not show.
    let chat = || {
        let mut cmd = env.lrg_std();
        cmd.args(["chat", "--model", "script:s.json", "--mcp", DEMO]);
        cmd
    };
    let ended = run_with_input(chat(), Stdout::ClosedPipe, "hi\nhi again\n");
    assert_eq!(ended.code, Some(0), "{ended:?}");
    let full = run_with_input(chat(), Stdout::Full, "hi\nhi again\n");
    assert_full_disk_line(&full);
    assert_eq!(full.stderr.matches("> ").count(), 1, "{full:?}");
}

#[test]
fn a_suite_whose_output_is_unread_starts_no_more_cases_and_writes_no_report() {
    let env = Env::new();
    env.file("s.json", r#"[{"text":"Hello."}]"#);
    let case = |n: u32| {
        format!(
            "[[cases]]\nname = \"case {n}\"\nmodel = \"script:s.json\"\nmessage = \"m\"\n\
             expect.reply = {{ contains = \"Hello\" }}\n"
        )
    };
    let cases: String = (1..=4).map(case).collect();
    env.file(
        "a.test.toml",
        &format!("[tools]\nmcp = [\"lrg demo-server\"]\n\n{cases}"),
    );
    let suite = || {
        let mut cmd = env.lrg_std();
        cmd.args(["test", "--jobs", "1", "--junit", "j.xml", "a.test.toml"]);
        cmd
    };
    let ended = run(suite(), Stdout::ClosedPipe);
    assert_eq!(ended.code, Some(0), "{ended:?}");
    assert_eq!(ended.stderr, "", "{ended:?}");
    // Cut short, the report would read as the whole suite's.
    assert!(!env.path("j.xml").exists());
    assert_full_disk_line(&run(suite(), Stdout::Full));
    assert!(!env.path("j.xml").exists());

    // Read to the end, the same suite passes and writes its report.
    let whole = ran(env.lrg().args(["test", "--junit", "j.xml", "a.test.toml"]));
    assert_eq!(whole.code, 0, "{whole:?}");
    assert!(env.read("j.xml").contains("case 4"), "{whole:?}");
}

#[test]
fn a_run_whose_stderr_has_no_reader_still_prints_its_reply() {
    // Tool activity goes to stderr; that nobody reads it must not cost the
    // reply on stdout (a panic in the printer's task once did).
    let env = Env::new();
    let mut cmd = env.lrg_std();
    cmd.current_dir(repo_root())
        .args([
            "run",
            "--model",
            "replay:examples/recordings/hello.json",
            "--mcp",
            DEMO,
            "What notes do I have?",
        ])
        .env(MARK, "stderr")
        .stdin(Stdio::null())
        .stdout(Stdio::piped());
    let (read, write) = std::io::pipe().unwrap();
    drop(read);
    cmd.stderr(write);
    let mut child = cmd.spawn().unwrap();
    drop(cmd);
    let mut stdout = child.stdout.take().unwrap();
    let stdout = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stdout.read_to_string(&mut text);
        text
    });
    let status = wait(&mut child);
    assert_no_server_left("stderr");
    let stdout = stdout.join().unwrap();
    assert_eq!(status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("You have three notes:"), "{stdout}");
}

#[test]
fn a_recorded_run_into_a_closed_pipe_still_finishes_its_recording() {
    let env = Env::new();
    env.file("s.json", r#"[{"text":"Hello there."}]"#);
    let mut cmd = env.lrg_std();
    cmd.args([
        "run",
        "--model",
        "script:s.json",
        "--record",
        "rec.json",
        "hi",
    ]);
    let ended = run(cmd, Stdout::ClosedPipe);
    assert_eq!(ended.code, Some(0), "{ended:?}");
    let recording: serde_json::Value = serde_json::from_str(&env.read("rec.json")).unwrap();
    assert_eq!(recording["format"], "lrg-recording", "{recording}");
    // Written whole: whether the stop came before the model's answer
    // ended is a race, so not how many exchanges it holds.
    assert!(recording["exchanges"].is_array(), "{recording}");
}
