//! Reading the person's input: the prompt of `lrg run`, and lines for the
//! REPL and approval questions.

use std::io::{BufRead as _, IsTerminal as _, Read as _};

use tokio::sync::mpsc;

use crate::exit::CliError;
use crate::usage;

/// Whether a person can answer questions here: stdin and stderr (where the
/// questions go) are both a terminal.
pub fn interactive() -> bool {
    std::io::stdin().is_terminal() && std::io::stderr().is_terminal()
}

/// The message of `lrg run`: the argument, or stdin for `-` (or for no
/// argument when stdin is not a terminal).
pub async fn prompt(arg: Option<String>) -> Result<String, CliError> {
    let from_stdin = match arg.as_deref() {
        Some("-") => true,
        Some(_) => false,
        None if std::io::stdin().is_terminal() => {
            return Err(usage!(
                "no message: give a PROMPT, or `-` to read it from stdin"
            ));
        }
        None => true,
    };
    let text = if from_stdin {
        tokio::task::spawn_blocking(|| {
            let mut text = String::new();
            std::io::stdin().read_to_string(&mut text).map(|_| text)
        })
        .await
        .map_err(|e| usage!("reading stdin: {e}"))?
        .map_err(|e| usage!("reading the message from stdin: {e}"))?
    } else {
        arg.unwrap_or_default()
    };
    if text.trim().is_empty() {
        return Err(usage!("the message is empty"));
    }
    Ok(text)
}

/// Lines from stdin, read on a thread of their own so a pending read never
/// holds up the runtime; one reader serves both the REPL and approvals, so a
/// line typed after a question was withdrawn (Ctrl-C) goes to the next
/// reader instead of being lost in a stale read.
pub struct Lines {
    rx: mpsc::Receiver<String>,
}

impl Lines {
    /// Start reading stdin.
    pub fn stdin() -> Self {
        let (tx, rx) = mpsc::channel(16);
        std::thread::spawn(move || {
            let stdin = std::io::stdin();
            let mut lock = stdin.lock();
            loop {
                let mut line = String::new();
                match lock.read_line(&mut line) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {
                        if tx
                            .blocking_send(line.trim_end_matches(['\n', '\r']).to_string())
                            .is_err()
                        {
                            break;
                        }
                    }
                }
            }
        });
        Self { rx }
    }

    /// The next line; `None` at end of input.
    pub async fn next(&mut self) -> Option<String> {
        self.rx.recv().await
    }
}
