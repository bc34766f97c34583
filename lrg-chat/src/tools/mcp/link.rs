//! What an MCP connection's handler ([`super::LrgClient`]) shares with the
//! rest of lrg: the calls running on the server (by progress token), whose
//! session answers the server's questions and shows its progress, the
//! roots, and the flags that say a list changed.
//!
//! A session marks the tool calls it makes ([`with_caller`]); the server
//! (in [`super::McpServer::call`]) registers each running call under the
//! progress token it sends, so a `notifications/progress` finds its call,
//! and an `elicitation/create` the session to ask (the call's, when one
//! call runs on the server; a request that comes while none runs is
//! declined).

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use super::super::elicitation::Form;
use super::roots::Roots;

/// How often a call's progress is shown at most, besides its first and
/// last notification and each whole percent (when the total is known).
pub(crate) const PROGRESS_EVERY: Duration = Duration::from_millis(100);

/// How long a call's progress must have been quiet after its answer
/// before its last report is taken as the last (see [`Link::settle`]).
const SETTLE_QUIET: Duration = Duration::from_millis(15);

/// The longest [`Link::settle`] waits.
const SETTLE_MOST: Duration = Duration::from_millis(250);

/// The most `server_log` events one server gets per second; more lines
/// go to `tracing` only.
const LOGS_PER_SECOND: u32 = 10;

/// A question a server asks during a call, for the session to put to the
/// person.
#[derive(Debug, Clone)]
pub(crate) struct ServerQuestion {
    pub(crate) server: String,
    pub(crate) tool_call_id: Option<String>,
    pub(crate) message: String,
    pub(crate) ask: Asked,
}

/// What a [`ServerQuestion`] asks for.
#[derive(Debug, Clone)]
pub(crate) enum Asked {
    /// Fill in a form: the schema as the server sent it, and as read.
    Form { schema: Value, form: Form },
    /// Go to a URL (the server's own page) and come back.
    Url { url: String },
}

/// How a question was answered, for the server.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Elicited {
    Accept(Option<Map<String, Value>>),
    Decline(Option<String>),
    Cancel(Option<String>),
}

/// One progress report of a call, as shown.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Progress {
    pub(crate) progress: f64,
    pub(crate) total: Option<f64>,
    pub(crate) message: Option<String>,
}

/// Where a session takes what its calls' servers send (see the [module
/// docs](self)).
pub(crate) trait CallSink: Send + Sync {
    /// Put `question` to the person; resolves with the answer (a stop, a
    /// timeout or the end of the chat cancels it).
    fn ask(
        &self,
        question: ServerQuestion,
        cancel: CancellationToken,
    ) -> BoxFuture<'static, Elicited>;
    /// Show a call's progress (live).
    fn progress(&self, call_id: &str, progress: Progress);
    /// Tell the person a server's warning (or worse) log line.
    fn server_log(&self, server: &str, level: &str, logger: Option<&str>, message: &str);
    /// Answer a server's sampling request with the session's model, once
    /// the permissions (or the person) allow it; resolves with the answer
    /// or why there is none (a stop cancels it).
    fn sample(
        &self,
        ask: super::sampling::SamplingAsk,
        cancel: CancellationToken,
    ) -> BoxFuture<'static, Result<super::sampling::Sampled, super::sampling::Refused>>;
}

/// The call a session's task is making, and where its server's requests go.
#[derive(Clone)]
pub(crate) struct Caller {
    pub(crate) call_id: String,
    pub(crate) sink: Arc<dyn CallSink>,
    pub(crate) cancel: CancellationToken,
}

tokio::task_local! {
    static CALLER: Caller;
    /// Set while a model answers a sampling request: a call made then is
    /// the sampled answer's, and may not sample again.
    static SAMPLING: ();
}

/// Run `answer` (a model answering a sampling request) marked as such:
/// a tool call it makes cannot start another sampling (the depth limit).
pub(crate) fn while_sampling<F: Future>(answer: F) -> impl Future<Output = F::Output> {
    SAMPLING.scope((), answer)
}

/// Whether this runs within [`while_sampling`].
fn in_sampling() -> bool {
    SAMPLING.try_with(|()| ()).is_ok()
}

/// Run `call` (a session's tool call) as `caller`'s.
pub(crate) fn with_caller<F: Future>(caller: Caller, call: F) -> impl Future<Output = F::Output> {
    CALLER.scope(caller, call)
}

/// The caller of the task that runs this, if it is a session's call.
pub(crate) fn current_caller() -> Option<Caller> {
    CALLER.try_with(Caller::clone).ok()
}

