//! The terminal while a turn runs: what the person types is held, not
//! echoed into the reply, and an answer to a question is read as typed.
//!
//! Holding turns the terminal's echo and line mode off (the keys are read
//! one by one, shown nowhere) and leaves its signals on, so Ctrl-C still
//! reaches lrg as SIGINT and stops the turn. The settings before are kept
//! here, and [`restore`] puts them back even on a sudden exit.

use std::os::fd::AsFd as _;
use std::sync::Mutex;
use std::sync::mpsc::{Receiver, TryRecvError};

use nix::poll::{PollFd, PollFlags, PollTimeout};
use nix::sys::termios::{self, LocalFlags, SetArg, SpecialCharacterIndices, Termios};

/// How long a wait for keys lasts before requests are looked at again.
fn tick() -> PollTimeout {
    PollTimeout::from(50u8)
}

/// The terminal's settings before holding began, while it is held.
static SAVED: Mutex<Option<Termios>> = Mutex::new(None);

/// Put the terminal back as it was before holding (a no-op when not
/// holding). Called before any exit, so no shell is left without echo.
pub fn restore() {
    let saved = SAVED
        .lock()
        .map_or_else(|e| e.into_inner().take(), |mut s| s.take());
    if let Some(saved) = saved {
        let _ = termios::tcsetattr(std::io::stdin().as_fd(), SetArg::TCSANOW, &saved);
    }
}

/// The terminal held: no echo, keys one by one. Dropping it restores the
/// terminal.
pub struct Raw(());

impl Raw {
    /// Hold the terminal; `None` when its settings cannot be read or set
    /// (then typed keys echo, as they always did).
    pub fn enter() -> Option<Self> {
        let stdin = std::io::stdin();
        let saved = termios::tcgetattr(stdin.as_fd()).ok()?;
        let mut held = saved.clone();
        held.local_flags
            .remove(LocalFlags::ECHO | LocalFlags::ICANON | LocalFlags::IEXTEN);
        // Signals on (Ctrl-C stops the turn), and a Ctrl-C flushes neither
        // what was typed before it nor the reply on its way out.
        held.local_flags
            .insert(LocalFlags::ISIG | LocalFlags::NOFLSH);
        held.control_chars[SpecialCharacterIndices::VMIN as usize] = 1;
        held.control_chars[SpecialCharacterIndices::VTIME as usize] = 0;
        if let Ok(mut s) = SAVED.lock() {
            *s = Some(saved);
        }
        termios::tcsetattr(stdin.as_fd(), SetArg::TCSANOW, &held).ok()?;
        Some(Self(()))
    }
}

impl Drop for Raw {
    fn drop(&mut self) {
        restore();
    }
}

/// The keys typed while a turn runs.
#[derive(Debug, Default)]
pub struct Keys {
    /// Lines ended with Enter: messages to send after the turn.
    queued: Vec<String>,
    /// The line being typed (bytes: a character may come in pieces).
    line: Vec<u8>,
    escape: Escape,
    /// Input ended (the terminal hung up).
    ended: bool,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum Escape {
    #[default]
    None,
    /// After ESC.
    Start,
    /// In a CSI or SS3 sequence (an arrow key, a function key).
    Sequence,
}

/// What was typed while a turn ran.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Held {
    /// Lines ended with Enter, oldest first.
    pub queued: Vec<String>,
    /// The line left unfinished.
    pub partial: String,
}

impl Keys {
    /// Take in typed bytes. Editing is kept to what needs no display:
    /// Backspace, Ctrl-U (the line), Ctrl-W (a word); a trailing `\` and
    /// Enter continue the line; arrows and other sequences are dropped.
    pub fn feed(&mut self, bytes: &[u8]) {
        for &b in bytes {
            match self.escape {
                Escape::Start => {
                    self.escape = if b == b'[' || b == b'O' {
                        Escape::Sequence
                    } else {
                        Escape::None
                    };
                    continue;
                }
                Escape::Sequence => {
                    if (0x40..=0x7e).contains(&b) {
                        self.escape = Escape::None;
                    }
                    continue;
                }
                Escape::None => {}
            }
            match b {
                0x1b => self.escape = Escape::Start,
                b'\r' | b'\n' if self.line.last() == Some(&b'\\') => {
                    self.line.pop();
                    self.line.push(b'\n');
                }
                b'\r' | b'\n' => {
                    let line = String::from_utf8_lossy(&self.line).trim().to_string();
                    self.line.clear();
                    if !line.is_empty() {
                        self.queued.push(line);
                    }
                }
                0x7f | 0x08 => self.backspace(),
                0x15 => self.line.clear(),
                0x17 => {
                    while self.line.last().is_some_and(u8::is_ascii_whitespace) {
                        self.line.pop();
                    }
                    while self.line.last().is_some_and(|c| !c.is_ascii_whitespace()) {
                        self.backspace();
                    }
                }
                b'\t' => self.line.push(b' '),
                b if b < 0x20 => {}
                b => self.line.push(b),
            }
        }
    }

