//! [`ChatSession`]: one conversation and the loop that works it.
//!
//! A message runs as a tokio task ([`ChatSession::send`] returns its
//! [`TurnHandle`]); everything else — [`ChatSession::stop`],
//! [`ChatSession::answer_approval`], subscribing to events — is called from
//! other tasks while it runs (a terminal, a web page, a script). The session
//! is a cheap handle (`Clone`); all clones drive the same conversation.
//!
//! Per user message the loop runs at most [`SessionConfig::max_steps`] model
//! turns. For each turn it resolves the model ([`ModelSource`]), fits the
//! history into the window ([`crate::context`]), offers every tool the
//! permissions do not block, and streams the answer as events. For each tool
//! call, in order: a `tool_call` event; an identical call (same tool, same
//! arguments) already made for this message is refused; the permissions are
//! checked, waiting for the person's answer when they say ask; the tool runs;
//! `tool_done`. Every call gets a result, even one that never ran, because no
//! model API accepts a history with an unanswered call.

mod approver;
mod budget;
mod builder;
mod calls;
mod client_calls;
mod compact;
mod config;
mod delegate;
mod external;
mod history;
mod hooked;
mod locality;
mod offer;
mod persist;
mod preview;
mod questions;
mod resource_updates;
mod rewind;
mod run;
pub mod sampling;
mod switch;
mod turn;
mod typed;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use futures::FutureExt as _;
use futures::future::BoxFuture;
use lrg_providers::{GenerationSettings, Message, Messages, ProviderError, ToolSpec, Usage};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use crate::events::{ErrorKind, Event, EventLog, Subscription};
use crate::model_source::ModelSource;
use crate::permissions::{Answer, PermissionSettings, Permissions, SaveStatus, TargetCounter};
use crate::store::SessionId;
use crate::tools::{ToolOutput, Tools, ToolsError};

pub use approver::{ApprovalRequest, Approver, approver_fn};
pub(crate) use budget::absorb_sub_agent;
pub use budget::{CostBudget, SpendLimit};
pub use builder::ChatSessionBuilder;
pub use config::{
    DEFAULT_MAX_ANSWER_BYTES, DEFAULT_TYPED_REPAIRS, MAX_STEPS, SessionConfig, SystemPromptFn,
};
pub use delegate::Delivery;
pub(crate) use delegate::{
    Delegation, Kept, MakeDelegation, child_session, delegation_of, deliver_next, publish,
    queue_delivery, store_of, user_message_count,
};
pub use external::WeakChatSession;
pub use history::{STOPPED_NOTE, SUMMARY_PREFIX, tool_pairing_errors};
pub(crate) use persist::history_events;
pub use questions::{
    DEFAULT_QUESTION_TIMEOUT, QuestionAction, QuestionAnswer, QuestionError, QuestionMode,
};
pub use sampling::SamplingModel;
pub use switch::{SwitchCheck, SwitchableModel};
pub use turn::{SessionError, TurnHandle, TurnOutcome, UserInput};
pub use typed::TypedError;

struct NoTools;

impl Tools for NoTools {
    fn list(&self) -> BoxFuture<'_, Result<Vec<ToolSpec>, ToolsError>> {
        Box::pin(async { Ok(Vec::new()) })
    }

    fn call<'a>(
        &'a self,
        name: &'a str,
        _arguments: serde_json::Value,
        _cancel: CancellationToken,
    ) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move { ToolOutput::error(crate::tools::unknown_tool_message(name, &[])) })
    }
}

