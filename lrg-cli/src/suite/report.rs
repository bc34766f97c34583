//! Reporting results: for a person, as JSON, and as JUnit XML.

use std::fmt::Write as _;

use serde_json::{Value, json};

use super::runner::{Attempt, CaseResult};

/// The version of `lrg test --json`'s document; fields are only added.
pub const RESULTS_VERSION: u32 = 1;

/// A result's status word.
fn status(r: &CaseResult) -> &'static str {
    match (&r.passed, &r.problem) {
        (true, _) => "passed",
        (false, Some(Attempt::Error(_))) => "error",
        (false, _) => "failed",
    }
}

/// What went wrong, as text: each failed expectation, or the error.
pub fn explain(r: &CaseResult) -> String {
    match &r.problem {
        Some(Attempt::Failed(failures)) => failures
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("\n"),
        Some(Attempt::Error(e)) => format!("could not run: {e}"),
        Some(Attempt::Passed) | None => String::new(),
    }
}

fn runs_note(r: &CaseResult) -> String {
    if r.runs > 1 {
        format!(
            ", {}/{} runs passed ({:.0}%)",
            r.passed_runs,
            r.runs,
            f64::from(r.passed_runs) * 100.0 / f64::from(r.runs)
        )
    } else {
        String::new()
    }
}

/// One case's block for a person: a PASS/FAIL line, then the explanation.
pub fn human(r: &CaseResult) -> String {
    let word = if r.passed { "PASS" } else { "FAIL" };
    let mut out = format!(
        "{word}  {}  ({}{}, {:.2}s)",
        r.case.name,
        r.case.file.display(),
        runs_note(r),
        r.duration.as_secs_f64()
    );
    if let Some(path) = &r.recorded {
        let _ = write!(out, "\n      recorded {}", path.display());
    }
    // With --repeat, a case can pass while some runs failed: show why anyway.
    let why = explain(r);
    if !why.is_empty() && (!r.passed || r.runs > 1) {
        for line in why.lines() {
            let _ = write!(out, "\n      {line}");
        }
    }
    out
}

/// Counts: passed, failed (errors included).
pub fn counts(results: &[CaseResult]) -> (usize, usize) {
    let passed = results.iter().filter(|r| r.passed).count();
    (passed, results.len() - passed)
}

/// The closing line.
pub fn summary(results: &[CaseResult]) -> String {
    let (passed, failed) = counts(results);
    format!("{passed} passed, {failed} failed")
}

/// The `--json` document.
pub fn json(results: &[CaseResult]) -> Value {
    let (passed, failed) = counts(results);
    let cases: Vec<Value> = results
        .iter()
        .map(|r| {
            let failures: Vec<Value> = match &r.problem {
                Some(Attempt::Failed(f)) => f
                    .iter()
                    .map(|f| json!({"expected": f.expected, "found": f.found}))
                    .collect(),
                _ => Vec::new(),
            };
            let error = match &r.problem {
                Some(Attempt::Error(e)) => Value::String(e.clone()),
                _ => Value::Null,
            };
            json!({
                "file": r.case.file.display().to_string(),
                "name": r.case.name,
                "status": status(r),
                "runs": r.runs,
                "passed_runs": r.passed_runs,
                "duration_ms": u64::try_from(r.duration.as_millis()).unwrap_or(u64::MAX),
                "failures": failures,
                "error": error,
            })
        })
        .collect();
    json!({
        "type": "lrg_test_results",
        "version": RESULTS_VERSION,
        "passed": passed,
        "failed": failed,
        "cases": cases,
    })
}

/// `text` as XML character data or attribute value: escaped, and with the
/// characters XML 1.0 cannot hold replaced.
fn xml(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\t' | '\n' | '\r' => out.push(c),
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}

/// The JUnit XML report: one `<testsuite>` per scenario file, one
/// `<testcase>` per case, `<failure>` for failed expectations and `<error>`
/// for a case that could not run.
pub fn junit(results: &[CaseResult]) -> String {
    let mut files: Vec<String> = Vec::new();
    for r in results {
        let file = r.case.file.display().to_string();
        if !files.contains(&file) {
            files.push(file);
        }
    }
    let (_, failed) = counts(results);
    let errors = results.iter().filter(|r| status(r) == "error").count();
    let total: f64 = results.iter().map(|r| r.duration.as_secs_f64()).sum();
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        out,
        "<testsuites name=\"lrg test\" tests=\"{}\" failures=\"{}\" errors=\"{errors}\" time=\"{total:.3}\">",
        results.len(),
        failed - errors,
    );
    for file in &files {
        let cases: Vec<&CaseResult> = results
            .iter()
            .filter(|r| r.case.file.display().to_string() == *file)
            .collect();
        let errors = cases.iter().filter(|r| status(r) == "error").count();
        let failures = cases.iter().filter(|r| status(r) == "failed").count();
        let time: f64 = cases.iter().map(|r| r.duration.as_secs_f64()).sum();
        let _ = writeln!(
            out,
            "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{failures}\" errors=\"{errors}\" skipped=\"0\" time=\"{time:.3}\">",
            xml(file),
            cases.len(),
        );
        for r in cases {
            let _ = write!(
                out,
                "    <testcase name=\"{}\" classname=\"{}\" time=\"{:.3}\"",
                xml(&r.case.name),
                xml(file),
                r.duration.as_secs_f64()
            );
            let (tag, kind, message) = match status(r) {
                "passed" => {
                    out.push_str("/>\n");
                    continue;
                }
                "error" => ("error", "setup", "the case could not run".to_string()),
                _ => {
                    let n = match &r.problem {
                        Some(Attempt::Failed(f)) => f.len(),
                        _ => 0,
                    };
                    let mut m = format!("{n} expectation(s) failed");
                    if r.runs > 1 {
                        let _ = write!(m, "; {}/{} runs passed", r.passed_runs, r.runs);
                    }
                    ("failure", "expectation", m)
                }
            };
            let _ = writeln!(
                out,
                ">\n      <{tag} message=\"{}\" type=\"{kind}\">{}</{tag}>\n    </testcase>",
                xml(&message),
                xml(&explain(r)),
            );
        }
        out.push_str("  </testsuite>\n");
    }
    out.push_str("</testsuites>\n");
    out
}
