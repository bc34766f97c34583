//! `lrg test`: run scenario files as a regression suite.
//!
//! Each case runs in its own session with its own MCP processes; its
//! expectations are checked by `lrg_chat::testing`, the same code users'
//! `cargo test` suites call. Exit 0 when every case passes, 1 when any
//! fails, 2 for a bad scenario file or bad flags.

mod report;
pub(crate) mod runner;
pub(crate) mod scenario;

use futures::StreamExt as _;

use crate::cli::TestArgs;
use crate::exit::{CliError, Exit};
use crate::out;
use crate::usage;
use runner::RunOptions;

/// Whether this looks like a CI run (`CI` set to anything but empty,
/// `0` or `false`), where recordings must not be rewritten.
fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| {
        let v = v.trim().to_ascii_lowercase();
        !v.is_empty() && v != "0" && v != "false"
    })
}

/// `lrg test`.
pub async fn test(args: TestArgs) -> Result<Exit, CliError> {
    if args.schema {
        let schema = scenario::schema();
        out::line(serde_json::to_string_pretty(&schema).unwrap_or_default());
        return Ok(Exit::Replied);
    }
    if args.record && in_ci() && !args.force {
        return Err(usage!(
            "--record refuses to run under CI (CI is set): recordings are made on a developer's \
             machine and committed; pass --force to record anyway"
        ));
    }
    let repeat = args.repeat;
    let min_pass = args.min_pass.unwrap_or(repeat);
    if min_pass > repeat {
        return Err(usage!(
            "--min-pass {min_pass} is more than --repeat {repeat}"
        ));
    }
    if args.record && repeat > 1 {
        return Err(usage!(
            "--record makes one recording per case: drop --repeat"
        ));
    }
    if args.model.is_some() && !args.record {
        return Err(usage!(
            "--model only says which model --record records with"
        ));
    }

    let paths = if args.paths.is_empty() {
        vec![std::path::PathBuf::from(".")]
    } else {
        args.paths.clone()
    };
    let files = scenario::find_files(&paths).map_err(|e| usage!("{e}"))?;
    let mut cases = Vec::new();
    let mut bad = Vec::new();
    for file in &files {
        match scenario::load(file) {
            Ok(c) => cases.extend(c),
            Err(e) => bad.push(e),
        }
    }
    if !bad.is_empty() {
        let text: Vec<String> = bad.iter().map(ToString::to_string).collect();
        return Err(usage!("bad scenario file(s):\n  {}", text.join("\n  ")));
    }
    if files.is_empty() {
        return Err(usage!(
            "no scenario files found (a folder is searched for *.test.toml, *.test.yaml, *.test.yml)"
        ));
    }
    if let Some(filter) = &args.filter {
        cases.retain(|c| c.id().contains(filter.as_str()));
        if cases.is_empty() {
            return Err(usage!("no case matches --filter {filter:?}"));
        }
    }

    let options = RunOptions {
        record: args.record,
        model: args.model.clone(),
        repeat,
        min_pass,
    };
    let jobs = args.jobs.map_or_else(
        || std::thread::available_parallelism().map_or(1, |n| n.get().min(8)),
        |j| j as usize,
    );
    // Each finished case is printed at once, whole, so parallel cases never
    // interleave their lines; the report files list them in file order.
    let print = |text: String| {
        if args.json {
            eprintln!("{text}");
        } else {
            out::line(text);
        }
    };
    // Once nobody reads the output, no new case starts; the running ones
    // end as usual (their tool servers shut down), not cut off.
    let mut results: Vec<(usize, runner::CaseResult)> =
        futures::stream::iter(cases.into_iter().enumerate())
            .take_while(|_| std::future::ready(!out::stopped()))
            .map(|(i, case)| {
                let options = &options;
                async move { (i, runner::run_case(case, options).await) }
            })
            .buffer_unordered(jobs.max(1))
            .inspect(|(_, r)| print(report::human(r)))
            .collect()
            .await;
    results.sort_by_key(|(i, _)| *i);
    let results: Vec<runner::CaseResult> = results.into_iter().map(|(_, r)| r).collect();
    if out::stopped() {
        // Cut short: a summary or JUnit report of some of the cases would
        // read as the whole suite's.
        return Ok(Exit::Replied);
    }

    print(report::summary(&results));
    if let Some(path) = &args.junit {
        std::fs::write(path, report::junit(&results))
            .map_err(|e| usage!("--junit {}: {e}", path.display()))?;
    }
    if args.json {
        out::line(serde_json::to_string_pretty(&report::json(&results)).unwrap_or_default());
    }
    Ok(if results.iter().all(|r| r.passed) {
        Exit::Replied
    } else {
        Exit::Failed
    })
}
