//! Our side of an MCP connection: what the client declares and how it
//! answers the requests and notifications a server sends it.
//!
//! lrg declares what it really honours: `roots` (with `listChanged`),
//! `elicitation` in form and URL modes, and `sampling` with `tools`. Requests that come in
//! a 2026-07-28 `input_required` result reach these same methods (rmcp's
//! `RunningService::call_tool` fulfils them through this handler), so both
//! revisions are served alike.
//!
//! - `roots/list`: the host's roots ([`super::roots`]).
//! - `elicitation/create`: put to the person by the session whose call runs
//!   on the server ([`super::link`]); a form outside the spec's subset is
//!   declined with the reason, as is a question that comes while no call
//!   runs.
//! - `sampling/createMessage`: answered by the model of the session whose
//!   call runs on the server, once allowed ([`super::sampling`]).
//! - `notifications/progress`: the running call's `tool_progress`.
//! - `notifications/message`: `tracing` at the matching level; warning and
//!   above also a `server_log` event.
//! - `notifications/{tools,resources,prompts}/list_changed`: the next
//!   listing fetches again.

// Roots, logging and sampling are marked deprecated by SEP-2577, yet servers of every
// revision before it (server-everything among them) use them.
#![allow(deprecated)]

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use rmcp::model::{
    ClientCapabilities, ClientConfig, CreateMessageRequestParams, CreateMessageResult,
    CustomRequest, CustomResult, ElicitRequestParams, ElicitResult, ElicitationAction,
    ElicitationCapability, ErrorData, FormElicitationCapability, Implementation, ListRootsResult,
    LoggingLevel, LoggingMessageNotificationParam, ProgressNotificationParam, RootsCapabilities,
    SamplingCapability, UrlElicitationCapability,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::{ClientHandler, RoleClient};
use serde_json::{Value, json};

use super::super::elicitation::Form;
use super::link::{Asked, Elicited, Link, Progress, ServerQuestion};

/// The `_meta` key of the reason lrg gives with a decline or cancel.
pub(crate) const REASON_KEY: &str = "io.lrg/reason";

/// Our side of an MCP connection (see the [module docs](self)).
#[derive(Clone)]
pub(crate) struct LrgClient {
    pub(super) link: Arc<Link>,
    /// Where `notifications/resources/updated` go.
    pub(super) resource_updates: super::UpdateSender,
}

impl LrgClient {
    /// Put a question to the person of the call running on the server.
    async fn elicit(&self, message: String, ask: Result<Asked, String>) -> Elicited {
        let Some((caller, tool_call_id, token)) = self.link.asker() else {
            return Elicited::Decline(Some(
                "lrg only asks the person questions that come during a tool call".to_owned(),
            ));
        };
        let ask = match ask {
            Ok(ask) => ask,
            Err(reason) => {
                tracing::warn!(server = %self.link.server, %reason, "a question was declined");
                caller.sink.server_log(
                    &self.link.server,
                    "warning",
                    None,
                    &format!("its question was declined: {reason}"),
                );
                return Elicited::Decline(Some(reason));
            }
        };
        let question = ServerQuestion {
            server: self.link.server.clone(),
            tool_call_id,
            message,
            ask,
        };
        // Closed however the wait ends (answered, or dropped because the
        // server gave up): the call's timeout runs again.
        let _open = Asking::open(&self.link, token);
        caller.sink.ask(question, caller.cancel.clone()).await
    }
}

/// A question (or a sampling request) open for a call (see [`Link::asking`]).
pub(super) struct Asking<'a> {
    link: &'a Link,
    token: String,
}

impl<'a> Asking<'a> {
    pub(super) fn open(link: &'a Link, token: String) -> Self {
        link.asking(&token, true);
        Self { link, token }
    }
}

impl Drop for Asking<'_> {
    fn drop(&mut self) {
        self.link.asking(&self.token, false);
    }
}

/// The answer as the server gets it.
fn result_of(answer: Elicited) -> ElicitResult {
    let with_reason = |result: ElicitResult, reason: Option<String>| match reason {
        Some(reason) => {
            let mut meta = rmcp::model::MetaObject::default();
            meta.insert(REASON_KEY.to_owned(), Value::String(reason));
            result.with_meta(meta)
        }
        None => result,
    };
    match answer {
        Elicited::Accept(Some(content)) => {
            ElicitResult::new(ElicitationAction::Accept).with_content(Value::Object(content))
        }
        Elicited::Accept(None) => ElicitResult::new(ElicitationAction::Accept),
        Elicited::Decline(reason) => {
            with_reason(ElicitResult::new(ElicitationAction::Decline), reason)
        }
        Elicited::Cancel(reason) => {
            with_reason(ElicitResult::new(ElicitationAction::Cancel), reason)
        }
    }
}

/// A form question from its schema: read, or the reason it is declined.
fn form_of(schema: Value) -> Result<Asked, String> {
    Form::parse(&schema)
        .map(|form| Asked::Form { schema, form })
        .map_err(|e| format!("the form cannot be asked: {e}"))
}

