//! A local model's load as a progress bar on stderr: the connect's first
//! load (from the engine pool's reports) and a reload before a turn (the
//! session's `model_loading` events) draw the same bar.
//!
//! Only loads that last over [`SHOW_AFTER`] get one, so a quick reload does
//! not flash a bar. On a terminal it is redrawn in place; otherwise one line
//! says a load began and one that it ended, so logs stay readable.

use std::future::Future;
use std::io::{IsTerminal as _, Write as _};
use std::time::{Duration, Instant};

use lrg_providers::local_chat::EnginePool;
use tokio::sync::broadcast::error::RecvError;

/// Loads shorter than this draw nothing.
pub const SHOW_AFTER: Duration = Duration::from_secs(1);

/// Cells of the bar.
const WIDTH: usize = 24;

/// The bar of the load in progress, if any.
#[derive(Debug)]
pub struct LoadBar {
    terminal: bool,
    /// The model being loaded and when its first report came.
    current: Option<(String, Instant)>,
    /// Whether anything was drawn for the current load.
    shown: bool,
}

impl Default for LoadBar {
    fn default() -> Self {
        Self::new(std::io::stderr().is_terminal())
    }
}

impl LoadBar {
    /// A bar drawn in place (`terminal`) or as start and end lines.
    pub fn new(terminal: bool) -> Self {
        Self {
            terminal,
            current: None,
            shown: false,
        }
    }

    /// `model`'s load got to `progress` (0 to 1; 1 ends it).
    pub fn update(&mut self, model: &str, progress: f32) {
        if self.current.as_ref().is_none_or(|(m, _)| m != model) {
            self.end();
            self.current = Some((model.to_string(), Instant::now()));
        }
        let Some(line) = self.line(progress) else {
            return;
        };
        let mut err = std::io::stderr().lock();
        // A broken stderr cannot be told about; the load goes on.
        let _ = if self.terminal {
            write!(err, "\r{line}\x1b[K").and_then(|()| err.flush())
        } else {
            writeln!(err, "{line}")
        };
        self.shown = true;
        if progress >= 1.0 {
            // Its line is complete (a terminal's ends with a newline).
            self.current = None;
            self.shown = false;
        }
    }

    /// What to draw for `progress` of the current load, if anything.
    fn line(&self, progress: f32) -> Option<String> {
        let (model, started) = self.current.as_ref()?;
        let elapsed = started.elapsed();
        if !self.shown && (elapsed < SHOW_AFTER || (progress >= 1.0 && !self.terminal)) {
            // Short, or over before a line was due: nothing to say.
            return None;
        }
        if !self.terminal {
            return Some(if progress >= 1.0 {
                format!("lrg: loaded {model} in {:.1} s", elapsed.as_secs_f32())
            } else if self.shown {
                return None;
            } else {
                format!("lrg: loading {model} ...")
            });
        }
        let filled = ((progress.clamp(0.0, 1.0) * WIDTH as f32).round() as usize).min(WIDTH);
        Some(format!(
            "loading {model} [{}{}] {:>3}%{}",
            "#".repeat(filled),
            "-".repeat(WIDTH - filled),
            (progress.clamp(0.0, 1.0) * 100.0).round() as u32,
            if progress >= 1.0 { "\n" } else { "" }
        ))
    }

    /// The current load is over (or another began): close its line.
    fn end(&mut self) {
        if self.shown && self.terminal {
            // Ended without a report of 1 (it failed): keep the bar as it
            // got, on a line of its own.
            let _ = writeln!(std::io::stderr());
        }
        self.current = None;
        self.shown = false;
    }
}

/// Run `connecting` (a connect that may load a model into `pool`) with a bar
/// for the loads it waits on.
pub async fn while_connecting<T>(pool: &EnginePool, connecting: impl Future<Output = T>) -> T {
    let mut reports = pool.subscribe();
    let mut bar = LoadBar::default();
    tokio::pin!(connecting);
    loop {
        tokio::select! {
            biased;
            report = reports.recv() => match report {
                Ok(report) => bar.update(&report.model, report.progress),
                Err(RecvError::Lagged(_)) => {}
                Err(RecvError::Closed) => return connecting.await,
            },
            done = &mut connecting => {
                bar.end();
                return done;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_loads_draw_nothing_and_long_ones_a_bar_that_ends_full() {
        let mut bar = LoadBar::new(true);
        bar.update("llama:/m/x.gguf", 0.0);
        assert_eq!(bar.line(0.5), None, "under a second");
        bar.current = Some(("llama:/m/x.gguf".into(), Instant::now() - SHOW_AFTER));
        assert_eq!(
            bar.line(0.5).unwrap(),
            "loading llama:/m/x.gguf [############------------]  50%"
        );
        assert!(bar.line(1.0).unwrap().ends_with("100%\n"));
    }

    #[test]
    fn without_a_terminal_one_line_begins_a_long_load_and_one_ends_it() {
        let mut bar = LoadBar::new(false);
        bar.current = Some(("mlx:/m/d".into(), Instant::now() - SHOW_AFTER));
        assert_eq!(bar.line(0.2).unwrap(), "lrg: loading mlx:/m/d ...");
        bar.shown = true;
        assert_eq!(bar.line(0.6), None);
        assert!(
            bar.line(1.0)
                .unwrap()
                .starts_with("lrg: loaded mlx:/m/d in ")
        );
    }
}
