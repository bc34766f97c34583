//! The process-wide llama.cpp backend and its logging.

use std::sync::OnceLock;

use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::{LlamaCppError, LogOptions, send_logs_to_tracing};

/// llama.cpp allows one backend per process; every engine shares this one.
static BACKEND: OnceLock<LlamaBackend> = OnceLock::new();

/// The shared backend, initialized on first use with llama.cpp's and ggml's
/// logs sent to `tracing` (they would otherwise go to stderr).
pub(crate) fn backend() -> &'static LlamaBackend {
    BACKEND.get_or_init(|| {
        send_logs_to_tracing(LogOptions::default());
        match LlamaBackend::init() {
            Ok(b) => b,
            // Another library in this process initialized llama.cpp already;
            // initialization is idempotent, so its proof token is all we need.
            Err(LlamaCppError::BackendAlreadyInitialized) => LlamaBackend {},
            Err(e) => {
                // `init` has no other failure today; keep going rather than panic.
                tracing::warn!(error = %e, "unexpected llama.cpp backend init result");
                LlamaBackend {}
            }
        }
    })
}
