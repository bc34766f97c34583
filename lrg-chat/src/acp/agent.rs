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
    AgentCapabilities, CancelNotification, Implementation, InitializeRequest, InitializeResponse,
    LoadSessionRequest, LoadSessionResponse, McpCapabilities, NewSessionRequest,
    NewSessionResponse, PromptCapabilities, PromptRequest, PromptResponse,
    RequestPermissionRequest, SessionConfigOption, SessionConfigOptionCategory,
    SessionConfigOptionValue, SessionConfigSelectOption, SessionId, SessionNotification,
    SetSessionConfigOptionRequest, SetSessionConfigOptionResponse,
};
use agent_client_protocol::v1::{ConnectionTo, Responder};
use agent_client_protocol::{Agent, ByteStreams, Client, ErrorCode};
use futures::{AsyncRead, AsyncWrite};

use super::map::{self, Choice, Updates};
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
    });
    let (s1, s2, s3, s4, s5, s6) = (
        state.clone(),
        state.clone(),
        state.clone(),
        state.clone(),
        state.clone(),
        state.clone(),
    );
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
            async move |req: NewSessionRequest, responder: Responder<NewSessionResponse>, cx| {
                let state = s2.clone();
                cx.spawn(async move { reply(responder, state.new_session(req).await) })
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
            async move |req: PromptRequest,
                        responder: Responder<PromptResponse>,
                        cx: ConnectionTo<Client>| {
                let state = s4.clone();
                let conn = cx.clone();
                cx.spawn(async move { reply(responder, state.prompt(req, &conn).await) })
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |req: SetSessionConfigOptionRequest,
                        responder: Responder<SetSessionConfigOptionResponse>,
                        cx| {
                let state = s5.clone();
                cx.spawn(async move { reply(responder, state.set_option(req).await) })
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

struct State {
    factory: Arc<dyn SessionFactory>,
    sessions: Mutex<HashMap<String, Arc<Live>>>,
}

/// One open session; its chat is replaced when the client picks another
/// model (a new chat: a conversation moves to another model only when the
/// person says so, and ACP's model picker does not ask).
struct Live {
    inner: Mutex<(AcpSession, SessionSpec)>,
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

    /// Put `session` in place and shut the old one's tools down.
    async fn replace(&self, session: AcpSession, spec: SessionSpec) {
        let old = std::mem::replace(
            &mut *lrg_providers::sync::lock(&self.inner),
            (session, spec),
        );
        close(old.0).await;
    }
}

async fn close(session: AcpSession) {
    session.session.stop();
    if let Some(host) = session.host {
        host.shutdown().await;
    }
}

impl State {
    fn initialize(&self, _req: &InitializeRequest) -> InitializeResponse {
        // Only v1 is spoken; a client asking for a later version reads the
        // answer and decides.
        InitializeResponse::new(ProtocolVersion::V1)
            .agent_capabilities(
                AgentCapabilities::new()
                    .load_session(self.factory.can_load())
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

    fn insert(&self, id: String, session: AcpSession, spec: SessionSpec) {
        lrg_providers::sync::lock(&self.sessions).insert(
            id,
            Arc::new(Live {
                inner: Mutex::new((session, spec)),
            }),
        );
    }

    async fn close_all(&self) {
        let all: Vec<_> = lrg_providers::sync::lock(&self.sessions)
            .drain()
            .map(|(_, live)| live)
            .collect();
        for live in all {
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

    async fn new_session(&self, req: NewSessionRequest) -> Result<NewSessionResponse, AcpError> {
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
        self.insert(id.clone(), opened, spec);
        Ok(NewSessionResponse::new(id).config_options(options))
    }

    async fn load_session(
        &self,
        req: LoadSessionRequest,
        cx: &ConnectionTo<Client>,
    ) -> Result<LoadSessionResponse, AcpError> {
        let id = req.session_id.0.to_string();
        if lrg_providers::sync::lock(&self.sessions).contains_key(&id) {
            return Err(AcpError::Invalid(format!("session `{id}` is already open")));
        }
        let mcp = map::mcp_config(req.mcp_servers).map_err(AcpError::Invalid)?;
        let spec = SessionSpec::new(req.cwd).with_mcp(mcp);
        let opened = self.factory.load(&id, spec.clone()).await?;
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
        self.insert(id, opened, spec);
        Ok(LoadSessionResponse::new().config_options(options))
    }

    async fn set_option(
        &self,
        req: SetSessionConfigOptionRequest,
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
            live.replace(opened, spec).await;
        }
        let options = self.options(&live.model()).await;
        Ok(SetSessionConfigOptionResponse::new(options))
    }

    async fn prompt(
        &self,
        req: PromptRequest,
        cx: &ConnectionTo<Client>,
    ) -> Result<PromptResponse, AcpError> {
        let live = self.get(&req.session_id)?;
        let input = map::user_input(req.prompt).map_err(AcpError::Invalid)?;
        let chat = live.chat();
        let mut events = chat.subscribe(chat.events().last_seq());
        let handle = chat
            .send(input)
            .map_err(|e| AcpError::Invalid(e.to_string()))?;
        let id = req.session_id.clone();
        let forward = async {
            let mut updates = Updates::default();
            while let Some(entry) = events.next().await {
                match &entry.event {
                    // The last event of a turn.
                    Event::Busy { busy: false, .. } | Event::Resync => break,
                    Event::ApprovalNeeded {
                        call_id,
                        offer_always,
                        ..
                    } => ask(cx, &chat, &id, &updates, call_id, *offer_always),
                    event => {
                        for update in updates.map(event, false) {
                            let _ =
                                cx.send_notification(SessionNotification::new(id.clone(), update));
                        }
                    }
                }
            }
        };
        let (outcome, ()) = futures::join!(handle, forward);
        let reason = map::stop_reason(&outcome).map_err(AcpError::Session)?;
        Ok(PromptResponse::new(reason))
    }
}

/// Ask the client about call `call_id` and answer the session with what it
/// chose, in a task of its own so the turn's updates keep flowing.
fn ask(
    cx: &ConnectionTo<Client>,
    chat: &ChatSession,
    id: &SessionId,
    updates: &Updates,
    call_id: &str,
    offer_always: bool,
) {
    let request = RequestPermissionRequest::new(
        id.clone(),
        updates.question(call_id),
        Choice::options(offer_always),
    );
    let tool = updates.call(call_id).map(|c| c.tool.clone());
    let (conn, asked, call_id) = (cx.clone(), chat.clone(), call_id.to_string());
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
