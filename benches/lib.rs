//! Shared helpers for the benches.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};

/// One OpenAI streaming chunk, as api.openai.com writes it (with
/// `stream_options.include_usage`, every chunk carries `"usage":null`).
pub fn openai_chunk(delta: &serde_json::Value, finish: Option<&str>) -> String {
    let chunk = serde_json::json!({
        "id": "chatcmpl-BQx8b1Yt0aZ5fXg3E7h2kLmNoPqRs", "object": "chat.completion.chunk", "created": 1745877123,
        "model": "gpt-4.1-2025-04-14", "service_tier": "default", "system_fingerprint": "fp_b38e740b47",
        "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}],
        "usage": null, "obfuscation": "k2Xr"
    });
    format!("data: {chunk}\n\n")
}

/// The last chunk of an OpenAI stream with `include_usage`: no choices, the
/// token counts.
pub fn openai_usage_chunk(prompt_tokens: usize, completion_tokens: usize) -> String {
    let usage = serde_json::json!({
        "id": "chatcmpl-BQx8b1Yt0aZ5fXg3E7h2kLmNoPqRs", "object": "chat.completion.chunk", "created": 1745877123,
        "model": "gpt-4.1-2025-04-14", "choices": [],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                  "total_tokens": prompt_tokens + completion_tokens}
    });
    format!("data: {usage}\n\n")
}

/// A global allocator that counts live heap bytes, so a memory figure is
/// measured, not guessed. Install it in a bench binary with
/// `#[global_allocator] static GLOBAL: Counting = Counting;` and read
/// [`live_bytes`].
pub struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

/// Heap bytes allocated and not yet freed (0 unless [`Counting`] is the
/// global allocator).
pub fn live_bytes() -> isize {
    LIVE.load(Ordering::Relaxed)
}

// SAFETY: every method forwards to the system allocator unchanged and only
// adds bookkeeping on an atomic counter.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(
            new_size as isize - layout.size() as isize,
            Ordering::Relaxed,
        );
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// The file in a bench's `CRITERION_HOME` that [`figure_note`] appends to and
/// `bench-report` copies into the bench's section of `RESULTS.md`.
pub const NOTES_FILE: &str = "notes.md";

/// Reports a figure that criterion does not measure (a percentile, a memory
/// figure, a count): prints `line` to stderr and, when `CRITERION_HOME` is
/// set (as `benches/run.sh` sets it), appends it as a markdown bullet to
/// `$CRITERION_HOME/notes.md`, so the figure lands in `RESULTS.md` instead of
/// only in a terminal.
pub fn figure_note(line: impl AsRef<str>) {
    let line = line.as_ref();
    eprintln!("{line}");
    let Some(home) = std::env::var_os("CRITERION_HOME") else {
        return;
    };
    if let Err(e) = append_note(std::path::Path::new(&home), line) {
        eprintln!("figure_note: cannot append to {NOTES_FILE} in {home:?}: {e}");
    }
}

/// Appends `- line` to `dir/notes.md` (one bullet; newlines in `line` become
/// spaces so one note stays one bullet).
fn append_note(dir: &std::path::Path, line: &str) -> std::io::Result<()> {
    use std::io::Write as _;
    std::fs::create_dir_all(dir)?;
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join(NOTES_FILE))?;
    writeln!(file, "- {}", line.trim().replace('\n', " "))
}
