//! OpenTelemetry: the session's spans by the GenAI semantic conventions,
//! their metrics, and (feature `otel`) the layer an app adds to its own
//! subscriber.
//!
//! The library never installs a subscriber, a tracer or a meter provider.
//! It always emits `tracing` spans, whoever listens:
//!
//! - `invoke_agent` per user message ([`ATTR_CONVERSATION_ID`] when the chat
//!   is kept in a store);
//! - `chat {model}` per model turn, a client span with the request settings,
//!   the usage and the finish reasons once known, `error.type` on failure
//!   and each retry as a span event;
//! - `execute_tool {tool}` per call, whose parent is the turn that asked for
//!   it (the turn's span has ended by then: the link is set on the
//!   OpenTelemetry side, feature `otel`);
//! - MCP client spans with `mcp.method.name`: `tools/call {tool}` under the
//!   call's span (its `traceparent` in the request's `_meta`), and
//!   `initialize` for a connection (initialization and the first listing).
//!
//! No message content, tool arguments, results, keys or headers are put on
//! a span: the conventions make content opt-in, and lrg does not opt in.
//! Field values are computed only when a subscriber takes the span, so a
//! process without one pays a disabled-callsite check per span.
//!
//! With feature `otel`: `layer` hands an app a tracing-opentelemetry layer
//! that takes lrg's spans only; the metrics `gen_ai.client.token.usage`,
//! `gen_ai.client.operation.duration` and `lrg.tool.duration` go to the
//! global meter provider (set it before the first chat); and the W3C
//! `traceparent` of the current span goes on every model request, every
//! MCP request's `_meta` and every streamable-HTTP MCP request's headers.

#[cfg(feature = "otel")]
pub(crate) mod mcp_http;
mod metrics;

use lrg_providers::{GenerationSettings, ModelInfo, StopReason, ToolCall, Usage};
use tracing::Span;
use tracing::field::Empty;

pub(crate) use metrics::{record_tool_duration, record_turn};

/// The target of lrg's own span events (retries): `layer` (feature `otel`)
/// takes these as well as lrg's spans.
pub const EVENT_TARGET: &str = "lrg_chat::otel";

