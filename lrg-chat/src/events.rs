//! What a viewer is told: the event schema and the numbered, replayable log.
//!
//! # The schema
//!
//! Every [`Event`] serializes as one JSON object with a `type` field
//! (`snake_case`), wrapped in a [`LogEntry`] that adds `seq` when the event is
//! numbered. This is the one event format of lrg: the CLI prints it as JSON
//! lines (`--json`), the web page reads it as server-sent events, and a Rust
//! subscriber gets it typed. Fields are only ever added, never renamed.
//!
//! ```json
//! {"seq":1,"type":"user_message","text":"list my files"}
//! {"type":"delta","kind":"text","text":"Let"}
//! {"seq":2,"type":"assistant_turn","text":"Let me look."}
//! {"seq":3,"type":"tool_call","call_id":"c1","tool":"list","class":"read","arguments":{}}
//! ```
//!
//! # Rebuilding a view
//!
//! Everything that changes what a viewer shows is numbered (`seq`, from 1) and
//! kept, so a viewer that reconnects with `after=<last seq it saw>` rebuilds
//! the conversation exactly. The only
//! exceptions are [`Event::Delta`]s and [`Event::ToolCallDelta`]s: the model's
//! text and tool calls as they are decoded, live only, never numbered, and
//! always followed by one numbered [`Event::AssistantTurn`] holding the whole
//! turn, then a numbered [`Event::ToolCall`] per call (or by
//! [`Event::Stopped`], an [`Event::Error`], or a retrying [`Event::Warning`],
//! after which what was streamed is dropped).
//! [`Event::ToolProgress`] is live only too: a running call's progress,
//! which its numbered `tool_done` supersedes.
//!
//! In a session kept in a store, a numbered event that reports a change to
//! the conversation (`user_message`, `assistant_turn`, `tool_done`,
//! `tool_skipped`, `rewound`) is published only once that change is durable,
//! so what a viewer saw, a resume has (see `session/persist.rs`).
//!
//! A subscriber that falls more than [`LAG_LIMIT`] events behind the live
//! stream is sent [`Event::Resync`] and dropped; it reconnects with `after=`
//! and catches up from the log.
//!
//! # What is kept
//!
//! The log keeps the newest numbered events only: at most
//! [`DEFAULT_MAX_KEPT_EVENTS`] (4,096) of them and at most
//! [`DEFAULT_MAX_KEPT_EVENT_BYTES`] (32 MiB) of their payload (an estimate of
//! their text and arguments; see [`EventLog::retained_bytes`]), whichever is
//! reached first, and always the newest one. Both are settings
//! ([`crate::SessionConfig::max_kept_events`],
//! [`crate::SessionConfig::max_kept_event_bytes`]). Without a bound, a chat's
//! log would hold a second copy of every answer and tool result for its
//! whole life. Older events are forgotten, never renumbered:
//! [`EventLog::first_kept_seq`] says where the kept ones begin.
//!
//! A subscriber that asks for events older than that (`after=` below
//! `first_kept_seq - 1`) cannot rebuild the view from the log: it is sent
//! [`Event::Resync`] at once and its stream ends. It rebuilds from the
//! conversation itself instead (over HTTP, `GET …/transcript`, whose
//! `last_seq` says where to follow the events from), as the page does.

mod log;

pub use log::{
    DEFAULT_MAX_KEPT_EVENT_BYTES, DEFAULT_MAX_KEPT_EVENTS, EventLog, LAG_LIMIT, Subscription,
};

use lrg_providers::ProviderError;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::permissions::{Answer, ApprovalReason, PermissionSettings};
use crate::tools::ToolClass;

/// The version of the event schema. Front ends that write events out (the
/// CLI's `--json` header line, say) state it, so a reader can tell which
/// fields to expect; it changes only if a field is ever renamed or removed
/// (fields are only added).
pub const EVENTS_SCHEMA_VERSION: u32 = 1;

