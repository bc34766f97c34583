//! `bench-report`: turns criterion's output into `benches/RESULTS.md`.
//! `benches/run.sh` runs each bench with its own `CRITERION_HOME`
//! (`DIR/<bench>/`) and then calls
//! `bench-report DIR OUT.md HEADER-LINES...`.
//!
//! Per figure it writes the mean time, the throughput when the bench declares
//! one, and the ratio to its group's baseline in the same run: the figure
//! whose name starts with `baseline` or `floor` (per byte or element when both
//! declare a throughput), or a baseline named in [`BASELINES`]. A bench that
//! is no criterion bench (`chats`) writes its own table to
//! `$CRITERION_HOME/summary.md`, which is copied in.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde_json::Value;

/// A markdown table a bench writes into its `CRITERION_HOME` instead of (or
/// beside) criterion's figures; copied into the bench's section as it is.
const SUMMARY: &str = "summary.md";

/// Groups whose baseline does not follow the naming rule: (group, figure).
const BASELINES: &[(&str, &str)] = &[("ttft_4000_token_conversation", "turn_1_cold_cache")];

struct Figure {
    group: String,
    function: String,
    mean_ns: f64,
    /// ("Bytes" | "Elements" | ..., amount per iteration)
    throughput: Option<(String, f64)>,
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, dir, out, header @ ..] = args.as_slice() else {
        eprintln!("usage: bench-report CRITERION_DIR OUT.md [HEADER-LINE...]");
        std::process::exit(2);
    };
    let dir = PathBuf::from(dir);
    let mut md = String::from(
        "# Benchmark results\n\nWritten by `benches/run.sh`; do not edit by hand. Ratios compare \
         figures of the same run (per byte or element when both have a throughput), so they are \
         worth more than absolute times on a loaded machine.\n\n",
    );
    for line in header {
        let _ = writeln!(md, "- {line}");
    }
    let mut benches: Vec<PathBuf> = read_dir(&dir).into_iter().filter(|p| p.is_dir()).collect();
    benches.sort();
    for bench in benches {
        let name = bench
            .file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_default();
        let mut figures = Vec::new();
        collect(&bench, &mut figures);
        let _ = writeln!(md, "\n## {name}\n");
        // A bench binary that is not criterion's leaves its own table.
        let summary = std::fs::read_to_string(bench.join(SUMMARY)).ok();
        if let Some(summary) = &summary {
            let _ = writeln!(md, "{}\n", summary.trim_end());
        }
        if figures.is_empty() && summary.is_some() {
            continue;
        }
        if figures.is_empty() {
            let _ = writeln!(
                md,
                "No figures (the bench failed or was skipped; see the run's log)."
            );
            continue;
        }
        md.push_str("| group | figure | mean | throughput | vs baseline |\n| --- | --- | ---: | ---: | ---: |\n");
        let mut groups: BTreeMap<String, Vec<Figure>> = BTreeMap::new();
        for f in figures {
            groups.entry(f.group.clone()).or_default().push(f);
        }
        for (group, mut figs) in groups {
            figs.sort_by(|a, b| a.function.cmp(&b.function));
            let baseline = figs
                .iter()
                .find(|f| BASELINES.contains(&(group.as_str(), f.function.as_str())))
                .or_else(|| {
                    figs.iter().find(|f| {
                        f.function.starts_with("baseline") || f.function.starts_with("floor")
                    })
                })
                .map(|f| (f.function.clone(), f.mean_ns, f.throughput.clone()));
            for f in &figs {
                let ratio = match &baseline {
                    Some((name, _, _)) if *name == f.function => "baseline".to_string(),
                    Some((name, base_ns, base_tp)) => {
                        let per = |ns: f64, tp: &Option<(String, f64)>| match tp {
                            Some((_, n)) if *n > 0.0 => ns / n,
                            _ => ns,
                        };
                        let same_kind = matches!((&f.throughput, base_tp), (Some((a, _)), Some((b, _))) if a == b);
                        let r = if same_kind {
                            per(f.mean_ns, &f.throughput) / per(*base_ns, base_tp)
                        } else {
                            f.mean_ns / base_ns
                        };
                        format!("{r:.2}× {name}")
                    }
                    None => "—".to_string(),
                };
                let _ = writeln!(
                    md,
                    "| {group} | {} | {} | {} | {ratio} |",
                    f.function,
                    time(f.mean_ns),
                    rate(f)
                );
            }
        }
    }
    if let Err(e) = std::fs::write(out, md) {
        eprintln!("bench-report: cannot write {out}: {e}");
        std::process::exit(1);
    }
}

fn read_dir(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .map(|rd| rd.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default()
}

/// Every `new/benchmark.json` + `new/estimates.json` pair under `dir`.
fn collect(dir: &Path, out: &mut Vec<Figure>) {
    for path in read_dir(dir) {
        if !path.is_dir() {
            continue;
        }
        if path.file_name().is_some_and(|n| n == "new") {
            if let Some(f) = figure(&path) {
                out.push(f);
            }
        } else if path
            .file_name()
            .is_some_and(|n| n != "report" && n != "base" && n != "change")
        {
            collect(&path, out);
        }
    }
}

fn json(path: &Path) -> Option<Value> {
    serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()
}

fn figure(new: &Path) -> Option<Figure> {
    let bench = json(&new.join("benchmark.json"))?;
    let estimates = json(&new.join("estimates.json"))?;
    let mut function = bench["function_id"].as_str().unwrap_or("").to_string();
    if let Some(v) = bench["value_str"].as_str() {
        function = format!("{function}/{v}");
    }
    let throughput = bench["throughput"].as_object().and_then(|t| {
        let (kind, n) = t.iter().next()?;
        Some((kind.clone(), n.as_f64()?))
    });
    Some(Figure {
        group: bench["group_id"].as_str().unwrap_or("").to_string(),
        function,
        mean_ns: estimates["mean"]["point_estimate"].as_f64()?,
        throughput,
    })
}

fn time(ns: f64) -> String {
    match ns {
        n if n >= 1e9 => format!("{:.2} s", n / 1e9),
        n if n >= 1e6 => format!("{:.2} ms", n / 1e6),
        n if n >= 1e3 => format!("{:.2} µs", n / 1e3),
        n => format!("{n:.1} ns"),
    }
}

fn rate(f: &Figure) -> String {
    match &f.throughput {
        Some((kind, n)) if kind.starts_with("Bytes") => {
            format!("{:.1} MB/s", n / f.mean_ns * 1e9 / 1e6)
        }
        Some((_, n)) => format!("{:.2} M/s", n / f.mean_ns * 1e9 / 1e6),
        None => String::new(),
    }
}
