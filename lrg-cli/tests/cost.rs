//! Prices and budgets from the command line: `lrg prices`, a user's prices
//! file, the `lrg run` summary line, `--max-cost` / `--max-tokens-total`
//! and the totals of `lrg sessions show`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::{Env, ran};
use serde_json::Value;

const DEMO: &str = "lrg demo-server";

/// Three turns, each reporting 1,000 tokens in (400 cached) and 100 out:
/// two call a tool, the last replies.
const SCRIPT: &str = r#"[
  {"text":"Looking.","calls":[{"name":"list_notes","arguments":{}}],
   "usage":{"prompt_tokens":1000,"completion_tokens":100,"cached_prompt_tokens":400}},
  {"text":"Adding.","calls":[{"name":"add_note","arguments":{"text":"x"}}],
   "usage":{"prompt_tokens":1000,"completion_tokens":100,"cached_prompt_tokens":400}},
  {"text":"Done.",
   "usage":{"prompt_tokens":1000,"completion_tokens":100,"cached_prompt_tokens":400}}
]"#;

/// `script:s.json` at $1,000 per million in, $100 cached, $2,000 out: a
/// turn above costs 600 × 0.001 + 400 × 0.0001 + 100 × 0.002 = $0.84.
const PRICES: &str = r#"
[models."script:s.json"]
input = 1000.0
cached_input = 100.0
output = 2000.0
checked = "2026-12-02"
"#;

fn json_lines(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn of_type<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["type"] == kind).collect()
}

#[test]
fn prices_lists_the_table_and_prints_its_schema() {
    let env = Env::new();
    let list = ran(env.lrg().args(["prices"]));
    assert_eq!(list.code, 0, "{list:?}");
    insta::assert_snapshot!("prices_table", list.stdout);
    let schema = ran(env.lrg().args(["prices", "--schema"]));
    assert_eq!(schema.code, 0, "{schema:?}");
    let value: Value = serde_json::from_str(&schema.stdout).unwrap();
    assert_eq!(value["title"], "lrg prices file");
    insta::assert_snapshot!("prices_schema", schema.stdout);
}

#[test]
fn a_prices_file_overrides_and_extends_the_table() {
    let env = Env::new();
    env.file("p.toml", PRICES);
    env.file(
        "p.json",
        r#"{"models":{"openai:gpt-4.1":{"input":1.5,"output":6}}}"#,
    );
    let list = ran(env.lrg().args(["prices", "--prices", "p.toml"]));
    assert_eq!(list.code, 0, "{list:?}");
    let mine = list
        .stdout
        .lines()
        .find(|l| l.starts_with("script:s.json *"))
        .unwrap_or_else(|| panic!("{list:?}"));
    assert!(
        mine.contains("1000") && mine.contains("2026-12-02"),
        "{mine}"
    );
    assert!(
        list.stdout.contains("anthropic:claude-sonnet-4-5"),
        "{list:?}"
    );

    let json = ran(env
        .lrg()
        .env("LRG_PRICES", "p.json")
        .args(["prices", "--json"]));
    assert_eq!(json.code, 0, "{json:?}");
    let table: Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(table["models"]["openai:gpt-4.1"]["input"], 1.5);
    assert_eq!(table["models"]["openai:gpt-4.1-mini"]["input"], 0.4);

    env.file(
        "bad.toml",
        "[models.\"openai:x\"]\ninput = -2\noutput = 1\n",
    );
    let bad = ran(env.lrg().args(["prices", "--prices", "bad.toml"]));
    assert_eq!(bad.code, 2, "{bad:?}");
    assert!(
        bad.stderr.contains("bad.toml") && bad.stderr.contains("`input` is -2"),
        "{bad:?}"
    );
}

