//! The agent side: one client connection, its sessions, and the handlers.
//!
//! Every handler that waits (building a session starts MCP servers; a
//! prompt runs a whole turn) runs as a task of the connection, so the
//! dispatch loop keeps reading: a `session/cancel` or a permission answer
//! arrives while a prompt is in flight.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    AgentCapabilities, CancelNotification, ElicitationCapabilities, Implementation,
    InitializeRequest, InitializeResponse, ListSessionsRequest, ListSessionsResponse,
    LoadSessionRequest, LoadSessionResponse, McpCapabilities, McpServer, NewSessionRequest,
    NewSessionResponse, PromptCapabilities, PromptRequest, PromptResponse,
    RequestPermissionRequest, ResumeSessionRequest, ResumeSessionResponse, SessionCapabilities,
    SessionConfigOption, SessionConfigOptionCategory, SessionConfigOptionValue,
    SessionConfigSelectOption, SessionId, SessionInfo, SessionListCapabilities,
    SessionNotification, SessionResumeCapabilities, SetSessionConfigOptionRequest,
    SetSessionConfigOptionResponse,
};
use agent_client_protocol::v1::{ConnectionTo, Responder};
use agent_client_protocol::{Agent, ByteStreams, Client, ErrorCode};
use futures::{AsyncRead, AsyncWrite};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::map::{self, Choice, Updates};
use super::questions;
use super::{AcpError, AcpSession, MODEL_OPTION, SessionFactory, SessionSpec};
use crate::ChatSession;
use crate::events::Event;
use crate::permissions::Rule;

