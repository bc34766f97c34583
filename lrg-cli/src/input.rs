//! Reading the person's input: the prompt of `lrg run`, and lines for the
//! REPL and approval questions.

use std::io::{BufRead as _, IsTerminal as _, Read as _};

use tokio::sync::mpsc;

use crate::exit::CliError;
use crate::line_editor;
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
///
/// On a terminal, `lrg chat` reads through the line editor instead
/// ([`Lines::terminal`]); piped input is read as plain lines, always.
pub struct Lines(Source);

enum Source {
    Piped(mpsc::Receiver<String>),
    Terminal(line_editor::Terminal),
}

/// What [`Lines::message`] read.
pub type Message = line_editor::Read;

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
        Self(Source::Piped(rx))
    }

    /// The line editor when stdin is a terminal (and it starts), else
    /// [`stdin`](Self::stdin)'s plain lines.
    pub fn terminal(completions: line_editor::Completions) -> Self {
        if !std::io::stdin().is_terminal() {
            return Self::stdin();
        }
        match line_editor::Terminal::start(completions) {
            Ok(terminal) => Self(Source::Terminal(terminal)),
            Err(e) => {
                eprintln!("lrg: warning: {e}; reading plain lines");
                Self::stdin()
            }
        }
    }

    /// The next line, as an answer to a question just printed; `None` at
    /// end of input.
    pub async fn next(&mut self) -> Option<String> {
        match &mut self.0 {
            Source::Piped(rx) => rx.recv().await,
            Source::Terminal(t) => t.answer().await,
        }
    }

    /// The next message: at the line editor's `prompt`, its line starting
    /// as `initial`; piped, the next line (the caller printed the prompt).
    pub async fn message(&mut self, prompt: &str, initial: &str) -> Message {
        match &mut self.0 {
            Source::Piped(rx) => rx.recv().await.map_or(Message::End, Message::Line),
            Source::Terminal(t) => t.message(prompt, initial).await,
        }
    }

    /// What holds the keys typed while a turn runs: the line editor's;
    /// `None` when piped (lines typed then are simply the next ones).
    pub fn holder(&self) -> Option<line_editor::Holder> {
        match &self.0 {
            Source::Piped(_) => None,
            Source::Terminal(t) => Some(t.holder()),
        }
    }
}
