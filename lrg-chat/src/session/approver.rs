//! Answering approval questions from Rust: the [`Approver`] a session
//! asks, and the [`ApprovalRequest`] it is given (what an `approval_needed`
//! event carries), and the wait for an answer that both share.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt as _;
use futures::future::BoxFuture;
use serde_json::Value;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use super::Shared;
use crate::events::{Event, SubAgentAsk};
use crate::permissions::{Answer, AnswerKind, ApprovalReason};
use crate::tools::ToolClass;

/// One approval question, with everything needed to ask it: what an
/// [`Approver`] is given, and what an `approval_needed` event carries
/// ([`ApprovalRequest::from_event`]).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ApprovalRequest {
    /// The call that waits; what
    /// [`ChatSession::answer_approval`](super::ChatSession::answer_approval)
    /// takes. A sub-agent's is its id, `::`, and its own call's id.
    pub call_id: String,
    /// The tool it calls.
    pub tool: String,
    /// The tool's human-readable title, when it has one.
    pub title: Option<String>,
    /// What the tool may do to the world.
    pub class: ToolClass,
    /// The arguments it would run with (after any hook's rewrite).
    pub arguments: Value,
    /// How many items the call is aimed at, when that can be told.
    pub targets: Option<usize>,
    /// Why it was not allowed outright.
    pub reason: ApprovalReason,
    /// What a person should know before answering, one sentence each.
    pub warnings: Vec<String>,
    /// The answers allowed, in the order to offer them.
    pub answers: Vec<AnswerKind>,
    /// Set when a sub-agent asks: which one, and its call.
    pub sub_agent: Option<SubAgentAsk>,
}

impl ApprovalRequest {
    /// A question about call `call_id` of `tool`, asked for `reason`, that
    /// allows every answer (add warnings, a title or targets by setting
    /// the fields). For an app's own tests of its approver.
    pub fn new(
        call_id: impl Into<String>,
        tool: impl Into<String>,
        class: ToolClass,
        arguments: Value,
        reason: ApprovalReason,
    ) -> Self {
        let offer_always = !matches!(reason, ApprovalReason::Bulk { .. });
        Self {
            call_id: call_id.into(),
            tool: tool.into(),
            title: None,
            class,
            arguments,
            targets: None,
            reason,
            warnings: Vec::new(),
            answers: AnswerKind::allowed(offer_always),
            sub_agent: None,
        }
    }

    /// The question an `approval_needed` event asks; `None` for any other
    /// event. An event written before it carried its answers allows what
    /// its `offer_always` says.
    pub fn from_event(event: &Event) -> Option<Self> {
        let Event::ApprovalNeeded {
            call_id,
            tool,
            title,
            class,
            arguments,
            targets,
            reason,
            warnings,
            answers,
            offer_always,
            sub_agent,
        } = event
        else {
            return None;
        };
        let answers = if answers.is_empty() {
            AnswerKind::allowed(*offer_always)
        } else {
            answers.clone()
        };
        Some(Self {
            call_id: call_id.clone(),
            tool: tool.clone(),
            title: title.clone(),
            class: *class,
            arguments: arguments.clone(),
            targets: *targets,
            reason: reason.clone(),
            warnings: warnings.clone(),
            answers,
            sub_agent: sub_agent.clone(),
        })
    }

    /// The `approval_needed` event that asks it.
    pub(crate) fn to_event(&self) -> Event {
        Event::ApprovalNeeded {
            call_id: self.call_id.clone(),
            tool: self.tool.clone(),
            title: self.title.clone(),
            class: self.class,
            arguments: self.arguments.clone(),
            targets: self.targets,
            reason: self.reason.clone(),
            warnings: self.warnings.clone(),
            answers: self.answers.clone(),
            offer_always: self.offers(AnswerKind::Always),
            sub_agent: self.sub_agent.clone(),
        }
    }

    /// The question as sub-agent `id`'s parent asks it: the call id
    /// prefixed with the sub-agent's (`{id}::{call_id}`), the sub-agent
    /// and its call named.
    pub(crate) fn of_sub_agent(&self, id: &str) -> Self {
        let mut up = self.clone();
        up.call_id = format!("{id}::{}", self.call_id);
        up.sub_agent = Some(SubAgentAsk::new(
            id,
            self.tool.clone(),
            self.class,
            self.arguments.clone(),
        ));
        up
    }