pub(crate) struct Shared {
    config: SessionConfig,
    models: Arc<dyn ModelSource>,
    /// What the model is offered: `base_tools`, and what a delegation
    /// layer adds.
    tools: Arc<dyn Tools>,
    /// The tools the session was built with (what a child session gets,
    /// and what its setup keeps as its tools).
    base_tools: Arc<dyn Tools>,
    permissions: Arc<Permissions>,
    system_prompt: Arc<SystemPromptFn>,
    /// The sections behind `system_prompt`, for [`ChatSession::next_prompt`].
    prompt: Option<Arc<crate::prompt::PromptBuilder>>,
    target_counter: Arc<dyn TargetCounter>,
    events: EventLog,
    state: Mutex<State>,
    /// Whether cloud models are refused (see [`ChatSession::set_local_only`]).
    local_only: AtomicBool,
    persister: Option<persist::Persister>,
    /// Work it hands out beyond a turn (its sub-agents), when that is on.
    delegation: Option<Arc<dyn Delegation>>,
    /// The operator's hooks (see [`crate::hooks`]).
    hooks: crate::hooks::Hooks,
    /// Who answers approval questions besides the front ends.
    approver: Option<Arc<dyn Approver>>,
    /// Tool servers' questions to the person (see [`questions`]).
    questions: questions::Desk,
}

#[derive(Default)]
struct State {
    /// Shared with the request of the turn in flight (see
    /// [`lrg_providers::Messages`]): a turn whose history fits sends it
    /// without copying, and the request is gone before the next push.
    history: Messages,
    /// For each user message in `history`: its index and the `seq` of the
    /// event that showed it (what a retry rewinds the view to).
    user_seqs: Vec<(usize, u64)>,
    /// The running message's cancel token.
    running: Option<CancellationToken>,
    /// Results of delegated work waiting to enter the history (see
    /// [`ChatSession::deliver`]).
    deliveries: std::collections::VecDeque<Delivery>,
    /// Approval questions waiting for an answer, by call id.
    approvals: HashMap<String, oneshot::Sender<Answer>>,
    /// Tools the person allowed "for this chat".
    chat_allowed: HashSet<String>,
    /// Providers the person agreed to send this chat to (see
    /// [`ChatSession::consent_to_cloud`]).
    cloud_consent: std::collections::BTreeSet<String>,
    /// System prompt + tools cost, learned per model (`provider:model`).
    overhead: HashMap<String, u32>,
    /// Where the conversation last went off this machine (provider, host),
    /// as announced with a `sends_to` event; `None`: it stays here.
    sent_to: Option<(String, String)>,
    /// Bumped whenever the history is cut back or replaced (not only
    /// extended), so the store rewrites it rather than appending.
    generation: u64,
    /// Tokens used so far, over every model turn.
    usage: Usage,
    /// What the message, this run and the chat have cost (see [`budget`]).
    spend: budget::Spending,
    /// Each history message's size estimate, kept for fitting.
    estimates: crate::context::Estimates,
    /// The session's generation settings (see [`ChatSession::set_generation`]).
    generation_settings: GenerationSettings,
    /// What waits to be announced until a save has made it durable (a
    /// user message, a rewind, a clear, a sub-agent's answer), in order:
    /// never before.
    announce: Vec<persist::Announce>,
    /// What a stopped model turn had shown (reasoning, text), kept by
    /// [`finish`] with the stop note: a stop never erases what was read.
    stopped_partial: Option<(String, String)>,
    /// Tool search's index and what it found for this message.
    search: offer::SearchState,
    /// Client-tool calls waiting for the app's answer, by call id.
    client_waits: HashMap<String, oneshot::Sender<crate::tools::ToolOutput>>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // Every critical section is a few pushes and inserts; a panic inside
        // one cannot leave a half-made change worth refusing to read.
        lrg_providers::sync::lock(&self.state)
    }

    fn publish(&self, event: Event) -> u64 {
        self.events.publish(event)
    }

    fn permissions_event(&self, status: SaveStatus) {
        let (saved, save_error) = match status {
            SaveStatus::Saved => (true, None),
            SaveStatus::NotBound => (false, None),
            SaveStatus::Failed(e) => (false, Some(e)),
        };
        self.publish(Event::Permissions {
            settings: self.permissions.settings(),
            saved,
            save_error,
        });
    }
}