#[test]
fn run_prints_what_it_cost_on_stderr_with_and_without_json() {
    let env = Env::new();
    env.file("s.json", SCRIPT);
    env.file("p.toml", PRICES);
    let args = [
        "run",
        "--prices",
        "p.toml",
        "--model",
        "script:s.json",
        "--mcp",
        DEMO,
        "-y",
    ];
    let plain = ran(env.lrg().args(args).arg("add a note"));
    assert_eq!(plain.code, 0, "{plain:?}");
    let summary = plain.stderr.lines().last().unwrap();
    assert!(
        summary.starts_with("lrg: 3,300 tokens (3,000 in, 1,200 of them cached; 300 out), $2.52, ")
            && summary.ends_with(" s"),
        "{plain:?}"
    );
    assert!(!plain.stdout.contains("tokens"), "{plain:?}");

    let json = ran(env.lrg().args(args).args(["--json", "add a note"]));
    assert_eq!(json.code, 0, "{json:?}");
    assert!(
        json.stderr
            .lines()
            .last()
            .unwrap()
            .starts_with("lrg: 3,300 tokens"),
        "{json:?}"
    );
    let events = json_lines(&json.stdout);
    let usage = of_type(&events, "usage");
    assert_eq!(usage.len(), 3, "{json:?}");
    assert_eq!(usage[0]["cost"]["priced"], true);
    assert!((usage[0]["cost"]["usd"].as_f64().unwrap() - 0.84).abs() < 1e-9);
    assert_eq!(usage[2]["message_total"]["prompt_tokens"], 3000);
    assert_eq!(usage[2]["chat_total"]["turns"], 3);
    let end = of_type(&events, "busy")
        .into_iter()
        .find(|b| b["busy"] == false)
        .unwrap();
    assert!((end["message_total"]["cost"]["usd"].as_f64().unwrap() - 2.52).abs() < 1e-9);
    assert_eq!(end["chat_total"]["completion_tokens"], 300);
}

#[test]
fn a_local_model_costs_nothing_unless_priced() {
    let env = Env::new();
    env.file("s.json", SCRIPT);
    let free = ran(env
        .lrg()
        .args(["run", "--model", "script:s.json", "--mcp", DEMO, "-y", "go"]));
    assert_eq!(free.code, 0, "{free:?}");
    assert!(
        free.stderr.lines().last().unwrap().contains(", $0.0000, "),
        "{free:?}"
    );
}

#[test]
fn max_cost_stops_before_the_turn_that_would_pass_it() {
    let env = Env::new();
    env.file("s.json", SCRIPT);
    env.file("p.toml", PRICES);
    let r = ran(env.lrg().args([
        "run",
        "--prices",
        "p.toml",
        "--model",
        "script:s.json",
        "--mcp",
        DEMO,
        "-y",
        "--json",
        // Two turns ($0.84 each) fit, the second with its ~1,000 tokens of
        // input (about $1); a third, after $1.68, does not.
        "--max-cost",
        "2.00",
        "add a note",
    ]));
    assert_eq!(r.code, 3, "{r:?}");
    let events = json_lines(&r.stdout);
    let errors = of_type(&events, "error");
    assert_eq!(errors.len(), 1, "{r:?}");
    assert_eq!(errors[0]["kind"], "budget");
    let message = errors[0]["message"].as_str().unwrap();
    assert!(message.contains("limit of $2 per run"), "{message}");
    // Two turns ran; every call they made has its result.
    assert_eq!(of_type(&events, "usage").len(), 2, "{r:?}");
    let calls = of_type(&events, "tool_call");
    assert_eq!(calls.len(), 2, "{r:?}");
    for call in calls {
        let id = &call["call_id"];
        assert!(
            events.iter().any(|e| e["call_id"] == *id
                && (e["type"] == "tool_done" || e["type"] == "tool_skipped")),
            "{id} unanswered: {r:?}"
        );
    }
    let last = events.last().unwrap();
    assert_eq!(last["type"], "outcome");
    assert_eq!(last["outcome"], "over_budget");
    assert_eq!(last["exit_code"], 3);
    assert!(r.stderr.lines().last().unwrap().contains("$1.68"), "{r:?}");
}

#[test]
fn max_tokens_total_stops_a_run_and_sessions_show_keeps_the_totals() {
    let env = Env::new();
    env.file("s.json", SCRIPT);
    env.file("p.toml", PRICES);
    let kept = |env: &Env| {
        let mut cmd = env.lrg();
        cmd.env("XDG_DATA_HOME", env.path("data"))
            .env("USER", "tester");
        cmd
    };
    let r = ran(kept(&env).args([
        "run",
        "--prices",
        "p.toml",
        "--model",
        "script:s.json",
        "--mcp",
        DEMO,
        "-y",
        "--session",
        "k1",
        "--max-tokens-total",
        "1500",
        "go",
    ]));
    assert_eq!(r.code, 3, "{r:?}");
    assert!(r.stderr.contains("limit of 1500 tokens per run"), "{r:?}");

    let show = ran(kept(&env).args(["sessions", "show", "k1"]));
    assert_eq!(show.code, 0, "{show:?}");
    assert_eq!(
        show.stdout.lines().last().unwrap(),
        "total: 1,100 tokens (1,000 in, 400 of them cached; 100 out), $0.8400",
        "{show:?}"
    );
    let json = ran(kept(&env).args(["sessions", "show", "k1", "--json"]));
    let value: Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(value["total"]["prompt_tokens"], 1000, "{json:?}");
    assert_eq!(value["total"]["cost"]["priced"], true, "{json:?}");
}