impl ClientHandler for LrgClient {
    fn get_info(&self) -> ClientConfig {
        let mut capabilities = ClientCapabilities::default();
        let mut roots = RootsCapabilities::default();
        roots.list_changed = Some(true);
        capabilities.roots = Some(roots);
        let mut elicitation = ElicitationCapability::new();
        let mut form = FormElicitationCapability::new();
        // Every answer is checked against the schema before it is sent.
        form.schema_validation = Some(true);
        elicitation.form = Some(form);
        elicitation.url = Some(UrlElicitationCapability::new());
        capabilities.elicitation = Some(elicitation);
        // `tools` and `toolChoice` are honoured; `includeContext` is read,
        // but the chat's history is shared only where the person allows.
        let mut sampling = SamplingCapability::default();
        sampling.tools = Some(serde_json::Map::new());
        capabilities.sampling = Some(sampling);
        ClientConfig::new(
            capabilities,
            Implementation::new("lrg", env!("CARGO_PKG_VERSION")),
        )
    }

    async fn list_roots(
        &self,
        _context: RequestContext<RoleClient>,
    ) -> Result<ListRootsResult, ErrorData> {
        let roots = self
            .link
            .roots
            .get()
            .iter()
            .map(|r| {
                let mut root = rmcp::model::Root::new(r.uri.clone());
                root.name = r.name.clone();
                root
            })
            .collect();
        Ok(ListRootsResult::new(roots))
    }

    async fn create_message(
        &self,
        params: CreateMessageRequestParams,
        context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        // The server may give up first (`notifications/cancelled`): the
        // session's wait (and its model turn) is dropped.
        tokio::select! {
            answer = super::sampling::answer(&self.link, params) => answer,
            () = context.ct.cancelled() => Err(ErrorData::new(
                rmcp::model::ErrorCode(-1),
                "the tool server withdrew its sampling request",
                None,
            )),
        }
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let (message, ask) = match request {
            ElicitRequestParams::FormElicitationParams {
                message,
                requested_schema,
                ..
            } => {
                let schema = serde_json::to_value(&requested_schema).unwrap_or(Value::Null);
                (message, form_of(schema))
            }
            ElicitRequestParams::UrlElicitationParams { message, url, .. } => {
                (message, Ok(Asked::Url { url }))
            }
            _ => (
                String::new(),
                Err("lrg does not know this kind of question".to_owned()),
            ),
        };
        // The server may give up first (`notifications/cancelled`).
        let answer = tokio::select! {
            answer = self.elicit(message, ask) => answer,
            () = context.ct.cancelled() => Elicited::Cancel(Some("the tool server withdrew the question".to_owned())),
        };
        Ok(result_of(answer))
    }

    /// An `elicitation/create` that rmcp did not read arrives here: asked
    /// when its form fits the subset, else declined with the reason (a
    /// nested object, an unknown type).
    async fn on_custom_request(
        &self,
        request: CustomRequest,
        _context: RequestContext<RoleClient>,
    ) -> Result<CustomResult, ErrorData> {
        if request.method != "elicitation/create" {
            return Err(ErrorData::new(
                rmcp::model::ErrorCode::METHOD_NOT_FOUND,
                request.method,
                None,
            ));
        }
        let params = request.params.unwrap_or(Value::Null);
        let message = params
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        // A form rmcp did not read is still asked when it fits the subset
        // (an in-process server hands over its request as it wrote it).
        let ask = match (params.get("requestedSchema"), params.get("url")) {
            (Some(schema), _) => form_of(schema.clone()),
            (None, Some(Value::String(url))) => Ok(Asked::Url { url: url.clone() }),
            _ => Err("the question has neither a form nor a URL".to_owned()),
        };
        let answer = self.elicit(message, ask).await;
        let result = serde_json::to_value(result_of(answer)).unwrap_or_else(|_| json!({}));
        Ok(CustomResult::new(result))
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let token = super::link::token_text(&params.progress_token.0);
        self.link.progress(
            &token,
            Progress {
                progress: params.progress,
                total: params.total,
                message: params.message,
            },
        );
    }

    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let message = match &params.data {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        let server = &self.link.server;
        let logger = params.logger.as_deref().unwrap_or("");
        let level = match params.level {
            LoggingLevel::Debug => {
                tracing::debug!(server, logger, "{message}");
                return;
            }
            LoggingLevel::Info | LoggingLevel::Notice => {
                tracing::info!(server, logger, "{message}");
                return;
            }
            LoggingLevel::Warning => {
                tracing::warn!(server, logger, "{message}");
                "warning"
            }
            LoggingLevel::Error => {
                tracing::error!(server, logger, "{message}");
                "error"
            }
            LoggingLevel::Critical => {
                tracing::error!(server, logger, "{message}");
                "critical"
            }
            LoggingLevel::Alert => {
                tracing::error!(server, logger, "{message}");
                "alert"
            }
            LoggingLevel::Emergency => {
                tracing::error!(server, logger, "{message}");
                "emergency"
            }
        };
        self.link
            .server_log(level, params.logger.as_deref(), &message);
    }

    fn on_tool_list_changed(
        &self,
        _context: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + Send + '_ {
        self.link.tools_changed.store(true, Ordering::SeqCst);
        std::future::ready(())
    }

    fn on_resource_list_changed(
        &self,
        _context: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + Send + '_ {
        self.link.resources_changed.store(true, Ordering::SeqCst);
        std::future::ready(())
    }

    fn on_prompt_list_changed(
        &self,
        _context: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + Send + '_ {
        self.link.prompts_changed.store(true, Ordering::SeqCst);
        std::future::ready(())
    }

    fn on_resource_updated(
        &self,
        params: rmcp::model::ResourceUpdatedNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + Send + '_ {
        self.resource_updates.send(params.uri);
        std::future::ready(())
    }
}
