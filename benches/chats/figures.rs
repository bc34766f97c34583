//! One run's figures, and the table comparing the runs with the goals.

use std::fmt::Write as _;
use std::time::Duration;

use crate::fake_openai::ServerTimes;
use crate::usage::percentile;

/// What one run measured.
#[derive(Debug, Default)]
pub struct Figures {
    /// Messages that completed as expected.
    pub completed: usize,
    /// From the first send to the last completion.
    pub wall: Duration,
    /// Time per message, sorted.
    pub per_message: Vec<Duration>,
    /// The fake server's time per message (its 3 requests), sorted.
    pub server: Vec<Duration>,
    /// Time per message minus the server's, sorted.
    pub net: Vec<Duration>,
    /// lrg's CPU time while the messages ran, µs.
    pub cpu_us: u64,
    /// Of that, per turn: framing and decoding alone (see `decoding`).
    pub decode_per_turn: Duration,
    /// The JSON floor under that: each frame parsed into nothing.
    pub json_floor_per_turn: Duration,
    /// lrg's peak RSS, KiB.
    pub max_rss_kib: u64,
    /// Live heap bytes per idle session.
    pub per_session_bytes: f64,
    /// Live heap bytes per SSE subscriber, with its connection (HTTP only).
    pub per_subscriber_bytes: Option<f64>,
    /// Live heap bytes left once the sessions were gone (pooled
    /// connections, caches): shared, not per session.
    pub shared_bytes: i64,
    /// Of `shared_bytes`, what went with the model client (library only).
    pub client_bytes: Option<i64>,
    /// A variant left out (`LRG_BENCH_CHATS_RUN`).
    pub skipped: bool,
    /// tokio tasks alive with every session idle.
    pub tasks_alive: usize,
    /// tokio tasks alive once the sessions ended.
    pub tasks_after: usize,
    /// `error` events.
    pub errors: usize,
    /// `warning` events.
    pub warnings: usize,
    /// SSE `resync`s (HTTP only).
    pub resyncs: usize,
    /// Per failed chat: what went wrong (the first few are printed).
    pub failures: Vec<String>,
}

impl Figures {
    /// A run left out (`LRG_BENCH_CHATS_RUN`): counts as no failure.
    pub fn skipped(n: usize) -> Self {
        Self {
            completed: n,
            skipped: true,
            ..Self::default()
        }
    }

    /// Fill the time figures from `(chat, time per message)` of the
    /// completed messages and the server's times.
    pub fn times(&mut self, took: &[(usize, Duration)], server: &ServerTimes) {
        for &(chat, t) in took {
            let s = server
                .per_chat
                .get(&(chat as u64))
                .copied()
                .unwrap_or_default();
            self.per_message.push(t);
            self.server.push(s);
            self.net.push(t.saturating_sub(s));
        }
        self.per_message.sort();
        self.server.sort();
        self.net.sort();
    }
}

/// The 1, 5 and 15 minute load averages.
pub fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

fn ms(d: Duration) -> String {
    match d.as_secs_f64() {
        s if s >= 0.01 => format!("{:.0} ms", s * 1e3),
        s if s >= 0.001 => format!("{:.1} ms", s * 1e3),
        s => format!("{:.0} µs", s * 1e6),
    }
}

fn p50_p99(sorted: &[Duration]) -> String {
    format!(
        "{} / {}",
        ms(percentile(sorted, 50.0)),
        ms(percentile(sorted, 99.0))
    )
}

fn kib(bytes: f64) -> String {
    if bytes.abs() >= 10.0 * 1024.0 * 1024.0 {
        format!("{:.1} MiB", bytes / (1024.0 * 1024.0))
    } else {
        format!("{:.1} KiB", bytes / 1024.0)
    }
}

