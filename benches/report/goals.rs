//! The goals the open issues set, judged against one run: read from
//! `benches/goals.toml` and written as the "Goals" section at the top of
//! `RESULTS.md`, one row per goal: the figure, the goal, what this run
//! measured, and met / NOT met (with the goal's `why_not`) / not measured in
//! this run.
//!
//! A goal names its figure one of two ways:
//! - `figure = "group/function"`, a criterion figure (`*` matches any run of
//!   characters, so one goal can cover every chunking or every format; each
//!   match is judged and the worst is shown), bounded by `max` (its mean
//!   time), by `vs` + `max_ratio` (its time over another figure's, per byte
//!   or element when both declare a throughput; with a list, over the fastest
//!   of them), or by `min_per_s` (its throughput);
//! - `summary = "row"`, a row of the table a bench writes to its
//!   `summary.md` (the `chats` bench), bounded by `max`: every value in the
//!   row's cells, column by column.
//!
//! A goal with no bound is shown as measured, without a verdict.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Deserialize;

use crate::figures::{Figure, time};

/// What one bench left in its `CRITERION_HOME`.
#[derive(Debug, Default)]
pub struct BenchOutput {
    pub figures: Vec<Figure>,
    /// Its own markdown table (`summary.md`), if it writes one.
    pub summary: Option<String>,
}

/// Every bench of the run, by name.
pub type Run = BTreeMap<String, BenchOutput>;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct GoalsFile {
    goal: Vec<RawGoal>,
}

/// One `[[goal]]` as written; [`Goal`] once checked.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawGoal {
    issue: u32,
    what: String,
    bench: String,
    figure: Option<String>,
    summary: Option<String>,
    max: Option<String>,
    vs: Option<OneOrMany>,
    max_ratio: Option<f64>,
    min_per_s: Option<f64>,
    goal: Option<String>,
    why_not: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

/// Where a goal's figure comes from.
#[derive(Debug, Clone, PartialEq)]
enum Source {
    /// A criterion figure, `group/function`, with `*` wildcards.
    Figure(String),
    /// A row of the bench's `summary.md` table, by its first cell.
    Summary(String),
}

/// What a goal asks of its figure.
#[derive(Debug, Clone, PartialEq)]
enum Bound {
    /// At most this (a time for a criterion figure), and the bound as
    /// written in the file.
    Max(Quantity, String),
    /// Over the fastest of `vs` (same group unless they name one) at most `max`.
    Ratio { vs: Vec<String>, max: f64 },
    /// At least this many bytes or elements per second.
    MinPerSecond(f64),
    /// No bound: shown as measured.
    None,
}

/// One goal, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct Goal {
    issue: u32,
    what: String,
    bench: String,
    source: Source,
    bound: Bound,
    /// The goal in words, when the bound alone does not say it.
    goal_text: Option<String>,
    why_not: Option<String>,
}

/// Reads the goals file; an error names the goal and what is wrong with it.
pub fn parse(text: &str) -> Result<Vec<Goal>, String> {
    let file: GoalsFile = toml::from_str(text).map_err(|e| e.to_string())?;
    file.goal
        .into_iter()
        .enumerate()
        .map(|(i, raw)| {
            let name = format!("goal {} (issue {}: {})", i + 1, raw.issue, raw.what);
            check(raw).map_err(|e| format!("{name}: {e}"))
        })
        .collect()
}

