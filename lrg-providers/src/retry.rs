//! Exponential backoff with jitter and a cap, honouring a server's retry-after.

use std::time::Duration;

use rand::Rng as _;

/// Runs `spawn` (a process start), retrying briefly while the executable is
/// "busy".
///
/// Linux refuses to exec a file that some process still holds open for
/// writing (`ETXTBSY`). A launcher written just before the start (a venv
/// wrapper, a fake CLI in a test) can be held open that way for a moment by
/// a child that another thread forked while the file was being written; that
/// child drops it at its own exec, so a few short retries (about 1.3 s in
/// all) are enough. Any other outcome is returned at once.
pub async fn while_executable_busy<T>(
    mut spawn: impl FnMut() -> std::io::Result<T>,
) -> std::io::Result<T> {
    let mut delay = Duration::from_millis(5);
    for _ in 0..8 {
        match spawn() {
            Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy => {
                tokio::time::sleep(delay).await;
                delay *= 2;
            }
            other => return other,
        }
    }
    spawn()
}

/// How transient errors are retried.
#[derive(Debug, Clone, PartialEq)]
pub struct RetryPolicy {
    /// Retries after the first attempt (0 = never retry).
    pub max_retries: u32,
    /// Delay before the first retry; doubles each time.
    pub base_delay: Duration,
    /// No delay exceeds this, whatever the attempt or the server asks.
    pub max_delay: Duration,
    /// How long a turn may go on retrying, counted from its first attempt:
    /// a retry that would start after this is not made, and the turn ends
    /// with the last error, saying so. `None`: only `max_retries` counts.
    /// Default [`DEFAULT_RETRY_DEADLINE`] (3 min), so a model that hangs
    /// costs a few minutes, not `max_retries` × the stall timeout.
    pub deadline: Option<Duration>,
}

/// Default [`RetryPolicy::deadline`]: 3 minutes.
pub const DEFAULT_RETRY_DEADLINE: Duration = Duration::from_secs(180);

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_retries: 4,
            base_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(30),
            deadline: Some(DEFAULT_RETRY_DEADLINE),
        }
    }
}

impl RetryPolicy {
    /// A policy that never retries.
    pub fn none() -> Self {
        Self {
            max_retries: 0,
            ..Self::default()
        }
    }

    /// Delay before retry number `attempt` (1-based).
    ///
    /// A server's `retry_after` wins when given (capped at `max_delay`);
    /// otherwise `base * 2^(attempt-1)` with "equal jitter": half fixed, half
    /// random, so a crowd of clients spreads out but none retries instantly.
    pub fn delay(&self, attempt: u32, retry_after: Option<Duration>) -> Duration {
        if let Some(after) = retry_after {
            return after.min(self.max_delay);
        }
        let exp = attempt.saturating_sub(1).min(30);
        let full = self
            .base_delay
            .saturating_mul(1u32 << exp)
            .min(self.max_delay);
        let half = full / 2;
        let jitter_ms = half.as_millis() as u64;
        let jitter = if jitter_ms == 0 {
            Duration::ZERO
        } else {
            Duration::from_millis(rand::rng().random_range(0..=jitter_ms))
        };
        half + jitter
    }

    /// Whether retry number `attempt` (1-based) is allowed.
    pub fn allows(&self, attempt: u32) -> bool {
        attempt <= self.max_retries
    }

    /// With a deadline for a turn's retries (`None`: none).
    pub fn with_deadline(mut self, deadline: Option<Duration>) -> Self {
        self.deadline = deadline;
        self
    }

    /// Whether a retry that waits `delay`, when `elapsed` has passed since
    /// the turn's first attempt, would start within the deadline.
    pub fn within_deadline(&self, elapsed: Duration, delay: Duration) -> bool {
        self.deadline
            .is_none_or(|deadline| elapsed.saturating_add(delay) <= deadline)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_grow_and_are_capped() {
        let p = RetryPolicy {
            max_retries: 10,
            base_delay: Duration::from_millis(100),
            max_delay: Duration::from_secs(1),
            deadline: None,
        };
        for attempt in 1..=10 {
            let d = p.delay(attempt, None);
            let full = (Duration::from_millis(100) * (1 << (attempt - 1))).min(p.max_delay);
            assert!(d >= full / 2 && d <= full, "attempt {attempt}: {d:?}");
        }
    }

    #[test]
    fn retry_after_wins_but_is_capped() {
        let p = RetryPolicy::default();
        assert_eq!(
            p.delay(1, Some(Duration::from_secs(2))),
            Duration::from_secs(2)
        );
        assert_eq!(p.delay(1, Some(Duration::from_secs(3600))), p.max_delay);
    }

    #[test]
    fn the_deadline_stops_a_retry_that_would_start_after_it() {
        let p = RetryPolicy::default().with_deadline(Some(Duration::from_secs(180)));
        assert!(p.within_deadline(Duration::from_secs(120), Duration::from_secs(30)));
        assert!(!p.within_deadline(Duration::from_secs(175), Duration::from_secs(10)));
        assert!(
            RetryPolicy::default()
                .with_deadline(None)
                .within_deadline(Duration::MAX, Duration::MAX)
        );
    }

    #[test]
    fn allows_counts_retries() {
        let p = RetryPolicy {
            max_retries: 2,
            ..RetryPolicy::default()
        };
        assert!(p.allows(1) && p.allows(2) && !p.allows(3));
        assert!(!RetryPolicy::none().allows(1));
    }
}
