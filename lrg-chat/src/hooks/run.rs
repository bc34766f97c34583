//! Running a session's hooks in order and combining what they said. The
//! session publishes the notes (decisions and failures) that come back.

use std::sync::Arc;

use serde_json::Value;

use super::{
    HookDecisionKind, HookEvent, PostToolUse, PreToolUse, PromptSubmit, PromptVerdict,
    SessionHooks, StopCheck, ToolDecision,
};

/// A session's hooks, run in the order they were added.
#[derive(Clone, Default)]
pub(crate) struct Hooks(Arc<[Arc<dyn SessionHooks>]>);

/// What one hook did, for an event: a decision, or a failure that decided
/// nothing.
pub(crate) enum Note {
    Decided {
        hook: String,
        event: HookEvent,
        decision: HookDecisionKind,
        reason: Option<String>,
    },
    Failed {
        hook: String,
        event: HookEvent,
        message: String,
    },
}

/// The combined answer of the `user_prompt_submit` hooks.
#[derive(Default)]
pub(crate) struct PromptAnswer {
    /// The first hook that blocked, and why.
    pub(crate) blocked: Option<String>,
    /// Context to add, from every hook that gave some.
    pub(crate) context: Vec<String>,
}

/// The combined answer of the `pre_tool_use` hooks.
#[derive(Default)]
pub(crate) struct ToolAnswer {
    /// Deny if any hook denied (the first one's reason), else ask if any
    /// asked, else allow if any allowed.
    pub(crate) decision: Option<(ToolDecision, Option<String>)>,
    /// The arguments after every accepted rewrite, when there was one.
    pub(crate) arguments: Option<Value>,
}

impl Hooks {
    pub(crate) fn new(hooks: Vec<Arc<dyn SessionHooks>>) -> Self {
        Self(hooks.into())
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Each hook, for a session that runs the same ones (a sub-agent).
    pub(crate) fn to_vec(&self) -> Vec<Arc<dyn SessionHooks>> {
        self.0.to_vec()
    }

    pub(crate) async fn prompt(
        &self,
        prompt: &PromptSubmit,
        notes: &mut Vec<Note>,
    ) -> PromptAnswer {
        let event = HookEvent::UserPromptSubmit;
        let mut answer = PromptAnswer::default();
        for hook in self.0.iter() {
            match hook.user_prompt_submit(prompt).await {
                Ok(PromptVerdict::Continue) => {}
                Ok(PromptVerdict::AddContext(text)) => {
                    notes.push(decided(
                        hook.as_ref(),
                        event,
                        HookDecisionKind::Context,
                        None,
                    ));
                    answer.context.push(text);
                }
                Ok(PromptVerdict::Block(reason)) => {
                    notes.push(decided(
                        hook.as_ref(),
                        event,
                        HookDecisionKind::Block,
                        Some(reason.clone()),
                    ));
                    answer.blocked = Some(reason);
                    return answer;
                }
                Err(e) => notes.push(failed(hook.as_ref(), event, e.0)),
            }
        }
        answer
    }

    /// `check` validates a rewrite against the tool's schema.
    pub(crate) async fn pre_tool(
        &self,
        call: &PreToolUse,
        check: impl Fn(&Value) -> Result<(), String>,
        notes: &mut Vec<Note>,
    ) -> ToolAnswer {
        let event = HookEvent::PreToolUse;
        let mut answer = ToolAnswer::default();
        let mut ask: Option<Option<String>> = None;
        let mut allow: Option<Option<String>> = None;
        let mut current = call.clone();
        for hook in self.0.iter() {
            let verdict = match hook.pre_tool_use(&current).await {
                Ok(verdict) => verdict,
                Err(e) => {
                    notes.push(failed(hook.as_ref(), event, e.0));
                    continue;
                }
            };
            if let Some(arguments) = verdict.arguments {
                match check(&arguments) {
                    Ok(()) => {
                        notes.push(decided(
                            hook.as_ref(),
                            event,
                            HookDecisionKind::Rewrite,
                            verdict.reason.clone(),
                        ));
                        current.arguments = arguments.clone();
                        answer.arguments = Some(arguments);
                    }
                    Err(why) => {
                        // A bad rewrite is the hook's failure: none of its
                        // answer counts.
                        notes.push(failed(
                            hook.as_ref(),
                            event,
                            format!(
                                "rewrote the arguments to ones the tool's schema rejects: {why}"
                            ),
                        ));
                        continue;
                    }
                }
            }
            match verdict.decision {
                None => {}
                Some(ToolDecision::Deny) => {
                    let reason = verdict
                        .reason
                        .filter(|r| !r.trim().is_empty())
                        .unwrap_or_else(|| "a hook refused it".to_owned());
                    notes.push(decided(
                        hook.as_ref(),
                        event,
                        HookDecisionKind::Deny,
                        Some(reason.clone()),
                    ));
                    answer.decision = Some((ToolDecision::Deny, Some(reason)));
                    return answer;
                }
                Some(ToolDecision::Ask) => {
                    notes.push(decided(
                        hook.as_ref(),
                        event,
                        HookDecisionKind::Ask,
                        verdict.reason.clone(),
                    ));
                    ask.get_or_insert(verdict.reason);
                }
                Some(ToolDecision::Allow) => {
                    notes.push(decided(
                        hook.as_ref(),
                        event,
                        HookDecisionKind::Allow,
                        verdict.reason.clone(),
                    ));
                    allow.get_or_insert(verdict.reason);
                }
            }
        }
        answer.decision = match (ask, allow) {
            (Some(reason), _) => Some((ToolDecision::Ask, reason)),
            (None, Some(reason)) => Some((ToolDecision::Allow, reason)),
            (None, None) => None,
        };
        answer
    }

    /// The notes to add to a call's result.
    pub(crate) async fn post_tool(&self, call: &PostToolUse, notes: &mut Vec<Note>) -> Vec<String> {
        let event = HookEvent::PostToolUse;
        let mut added = Vec::new();
        for hook in self.0.iter() {
            match hook.post_tool_use(call).await {
                Ok(None) => {}
                Ok(Some(note)) => {
                    notes.push(decided(
                        hook.as_ref(),
                        event,
                        HookDecisionKind::Note,
                        Some(note.clone()),
                    ));
                    added.push(note);
                }
                Err(e) => notes.push(failed(hook.as_ref(), event, e.0)),
            }
        }
        added
    }

    /// Why the model should go on, from the first hook that asks.
    pub(crate) async fn stop(&self, check: &StopCheck, notes: &mut Vec<Note>) -> Option<String> {
        let event = HookEvent::Stop;
        for hook in self.0.iter() {
            match hook.stop(check).await {
                Ok(None) => {}
                Ok(Some(reason)) => {
                    notes.push(decided(
                        hook.as_ref(),
                        event,
                        HookDecisionKind::Continue,
                        Some(reason.clone()),
                    ));
                    return Some(reason);
                }
                Err(e) => notes.push(failed(hook.as_ref(), event, e.0)),
            }
        }
        None
    }
}

fn decided(
    hook: &dyn SessionHooks,
    event: HookEvent,
    decision: HookDecisionKind,
    reason: Option<String>,
) -> Note {
    Note::Decided {
        hook: hook.name().to_owned(),
        event,
        decision,
        reason,
    }
}

fn failed(hook: &dyn SessionHooks, event: HookEvent, message: String) -> Note {
    Note::Failed {
        hook: hook.name().to_owned(),
        event,
        message,
    }
}