fn check(raw: RawGoal) -> Result<Goal, String> {
    let source = match (raw.figure, raw.summary) {
        (Some(f), None) if f.contains('/') => Source::Figure(f),
        (Some(f), None) => return Err(format!("figure `{f}` is not `group/function`")),
        (None, Some(row)) => Source::Summary(row),
        _ => return Err("give exactly one of `figure` and `summary`".into()),
    };
    let max = raw
        .max
        .as_deref()
        .map(|m| Quantity::parse(m).ok_or_else(|| format!("cannot read max = \"{m}\"")))
        .transpose()?;
    let vs = raw.vs.map(|v| match v {
        OneOrMany::One(s) => vec![s],
        OneOrMany::Many(v) => v,
    });
    let bound = match (max, vs, raw.max_ratio, raw.min_per_s) {
        (Some(q), None, None, None) => {
            if matches!(source, Source::Figure(_)) && q.unit != Unit::Nanoseconds {
                return Err("a criterion figure's `max` is a time (e.g. \"10 µs\")".into());
            }
            Bound::Max(q, raw.max.unwrap_or_default())
        }
        (None, Some(vs), Some(max), None) if !vs.is_empty() => Bound::Ratio { vs, max },
        (None, None, None, Some(n)) => Bound::MinPerSecond(n),
        (None, None, None, None) => Bound::None,
        _ => {
            return Err(
                "give one bound: `max`, `vs` with `max_ratio`, or `min_per_s` (or none)".into(),
            );
        }
    };
    if matches!(source, Source::Summary(_)) && !matches!(bound, Bound::Max(..) | Bound::None) {
        return Err("a summary row takes `max` only".into());
    }
    Ok(Goal {
        issue: raw.issue,
        what: raw.what,
        bench: raw.bench,
        source,
        bound,
        goal_text: raw.goal,
        why_not: raw.why_not.filter(|w| !w.trim().is_empty()),
    })
}

/// The unit a [`Quantity`] is held in.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Unit {
    Nanoseconds,
    Bytes,
    /// A count or a ratio.
    Plain,
}

/// A number with its unit, normalized (times in ns, sizes in bytes).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Quantity {
    value: f64,
    unit: Unit,
}

impl Quantity {
    /// `"10 µs"`, `"64 KiB"`, `"0"`: one number and an optional unit.
    fn parse(s: &str) -> Option<Quantity> {
        match Quantity::all_in(s).as_slice() {
            [q] => Some(*q),
            _ => None,
        }
    }

    /// Every number in a table cell with its unit (`"12 ms / 40 ms"`,
    /// `"0 / 0 / 0"`, `"1,000"`). A number written without a unit takes the
    /// cell's next unit (`"12 / 40 ms"`).
    fn all_in(cell: &str) -> Vec<Quantity> {
        let chars: Vec<char> = cell.chars().collect();
        let mut found: Vec<(f64, Option<(f64, Unit)>)> = Vec::new();
        let mut i = 0;
        while i < chars.len() {
            let starts_number = chars[i].is_ascii_digit()
                || (chars[i] == '.' && chars.get(i + 1).is_some_and(char::is_ascii_digit));
            // A digit inside a word (`p50`, `fp16`) is no figure.
            let in_word = i > 0 && chars[i - 1].is_alphanumeric();
            if !starts_number || in_word {
                i += 1;
                continue;
            }
            let mut digits = String::new();
            while i < chars.len()
                && (chars[i].is_ascii_digit()
                    || chars[i] == '.'
                    || (chars[i] == ',' && chars.get(i + 1).is_some_and(char::is_ascii_digit)))
            {
                if chars[i] != ',' {
                    digits.push(chars[i]);
                }
                i += 1;
            }
            let mut j = i;
            while j < chars.len() && chars[j] == ' ' {
                j += 1;
            }
            let mut word = String::new();
            while j < chars.len() && (chars[j].is_alphabetic()) {
                word.push(chars[j]);
                j += 1;
            }
            let unit = unit_of(&word);
            if unit.is_some() {
                i = j;
            }
            if let Ok(value) = digits.parse::<f64>() {
                found.push((value, unit));
            }
        }
        let mut out = Vec::with_capacity(found.len());
        let mut next_unit = None;
        for (value, unit) in found.into_iter().rev() {
            if unit.is_some() {
                next_unit = unit;
            }
            let (scale, unit) = unit.or(next_unit).unwrap_or((1.0, Unit::Plain));
            out.push(Quantity {
                value: value * scale,
                unit,
            });
        }
        out.reverse();
        out
    }

    fn show(self) -> String {
        match self.unit {
            Unit::Nanoseconds => time(self.value),
            Unit::Bytes => bytes(self.value),
            Unit::Plain => format!("{}", self.value),
        }
    }
}

