//! Ctrl-C: the first press performs the session's stop; a second one, or a
//! press while nothing runs, exits.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use lrg_chat::ChatSession;

use crate::exit::Exit;

/// Watches Ctrl-C for a session until dropped.
pub struct CtrlC {
    task: tokio::task::JoinHandle<()>,
    stopped: Arc<AtomicBool>,
}

impl CtrlC {
    /// Start watching. `idle_exit` is the exit code for a press while the
    /// session is idle (a REPL at its prompt).
    pub fn watch(session: ChatSession, idle_exit: Exit) -> Self {
        let stopped = Arc::new(AtomicBool::new(false));
        let flag = stopped.clone();
        let task = tokio::spawn(async move {
            while tokio::signal::ctrl_c().await.is_ok() {
                if !session.is_busy() {
                    eprintln!();
                    crate::line_editor::restore_terminal();
                    crate::telemetry::shutdown();
                    std::process::exit(idle_exit as i32);
                }
                if flag.swap(true, Ordering::SeqCst) {
                    eprintln!("\nlrg: exiting");
                    // The chat's terminal may be holding keys (no echo).
                    crate::line_editor::restore_terminal();
                    crate::telemetry::shutdown();
                    std::process::exit(Exit::Stopped as i32);
                }
                // Sub-agents too: Ctrl-C means stop everything.
                session.stop_with_sub_agents();
                eprintln!("\nlrg: stopping (Ctrl-C again to exit now)");
            }
        });
        Self { task, stopped }
    }

    /// A new message starts: the next press stops it again.
    pub fn rearm(&self) {
        self.stopped.store(false, Ordering::SeqCst);
    }
}

impl Drop for CtrlC {
    fn drop(&mut self) {
        self.task.abort();
    }
}
