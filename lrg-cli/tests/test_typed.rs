//! `lrg test` with typed cases: `[output] schema = "FILE"` sends the case's
//! last message typed (its answer repaired until it matches, or the case
//! fails with the schema's errors), and a schema file that is missing, not
//! JSON or not a usable JSON Schema fails the load, named with its line.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::{Env, ran};
use serde_json::Value;

const TRIAGE_SCHEMA: &str = r#"{
  "type": "object",
  "properties": {
    "label": {"enum": ["bug", "feature"]},
    "priority": {"type": "integer", "minimum": 1, "maximum": 5}
  },
  "required": ["label", "priority"]
}"#;

/// A valid answer at once.
const VALID: &str = r#"[{"text": "{\"label\": \"bug\", \"priority\": 2}"}]"#;
/// An invalid answer, then (asked to repair it) a valid one.
const REPAIRED: &str = r#"[
  {"text": "{\"label\": \"bug\", \"priority\": 9}"},
  {"text": "{\"label\": \"bug\", \"priority\": 5}"}
]"#;
/// Never valid: the first answer and both repairs.
const NEVER: &str = r#"[
  {"text": "{\"label\": \"bug\", \"priority\": 7}"},
  {"text": "{\"label\": \"bug\", \"priority\": 7}"},
  {"text": "{\"label\": \"bug\", \"priority\": 7}"}
]"#;
/// Prose to a first plain message, then a valid typed answer.
const PROSE_THEN_VALID: &str = r#"[
  {"text": "Hello! Send me the issue."},
  {"text": "```json\n{\"label\": \"feature\", \"priority\": 3}\n```"}
]"#;

const CASES: &str = r#"
[output]
schema = "schemas/triage.schema.json"

[[cases]]
name = "pass: a valid answer"
model = "script:valid.json"
message = "Triage: the app crashes on Save"
expect.reply.schema = { type = "object", properties = { priority = { const = 2 } } }

[[cases]]
name = "pass: an invalid answer, repaired"
model = "script:repaired.json"
message = "Triage: the app crashes on Save"
expect = { max_turns = 1, reply.contains = "\"priority\": 5" }

[[cases]]
name = "pass: only the last message is typed"
model = "script:prose.json"
messages = ["hi", "Triage: dark mode, please"]
expect.reply.contains = "feature"

[[cases]]
name = "fail: never valid"
model = "script:never.json"
message = "Triage: the app crashes on Save"
"#;

fn write_scripts(env: &Env) {
    std::fs::create_dir_all(env.path("schemas")).unwrap();
    env.file("schemas/triage.schema.json", TRIAGE_SCHEMA);
    env.file("valid.json", VALID);
    env.file("repaired.json", REPAIRED);
    env.file("never.json", NEVER);
    env.file("prose.json", PROSE_THEN_VALID);
}