/// (scale to the base unit, unit) of a unit word.
fn unit_of(word: &str) -> Option<(f64, Unit)> {
    Some(match word {
        "ns" => (1.0, Unit::Nanoseconds),
        "µs" | "us" | "μs" => (1e3, Unit::Nanoseconds),
        "ms" => (1e6, Unit::Nanoseconds),
        "s" => (1e9, Unit::Nanoseconds),
        "B" => (1.0, Unit::Bytes),
        "KiB" => (1024.0, Unit::Bytes),
        "MiB" => (1024.0 * 1024.0, Unit::Bytes),
        "GiB" => (1024.0 * 1024.0 * 1024.0, Unit::Bytes),
        _ => return None,
    })
}

fn bytes(n: f64) -> String {
    match n.abs() {
        a if a >= 1024.0 * 1024.0 => format!("{:.1} MiB", n / (1024.0 * 1024.0)),
        a if a >= 1024.0 => format!("{:.1} KiB", n / 1024.0),
        _ => format!("{n:.0} B"),
    }
}

/// How a goal fared in this run.
#[derive(Debug, Clone, PartialEq)]
enum Verdict {
    Met,
    NotMet,
    /// Measured, but the goal has no bound.
    Shown,
    /// Why it could not be judged.
    NotMeasured(String),
}

/// One judged value: the figure's label within the goal (what its `*`s
/// matched, or a column's name), the value shown, and how it compares
/// (larger is worse, for picking the worst).
struct Judged {
    label: String,
    shown: String,
    badness: f64,
    ok: Option<bool>,
}

/// What `*` in `pattern` matched in `text`, if it matches as a whole.
fn glob(pattern: &str, text: &str) -> Option<Vec<String>> {
    let Some(star) = pattern.find('*') else {
        return (pattern == text).then(Vec::new);
    };
    let (head, rest) = (&pattern[..star], &pattern[star + 1..]);
    let tail = text.strip_prefix(head)?;
    // Shortest match first, so `a*b*` binds the first `*` tightly.
    tail.char_indices()
        .map(|(i, _)| i)
        .chain(std::iter::once(tail.len()))
        .find_map(|i| {
            let mut caps = glob(rest, &tail[i..])?;
            caps.insert(0, tail[..i].to_string());
            Some(caps)
        })
}

/// The figure a `vs` entry names for `f`: `group/function`, or a function
/// of `f`'s own group.
fn resolve<'a>(figures: &'a [Figure], vs: &str, f: &Figure) -> Option<&'a Figure> {
    let id = if vs.contains('/') {
        vs.to_string()
    } else {
        format!("{}/{vs}", f.group)
    };
    figures.iter().find(|g| g.id() == id)
}

fn judge_figures(goal: &Goal, pattern: &str, out: &BenchOutput) -> Result<Vec<Judged>, String> {
    let mut judged = Vec::new();
    let mut unjudged = 0;
    for f in &out.figures {
        let Some(caps) = glob(pattern, &f.id()) else {
            continue;
        };
        let label = caps.join(" · ");
        let one = match &goal.bound {
            Bound::Max(q, _) => Some(Judged {
                label,
                shown: time(f.mean_ns),
                badness: f.mean_ns,
                ok: Some(f.mean_ns <= q.value),
            }),
            Bound::None => Some(Judged {
                label,
                shown: time(f.mean_ns),
                badness: f.mean_ns,
                ok: None,
            }),
            Bound::MinPerSecond(min) => f.per_second().map(|per_s| Judged {
                label,
                shown: f.rate(),
                badness: -per_s,
                ok: Some(per_s >= *min),
            }),
            Bound::Ratio { vs, max } => {
                let bases: Vec<&Figure> = vs
                    .iter()
                    .filter_map(|v| resolve(&out.figures, v, f))
                    .collect();
                if bases.iter().any(|b| b.id() == f.id()) {
                    // A pattern that also matches the baseline.
                    continue;
                }
                // The fastest base is the one this figure compares worst to.
                bases
                    .iter()
                    .map(|b| (f.ratio_to(b), b))
                    .max_by(|a, b| a.0.total_cmp(&b.0))
                    .map(|(r, b)| Judged {
                        label,
                        shown: if vs.len() > 1 {
                            format!("{r:.2}× {}", b.function)
                        } else {
                            format!("{r:.2}×")
                        },
                        badness: r,
                        ok: Some(r <= *max),
                    })
            }
        };
        match one {
            Some(j) => judged.push(j),
            None => unjudged += 1,
        }
    }
    if judged.is_empty() {
        return Err(match (&goal.bound, unjudged) {
            (Bound::Ratio { vs, .. }, n) if n > 0 => {
                format!("`{pattern}` ran but not `{}`", vs.join("` / `"))
            }
            (Bound::MinPerSecond(_), n) if n > 0 => format!("`{pattern}` declares no throughput"),
            _ => format!("no figure `{pattern}` in `{}`'s output", goal.bench),
        });
    }
    Ok(judged)
}

