//! The client side: an external ACP agent (a subprocess) as the model of a
//! chat. See [`AcpBackend`].

use std::collections::HashSet;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    CancelNotification, ContentBlock, ImageContent, InitializeRequest, NewSessionRequest,
    PermissionOptionKind, PromptRequest, RequestPermissionOutcome, RequestPermissionRequest,
    RequestPermissionResponse, SelectedPermissionOutcome, SessionId, SessionNotification,
    SessionUpdate, StopReason as AcpStop, TextContent, ToolCallContent, ToolCallStatus, ToolKind,
};
use agent_client_protocol::{Agent, ByteStreams, Client};
use base64::Engine as _;
#[cfg(unix)]
use process_wrap::tokio::ProcessGroup;
use process_wrap::tokio::{ChildWrapper, CommandWrap, KillOnDrop};
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use tokio_util::compat::{TokioAsyncReadCompatExt as _, TokioAsyncWriteCompatExt as _};
use tokio_util::sync::CancellationToken;

use lrg_providers::{
    ChatModel, Message, ModelInfo, ModelLocation, Part, ProviderError, Role, StopReason, TurnEvent,
    TurnRequest, TurnStream,
};

use crate::events::Event;
use crate::permissions::Answer;
use crate::session::{ChatSession, WeakChatSession};
use crate::tools::ToolClass;

/// How long starting the agent (spawn, `initialize`, `session/new`) may take.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// An external ACP agent as the model of a chat.
///
/// The agent owns its loop and its tools: each user message is sent as one
/// `session/prompt` (the agent keeps the conversation), and what it streams
/// becomes the chat's events: message chunks are text deltas, thought chunks
/// reasoning, its tool calls `tool_call` / `tool_running` / `tool_done`
/// (told to viewers, not added to lrg's history). Its permission questions
/// are the chat's approvals (`approval_needed`, reason `agent`), answered
/// as any other. Stopping the chat sends `session/cancel`.
///
/// The agent runs in its own process group, killed when the backend is
/// dropped, with a clean environment: the base set every child gets plus
/// the login names of the agent CLI its command names (see
/// [`lrg_providers::cli_agents::agent_env_passes`]), never lrg's tokens nor
/// other keys. One that dies fails the turn with an error saying so; the next
/// message starts it again, on a fresh agent session.
///
/// The chat is the one whose turn calls the backend
/// ([`ChatSession::current`]); called outside a chat, tool calls are not
/// shown and every permission question is rejected. Chats sharing one
/// backend (a chat and its sub-agents) share the process but each has its
/// own agent session; their turns run one at a time.
pub struct AcpBackend {
    inner: Arc<Inner>,
}

struct Inner {
    command: Vec<String>,
    cwd: PathBuf,
    /// The agent, started at the first message; one turn at a time.
    agent: tokio::sync::Mutex<Option<Running>>,
}

impl std::fmt::Debug for AcpBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AcpBackend")
            .field("command", &self.inner.command)
            .finish_non_exhaustive()
    }
}

/// What the connection task hands the turn in progress, in arrival order.
enum Incoming {
    Update(SessionUpdate),
    Ask(
        RequestPermissionRequest,
        oneshot::Sender<RequestPermissionOutcome>,
    ),
}

/// Where the agent's updates and questions go: the turn in progress, for
/// its agent session only. What comes for another session, or between
/// prompts, is a straggler: dropped, and its time noted ([`Stragglers`]).
type Route = Arc<Mutex<Option<(SessionId, mpsc::UnboundedSender<Incoming>)>>>;

/// When each agent session last sent something no prompt of it was waiting
/// for (an update a cancelled prompt sent after its answer).
type Stragglers = Arc<Mutex<std::collections::HashMap<SessionId, std::time::Instant>>>;

/// The agent sessions whose last prompt was cancelled (shared with the
/// cancel that a dropped turn sends).
type Cancelled = Arc<Mutex<HashSet<SessionId>>>;

