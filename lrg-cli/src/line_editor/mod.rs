//! `lrg chat`'s input on a terminal: a line editor (rustyline) at the
//! prompt, with history in lrg's data directory, Ctrl-R search, Tab
//! completion and multi-line messages (Alt+Enter, or a trailing `\`); and
//! while a turn runs, the keys typed held back (see [`hold`]), so they never
//! land in the middle of the reply.
//!
//! rustyline, not reedline: it reads a line and gives the terminal back,
//! which is what a chat whose reply streams between prompts needs (reedline
//! owns the screen while it reads), and it is simple to drive from a
//! pseudo-terminal in tests.
//!
//! One thread owns the editor and the terminal's input; the chat asks it
//! for a message, an answer, or to hold keys, over a channel. Piped input
//! never comes here: `lrg chat < script` reads lines as it always did.

mod helper;
#[cfg(unix)]
mod hold;

use std::path::PathBuf;
use std::sync::mpsc;

use rustyline::history::DefaultHistory;
use rustyline::{Behavior, Cmd, Config, Editor, KeyCode, KeyEvent, Modifiers};
use tokio::sync::oneshot;

pub use helper::Completions;
use helper::{ChatHelper, joined};
#[cfg(unix)]
pub use hold::Held;

/// What was typed while a turn ran (no holding on this platform).
#[cfg(not(unix))]
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Held {
    /// Lines ended with Enter, oldest first.
    pub queued: Vec<String>,
    /// The line left unfinished.
    pub partial: String,
}

/// Put the terminal back as it was (before an exit in the middle of a turn).
pub fn restore_terminal() {
    #[cfg(unix)]
    hold::restore();
}

/// How many messages the history keeps.
const HISTORY_SIZE: usize = 1000;

/// What reading a message gave.
#[derive(Debug)]
pub enum Read {
    /// A message (or a command).
    Line(String),
    /// Ctrl-C at the prompt.
    Interrupted,
    /// Ctrl-D, or input ended.
    End,
}

enum Request {
    Message {
        prompt: String,
        initial: String,
        reply: oneshot::Sender<Read>,
    },
    Answer {
        reply: oneshot::Sender<Option<String>>,
    },
    Hold,
    Release {
        reply: oneshot::Sender<Held>,
    },
}

/// The terminal's input, served by a thread of its own.
pub struct Terminal {
    requests: mpsc::Sender<Request>,
}

impl Terminal {
    /// Start the line editor on the terminal; the reason when it cannot
    /// (the caller reads plain lines then).
    pub fn start(completions: Completions) -> Result<Self, String> {
        let (requests, rx) = mpsc::channel();
        let (started, started_rx) = mpsc::channel();
        std::thread::Builder::new()
            .name("lrg-line-editor".into())
            .spawn(move || match editor(completions) {
                Ok((editor, history)) => {
                    let _ = started.send(Ok(()));
                    serve(editor, history.as_ref(), &rx);
                }
                Err(e) => {
                    let _ = started.send(Err(e));
                }
            })
            .map_err(|e| format!("cannot start the line editor: {e}"))?;
        started_rx
            .recv()
            .map_err(|_| "the line editor stopped as it started".to_string())??;
        Ok(Self { requests })
    }

    /// Read a message at `prompt`, the line starting as `initial`.
    pub async fn message(&self, prompt: &str, initial: &str) -> Read {
        let (reply, rx) = oneshot::channel();
        let request = Request::Message {
            prompt: prompt.to_string(),
            initial: initial.to_string(),
            reply,
        };
        if self.requests.send(request).is_err() {
            return Read::End;
        }
        rx.await.unwrap_or(Read::End)
    }

    /// Read an answer to a question just printed; `None` at end of input.
    /// Dropping the future gives the question up.
    pub async fn answer(&self) -> Option<String> {
        let (reply, rx) = oneshot::channel();
        if self.requests.send(Request::Answer { reply }).is_err() {
            return None;
        }
        rx.await.ok().flatten()
    }

    /// Holding keys while turns run, usable while this is borrowed for a
    /// question.
    pub fn holder(&self) -> Holder {
        Holder {
            requests: self.requests.clone(),
        }
    }
}

/// Holds what is typed while a turn runs (see [`Terminal::holder`]).
pub struct Holder {
    requests: mpsc::Sender<Request>,
}

impl Holder {
    /// A turn starts: hold what is typed until [`release`](Self::release).
    pub fn hold(&self) {
        let _ = self.requests.send(Request::Hold);
    }

    /// The turn ended: what was typed meanwhile.
    pub async fn release(&self) -> Held {
        let (reply, rx) = oneshot::channel();
        if self.requests.send(Request::Release { reply }).is_err() {
            return Held::default();
        }
        rx.await.unwrap_or_default()
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        // The thread ends when the channel closes; the terminal is given
        // back now, not when it notices.
        restore_terminal();
    }
}