/// One thing that happened in a chat. See the [module docs](self) for the
/// wire format and the replay rules.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Event {
    /// The person sent a message.
    UserMessage {
        /// Its text.
        text: String,
        /// How many images came with it.
        #[serde(default, skip_serializing_if = "is_zero")]
        images: usize,
    },
    /// More of the model's answer, as decoded. Live only: never numbered,
    /// never replayed.
    Delta {
        /// Reasoning or answer text.
        kind: DeltaKind,
        /// The new text, to append to what came before in this turn.
        text: String,
    },
    /// More of a tool call while the model is still writing it. Live only:
    /// never numbered, never replayed; the numbered `tool_call` with the same
    /// `call_id` follows and replaces it. A call whose turn ends without its
    /// `tool_call` (cut short, stopped, failed) is dropped.
    ToolCallDelta {
        /// The call's number within its model turn, from 0: the key that
        /// joins its fragments.
        index: u32,
        /// The call's id, on the call's first delta only.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        call_id: Option<String>,
        /// The tool's name, on the call's first delta only.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tool: Option<String>,
        /// More of the arguments' JSON text, to append to what came before.
        arguments_fragment: String,
    },
    /// One finished model turn; replaces the deltas streamed for it.
    AssistantTurn {
        /// The model's visible reasoning, if it showed any.
        #[serde(default, skip_serializing_if = "String::is_empty")]
        reasoning: String,
        /// The answer text (may be empty when the turn only calls tools).
        text: String,
        /// The validated answer of a typed message (its final turn only),
        /// as parsed from `text`: absent for prose, and for a typed answer
        /// that never matched its schema (an `error` of kind
        /// `invalid_answer` follows). Not kept in the history: a resumed
        /// chat's replayed turns have none.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        json: Option<Value>,
        /// The person stopped this turn midway: `text` and `reasoning` are
        /// what had been shown, kept (in the history too, with the stop
        /// note). A `stopped` event follows.
        #[serde(default, skip_serializing_if = "is_false")]
        stopped: bool,
    },
    /// The model asked for a tool call. Followed, for the same `call_id`, by
    /// either `tool_skipped`, or `tool_running` then `tool_done`, possibly
    /// after `approval_needed` and `approval_answered`.
    ToolCall {
        /// Id pairing this call with its later events.
        call_id: String,
        /// Tool name.
        tool: String,
        /// The tool's human-readable title, when it has one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        title: Option<String>,
        /// What the tool may do to the world.
        class: ToolClass,
        /// The arguments, as the model wrote them.
        arguments: Value,
        /// How many items the call is aimed at, when that can be told.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        targets: Option<usize>,
        /// `client`: the app's front end runs it and answers with
        /// [`crate::ChatSession::submit_tool_result`] (over HTTP, `POST
        /// …/tool_results/{call_id}`); absent for a tool run here.
        #[serde(
            default,
            skip_serializing_if = "crate::tools::client::RunsOn::is_server"
        )]
        runs_on: crate::tools::client::RunsOn,
    },
    /// The call waits for the person's answer
    /// ([`crate::session::ChatSession::answer_approval`], or the session's
    /// [`crate::Approver`]). It carries everything a front end needs to ask
    /// (read it as a [`crate::ApprovalRequest`] with
    /// [`crate::ApprovalRequest::from_event`]): no earlier event has to be
    /// looked up.
    ApprovalNeeded {
        /// The call that waits.
        call_id: String,
        /// The tool it calls (empty only in events written before the
        /// field existed).
        #[serde(default)]
        tool: String,
        /// The tool's human-readable title, when it has one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        title: Option<String>,
        /// What the tool may do to the world.
        #[serde(default = "assumed_class")]
        class: ToolClass,
        /// The arguments it would run with: the model's, or a hook's
        /// rewrite of them (a warning then says so).
        #[serde(default)]
        arguments: Value,
        /// How many items the call is aimed at, when that can be told.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        targets: Option<usize>,
        /// Why it was not allowed outright.
        reason: ApprovalReason,
        /// What the person should know before answering, for a person
        /// (the tool name was repaired, a hook rewrote the arguments, the
        /// tool declares no annotations so it counts as destructive).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        warnings: Vec<String>,
        /// The answers allowed, in the order to offer them (`once`,
        /// `this_chat`, `always` when offered, `deny`).
        #[serde(default)]
        answers: Vec<crate::permissions::AnswerKind>,
        /// Whether "always allow" is a meaningful answer (it is not for a bulk
        /// question: the limit asks even for an allowed tool).
        offer_always: bool,
        /// Set when a sub-agent asks: which one, and the call it wants to
        /// make (its `tool_call` is in the sub-agent's own stream). The
        /// `call_id` is then the sub-agent's id, `::`, and its call's id;
        /// answer it on the parent like any other.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sub_agent: Option<SubAgentAsk>,
    },
    /// The person answered an approval question.
    ApprovalAnswered {
        /// The call that was waiting.
        call_id: String,
        /// The answer.
        answer: Answer,
    },
    /// The call is running.
    ToolRunning {
        /// The call.
        call_id: String,
    },
    /// The call finished (successfully or not).
    ToolDone {
        /// The call.
        call_id: String,
        /// Whether it succeeded.
        ok: bool,
        /// Its text output (or error message).
        text: String,
        /// The images it returned, described; the bytes are fetched
        /// separately (over HTTP: `GET …/images/{call_id}/{index}`).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        images: Vec<ImageDescriptor>,
        /// Its structured result (MCP `structuredContent`), when it gave
        /// one (one that does not match the tool's output schema comes with
        /// `ok: false` and a `text` saying what failed). Not kept in the
        /// history: a resumed chat's replayed results have none.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        structured: Option<Value>,
        /// The resources it links to or embeds, for a front end to show
        /// (the model reads them as text, with how to read a link). Not
        /// kept in the history either.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        resources: Vec<crate::tools::ResourceRef>,
    },
    /// The call never ran; the model is told why.
    ToolSkipped {
        /// The call.
        call_id: String,
        /// Why it did not run.
        reason: SkipReason,
        /// The person's note with a denial, passed to the model too.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        note: Option<String>,
    },
    /// Something the person should know that does not end the turn.
    Warning {
        /// What happened.
        message: String,
        /// The model turn is being retried: drop what was streamed of it.
        #[serde(default, skip_serializing_if = "is_false")]
        retrying: bool,
    },
    /// The turn ended with an error.
    Error {
        /// What went wrong, for a person.
        message: String,
        /// Machine-readable kind.
        kind: ErrorKind,
    },
    /// The person stopped the turn. Text streamed for the unfinished model
    /// turn is kept: an `assistant_turn` with `stopped: true` comes first
    /// (none when nothing had been shown); a tool call cut off while its
    /// arguments streamed is dropped.
    Stopped,
    /// The session started or finished working on a message.
    Busy {
        /// Whether it is working now.
        busy: bool,
        /// The work was not started by the person: the model reacts to a
        /// sub-agent's result on its own.
        #[serde(default, skip_serializing_if = "is_false")]
        autonomous: bool,
        /// When it finished (`busy: false`): what the message cost, tokens
        /// and dollars (see [`lrg_providers::pricing::Spend`]). Absent
        /// while no model turn of the chat has reported usage.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message_total: Option<lrg_providers::pricing::Spend>,
        /// When it finished: what the chat has cost so far.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        chat_total: Option<lrg_providers::pricing::Spend>,
    },
    /// Token usage of the last model turn.
    Usage {
        /// Its counts, as the provider reported them (normalised: see
        /// [`lrg_providers::Usage`]). On the wire they are fields of the
        /// event itself (`prompt_tokens`, `completion_tokens` and, when
        /// reported, `cached_prompt_tokens`, `cache_write_tokens`,
        /// `reasoning_tokens`).
        #[serde(flatten)]
        usage: lrg_providers::Usage,
        /// The window the session fits the conversation into.
        context_window: u32,
        /// What the turn cost (`{"usd": 0.0021, "priced": true}`); a cloud
        /// model without a known price says `{"usd": null, "priced": false}`.
        #[serde(default)]
        cost: lrg_providers::pricing::Cost,
        /// The message's total so far, this turn included.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message_total: Option<lrg_providers::pricing::Spend>,
        /// The chat's total so far, this turn included.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        chat_total: Option<lrg_providers::pricing::Spend>,
    },
    /// The permission settings changed.
    Permissions {
        /// The settings now in force.
        settings: PermissionSettings,
        /// Whether they were written to disk (false until a path is bound).
        saved: bool,
        /// Why saving failed, when it did.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        save_error: Option<String>,
    },
    /// The conversation was cut back for a retry: drop everything shown after
    /// the event numbered `to_seq` (the user message being answered again;
    /// for a retry with new text, the event before it, and a `user_message`
    /// with the new text follows).
    Rewound {
        /// The last event that stays.
        to_seq: u64,
    },
    /// The conversation was emptied.
    Cleared,
    /// The conversation was replaced by a summary, which seeds the new
    /// history as a user message.
    Compacted {
        /// The summary.
        summary: String,
    },
    /// Sent to a subscriber that fell too far behind, just before its stream
    /// ends: reconnect with `after=` the last `seq` seen. Also sent, at
    /// once, to one that asked for events the log no longer keeps (see
    /// [`EventLog::first_kept_seq`]): rebuild the view from the conversation
    /// (`GET …/transcript`) and follow from its `last_seq`.
    Resync,
    /// Where the conversation goes: sent before the first model turn and
    /// whenever the model's destination changes.
    SendsTo {
        /// The provider prefix (`openai`, `ollama`, ...).
        provider: String,
        /// The host it is sent to; `null` when it stays on this machine.
        host: Option<String>,
    },
    /// A sub-agent was spawned by the call `call_id` (`spawn_sub_agent`;
    /// every task of one call shares it). Its own events are in its own
    /// stream ([`crate::session::ChatSession::sub_agent`]); its final answer
    /// comes back as a `sub_agent_result` tool call.
    SubtaskStart {
        /// The parent's `spawn_sub_agent` call.
        call_id: String,
        /// The sub-agent's session id (`{parent}::sub::{n}`).
        sub_session_id: String,
        /// The task's short description.
        description: String,
    },
    /// A sub-agent's status changed: it started (`running`), or it ended
    /// (`done`, `failed`, `stopped`). An end is published once it is kept
    /// with the sub-agent's transcript, when the chat is stored. When each
    /// started and ended is in [`crate::sub_agents::SubAgentInfo`] (over
    /// HTTP, `GET …/sub_agents`).
    SubtaskStatus {
        /// The sub-agent's session id (`{parent}::sub::{n}`).
        sub_session_id: String,
        /// Where it is now.
        status: crate::sub_agents::SubAgentStatus,
    },
    /// The person carried the conversation over to another model: the
    /// history goes on on `to`, without `from`'s own (native) parts.
    /// Published once the move is durable.
    ModelSwitched {
        /// The model it was on, `provider:model`.
        from: String,
        /// The model it is on now, `provider:model`.
        to: String,
    },
    /// A resource the chat's tools subscribed to changed (a server's
    /// `notifications/resources/updated`; see
    /// [`crate::tools::ToolHost::subscribe_resource`]). Read it again to
    /// see how.
    ResourceUpdated {
        /// The server.
        server: String,
        /// The resource's URI.
        uri: String,
    },
    /// Tool search ([`crate::tools::search`]) found tools: offered from the
    /// next model turn on, for the rest of the message.
    ToolsFound {
        /// What the model searched for; `null` for the message itself,
        /// searched before its first turn.
        query: Option<String>,
        /// The tools found, best first.
        names: Vec<String>,
    },
    /// A hook decided something (see [`crate::hooks`]): allowed, denied,
    /// asked about or rewrote a call, blocked a message, added context or a
    /// note, or asked for one more turn. A hook that failed decides nothing
    /// and is a `warning` instead.
    HookDecision {
        /// The hook's name (never its command line).
        hook: String,
        /// The point it ran at.
        event: crate::hooks::HookEvent,
        /// What it decided.
        decision: crate::hooks::HookDecisionKind,
        /// Why, as the hook said it (for a denial, what the model reads).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
        /// The call it was about, for the tool events.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        call_id: Option<String>,
    },
    /// A tool server asks the person something (MCP elicitation): fill in
    /// a form, or go to a page of its own. Answer with
    /// [`crate::ChatSession::answer_question`] (over HTTP, `POST
    /// …/questions/{question_id}`); a `question_answered` follows, also
    /// when a stop, the chat's end or
    /// [`crate::SessionConfig::question_timeout`] cancels it. Everything
    /// needed to ask is here, so an open question is rebuilt from the log.
    Question {
        /// The question's number in this chat, from 1.
        question_id: u64,
        /// The tool server that asks.
        server: String,
        /// The call it came during, when one call of this chat ran on the
        /// server.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tool_call_id: Option<String>,
        /// What the server says it needs.
        message: String,
        /// `form` (answer with field values) or `url` (go there).
        mode: crate::session::QuestionMode,
        /// The form's schema (the spec's flat subset, already checked), in
        /// form mode.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        requested_schema: Option<Value>,
        /// The page to open, in URL mode. Never opened by lrg itself.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        url: Option<String>,
    },
    /// A question was answered, declined or cancelled.
    QuestionAnswered {
        /// The question.
        question_id: u64,
        /// `accept`, `decline` or `cancel`.
        action: crate::session::QuestionAction,
        /// The field values sent, when accepted with a form.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        content: Option<Value>,
        /// Why, when lrg answered by itself (a stop, a timeout, no one to
        /// ask).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// A running call's progress, as its server reports it. Live only:
    /// never numbered. Coalesced: at most one per call every 100 ms, plus
    /// each whole percent when the total is known, and always the last
    /// before the call's `tool_done`.
    ToolProgress {
        /// The call.
        call_id: String,
        /// How far it is (it only grows).
        progress: f64,
        /// Where it ends, when known.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        total: Option<f64>,
        /// What it is doing now.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message: Option<String>,
    },
    /// A tool server logged a warning or worse (MCP `notifications/message`)
    /// while a call of this chat ran on it. At most 10 a second per server;
    /// every line also goes to `tracing`.
    ServerLog {
        /// The server.
        server: String,
        /// `warning`, `error`, `critical`, `alert` or `emergency`.
        level: String,
        /// The server's logger name, when it gave one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        logger: Option<String>,
        /// The line (JSON data as its text).
        message: String,
    },
}

