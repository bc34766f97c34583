//! `lrg test` as a process: every expectation kind passing and failing,
//! the bundled examples/ci suite offline, drift shown as a diff, JUnit and
//! JSON reports read back, parallel cases kept apart, bad files named with
//! line and field, and `--record` refused under CI.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::path::Path;

use common::{Env, ran, repo_root};
use serde_json::Value;

/// Scripts the cases below run on (with the demo server's notes tools).
const READ_NOTE_2: &str = r#"[
  {"text": "Reading.", "calls": [{"name": "read_note", "arguments": {"id": 2}}]},
  {"text": "Note 2: call the plumber."}
]"#;
const LIST_THEN_READ: &str = r#"[
  {"calls": [{"name": "list_notes", "arguments": {}}]},
  {"calls": [{"name": "read_note", "arguments": {"id": 1}}]},
  {"text": "```json\n{\"id\": 1, \"note\": \"oat milk\"}\n```"}
]"#;
const FAILS: &str = r#"[{"error": {"transient": false, "message": "the model broke"}}]"#;
const ADDS: &str = r#"[
  {"calls": [{"name": "add_note", "arguments": {"text": "call mum"}}]},
  {"text": "Done."}
]"#;
const TWO_MESSAGES: &str = r#"[
  {"text": "Hello."},
  {"calls": [{"name": "list_notes", "arguments": {}}]},
  {"text": "Three notes."}
]"#;

/// One file of cases, each named `pass: ...` or `fail: ...`: what it must do.
const KINDS: &str = r#"
[tools]
mcp = ["lrg demo-server"]

[[cases]]
name = "pass: call with subset args"
model = "script:read.json"
message = "m"
expect.calls = [{ tool = "read_note", args = { id = 2 } }]

[[cases]]
name = "fail: call with subset args"
model = "script:read.json"
message = "m"
expect.calls = [{ tool = "read_note", args = { id = 3 } }]

[[cases]]
name = "pass: call with equal args"
model = "script:read.json"
message = "m"
expect.calls = [{ tool = "read_note", args = { id = 2 }, match = "equal" }]

[[cases]]
name = "fail: call with equal args"
model = "script:read.json"
message = "m"
expect.calls = [{ tool = "read_note", args = {}, match = "equal" }]

[[cases]]
name = "pass: call with regex per field"
model = "script:read.json"
message = "m"
expect.calls = [{ tool = "read_note", args_regex = { id = "^2$" } }]

[[cases]]
name = "fail: call with regex per field"
model = "script:read.json"
message = "m"
expect.calls = [{ tool = "read_note", args_regex = { id = "^9$" } }]

[[cases]]
name = "pass: call with args schema"
model = "script:read.json"
message = "m"
expect.calls = [{ tool = "read_note", args_schema = { type = "object", properties = { id = { maximum = 5 } } } }]

[[cases]]
name = "fail: call with args schema"
model = "script:read.json"
message = "m"
expect.calls = [{ tool = "read_note", args_schema = { type = "object", required = ["ids"] } }]

[[cases]]
name = "pass: call times"
model = "script:read.json"
message = "m"
expect.calls = [{ tool = "read_note", times = 1 }]

[[cases]]
name = "fail: call times"
model = "script:read.json"
message = "m"
expect.calls = [{ tool = "read_note", times = 2 }]

[[cases]]
name = "fail: call of a tool never called"
model = "script:read.json"
message = "m"
expect.calls = [{ tool = "add_note" }]

[[cases]]
name = "pass: order"
model = "script:list_read.json"
message = "m"
expect.order = ["list_notes", "read_note"]

[[cases]]
name = "fail: order"
model = "script:list_read.json"
message = "m"
expect.order = ["read_note", "list_notes"]

[[cases]]
name = "pass: never called"
model = "script:read.json"
message = "m"
expect.never_called = ["delete_notes"]

[[cases]]
name = "fail: never called"
model = "script:read.json"
message = "m"
expect.never_called = ["read_note"]

[[cases]]
name = "pass: max turns"
model = "script:list_read.json"
message = "m"
expect.max_turns = 3

[[cases]]
name = "fail: max turns"
model = "script:list_read.json"
message = "m"
expect.max_turns = 2

[[cases]]
name = "pass: no error"
model = "script:read.json"
message = "m"
expect.no_error = true

[[cases]]
name = "fail: no error"
model = "script:fails.json"
message = "m"
expect = { no_error = true, exit_status = 1 }

[[cases]]
name = "pass: reply contains and not contains"
model = "script:read.json"
message = "m"
expect.reply = { contains = ["plumber", "Note 2"], not_contains = "sorry" }

