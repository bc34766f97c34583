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
//! which its numbered `tool_done` supersedes; and [`Event::ModelLoading`],
//! a local model's load before a turn.
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

mod agent;
mod kinds;
mod log;
mod payload;

pub use agent::{AgentCommand, PlanEntry, PlanPriority, PlanStatus};
pub use kinds::{DeltaKind, ErrorKind, SkipReason};
pub use log::{
    DEFAULT_MAX_KEPT_EVENT_BYTES, DEFAULT_MAX_KEPT_EVENTS, EventLog, LAG_LIMIT, Subscription,
};
pub use payload::{ImageDescriptor, SubAgentAsk};

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
    /// A local model is being loaded before this chat's turn can start (the
    /// engine pool had unloaded it after keep-alive, or another model took
    /// its place). Live only: never numbered; the last one of a load has
    /// `progress` 1.
    ModelLoading {
        /// The model, `provider:model`.
        model: String,
        /// Fraction done, 0 to 1.
        progress: f32,
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
    /// A tool server asks the model (MCP `sampling/createMessage`) during
    /// a call of this chat. What it asks is here (messages clipped for
    /// showing); when the permissions ask, an `approval_needed` whose
    /// `call_id` is the `sampling_id` follows, answered like a tool's. One
    /// `sampling_done` always ends it.
    SamplingRequest {
        /// The request's id in this chat (`sampling-1`, ...), also the
        /// `call_id` of its approval question.
        sampling_id: String,
        /// The tool server that asks.
        server: String,
        /// The call it came during, when one call of this chat ran on the server.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tool_call_id: Option<String>,
        /// The model that would answer, `provider:model`.
        model: String,
        /// The server's messages, each clipped to 2,000 characters.
        messages: Vec<crate::session::sampling::SampledMessage>,
        /// The server's system prompt, clipped likewise.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        system_prompt: Option<String>,
        /// The most tokens the answer may take.
        max_tokens: u32,
        /// Its sampling temperature, when it set one (to 3 decimals).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        temperature: Option<f64>,
        /// The server's tools the model may call in its answer (by name).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tools: Vec<String>,
        /// `includeContext` as asked (`none`, `thisServer`, `allServers`).
        include_context: String,
        /// Whether the chat's recent text was given to it (only when the
        /// server asked and [`crate::SessionConfig::sampling_shares_history`]
        /// allows).
        #[serde(default, skip_serializing_if = "is_false")]
        shares_history: bool,
    },
    /// A sampling request ended: answered (with the model's usage and
    /// cost, counted in the chat's totals), denied, declined or failed.
    SamplingDone {
        /// The request (its `sampling_request`).
        sampling_id: String,
        /// How it ended.
        outcome: crate::session::sampling::SamplingOutcome,
        /// The answer's text, when answered.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        text: Option<String>,
        /// The server's tools the answer calls, by name.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<String>,
        /// What the answer used, when the model reported it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        usage: Option<lrg_providers::Usage>,
        /// What it cost.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cost: Option<lrg_providers::pricing::Cost>,
        /// Why there is no answer (also what the server is told).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// The chat's agent (an external ACP agent as its model) lists the
    /// slash commands it takes, replacing any list before; sending `/name
    /// args` as a message passes one to it.
    AgentCommands {
        /// The commands, in the agent's order.
        commands: Vec<AgentCommand>,
    },
    /// The chat's agent tells its plan, whole: each one replaces the last.
    Plan {
        /// The steps, in order.
        entries: Vec<PlanEntry>,
    },
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
