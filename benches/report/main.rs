//! `bench-report`: turns criterion's output into `benches/RESULTS.md`.
//! `benches/run.sh` runs each bench with its own `CRITERION_HOME`
//! (`DIR/<bench>/`) and then calls
//! `bench-report [--goals FILE] DIR OUT.md HEADER-LINES...`.
//!
//! At the top, the goals the open issues set (`benches/goals.toml`, or
//! `--goals FILE`), each judged on this run (see [`goals`]). Then per bench:
//! - per figure the mean time, the throughput when the bench declares one,
//!   and the ratio to its group's baseline in the same run: the figure whose
//!   name starts with `baseline` or `floor` (per byte or element when both
//!   declare a throughput), or a baseline named in `figures::BASELINES`;
//! - the table a bench that is no criterion bench (`chats`) writes to
//!   `$CRITERION_HOME/summary.md`, copied in;
//! - the figures a bench notes with `lrg_benches::figure_note`
//!   (`$CRITERION_HOME/notes.md`: percentiles, memory, counts), copied in.

mod figures;
mod goals;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use figures::{Figure, baseline, collect, read_dir, time};
use goals::{BenchOutput, Run};

/// A markdown table a bench writes into its `CRITERION_HOME` instead of (or
/// beside) criterion's figures; copied into the bench's section as it is.
const SUMMARY: &str = "summary.md";

/// The figures a bench notes with `lrg_benches::figure_note`, one markdown
/// bullet each; copied into the bench's section.
const NOTES: &str = lrg_benches::NOTES_FILE;

/// The goals file beside this crate's manifest.
const GOALS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/goals.toml");

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let mut goals_path = PathBuf::from(GOALS);
    if args.first().is_some_and(|a| a == "--goals") && args.len() > 1 {
        goals_path = PathBuf::from(args.remove(1));
        args.remove(0);
    }
    let [dir, out, header @ ..] = args.as_slice() else {
        eprintln!("usage: bench-report [--goals FILE] CRITERION_DIR OUT.md [HEADER-LINE...]");
        std::process::exit(2);
    };
    let dir = PathBuf::from(dir);
    let run = read_run(&dir);
    let mut md = String::from(
        "# Benchmark results\n\nWritten by `benches/run.sh`; do not edit by hand. Ratios compare \
         figures of the same run (per byte or element when both have a throughput), so they are \
         worth more than absolute times on a loaded machine.\n\n",
    );
    for line in header {
        let _ = writeln!(md, "- {line}");
    }
    md.push('\n');
    match std::fs::read_to_string(&goals_path)
        .map_err(|e| e.to_string())
        .and_then(|text| goals::parse(&text))
    {
        Ok(goals) => md.push_str(&goals::render(&goals, &run)),
        Err(e) => {
            eprintln!("bench-report: {}: {e}", goals_path.display());
            let _ = writeln!(
                md,
                "## Goals\n\nNot judged: {} could not be read: {e}",
                goals_path.display()
            );
        }
    }
    for name in run.keys() {
        bench_section(&mut md, name, &run[name], &dir.join(name));
    }
    if let Err(e) = std::fs::write(out, md) {
        eprintln!("bench-report: cannot write {out}: {e}");
        std::process::exit(1);
    }
}

/// Every bench directory under `dir`, with its figures and summary.
fn read_run(dir: &Path) -> Run {
    read_dir(dir)
        .into_iter()
        .filter(|p| p.is_dir())
        .map(|bench| {
            let name = bench
                .file_name()
                .map(|n| n.to_string_lossy().to_string())
                .unwrap_or_default();
            let mut figures = Vec::new();
            collect(&bench, &mut figures);
            let summary = std::fs::read_to_string(bench.join(SUMMARY)).ok();
            (name, BenchOutput { figures, summary })
        })
        .collect()
}

/// One bench's section: its summary, its notes, its criterion figures.
fn bench_section(md: &mut String, name: &str, out: &BenchOutput, dir: &Path) {
    let _ = writeln!(md, "\n## {name}\n");
    // A bench binary that is not criterion's leaves its own table.
    if let Some(summary) = &out.summary {
        let _ = writeln!(md, "{}\n", summary.trim_end());
    }
    let notes = std::fs::read_to_string(dir.join(NOTES)).ok();
    if let Some(notes) = notes.as_deref().filter(|n| !n.trim().is_empty()) {
        let _ = writeln!(md, "Noted by the bench:\n\n{}\n", notes.trim_end());
    }
    if out.figures.is_empty() {
        if out.summary.is_none() && notes.is_none() {
            let _ = writeln!(
                md,
                "No figures (the bench failed or was skipped; see the run's log)."
            );
        }
        return;
    }
    md.push_str(
        "| group | figure | mean | throughput | vs baseline |\n| --- | --- | ---: | ---: | ---: |\n",
    );
    let mut groups: BTreeMap<&str, Vec<&Figure>> = BTreeMap::new();
    for f in &out.figures {
        groups.entry(f.group.as_str()).or_default().push(f);
    }
    for (group, mut figs) in groups {
        figs.sort_by(|a, b| a.function.cmp(&b.function));
        let base = baseline(&figs);
        for f in &figs {
            let ratio = match base {
                Some(b) if b.function == f.function => "baseline".to_string(),
                Some(b) => format!("{:.2}× {}", f.ratio_to(b), b.function),
                None => "—".to_string(),
            };
            let _ = writeln!(
                md,
                "| {group} | {} | {} | {} | {ratio} |",
                f.function,
                time(f.mean_ns),
                f.rate()
            );
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    /// A bench's section carries its summary table, its noted figures and its
    /// criterion figures with their ratio to the group's baseline.
    #[test]
    fn a_bench_section_copies_summary_notes_and_figures() {
        let dir = tempfile::TempDir::new().unwrap();
        let bench = dir.path().join("store");
        for (function, mean) in [("baseline_copy", 10.0), ("resume", 25.0)] {
            let new = bench.join("g").join(function).join("new");
            std::fs::create_dir_all(&new).unwrap();
            let meta = serde_json::json!({"group_id": "g", "function_id": function});
            std::fs::write(new.join("benchmark.json"), meta.to_string()).unwrap();
            let est = serde_json::json!({"mean": {"point_estimate": mean * 1e6}});
            std::fs::write(new.join("estimates.json"), est.to_string()).unwrap();
        }
        std::fs::write(bench.join(SUMMARY), "| a | b |\n| --- | --- |\n| x | 1 |\n").unwrap();
        std::fs::write(bench.join(NOTES), "- jsonl: append p50 4 ms, p99 12 ms\n").unwrap();
        let skipped = dir.path().join("mlx");
        std::fs::create_dir_all(&skipped).unwrap();

        let run = read_run(dir.path());
        let mut md = String::new();
        for name in run.keys() {
            bench_section(&mut md, name, &run[name], &dir.path().join(name));
        }
        let expected = "\n## mlx\n\n\
            No figures (the bench failed or was skipped; see the run's log).\n\
            \n## store\n\n\
            | a | b |\n| --- | --- |\n| x | 1 |\n\n\
            Noted by the bench:\n\n- jsonl: append p50 4 ms, p99 12 ms\n\n\
            | group | figure | mean | throughput | vs baseline |\n| --- | --- | ---: | ---: | ---: |\n\
            | g | baseline_copy | 10.00 ms |  | baseline |\n\
            | g | resume | 25.00 ms |  | 2.50× baseline_copy |\n";
        assert_eq!(md, expected);
    }
}