/// A call running on the server.
struct Running {
    caller: Option<Caller>,
    /// The progress shown last, and when.
    shown: Option<(Progress, Instant)>,
    /// The newest report not shown yet (shown by a timer or at the end).
    pending: Option<Progress>,
    flush_scheduled: bool,
    /// When the last report came (shown or not).
    last_report: Option<Instant>,
    /// Questions open for it now, and since when the first one (the call's
    /// timeout waits while a person answers).
    asking: usize,
    asking_since: Option<Instant>,
    asked_for: Duration,
    /// Made by a model answering a sampling request.
    from_sampling: bool,
}

/// The shared side of one server's connection (see the [module docs](self)).
pub(crate) struct Link {
    pub(crate) server: String,
    pub(crate) roots: Roots,
    /// Set by `notifications/tools/list_changed`.
    pub(crate) tools_changed: AtomicBool,
    /// Set by `notifications/resources/list_changed`.
    pub(crate) resources_changed: AtomicBool,
    /// Set by `notifications/prompts/list_changed`.
    pub(crate) prompts_changed: AtomicBool,
    calls: Mutex<HashMap<String, Running>>,
    /// Numbers the calls not sent yet.
    next: std::sync::atomic::AtomicU64,
    logs: Mutex<(Instant, u32)>,
}

impl Link {
    pub(crate) fn new(server: String, roots: Roots) -> Arc<Self> {
        Arc::new(Self {
            server,
            roots,
            tools_changed: AtomicBool::new(false),
            resources_changed: AtomicBool::new(false),
            prompts_changed: AtomicBool::new(false),
            calls: Mutex::new(HashMap::new()),
            next: std::sync::atomic::AtomicU64::new(0),
            logs: Mutex::new((Instant::now(), 0)),
        })
    }