[[cases]]
name = "fail: reply contains"
model = "script:read.json"
message = "m"
expect.reply.contains = "electrician"

[[cases]]
name = "fail: reply not contains"
model = "script:read.json"
message = "m"
expect.reply.not_contains = "plumber"

[[cases]]
name = "pass: reply regex"
model = "script:read.json"
message = "m"
expect.reply.regex = "^Note [0-9]+:"

[[cases]]
name = "fail: reply regex"
model = "script:read.json"
message = "m"
expect.reply.regex = "^Sorry"

[[cases]]
name = "pass: reply schema"
model = "script:list_read.json"
message = "m"
expect.reply.schema = { type = "object", required = ["id", "note"], properties = { id = { const = 1 } } }

[[cases]]
name = "fail: reply schema"
model = "script:list_read.json"
message = "m"
expect.reply.schema = { type = "object", required = ["title"] }

[[cases]]
name = "fail: reply schema on a reply that is not JSON"
model = "script:read.json"
message = "m"
expect.reply.schema = { type = "object" }

[[cases]]
name = "pass: approval asked and answered"
model = "script:adds.json"
message = "m"
permissions = { mode = "auto_read", approvals = [{ tool = "add_note", answer = "deny", note = "not now" }] }
expect = { approval_asked = ["add_note"], calls = [{ tool = "add_note", args = { text = "call mum" } }] }

[[cases]]
name = "fail: approval asked"
model = "script:read.json"
message = "m"
expect.approval_asked = ["read_note"]

[[cases]]
name = "pass: exit status"
model = "script:list_read.json"
message = "m"
max_steps = 1
expect.exit_status = 3

[[cases]]
name = "fail: exit status"
model = "script:fails.json"
message = "m"

[[cases]]
name = "pass: several messages"
model = "script:two.json"
messages = ["hi", "and my notes?"]
expect = { calls = [{ tool = "list_notes" }], max_turns = 3, reply.contains = "Three" }
"#;

fn write_scripts(env: &Env) {
    env.file("read.json", READ_NOTE_2);
    env.file("list_read.json", LIST_THEN_READ);
    env.file("fails.json", FAILS);
    env.file("adds.json", ADDS);
    env.file("two.json", TWO_MESSAGES);
}