/// Print the table (and write it to `$CRITERION_HOME/summary.md`); whether
/// every chat of both runs went as expected.
pub fn report(n: usize, library: &Figures, http: &Figures) -> bool {
    let runs = [library, http];
    let row = |md: &mut String, what: &str, goal: &str, f: &dyn Fn(&Figures) -> String| {
        let cell = |run: &Figures| {
            if run.skipped {
                "—".to_string()
            } else {
                f(run)
            }
        };
        let _ = writeln!(
            md,
            "| {what} | {} | {} | {goal} |",
            cell(library),
            cell(http)
        );
    };
    let mut md = format!(
        "{n} chats at once, each one message of 3 model turns (2 tool calls, then the reply), \
         200 streamed deltas per turn, against a fake OpenAI server in its own process. \
         Load average at the end: {}.\n\n\
         | figure | library (`ChatSession`) | HTTP (`lrg_chat::http`, 1 SSE subscriber per chat) | goal |\n\
         | --- | ---: | ---: | --- |\n",
        load()
    );
    row(&mut md, "messages completed as expected", "all", &|f| {
        format!("{} / {n}", f.completed)
    });
    row(&mut md, "messages completed per second", "", &|f| {
        format!("{:.0}", f.completed as f64 / f.wall.as_secs_f64().max(1e-9))
    });
    row(&mut md, "time per message, p50 / p99", "", &|f| {
        p50_p99(&f.per_message)
    });
    row(
        &mut md,
        "the fake server's own time per message, p50 / p99",
        "",
        &|f| p50_p99(&f.server),
    );
    row(
        &mut md,
        "time per message minus the server's, p50 / p99",
        "",
        &|f| p50_p99(&f.net),
    );
    row(&mut md, "lrg CPU per model turn", "≤ 200 µs", &|f| {
        format!("{:.0} µs", f.cpu_us as f64 / (3 * n) as f64)
    });
    row(
        &mut md,
        "of which SSE framing + OpenAI decoding (one thread, measured apart)",
        "",
        &|f| format!("{:.0} µs", f.decode_per_turn.as_secs_f64() * 1e6),
    );
    row(
        &mut md,
        "the JSON floor under it: each frame only parsed, into nothing (one thread)",
        "",
        &|f| format!("{:.0} µs", f.json_floor_per_turn.as_secs_f64() * 1e6),
    );
    row(
        &mut md,
        "lrg CPU per model turn outside framing + decoding",
        "",
        &|f| {
            let per_turn = f.cpu_us as f64 / (3 * n) as f64;
            format!("{:.0} µs", per_turn - f.decode_per_turn.as_secs_f64() * 1e6)
        },
    );
    row(&mut md, "lrg peak RSS", "", &|f| {
        format!("{:.1} MiB", f.max_rss_kib as f64 / 1024.0)
    });
    row(
        &mut md,
        "memory per idle session after the run",
        "≤ 64 KiB",
        &|f| kib(f.per_session_bytes),
    );
    row(&mut md, "memory per idle SSE subscriber (HTTP)", "", &|f| {
        f.per_subscriber_bytes.map_or("n/a".into(), kib)
    });
    row(
        &mut md,
        "memory left once the sessions ended (shared)",
        "",
        &|f| kib(f.shared_bytes as f64),
    );
    row(
        &mut md,
        "of which the model client's, with its idle pooled connections",
        "",
        &|f| {
            f.client_bytes
                .map_or("not measured".into(), |b| kib(b as f64))
        },
    );
    row(
        &mut md,
        "lrg's tokio tasks alive: sessions idle / ended",
        "",
        &|f| format!("{} / {}", f.tasks_alive, f.tasks_after),
    );
    row(
        &mut md,
        "error / warning events, SSE resyncs",
        "none",
        &|f| format!("{} / {} / {}", f.errors, f.warnings, f.resyncs),
    );
    let ok = runs
        .iter()
        .all(|f| f.failures.is_empty() && f.completed == n);
    for (name, f) in ["library", "HTTP"].iter().zip(runs) {
        if !f.failures.is_empty() {
            let _ = writeln!(md, "\nFAILED ({name}): {} chats, e.g.:", f.failures.len());
            for failure in f.failures.iter().take(5) {
                let _ = writeln!(md, "- {failure}");
            }
        }
    }
    println!("{md}");
    if let Ok(dir) = std::env::var("CRITERION_HOME") {
        let path = std::path::Path::new(&dir).join("summary.md");
        if let Err(e) = std::fs::create_dir_all(&dir).and_then(|()| std::fs::write(&path, &md)) {
            eprintln!("chats: cannot write {}: {e}", path.display());
        }
    }
    ok
}