    fn calls(&self) -> std::sync::MutexGuard<'_, HashMap<String, Running>> {
        lrg_providers::sync::lock(&self.calls)
    }

    /// Register a call about to be sent, under a key of its own until
    /// [`CallGuard::bind`] gives it its progress token: a server may ask
    /// its question before the send returns. Unregistered when the
    /// returned guard drops (its last progress shown first).
    pub(crate) fn start_call(self: &Arc<Self>, caller: Option<Caller>) -> CallGuard {
        let n = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let token = format!("\u{0}unsent-{n}");
        self.calls().insert(
            token.clone(),
            Running {
                caller,
                shown: None,
                pending: None,
                flush_scheduled: false,
                last_report: None,
                asking: 0,
                asking_since: None,
                asked_for: Duration::ZERO,
                from_sampling: in_sampling(),
            },
        );
        CallGuard {
            link: self.clone(),
            token,
        }
    }

    /// How long questions kept `token`'s call waiting, and whether one is
    /// open now.
    pub(crate) fn asked(&self, token: &str) -> (Duration, bool) {
        self.calls()
            .get(token)
            .map_or((Duration::ZERO, false), |r| {
                let open = r.asking_since.map_or(Duration::ZERO, |s| s.elapsed());
                (r.asked_for + open, r.asking > 0)
            })
    }

    /// A progress report from the server: shown now, or kept to show
    /// soon (see [`PROGRESS_EVERY`]).
    pub(crate) fn progress(self: &Arc<Self>, token: &str, report: Progress) {
        // Shown under the lock, so two reports of a call (handled on tasks
        // of their own) reach the session in the order they were taken.
        let mut calls = self.calls();
        let Some(running) = calls.get_mut(token) else {
            tracing::debug!(server = %self.server, token, "progress for no running call");
            return;
        };
        let Some(caller) = running.caller.clone() else {
            tracing::debug!(server = %self.server, progress = report.progress, "tool progress");
            return;
        };
        running.last_report = Some(Instant::now());
        // Notifications are handled as they come, not always in order:
        // progress only grows, so an older one (or a repeat) is dropped.
        let newest = running
            .pending
            .as_ref()
            .or(running.shown.as_ref().map(|(p, _)| p));
        if newest.is_some_and(|n| {
            report.progress < n.progress
                || (report.progress == n.progress && report.message == n.message)
        }) {
            return;
        }
        let due = match &running.shown {
            None => true,
            Some((last, at)) => {
                at.elapsed() >= PROGRESS_EVERY
                    || last.total != report.total
                    || percent(last) != percent(&report)
            }
        };
        if due {
            running.shown = Some((report.clone(), Instant::now()));
            running.pending = None;
            caller.sink.progress(&caller.call_id, report);
            return;
        }
        running.pending = Some(report);
        if !running.flush_scheduled {
            running.flush_scheduled = true;
            let link = self.clone();
            let token = token.to_owned();
            tokio::spawn(async move {
                tokio::time::sleep(PROGRESS_EVERY).await;
                link.flush(&token);
            });
        }
    }

    /// Wait until the progress of `token`'s call (which just answered) has
    /// stopped coming: the server's last notifications, sent just before
    /// its answer, are handled on tasks of their own and may still be on
    /// their way. No wait for a call that reported no progress; at most
    /// [`SETTLE_MOST`].
    pub(crate) async fn settle(&self, token: &str) {
        let answered = Instant::now();
        if self
            .calls()
            .get(token)
            .and_then(|r| r.last_report)
            .is_none()
        {
            return;
        }
        // Once quiet for SETTLE_QUIET after the answer, the last is in.
        loop {
            tokio::time::sleep(SETTLE_QUIET).await;
            let last = self.calls().get(token).and_then(|r| r.last_report);
            let quiet = last.is_none_or(|l| l.elapsed() >= SETTLE_QUIET);
            if quiet || answered.elapsed() >= SETTLE_MOST {
                return;
            }
        }
    }

    /// Show the report `token`'s call holds back, if any.
    fn flush(&self, token: &str) {
        let mut calls = self.calls();
        let Some(running) = calls.get_mut(token) else {
            return;
        };
        running.flush_scheduled = false;
        if let (Some(report), Some(caller)) = (running.pending.take(), &running.caller) {
            running.shown = Some((report.clone(), Instant::now()));
            caller.sink.progress(&caller.call_id, report);
        }
    }

    /// Who answers a question the server asks now: the session of the
    /// call running on it, with the call's id when it is the only one.
    pub(crate) fn asker(&self) -> Option<(Caller, Option<String>, String)> {
        let calls = self.calls();
        let mut with_caller = calls
            .iter()
            .filter_map(|(token, r)| r.caller.clone().map(|c| (token.clone(), c)));
        let (token, first) = with_caller.next()?;
        let only = with_caller.next().is_none();
        let call_id = only.then(|| first.call_id.clone());
        Some((first, call_id, token))
    }

    /// A question for `token`'s call opened (`true`) or closed.
    pub(crate) fn asking(&self, token: &str, open: bool) {
        let mut calls = self.calls();
        let Some(r) = calls.get_mut(token) else {
            return;
        };
        if open {
            r.asking += 1;
            r.asking_since.get_or_insert_with(Instant::now);
        } else {
            r.asking = r.asking.saturating_sub(1);
            if r.asking == 0
                && let Some(since) = r.asking_since.take()
            {
                r.asked_for += since.elapsed();
            }
        }
    }

    /// Whether a sampling request now would come from a sampled answer: a
    /// call running on the server was made by a model answering one (a
    /// request in parallel with another, or after it, is not).
    pub(crate) fn sampling_nested(&self) -> bool {
        self.calls().values().any(|r| r.from_sampling)
    }

    /// A server log line of `level` (warning and above): shown to the
    /// sessions whose calls run on the server, at most
    /// [`LOGS_PER_SECOND`] a second.
    pub(crate) fn server_log(&self, level: &str, logger: Option<&str>, message: &str) {
        {
            let mut logs = lrg_providers::sync::lock(&self.logs);
            if logs.0.elapsed() >= Duration::from_secs(1) {
                *logs = (Instant::now(), 0);
            }
            if logs.1 >= LOGS_PER_SECOND {
                return;
            }
            logs.1 += 1;
        }
        let mut sinks: Vec<Arc<dyn CallSink>> = Vec::new();
        for r in self.calls().values() {
            if let Some(c) = &r.caller
                && !sinks.iter().any(|s| Arc::ptr_eq(s, &c.sink))
            {
                sinks.push(c.sink.clone());
            }
        }
        for sink in sinks {
            sink.server_log(&self.server, level, logger, message);
        }
    }
}

/// A progress token as the calls are keyed by.
pub(crate) fn token_text(token: &rmcp::model::NumberOrString) -> String {
    match token {
        rmcp::model::NumberOrString::Number(n) => n.to_string(),
        rmcp::model::NumberOrString::String(s) => s.to_string(),
    }
}

/// The whole percent a report stands at, when its total is known.
fn percent(p: &Progress) -> Option<i64> {
    p.total
        .filter(|t| *t > 0.0)
        .map(|t| ((p.progress / t) * 100.0).floor() as i64)
}

/// A registered running call (see [`Link::start_call`]).
pub(crate) struct CallGuard {
    link: Arc<Link>,
    pub(crate) token: String,
}

impl CallGuard {
    /// Key the call by the progress token it was sent with.
    pub(crate) fn bind(&mut self, token: String) {
        let mut calls = self.link.calls();
        if let Some(running) = calls.remove(&self.token) {
            calls.insert(token.clone(), running);
        }
        self.token = token;
    }
}

impl Drop for CallGuard {
    fn drop(&mut self) {
        // The last report is always shown, before the call's result.
        self.link.flush(&self.token);
        self.link.calls().remove(&self.token);
    }
}