/// After a cancelled prompt, the next prompt of that session waits until
/// the agent has sent nothing for it for this long, so late updates of the
/// cancelled one never show in the new turn ...
const QUIET: Duration = Duration::from_millis(250);
/// ... but never longer than this.
const QUIET_MAX: Duration = Duration::from_secs(2);

/// A started agent with its sessions: one per chat that called it (a chat
/// and its sub-agents each have their own conversation with the agent).
struct Running {
    cx: ConnectionTo<Agent>,
    sessions: Vec<(Option<WeakChatSession>, SessionId)>,
    route: Route,
    stragglers: Stragglers,
    /// Sessions whose last prompt was cancelled: their next waits for quiet.
    cancelled: Cancelled,
    task: tokio::task::JoinHandle<()>,
    /// Killed (the whole group) when dropped.
    _process: Group,
}

struct Group(Box<dyn ChildWrapper>);

impl Drop for Group {
    fn drop(&mut self) {
        let _ = self.0.start_kill();
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl AcpBackend {
    /// The agent started by `command` (program and arguments), with
    /// `cwd` as its working directory and the session's.
    pub fn new(command: Vec<String>, cwd: impl Into<PathBuf>) -> Result<Self, ProviderError> {
        if command.first().is_none_or(|p| p.trim().is_empty()) {
            return Err(ProviderError::Config {
                message: "acp: no agent command given (acp:'COMMAND ARGS')".into(),
            });
        }
        Ok(Self {
            inner: Arc::new(Inner {
                command,
                cwd: cwd.into(),
                agent: tokio::sync::Mutex::new(None),
            }),
        })
    }
}

impl Inner {
    fn name(&self) -> String {
        shell_words::join(&self.command)
    }

    fn failed(&self, what: impl std::fmt::Display) -> ProviderError {
        ProviderError::Other {
            message: format!("ACP agent `{}`: {what}", self.name()),
        }
    }

    /// The agent session of `chat`, opened on first use.
    async fn session_for(
        &self,
        running: &mut Running,
        chat: &Option<WeakChatSession>,
    ) -> Result<SessionId, ProviderError> {
        let same = |known: &Option<WeakChatSession>| match (known, chat) {
            (Some(a), Some(b)) => a.ptr_eq(b),
            (None, None) => true,
            _ => false,
        };
        // Chats that ended leave their agent sessions behind.
        running
            .sessions
            .retain(|(known, _)| known.as_ref().is_none_or(|w| w.upgrade().is_some()));
        if let Some((_, id)) = running.sessions.iter().find(|(known, _)| same(known)) {
            return Ok(id.clone());
        }
        let open = running
            .cx
            .send_request(NewSessionRequest::new(self.cwd.clone()))
            .block_task();
        let id = tokio::time::timeout(START_TIMEOUT, open)
            .await
            .map_err(|_| self.failed("session/new got no answer"))?
            .map_err(|e| self.failed(format!("session/new: {e}")))?
            .session_id;
        running.sessions.push((chat.clone(), id.clone()));
        Ok(id)
    }

    /// Spawn the agent, connect and `initialize`.
    async fn start(&self) -> Result<Running, ProviderError> {
        let mut cmd = tokio::process::Command::new(&self.command[0]);
        let command = &self.command;
        lrg_providers::child_env::apply(&mut cmd, |name| {
            lrg_providers::cli_agents::agent_env_passes(command, name)
        });
        cmd.args(&self.command[1..])
            .current_dir(&self.cwd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        let mut wrapped = CommandWrap::from(cmd);
        #[cfg(unix)]
        wrapped.wrap(ProcessGroup::leader());
        wrapped.wrap(KillOnDrop);
        let mut child = lrg_providers::retry::while_executable_busy(|| wrapped.spawn())
            .await
            .map_err(|e| {
                // The same hint a tool server that does not start gets.
                let hint = if e.kind() == std::io::ErrorKind::NotFound {
                    " (is it installed and on PATH?)"
                } else {
                    ""
                };
                ProviderError::Config {
                    message: format!("cannot start ACP agent `{}`: {e}{hint}", self.name()),
                }
            })?;
        let (Some(stdin), Some(stdout)) = (child.stdin().take(), child.stdout().take()) else {
            return Err(self.failed("no pipes to the agent"));
        };
        let process = Group(child);
        let route: Route = Arc::default();
        let stragglers: Stragglers = Arc::default();
        let (to_updates, to_asks) = (route.clone(), route.clone());
        let late = stragglers.clone();
        let (cx_sender, cx_receiver) = oneshot::channel();
        let connection = Client
            .v1()
            .name("lrg")
            .on_receive_notification(
                async move |note: SessionNotification, _cx| {
                    let route = lrg_providers::sync::lock(&to_updates);
                    match route.as_ref() {
                        Some((session, turn)) if *session == note.session_id => {
                            let _ = turn.send(Incoming::Update(note.update));
                        }
                        _ => {
                            lrg_providers::sync::lock(&late)
                                .insert(note.session_id, std::time::Instant::now());
                        }
                    }
                    Ok(())
                },
                agent_client_protocol::on_receive_notification!(),
            )
            .on_receive_request(
                async move |req: RequestPermissionRequest, responder, cx| {
                    let (sender, answer) = oneshot::channel();
                    let routed = match lrg_providers::sync::lock(&to_asks).as_ref() {
                        Some((session, turn)) if *session == req.session_id => {
                            turn.send(Incoming::Ask(req, sender)).is_ok()
                        }
                        _ => false,
                    };
                    cx.spawn(async move {
                        // No turn in progress, or the turn ended first: nobody
                        // said yes.
                        let outcome = match routed {
                            true => answer.await.unwrap_or(RequestPermissionOutcome::Cancelled),
                            false => RequestPermissionOutcome::Cancelled,
                        };
                        responder.respond(RequestPermissionResponse::new(outcome))
                    })
                },
                agent_client_protocol::on_receive_request!(),
            )
            .connect_with(
                ByteStreams::new(stdin.compat_write(), stdout.compat()),
                async move |cx: ConnectionTo<Agent>| {
                    let _ = cx_sender.send(cx.clone());
                    cx.incoming_closed().await;
                    Ok(())
                },
            );
        let task = tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!(error = %e, "ACP agent connection ended");
            }
        });
        let open = async {
            let cx = cx_receiver
                .await
                .map_err(|_| self.failed("the connection closed at once"))?;
            cx.send_request(InitializeRequest::new(ProtocolVersion::V1))
                .block_task()
                .await
                .map_err(|e| self.failed(format!("initialize: {e}")))?;
            Ok::<_, ProviderError>(cx)
        };
        let opened = tokio::time::timeout(START_TIMEOUT, open).await;
        let cx = match opened {
            Ok(Ok(opened)) => opened,
            Ok(Err(e)) => {
                task.abort();
                return Err(e);
            }
            Err(_) => {
                task.abort();
                return Err(self.failed(format!(
                    "did not start within {} s",
                    START_TIMEOUT.as_secs()
                )));
            }
        };
        Ok(Running {
            cx,
            sessions: Vec::new(),
            route,
            stragglers,
            cancelled: Cancelled::default(),
            task,
            _process: process,
        })
    }
}