/// The summary table's row whose first cell is `row`, as (column name, cell).
fn summary_row<'a>(summary: &'a str, row: &str) -> Option<Vec<(String, &'a str)>> {
    let cells = |line: &'a str| -> Vec<&'a str> {
        line.trim()
            .trim_matches('|')
            .split('|')
            .map(str::trim)
            .collect()
    };
    let mut lines = summary.lines().filter(|l| l.trim_start().starts_with('|'));
    let header = cells(lines.next()?);
    let found = lines.map(cells).find(|c| c.first() == Some(&row))?;
    Some(
        header
            .iter()
            .zip(found)
            .skip(1)
            .filter(|(h, _)| !h.eq_ignore_ascii_case("goal"))
            .map(|(h, cell)| {
                // The column's first word: "library", "HTTP".
                let name = h
                    .split_whitespace()
                    .next()
                    .unwrap_or("")
                    .trim_matches(|c: char| !c.is_alphanumeric());
                (name.to_string(), cell)
            })
            .collect(),
    )
}

fn judge_summary(goal: &Goal, row: &str, out: &BenchOutput) -> Result<Vec<Judged>, String> {
    let summary = out
        .summary
        .as_deref()
        .ok_or_else(|| format!("`{}` wrote no summary.md", goal.bench))?;
    let columns =
        summary_row(summary, row).ok_or_else(|| format!("no row \"{row}\" in its summary"))?;
    let mut judged = Vec::new();
    for (column, cell) in columns {
        let values = Quantity::all_in(cell);
        if values.is_empty() {
            continue; // "—": that variant did not run
        }
        let ok = match &goal.bound {
            Bound::Max(max, _) => {
                if values.iter().any(|v| v.unit != max.unit) {
                    return Err(format!("cannot compare \"{cell}\" with {}", max.show()));
                }
                Some(values.iter().all(|v| v.value <= max.value))
            }
            _ => None,
        };
        let badness = values.iter().map(|v| v.value).fold(f64::MIN, f64::max);
        judged.push(Judged {
            label: column,
            shown: cell.to_string(),
            badness,
            ok,
        });
    }
    if judged.is_empty() {
        return Err(format!("the row \"{row}\" has no values"));
    }
    Ok(judged)
}