/// One conversation. See the [module docs](self).
#[derive(Clone)]
pub struct ChatSession {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for ChatSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatSession")
            .field("last_seq", &self.shared.events.last_seq())
            .field("busy", &self.is_busy())
            .finish_non_exhaustive()
    }
}

impl ChatSession {
    /// A builder for a session whose model turns run on what `models`
    /// resolves.
    pub fn builder(models: Arc<dyn ModelSource>) -> ChatSessionBuilder {
        ChatSessionBuilder::new(models)
    }

    /// The session's generation settings.
    pub fn generation(&self) -> GenerationSettings {
        self.shared.lock().generation_settings.clone()
    }

    /// Replace the session's generation settings; a running message uses
    /// them from its next model turn.
    pub fn set_generation(&self, settings: GenerationSettings) {
        self.shared.lock().generation_settings = settings;
    }

    /// Turn "local only" on or off. On, a model that would send the
    /// conversation to a cloud is refused at its next turn, so a chat on a
    /// cloud model cannot go on until it moves to a local one.
    /// Kept with a stored chat, so a resume is as locked as it was.
    pub fn set_local_only(&self, on: bool) {
        locality::set_local_only(&self.shared, on);
    }

    /// Whether cloud models are refused.
    pub fn local_only(&self) -> bool {
        self.shared.local_only.load(Ordering::SeqCst)
    }

    /// Send a user message and start working on it. Fails with
    /// [`SessionError::Busy`] while another message runs.
    pub fn send(&self, input: impl Into<UserInput>) -> Result<TurnHandle, SessionError> {
        self.send_with(input, GenerationSettings::default())
    }

    /// [`send`](Self::send), with generation settings for this message only:
    /// each one set here wins over the session's
    /// ([`set_generation`](Self::set_generation)) for every model turn of it.
    pub fn send_with(
        &self,
        input: impl Into<UserInput>,
        generation: GenerationSettings,
    ) -> Result<TurnHandle, SessionError> {
        self.send_message(input.into(), generation, None)
    }

