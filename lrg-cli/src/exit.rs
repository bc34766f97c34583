//! Exit codes and the error type that carries one.

use std::fmt;
use std::process::ExitCode;

/// How a command ended, as the process exit status (see [`crate::cli::EXIT_CODES`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// 0: the model replied (or a listing command succeeded).
    Replied = 0,
    /// 1: a model or tool error ended the run.
    Failed = 1,
    /// 2: bad usage or configuration.
    Usage = 2,
    /// 3: stopped, or the step limit ran out.
    Stopped = 3,
}

impl From<Exit> for ExitCode {
    fn from(exit: Exit) -> Self {
        ExitCode::from(exit as u8)
    }
}

/// A failure with the exit code it maps to.
#[derive(Debug)]
pub struct CliError {
    /// The exit code.
    pub exit: Exit,
    /// What went wrong, for the person.
    pub error: anyhow::Error,
}

impl CliError {
    /// Bad usage or configuration (exit 2).
    pub fn usage(error: impl Into<anyhow::Error>) -> Self {
        Self {
            exit: Exit::Usage,
            error: error.into(),
        }
    }

    /// A model or tool error (exit 1).
    pub fn failed(error: impl Into<anyhow::Error>) -> Self {
        Self {
            exit: Exit::Failed,
            error: error.into(),
        }
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#}", self.error)
    }
}

/// Shorthand for a usage error from a message.
#[macro_export]
macro_rules! usage {
    ($($t:tt)*) => { $crate::exit::CliError::usage(anyhow::anyhow!($($t)*)) };
}
