//! A prompt that is cancelled, or dropped while it runs: `session/cancel`
//! is sent, and the session's next prompt waits until the cancelled one's
//! late updates have stopped coming, so none shows in the next turn.

use std::time::{Duration, Instant};

use agent_client_protocol::Agent;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{CancelNotification, SessionId};

use super::start::{Cancelled, Route, Stragglers};

/// After a cancelled prompt, the next prompt of that session waits until
/// the agent has sent nothing for it for this long, so late updates of the
/// cancelled one never show in the new turn ...
const QUIET: Duration = Duration::from_millis(250);
/// ... but never longer than this.
const QUIET_MAX: Duration = Duration::from_secs(2);

/// Wait until agent session `session` has sent no straggler for [`QUIET`]
/// (at most [`QUIET_MAX`]).
pub(super) async fn quiet(stragglers: &Stragglers, session: &SessionId) {
    let started = Instant::now();
    // A cancel is told at once; its late updates take a moment to come.
    lrg_providers::sync::lock(stragglers).insert(session.clone(), started);
    while started.elapsed() < QUIET_MAX {
        let last = lrg_providers::sync::lock(stragglers).get(session).copied();
        match last {
            Some(at) if at.elapsed() < QUIET => tokio::time::sleep(QUIET / 5).await,
            _ => break,
        }
    }
    lrg_providers::sync::lock(stragglers).remove(session);
}

/// Clears the route when the turn is over, however it ends: what comes
/// after is a straggler.
pub(super) struct ClearRoute(pub(super) Route);

impl Drop for ClearRoute {
    fn drop(&mut self) {
        *lrg_providers::sync::lock(&self.0) = None;
    }
}

/// Sends `session/cancel` for a prompt still running when dropped (the
/// loop drops a stopped turn's stream without polling it again). The cancel
/// is noted, so the session's next prompt waits for quiet.
pub(super) struct CancelOnDrop(
    pub(super) Option<(ConnectionTo<Agent>, SessionId)>,
    pub(super) Cancelled,
);

impl CancelOnDrop {
    pub(super) fn cancel(&mut self) {
        if let Some((cx, session)) = self.0.take() {
            let _ = cx.send_notification(CancelNotification::new(session.clone()));
            lrg_providers::sync::lock(&self.1).insert(session);
        }
    }
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.cancel();
    }
}