/// The sub-agent behind an [`Event::ApprovalNeeded`], and what it wants to
/// run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct SubAgentAsk {
    /// The sub-agent's session id.
    pub sub_session_id: String,
    /// The tool it wants to call.
    pub tool: String,
    /// What the tool may do to the world.
    pub class: ToolClass,
    /// The arguments, as the sub-agent's model wrote them.
    pub arguments: Value,
}

impl SubAgentAsk {
    /// Sub-agent `sub_session_id` asks to call `tool` (of `class`) with
    /// `arguments`.
    pub fn new(
        sub_session_id: impl Into<String>,
        tool: impl Into<String>,
        class: ToolClass,
        arguments: Value,
    ) -> Self {
        Self {
            sub_session_id: sub_session_id.into(),
            tool: tool.into(),
            class,
            arguments,
        }
    }
}

/// One image of a tool result, as `tool_done` describes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ImageDescriptor {
    /// Its position among the result's images, from 0.
    pub index: usize,
    /// MIME type, e.g. `image/png`.
    pub mime: String,
    /// Size of the encoded image in bytes.
    pub bytes: usize,
}

impl ImageDescriptor {
    /// The image at `index`, of type `mime`, `bytes` long.
    pub fn new(index: usize, mime: impl Into<String>, bytes: usize) -> Self {
        Self {
            index,
            mime: mime.into(),
            bytes,
        }
    }