/// (measured, verdict) of one goal in `run`.
fn judge(goal: &Goal, run: &Run) -> (String, Verdict) {
    let Some(out) = run.get(&goal.bench) else {
        return (
            String::new(),
            Verdict::NotMeasured(format!("`{}` did not run", goal.bench)),
        );
    };
    let judged = match &goal.source {
        Source::Figure(pattern) => judge_figures(goal, pattern, out),
        Source::Summary(row) => judge_summary(goal, row, out),
    };
    let judged = match judged {
        Ok(j) => j,
        Err(why) => return (String::new(), Verdict::NotMeasured(why)),
    };
    let verdict = if judged.iter().any(|j| j.ok == Some(false)) {
        Verdict::NotMet
    } else if judged.iter().all(|j| j.ok == Some(true)) {
        Verdict::Met
    } else {
        Verdict::Shown
    };
    let each = matches!(goal.source, Source::Summary(_)) || verdict == Verdict::Shown;
    let measured = match judged.as_slice() {
        [one] if one.label.is_empty() => one.shown.clone(),
        // Columns of a summary, or figures with no bound: each one.
        all if each => all
            .iter()
            .map(|j| format!("{}: {}", j.label, j.shown))
            .collect::<Vec<_>>()
            .join("; "),
        all => {
            let worst = all
                .iter()
                .max_by(|a, b| a.badness.total_cmp(&b.badness))
                .map_or_else(String::new, |w| format!("{} ({})", w.shown, w.label));
            let failed = all.iter().filter(|j| j.ok == Some(false)).count();
            match (all.len(), failed) {
                (1, _) => worst,
                (n, 0) => format!("worst of {n}: {worst}"),
                (n, k) => format!("{k} of {n} miss; worst: {worst}"),
            }
        }
    };
    (measured, verdict)
}

impl Goal {
    /// The goal in words: its own text, else its bound.
    fn goal_text(&self) -> String {
        if let Some(text) = &self.goal_text {
            return text.clone();
        }
        match &self.bound {
            Bound::Max(_, written) => format!("≤ {written}"),
            Bound::Ratio { vs, max } => format!("≤ {max}× {}", vs.join(" / ")),
            Bound::MinPerSecond(n) => format!("≥ {:.1} M/s", n / 1e6),
            Bound::None => "—".into(),
        }
    }

    fn figure_text(&self) -> String {
        match &self.source {
            Source::Figure(f) => format!("`{}` › `{f}`", self.bench),
            Source::Summary(row) => format!("`{}` summary › {row}", self.bench),
        }
    }
}

/// The "Goals" section: one row per goal, with counts first.
pub fn render(goals: &[Goal], run: &Run) -> String {
    let mut rows = String::new();
    let (mut met, mut missed, mut unmeasured) = (0, 0, 0);
    for goal in goals {
        let (measured, verdict) = judge(goal, run);
        let verdict = match verdict {
            Verdict::Met => {
                met += 1;
                "met".to_string()
            }
            Verdict::NotMet => {
                missed += 1;
                match &goal.why_not {
                    Some(why) => format!("**NOT met**: {why}"),
                    None => "**NOT met** (no reason recorded yet)".to_string(),
                }
            }
            Verdict::Shown => "measured (no bound)".to_string(),
            Verdict::NotMeasured(why) => {
                unmeasured += 1;
                format!("not measured in this run ({why})")
            }
        };
        let _ = writeln!(
            rows,
            "| {} | {} | {} | {} | {} | {verdict} |",
            goal.issue,
            cell(&goal.what),
            cell(&goal.figure_text()),
            cell(&goal.goal_text()),
            cell(&measured),
        );
    }
    format!(
        "## Goals\n\nThe goals the open issues set (`benches/goals.toml`), judged on this run: \
         {met} met, {missed} NOT met, {unmeasured} not measured.\n\n\
         | issue | what | figure | goal | measured | verdict |\n\
         | ---: | --- | --- | --- | --- | --- |\n{rows}"
    )
}