impl ChatModel for AcpBackend {
    fn info(&self) -> ModelInfo {
        // Where the agent sends the conversation is the agent's business;
        // lrg cannot tell, so it is not claimed to be a cloud.
        ModelInfo::new("acp", self.inner.name(), ModelLocation::Server)
    }

    fn turn(&self, request: TurnRequest, cancel: CancellationToken) -> TurnStream {
        let inner = self.inner.clone();
        // Read now: the session's task is the one calling.
        let chat = ChatSession::current().map(|c| c.downgrade());
        Box::pin(async_stream::stream! {
            let shown_chat = chat.clone();
            let prompt = match last_prompt(&request.messages) {
                // An agent is sent no system prompt: a typed answer's
                // schema goes with the prompt itself.
                Ok(mut prompt) => {
                    if let Some(output) = &request.output {
                        prompt.push(ContentBlock::Text(TextContent::new(output.instructions())));
                    }
                    prompt
                }
                Err(e) => {
                    yield Err(inner.failed(e));
                    return;
                }
            };
            let mut agent = inner.agent.lock().await;
            // A dead agent is started again: a fresh agent session.
            if agent.as_ref().is_some_and(|a| a.task.is_finished()) {
                *agent = None;
            }
            if agent.is_none() {
                match inner.start().await {
                    Ok(started) => *agent = Some(started),
                    Err(e) => {
                        yield Err(e);
                        return;
                    }
                }
            }
            let Some(running) = agent.as_mut() else {
                return;
            };
            let session = match inner.session_for(running, &chat).await {
                Ok(session) => session,
                Err(e) => {
                    yield Err(e);
                    return;
                }
            };
            let was_cancelled = lrg_providers::sync::lock(&running.cancelled).remove(&session);
            if was_cancelled {
                quiet(&running.stragglers, &session).await;
            }
            let (sender, mut incoming) = mpsc::unbounded_channel();
            *lrg_providers::sync::lock(&running.route) = Some((session.clone(), sender));
            // Cleared however the turn ends, dropped mid-way too: what comes
            // after is a straggler.
            let _route = ClearRoute(running.route.clone());
            let response = running
                .cx
                .send_request(PromptRequest::new(session.clone(), prompt))
                .block_task();
            tokio::pin!(response);
            // The loop drops a stopped turn's stream without polling it
            // again: the agent is told to cancel then too.
            let mut pending = CancelOnDrop(
                Some((running.cx.clone(), session.clone())),
                running.cancelled.clone(),
            );
            let mut shown = Shown::new(shown_chat);
            let mut cancel_sent = false;
            let result = loop {
                let next = tokio::select! {
                    biased;
                    Some(item) = incoming.recv() => Step::Item(Box::new(item)),
                    _ = cancel.cancelled(), if !cancel_sent => Step::Cancel,
                    result = &mut response => Step::Done(result),
                };
                match next {
                    Step::Item(item) => match *item {
                        Incoming::Update(update) => {
                            if let Some(event) = shown.update(update) {
                                yield Ok(event);
                            }
                        }
                        Incoming::Ask(req, answer) => {
                            let outcome = shown.ask(&req).await;
                            let _ = answer.send(outcome);
                        }
                    },
                    Step::Cancel => {
                        cancel_sent = true;
                        pending.cancel();
                    }
                    Step::Done(result) => {
                        pending.0 = None;
                        break result;
                    }
                }
            };
            // Updates routed before the answer are told before it ends.
            while let Ok(item) = incoming.try_recv() {
                if let Incoming::Update(update) = item
                    && let Some(event) = shown.update(update)
                {
                    yield Ok(event);
                }
            }
            *lrg_providers::sync::lock(&running.route) = None;
            if matches!(&result, Ok(a) if a.stop_reason == AcpStop::Cancelled) {
                lrg_providers::sync::lock(&running.cancelled).insert(session.clone());
            }
            match result {
                Ok(answer) => {
                    let stop = match answer.stop_reason {
                        AcpStop::EndTurn => StopReason::EndTurn,
                        AcpStop::MaxTokens => StopReason::MaxTokens,
                        AcpStop::Cancelled => StopReason::Cancelled,
                        other => StopReason::Other(format!("{other:?}")),
                    };
                    yield Ok(TurnEvent::End { stop });
                }
                Err(e) => {
                    let dead = running.task.is_finished()
                        || agent_client_protocol::is_incoming_transport_closed(&e)
                        || agent_client_protocol::is_connection_terminated(&e);
                    let message = if dead {
                        "the agent exited; the next message starts it again".to_string()
                    } else {
                        format!("session/prompt failed: {e}")
                    };
                    if dead {
                        *agent = None;
                    }
                    yield Err(inner.failed(message));
                }
            }
        })
    }
}

