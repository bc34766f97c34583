//! The cost of OpenTelemetry on a model turn with tools (issue 27): the
//! `chats` bench's library run (N `ChatSession`s on `OpenAiChat`, a Rust
//! tool, three streamed turns per message: two calls, then the reply)
//! under three subscribers, each in a fresh process of its own:
//!
//! - **tracing off**: no subscriber (what an app without one pays: a
//!   disabled-callsite check per span);
//! - **layer, no export**: `lrg_chat::otel::layer` on an SDK tracer
//!   provider with no exporter, so every span is built, filled and dropped;
//! - **export**: the same layer with a batch exporter over OTLP/HTTP to a
//!   local receiver (a child process, so its CPU is not counted), plus the
//!   metrics on a periodic reader, flushed at the end (the flush counted).
//!
//! CPU per model turn is the process's user + system time over the
//! messages (getrusage, as `chats` measures it) over 3 N; the export
//! variant's includes the final flush. Rounds alternate the variants
//! (default 3, `LRG_BENCH_OTEL_ROUNDS`) and the median is shown. The goal:
//! export costs at most 5% more CPU per turn than tracing off.
//!
//! Run: `cargo bench -p lrg-benches --bench otel` (N = 300 chats per
//! variant; `LRG_BENCH_CHATS=N`), or through `benches/run.sh --bench otel`,
//! which puts the table in the results file.
#![allow(missing_docs, dead_code)]
#![allow(clippy::unwrap_used, clippy::expect_used)] // a bench: a failure to set up should stop it loudly

#[path = "chats/check.rs"]
mod check;
#[path = "chats/child.rs"]
mod child;
#[path = "chats/fake_openai.rs"]
mod fake_openai;
#[path = "chats/figures.rs"]
mod figures;
#[path = "chats/library.rs"]
mod library;
#[path = "chats/usage.rs"]
mod usage;

use std::time::Duration;

use lrg_benches::Counting;

#[global_allocator]
static GLOBAL: Counting = Counting;

const RECEIVER_ARG: &str = "--otel-receiver";
const VARIANT_ARG: &str = "--otel-variant";
const VARIANTS: [&str; 3] = ["off", "layer", "export"];

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some(fake_openai::ARG) => return fake_openai::serve(),
        Some(RECEIVER_ARG) => return receiver(),
        Some(VARIANT_ARG) => return variant(&args[1], &args[2], args[3].parse().unwrap()),
        _ => {}
    }
    let n: usize = std::env::var("LRG_BENCH_CHATS")
        .ok()
        .map(|v| v.parse().expect("LRG_BENCH_CHATS: a number"))
        .unwrap_or(300);
    let rounds: usize = std::env::var("LRG_BENCH_OTEL_ROUNDS")
        .ok()
        .map(|v| v.parse().expect("LRG_BENCH_OTEL_ROUNDS: a number"))
        .unwrap_or(3);
    let receiver = child::Child::spawn(&[RECEIVER_ARG]);
    let endpoint = format!("http://127.0.0.1:{}", receiver.port);
    let mut per_turn: [Vec<f64>; 3] = Default::default();
    let mut ok = true;
    for round in 0..rounds {
        for (i, name) in VARIANTS.iter().enumerate() {
            match run_variant(name, &endpoint, n) {
                Ok(us) => {
                    eprintln!("otel: round {round} {name}: {us:.1} µs CPU per turn");
                    per_turn[i].push(us);
                }
                Err(e) => {
                    eprintln!("otel: round {round} {name} failed: {e}");
                    ok = false;
                }
            }
        }
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
    };
    let m: Vec<f64> = per_turn.iter_mut().map(median).collect();
    let ratio = |x: f64| x / m[0];
    let table = format!(
        "| {n} chats × 3 turns, median of {rounds} | tracing off | layer, no export | export (OTLP/HTTP, local receiver) |\n\
         | --- | --- | --- | --- |\n\
         | CPU per model turn | {:.1} µs | {:.1} µs | {:.1} µs |\n\
         | vs tracing off | 1.00 | {:.3} | {:.3} |\n",
        m[0],
        m[1],
        m[2],
        ratio(m[1]),
        ratio(m[2]),
    );
    println!("{table}");
    let goal = if ratio(m[2]) <= 1.05 {
        "met"
    } else {
        "NOT met"
    };
    let note = format!(
        "goal (issue 27): export at most 5% more CPU per turn than tracing off: {goal} ({:+.1}%)",
        (ratio(m[2]) - 1.0) * 100.0
    );
    lrg_benches::figure_note(&note);
    if let Ok(dir) = std::env::var("CRITERION_HOME") {
        let _ = std::fs::create_dir_all(&dir);
        std::fs::write(std::path::Path::new(&dir).join("summary.md"), &table)
            .expect("write summary.md");
    }
    if !ok {
        std::process::exit(1);
    }
}

