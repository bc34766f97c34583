//! Where a resumed history may be cut: the newest rows within a bound, never
//! separating a tool call from its result; and what of it goes with a
//! conversation carried over to another model.

use lrg_providers::{Message, Part, Role};

/// The index of the first row to keep so that at most `max_rows` rows remain
/// (when a cut is possible) and the kept rows start at a user message: no
/// tool result loses its call, and every model API accepts the first row.
///
/// Where no user message lies within the bound, the cut falls at the first
/// row that is not a tool result; where there is none either, nothing is
/// cut (a history is never left starting with an orphaned result).
pub fn trim_start(rows: &[Message], max_rows: usize) -> usize {
    let earliest = rows.len().saturating_sub(max_rows);
    if earliest == 0 {
        return 0;
    }
    let tail = &rows[earliest..];
    if let Some(i) = tail.iter().position(|m| m.role == Role::User) {
        return earliest + i;
    }
    if let Some(i) = tail.iter().position(|m| m.role != Role::Tool) {
        return earliest + i;
    }
    0
}

/// `rows` without their native parts (a provider's own thinking blocks and
/// signatures, no history for another model); the rows themselves are all
/// kept, in order, so every index into the history stays valid. `None`
/// when there were none to drop.
pub(crate) fn without_native(rows: &[Message]) -> Option<Vec<Message>> {
    let native = |p: &Part| matches!(p, Part::Native(_));
    if !rows.iter().any(|r| r.parts.iter().any(native)) {
        return None;
    }
    Some(
        rows.iter()
            .map(|r| Message {
                role: r.role,
                parts: r.parts.iter().filter(|p| !native(p)).cloned().collect(),
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use lrg_providers::{Part, ToolCall, ToolResult};

    fn step(id: &str) -> [Message; 2] {
        let call = ToolCall {
            id: id.into(),
            name: "t".into(),
            arguments: serde_json::json!({}),
        };
        [
            Message {
                role: Role::Assistant,
                parts: vec![Part::ToolCall(call.clone())],
            },
            Message::tool_results([ToolResult::text(&call, "ok", false)]),
        ]
    }

    #[test]
    fn cuts_at_a_user_message_within_the_bound() {
        let mut rows = Vec::new();
        for i in 0..10 {
            rows.push(Message::user(format!("q{i}")));
            rows.extend(step(&format!("c{i}")));
            rows.push(Message::assistant("a"));
        }
        // 40 rows, bound 10: the newest user message at or after row 30.
        let start = trim_start(&rows, 10);
        assert_eq!(start, 32);
        assert_eq!(rows[start].role, Role::User);
        assert_eq!(trim_start(&rows, 100), 0);
        assert_eq!(trim_start(&rows, 40), 0);
    }

    #[test]
    fn never_starts_at_a_result() {
        let mut rows = vec![Message::user("go")];
        for i in 0..20 {
            rows.extend(step(&format!("c{i}")));
        }
        let start = trim_start(&rows, 5);
        assert_eq!(rows[start].role, Role::Assistant);
        assert!(rows.len() - start <= 5);
        let only_results: Vec<Message> =
            (0..5).map(|i| step(&format!("r{i}"))[1].clone()).collect();
        assert_eq!(trim_start(&only_results, 2), 0);
    }
}
