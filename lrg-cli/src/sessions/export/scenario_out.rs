//! The scenario file an export writes: its fields in the order a person
//! reads them, the expectations drawn from the kept calls and reply, and
//! the permissions that make each call end as it did.

use std::collections::BTreeMap;
use std::path::Path;

use lrg_chat::testing::{
    AnswerKind, ApprovalAnswer, ArgsMatch, CallExpectation, Expectations, ReplyExpectation,
};
use lrg_chat::transcript::{ToolOutcome, outcome_of};
use lrg_providers::GenerationSettings;
use serde::Serialize;

use super::{FirstMessage, KeptCall, deny_note, turned_off};
use crate::cli::ReplyMatch;

/// The model id a scenario names for `lrg test --record`: not a script,
/// replay or external agent, whose paths and commands do not carry over.
pub(super) fn rerecordable(model: &str) -> Option<String> {
    let parsed: lrg_providers::ModelRef = model.parse().ok()?;
    match parsed.provider {
        lrg_providers::Provider::Script | lrg_providers::Provider::Replay => None,
        _ => Some(model.to_string()),
    }
}

/// The rules and approval answers that make the calls end as they did:
/// blocked tools stay blocked; a tool the person denied asks at every
/// call, answered "once" where it ran and "deny" (with the note) where not.
pub(super) fn permissions_for(
    calls: &[KeptCall],
    blocked: &[String],
) -> (BTreeMap<String, &'static str>, Vec<ApprovalAnswer>) {
    let mut rules: BTreeMap<String, &'static str> =
        blocked.iter().map(|name| (name.clone(), "block")).collect();
    for kept in calls {
        if turned_off(&kept.result) {
            rules.insert(kept.call.name.clone(), "block");
        }
    }
    let asked: Vec<&str> = calls
        .iter()
        .filter(|k| deny_note(&k.result).is_some())
        .map(|k| k.call.name.as_str())
        .collect();
    let mut approvals = Vec::new();
    for kept in calls {
        if !asked.contains(&kept.call.name.as_str()) {
            continue;
        }
        rules.insert(kept.call.name.clone(), "ask");
        match (deny_note(&kept.result), outcome_of(&kept.result)) {
            (Some(note), _) => approvals.push(ApprovalAnswer::new(
                &kept.call.name,
                AnswerKind::Deny,
                Some(note).filter(|n| !n.is_empty()),
            )),
            // It ran (or failed running): it was allowed.
            (None, ToolOutcome::Ok | ToolOutcome::Failed) => {
                approvals.push(ApprovalAnswer::once(&kept.call.name));
            }
            // A repeat or an unknown tool is refused before anyone is asked.
            _ => {}
        }
    }
    (rules, approvals)
}

/// The expectations: every call with its exact arguments (as often as it
/// was made), the order of the calls, and the reply.
pub(super) fn expectations(first: &FirstMessage, reply: ReplyMatch) -> Expectations {
    let mut expect = Expectations::default();
    for kept in &first.calls {
        let (tool, args) = (&kept.call.name, &kept.call.arguments);
        if let Some(seen) = expect
            .calls
            .iter_mut()
            .find(|c| c.tool == *tool && c.args.as_ref() == Some(args))
        {
            seen.times = seen.times.map(|n| n + 1);
            continue;
        }
        let mut call = CallExpectation::new(tool);
        call.args = Some(args.clone());
        call.match_ = ArgsMatch::Equal;
        call.times = Some(1);
        expect.calls.push(call);
    }
    if first.calls.len() > 1 {
        expect.order = first.calls.iter().map(|k| k.call.name.clone()).collect();
    }
    let mut want = ReplyExpectation::default();
    match reply {
        ReplyMatch::Exact => want.regex = Some(format!("^{}$", regex_escape(&first.reply))),
        ReplyMatch::Contains => want.contains = vec![first_sentence(&first.reply)],
    }
    expect.reply = Some(want);
    expect
}

/// `text` as a regular expression that matches only itself.
fn regex_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if "\\.+*?()|[]{}^$#&-~".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// The reply's first sentence: up to the first sentence end (kept) on its
/// first line that has text.
fn first_sentence(reply: &str) -> String {
    let line = reply
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or_default();
    let mut chars = line.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        let ends = matches!(c, '.' | '!' | '?' | '。' | '！' | '？')
            && chars.peek().is_none_or(|(_, next)| next.is_whitespace());
        if ends {
            return line[..i + c.len_utf8()].to_string();
        }
    }
    line.to_string()
}

/// The scenario file, in the order a person reads it.
#[derive(Serialize)]
pub(super) struct ScenarioOut<'a> {
    pub(super) name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) model: Option<String>,
    pub(super) recording: &'a str,
    pub(super) tools: ToolsOut<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) system: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) max_steps: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) generation: Option<GenerationOut>,
    pub(super) permissions: PermissionsOut,
    pub(super) message: &'a str,
    pub(super) expect: Expectations,
}

#[derive(Serialize)]
pub(super) struct ToolsOut<'a> {
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    pub(super) mcp: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) mcp_config: Option<&'a Path>,
}

#[derive(Serialize)]
pub(super) struct PermissionsOut {
    pub(super) mode: &'static str,
    pub(super) bulk_limit: u32,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub(super) rules: BTreeMap<String, &'static str>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(super) approvals: Vec<ApprovalAnswer>,
}

/// The settings a scenario's `generation` takes (no `top_k`).
#[derive(Serialize)]
pub(super) struct GenerationOut {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) temperature: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) top_p: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) seed: Option<u32>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(super) stop: Vec<String>,
}

impl GenerationOut {
    pub(super) fn of(settings: &GenerationSettings) -> Option<Self> {
        let out = Self {
            temperature: settings.temperature,
            max_tokens: settings.max_tokens,
            top_p: settings.top_p,
            seed: settings.seed,
            stop: settings.stop.clone(),
        };
        let none = out.temperature.is_none()
            && out.max_tokens.is_none()
            && out.top_p.is_none()
            && out.seed.is_none()
            && out.stop.is_empty();
        (!none).then_some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_sentence_ends_at_its_stop() {
        assert_eq!(
            first_sentence("You have 3 notes. The first is milk."),
            "You have 3 notes."
        );
        assert_eq!(first_sentence("\n  Done!\nMore."), "Done!");
        assert_eq!(first_sentence("v1.2 is out"), "v1.2 is out");
        assert_eq!(first_sentence("Why? Because."), "Why?");
    }

    #[test]
    fn an_escaped_reply_matches_only_itself() {
        assert_eq!(regex_escape("a.b (c) $1"), r"a\.b \(c\) \$1");
    }
}