    /// Describe the images among `parts`, in order.
    pub fn of_parts(parts: &[lrg_providers::Part]) -> Vec<Self> {
        parts
            .iter()
            .filter_map(|p| match p {
                lrg_providers::Part::Image(image) => Some(image),
                _ => None,
            })
            .enumerate()
            .map(|(index, image)| Self {
                index,
                mime: image.mime.clone(),
                bytes: image.data.len(),
            })
            .collect()
    }
}

/// Which stream a [`Event::Delta`] belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeltaKind {
    /// The model's reasoning.
    Reasoning,
    /// The answer.
    Text,
}

/// What kind of failure an [`Event::Error`] reports.
///
/// Serialized in `snake_case` (`"context_overflow"`, `"max_steps"`, ...).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ErrorKind {
    /// A transient provider error (429, 5xx, a cut stream) that outlived its
    /// retries.
    Transient,
    /// The provider refused the key.
    Auth,
    /// The provider refused the request as malformed.
    BadRequest,
    /// The conversation does not fit the model's context window.
    ContextOverflow,
    /// The model does not exist on its provider.
    ModelNotFound,
    /// The model cannot do what was asked.
    Unsupported,
    /// Missing or invalid configuration (no key, bad base URL).
    Config,
    /// The model's answer could not be understood.
    Protocol,
    /// Any other provider failure.
    Other,
    /// [`crate::SessionConfig::max_steps`] model turns passed without a final
    /// answer.
    MaxSteps,
    /// Compaction produced no summary; the conversation was kept.
    Compact,
    /// A tool or model plugged into the session panicked.
    Internal,
    /// The session is local only and the model would send the conversation
    /// to a cloud.
    LocalOnly,
    /// A typed message's answer never matched its schema, repairs included
    /// ([`crate::SessionConfig::typed_repairs`]).
    InvalidAnswer,
    /// The next model turn would pass a limit of
    /// [`crate::SessionConfig::budget`] (tokens or dollars).
    Budget,
}