/// `gen_ai.operation.name`: `invoke_agent`, `chat` or `execute_tool`.
pub const ATTR_OPERATION_NAME: &str = "gen_ai.operation.name";
/// `gen_ai.provider.name`: `openai`, `anthropic`, `gcp.gemini`, or lrg's provider id.
pub const ATTR_PROVIDER_NAME: &str = "gen_ai.provider.name";
/// `gen_ai.request.model`.
pub const ATTR_REQUEST_MODEL: &str = "gen_ai.request.model";
/// `gen_ai.response.model`.
pub const ATTR_RESPONSE_MODEL: &str = "gen_ai.response.model";
/// `gen_ai.response.id`.
pub const ATTR_RESPONSE_ID: &str = "gen_ai.response.id";
/// `gen_ai.response.finish_reasons` (a string array).
pub const ATTR_FINISH_REASONS: &str = "gen_ai.response.finish_reasons";
/// `gen_ai.request.temperature`.
pub const ATTR_TEMPERATURE: &str = "gen_ai.request.temperature";
/// `gen_ai.request.max_tokens`.
pub const ATTR_MAX_TOKENS: &str = "gen_ai.request.max_tokens";
/// `gen_ai.request.top_p`.
pub const ATTR_TOP_P: &str = "gen_ai.request.top_p";
/// `gen_ai.request.seed`.
pub const ATTR_SEED: &str = "gen_ai.request.seed";
/// `gen_ai.usage.input_tokens` (cached ones included).
pub const ATTR_INPUT_TOKENS: &str = "gen_ai.usage.input_tokens";
/// `gen_ai.usage.output_tokens` (reasoning included).
pub const ATTR_OUTPUT_TOKENS: &str = "gen_ai.usage.output_tokens";
/// `gen_ai.usage.cache_read.input_tokens`.
pub const ATTR_CACHE_READ_TOKENS: &str = "gen_ai.usage.cache_read.input_tokens";
/// `gen_ai.usage.cache_creation.input_tokens`.
pub const ATTR_CACHE_CREATION_TOKENS: &str = "gen_ai.usage.cache_creation.input_tokens";
/// `gen_ai.usage.reasoning.output_tokens`.
pub const ATTR_REASONING_TOKENS: &str = "gen_ai.usage.reasoning.output_tokens";
/// `gen_ai.conversation.id`: the session id.
pub const ATTR_CONVERSATION_ID: &str = "gen_ai.conversation.id";
/// `gen_ai.agent.name`.
pub const ATTR_AGENT_NAME: &str = "gen_ai.agent.name";
/// `gen_ai.tool.name`.
pub const ATTR_TOOL_NAME: &str = "gen_ai.tool.name";
/// `gen_ai.tool.call.id`.
pub const ATTR_TOOL_CALL_ID: &str = "gen_ai.tool.call.id";
/// `gen_ai.tool.type`: `function` (MCP tools and Rust functions alike).
pub const ATTR_TOOL_TYPE: &str = "gen_ai.tool.type";
/// `gen_ai.token.type` on the token-usage metric: `input` or `output`.
pub const ATTR_TOKEN_TYPE: &str = "gen_ai.token.type";
/// `server.address`: where a cloud model's requests go.
pub const ATTR_SERVER_ADDRESS: &str = "server.address";
/// `server.port`.
pub const ATTR_SERVER_PORT: &str = "server.port";
/// `error.type`: a stable snake_case kind, never a message.
pub const ATTR_ERROR_TYPE: &str = "error.type";
/// `mcp.method.name`: `tools/call`, `initialize`.
pub const ATTR_MCP_METHOD: &str = "mcp.method.name";
/// `mcp.session.id`.
pub const ATTR_MCP_SESSION_ID: &str = "mcp.session.id";
/// `network.transport`: `pipe` (stdio) or `tcp` (streamable HTTP).
pub const ATTR_NETWORK_TRANSPORT: &str = "network.transport";

/// The span of one user message.
pub(crate) fn invoke_agent_span(conversation_id: Option<&str>) -> Span {
    let span = tracing::info_span!(
        "invoke_agent",
        otel.kind = "internal",
        gen_ai.operation.name = "invoke_agent",
        gen_ai.conversation.id = Empty,
        gen_ai.agent.name = Empty,
        error.type = Empty,
    );
    if let Some(id) = conversation_id {
        span.record(ATTR_CONVERSATION_ID, id);
    }
    span
}

/// lrg's provider ids where the conventions name the provider otherwise.
fn provider_name(provider: &str) -> &str {
    match provider {
        "gemini" => "gcp.gemini",
        "vertex" => "gcp.vertex_ai",
        "xai" => "x_ai",
        "mistral" => "mistral_ai",
        "bedrock" => "aws.bedrock",
        "azure" => "azure.ai.openai",
        other => other,
    }
}

