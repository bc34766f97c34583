//! One tool call: announce, refuse a repeat, ask if needed, run, record.

use std::collections::HashSet;

use lrg_providers::text_tools::{RECOVERY_TOOL, recovery::Recovery};
use lrg_providers::{ToolCall, ToolResult, ToolSpec};
use tokio_util::sync::CancellationToken;

use super::Shared;
use super::approver::{ApprovalRequest, Waited};
use super::history::canonical_json;
use crate::events::{Event, ImageDescriptor, SkipReason};
use crate::hooks::ToolDecision;
use crate::permissions::{Answer, ApprovalReason, Decision, Rule, decide_configured};
use crate::tools::ToolClass;

/// The result of a call the person's stop kept from starting.
const STOPPED_BEFORE_START: &str = "Not run: the user stopped before this call started.";

/// A call's result and the event that reports it (`tool_done` or
/// `tool_skipped`), published only once the result is kept.
struct Done {
    result: ToolResult,
    event: Event,
}

/// Handle `call` and return its result; every call gets one, even one that
/// never ran. The result is durable before the event that reports it goes
/// out ([`super::persist::save_result`]).
pub(super) async fn handle_call(
    shared: &Shared,
    call: &ToolCall,
    specs: &[ToolSpec],
    made: &mut HashSet<String>,
    asked_by: &crate::otel::TurnContext,
    cancel: &CancellationToken,
) -> ToolResult {
    use tracing::Instrument as _;
    let span = crate::otel::execute_tool_span(call, asked_by);
    let Done { result, event } = run_call(shared, call, specs, made, cancel)
        .instrument(span.clone())
        .await;
    if result.is_error {
        let kind = match &event {
            Event::ToolSkipped { reason, .. } => crate::otel::skip_kind(*reason),
            _ => "tool_error",
        };
        crate::otel::record_error(&span, kind);
    }
    drop(span);
    super::persist::save_result(shared, &result).await;
    shared.publish(event);
    result
}

