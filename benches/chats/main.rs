//! 1,000 concurrent chats, end to end (issue 18 §3): N `ChatSession`s on
//! `OpenAiChat`, each with a Rust-function tool (`lookup`, allowed without
//! asking), all send one message at once on a multi-thread runtime; the
//! fake model answers each message in three streamed turns of 200 deltas
//! (two tool calls, then the reply). Then the same through lrg's HTTP routes
//! (`lrg_chat::http`, what `lrg serve` mounts): N chats opened over HTTP,
//! each with one SSE subscriber on `GET …/events`, messages posted over
//! HTTP.
//!
//! Run: `cargo bench -p lrg-benches --bench chats` (N = 1,000; a quick check
//! with `LRG_BENCH_CHATS=100`). It prints a table, writes it to
//! `$CRITERION_HOME/summary.md` when that is set (`benches/run.sh` puts it in
//! `RESULTS.md`), and exits non-zero when any chat failed: an `error` or
//! `warning` event, an SSE `resync`, an outcome other than the expected
//! reply, or a history that is not three model turns with a result for each
//! call.
//!
//! How each figure is measured:
//! - **Processes.** The fake model server runs as a child process
//!   (`fake_openai`); over HTTP, lrg's server is a second child and this
//!   process is only the HTTP client. So `getrusage(RUSAGE_SELF)` of lrg's
//!   process (this one for the library run, the child for HTTP) is lrg's
//!   alone.
//! - **Messages per second:** N over the wall time from the first send to
//!   the last completion.
//! - **Time per message:** from `send` (HTTP: the POST) until the message
//!   is done (the `TurnHandle` resolves; HTTP: the subscriber reads
//!   `busy: false`). The server's own time for that chat (summed over its 3
//!   requests, as the server measured it: see `fake_openai`) is subtracted
//!   per message before taking p50 and p99.
//! - **CPU per model turn:** user + system CPU time of lrg's process while
//!   the messages ran (not the setup), over 3 N. It holds everything lrg
//!   does: the session loop, the OpenAI client (request JSON, HTTP, SSE
//!   decoding), the tool calls, the event logs, tokio; over HTTP also the
//!   routes and the SSE encoding to the subscribers.
//! - **Of which framing + decoding, and the JSON floor:** measured apart on
//!   one thread (`decoding`): lrg's SSE framer and OpenAI decoder over the
//!   three answers, and under it the bytes cut into lines with each frame's
//!   JSON parsed into nothing. The row "outside framing + decoding" is the
//!   CPU per turn minus the first: what the session loop, the HTTP client
//!   and tokio add.
//! - **Peak RSS:** `ru_maxrss` of lrg's process.
//! - **Memory per idle session:** live heap bytes (a counting global
//!   allocator) with the N sessions idle after the run, minus the same
//!   after they were dropped (HTTP: unwatched, then deleted), over N. What
//!   stays after the drop is shown apart as shared memory; in the library
//!   run, the part of it that goes with the model client (its idle pooled
//!   connections, one per chat that streamed at once) is measured by
//!   dropping the client too. Over HTTP, the subscriber's share (its
//!   subscription and connection) is what closing the event streams frees.
#![allow(missing_docs)]
#![allow(clippy::unwrap_used, clippy::expect_used)] // a bench: a failure to set up should stop it loudly

mod check;
mod child;
mod decoding;
mod fake_openai;
mod figures;
mod http_run;
mod library;
mod usage;

use figures::Figures;
use lrg_benches::Counting;

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Chats per run, unless `LRG_BENCH_CHATS` says otherwise.
const DEFAULT_CHATS: usize = 1_000;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some(fake_openai::ARG) => return fake_openai::serve(),
        Some(http_run::SERVE_ARG) => return http_run::serve(&args[1..]),
        // cargo bench passes `--bench` and criterion's options: not ours.
        _ => {}
    }
    let n = match std::env::var("LRG_BENCH_CHATS") {
        Ok(v) => v
            .parse()
            .unwrap_or_else(|_| panic!("LRG_BENCH_CHATS={v:?}: want a number of chats")),
        Err(_) => DEFAULT_CHATS,
    };
    // Per chat a socket to the model server; over HTTP two more per chat
    // (its POSTs, its event stream) on each side.
    let fds = usage::raise_fd_limit(4 * n as u64 + 256);
    if fds < 3 * n as u64 + 64 {
        eprintln!(
            "chats: only {fds} open files allowed; raise `ulimit -n` or lower LRG_BENCH_CHATS"
        );
    }
    lrg_providers::transport::ensure_tls_provider();
    eprintln!("chats: {n} chats, load {}", figures::load());
    // LRG_BENCH_CHATS_RUN=library|http runs one variant (e.g. to profile it).
    let only = std::env::var("LRG_BENCH_CHATS_RUN").unwrap_or_default();
    let mut library = if only != "http" {
        let f = library::run(n);
        eprintln!("chats: library run done, load {}", figures::load());
        f
    } else {
        Figures::skipped(n)
    };
    let mut http = if only != "library" {
        let f = http_run::run(n);
        eprintln!("chats: HTTP run done, load {}", figures::load());
        f
    } else {
        Figures::skipped(n)
    };
    let decode = decoding::cpu_per_turn();
    let floor = decoding::json_floor_per_turn();
    for run in [&mut library, &mut http] {
        run.decode_per_turn = decode;
        run.json_floor_per_turn = floor;
    }
    let ok = figures::report(n, &library, &http);
    if !ok {
        std::process::exit(1);
    }
}