fn json_results(stdout: &str) -> Value {
    serde_json::from_str(stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

#[test]
fn every_expectation_kind_passes_and_fails() {
    let env = Env::new();
    write_scripts(&env);
    env.file("kinds.test.toml", KINDS);
    let r = ran(env
        .lrg()
        .args(["test", "--json", "-j", "4", "kinds.test.toml"]));
    assert_eq!(r.code, 1, "{r:?}");
    let results = json_results(&r.stdout);
    let cases = results["cases"].as_array().unwrap();
    assert_eq!(cases.len(), KINDS.matches("[[cases]]").count());
    for case in cases {
        let name = case["name"].as_str().unwrap();
        let want = if name.starts_with("pass:") {
            "passed"
        } else {
            "failed"
        };
        assert_eq!(case["status"], want, "{name}: {case:#}\n{r:?}");
        if want == "failed" {
            let failures = case["failures"].as_array().unwrap();
            assert!(!failures.is_empty(), "{name}: {case:#}");
            for f in failures {
                assert!(!f["expected"].as_str().unwrap().is_empty(), "{f}");
                assert!(!f["found"].as_str().unwrap().is_empty(), "{f}");
            }
        }
    }
    let failed = cases.iter().filter(|c| c["status"] == "failed").count();
    assert_eq!(results["failed"], failed);
    assert_eq!(results["passed"], cases.len() - failed);
    // The human report went to stderr, ending in the counts.
    assert!(
        r.stderr
            .contains(&format!("{} passed, {failed} failed", cases.len() - failed)),
        "{r:?}"
    );
}

#[test]
fn a_failure_says_what_was_expected_and_what_happened() {
    let env = Env::new();
    write_scripts(&env);
    env.file("kinds.test.toml", KINDS);
    let r = ran(env.lrg().args([
        "test",
        "kinds.test.toml",
        "--filter",
        "fail: call with subset args",
    ]));
    assert_eq!(r.code, 1, "{r:?}");
    assert!(
        r.stdout.contains("FAIL  fail: call with subset args"),
        "{r:?}"
    );
    assert!(
        r.stdout
            .contains(r#"expected: `read_note` called, with arguments including {"id":3}"#),
        "{r:?}"
    );
    assert!(
        r.stdout
            .contains(r#"read_note {"id":2} (arguments differ)"#),
        "{r:?}"
    );
    assert!(r.stdout.contains("0 passed, 1 failed"), "{r:?}");
    // The denial note of an approval answer reaches the events shown.
    let r = ran(env.lrg().args([
        "test",
        "kinds.test.toml",
        "--filter",
        "fail: approval asked",
    ]));
    assert!(r.stdout.contains("no approval was asked"), "{r:?}");
}

/// A copy of examples/ci in `env`, so a test may change it.
fn copy_examples(env: &Env) -> std::path::PathBuf {
    let to = env.path("ci");
    copy_dir(&repo_root().join("examples/ci"), &to);
    to
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

#[test]
fn the_bundled_suite_passes_offline_and_writes_junit() {
    let env = Env::new();
    let ci = repo_root().join("examples/ci");
    let r = ran(env.lrg().args(["test", "--junit", "junit.xml"]).arg(&ci));
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("3 passed, 0 failed"), "{r:?}");
    let xml = env.read("junit.xml");
    let doc = roxmltree::Document::parse(&xml).unwrap();
    let root = doc.root_element();
    assert_eq!(root.tag_name().name(), "testsuites");
    assert_eq!(root.attribute("tests"), Some("3"));
    assert_eq!(root.attribute("failures"), Some("0"));
    assert_eq!(root.attribute("errors"), Some("0"));
    let suites: Vec<_> = root.children().filter(|n| n.is_element()).collect();
    assert_eq!(suites.len(), 2, "{xml}");
    let names: Vec<&str> = doc
        .descendants()
        .filter(|n| n.has_tag_name("testcase"))
        .map(|n| n.attribute("name").unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "tidies up with approvals",
            "lists the notes",
            "reads one note as JSON"
        ]
    );
    assert!(!xml.contains("<failure"), "{xml}");
}

#[test]
fn a_changed_tool_description_fails_with_a_diff() {
    let env = Env::new();
    let ci = copy_examples(&env);
    // The recording was made when list_notes had another description: the
    // same as the demo server's description having changed since.
    let recording = ci.join("recordings/lists-notes.json");
    let text = std::fs::read_to_string(&recording).unwrap();
    assert!(text.contains("List every note with its id"));
    std::fs::write(
        &recording,
        text.replace("List every note with its id", "List all notes"),
    )
    .unwrap();
    let r = ran(env.lrg().args(["test", "--junit", "junit.xml", "ci"]));
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stdout.contains("FAIL  lists the notes"), "{r:?}");
    assert!(r.stdout.contains("2 passed, 1 failed"), "{r:?}");
    assert!(
        r.stdout.contains("request 1 differs from the recorded one"),
        "{r:?}"
    );
    assert!(
        r.stdout
            .contains(r#"-      "description": "List all notes","#),
        "{r:?}"
    );
    assert!(
        r.stdout
            .contains(r#"+      "description": "List every note with its id","#),
        "{r:?}"
    );
    // Drift is reported alone, not followed by what it caused.
    assert_eq!(r.stdout.matches("expected:").count(), 1, "{r:?}");

    let xml = env.read("junit.xml");
    let doc = roxmltree::Document::parse(&xml).unwrap();
    let failure = doc
        .descendants()
        .find(|n| n.has_tag_name("failure"))
        .unwrap();
    assert_eq!(
        failure.parent().unwrap().attribute("name"),
        Some("lists the notes")
    );
    assert!(
        failure
            .text()
            .unwrap()
            .contains(r#"+      "description": "List every note with its id","#)
    );
    assert_eq!(doc.root_element().attribute("failures"), Some("1"));
}

#[test]
fn parallel_cases_keep_their_own_events() {
    let env = Env::new();
    let mut file = String::from("[tools]\nmcp = [\"lrg demo-server\"]\n");
    for n in 1..=8 {
        env.file(
            &format!("s{n}.json"),
            &format!(
                r#"[{{"calls": [{{"name": "add_note", "arguments": {{"text": "case {n}"}}}}]}},
                    {{"calls": [{{"name": "read_note", "arguments": {{"id": {n}}}}}]}},
                    {{"text": "case {n} done"}}]"#
            ),
        );
        file.push_str(&format!(
            r#"
[[cases]]
name = "case {n}"
model = "script:s{n}.json"
message = "message {n}"
permissions = {{ mode = "auto_safe" }}
expect.calls = [
  {{ tool = "add_note", args = {{ text = "case {n}" }}, times = 1 }},
  {{ tool = "read_note", args = {{ id = {n} }}, times = 1 }},
]
expect.max_turns = 3
expect.reply = {{ regex = "^case {n} done$" }}
"#
        ));
    }
    env.file("many.test.toml", &file);
    let r = ran(env
        .lrg()
        .args(["test", "--jobs", "8", "--json", "many.test.toml"]));
    assert_eq!(r.code, 0, "{r:?}");
    let results = json_results(&r.stdout);
    assert_eq!(results["passed"], 8, "{r:?}");
    // Reports list cases in file order, whatever order they finished in.
    let names: Vec<String> = results["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap().to_string())
        .collect();
    let want: Vec<String> = (1..=8).map(|n| format!("case {n}")).collect();
    assert_eq!(names, want);
}

#[test]
fn a_bad_file_is_named_with_line_and_field() {
    let env = Env::new();
    env.file("s.json", READ_NOTE_2);
    env.file(
        "bad.test.toml",
        "model = \"script:s.json\"\nmessage = \"m\"\n\n[expect]\nmax_turns = \"two\"\n",
    );
    let r = ran(env.lrg().args(["test", "bad.test.toml"]));
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr
            .contains("bad.test.toml:5: field `expect.max_turns`"),
        "{r:?}"
    );

    env.file(
        "bad.test.yaml",
        "model: script:s.json\nmessage: m\ncases:\n  - name: a\n    expect:\n      calls:\n        - tool: read_note\n          argz: {}\n",
    );
    let r = ran(env.lrg().args(["test", "bad.test.yaml"]));
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr
            .contains("bad.test.yaml:8: field `cases[0].expect.calls[0].argz`"),
        "{r:?}"
    );
    assert!(r.stderr.contains("unknown field `argz`"), "{r:?}");

    // A bad regex is found after parsing; the line is the key's.
    env.file(
        "regex.test.toml",
        "model = \"script:s.json\"\nmessage = \"m\"\n[expect.reply]\nregex = \"(unclosed\"\n",
    );
    let r = ran(env.lrg().args(["test", "regex.test.toml"]));
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr
            .contains("regex.test.toml:4: field `expect.reply.regex`"),
        "{r:?}"
    );

    // A file that is not even TOML.
    env.file("broken.test.toml", "model = \"x\nmessage = 1\n");
    let r = ran(env.lrg().args(["test", "broken.test.toml"]));
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("broken.test.toml:1:"), "{r:?}");

    // Missing pieces are named too.
    env.file("empty.test.toml", "model = \"script:s.json\"\n");
    let r = ran(env.lrg().args(["test", "empty.test.toml"]));
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr.contains("empty.test.toml: field `message`"),
        "{r:?}"
    );
}

