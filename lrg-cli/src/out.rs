//! Stdout, owned in one place: every command prints its output here, and
//! here alone a failed write is noticed. Stderr's macros live here too.
//!
//! Rust ignores SIGPIPE, so a write to a pipe whose reader went away
//! (`lrg tools --json | head -1`) returns `EPIPE`, and `println!` panics on
//! it. Restoring SIGPIPE's default would kill lrg on that write instead:
//! quiet, but with no cleanup at all. The MCP servers would be left to
//! notice their stdin closing (they run in process groups of their own, so
//! the signal misses them, and their kill-on-drop never runs in a killed
//! process), a session would not be saved and a recording not finished. So a failed write is recorded instead: from then
//! on nothing more is written, the commands stop their work the way they
//! end normally (a run stops its turn as Ctrl-C does, a chat ends, `lrg
//! serve` shuts down), and [`exit_code`] turns the record into the exit
//! status.
//!
//! Exit status when the reader went away: 0, as ripgrep, fd and ruff do.
//! The reader took what it wanted (`head -1` got its line); the work that
//! was left is not wanted, and a pipeline under `set -o pipefail` must not
//! fail for it. A SIGPIPE-style 141 would make every `| head` a failure.
//! Any other write error (a full disk behind `> file`, `/dev/full`) is a
//! real failure: one line on stderr names it, and the exit status is 1.

use std::fmt::{self, Display};
use std::io::{self, Write as _};
use std::process::ExitCode;
use std::sync::OnceLock;

use crate::exit::{CliError, Exit};

/// std's `eprintln!`, less its panic when stderr cannot be written (its
/// reader went away: `2> >(head -1)`, a supervisor that stopped reading).
/// Such a panic in the event printer's task killed the printer, and with it
/// the reply on stdout. A message stderr cannot take is dropped; the work
/// and its stdout go on. It replaces std's in every module (`#[macro_use]`
/// on this module, declared first).
macro_rules! eprintln {
    () => {
        $crate::out::to_stderr(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::out::to_stderr(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// std's `eprint!`, with the difference of `eprintln!` above.
macro_rules! eprint {
    ($($arg:tt)*) => {
        $crate::out::to_stderr(format_args!($($arg)*))
    };
}

/// Write to stderr, dropping what it cannot take (see `eprintln!` above).
pub fn to_stderr(args: fmt::Arguments<'_>) {
    let _ = io::stderr().lock().write_fmt(args);
}

/// Why stdout stopped taking output.
#[derive(Debug)]
enum Stopped {
    /// The reader closed its end of the pipe (`EPIPE`).
    ReaderGone,
    /// Any other write error.
    Failed(io::Error),
}

/// The first failed write; set once, never cleared.
static STOPPED: OnceLock<Stopped> = OnceLock::new();

/// Print `text` on stdout, flushed at once (output is streamed to scripts
/// as it comes). After a failed write this does nothing.
pub fn print(text: impl Display) {
    write(|out| write!(out, "{text}"));
}

/// Print `text` and a newline on stdout (see [`print()`]).
pub fn line(text: impl Display) {
    write(|out| writeln!(out, "{text}"));
}

fn write(put: impl FnOnce(&mut io::StdoutLock<'static>) -> io::Result<()>) {
    if stopped() {
        return;
    }
    let mut out = io::stdout().lock();
    if let Err(e) = put(&mut out).and_then(|()| out.flush()) {
        let why = if e.kind() == io::ErrorKind::BrokenPipe {
            Stopped::ReaderGone
        } else {
            Stopped::Failed(e)
        };
        let _ = STOPPED.set(why);
    }
}

/// Whether stdout stopped taking output: the command should stop its work
/// and end as it normally would, since nothing it does can be shown.
pub fn stopped() -> bool {
    STOPPED.get().is_some()
}

/// The process exit status for a command's `result`, printing its error
/// (and a stdout write error) on stderr.
///
/// When the reader went away, a command's own `Ok` status becomes 0: that
/// status (a stopped run, a listed server failure) was told in the output
/// nobody read. An `Err` is about something else and keeps its code.
pub fn exit_code(result: Result<Exit, CliError>) -> ExitCode {
    let (exit, errored) = match result {
        Ok(exit) => (exit, false),
        Err(err) => {
            eprintln!("lrg: {err}");
            (err.exit, true)
        }
    };
    let exit = match STOPPED.get() {
        None => exit,
        Some(Stopped::ReaderGone) if errored => exit,
        Some(Stopped::ReaderGone) => Exit::Replied,
        Some(Stopped::Failed(e)) => {
            eprintln!("lrg: cannot write the output to stdout: {e}");
            if errored { exit } else { Exit::Failed }
        }
    };
    exit.into()
}
