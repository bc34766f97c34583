//! What both stores do with the rows they read back before a session sees
//! them: calls a crash left open get a result, and results kept one by one
//! are one message again, so the history is one every model API accepts.

use std::collections::HashSet;

use lrg_providers::{Message, Part, Role, ToolResult};

use super::{SessionMeta, SessionState, StoredSession};

/// The text given to a call a crash left without a result.
pub const INTERRUPTED_NOTE: &str =
    "Not finished: the session ended before this call returned; whether it ran is unknown.";

/// Give every call of the last calling assistant message that has no result
/// an error result saying `note`, so the history is one every model API
/// accepts. Returns how many calls were answered.
fn answer_open_calls(history: &mut Vec<Message>, note: &str) -> usize {
    let missing = open_call_results(history, note);
    let n = missing.len();
    if n > 0 {
        history.push(Message::tool_results(missing));
    }
    n
}

/// What both stores do with the rows they read back, before a session sees
/// them: every call a crash left open gets its "not finished" result (said
/// in `warnings`), and a step's results, kept one by one, are one message
/// again.
pub(crate) fn loaded(
    meta: SessionMeta,
    state: SessionState,
    mut rows: Vec<Message>,
    mut warnings: Vec<String>,
) -> StoredSession {
    let answered = answer_open_calls(&mut rows, INTERRUPTED_NOTE);
    merge_tool_rows(&mut rows);
    if answered > 0 {
        warnings.push(format!(
            "{answered} tool call(s) had no result (the session ended while they ran); \
             they are recorded as not finished"
        ));
    }
    StoredSession {
        meta,
        state,
        rows,
        warnings,
    }
}

/// Make consecutive tool-result rows one (the first result of a call
/// wins): a step's results are kept one by one as each call ends, so that
/// none is shown before it is durable, and read back as the one message
/// every model API expects after a calling turn.
fn merge_tool_rows(rows: &mut Vec<Message>) {
    if !rows
        .windows(2)
        .any(|w| w[0].role == Role::Tool && w[1].role == Role::Tool)
    {
        return;
    }
    let mut merged: Vec<Message> = Vec::with_capacity(rows.len());
    for row in rows.drain(..) {
        match merged.last_mut() {
            Some(last) if last.role == Role::Tool && row.role == Role::Tool => {
                for part in row.parts {
                    let seen = match &part {
                        Part::ToolResult(r) => last
                            .parts
                            .iter()
                            .any(|p| matches!(p, Part::ToolResult(o) if o.call_id == r.call_id)),
                        _ => false,
                    };
                    if !seen {
                        last.parts.push(part);
                    }
                }
            }
            _ => merged.push(row),
        }
    }
    *rows = merged;
}

/// What [`answer_open_calls`] would add, without touching the history.
pub(crate) fn open_call_results(history: &[Message], note: &str) -> Vec<ToolResult> {
    let Some(last_call) = history
        .iter()
        .rposition(|m| m.role == Role::Assistant && m.tool_calls().next().is_some())
    else {
        return Vec::new();
    };
    let answered: HashSet<&str> = history[last_call + 1..]
        .iter()
        .flat_map(|m| m.parts.iter())
        .filter_map(|p| match p {
            Part::ToolResult(r) => Some(r.call_id.as_str()),
            _ => None,
        })
        .collect();
    history[last_call]
        .tool_calls()
        .filter(|c| !answered.contains(c.id.as_str()))
        .map(|c| ToolResult::text(c, note, true))
        .collect()
}