/// The file of the chat history: `lrg/chat-history` in lrg's data directory
/// (where kept chats are too: `$XDG_DATA_HOME/lrg`, else
/// `~/.local/share/lrg`); `None` without either variable.
pub fn history_path() -> Option<PathBuf> {
    let sessions = lrg_chat::store::JsonlStore::default_dir()?;
    Some(sessions.parent()?.join("chat-history"))
}

type ChatEditor = Editor<ChatHelper, DefaultHistory>;

fn editor(completions: Completions) -> Result<(ChatEditor, Option<PathBuf>), String> {
    let config = Config::builder()
        // The terminal for the editor, even when stdout is a file: the
        // prompt and the typing are the person's, not the output's.
        .behavior(Behavior::PreferTerm)
        // lrg ends each reply's line itself; asking the terminal where its
        // cursor is would wait on terminals that do not answer.
        .check_cursor_position(false)
        .auto_add_history(false)
        .history_ignore_space(true)
        .max_history_size(HISTORY_SIZE)
        .and_then(|b| b.history_ignore_dups(true))
        .map_err(|e| format!("line editor settings: {e}"))?
        .build();
    let mut editor = ChatEditor::with_config(config)
        .map_err(|e| format!("cannot start the line editor: {e}"))?;
    editor.set_helper(Some(ChatHelper::new(completions)));
    editor.bind_sequence(KeyEvent(KeyCode::Enter, Modifiers::ALT), Cmd::Newline);
    let path = history_path();
    if let Some(path) = &path
        && let Err(e) = editor.load_history(path)
        && !matches!(&e, rustyline::error::ReadlineError::Io(io) if io.kind() == std::io::ErrorKind::NotFound)
    {
        eprintln!(
            "lrg: warning: the chat history in {} was not read: {e}",
            path.display()
        );
    }
    Ok((editor, path))
}

/// Answer the chat's requests until it drops its [`Terminal`].
fn serve(mut editor: ChatEditor, history: Option<&PathBuf>, requests: &mpsc::Receiver<Request>) {
    #[cfg(unix)]
    let mut keys: Option<hold::Keys> = None;
    #[cfg(unix)]
    let mut raw: Option<hold::Raw> = None;
    loop {
        #[cfg(unix)]
        let next = match keys.as_mut() {
            Some(keys) => keys.wait(requests),
            None => requests.recv().ok(),
        };
        #[cfg(not(unix))]
        let next = requests.recv().ok();
        let Some(request) = next else { break };
        match request {
            Request::Message {
                prompt,
                initial,
                reply,
            } => {
                #[cfg(unix)]
                {
                    raw = None;
                    keys = None;
                }
                let read = match editor.readline_with_initial(&prompt, (&initial, "")) {
                    Ok(line) => {
                        let line = joined(&line);
                        remember(&mut editor, history, &line);
                        Read::Line(line)
                    }
                    Err(rustyline::error::ReadlineError::Interrupted) => Read::Interrupted,
                    Err(_) => Read::End,
                };
                let _ = reply.send(read);
            }
            #[cfg(unix)]
            Request::Answer { reply } => {
                let was_held = raw.take().is_some();
                let answer = hold::read_answer(|| reply.is_closed());
                if was_held {
                    raw = hold::Raw::enter();
                }
                match answer {
                    hold::Answer::Line(line) => drop(reply.send(Some(line))),
                    hold::Answer::End => drop(reply.send(None)),
                    hold::Answer::Abandoned => {}
                }
            }
            #[cfg(not(unix))]
            Request::Answer { reply } => {
                use std::io::BufRead as _;
                let mut line = String::new();
                let answer = match std::io::stdin().lock().read_line(&mut line) {
                    Ok(0) | Err(_) => None,
                    Ok(_) => Some(line.trim_end_matches(['\n', '\r']).to_string()),
                };
                let _ = reply.send(answer);
            }
            Request::Hold =>
            {
                #[cfg(unix)]
                if keys.is_none() {
                    keys = Some(hold::Keys::default());
                    raw = hold::Raw::enter();
                }
            }
            Request::Release { reply } => {
                #[cfg(unix)]
                let held = {
                    raw = None;
                    keys.take().map(hold::Keys::into_held).unwrap_or_default()
                };
                #[cfg(not(unix))]
                let held = Held::default();
                for line in &held.queued {
                    remember(&mut editor, history, line);
                }
                let _ = reply.send(held);
            }
        }
    }
    restore_terminal();
}

/// Add `line` to the history, and to its file (created only you can read).
fn remember(editor: &mut ChatEditor, path: Option<&PathBuf>, line: &str) {
    if line.trim().is_empty() {
        return;
    }
    if !matches!(editor.add_history_entry(line), Ok(true)) {
        return;
    }
    if let Some(path) = path {
        if let Some(dir) = path.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        if let Err(e) = editor.append_history(path) {
            eprintln!(
                "lrg: warning: the chat history could not be saved to {}: {e}",
                path.display()
            );
        }
    }
}