async fn run_call(
    shared: &Shared,
    call: &ToolCall,
    specs: &[ToolSpec],
    made: &mut HashSet<String>,
    cancel: &CancellationToken,
) -> Done {
    // A close-but-wrong name (`functions.get_weather`) runs as the one
    // offered tool it fits, with a warning.
    let (call, repaired) = crate::tools::names::repair_call(call, specs);
    let call = call.as_ref();
    let spec = specs.iter().find(|s| s.name == call.name);
    let class = spec.map_or(ToolClass::Destructive, |s| {
        ToolClass::from_annotations(&s.annotations)
    });
    let targets = spec.and_then(|s| shared.target_counter.count(s, &call.arguments));
    // What the tool's own config says: where it runs, and an allow or ask
    // (looked up once per call; `spec` is found under the same name).
    let policy = shared.tools.policy(&call.name);
    let runs_on = policy.runs_on;
    shared.publish(Event::ToolCall {
        call_id: call.id.clone(),
        tool: call.name.clone(),
        title: spec.and_then(|s| s.annotations.title.clone()),
        class,
        arguments: call.arguments.clone(),
        targets,
        runs_on,
    });
    // What a person asked about this call should know too.
    let mut warnings = Vec::new();
    if let Some(message) = repaired {
        warnings.push(message.clone());
        shared.publish(Event::Warning {
            message,
            retrying: false,
        });
    }

    if cancel.is_cancelled() {
        return skip(
            shared,
            call,
            SkipReason::Stopped,
            None,
            STOPPED_BEFORE_START,
        );
    }
    if call.name == RECOVERY_TOOL {
        return recover(shared, call, specs, made);
    }
    if !made.insert(format!(
        "{}\u{0}{}",
        call.name,
        canonical_json(&call.arguments)
    )) {
        let text = format!(
            "Not run: you already made this exact call ({} with the same arguments) for this message, \
             and its result is above. Do not repeat it: use that result, call with different arguments, \
             or answer the user.",
            call.name
        );
        return skip(shared, call, SkipReason::RepeatedCall, None, &text);
    }
    let Some(spec) = spec else {
        let text = crate::tools::names::unknown_tool_text(&call.name, specs);
        return skip(shared, call, SkipReason::UnknownTool, None, &text);
    };

    // The operator's hooks come before the rules: a denial holds whatever
    // the mode, and a rewrite is checked against the tool's schema.
    let hooked = super::hooked::before_call(shared, call, class, |arguments| {
        crate::tools::ArgumentCheck::new(&spec.name, &spec.input_schema)
            .check(&spec.name, arguments)
    })
    .await;
    let settings = shared.permissions.settings();
    let chat_allowed = shared.lock().chat_allowed.contains(&call.name);
    let configured = policy.rule;
    let mut decision = decide_configured(
        &settings,
        &spec.name,
        class,
        chat_allowed,
        targets,
        configured,
    );
    match hooked.decision {
        Some((ToolDecision::Deny, reason)) => {
            let reason = reason.unwrap_or_default();
            let reason = reason.trim().trim_end_matches('.');
            let text = format!(
                "{} {reason}. Do not repeat it; do the task another way or tell the user.",
                crate::hooks::DENIED_PREFIX
            );
            return skip(shared, call, SkipReason::HookDenied, None, &text);
        }
        // Blocked stays blocked (it was not offered), and the bulk limit
        // still asks.
        Some((ToolDecision::Ask, reason)) if decision != Decision::Block => {
            decision = Decision::Ask(ApprovalReason::Hook { reason });
        }
        Some((ToolDecision::Allow, _))
            if matches!(
                decision,
                Decision::Ask(ApprovalReason::Mode { .. } | ApprovalReason::Rule)
            ) =>
        {
            decision = Decision::Allow;
        }
        _ => {}
    }
    if hooked.arguments.is_some() {
        warnings.push(
            "a hook changed the arguments the model wrote: these are the ones that would run"
                .to_string(),
        );
    }
    if spec.annotations.read_only_hint.is_none() && spec.annotations.destructive_hint.is_none() {
        warnings.push(format!(
            "`{}` does not say what it changes (no annotations), so it counts as destructive",
            spec.name
        ));
    }
    let call = &match hooked.arguments {
        Some(arguments) => ToolCall {
            arguments,
            ..call.clone()
        },
        None => call.clone(),
    };
    match decision {
        Decision::Allow => {}
        Decision::Block => {
            let text = format!(
                "Not run: the user turned the tool `{}` off. Do not call it; do the task another way or tell the user.",
                call.name
            );
            return skip(shared, call, SkipReason::Blocked, None, &text);
        }
        Decision::Ask(reason) => {
            let mut request = ApprovalRequest::new(
                call.id.clone(),
                call.name.clone(),
                class,
                call.arguments.clone(),
                reason,
            );
            request.title = spec.annotations.title.clone();
            request.targets = targets;
            request.warnings = warnings;
            if let Some(denied) = ask(shared, call, &request, cancel).await {
                return denied;
            }
        }
    }
    // An answer may have come just as the person stopped: start nothing new.
    if cancel.is_cancelled() {
        return skip(
            shared,
            call,
            SkipReason::Stopped,
            None,
            STOPPED_BEFORE_START,
        );
    }

    shared.publish(Event::ToolRunning {
        call_id: call.id.clone(),
    });
    // A running tool is not interrupted: the token only tells it not to
    // start anything further.
    let started = std::time::Instant::now();
    let mut output = match () {
        _ if super::offer::is_search(shared, call) => super::offer::run_search(shared, call),
        _ if runs_on == crate::tools::client::RunsOn::Client => {
            super::client_calls::wait(shared, call, cancel).await
        }
        _ => {
            // The servers it reaches ask this session, and show its progress here.
            let caller = super::questions::caller(shared, &call.id, cancel);
            let run = shared
                .tools
                .call(&call.name, call.arguments.clone(), cancel.clone());
            crate::tools::mcp_link::with_caller(caller, run).await
        }
    };
    crate::otel::record_tool_duration(&call.name, started.elapsed(), output.is_error);
    if let Some(warning) = &output.warning {
        shared.publish(Event::Warning {
            message: warning.clone(),
            retrying: false,
        });
    }
    // A tool's own error goes back with its expected arguments.
    crate::tools::teach_runtime_error(spec, &mut output, cancel.is_cancelled());
    let structured = output.structured.take();
    let resources = std::mem::take(&mut output.resources);
    let mut parts = output.parts;
    super::hooked::after_call(shared, call, &call.arguments, &mut parts, output.is_error).await;
    let result = ToolResult {
        call_id: call.id.clone(),
        name: call.name.clone(),
        parts,
        is_error: output.is_error,
    };
    let event = Event::ToolDone {
        call_id: call.id.clone(),
        ok: !result.is_error,
        text: result.text_content(),
        images: ImageDescriptor::of_parts(&result.parts),
        structured,
        resources,
    };
    Done { result, event }
}