    /// Whether the question allows answers of `kind`.
    pub fn offers(&self, kind: AnswerKind) -> bool {
        self.answers.contains(&kind)
    }

    /// What to call the tool for a person: its title, else its name.
    pub fn label(&self) -> &str {
        self.title.as_deref().unwrap_or(&self.tool)
    }
}

/// Answers a session's approval questions.
///
/// A call the permissions say to ask about waits for an answer. Without an
/// approver, a front end answers it from its `approval_needed` event
/// ([`ChatSession::answer_approval`](super::ChatSession::answer_approval);
/// the event carries everything to ask with, read as an
/// [`ApprovalRequest`]). With one
/// ([`ChatSessionBuilder::approver`](super::ChatSessionBuilder::approver)),
/// the session asks it directly and takes whichever answer comes first,
/// the approver's or a front end's, so an app can answer some questions
/// itself and leave the rest to a page. The session handles what every
/// approver would otherwise have to get right:
///
/// - a stop withdraws the question (the approver's future is dropped) and
///   the call is recorded as stopped (`tool_skipped`, reason `stopped`);
/// - past [`SessionConfig::approval_timeout`](super::SessionConfig::approval_timeout)
///   the call is denied and recorded as such (`tool_skipped`, reason
///   `approval_timed_out`);
/// - an approver that panics denies the call, with a `warning`;
/// - "always" where the question does not offer it (a bulk question asks
///   even for an allowed tool) counts as "once", with a `warning`.
///
/// An answer is recorded as a person's is (`approval_answered`). A
/// sub-agent asks its parent's approver, as its question appears in the
/// parent's events: the call id prefixed with the sub-agent's id,
/// [`ApprovalRequest::sub_agent`] set. An external agent's questions
/// ([`ChatSession::ask_approval`](super::ChatSession::ask_approval)) are
/// put to it too.
///
/// Questions from MCP servers (elicitation) are to follow the same
/// pattern: a method beside [`approve`](Self::approve) with a default
/// body, so an approver written now keeps compiling when it comes.
///
/// ```
/// use lrg_chat::{Answer, ApprovalRequest, Approver};
/// use lrg_chat::tools::ToolClass;
/// use futures::future::BoxFuture;
///
/// /// Reads run; anything else is refused, with a note for the model.
/// struct ReadsOnly;
///
/// impl Approver for ReadsOnly {
///     fn approve<'a>(&'a self, request: &'a ApprovalRequest) -> BoxFuture<'a, Answer> {
///         Box::pin(async move {
///             match request.class {
///                 ToolClass::Read => Answer::Once,
///                 _ => Answer::deny_with("this app only lets the agent read"),
///             }
///         })
///     }
/// }
/// ```
pub trait Approver: Send + Sync {
    /// The answer to `request`. It may take as long as it needs (ask a
    /// person, call a service): the session drops the future when the
    /// question is withdrawn (a stop, the timeout, or an answer from a
    /// front end), so there is nothing to clean up after.
    fn approve<'a>(&'a self, request: &'a ApprovalRequest) -> BoxFuture<'a, Answer>;
}

impl<A: Approver + ?Sized> Approver for Arc<A> {
    fn approve<'a>(&'a self, request: &'a ApprovalRequest) -> BoxFuture<'a, Answer> {
        (**self).approve(request)
    }
}

/// An [`Approver`] from an async closure, given each request by value.
///
/// ```
/// use lrg_chat::{Answer, approver_fn};
/// use lrg_chat::tools::ToolClass;
///
/// let approver = approver_fn(|request| async move {
///     if request.class == ToolClass::Read { Answer::Once } else { Answer::deny() }
/// });
/// # let _ = approver;
/// ```
pub fn approver_fn<F, Fut>(answer: F) -> Arc<dyn Approver>
where
    F: Fn(ApprovalRequest) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Answer> + Send + 'static,
{
    Arc::new(ApproverFn(answer))
}

struct ApproverFn<F>(F);