#[test]
fn typed_cases_pass_with_a_valid_answer_and_fail_with_the_schema_errors() {
    let env = Env::new();
    write_scripts(&env);
    env.file("typed.test.toml", CASES);
    let r = ran(env.lrg().args(["test", "--json", "typed.test.toml"]));
    assert_eq!(r.code, 1, "one case fails: {r:?}");
    let results: Value = serde_json::from_str(&r.stdout).unwrap();
    let cases = results["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 4, "{results:#}");
    for case in cases {
        let name = case["name"].as_str().unwrap();
        let want = if name.starts_with("pass:") {
            "passed"
        } else {
            "failed"
        };
        assert_eq!(case["status"], want, "{name}: {case:#}\n{r:?}");
    }

    // The failure says the answer never matched, with the schema's errors.
    let r = ran(env
        .lrg()
        .args(["test", "typed.test.toml", "--filter", "never valid"]));
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stdout.contains("FAIL  fail: never valid"), "{r:?}");
    assert!(r.stdout.contains("expected: exit status 0"), "{r:?}");
    assert!(
        r.stdout
            .contains("the answer does not match its JSON Schema: `priority`: 7 is greater than the maximum of 5"),
        "{r:?}"
    );
}

#[test]
fn a_case_sets_its_own_schema_over_the_files() {
    let env = Env::new();
    write_scripts(&env);
    // Priority 2 is over this schema's maximum: the case's own schema is
    // the one its answer is held to.
    env.file(
        "low.schema.json",
        r#"{"type": "object", "properties": {"priority": {"maximum": 1}}, "required": ["priority"]}"#,
    );
    let two = r#"{"text": "{\"label\": \"bug\", \"priority\": 2}"}"#;
    env.file("twos.json", &format!("[{two}, {two}, {two}]"));
    env.file(
        "own.test.toml",
        r#"
model = "script:twos.json"
message = "m"
output = { schema = "schemas/triage.schema.json" }

[[cases]]
name = "the file's"

[[cases]]
name = "its own"
output.schema = "low.schema.json"
"#,
    );
    let r = ran(env.lrg().args(["test", "--json", "own.test.toml"]));
    assert_eq!(r.code, 1, "{r:?}");
    let results: Value = serde_json::from_str(&r.stdout).unwrap();
    let status: Vec<(&str, &str)> = results["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["name"].as_str().unwrap(), c["status"].as_str().unwrap()))
        .collect();
    assert_eq!(status, [("the file's", "passed"), ("its own", "failed")]);
    assert!(
        r.stderr.contains("2 is greater than the maximum of 1"),
        "{r:?}"
    );
}

#[test]
fn a_bad_schema_file_fails_the_load_naming_the_file_and_the_problem() {
    let env = Env::new();
    write_scripts(&env);
    env.file("not-json.schema.json", "{\"type\": \"object\",");
    env.file("strnig.schema.json", r#"{"type": "strnig"}"#);
    env.file("true.schema.json", "true");
    env.file(
        "huge.schema.json",
        &format!(
            r#"{{"type": "object", "description": "{}"}}"#,
            "x".repeat(300 * 1024)
        ),
    );
    let cases = [
        ("missing.schema.json", "cannot read the answer schema"),
        ("not-json.schema.json", "is not JSON: EOF while parsing"),
        ("strnig.schema.json", "is not a valid JSON Schema"),
        ("true.schema.json", "must be a JSON object"),
        ("huge.schema.json", "the most taken is 262144"),
    ];
    for (schema, problem) in cases {
        // The schema key comes after another `schema` key: the line is the
        // one naming the file.
        env.file(
            "bad.test.toml",
            &format!(
                "model = \"script:valid.json\"\nmessage = \"m\"\nexpect.reply.schema = {{ type = \"object\" }}\n\n[output]\nschema = \"{schema}\"\n"
            ),
        );
        let r = ran(env.lrg().args(["test", "bad.test.toml"]));
        assert_eq!(r.code, 2, "{schema}: {r:?}");
        assert!(
            r.stderr
                .contains("bad.test.toml:6: field `output.schema`: "),
            "{schema}: {r:?}"
        );
        assert!(r.stderr.contains(schema), "{schema}: {r:?}");
        assert!(r.stderr.contains(problem), "{schema}: {problem}: {r:?}");
    }

    // In a case of several, in YAML; an unknown key beside `schema` too.
    env.file(
        "bad.test.yaml",
        "model: script:valid.json\nmessage: m\ncases:\n  - name: a\n  - name: b\n    output:\n      schema: strnig.schema.json\n",
    );
    let r = ran(env.lrg().args(["test", "bad.test.yaml"]));
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr
            .contains("bad.test.yaml:7: field `cases[1].output.schema`: "),
        "{r:?}"
    );
    assert!(r.stderr.contains("strnig"), "{r:?}");
    env.file(
        "typo.test.toml",
        "model = \"script:valid.json\"\nmessage = \"m\"\n[output]\nshema = \"x.json\"\n",
    );
    let r = ran(env.lrg().args(["test", "typo.test.toml"]));
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("unknown field `shema`"), "{r:?}");
}

#[test]
fn the_format_schema_lists_output() {
    let env = Env::new();
    let r = ran(env.lrg().args(["test", "--schema"]));
    assert_eq!(r.code, 0, "{r:?}");
    let schema: Value = serde_json::from_str(&r.stdout).unwrap();
    assert!(schema["properties"].get("output").is_some(), "{schema:#}");
}