/// The span of one model turn.
pub(crate) fn chat_span(
    info: &ModelInfo,
    settings: &GenerationSettings,
    conversation_id: Option<&str>,
) -> Span {
    let span = tracing::info_span!(
        "chat",
        otel.name = %format_args!("chat {}", info.model),
        otel.kind = "client",
        gen_ai.operation.name = "chat",
        gen_ai.provider.name = provider_name(&info.provider),
        gen_ai.request.model = info.model.as_str(),
        gen_ai.response.model = Empty,
        gen_ai.response.id = Empty,
        gen_ai.request.temperature = Empty,
        gen_ai.request.max_tokens = Empty,
        gen_ai.request.top_p = Empty,
        gen_ai.request.seed = Empty,
        gen_ai.usage.input_tokens = Empty,
        gen_ai.usage.output_tokens = Empty,
        gen_ai.usage.cache_read.input_tokens = Empty,
        gen_ai.usage.cache_creation.input_tokens = Empty,
        gen_ai.usage.reasoning.output_tokens = Empty,
        gen_ai.conversation.id = Empty,
        server.address = Empty,
        error.type = Empty,
    );
    if span.is_disabled() {
        return span;
    }
    if let Some(id) = conversation_id {
        span.record(ATTR_CONVERSATION_ID, id);
    }
    if let Some(t) = settings.temperature {
        span.record(ATTR_TEMPERATURE, f64::from(t));
    }
    if let Some(n) = settings.max_tokens {
        span.record(ATTR_MAX_TOKENS, i64::from(n));
    }
    if let Some(p) = settings.top_p {
        span.record(ATTR_TOP_P, f64::from(p));
    }
    if let Some(s) = settings.seed {
        span.record(ATTR_SEED, i64::from(s));
    }
    if let Some(host) = &info.sends_to {
        span.record(ATTR_SERVER_ADDRESS, host.as_str());
    }
    span
}

/// The conventions' name of a stop reason.
fn finish_reason(stop: &StopReason) -> &str {
    match stop {
        StopReason::EndTurn => "stop",
        StopReason::ToolCalls => "tool_calls",
        StopReason::MaxTokens => "length",
        StopReason::Cancelled => "cancelled",
        StopReason::Other(other) => other,
    }
}

/// What a finished turn told: its usage and why it ended.
pub(crate) fn record_answer(span: &Span, usage: Option<&Usage>, stop: Option<&StopReason>) {
    if span.is_disabled() {
        return;
    }
    if let Some(u) = usage {
        span.record(ATTR_INPUT_TOKENS, i64::from(u.prompt_tokens));
        span.record(ATTR_OUTPUT_TOKENS, i64::from(u.completion_tokens));
        if let Some(n) = u.cached_prompt_tokens {
            span.record(ATTR_CACHE_READ_TOKENS, i64::from(n));
        }
        if let Some(n) = u.cache_write_tokens {
            span.record(ATTR_CACHE_CREATION_TOKENS, i64::from(n));
        }
        if let Some(n) = u.reasoning_tokens {
            span.record(ATTR_REASONING_TOKENS, i64::from(n));
        }
    }
    #[cfg(feature = "otel")]
    if let Some(stop) = stop {
        use tracing_opentelemetry::OpenTelemetrySpanExt as _;
        let reasons = opentelemetry::Array::from(vec![opentelemetry::StringValue::from(
            finish_reason(stop).to_string(),
        )]);
        span.set_attribute(ATTR_FINISH_REASONS, opentelemetry::Value::Array(reasons));
    }
    #[cfg(not(feature = "otel"))]
    let _ = stop.map(finish_reason);
}

/// `error.type` on `span`, and an error status where OpenTelemetry listens.
pub(crate) fn record_error(span: &Span, kind: &str) {
    if span.is_disabled() {
        return;
    }
    span.record(ATTR_ERROR_TYPE, kind);
    #[cfg(feature = "otel")]
    {
        use tracing_opentelemetry::OpenTelemetrySpanExt as _;
        span.set_status(opentelemetry::trace::Status::error(kind.to_string()));
    }
}

/// `error.type` of a call that did not run: the skip reason's wire name.
pub(crate) fn skip_kind(reason: crate::events::SkipReason) -> &'static str {
    use crate::events::SkipReason;
    match reason {
        SkipReason::RepeatedCall => "repeated_call",
        SkipReason::NotAllowed => "not_allowed",
        SkipReason::Stopped => "stopped",
        SkipReason::Blocked => "blocked",
        SkipReason::UnknownTool => "unknown_tool",
        SkipReason::HookDenied => "hook_denied",
        SkipReason::ApprovalTimedOut => "approval_timed_out",
    }
}