#[test]
fn record_is_refused_under_ci_unless_forced() {
    let env = Env::new();
    let ci = copy_examples(&env);
    let recording = ci.join("recordings/lists-notes.json");
    let before = std::fs::read_to_string(&recording).unwrap();
    let r = ran(env.lrg().env("CI", "true").args(["test", "--record", "ci"]));
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr.contains("--record refuses to run under CI"),
        "{r:?}"
    );
    assert!(r.stderr.contains("--force"), "{r:?}");
    assert_eq!(std::fs::read_to_string(&recording).unwrap(), before);

    // Forced: the recordings are made again, the same as the committed ones
    // but for where the scripts were found.
    std::fs::remove_file(&recording).unwrap();
    let r = ran(env
        .lrg()
        .env("CI", "true")
        .args(["test", "--record", "--force", "ci"]));
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stdout.contains("recorded ci/recordings/lists-notes.json"),
        "{r:?}"
    );
    let after = std::fs::read_to_string(&recording).unwrap();
    assert_eq!(
        after.replace("\"ci/scripts/", "\"examples/ci/scripts/"),
        before
    );
    assert!(!after.to_lowercase().contains("api_key"), "{after}");
    // And they replay.
    let r = ran(env.lrg().args(["test", "ci"]));
    assert_eq!(r.code, 0, "{r:?}");
}

#[test]
fn a_missing_recording_is_an_error_in_the_reports() {
    let env = Env::new();
    env.file(
        "gone.test.toml",
        "recording = \"nowhere.json\"\nmessage = \"m\"\n",
    );
    let r = ran(env
        .lrg()
        .args(["test", "--junit", "j.xml", "gone.test.toml"]));
    assert_eq!(r.code, 1, "{r:?}");
    assert!(
        r.stdout.contains("make it with `lrg test --record`"),
        "{r:?}"
    );
    let xml = env.read("j.xml");
    let doc = roxmltree::Document::parse(&xml).unwrap();
    assert_eq!(doc.root_element().attribute("errors"), Some("1"));
    assert!(doc.descendants().any(|n| n.has_tag_name("error")), "{xml}");
}

