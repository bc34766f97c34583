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
