//! Child-process MCP servers: spawning them so that nothing outlives its
//! handle, and keeping the last lines of their stderr to explain failures.

use std::collections::VecDeque;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[cfg(unix)]
use process_wrap::tokio::ProcessGroup;
use process_wrap::tokio::{CommandWrap, KillOnDrop};
use tokio::io::{AsyncBufReadExt as _, BufReader};
use tokio::process::ChildStderr;
use tokio::task::JoinHandle;

use super::capped::CappedChild;
use super::config::StdioServerConfig;

/// Lines of a child's stderr kept to explain why it failed.
const TAIL_LINES: usize = 12;
/// Characters of that tail put into a message.
const TAIL_CHARS: usize = 800;
/// How long to wait for a dead child's stderr to be drained.
const SETTLE: Duration = Duration::from_millis(500);

/// Start the server process, no message from it over `max_message` bytes
/// (see [`CappedChild`]); its stderr is piped, for [`StderrTail`].
pub(crate) fn spawn(
    cfg: &StdioServerConfig,
    max_message: usize,
) -> Result<(CappedChild, Option<ChildStderr>), String> {
    let mut cmd = tokio::process::Command::new(&cfg.command);
    // A clean environment: the base set, what the entry asks to inherit,
    // then its own `env` (see `config`'s docs). lrg's keys and tokens stay here.
    lrg_providers::child_env::apply(&mut cmd, |name| cfg.inherit_env.passes(name));
    cmd.args(&cfg.args)
        .envs(&cfg.env)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(dir) = &cfg.cwd {
        cmd.current_dir(dir);
    }
    let mut wrapped = CommandWrap::from(cmd);
    // Its own process group, so that stopping the server also stops what it
    // started (`npx` runs the real server as a grandchild); killed when
    // dropped, so no path leaves it running.
    #[cfg(unix)]
    wrapped.wrap(ProcessGroup::leader());
    wrapped.wrap(KillOnDrop);
    wrapped
        .spawn()
        .and_then(|child| CappedChild::new(child, max_message))
        .map_err(|e| {
            let hint = if e.kind() == std::io::ErrorKind::NotFound {
                " (is it installed and on PATH?)"
            } else {
                ""
            };
            format!("cannot run `{}`: {e}{hint}", cfg.command)
        })
}

/// The last lines a server process wrote to stderr. Its log goes to
/// `tracing` (debug), not to our terminal.
#[derive(Default)]
pub(crate) struct StderrTail {
    lines: Arc<Mutex<VecDeque<String>>>,
    reader: Mutex<Option<JoinHandle<()>>>,
}

impl StderrTail {
    /// Follow a newly started process's stderr (forgetting the previous one's).
    pub(crate) fn follow(&self, server: &str, stderr: ChildStderr) {
        if let Ok(mut l) = self.lines.lock() {
            l.clear();
        }
        let lines = self.lines.clone();
        let server = server.to_owned();
        let reader = tokio::spawn(async move {
            let mut input = BufReader::new(stderr).lines();
            while let Ok(Some(line)) = input.next_line().await {
                tracing::debug!(server = %server, "{line}");
                if let Ok(mut l) = lines.lock() {
                    if l.len() == TAIL_LINES {
                        l.pop_front();
                    }
                    l.push_back(line);
                }
            }
        });
        if let Ok(mut r) = self.reader.lock() {
            *r = Some(reader);
        }
    }

    /// Give the reader a moment to read a dead child's last words: the pipe
    /// to it breaks before its stderr has been drained.
    pub(crate) async fn settled(&self) {
        let reader = self.reader.lock().ok().and_then(|mut r| r.take());
        if let Some(reader) = reader {
            let _ = tokio::time::timeout(SETTLE, reader).await;
        }
    }

    /// `message`, followed by the last lines, if any.
    pub(crate) fn append_to(&self, message: String) -> String {
        let tail: Vec<String> = match self.lines.lock() {
            Ok(l) => l.iter().cloned().collect(),
            Err(_) => Vec::new(),
        };
        if tail.is_empty() {
            return message;
        }
        let mut text = tail.join("\n");
        if text.len() > TAIL_CHARS {
            let cut = text.len() - TAIL_CHARS;
            let cut = (cut..text.len())
                .find(|i| text.is_char_boundary(*i))
                .unwrap_or(text.len());
            text = format!("…{}", &text[cut..]);
        }
        format!("{message}; its last output:\n{text}")
    }
}