    /// Send a message whose final answer must match `output` when given
    /// (see [`send_with_schema`](Self::send_with_schema)).
    fn send_message(
        &self,
        input: UserInput,
        generation: GenerationSettings,
        output: Option<lrg_providers::typed::OutputSchema>,
    ) -> Result<TurnHandle, SessionError> {
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| SessionError::NoRuntime)?;
        let mut state = self.shared.lock();
        if state.running.is_some() {
            return Err(SessionError::Busy);
        }
        // Announced by the work once it is kept (see `announce`).
        let index = state.history.len();
        state.announce.push(persist::Announce::User {
            index,
            text: input.text.clone(),
            images: input.images.len(),
        });
        state.history.push(input.into_message());
        Ok(self.start(&runtime, state, Work::Message { generation, output }))
    }

    fn start(
        &self,
        runtime: &tokio::runtime::Handle,
        state: MutexGuard<'_, State>,
        work: Work,
    ) -> TurnHandle {
        self.start_as(runtime, state, work, false)
    }

    /// Start `work` as a task, with the state locked by the caller (who
    /// checked that nothing runs). `autonomous`: not started by the person (a
    /// turn to react to a sub-agent's result).
    fn start_as(
        &self,
        runtime: &tokio::runtime::Handle,
        mut state: MutexGuard<'_, State>,
        work: Work,
        autonomous: bool,
    ) -> TurnHandle {
        let cancel = CancellationToken::new();
        state.running = Some(cancel.clone());
        drop(state);
        let shared = self.shared.clone();
        let working = external::working(&self.shared);
        let (accepted, accepted_rx) = oneshot::channel();
        // Made here, in the caller's context: a caller's span (or an attached
        // remote parent, see `crate::otel::remote_parent`) is its parent.
        let span = match work {
            Work::Message { .. } => {
                crate::otel::invoke_agent_span(shared.persister.as_ref().map(|p| p.id().as_str()))
            }
            Work::Compact => tracing::Span::none(),
        };
        let job = async move {
            // The user message is kept before it is shown or acknowledged,
            // and even if the process dies mid-turn.
            let kept = persist::save(&shared).await;
            persist::announce(&shared, autonomous);
            let _ = accepted.send(kept);
            let note_stop = matches!(work, Work::Message { .. });
            let work = async {
                match work {
                    Work::Message { generation, output } => {
                        let person = !autonomous;
                        hooked::run_message(&shared, &generation, output.as_ref(), &cancel, person)
                            .await
                    }
                    Work::Compact => compact::run_compact(&shared, &cancel).await,
                }
            };
            // A panicking tool or model (code the app plugs in) must not leave
            // the session busy forever with a call that has no result.
            let outcome = match std::panic::AssertUnwindSafe(work).catch_unwind().await {
                Ok(outcome) => outcome,
                Err(panic) => {
                    let what = panic
                        .downcast_ref::<&str>()
                        .map(|s| s.to_string())
                        .or_else(|| panic.downcast_ref::<String>().cloned())
                        .unwrap_or_else(|| "unknown panic".into());
                    let error = ProviderError::Other {
                        message: format!("internal error while working on the message: {what}"),
                    };
                    shared.publish(Event::Error {
                        message: error.to_string(),
                        kind: ErrorKind::Internal,
                    });
                    TurnOutcome::Failed { error }
                }
            };
            finish(&shared, &outcome, note_stop);
            if let TurnOutcome::Failed { error } = &outcome {
                crate::otel::record_error(&tracing::Span::current(), error.kind().as_str());
            }
            delegate::after_work(&shared, &outcome);
            // Shows the sub-agent answers `after_work` let in, once kept.
            persist::save_and_announce(&shared).await;
            outcome
        };
        let task = runtime.spawn(working.scope_to(tracing::Instrument::instrument(job, span)));
        TurnHandle::new(task, accepted_rx)
    }

    /// Stop the running message: the model turn is cancelled at once, waiting
    /// approvals are denied, open questions of tool servers are cancelled,
    /// nothing new starts, and a tool already running finishes and has its
    /// result recorded (an MCP call still running 2 s later is cancelled on
    /// its server, and its result says so). Returns whether anything was
    /// running.
    ///
    /// Queued sub-agents are stopped too (they never start); running ones
    /// go on, and their answers still come back
    /// ([`ChatSession::stop_with_sub_agents`] stops them as well).
    pub fn stop(&self) -> bool {
        let queued = self.shared.delegation.as_ref().map_or(0, |d| d.stop(false));
        let state = self.shared.lock();
        match &state.running {
            Some(cancel) => {
                cancel.cancel();
                true
            }
            None => queued > 0,
        }
    }

    /// Answer the approval question of tool call `call_id`.
    /// A sub-agent's question (its call id prefixed with the sub-agent's
    /// id) is passed on to it.
    pub fn answer_approval(&self, call_id: &str, answer: Answer) -> Result<(), SessionError> {
        let sender = self.shared.lock().approvals.remove(call_id);
        if sender.is_none()
            && let Some(passed) = self
                .shared
                .delegation
                .as_ref()
                .and_then(|d| d.answer_approval(call_id, answer.clone()))
        {
            return passed;
        }
        match sender {
            Some(sender) => sender
                .send(answer)
                .map_err(|_| SessionError::NoSuchApproval(call_id.to_string())),
            None => Err(SessionError::NoSuchApproval(call_id.to_string())),
        }
    }

    /// Call ids of the approval questions now waiting.
    /// Sub-agents' questions are included, under their prefixed ids.
    pub fn pending_approvals(&self) -> Vec<String> {
        let mut ids: Vec<_> = self.shared.lock().approvals.keys().cloned().collect();
        if let Some(delegation) = &self.shared.delegation {
            ids.extend(delegation.pending_approvals());
        }
        ids.sort();
        ids
    }

    /// Whether a message is being worked on.
    pub fn is_busy(&self) -> bool {
        self.shared.lock().running.is_some()
    }

    /// The conversation as the model will next see it (before fitting).
    pub fn history(&self) -> Vec<Message> {
        self.shared.lock().history.to_vec()
    }

    /// The id it is stored under, when it is kept in a store.
    pub fn store_id(&self) -> Option<&SessionId> {
        self.shared.persister.as_ref().map(persist::Persister::id)
    }

    /// Whether it is being saved: kept in a store, and no write has failed.
    pub async fn is_saving(&self) -> bool {
        match &self.shared.persister {
            Some(p) => p.is_saving().await,
            None => false,
        }
    }

    /// Write to the store what it lacks now (done after every step anyway;
    /// call it to be sure a clear has reached the store), then publish the
    /// events that waited for it.
    pub async fn save(&self) {
        persist::save_and_announce(&self.shared).await;
    }

    /// Tokens used so far, over every model turn.
    pub fn usage(&self) -> Usage {
        self.shared.lock().usage
    }

    /// The event log.
    pub fn events(&self) -> &EventLog {
        &self.shared.events
    }

    /// Events after `after`, then live ones ([`EventLog::subscribe`]).
    pub fn subscribe(&self, after: u64) -> Subscription {
        self.shared.events.subscribe(after)
    }

    /// The permission settings this session decides with.
    pub fn permissions(&self) -> &Arc<Permissions> {
        &self.shared.permissions
    }

    /// Change the permission settings (saved when a path is bound) and tell
    /// viewers with a `permissions` event.
    pub fn update_permissions(&self, change: impl FnOnce(&mut PermissionSettings)) -> SaveStatus {
        let status = self.shared.permissions.update(change);
        self.shared.permissions_event(status.clone());
        status
    }
}

