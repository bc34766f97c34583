//! Waiting for a tool call: its answer, its timeout (which does not run
//! while the server's question waits for the person), or the person's
//! stop, after which it gets [`STOP_GRACE`] to finish on its own.

use std::future::Future;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use super::link::Link;

/// How long a call still running when the person stops may take to finish
/// on its own (its result is then kept); after that it is cancelled: the
/// server is sent `notifications/cancelled`.
pub(crate) const STOP_GRACE: Duration = Duration::from_secs(2);

/// Why a call was given up.
pub(super) enum Cut {
    /// The person stopped, and it did not finish within [`STOP_GRACE`].
    Stopped,
    /// It ran past the call timeout.
    TimedOut,
}

/// Wait for a call: its answer, unless it runs past `timeout` (time a
/// person spends answering the server's questions not counted), or
/// the person stops and it does not finish within [`STOP_GRACE`].
/// Either way the caller drops the request and tells the server with
/// `notifications/cancelled`.
pub(super) async fn wait_for_call<F: Future>(
    link: &Link,
    call: F,
    token: &str,
    timeout: Duration,
    cancel: &CancellationToken,
) -> Result<F::Output, Cut> {
    let started = Instant::now();
    let mut stop_by: Option<Instant> = None;
    let mut call = std::pin::pin!(call);
    loop {
        let (asked, open) = link.asked(token);
        let deadline = started + timeout + asked;
        // While a question is open the deadline moves: look again soon.
        let mut wake = if open {
            Instant::now() + Duration::from_secs(1)
        } else {
            deadline
        };
        if let Some(stop) = stop_by {
            wake = wake.min(stop);
        }
        tokio::select! {
            out = &mut call => return Ok(out),
            () = cancel.cancelled(), if stop_by.is_none() => {
                stop_by = Some(Instant::now() + STOP_GRACE);
            }
            () = tokio::time::sleep_until(wake.into()) => {
                let now = Instant::now();
                if stop_by.is_some_and(|s| now >= s) {
                    return Err(Cut::Stopped);
                }
                let (asked, open) = link.asked(token);
                if !open && now >= started + timeout + asked {
                    return Err(Cut::TimedOut);
                }
            }
        }
    }
}
