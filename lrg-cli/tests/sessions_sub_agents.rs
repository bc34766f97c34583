//! `lrg sessions show` lists a kept chat's sub-agents after the run that
//! spawned them has ended: their status and times are kept with them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::{Env, ran};

/// The parent spawns one sub-agent; its turn and the sub-agent's first race
/// for the next two script turns, so both are the same reply; the last is
/// the parent's reaction to the sub-agent's answer.
const SCRIPT: &str = r#"[
  {"calls": [{"name": "spawn_sub_agent", "arguments": {"tasks": [{"description": "count the notes", "prompt": "How many notes are there?"}]}}]},
  {"text": "Working on it."},
  {"text": "Working on it."},
  {"text": "The helper is done."}
]"#;

fn kept(env: &Env) -> assert_cmd::Command {
    let mut cmd = env.lrg();
    cmd.env("XDG_DATA_HOME", env.path("data"))
        .env("USER", "tester");
    cmd
}

#[test]
fn sessions_show_lists_the_sub_agents_of_a_kept_chat_after_its_run() {
    let env = Env::new();
    env.file("s.json", SCRIPT);
    let run = ran(kept(&env).args([
        "run",
        "--sub-agents",
        "--model",
        "script:s.json",
        "--session",
        "notes:1",
        "count my notes in the background",
    ]));
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stderr.contains("::sub::1 done"), "{run:?}");

    let show = ran(kept(&env).args(["sessions", "show", "notes:1"]));
    assert_eq!(show.code, 0, "{show:?}");
    let line = show
        .stdout
        .lines()
        .find(|l| l.starts_with("sub-agent "))
        .unwrap_or_else(|| panic!("no sub-agent line: {show:?}"));
    assert!(
        line.starts_with("sub-agent 1 done: count the notes (started just now, took "),
        "{line}"
    );
    assert!(
        show.stdout.contains("tool sub_agent_result"),
        "its result is in the transcript: {show:?}"
    );

    let json = ran(kept(&env).args(["sessions", "show", "notes:1", "--json"]));
    assert_eq!(json.code, 0, "{json:?}");
    let value: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    let agents = value["sub_agents"].as_array().unwrap();
    assert_eq!(agents.len(), 1, "{value}");
    let agent = &agents[0];
    assert_eq!(agent["n"], 1);
    assert_eq!(agent["status"], "done");
    assert_eq!(agent["description"], "count the notes");
    assert!(
        agent["id"].as_str().unwrap().ends_with("::sub::1"),
        "{agent}"
    );
    let (start, end) = (
        agent["started_ms"].as_u64().unwrap(),
        agent["ended_ms"].as_u64().unwrap(),
    );
    assert!(start > 0 && end >= start, "{agent}");
}
