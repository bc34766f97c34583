//! criterion's figures as `bench-report` reads them: every
//! `new/benchmark.json` + `new/estimates.json` pair under a bench's
//! `CRITERION_HOME`, and how to show and compare them.

use std::path::{Path, PathBuf};

use serde_json::Value;

/// Groups whose baseline does not follow the naming rule: (group, figure).
const BASELINES: &[(&str, &str)] = &[
    ("ttft_4000_token_conversation", "turn_1_cold_cache"),
    ("mlx_ttft_4000_token_conversation", "turn_1_cold_cache"),
];

/// One criterion figure of one run.
#[derive(Debug, Clone)]
pub struct Figure {
    pub group: String,
    /// The function id, with `/value` when the benchmark id has a parameter
    /// (`kept_estimates/32768`); the parameter alone when there is no
    /// function id (`BenchmarkId::from_parameter`).
    pub function: String,
    pub mean_ns: f64,
    /// ("Bytes" | "Elements" | ..., amount per iteration)
    pub throughput: Option<(String, f64)>,
}

impl Figure {
    /// `group/function`, as goals and tables name a figure.
    pub fn id(&self) -> String {
        format!("{}/{}", self.group, self.function)
    }

    /// Whether this figure is its group's baseline: named in [`BASELINES`],
    /// or named `baseline*` / `floor*`.
    pub fn is_named_baseline(&self) -> bool {
        BASELINES.contains(&(self.group.as_str(), self.function.as_str()))
            || self.function.starts_with("baseline")
            || self.function.starts_with("floor")
    }

    /// This figure's time over `base`'s: per byte or element when both
    /// declare the same kind of throughput, per iteration otherwise.
    pub fn ratio_to(&self, base: &Figure) -> f64 {
        let per = |f: &Figure| match &f.throughput {
            Some((_, n)) if *n > 0.0 => f.mean_ns / n,
            _ => f.mean_ns,
        };
        let same_kind = matches!(
            (&self.throughput, &base.throughput),
            (Some((a, _)), Some((b, _))) if a == b
        );
        if same_kind {
            per(self) / per(base)
        } else {
            self.mean_ns / base.mean_ns
        }
    }

    /// Bytes or elements per second, when the figure declares a throughput.
    pub fn per_second(&self) -> Option<f64> {
        match &self.throughput {
            Some((_, n)) if self.mean_ns > 0.0 => Some(n / self.mean_ns * 1e9),
            _ => None,
        }
    }

    /// The throughput column: MB/s for bytes, M/s for elements.
    pub fn rate(&self) -> String {
        match (&self.throughput, self.per_second()) {
            (Some((kind, _)), Some(per_s)) if kind.starts_with("Bytes") => {
                format!("{:.1} MB/s", per_s / 1e6)
            }
            (Some(_), Some(per_s)) => format!("{:.2} M/s", per_s / 1e6),
            _ => String::new(),
        }
    }
}

/// The baseline of one group: the first named one (see
/// [`Figure::is_named_baseline`]), a [`BASELINES`] entry first.
pub fn baseline<'a>(figs: &[&'a Figure]) -> Option<&'a Figure> {
    figs.iter()
        .find(|f| BASELINES.contains(&(f.group.as_str(), f.function.as_str())))
        .or_else(|| figs.iter().find(|f| f.is_named_baseline()))
        .copied()
}

pub fn read_dir(dir: &Path) -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| rd.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    paths.sort();
    paths
}

/// Every `new/benchmark.json` + `new/estimates.json` pair under `dir`.
pub fn collect(dir: &Path, out: &mut Vec<Figure>) {
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
    let function = bench["function_id"].as_str().unwrap_or("");
    let function = match bench["value_str"].as_str() {
        Some(v) if function.is_empty() => v.to_string(),
        Some(v) => format!("{function}/{v}"),
        None => function.to_string(),
    };
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

/// A duration in nanoseconds, in the unit that reads best.
pub fn time(ns: f64) -> String {
    match ns {
        n if n >= 1e9 => format!("{:.2} s", n / 1e9),
        n if n >= 1e6 => format!("{:.2} ms", n / 1e6),
        n if n >= 1e3 => format!("{:.2} µs", n / 1e3),
        n => format!("{n:.1} ns"),
    }
}