/// Serve one ACP client on a byte stream until it closes the stream; then
/// every session is stopped and its tools shut down.
pub async fn serve<R, W>(
    factory: Arc<dyn SessionFactory>,
    incoming: R,
    outgoing: W,
) -> Result<(), AcpError>
where
    R: AsyncRead + Send + 'static,
    W: AsyncWrite + Send + 'static,
{
    let state = Arc::new(State {
        factory,
        sessions: Mutex::default(),
        elicitation: Mutex::default(),
    });
    let (s1, s2, s3, s4, s5, s6) = (
        state.clone(),
        state.clone(),
        state.clone(),
        state.clone(),
        state.clone(),
        state.clone(),
    );
    let (s7, s8) = (state.clone(), state.clone());
    let result = Agent
        .v1()
        .name("lrg")
        .on_receive_request(
            async move |req: InitializeRequest, responder: Responder<InitializeResponse>, _cx| {
                responder.respond(s1.initialize(&req))
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |req: NewSessionRequest,
                        responder: Responder<NewSessionResponse>,
                        cx: ConnectionTo<Client>| {
                let state = s2.clone();
                let conn = cx.clone();
                cx.spawn(async move { reply(responder, state.new_session(req, &conn).await) })
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |req: LoadSessionRequest,
                        responder: Responder<LoadSessionResponse>,
                        cx: ConnectionTo<Client>| {
                let state = s3.clone();
                let conn = cx.clone();
                cx.spawn(async move { reply(responder, state.load_session(req, &conn).await) })
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |req: ResumeSessionRequest,
                        responder: Responder<ResumeSessionResponse>,
                        cx: ConnectionTo<Client>| {
                let state = s7.clone();
                let conn = cx.clone();
                cx.spawn(async move { reply(responder, state.resume_session(req, &conn).await) })
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |req: ListSessionsRequest,
                        responder: Responder<ListSessionsResponse>,
                        cx| {
                let state = s8.clone();
                cx.spawn(async move { reply(responder, state.list_sessions(req).await) })
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |req: PromptRequest,
                        responder: Responder<PromptResponse>,
                        cx: ConnectionTo<Client>| {
                let state = s4.clone();
                cx.spawn(async move { reply(responder, state.prompt(req).await) })
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |req: SetSessionConfigOptionRequest,
                        responder: Responder<SetSessionConfigOptionResponse>,
                        cx: ConnectionTo<Client>| {
                let state = s5.clone();
                let conn = cx.clone();
                cx.spawn(async move { reply(responder, state.set_option(req, &conn).await) })
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_notification(
            async move |note: CancelNotification, _cx| {
                // Unknown ids are ignored: a notification has no answer.
                if let Ok(live) = s6.get(&note.session_id) {
                    live.chat().stop();
                }
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .connect_to(ByteStreams::new(outgoing, incoming))
        .await;
    state.close_all().await;
    result.map_err(|e| AcpError::Connection(e.to_string()))
}

/// [`serve`] on this process's stdin and stdout (what `lrg acp` runs).
pub async fn serve_stdio(factory: Arc<dyn SessionFactory>) -> Result<(), AcpError> {
    use tokio_util::compat::{TokioAsyncReadCompatExt as _, TokioAsyncWriteCompatExt as _};
    serve(
        factory,
        tokio::io::stdin().compat(),
        tokio::io::stdout().compat_write(),
    )
    .await
}

fn reply<T: agent_client_protocol::JsonRpcResponse>(
    responder: Responder<T>,
    result: Result<T, AcpError>,
) -> Result<(), agent_client_protocol::Error> {
    match result {
        Ok(response) => responder.respond(response),
        Err(e) => {
            let code = match e {
                AcpError::NotFound(_) => ErrorCode::RESOURCE_NOT_FOUND,
                AcpError::Invalid(_) | AcpError::Unsupported(_) => ErrorCode::INVALID_PARAMS,
                _ => ErrorCode::INTERNAL_ERROR,
            };
            responder.respond_with_error(agent_client_protocol::Error::new(code, e.to_string()))
        }
    }
}

/// How many sessions one `session/list` page holds.
const LIST_PAGE: usize = 50;

struct State {
    factory: Arc<dyn SessionFactory>,
    sessions: Mutex<HashMap<String, Arc<Live>>>,
    /// The elicitation modes the client said it answers (`initialize`).
    elicitation: Mutex<Option<ElicitationCapabilities>>,
}

/// One open session; its chat is replaced when the client picks another
/// model (a new chat: a conversation moves to another model only when the
/// person says so, and ACP's model picker does not ask).
///
/// Its chat's events are told to the client by one teller task for as long
/// as the session is open, in prompts and between them: a sub-agent's
/// result starts a turn of its own, which the client sees as it runs.
struct Live {
    inner: Mutex<(AcpSession, SessionSpec)>,
    /// The `seq` of the newest event the teller has told (or passed over),
    /// so a prompt answers only after its turn's every update.
    told: watch::Sender<u64>,
    /// Ends the current chat's teller (when the chat is replaced or closed).
    teller: Mutex<CancellationToken>,
    /// The elicitation modes the client answers: the chat's questions go
    /// to it in those, and are declined in others.
    elicitation: Option<ElicitationCapabilities>,
}

impl Live {
    fn chat(&self) -> ChatSession {
        lrg_providers::sync::lock(&self.inner).0.session.clone()
    }

    fn model(&self) -> String {
        lrg_providers::sync::lock(&self.inner).0.model.clone()
    }

    fn spec(&self) -> SessionSpec {
        lrg_providers::sync::lock(&self.inner).1.clone()
    }

    /// Put `session` in place, tell its events from now on, and shut the
    /// old one's tools down.
    async fn replace(
        self: &Arc<Self>,
        session: AcpSession,
        spec: SessionSpec,
        cx: &ConnectionTo<Client>,
        id: &str,
    ) {
        let chat = session.session.clone();
        let old = std::mem::replace(
            &mut *lrg_providers::sync::lock(&self.inner),
            (session, spec),
        );
        self.tell(cx, id, chat);
        close(old.0).await;
    }

    /// Start telling `chat`'s events after its current last one, ending the
    /// teller of the chat before it.
    fn tell(self: &Arc<Self>, cx: &ConnectionTo<Client>, id: &str, chat: ChatSession) {
        let stop = CancellationToken::new();
        lrg_providers::sync::lock(&self.teller).cancel();
        *lrg_providers::sync::lock(&self.teller) = stop.clone();
        let from = chat.events().last_seq();
        self.told.send_replace(from);
        let (live, conn, id) = (self.clone(), cx.clone(), SessionId::new(id.to_string()));
        let task = async move {
            let mut events = chat.subscribe(from);
            let mut updates = Updates::default();
            loop {
                let entry = tokio::select! {
                    () = stop.cancelled() => break,
                    entry = events.next() => entry,
                };
                let Some(entry) = entry else { break };
                match &entry.event {
                    // The log forgot what this teller had not read yet
                    // (ACP has no way to say so): go on from its newest.
                    Event::Resync => {
                        let newest = chat.events().last_seq();
                        events = chat.subscribe(newest);
                        live.told.send_replace(newest);
                        continue;
                    }
                    event @ Event::ApprovalNeeded { .. } => {
                        if let Some(request) = crate::ApprovalRequest::from_event(event) {
                            ask(&conn, &chat, &id, request);
                        }
                    }
                    event @ Event::Question { .. } => {
                        questions::forward(&conn, &chat, &id, live.elicitation.as_ref(), event);
                    }
                    event => {
                        for update in updates.map(event, false) {
                            let _ = conn
                                .send_notification(SessionNotification::new(id.clone(), update));
                        }
                    }
                }
                // Deltas are not numbered: the numbered event after them is.
                if let Some(seq) = entry.seq {
                    live.told.send_replace(seq);
                }
            }
            Ok(())
        };
        if cx.spawn(task).is_err() {
            // The connection is closing: nothing is told any more.
            lrg_providers::sync::lock(&self.teller).cancel();
        }
    }

    /// Wait until the teller has told every event up to `seq` (bounded: a
    /// teller that cannot send any more must not hold the answer back).
    async fn told_up_to(&self, seq: u64) {
        let mut told = self.told.subscribe();
        let _ = tokio::time::timeout(TOLD_WAIT, told.wait_for(|told| *told >= seq)).await;
    }
}

/// The longest a prompt's answer waits for its last updates to be told.
const TOLD_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

async fn close(session: AcpSession) {
    session.session.stop();
    if let Some(host) = session.host {
        host.shutdown().await;
    }
}

impl State {
    fn initialize(&self, req: &InitializeRequest) -> InitializeResponse {
        lrg_providers::sync::lock(&self.elicitation)
            .clone_from(&req.client_capabilities.elicitation);
        // Only v1 is spoken; a client asking for a later version reads the
        // answer and decides.
        let kept = self.factory.can_load();
        let mut sessions = SessionCapabilities::new();
        if kept {
            sessions = sessions
                .list(SessionListCapabilities::new())
                .resume(SessionResumeCapabilities::new());
        }
        InitializeResponse::new(ProtocolVersion::V1)
            .agent_capabilities(
                AgentCapabilities::new()
                    .load_session(kept)
                    .session_capabilities(sessions)
                    .prompt_capabilities(
                        PromptCapabilities::new().image(true).embedded_context(true),
                    )
                    .mcp_capabilities(McpCapabilities::new().http(true)),
            )
            .agent_info(Implementation::new("lrg", env!("CARGO_PKG_VERSION")))
    }

    fn get(&self, id: &SessionId) -> Result<Arc<Live>, AcpError> {
        lrg_providers::sync::lock(&self.sessions)
            .get(&*id.0)
            .cloned()
            .ok_or_else(|| AcpError::NotFound(format!("unknown session id `{}`", id.0)))
    }

    /// Open `session` as `id`: its events are told to the client from now.
    fn insert(
        &self,
        id: String,
        session: AcpSession,
        spec: SessionSpec,
        cx: &ConnectionTo<Client>,
    ) {
        let chat = session.session.clone();
        let live = Arc::new(Live {
            inner: Mutex::new((session, spec)),
            told: watch::Sender::new(0),
            teller: Mutex::new(CancellationToken::new()),
            elicitation: lrg_providers::sync::lock(&self.elicitation).clone(),
        });
        live.tell(cx, &id, chat);
        lrg_providers::sync::lock(&self.sessions).insert(id, live);
    }

    async fn close_all(&self) {
        let all: Vec<_> = lrg_providers::sync::lock(&self.sessions)
            .drain()
            .map(|(_, live)| live)
            .collect();
        for live in all {
            lrg_providers::sync::lock(&live.teller).cancel();
            let chat = live.chat();
            chat.stop();
            let host = lrg_providers::sync::lock(&live.inner).0.host.clone();
            if let Some(host) = host {
                host.shutdown().await;
            }
        }
    }

    /// The `model` option, listing the factory's models with the current
    /// one first when the list lacks it.
    async fn options(&self, current: &str) -> Vec<SessionConfigOption> {
        let mut models = self.factory.models().await;
        if !models.iter().any(|m| m.id == current) {
            models.insert(0, super::ModelChoice::new(current, current));
        }
        let choices: Vec<_> = models
            .into_iter()
            .map(|m| SessionConfigSelectOption::new(m.id, m.name))
            .collect();
        vec![
            SessionConfigOption::select(MODEL_OPTION, "Model", current.to_string(), choices)
                .category(SessionConfigOptionCategory::Model)
                .description("Another model starts a new chat".to_string()),
        ]
    }

    async fn new_session(
        &self,
        req: NewSessionRequest,
        cx: &ConnectionTo<Client>,
    ) -> Result<NewSessionResponse, AcpError> {
        let mcp = map::mcp_config(req.mcp_servers).map_err(AcpError::Invalid)?;
        let spec = SessionSpec::new(req.cwd).with_mcp(mcp);
        let opened = self.factory.open(spec.clone()).await?;
        // A kept session is known to the client by its store id, so a
        // later `session/load` finds it.
        let id = match opened.session.store_id() {
            Some(id) => id.as_str().to_string(),
            None => crate::store::SessionId::random().as_str().to_string(),
        };
        let options = self.options(&opened.model).await;
        self.insert(id.clone(), opened, spec, cx);
        Ok(NewSessionResponse::new(id).config_options(options))
    }

    async fn load_session(
        &self,
        req: LoadSessionRequest,
        cx: &ConnectionTo<Client>,
    ) -> Result<LoadSessionResponse, AcpError> {
        let id = req.session_id.0.to_string();
        let (opened, spec) = self.open_kept(&id, req.cwd, req.mcp_servers).await?;
        // The history, told again as the spec asks, before the answer. A
        // log bounded below the chat's size has forgotten its start: then
        // the history itself is told, and of the log only what is not
        // history (warnings of the load).
        let mut updates = Updates::default();
        let log = opened.session.events();
        let entries = log.entries();
        let events: Vec<Event> = if log.first_kept_seq() > 1 {
            let mut events = crate::session::history_events(&opened.session.history());
            events.extend(
                entries
                    .iter()
                    .filter(|e| matches!(e.event, Event::Warning { .. }))
                    .map(|e| e.event.clone()),
            );
            events
        } else {
            entries.iter().map(|e| e.event.clone()).collect()
        };
        for event in &events {
            for update in updates.map(event, true) {
                let _ = cx.send_notification(SessionNotification::new(id.clone(), update));
            }
        }
        let options = self.options(&opened.model).await;
        self.insert(id, opened, spec, cx);
        Ok(LoadSessionResponse::new().config_options(options))
    }

    /// Kept session `id` opened again for the client (not yet inserted).
    async fn open_kept(
        &self,
        id: &str,
        cwd: std::path::PathBuf,
        mcp_servers: Vec<McpServer>,
    ) -> Result<(AcpSession, SessionSpec), AcpError> {
        if lrg_providers::sync::lock(&self.sessions).contains_key(id) {
            return Err(AcpError::Invalid(format!("session `{id}` is already open")));
        }
        let mcp = map::mcp_config(mcp_servers).map_err(AcpError::Invalid)?;
        let spec = SessionSpec::new(cwd).with_mcp(mcp);
        let opened = self.factory.load(id, spec.clone()).await?;
        Ok((opened, spec))
    }

    /// `session/resume`: `session/load` without telling the history again
    /// (the client still shows it).
    async fn resume_session(
        &self,
        req: ResumeSessionRequest,
        cx: &ConnectionTo<Client>,
    ) -> Result<ResumeSessionResponse, AcpError> {
        let id = req.session_id.0.to_string();
        let (opened, spec) = self.open_kept(&id, req.cwd, req.mcp_servers).await?;
        let options = self.options(&opened.model).await;
        self.insert(id, opened, spec, cx);
        Ok(ResumeSessionResponse::new().config_options(options))
    }

    /// `session/list`: the kept sessions, newest first, a page at a time;
    /// the cursor is where the next page starts.
    async fn list_sessions(
        &self,
        req: ListSessionsRequest,
    ) -> Result<ListSessionsResponse, AcpError> {
        if !self.factory.can_load() {
            return Err(AcpError::Unsupported(
                "sessions are not kept: start the agent with a store".into(),
            ));
        }
        let start = match req.cursor.as_deref() {
            None => 0,
            Some(cursor) => cursor.parse::<usize>().map_err(|_| {
                AcpError::Invalid(format!("`{cursor}` is not a cursor this agent gave"))
            })?,
        };
        let all = self.factory.list(req.cwd).await?;
        let page: Vec<SessionInfo> = all
            .iter()
            .skip(start)
            .take(LIST_PAGE)
            .map(|kept| {
                let updated = kept.updated_ms.and_then(crate::http::rfc3339);
                SessionInfo::new(kept.id.clone(), kept.cwd.clone())
                    .title(kept.title.clone())
                    .updated_at(updated)
            })
            .collect();
        let next = start + page.len();
        let mut response = ListSessionsResponse::new(page);
        if next < all.len() {
            response = response.next_cursor(next.to_string());
        }
        Ok(response)
    }

    async fn set_option(
        &self,
        req: SetSessionConfigOptionRequest,
        cx: &ConnectionTo<Client>,
    ) -> Result<SetSessionConfigOptionResponse, AcpError> {
        let live = self.get(&req.session_id)?;
        if *req.config_id.0 != *MODEL_OPTION {
            return Err(AcpError::Invalid(format!(
                "unknown config option `{}` (lrg has `{MODEL_OPTION}`)",
                req.config_id.0
            )));
        }
        let SessionConfigOptionValue::ValueId { value } = req.value else {
            return Err(AcpError::Invalid(
                "the model option takes a model id, not a boolean".into(),
            ));
        };
        let model = value.0.to_string();
        if model != live.model() {
            if live.chat().is_busy() {
                return Err(AcpError::Invalid(
                    "the session is working on a prompt: cancel it or wait before changing the model"
                        .into(),
                ));
            }
            let spec = live.spec().with_model(model);
            let opened = self.factory.open(spec.clone()).await?;
            live.replace(opened, spec, cx, &req.session_id.0).await;
        }
        let options = self.options(&live.model()).await;
        Ok(SetSessionConfigOptionResponse::new(options))
    }

    async fn prompt(&self, req: PromptRequest) -> Result<PromptResponse, AcpError> {
        let live = self.get(&req.session_id)?;
        let input = map::user_input(req.prompt).map_err(AcpError::Invalid)?;
        let chat = live.chat();
        let mut events = chat.subscribe(chat.events().last_seq());
        let handle = chat
            .send(input)
            .map_err(|e| AcpError::Invalid(e.to_string()))?;
        // The session's teller tells the turn's events (and asks its
        // approvals); the answer waits until it has told the turn's last.
        let end = async {
            while let Some(entry) = events.next().await {
                if matches!(entry.event, Event::Busy { busy: false, .. } | Event::Resync) {
                    return entry.seq.unwrap_or_else(|| chat.events().last_seq());
                }
            }
            chat.events().last_seq()
        };
        let (outcome, end) = futures::join!(handle, end);
        live.told_up_to(end).await;
        let reason = map::stop_reason(&outcome).map_err(AcpError::Session)?;
        Ok(PromptResponse::new(reason))
    }
}

/// Ask the client the session's question and answer the session with what
/// it chose, in a task of its own so the turn's updates keep flowing.
fn ask(
    cx: &ConnectionTo<Client>,
    chat: &ChatSession,
    id: &SessionId,
    question: crate::ApprovalRequest,
) {
    let request = RequestPermissionRequest::new(
        id.clone(),
        map::question(&question),
        Choice::options(question.offers(crate::AnswerKind::Always)),
    );
    let tool = Some(question.tool).filter(|t| !t.is_empty());
    let (conn, asked, call_id) = (cx.clone(), chat.clone(), question.call_id);
    let denied_id = call_id.clone();
    let task = async move {
        // A request that fails (the client is gone, or answered with an
        // error) is a rejection: nothing runs without a yes.
        let choice = match conn.send_request(request).block_task().await {
            Ok(response) => Choice::of(&response.outcome),
            Err(_) => Choice::RejectOnce,
        };
        if let (Choice::RejectAlways, Some(tool)) = (choice, tool) {
            asked.update_permissions(|s| {
                s.rules.insert(tool, Rule::Block);
            });
        }
        // Refused when the turn was stopped meanwhile: nothing waits then.
        let _ = asked.answer_approval(&call_id, choice.answer());
        Ok(())
    };
    if cx.spawn(task).is_err() {
        // The connection is closing: deny, so the turn can end.
        let _ = chat.answer_approval(&denied_id, crate::Answer::deny());
    }
}