#[test]
fn repeat_prints_the_pass_rate_and_min_pass_is_checked() {
    let env = Env::new();
    write_scripts(&env);
    env.file(
        "r.test.toml",
        "model = \"script:read.json\"\nmessage = \"m\"\n[tools]\nmcp = [\"lrg demo-server\"]\n",
    );
    let r = ran(env.lrg().args(["test", "--repeat", "3", "r.test.toml"]));
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("3/3 runs passed (100%)"), "{r:?}");
    let r = ran(env
        .lrg()
        .args(["test", "--repeat", "2", "--min-pass", "3", "r.test.toml"]));
    assert_eq!(r.code, 2, "{r:?}");
}

#[test]
fn schema_describes_the_format_and_help_lists_the_flags() {
    let env = Env::new();
    let r = ran(env.lrg().args(["test", "--schema"]));
    assert_eq!(r.code, 0, "{r:?}");
    let schema: Value = serde_json::from_str(&r.stdout).unwrap();
    let props = &schema["properties"];
    for key in [
        "model",
        "recording",
        "tools",
        "permissions",
        "messages",
        "expect",
        "cases",
    ] {
        assert!(props.get(key).is_some(), "{key}: {schema:#}");
    }
    let r = ran(env.lrg().args(["test", "--help"]));
    assert_eq!(r.code, 0, "{r:?}");
    insta::assert_snapshot!("test_help", r.stdout);
}

#[test]
fn no_files_and_an_unmatched_filter_are_usage_errors() {
    let env = Env::new();
    let r = ran(env.lrg().args(["test"]));
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("no scenario files found"), "{r:?}");
    env.file("s.json", READ_NOTE_2);
    env.file(
        "a.test.toml",
        "model = \"script:s.json\"\nmessage = \"m\"\n",
    );
    let r = ran(env.lrg().args(["test", "--filter", "zzz"]));
    assert_eq!(r.code, 2, "{r:?}");
    // A folder finds *.test.toml (not other TOML files).
    env.file("Cargo.toml", "[package]\n");
    let r = ran(env.lrg().args(["test", "."]));
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("PASS  a  ("), "{r:?}");
}

#[test]
fn tools_from_an_mcp_servers_file_beside_the_scenario() {
    let env = Env::new();
    std::fs::create_dir_all(env.path("suite")).unwrap();
    env.file("suite/read.json", READ_NOTE_2);
    let config = serde_json::json!({
        "mcpServers": {"notes": {"command": env!("CARGO_BIN_EXE_lrg"), "args": ["demo-server"]}}
    });
    env.file("suite/servers.json", &config.to_string());
    env.file(
        "suite/cfg.test.yaml",
        "model: script:read.json\nmessage: m\ntools:\n  mcp_config: servers.json\nexpect:\n  calls:\n    - tool: read_note\n  reply:\n    contains: plumber\n",
    );
    let r = ran(env.lrg().args(["test", "suite"]));
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stdout.contains("PASS  cfg  (suite/cfg.test.yaml"),
        "{r:?}"
    );
}

#[test]
fn record_with_another_model_and_model_needs_record() {
    let env = Env::new();
    write_scripts(&env);
    env.file(
        "r.test.toml",
        "model = \"replay:rec.json\"\nrecording = \"rec.json\"\nmessage = \"m\"\n[tools]\nmcp = [\"lrg demo-server\"]\n[expect]\ncalls = [{ tool = \"read_note\", args = { id = 2 } }]\n",
    );
    // A replay cannot record itself.
    let r = ran(env.lrg().args(["test", "--record", "r.test.toml"]));
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stdout.contains("--record needs a real model"), "{r:?}");
    // --model names the model to record with.
    let r = ran(env.lrg().args([
        "test",
        "--record",
        "--model",
        "script:read.json",
        "r.test.toml",
    ]));
    assert_eq!(r.code, 0, "{r:?}");
    let recording: Value = serde_json::from_str(&env.read("rec.json")).unwrap();
    assert_eq!(recording["exchanges"].as_array().unwrap().len(), 2);
    let r = ran(env.lrg().args(["test", "r.test.toml"]));
    assert_eq!(r.code, 0, "{r:?}");
    // Outside --record, --model is a usage error.
    let r = ran(env
        .lrg()
        .args(["test", "--model", "script:read.json", "r.test.toml"]));
    assert_eq!(r.code, 2, "{r:?}");
}