/// A retry of the model turn, as an event of its span.
pub(crate) fn retry_event(span: &Span, attempt: u32, kind: &str) {
    if span.is_disabled() {
        return;
    }
    span.in_scope(|| {
        tracing::event!(
            target: EVENT_TARGET,
            tracing::Level::INFO,
            "retry.attempt" = attempt,
            "error.type" = kind,
            "gen_ai.retry"
        );
    });
}

/// Where a model turn sits in the trace, for the tool calls it asked for:
/// the turn's span ends with the answer, its calls run after.
#[derive(Clone, Default)]
pub(crate) struct TurnContext {
    #[cfg(feature = "otel")]
    cx: Option<opentelemetry::Context>,
}

impl TurnContext {
    /// The context of the turn running in `span`.
    pub(crate) fn of(span: &Span) -> Self {
        #[cfg(feature = "otel")]
        {
            use tracing_opentelemetry::OpenTelemetrySpanExt as _;
            if span.is_disabled() {
                return Self::default();
            }
            Self {
                cx: Some(span.context()),
            }
        }
        #[cfg(not(feature = "otel"))]
        {
            let _ = span;
            Self {}
        }
    }
}

/// The span of one tool call, a child of the turn that asked for it.
pub(crate) fn execute_tool_span(call: &ToolCall, turn: &TurnContext) -> Span {
    let span = tracing::info_span!(
        "execute_tool",
        otel.name = %format_args!("execute_tool {}", call.name),
        otel.kind = "internal",
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = call.name.as_str(),
        gen_ai.tool.call.id = call.id.as_str(),
        gen_ai.tool.type = "function",
        error.type = Empty,
    );
    #[cfg(feature = "otel")]
    if let Some(cx) = &turn.cx {
        use tracing_opentelemetry::OpenTelemetrySpanExt as _;
        // Fails only without the layer or for a disabled span: nothing to link then.
        let _ = span.set_parent(cx.clone());
    }
    #[cfg(not(feature = "otel"))]
    let _ = turn;
    span
}

/// How an MCP server is reached, for `network.transport`.
#[derive(Debug, Clone, Copy)]
pub(crate) enum McpTransport {
    /// A child process's stdio.
    Pipe,
    /// Streamable HTTP.
    Tcp,
    /// In this process: no network.
    InProcess,
}

/// The client span of one MCP request: `{method} {tool}`, or `{method}`.
pub(crate) fn mcp_span(method: &'static str, tool: Option<&str>, transport: McpTransport) -> Span {
    let span = tracing::info_span!(
        "mcp",
        otel.name = %format_args!("{method}{}{}", if tool.is_some() { " " } else { "" }, tool.unwrap_or("")),
        otel.kind = "client",
        mcp.method.name = method,
        gen_ai.tool.name = Empty,
        gen_ai.operation.name = Empty,
        mcp.session.id = Empty,
        network.transport = Empty,
        error.type = Empty,
    );
    if span.is_disabled() {
        return span;
    }
    if let Some(tool) = tool {
        span.record(ATTR_TOOL_NAME, tool);
        span.record(ATTR_OPERATION_NAME, "execute_tool");
    }
    match transport {
        McpTransport::Pipe => span.record(ATTR_NETWORK_TRANSPORT, "pipe"),
        McpTransport::Tcp => span.record(ATTR_NETWORK_TRANSPORT, "tcp"),
        McpTransport::InProcess => &span,
    };
    span
}

/// The `traceparent` of `span`, for an MCP request's `_meta`.
pub(crate) fn traceparent_of(span: &Span) -> Option<String> {
    if span.is_disabled() {
        return None;
    }
    span.in_scope(lrg_providers::traceparent::current)
}