/// One variant in a fresh process: its CPU per model turn, µs.
fn run_variant(name: &str, endpoint: &str, n: usize) -> Result<f64, String> {
    let exe = std::env::current_exe().expect("own path");
    let out = std::process::Command::new(exe)
        .args([VARIANT_ARG, name, endpoint, &n.to_string()])
        .stderr(std::process::Stdio::inherit())
        .output()
        .map_err(|e| e.to_string())?;
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("cpu_per_turn_us "))
        .ok_or_else(|| format!("no figure ({}): {text}", out.status))?;
    line.trim().parse().map_err(|e| format!("{line:?}: {e}"))
}

/// The child: install the variant's subscriber, run the chats, print the figure.
fn variant(name: &str, endpoint: &str, n: usize) {
    use opentelemetry::trace::TracerProvider as _;
    use opentelemetry_otlp::WithExportConfig as _;
    use tracing_subscriber::layer::SubscriberExt as _;
    lrg_providers::transport::ensure_tls_provider();
    usage::raise_fd_limit(4 * n as u64 + 256);
    let mut flush: Option<Box<dyn FnOnce()>> = None;
    match name {
        "off" => {}
        "layer" => {
            let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder().build();
            let subscriber =
                tracing_subscriber::registry().with(lrg_chat::otel::layer(provider.tracer("lrg")));
            tracing::subscriber::set_global_default(subscriber).expect("subscriber");
        }
        "export" => {
            let spans = opentelemetry_otlp::SpanExporter::builder()
                .with_http()
                .with_endpoint(format!("{endpoint}/v1/traces"))
                .build()
                .expect("span exporter");
            // Room for every span of the run, sent as it goes.
            let batch = opentelemetry_sdk::trace::BatchConfigBuilder::default()
                .with_max_queue_size(16 * n + 1024)
                .with_scheduled_delay(Duration::from_millis(200))
                .build();
            let processor = opentelemetry_sdk::trace::BatchSpanProcessor::builder(spans)
                .with_batch_config(batch)
                .build();
            let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder()
                .with_span_processor(processor)
                .build();
            let metrics = opentelemetry_otlp::MetricExporter::builder()
                .with_http()
                .with_endpoint(format!("{endpoint}/v1/metrics"))
                .build()
                .expect("metric exporter");
            let meters = opentelemetry_sdk::metrics::SdkMeterProvider::builder()
                .with_periodic_exporter(metrics)
                .build();
            opentelemetry::global::set_meter_provider(meters.clone());
            let subscriber =
                tracing_subscriber::registry().with(lrg_chat::otel::layer(provider.tracer("lrg")));
            tracing::subscriber::set_global_default(subscriber).expect("subscriber");
            flush = Some(Box::new(move || {
                provider.force_flush().expect("flush spans");
                meters.force_flush().expect("flush metrics");
            }));
        }
        other => panic!("unknown variant {other}"),
    }
    let figures = library::run(n);
    if !figures.failures.is_empty() || figures.completed != n {
        eprintln!(
            "otel {name}: {} of {n} completed; {:?}",
            figures.completed,
            figures.failures.iter().take(3).collect::<Vec<_>>()
        );
        std::process::exit(1);
    }
    let mut cpu_us = figures.cpu_us;
    if let Some(flush) = flush {
        let before = usage::now().cpu_us;
        flush();
        cpu_us += usage::now().cpu_us - before;
    }
    println!("cpu_per_turn_us {}", cpu_us as f64 / (3 * n) as f64);
}

/// The receiver: OTLP/HTTP that takes everything and answers 200.
fn receiver() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let ok = || async {
            (
                [("content-type", "application/x-protobuf")],
                Vec::<u8>::new(),
            )
        };
        let app = axum::Router::new()
            .route("/v1/traces", axum::routing::post(ok))
            .route("/v1/metrics", axum::routing::post(ok));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        child::announce(listener.local_addr().expect("addr").port());
        child::exit_with_parent();
        axum::serve(listener, app).await.expect("serve");
    });
}
