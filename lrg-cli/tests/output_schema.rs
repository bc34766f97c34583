//! `lrg run --output-schema FILE` as a process, on scripted models: the
//! validated JSON alone on stdout, on one line (exit 0); an answer that never
//! matches (exit 1, stderr says why); a schema file that cannot be used
//! (exit 2, before any model is contacted); `--json` carries `json`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::{Env, ran};
use serde_json::{Value, json};

const SCHEMA: &str = r#"{
  "type": "object",
  "properties": {
    "label": {"enum": ["bug", "feature", "question"]},
    "priority": {"type": "integer", "minimum": 1, "maximum": 5}
  },
  "required": ["label", "priority"],
  "additionalProperties": false
}"#;

/// A script of text answers.
fn script(answers: &[&str]) -> String {
    let turns: Vec<Value> = answers.iter().map(|a| json!({"text": a})).collect();
    serde_json::to_string(&turns).unwrap()
}

#[test]
fn the_validated_json_alone_on_one_line() {
    let env = Env::new();
    env.file("triage.schema.json", SCHEMA);
    // Written over several lines, with a repair first.
    env.file(
        "s.json",
        &script(&[
            r#"{"label": "bug", "priority": 9}"#,
            "Here it is:\n```json\n{\n  \"label\": \"bug\",\n  \"priority\": 4\n}\n```",
        ]),
    );
    let r = ran(env.lrg().args([
        "run",
        "--model",
        "script:s.json",
        "--output-schema",
        "triage.schema.json",
        "--output-last-message",
        "last.txt",
        "The app crashes at start.",
    ]));
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(r.stdout, "{\"label\":\"bug\",\"priority\":4}\n", "{r:?}");
    assert!(
        r.stderr
            .contains("`priority`: 9 is greater than the maximum of 5"),
        "the repair is shown on stderr: {r:?}"
    );
    assert_eq!(env.read("last.txt"), r#"{"label":"bug","priority":4}"#);
}

#[test]
fn an_answer_that_never_matches_exits_1() {
    let env = Env::new();
    env.file("triage.schema.json", SCHEMA);
    let wrong = r#"{"label": "crash", "priority": 3}"#;
    env.file("s.json", &script(&[wrong, wrong, wrong]));
    let r = ran(env.lrg().args([
        "run",
        "--model",
        "script:s.json",
        "--output-schema",
        "triage.schema.json",
        "hi",
    ]));
    assert_eq!(r.code, 1, "{r:?}");
    assert_eq!(r.stdout, "", "{r:?}");
    assert!(
        r.stderr
            .contains("the answer never matched the JSON Schema in triage.schema.json"),
        "{r:?}"
    );
    assert!(r.stderr.contains("`label`:"), "the errors: {r:?}");
    assert!(
        r.stderr.contains(&format!("its last answer: {wrong}")),
        "the last text: {r:?}"
    );
}

/// A port that refuses nothing and answers nothing: whether it was
/// contacted is read off it afterwards.
fn listener() -> (std::net::TcpListener, String) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    (listener, url)
}

#[test]
fn a_schema_file_that_cannot_be_used_exits_2_before_any_model_is_contacted() {
    let env = Env::new();
    env.file("not-json.json", "{\"type\": ");
    env.file("typo.json", r#"{"type": "strnig"}"#);
    env.file("bare.json", r#""string""#);
    for (file, problem) in [
        ("not-json.json", "not JSON"),
        ("typo.json", "not a valid JSON Schema"),
        ("bare.json", "must be a JSON object"),
        ("missing.json", "cannot read it"),
    ] {
        let (listener, url) = listener();
        let r = ran(env.lrg().args([
            "run",
            "--model",
            "server:m",
            "--base-url",
            &url,
            "--output-schema",
            file,
            "hi",
        ]));
        assert_eq!(r.code, 2, "{file}: {r:?}");
        assert!(
            r.stderr.contains(&format!("--output-schema {file}: ")) && r.stderr.contains(problem),
            "{file}: {r:?}"
        );
        assert_eq!(r.stdout, "", "{file}: {r:?}");
        match listener.accept() {
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            other => panic!("{file}: the model's server was contacted: {other:?}"),
        }
    }
    assert!(
        ran(env.lrg().args(["run", "--help"]))
            .stdout
            .contains("--output-schema <FILE>")
    );
}

#[test]
fn json_events_carry_the_json_on_the_last_assistant_turn() {
    let env = Env::new();
    env.file("triage.schema.json", SCHEMA);
    env.file(
        "s.json",
        &script(&["not JSON at all", r#"{"label": "question", "priority": 1}"#]),
    );
    let r = ran(env.lrg().args([
        "run",
        "--json",
        "--model",
        "script:s.json",
        "--output-schema",
        "triage.schema.json",
        "hi",
    ]));
    assert_eq!(r.code, 0, "{r:?}");
    // The cost summary alone.
    assert_eq!(r.stderr.lines().count(), 1, "{r:?}");
    assert!(
        r.stderr.starts_with("lrg: ") && r.stderr.contains(" tokens ("),
        "{r:?}"
    );
    let events: Vec<Value> = r
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(events[0]["type"], "lrg_events");
    let turns: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "assistant_turn")
        .collect();
    assert_eq!(turns.len(), 1, "{}", r.stdout);
    assert_eq!(
        turns[0]["json"],
        json!({"label": "question", "priority": 1})
    );
    let warning = events.iter().find(|e| e["type"] == "warning").unwrap();
    assert_eq!(warning["retrying"], true);
    // The events, and nothing else: no bare JSON line.
    assert!(
        events.iter().all(|e| e.get("type").is_some()),
        "{}",
        r.stdout
    );
}
