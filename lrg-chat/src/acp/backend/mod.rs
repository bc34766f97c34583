//! The client side: an external ACP agent (a subprocess) as the model of a
//! chat. See [`AcpBackend`].

mod cancel;
mod models;
mod prompt;
mod shown;
mod start;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use agent_client_protocol::v1::schema::{
    ContentBlock, PromptRequest, PromptResponse, StopReason as AcpStop, TextContent,
};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use lrg_providers::{
    ChatModel, ModelInfo, ModelLocation, ProviderError, StopReason, TurnEvent, TurnRequest,
    TurnStream,
};

use crate::session::ChatSession;
use cancel::{CancelOnDrop, ClearRoute, quiet};
use shown::Shown;
use start::{Incoming, Running};

pub use models::{AgentModel, AgentModels, agent_models};

/// An external ACP agent as the model of a chat.
///
/// The agent owns its loop and its tools: each user message is sent as one
/// `session/prompt` (the agent keeps the conversation), and what it streams
/// becomes the chat's events: message chunks are text deltas, thought chunks
/// reasoning, `usage_update` the turn's usage (the tokens in the agent's
/// window, counted as read), a plan a `plan` event, its advertised slash
/// commands an `agent_commands` event (a message `/name args` is sent to it
/// as it is). Its tool calls are told as `tool_call` / `tool_running` /
/// `tool_done` and kept in lrg's history as
/// [`AgentToolCall`](super::AgentToolCall) parts, marked as the agent's: a
/// resumed chat shows them, and nothing ever runs them again. Its
/// permission questions are the chat's approvals (`approval_needed`, reason
/// `agent`), answered as any other. Stopping the chat sends
/// `session/cancel`. Made [`on_model`](Self::on_model), every agent session
/// it opens is set to that model first (`session/set_config_option` on the
/// agent's model option).
///
/// The agent's conversation follows lrg's history: when that was rewritten
/// ([`ChatSession::history_generation`]), the next message goes to a new
/// agent session. A cleared chat's agent has forgotten everything; a
/// retried (or edited) message, or a chat resumed on a newly started agent,
/// is answered by a new agent session that is sent lrg's history before it
/// as text first, or is refused with the reason when that history is too
/// long to send again. Compacting is not the agent's to do through lrg
/// (the loop refuses it for a model that keeps its own conversation).
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
    /// The agent's model to choose on every agent session (`None`: the
    /// agent's default).
    model: Option<String>,
    /// The agent's window, as its last `usage_update` said (0: unknown).
    window: AtomicU32,
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

impl AcpBackend {
    /// The agent started by `command` (program and arguments), with
    /// `cwd` as its working directory and the session's.
    pub fn new(command: Vec<String>, cwd: impl Into<PathBuf>) -> Result<Self, ProviderError> {
        Self::on_model(command, cwd, None)
    }

    /// The same, choosing the agent's `model` (a value of its model config
    /// option, see [`agent_models`]) with `session/set_config_option` on
    /// every agent session it opens; `None` keeps the agent's default. An
    /// agent that does not offer the model fails the turn, naming those it
    /// does offer.
    pub fn on_model(
        command: Vec<String>,
        cwd: impl Into<PathBuf>,
        model: Option<String>,
    ) -> Result<Self, ProviderError> {
        if command.first().is_none_or(|p| p.trim().is_empty()) {
            return Err(ProviderError::Config {
                message: "acp: no agent command given (acp:'COMMAND ARGS')".into(),
            });
        }
        Ok(Self {
            inner: Arc::new(Inner {
                command,
                cwd: cwd.into(),
                model,
                window: AtomicU32::new(0),
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
}

impl ChatModel for AcpBackend {
    fn info(&self) -> ModelInfo {
        // Where the agent sends the conversation is the agent's business;
        // lrg cannot tell, so it is not claimed to be a cloud.
        let window = self.inner.window.load(Ordering::Relaxed);
        // The name is what follows `acp:` in the model id, so the id this
        // reports parses back to the same agent and model.
        let name = match &self.inner.model {
            Some(model) => format!("{}#{model}", self.inner.name()),
            None => self.inner.name(),
        };
        ModelInfo::new("acp", name, ModelLocation::Server)
            .context_window((window > 0).then_some(window))
            .keeps_conversation(true)
    }

    fn turn(&self, request: TurnRequest, cancel: CancellationToken) -> TurnStream {
        let inner = self.inner.clone();
        // Read now: the session's task is the one calling.
        let current = ChatSession::current();
        let generation = current.as_ref().map_or(0, ChatSession::history_generation);
        let chat = current.map(|c| c.downgrade());
        Box::pin(async_stream::stream! {
            let shown_chat = chat.clone();
            let mut prompt = match prompt::last_prompt(&request.messages) {
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
            let session = match running.session_of(&chat, generation) {
                Some(session) => session,
                None => {
                    // An agent session that has not seen the conversation:
                    // what came before the message goes first.
                    match prompt::replay(&request.messages) {
                        Ok(Some(replayed)) => prompt.insert(0, replayed),
                        Ok(None) => {}
                        Err(e) => {
                            yield Err(ProviderError::BadRequest {
                                message: format!("ACP agent `{}`: {e}", inner.name()),
                            });
                            return;
                        }
                    }
                    match inner.open_session(running, &chat, generation).await {
                        Ok(session) => session,
                        Err(e) => {
                            yield Err(e);
                            return;
                        }
                    }
                }
            };
            let was_cancelled = lrg_providers::sync::lock(&running.cancelled).remove(&session);
            if was_cancelled {
                quiet(&running.stragglers, &session).await;
            }
            let (sender, mut incoming) = mpsc::unbounded_channel();
            *lrg_providers::sync::lock(&running.route) = Some((session.clone(), sender));
            let _route = ClearRoute(running.route.clone());
            let response = running
                .cx
                .send_request(PromptRequest::new(session.clone(), prompt))
                .block_task();
            tokio::pin!(response);
            let mut pending = CancelOnDrop(
                Some((running.cx.clone(), session.clone())),
                running.cancelled.clone(),
            );
            let mut shown = Shown::new(&inner, shown_chat);
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
            for event in shown.unfinished() {
                yield Ok(event);
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

enum Step {
    Item(Box<Incoming>),
    Cancel,
    Done(Result<PromptResponse, agent_client_protocol::Error>),
}