impl ErrorKind {
    /// The kind of a provider error.
    pub fn of(error: &ProviderError) -> Self {
        match error {
            ProviderError::Transient { .. } => Self::Transient,
            ProviderError::Auth { .. } => Self::Auth,
            ProviderError::BadRequest { .. } => Self::BadRequest,
            ProviderError::ContextOverflow { .. } => Self::ContextOverflow,
            ProviderError::ModelNotFound { .. } => Self::ModelNotFound,
            ProviderError::Unsupported { .. } => Self::Unsupported,
            ProviderError::Config { .. } => Self::Config,
            ProviderError::Protocol { .. } => Self::Protocol,
            _ => Self::Other,
        }
    }
}

/// Why a tool call did not run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum SkipReason {
    /// The same tool with the same arguments was already called for this
    /// message.
    RepeatedCall,
    /// The person denied it.
    NotAllowed,
    /// The person stopped the turn before it ran.
    Stopped,
    /// The tool is blocked by a rule (the model was not offered it).
    Blocked,
    /// No tool of that name exists.
    UnknownTool,
    /// A `pre_tool_use` hook denied it (see [`crate::hooks`]).
    HookDenied,
    /// Its approval question got no answer within
    /// [`crate::SessionConfig::approval_timeout`]: a denial.
    ApprovalTimedOut,
}

impl SkipReason {
    /// A few words for a person ("not allowed", "no such tool").
    pub fn describe(self) -> &'static str {
        match self {
            Self::RepeatedCall => "the same call was already made",
            Self::NotAllowed => "not allowed",
            Self::Stopped => "stopped",
            Self::Blocked => "blocked by a rule",
            Self::UnknownTool => "no such tool",
            Self::HookDenied => "denied by a hook",
            Self::ApprovalTimedOut => "no answer in time",
        }
    }
}

/// The class of a call whose event does not say (written before
/// `approval_needed` carried it): the one that asks most.
fn assumed_class() -> ToolClass {
    ToolClass::Destructive
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// An event as it appears in the log and on the wire: numbered (`seq`) unless
/// it is live only.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LogEntry {
    /// Position in the log, from 1; absent for live-only events (deltas,
    /// resync).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq: Option<u64>,
    /// The event.
    #[serde(flatten)]
    pub event: Event,
}
