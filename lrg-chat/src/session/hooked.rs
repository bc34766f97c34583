//! Where the session's hooks ([`crate::hooks`]) run: before a person's
//! message reaches the model, around each call, and when the model has
//! answered. What a hook decides is published as `hook_decision`; a hook
//! that fails is a `warning` and decides nothing.

use lrg_providers::typed::OutputSchema;
use lrg_providers::{GenerationSettings, Message, Part, ToolCall};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::{Shared, TurnOutcome, run};
use crate::events::Event;
use crate::hooks::{
    MAX_STOP_CONTINUES, Note, PostToolUse, PreToolUse, PromptSubmit, StopCheck, ToolAnswer,
};
use crate::tools::ToolClass;

/// What a hook blocked a message with, in the history: the model never
/// answers a blocked message later.
const BLOCKED_NOTE: &str = "[A hook blocked this message, so it was not answered:";
/// How a hook's context is introduced to the model.
const CONTEXT_NOTE: &str = "[Context added by a hook]";
/// How a `stop` hook's reason is introduced to the model.
const GO_ON_NOTE: &str = "[A hook asks you to go on before you finish:";

/// One message, with its hooks: `user_prompt_submit` first (a person's
/// message only), then the loop, then `stop`, which may send the model back
/// to work up to [`MAX_STOP_CONTINUES`] times.
pub(super) async fn run_message(
    shared: &Shared,
    generation: &GenerationSettings,
    output: Option<&OutputSchema>,
    cancel: &CancellationToken,
    person: bool,
) -> TurnOutcome {
    if shared.hooks.is_empty() {
        return run::run_message(shared, generation, output, cancel).await;
    }
    if person && let Some(blocked) = before_message(shared).await {
        return blocked;
    }
    let mut continued = 0;
    loop {
        let outcome = run::run_message(shared, generation, output, cancel).await;
        let TurnOutcome::Completed { text, .. } = &outcome else {
            return outcome;
        };
        if continued >= MAX_STOP_CONTINUES || cancel.is_cancelled() {
            return outcome;
        }
        let check = StopCheck {
            session_id: session_id(shared),
            text: text.clone(),
            continued,
        };
        let mut notes = Vec::new();
        let go_on = shared.hooks.stop(&check, &mut notes).await;
        publish(shared, notes, None);
        let Some(reason) = go_on else {
            return outcome;
        };
        continued += 1;
        shared
            .lock()
            .history
            .push(Message::user(format!("{GO_ON_NOTE} {reason}]")));
        super::persist::save(shared).await;
    }
}

/// The `user_prompt_submit` hooks on the message just recorded: `Some`
/// outcome when one blocked it. Context they add follows the message.
async fn before_message(shared: &Shared) -> Option<TurnOutcome> {
    let text = {
        let state = shared.lock();
        state
            .history
            .iter()
            .rev()
            .find(|m| m.role == lrg_providers::Role::User)
            .map(Message::text)
            .unwrap_or_default()
    };
    let prompt = PromptSubmit {
        session_id: session_id(shared),
        text,
    };
    let mut notes = Vec::new();
    let answer = shared.hooks.prompt(&prompt, &mut notes).await;
    publish(shared, notes, None);
    if let Some(reason) = answer.blocked {
        shared
            .lock()
            .history
            .push(Message::assistant(format!("{BLOCKED_NOTE} {reason}]")));
        super::persist::save(shared).await;
        return Some(TurnOutcome::Blocked { reason });
    }
    if !answer.context.is_empty() {
        let context = format!("{CONTEXT_NOTE}\n{}", answer.context.join("\n\n"));
        shared.lock().history.push(Message::user(context));
        super::persist::save(shared).await;
    }
    None
}

/// The `pre_tool_use` hooks on `call`; `check` validates a rewrite.
pub(super) async fn before_call(
    shared: &Shared,
    call: &ToolCall,
    class: ToolClass,
    check: impl Fn(&Value) -> Result<(), String>,
) -> ToolAnswer {
    if shared.hooks.is_empty() {
        return ToolAnswer::default();
    }
    let event = PreToolUse {
        session_id: session_id(shared),
        tool: call.name.clone(),
        call_id: call.id.clone(),
        arguments: call.arguments.clone(),
        class,
    };
    let mut notes = Vec::new();
    let answer = shared.hooks.pre_tool(&event, check, &mut notes).await;
    publish(shared, notes, Some(&call.id));
    answer
}

/// The `post_tool_use` hooks on a call that ran: their notes are added to
/// its result's parts.
pub(super) async fn after_call(
    shared: &Shared,
    call: &ToolCall,
    arguments: &Value,
    parts: &mut Vec<Part>,
    is_error: bool,
) {
    if shared.hooks.is_empty() {
        return;
    }
    let result = parts
        .iter()
        .filter_map(|p| match p {
            Part::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n");
    let event = PostToolUse {
        session_id: session_id(shared),
        tool: call.name.clone(),
        call_id: call.id.clone(),
        arguments: arguments.clone(),
        result,
        is_error,
    };
    let mut notes = Vec::new();
    let added = shared.hooks.post_tool(&event, &mut notes).await;
    publish(shared, notes, Some(&call.id));
    for note in added {
        parts.push(Part::text(format!("[Note from a hook] {note}")));
    }
}

fn session_id(shared: &Shared) -> Option<String> {
    shared.persister.as_ref().map(|p| p.id().to_string())
}

fn publish(shared: &Shared, notes: Vec<Note>, call_id: Option<&str>) {
    for note in notes {
        shared.publish(match note {
            Note::Decided {
                hook,
                event,
                decision,
                reason,
            } => Event::HookDecision {
                hook,
                event,
                decision,
                reason,
                call_id: call_id.map(str::to_owned),
            },
            Note::Failed {
                hook,
                event,
                message,
            } => Event::Warning {
                message: format!(
                    "hook `{hook}` ({}) failed and decided nothing: {message}",
                    event.as_str()
                ),
                retrying: false,
            },
        });
    }
}