/// Give every call of the last assistant message that has no result an
/// error result (only after a panic cut the loop short), so the history stays
/// one every model API accepts.
fn answer_unanswered(history: &mut Messages) {
    let missing = crate::store::open_call_results(
        history,
        "Not run: the session failed before this call could run.",
    );
    // Checked before touching it: an edit copies a history still shared.
    if !missing.is_empty() {
        history.push(Message::tool_results(missing));
    }
}

enum Work {
    /// A message, with the generation settings given for it alone, and the
    /// schema its final answer must match when it is typed.
    Message {
        generation: GenerationSettings,
        output: Option<lrg_providers::typed::OutputSchema>,
    },
    Compact,
}

impl Work {
    /// A prose message with the session's own settings.
    fn message() -> Self {
        Self::Message {
            generation: GenerationSettings::default(),
            output: None,
        }
    }
}

/// Bookkeeping when a message ends: the stop note, denied approvals, busy off.
fn finish(shared: &Shared, outcome: &TurnOutcome, note_stop: bool) {
    let mut state = shared.lock();
    answer_unanswered(&mut state.history);
    let partial = state.stopped_partial.take();
    if *outcome == TurnOutcome::Stopped {
        if note_stop {
            match partial {
                Some((reasoning, text)) => {
                    // One assistant message: the words shown, then the note,
                    // so the model sees where it was cut off.
                    let kept = format!("{text}\n\n{STOPPED_NOTE}");
                    let mut message = Message::assistant(kept);
                    if !reasoning.is_empty() {
                        message.parts.insert(
                            0,
                            lrg_providers::Part::Reasoning {
                                text: reasoning.clone(),
                            },
                        );
                    }
                    state.history.push(message);
                    shared.publish(Event::AssistantTurn {
                        reasoning,
                        text,
                        json: None,
                        stopped: true,
                    });
                }
                None => state.history.push(Message::assistant(STOPPED_NOTE)),
            }
        }
        shared.publish(Event::Stopped);
    }
    // Dropping the senders denies anything still waiting (normally nothing:
    // the loop removes its own question when it stops waiting).
    state.approvals.clear();
    state.running = None;
    let (message_total, chat_total) = budget::end_totals(&state);
    shared.publish(Event::Busy {
        busy: false,
        autonomous: false,
        message_total,
        chat_total,
    });
}
