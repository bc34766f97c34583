//! One CLI process per turn: started in its own process group with an empty
//! scratch directory as its cwd, fed its prompt on stdin, its stdout split
//! into lines for a [`Decoder`]. Cancelling, going silent too long, failing
//! to parse, or dropping the stream kills the whole group, so nothing the
//! CLI started outlives the turn.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

#[cfg(unix)]
use process_wrap::tokio::ProcessGroup;
use process_wrap::tokio::{ChildWrapper, CommandWrap, KillOnDrop};
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _, BufReader};
use tokio_util::sync::CancellationToken;

use super::spec::{CliSpec, not_found};
use crate::wire::{Decoder, Frame, Framer, Framing};
use crate::{ProviderError, StopReason, TurnEvent, TurnStream};

/// Lines of stderr kept to explain a failure.
const TAIL_LINES: usize = 8;
/// How long a dead or killed process may take to be reaped.
const REAP: Duration = Duration::from_secs(5);

/// Everything one turn's process needs.
pub(crate) struct Invocation {
    pub spec: &'static CliSpec,
    pub program: PathBuf,
    pub args: Vec<OsString>,
    pub stdin: String,
    pub idle_timeout: Duration,
}

/// Run `invocation`, decoding its output with `decoder`.
pub(crate) fn run(
    invocation: Invocation,
    mut decoder: Box<dyn Decoder>,
    cancel: CancellationToken,
) -> TurnStream {
    let name = invocation.spec.name;
    let idle = invocation.idle_timeout;
    Box::pin(async_stream::stream! {
        let (mut group, _scratch) = match spawn(&invocation).await {
            Ok(started) => started,
            Err(e) => {
                yield Err(e);
                return;
            }
        };
        tracing::debug!(cli = name, args = invocation.args.len(), "cli agent turn");
        let child = &mut group.0;
        let writer = child.stdin().take().map(|mut stdin| {
            let text = invocation.stdin.clone();
            // Written apart from the reading, so a long prompt cannot
            // deadlock against a full stdout pipe; closed when done.
            tokio::spawn(async move {
                let _ = stdin.write_all(text.as_bytes()).await;
                let _ = stdin.shutdown().await;
            })
        });
        let stderr = child.stderr().take().map(|stderr| tokio::spawn(tail(stderr)));
        let Some(mut stdout) = child.stdout().take() else {
            yield Err(ProviderError::Other { message: format!("{name}: no output pipe") });
            return;
        };
        let mut framer = Framer::new(Framing::Ndjson);
        let mut frames: Vec<Frame> = Vec::new();
        let mut events: Vec<TurnEvent> = Vec::new();
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            let read = tokio::select! {
                _ = cancel.cancelled() => {
                    kill(child.as_mut()).await;
                    yield Ok(TurnEvent::End { stop: StopReason::Cancelled });
                    return;
                }
                r = tokio::time::timeout(idle, stdout.read(&mut buf)) => r,
            };
            let n = match read {
                Err(_) => {
                    kill(child.as_mut()).await;
                    yield Err(ProviderError::transient(format!(
                        "{name} went silent for {}s; stopped it", idle.as_secs()
                    )));
                    return;
                }
                Ok(Err(e)) => {
                    kill(child.as_mut()).await;
                    yield Err(ProviderError::transient(format!("{name}: reading its output failed: {e}")));
                    return;
                }
                Ok(Ok(n)) => n,
            };
            if n == 0 {
                framer.finish(&mut frames);
            } else {
                framer.push(&buf[..n], &mut frames);
            }
            for frame in frames.drain(..) {
                if let Err(e) = decoder.decode(&frame, &mut events) {
                    for event in events.drain(..) {
                        yield Ok(event);
                    }
                    kill(child.as_mut()).await;
                    yield Err(e);
                    return;
                }
            }
            if n == 0 {
                break;
            }
            for event in events.drain(..) {
                yield Ok(event);
            }
        }
        // The output is over: how did the process end?
        let status = tokio::select! {
            _ = cancel.cancelled() => {
                kill(child.as_mut()).await;
                yield Ok(TurnEvent::End { stop: StopReason::Cancelled });
                return;
            }
            s = tokio::time::timeout(REAP, child.wait()) => s,
        };
        if let Some(writer) = writer {
            writer.abort();
        }
        let ended = decoder.finish(&mut events);
        for event in events.drain(..) {
            yield Ok(event);
        }
        if let Err(e) = ended {
            let status = match status {
                Ok(Ok(status)) => Some(status),
                _ => {
                    kill(child.as_mut()).await;
                    None
                }
            };
            let tail = match stderr {
                Some(task) => tokio::time::timeout(REAP, task).await.ok().and_then(Result::ok).unwrap_or_default(),
                None => String::new(),
            };
            yield Err(exit_error(name, status, &tail, e));
        }
    })
}

