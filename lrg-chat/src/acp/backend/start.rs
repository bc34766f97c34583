//! Starting the agent: the process, the connection, and the agent sessions
//! of the chats that call it.

use std::collections::{HashMap, HashSet};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    InitializeRequest, NewSessionRequest, RequestPermissionOutcome, RequestPermissionRequest,
    RequestPermissionResponse, SessionId, SessionNotification, SessionUpdate,
};
use agent_client_protocol::{Agent, ByteStreams, Client};
#[cfg(unix)]
use process_wrap::tokio::ProcessGroup;
use process_wrap::tokio::{ChildWrapper, CommandWrap, KillOnDrop};
use tokio::sync::{mpsc, oneshot};
use tokio_util::compat::{TokioAsyncReadCompatExt as _, TokioAsyncWriteCompatExt as _};

use lrg_providers::ProviderError;

use super::Inner;
use crate::session::WeakChatSession;

/// How long starting the agent (spawn, `initialize`, `session/new`) may take.
pub(super) const START_TIMEOUT: Duration = Duration::from_secs(60);

/// What the connection task hands the turn in progress, in arrival order.
pub(super) enum Incoming {
    Update(SessionUpdate),
    Ask(
        RequestPermissionRequest,
        oneshot::Sender<RequestPermissionOutcome>,
    ),
}

/// Where the agent's updates and questions go: the turn in progress, for
/// its agent session only. What comes for another session, or between
/// prompts, is a straggler: dropped, and its time noted ([`Stragglers`]).
pub(super) type Route = Arc<Mutex<Option<(SessionId, mpsc::UnboundedSender<Incoming>)>>>;

/// When each agent session last sent something no prompt of it was waiting
/// for (an update a cancelled prompt sent after its answer).
pub(super) type Stragglers = Arc<Mutex<HashMap<SessionId, Instant>>>;

/// The agent sessions whose last prompt was cancelled (shared with the
/// cancel that a dropped turn sends).
pub(super) type Cancelled = Arc<Mutex<HashSet<SessionId>>>;

/// The agent's conversation with one chat.
pub(super) struct AgentSession {
    /// The chat (`None`: called outside any chat).
    pub(super) chat: Option<WeakChatSession>,
    pub(super) id: SessionId,
    /// The chat's [`history_generation`](crate::ChatSession::history_generation)
    /// when the agent was last prompted: another one means lrg's history
    /// was rewritten (cleared, retried) and the agent's no longer matches.
    pub(super) generation: u64,
}

/// A started agent with its sessions: one per chat that called it (a chat
/// and its sub-agents each have their own conversation with the agent).
pub(super) struct Running {
    pub(super) cx: ConnectionTo<Agent>,
    pub(super) sessions: Vec<AgentSession>,
    pub(super) route: Route,
    pub(super) stragglers: Stragglers,
    /// Sessions whose last prompt was cancelled: their next waits for quiet.
    pub(super) cancelled: Cancelled,
    pub(super) task: tokio::task::JoinHandle<()>,
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

impl Running {
    /// The agent session of `chat`, if the agent has one that still matches
    /// the chat's history (`generation`). One that no longer does is
    /// forgotten, as are those of chats that ended.
    pub(super) fn session_of(
        &mut self,
        chat: &Option<WeakChatSession>,
        generation: u64,
    ) -> Option<SessionId> {
        let same = |known: &Option<WeakChatSession>| match (known, chat) {
            (Some(a), Some(b)) => a.ptr_eq(b),
            (None, None) => true,
            _ => false,
        };
        self.sessions.retain(|s| {
            let alive = s.chat.as_ref().is_none_or(|w| w.upgrade().is_some());
            alive && !(same(&s.chat) && s.generation != generation)
        });
        self.sessions
            .iter()
            .find(|s| same(&s.chat))
            .map(|s| s.id.clone())
    }
}

impl Inner {
    /// A new agent session for `chat` (`session/new`).
    pub(super) async fn open_session(
        &self,
        running: &mut Running,
        chat: &Option<WeakChatSession>,
        generation: u64,
    ) -> Result<SessionId, ProviderError> {
        let open = running
            .cx
            .send_request(NewSessionRequest::new(self.cwd.clone()))
            .block_task();
        let answer = tokio::time::timeout(START_TIMEOUT, open)
            .await
            .map_err(|_| self.failed("session/new got no answer"))?
            .map_err(|e| self.failed(format!("session/new: {e}")))?;
        let id = answer.session_id;
        self.choose_model(
            &running.cx,
            &id,
            answer.config_options.as_deref().unwrap_or_default(),
        )
        .await?;
        running.sessions.push(AgentSession {
            chat: chat.clone(),
            id: id.clone(),
            generation,
        });
        Ok(id)
    }

    /// Spawn the agent, connect and `initialize`.
    pub(super) async fn start(&self) -> Result<Running, ProviderError> {
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
                                .insert(note.session_id, Instant::now());
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