/// Text safe inside a markdown table cell.
fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use std::path::Path;

    /// A criterion figure as criterion writes it under `dir`.
    fn write_figure(
        dir: &Path,
        group: &str,
        function: &str,
        mean_ns: f64,
        throughput: Option<(&str, u64)>,
    ) {
        let new = dir.join(group).join(function.replace('/', "_")).join("new");
        std::fs::create_dir_all(&new).unwrap();
        let (function_id, value_str) = match function.split_once('/') {
            Some((f, v)) => (f, Some(v)),
            None => (function, None),
        };
        let throughput = throughput.map(|(k, n)| serde_json::json!({ k: n }));
        let bench = serde_json::json!({
            "group_id": group, "function_id": function_id, "value_str": value_str,
            "throughput": throughput,
        });
        std::fs::write(new.join("benchmark.json"), bench.to_string()).unwrap();
        let estimates = serde_json::json!({"mean": {"point_estimate": mean_ns}});
        std::fs::write(new.join("estimates.json"), estimates.to_string()).unwrap();
    }

    const CHATS_SUMMARY: &str = "100 chats at once.\n\n\
        | figure | library (`ChatSession`) | HTTP (`lrg_chat::http`) | goal |\n\
        | --- | ---: | ---: | --- |\n\
        | lrg CPU per model turn | 150 µs | 260 µs | ≤ 200 µs |\n\
        | memory per idle session after the run | 20.5 KiB | — | ≤ 64 KiB |\n\
        | error / warning events, SSE resyncs | 0 / 0 / 0 | 0 / 1 / 0 | none |\n";

    /// A run read back from a fake criterion directory, the way `main`
    /// reads one.
    fn fake_run() -> (tempfile::TempDir, Run) {
        let dir = tempfile::TempDir::new().unwrap();
        let tools = dir.path().join("tools");
        write_figure(&tools, "tools", "call_rust_fn", 8_000.0, None);
        write_figure(&tools, "tools", "list_101_tools", 400_000.0, None);
        let schema = dir.path().join("schema");
        write_figure(
            &schema,
            "schema_40_tools",
            "baseline_clone",
            100_000.0,
            None,
        );
        write_figure(
            &schema,
            "schema_40_tools",
            "grammar_schema+split_choice",
            250_000.0,
            None,
        );
        let text = dir.path().join("text_tools");
        for (chunk, sse, hermes, pythonic) in [(1, 10.0, 15.0, 30.0), (64, 4.0, 2.0, 1.0)] {
            let group = format!("text_tools_1MB_in_{chunk}B_chunks");
            // The baseline decodes 2 MB, the parsers 1 MB: compared per byte.
            write_figure(
                &text,
                &group,
                "baseline_openai_sse_decoder",
                sse * 2e6,
                Some(("Bytes", 2_000_000)),
            );
            write_figure(
                &text,
                &group,
                "hermes",
                hermes * 1e6,
                Some(("Bytes", 1_000_000)),
            );
            write_figure(
                &text,
                &group,
                "pythonic",
                pythonic * 1e6,
                Some(("Bytes", 1_000_000)),
            );
        }
        let providers = dir.path().join("providers");
        let g = "openai_stream_100k_deltas";
        write_figure(
            &providers,
            g,
            "lrg_OpenAiChat",
            190e6,
            Some(("Elements", 100_000)),
        );
        write_figure(
            &providers,
            g,
            "async_openai",
            334e6,
            Some(("Elements", 100_000)),
        );
        write_figure(&providers, g, "genai", 180e6, Some(("Elements", 100_000)));
        let session = dir.path().join("session");
        write_figure(&session, "context_fit_10000_messages", "32768", 1.7e6, None);
        write_figure(
            &session,
            "context_fit_10000_messages",
            "kept_estimates/32768",
            0.4e6,
            None,
        );
        write_figure(
            &session,
            "event_fan_out",
            "fan",
            5e6,
            Some(("Elements", 100_000)),
        );
        let chats = dir.path().join("chats");
        std::fs::create_dir_all(&chats).unwrap();
        std::fs::write(chats.join("summary.md"), CHATS_SUMMARY).unwrap();
        let run = crate::read_run(dir.path());
        (dir, run)
    }

    fn goal(toml: &str) -> Goal {
        let mut goals = parse(&format!("[[goal]]\nissue = 18\nwhat = \"w\"\n{toml}")).unwrap();
        assert_eq!(goals.len(), 1);
        goals.remove(0)
    }

    #[test]
    fn a_time_bound_is_met_or_not() {
        let (_dir, run) = fake_run();
        let g = goal("bench = \"tools\"\nfigure = \"tools/call_rust_fn\"\nmax = \"10 µs\"");
        assert_eq!(judge(&g, &run), ("8.00 µs".into(), Verdict::Met));
        let g = goal("bench = \"tools\"\nfigure = \"tools/list_101_tools\"\nmax = \"50 us\"");
        assert_eq!(judge(&g, &run), ("400.00 µs".into(), Verdict::NotMet));
    }

    #[test]
    fn a_ratio_is_taken_per_byte_and_against_the_fastest_peer() {
        let (_dir, run) = fake_run();
        let g = goal(
            "bench = \"schema\"\nfigure = \"schema_40_tools/grammar_schema+split_choice\"\n\
             vs = \"baseline_clone\"\nmax_ratio = 2.0",
        );
        assert_eq!(judge(&g, &run), ("2.50×".into(), Verdict::NotMet));
        // Per byte: hermes 15 ns/B against the decoder's 10 ns/B at 1-byte chunks.
        let g = goal(
            "bench = \"text_tools\"\nfigure = \"text_tools_1MB_in_*B_chunks/*\"\n\
             vs = \"baseline_openai_sse_decoder\"\nmax_ratio = 2.0",
        );
        assert_eq!(
            judge(&g, &run),
            (
                "1 of 4 miss; worst: 3.00× (1 · pythonic)".into(),
                Verdict::NotMet
            )
        );
        // Ahead of genai (the faster peer) is what counts.
        let g = goal(
            "bench = \"providers\"\nfigure = \"openai_stream_100k_deltas/lrg_OpenAiChat\"\n\
             vs = [\"async_openai\", \"genai\"]\nmax_ratio = 1.0",
        );
        assert_eq!(judge(&g, &run), ("1.06× genai".into(), Verdict::NotMet));
    }

    #[test]
    fn a_summary_row_is_judged_column_by_column() {
        let (_dir, run) = fake_run();
        let g = goal("bench = \"chats\"\nsummary = \"lrg CPU per model turn\"\nmax = \"200 µs\"");
        assert_eq!(
            judge(&g, &run),
            ("library: 150 µs; HTTP: 260 µs".into(), Verdict::NotMet)
        );
        // A column that did not run ("—") is left out.
        let g = goal(
            "bench = \"chats\"\nsummary = \"memory per idle session after the run\"\nmax = \"64 KiB\"",
        );
        assert_eq!(judge(&g, &run), ("library: 20.5 KiB".into(), Verdict::Met));
        let g = goal(
            "bench = \"chats\"\nsummary = \"error / warning events, SSE resyncs\"\nmax = \"0\"",
        );
        assert_eq!(judge(&g, &run).1, Verdict::NotMet);
    }

    #[test]
    fn missing_figures_say_why_they_were_not_measured() {
        let (_dir, run) = fake_run();
        let cases = [
            (
                "bench = \"mlx\"\nfigure = \"mlx_ttft/turn_2\"\nmax = \"1 s\"",
                "`mlx` did not run",
            ),
            (
                "bench = \"tools\"\nfigure = \"tools/nope\"\nmax = \"1 s\"",
                "no figure `tools/nope` in `tools`'s output",
            ),
            (
                "bench = \"tools\"\nfigure = \"tools/call_rust_fn\"\nvs = \"floor\"\nmax_ratio = 2.0",
                "`tools/call_rust_fn` ran but not `floor`",
            ),
            (
                "bench = \"chats\"\nsummary = \"no such row\"\nmax = \"1 s\"",
                "no row \"no such row\" in its summary",
            ),
            (
                "bench = \"tools\"\nsummary = \"x\"\nmax = \"1 s\"",
                "`tools` wrote no summary.md",
            ),
        ];
        for (toml, why) in cases {
            assert_eq!(
                judge(&goal(toml), &run),
                (String::new(), Verdict::NotMeasured(why.into())),
                "{toml}"
            );
        }
    }

    #[test]
    fn the_section_counts_and_shows_why_not() {
        let (_dir, run) = fake_run();
        let goals = parse(
            r#"
            [[goal]]
            issue = 18
            what = "tool call"
            bench = "tools"
            figure = "tools/call_rust_fn"
            max = "10 µs"

            [[goal]]
            issue = 18
            what = "fit | 32k"
            bench = "session"
            figure = "context_fit_10000_messages/32768"
            max = "1 ms"
            why_not = "measures every message again; see kept_estimates"

            [[goal]]
            issue = 18
            what = "fit kept"
            bench = "session"
            figure = "context_fit_10000_messages/kept_estimates/32768"

            [[goal]]
            issue = 18
            what = "fan-out"
            bench = "session"
            figure = "event_fan_out/fan"
            min_per_s = 16e6

            [[goal]]
            issue = 13
            what = "mlx"
            bench = "mlx"
            figure = "mlx/turn_2"
            vs = "turn_1"
            max_ratio = 0.1
            "#,
        )
        .unwrap();
        let md = render(&goals, &run);
        assert!(md.contains("2 met, 1 NOT met, 1 not measured"), "{md}");
        assert!(md.contains("| 18 | fit \\| 32k | `session` › `context_fit_10000_messages/32768` | ≤ 1 ms | 1.70 ms | **NOT met**: measures every message again; see kept_estimates |"), "{md}");
        assert!(md.contains("| 400.00 µs | measured (no bound) |"), "{md}");
        assert!(md.contains("| ≥ 16.0 M/s | 20.00 M/s | met |"), "{md}");
        assert!(
            md.contains("not measured in this run (`mlx` did not run)"),
            "{md}"
        );
    }

    #[test]
    fn bad_goals_are_refused_with_their_name() {
        for (toml, what) in [
            (
                "bench = \"t\"\nfigure = \"nogroup\"\nmax = \"1 s\"",
                "not `group/function`",
            ),
            ("bench = \"t\"\nmax = \"1 s\"", "exactly one of"),
            (
                "bench = \"t\"\nfigure = \"a/b\"\nmax = \"64 KiB\"",
                "is a time",
            ),
            (
                "bench = \"t\"\nfigure = \"a/b\"\nmax = \"fast\"",
                "cannot read max",
            ),
            (
                "bench = \"t\"\nfigure = \"a/b\"\nmax_ratio = 2.0",
                "give one bound",
            ),
            (
                "bench = \"t\"\nsummary = \"r\"\nmin_per_s = 1.0",
                "max` only",
            ),
            (
                "bench = \"t\"\nfigure = \"a/b\"\nmaxx = \"1 s\"",
                "unknown field",
            ),
        ] {
            let err = parse(&format!("[[goal]]\nissue = 9\nwhat = \"x\"\n{toml}")).unwrap_err();
            assert!(err.contains(what), "{toml}: {err}");
        }
    }

    #[test]
    fn cells_read_as_quantities() {
        let q = |v, unit| Quantity { value: v, unit };
        assert_eq!(
            Quantity::parse("10 µs"),
            Some(q(10_000.0, Unit::Nanoseconds))
        );
        assert_eq!(Quantity::parse("64 KiB"), Some(q(65_536.0, Unit::Bytes)));
        assert_eq!(Quantity::parse("1,000"), Some(q(1_000.0, Unit::Plain)));
        assert_eq!(
            Quantity::all_in("12 / 40 ms"),
            vec![q(12e6, Unit::Nanoseconds), q(40e6, Unit::Nanoseconds)]
        );
        assert_eq!(
            Quantity::all_in("p50 3 of 4"),
            vec![q(3.0, Unit::Plain), q(4.0, Unit::Plain)]
        );
        assert!(Quantity::all_in("—").is_empty());
        assert_eq!(glob("a*b/*", "axxb/c"), Some(vec!["xx".into(), "c".into()]));
        assert_eq!(glob("a/b", "a/bc"), None);
    }

    /// The goals file in the repo reads, and every goal in it names a bench
    /// that benches/Cargo.toml declares.
    #[test]
    fn the_repo_goals_file_reads() {
        let goals = parse(include_str!("../goals.toml")).unwrap();
        assert!(goals.len() >= 20, "{}", goals.len());
        let manifest = include_str!("../Cargo.toml");
        for g in &goals {
            assert!(
                manifest.contains(&format!("name = \"{}\"", g.bench)),
                "goal \"{}\" names bench `{}`, which benches/Cargo.toml does not declare",
                g.what,
                g.bench
            );
        }
    }
}