/// Start the process: its own group, killed when dropped, cwd an empty
/// scratch directory (returned, to live as long as the process).
async fn spawn(invocation: &Invocation) -> Result<(Group, tempfile::TempDir), ProviderError> {
    let spec = invocation.spec;
    let scratch = tempfile::Builder::new()
        .prefix("lrg-cli-agent-")
        .tempdir()
        .map_err(|e| ProviderError::Other {
            message: format!("{}: cannot make a scratch directory: {e}", spec.name),
        })?;
    let mut cmd = tokio::process::Command::new(&invocation.program);
    cmd.args(&invocation.args)
        .current_dir(scratch.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // Only the base set and the vendor's own names: never another
    // vendor's keys, nor an lrg token.
    let policy = spec.env;
    crate::child_env::apply(&mut cmd, |name| policy.passes(name));
    let mut wrapped = CommandWrap::from(cmd);
    #[cfg(unix)]
    wrapped.wrap(ProcessGroup::leader());
    wrapped.wrap(KillOnDrop);
    let child = crate::retry::while_executable_busy(|| wrapped.spawn())
        .await
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => ProviderError::Config {
                message: not_found(spec),
            },
            _ => ProviderError::Other {
                message: format!("cannot start {}: {e}", spec.name),
            },
        })?;
    Ok((Group(child), scratch))
}

/// The running process group. Dropping it (the turn's stream dropped
/// mid-way, or the turn over) kills the whole group: tokio's kill-on-drop
/// would reach only the CLI itself, not what it started.
struct Group(Box<dyn ChildWrapper>);

impl Drop for Group {
    fn drop(&mut self) {
        let _ = self.0.start_kill();
    }
}

/// Kill the whole group and reap the process.
async fn kill(child: &mut dyn ChildWrapper) {
    let _ = child.start_kill();
    let _ = tokio::time::timeout(REAP, child.wait()).await;
}

/// The last lines of stderr, joined.
async fn tail(stderr: tokio::process::ChildStderr) -> String {
    let mut lines = BufReader::new(stderr).lines();
    let mut kept: VecDeque<String> = VecDeque::new();
    while let Ok(Some(line)) = lines.next_line().await {
        if kept.len() == TAIL_LINES {
            kept.pop_front();
        }
        kept.push_back(line);
    }
    kept.into_iter().collect::<Vec<_>>().join("\n")
}

/// Why a turn whose output stopped short failed: the exit status and the
/// last words on stderr say more than the parser can.
fn exit_error(
    name: &str,
    status: Option<ExitStatus>,
    stderr: &str,
    parsed: ProviderError,
) -> ProviderError {
    let said = if stderr.trim().is_empty() {
        String::new()
    } else {
        format!(
            "; its last output:\n{}",
            crate::text::truncate(stderr.trim(), 1_500)
        )
    };
    match status {
        Some(status) if status.success() => parsed,
        Some(status) => match status.code() {
            // A plain failure stays fatal; what the text marks as transient
            // (rate limits, overload) is retried.
            Some(code) => {
                super::lines::cli_error(name, &format!("exited with status {code}{said}"))
            }
            None => ProviderError::transient(format!("{name} was killed by a signal{said}")),
        },
        None => ProviderError::transient(format!("{name} did not exit in time{said}")),
    }
}