/// With feature `otel`: the layer that exports lrg's spans through `tracer`
/// (any OpenTelemetry tracer: OTLP, stdout, an in-memory one in tests), for
/// the app's own subscriber. It takes lrg's spans and span events only (what
/// other crates log stays with the app's other layers), records neither
/// source locations nor thread ids, and does not make each entered span
/// the current OpenTelemetry context (parents come from tracing's span
/// stack; a context attached outside any span, as [`remote_parent`]'s, is
/// the parent of a span made there).
///
/// ```ignore
/// use tracing_subscriber::prelude::*;
/// let tracer = provider.tracer("lrg");
/// tracing_subscriber::registry()
///     .with(lrg_chat::otel::layer(tracer))
///     .init();
/// ```
#[cfg(feature = "otel")]
pub fn layer<S, T>(tracer: T) -> impl tracing_subscriber::Layer<S>
where
    S: tracing::Subscriber + for<'span> tracing_subscriber::registry::LookupSpan<'span>,
    T: opentelemetry::trace::Tracer + 'static,
    T::Span: Send + Sync,
{
    use tracing_subscriber::Layer as _;
    tracing_opentelemetry::layer()
        .with_tracer(tracer)
        .with_location(false)
        .with_threads(false)
        .with_tracked_inactivity(false)
        // Parents are found through tracing's own span stack; without
        // activation, entering and leaving a span (every poll of an
        // instrumented future) costs the layer nothing.
        .with_context_activation(false)
        .with_filter(LrgOnly)
}

/// The layer's filter: lrg's spans and span events. Decided per callsite,
/// once: every other crate's `trace!` and `debug!` (hyper's and h2's, per
/// frame) stays as cheap as with no subscriber at all.
#[cfg(feature = "otel")]
struct LrgOnly;

#[cfg(feature = "otel")]
impl LrgOnly {
    fn takes(meta: &tracing::Metadata<'_>) -> bool {
        if meta.is_span() {
            meta.target().starts_with("lrg_chat") && *meta.level() <= tracing::Level::INFO
        } else {
            meta.target() == EVENT_TARGET
        }
    }
}

#[cfg(feature = "otel")]
impl<S> tracing_subscriber::layer::Filter<S> for LrgOnly {
    fn enabled(
        &self,
        meta: &tracing::Metadata<'_>,
        _: &tracing_subscriber::layer::Context<'_, S>,
    ) -> bool {
        Self::takes(meta)
    }

    fn callsite_enabled(
        &self,
        meta: &'static tracing::Metadata<'static>,
    ) -> tracing::subscriber::Interest {
        if Self::takes(meta) {
            tracing::subscriber::Interest::always()
        } else {
            tracing::subscriber::Interest::never()
        }
    }

    fn max_level_hint(&self) -> Option<tracing_subscriber::filter::LevelFilter> {
        Some(tracing_subscriber::filter::LevelFilter::INFO)
    }
}

/// The parent a request's `traceparent` header names, for the message span
/// the request starts (`None` when there is none or it is malformed). Use
/// it with [`opentelemetry::Context::attach`] around the call that starts
/// the message.
#[cfg(feature = "otel")]
pub fn remote_parent(traceparent: Option<&str>) -> Option<opentelemetry::Context> {
    use opentelemetry::trace::TraceContextExt as _;
    let sc = lrg_providers::traceparent::parse(traceparent?)?;
    Some(opentelemetry::Context::new().with_remote_span_context(sc))
}

/// Run `start` (what starts a message) with the parent a request's
/// `traceparent` header names, so the message's span joins the caller's
/// trace. Without feature `otel`, or without a valid header, just `start`.
pub(crate) fn under_remote_parent<T>(traceparent: Option<&str>, start: impl FnOnce() -> T) -> T {
    #[cfg(feature = "otel")]
    if let Some(cx) = remote_parent(traceparent) {
        let _attached = cx.attach();
        return start();
    }
    #[cfg(not(feature = "otel"))]
    let _ = traceparent;
    start()
}