    /// Remove the last character (all its UTF-8 bytes).
    fn backspace(&mut self) {
        while let Some(b) = self.line.pop() {
            if b & 0xc0 != 0x80 {
                break;
            }
        }
    }

    /// What was typed.
    pub fn into_held(self) -> Held {
        Held {
            queued: self.queued,
            partial: String::from_utf8_lossy(&self.line).into_owned(),
        }
    }

    /// Wait for the next request, taking in keys meanwhile; `None` when
    /// the requests ended.
    pub fn wait<T>(&mut self, requests: &Receiver<T>) -> Option<T> {
        loop {
            match requests.try_recv() {
                Ok(request) => return Some(request),
                Err(TryRecvError::Disconnected) => return None,
                Err(TryRecvError::Empty) => {}
            }
            if self.ended {
                match requests.recv_timeout(std::time::Duration::from_millis(50)) {
                    Ok(request) => return Some(request),
                    Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => return None,
                    Err(std::sync::mpsc::RecvTimeoutError::Timeout) => continue,
                }
            }
            match readable() {
                Ready::Yes => {
                    let mut buf = [0u8; 256];
                    match nix::unistd::read(std::io::stdin().as_fd(), &mut buf) {
                        Ok(0) | Err(_) => self.ended = true,
                        Ok(n) => self.feed(&buf[..n]),
                    }
                }
                Ready::Ended => self.ended = true,
                Ready::No => {}
            }
        }
    }
}

enum Ready {
    Yes,
    No,
    Ended,
}

/// Whether stdin has bytes, waiting at most a [`tick`].
fn readable() -> Ready {
    let stdin = std::io::stdin();
    let mut fds = [PollFd::new(stdin.as_fd(), PollFlags::POLLIN)];
    match nix::poll::poll(&mut fds, tick()) {
        Ok(0) => Ready::No,
        Ok(_) => match fds[0].revents() {
            Some(r) if r.contains(PollFlags::POLLIN) => Ready::Yes,
            Some(r)
                if r.intersects(PollFlags::POLLHUP | PollFlags::POLLERR | PollFlags::POLLNVAL) =>
            {
                Ready::Ended
            }
            _ => Ready::No,
        },
        Err(nix::errno::Errno::EINTR) => Ready::No,
        Err(_) => Ready::Ended,
    }
}

/// An answer read as typed (the terminal's own line editing and echo).
pub enum Answer {
    /// The line, without its newline.
    Line(String),
    /// Input ended.
    End,
    /// Nobody waits for it any more (the question was withdrawn).
    Abandoned,
}

/// Read one line, the terminal in its usual mode; given up when
/// `abandoned` says so.
pub fn read_answer(abandoned: impl Fn() -> bool) -> Answer {
    let mut line = Vec::new();
    loop {
        if abandoned() {
            return Answer::Abandoned;
        }
        match readable() {
            Ready::No => continue,
            Ready::Ended => return Answer::End,
            Ready::Yes => {}
        }
        let mut buf = [0u8; 1024];
        match nix::unistd::read(std::io::stdin().as_fd(), &mut buf) {
            Ok(0) | Err(_) if line.is_empty() => return Answer::End,
            Ok(0) | Err(_) => break,
            Ok(n) => {
                line.extend_from_slice(&buf[..n]);
                if line.ends_with(b"\n") {
                    break;
                }
            }
        }
    }
    let text = String::from_utf8_lossy(&line);
    Answer::Line(text.trim_end_matches(['\n', '\r']).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn typed(bytes: &[u8]) -> Held {
        let mut keys = Keys::default();
        // One byte at a time: sequences split across reads.
        for b in bytes {
            keys.feed(std::slice::from_ref(b));
        }
        keys.into_held()
    }

    #[test]
    fn enter_queues_a_line_and_the_rest_is_left_for_the_prompt() {
        assert_eq!(
            typed(b"first\rsecond\nthi"),
            Held {
                queued: vec!["first".into(), "second".into()],
                partial: "thi".into()
            }
        );
    }

    #[test]
    fn editing_keys_and_escape_sequences() {
        // Left arrow, Alt+x, Backspace, Ctrl-U, Ctrl-W, an empty Enter.
        assert_eq!(typed(b"ab\x1b[Dc\x1bx\x7f\r\r").queued, vec!["ab"]);
        assert_eq!(typed(b"junk\x15kept\r").queued, vec!["kept"]);
        assert_eq!(typed(b"one two\x17\r").queued, vec!["one"]);
        assert_eq!(typed("café\x7f\x7f!\r".as_bytes()).queued, vec!["ca!"]);
        assert_eq!(typed(b"a \\\rb\r").queued, vec!["a \nb"]);
        assert_eq!(typed(b"\x1bOPf1\r").queued, vec!["f1"]);
    }
}