impl<F, Fut> Approver for ApproverFn<F>
where
    F: Fn(ApprovalRequest) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Answer> + Send + 'static,
{
    fn approve<'a>(&'a self, request: &'a ApprovalRequest) -> BoxFuture<'a, Answer> {
        Box::pin((self.0)(request.clone()))
    }
}

/// A sub-agent's questions put to its parent's approver as the parent's
/// events show them ([`ApprovalRequest::of_sub_agent`], as
/// `sub_agents::runner`'s relay passes them up).
pub(super) struct ForSubAgent {
    pub(super) parent: Arc<dyn Approver>,
    pub(super) id: String,
}

impl Approver for ForSubAgent {
    fn approve<'a>(&'a self, request: &'a ApprovalRequest) -> BoxFuture<'a, Answer> {
        let up = request.of_sub_agent(&self.id);
        Box::pin(async move { self.parent.approve(&up).await })
    }
}

/// How the wait for an answer ended.
pub(super) enum Waited {
    /// Answered (by the approver or a front end); `approval_answered` is
    /// published.
    Answered(Answer),
    /// Withdrawn by a stop (or the message ended).
    Stopped,
    /// No answer within the timeout.
    TimedOut(Duration),
}

/// Ask `request` and wait for its answer: from a front end
/// ([`super::ChatSession::answer_approval`]), from the session's approver,
/// whichever comes first, unless `cancel` or the timeout comes before.
pub(super) async fn wait(
    shared: &Shared,
    request: &ApprovalRequest,
    cancel: &CancellationToken,
) -> Waited {
    let (sender, receiver) = oneshot::channel();
    {
        // Registered before the question goes out, so an answer sent the
        // moment it is seen finds it.
        let mut state = shared.lock();
        state.approvals.insert(request.call_id.clone(), sender);
        shared.publish(request.to_event());
    }
    let approver = async {
        match &shared.approver {
            Some(approver) => ask_approver(shared, approver.as_ref(), request).await,
            None => std::future::pending().await,
        }
    };
    let limit = shared.config.approval_timeout;
    let timeout = async {
        match limit {
            Some(limit) => tokio::time::sleep(limit).await,
            None => std::future::pending().await,
        }
    };
    let waited = tokio::select! {
        biased;
        _ = cancel.cancelled() => Waited::Stopped,
        // A dropped sender: the message ended (see `finish`).
        answer = receiver => answer.map_or(Waited::Stopped, Waited::Answered),
        answer = approver => Waited::Answered(answer),
        () = timeout => Waited::TimedOut(limit.unwrap_or_default()),
    };
    shared.lock().approvals.remove(&request.call_id);
    let Waited::Answered(answer) = waited else {
        return waited;
    };
    let answer = checked(shared, request, answer);
    shared.publish(Event::ApprovalAnswered {
        call_id: request.call_id.clone(),
        answer: answer.clone(),
    });
    Waited::Answered(answer)
}

/// The approver's answer; a panic in it is a denial (the app's code must
/// not end the message).
async fn ask_approver(
    shared: &Shared,
    approver: &dyn Approver,
    request: &ApprovalRequest,
) -> Answer {
    match AssertUnwindSafe(approver.approve(request))
        .catch_unwind()
        .await
    {
        Ok(answer) => answer,
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            shared.publish(Event::Warning {
                message: format!(
                    "the approver failed on {} (call {}): {what}; the call is denied",
                    request.tool, request.call_id
                ),
                retrying: false,
            });
            Answer::deny_with("the app could not decide whether this call may run")
        }
    }
}

/// `answer` as the session takes it: an empty deny note is none, and an
/// "always" the question does not offer is "once".
fn checked(shared: &Shared, request: &ApprovalRequest, answer: Answer) -> Answer {
    match answer {
        Answer::Deny { note } => Answer::Deny {
            note: note.map(|n| n.trim().to_string()).filter(|n| !n.is_empty()),
        },
        Answer::Always if !request.offers(AnswerKind::Always) => {
            shared.publish(Event::Warning {
                message: format!(
                    "\"always\" is not offered for this question about {} ({}): allowed once",
                    request.tool, request.call_id
                ),
                retrying: false,
            });
            Answer::Once
        }
        other => other,
    }
}