/// Ask the person (or the session's approver); `None` when the call may
/// run, otherwise its result.
async fn ask(
    shared: &Shared,
    call: &ToolCall,
    request: &ApprovalRequest,
    cancel: &CancellationToken,
) -> Option<Done> {
    let answer = match super::approver::wait(shared, request, cancel).await {
        Waited::Answered(answer) => answer,
        Waited::Stopped => {
            return Some(skip(
                shared,
                call,
                SkipReason::Stopped,
                None,
                "Not run: the user stopped before deciding whether this call may run.",
            ));
        }
        Waited::TimedOut(after) => {
            let text = format!(
                "Not run: nobody answered within {} s whether this call may run, so it was denied. \
                 Do not repeat it; do the task another way or tell the user.",
                after.as_secs_f64()
            );
            return Some(skip(
                shared,
                call,
                SkipReason::ApprovalTimedOut,
                None,
                &text,
            ));
        }
    };
    match answer {
        Answer::Once => None,
        Answer::ThisChat => {
            shared.lock().chat_allowed.insert(call.name.clone());
            None
        }
        Answer::Always => {
            let status = shared.permissions.set_rule(&call.name, Some(Rule::Allow));
            shared.permissions_event(status);
            None
        }
        Answer::Deny { note } => {
            let mut text = "Not run: the user did not allow this call.".to_string();
            if let Some(note) = &note {
                text.push_str(" The user's note: ");
                text.push_str(note);
            }
            Some(skip(shared, call, SkipReason::NotAllowed, note, &text))
        }
    }
}

/// How many unusable calls written as text one message may get a recovery
/// hint for; after that the model is told to answer without them.
const MAX_RECOVERIES: usize = 3;

/// A call the model wrote as text but that could not be used (see
/// `lrg_providers::text_tools`): the result restates what is needed, with the
/// tool's expected arguments, and the person sees a warning.
fn recover(
    shared: &Shared,
    call: &ToolCall,
    specs: &[ToolSpec],
    made: &mut HashSet<String>,
) -> Done {
    let attempt = (1..)
        .find(|n| made.insert(format!("\u{1}recovery {n}")))
        .unwrap_or(1);
    let recovery = Recovery::from_arguments(&call.arguments);
    let mut text = recovery.as_ref().map_or_else(
        || "Your tool call could not be read.".to_string(),
        |r| r.message.clone(),
    );
    if let Some(spec) = recovery
        .and_then(|r| r.tool)
        .and_then(|name| specs.iter().find(|s| s.name == name))
    {
        text.push_str(&format!(
            "\nThe arguments of `{}`: {}",
            spec.name,
            crate::tools::describe_arguments(&spec.input_schema)
        ));
    }
    if attempt > MAX_RECOVERIES {
        text = "Not run: several tool calls in a row could not be read. Do not call tools again \
                for this message: answer the user with what you have."
            .to_string();
    }
    shared.publish(Event::Warning {
        message: format!("the model wrote a tool call that could not be used (attempt {attempt})"),
        retrying: false,
    });
    skip(shared, call, SkipReason::UnknownTool, None, &text)
}

fn skip(
    // Kept for the callers' symmetry: the event is published by
    // `handle_call` once the result is kept.
    _shared: &Shared,
    call: &ToolCall,
    reason: SkipReason,
    note: Option<String>,
    text: &str,
) -> Done {
    Done {
        result: ToolResult::text(call, text, true),
        event: Event::ToolSkipped {
            call_id: call.id.clone(),
            reason,
            note,
        },
    }
}
