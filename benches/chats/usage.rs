//! What the process used: CPU time from `getrusage`, peak RSS, live heap, and
//! percentiles of a list of durations.

use std::time::Duration;

/// The process's CPU time (`getrusage(RUSAGE_SELF)`), peak resident set and
/// live heap.
#[derive(Debug, Clone, Copy, serde::Serialize, serde::Deserialize)]
pub struct Usage {
    /// User plus system CPU time of every thread, in µs.
    pub cpu_us: u64,
    /// Peak resident set size, in KiB.
    pub max_rss_kib: u64,
    /// Live heap bytes (the counting allocator).
    pub live_bytes: i64,
}

/// This process's usage now.
pub fn now() -> Usage {
    // SAFETY: `getrusage` only writes the struct it is given; a zeroed
    // `rusage` is a valid value of that plain C struct.
    #[allow(unsafe_code)]
    let ru = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut ru);
        ru
    };
    let us = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
    Usage {
        cpu_us: us(ru.ru_utime) + us(ru.ru_stime),
        max_rss_kib: peak_rss_kib().unwrap_or(ru.ru_maxrss as u64),
        live_bytes: lrg_benches::live_bytes() as i64,
    }
}

/// This thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`).
pub fn thread_cpu() -> Duration {
    // SAFETY: `clock_gettime` only writes the struct it is given.
    #[allow(unsafe_code)]
    let ts = unsafe {
        let mut ts: libc::timespec = std::mem::zeroed();
        libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts);
        ts
    };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// The peak RSS of this program, in KiB: Linux's `VmHWM`. `ru_maxrss`
/// would do elsewhere, but on Linux it keeps the peak from before `exec`,
/// i.e. the peak of cargo, which forked this bench.
fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Raise the soft limit on open files to `want` (or the hard limit, if
/// lower): every chat holds a socket to the model server, and over HTTP
/// two more (its event stream, both ends). Returns the limit in force.
pub fn raise_fd_limit(want: u64) -> u64 {
    // SAFETY: get/setrlimit only read and write the struct they are given.
    #[allow(unsafe_code)]
    unsafe {
        let mut lim: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return 0;
        }
        if lim.rlim_cur < want as libc::rlim_t {
            let raised = libc::rlimit {
                rlim_cur: (want as libc::rlim_t).min(lim.rlim_max),
                rlim_max: lim.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                lim = raised;
            }
        }
        lim.rlim_cur as u64
    }
}

/// The `p`-th percentile (0–100) of `sorted`, nearest rank.
pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}