/// Wait until agent session `session` has sent no straggler for [`QUIET`]
/// (at most [`QUIET_MAX`]).
async fn quiet(stragglers: &Stragglers, session: &SessionId) {
    let started = std::time::Instant::now();
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

/// Sends `session/cancel` for a prompt still running when dropped.
/// Clears the route when the turn is over.
struct ClearRoute(Route);

impl Drop for ClearRoute {
    fn drop(&mut self) {
        *lrg_providers::sync::lock(&self.0) = None;
    }
}

/// The cancel is noted, so the session's next prompt waits for quiet.
struct CancelOnDrop(Option<(ConnectionTo<Agent>, SessionId)>, Cancelled);

impl CancelOnDrop {
    fn cancel(&mut self) {
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

enum Step {
    Item(Box<Incoming>),
    Cancel,
    Done(Result<agent_client_protocol::v1::schema::PromptResponse, agent_client_protocol::Error>),
}

/// The agent's tool calls told to the chat so far in this turn.
struct Shown {
    /// The chat whose turn this is.
    chat: Option<WeakChatSession>,
    calls: HashSet<String>,
    /// Some answer text was streamed in this turn.
    wrote: bool,
    /// A tool call was shown since the last answer text.
    tools_since_text: bool,
}

impl Shown {
    fn new(chat: Option<WeakChatSession>) -> Self {
        Self {
            chat,
            calls: HashSet::new(),
            wrote: false,
            tools_since_text: false,
        }
    }

    fn chat(&self) -> Option<ChatSession> {
        self.chat.as_ref().and_then(WeakChatSession::upgrade)
    }

    /// The turn event for an update, after telling the chat what is not
    /// part of the model's answer (tool calls).
    fn update(&mut self, update: SessionUpdate) -> Option<TurnEvent> {
        let text = |block: ContentBlock| match block {
            ContentBlock::Text(t) => Some(t.text),
            _ => None,
        };
        match update {
            SessionUpdate::AgentMessageChunk(chunk) => text(chunk.content).map(|mut text| {
                // The agent's answer after its tool calls is a new
                // paragraph, as it would be in lrg's own loop.
                if std::mem::take(&mut self.tools_since_text) && self.wrote {
                    text.insert(0, '\n');
                }
                self.wrote = true;
                TurnEvent::TextDelta { text }
            }),
            SessionUpdate::AgentThoughtChunk(chunk) => {
                text(chunk.content).map(|text| TurnEvent::ReasoningDelta { text })
            }
            SessionUpdate::ToolCall(call) => {
                let id = call.tool_call_id.0.to_string();
                self.announce(&id, &call.title, call.kind, call.raw_input);
                self.status(&id, Some(call.status), call.content);
                None
            }
            SessionUpdate::ToolCallUpdate(update) => {
                let id = update.tool_call_id.0.to_string();
                let fields = update.fields;
                let title = fields.title.unwrap_or_else(|| "tool".into());
                self.announce(
                    &id,
                    &title,
                    fields.kind.unwrap_or_default(),
                    fields.raw_input,
                );
                self.status(&id, fields.status, fields.content.unwrap_or_default());
                None
            }
            _ => None,
        }
    }

    fn announce(&mut self, id: &str, title: &str, kind: ToolKind, input: Option<Value>) {
        if !self.calls.insert(id.to_string()) {
            return;
        }
        self.tools_since_text = true;
        if let Some(chat) = self.chat() {
            chat.publish_external(Event::ToolCall {
                call_id: id.to_string(),
                tool: title.to_string(),
                title: None,
                class: class_of(kind),
                arguments: input.unwrap_or_else(|| Value::Object(Default::default())),
                targets: None,
                runs_on: Default::default(),
            });
        }
    }

    fn status(&self, id: &str, status: Option<ToolCallStatus>, content: Vec<ToolCallContent>) {
        let Some(chat) = self.chat() else {
            return;
        };
        let call_id = id.to_string();
        let event = match status {
            Some(ToolCallStatus::InProgress) => Event::ToolRunning { call_id },
            Some(ToolCallStatus::Completed | ToolCallStatus::Failed) => {
                let text = content
                    .into_iter()
                    .filter_map(|c| match c {
                        ToolCallContent::Content(c) => match c.content {
                            ContentBlock::Text(t) => Some(t.text),
                            _ => None,
                        },
                        _ => None,
                    })
                    .collect::<Vec<_>>()
                    .join("\n");
                Event::ToolDone {
                    call_id,
                    ok: status == Some(ToolCallStatus::Completed),
                    text,
                    images: Vec::new(),
                    structured: None,
                    resources: Vec::new(),
                }
            }
            _ => return,
        };
        chat.publish_external(event);
    }

    /// Ask the chat, and pick the agent's option that says what it answered.
    async fn ask(&mut self, req: &RequestPermissionRequest) -> RequestPermissionOutcome {
        let Some(chat) = self.chat() else {
            return RequestPermissionOutcome::Cancelled;
        };
        let id = req.tool_call.tool_call_id.0.to_string();
        let fields = &req.tool_call.fields;
        self.announce(
            &id,
            fields.title.as_deref().unwrap_or("tool"),
            fields.kind.unwrap_or_default(),
            fields.raw_input.clone(),
        );
        let offer_always = req
            .options
            .iter()
            .any(|o| o.kind == PermissionOptionKind::AllowAlways);
        let answer = chat.ask_approval(&id, offer_always).await;
        let wanted: &[PermissionOptionKind] = match answer {
            Answer::Once => &[PermissionOptionKind::AllowOnce],
            Answer::ThisChat | Answer::Always => &[
                PermissionOptionKind::AllowAlways,
                PermissionOptionKind::AllowOnce,
            ],
            Answer::Deny { .. } => &[
                PermissionOptionKind::RejectOnce,
                PermissionOptionKind::RejectAlways,
            ],
        };
        wanted
            .iter()
            .find_map(|kind| req.options.iter().find(|o| o.kind == *kind))
            .map_or(RequestPermissionOutcome::Cancelled, |o| {
                RequestPermissionOutcome::Selected(SelectedPermissionOutcome::new(
                    o.option_id.clone(),
                ))
            })
    }
}

/// The permission class of an agent's tool kind; a kind that says nothing
/// counts as destructive, as an unannotated MCP tool does.
fn class_of(kind: ToolKind) -> ToolClass {
    match kind {
        ToolKind::Read | ToolKind::Search | ToolKind::Fetch | ToolKind::Think => ToolClass::Read,
        ToolKind::Edit | ToolKind::Move | ToolKind::SwitchMode => ToolClass::Change,
        _ => ToolClass::Destructive,
    }
}

/// The last user message as a prompt: its text and images (the agent keeps
/// the conversation; lrg sends only what is new).
fn last_prompt(messages: &[Message]) -> Result<Vec<ContentBlock>, String> {
    let last = messages
        .iter()
        .rev()
        .find(|m| m.role == Role::User)
        .ok_or("there is no user message to send")?;
    let mut blocks = Vec::new();
    for part in &last.parts {
        match part {
            Part::Text { text } => blocks.push(ContentBlock::Text(TextContent::new(text.clone()))),
            Part::Image(image) => blocks.push(ContentBlock::Image(ImageContent::new(
                base64::engine::general_purpose::STANDARD.encode(&image.data),
                image.mime.clone(),
            ))),
            _ => {}
        }
    }
    Ok(blocks)
}
