//! Things the loop writes into the history, and the check that keeps it
//! acceptable to every model API.

use std::collections::HashMap;

use lrg_providers::{Message, Part};
use serde_json::Value;

/// The note added to the history where the person stopped a message. Without
/// it the unanswered request merges with the next message and small models
/// answer both.
pub const STOPPED_NOTE: &str = "[The user stopped this answer here.]";

/// What the summary of a compacted conversation is introduced with.
pub const SUMMARY_PREFIX: &str = "Summary of our conversation so far:\n\n";

/// Every way `history` breaks "each tool call has exactly one result, after
/// it, and no result lacks its call"; empty when it holds.
pub fn tool_pairing_errors(history: &[Message]) -> Vec<String> {
    let mut errors = Vec::new();
    // call id -> results seen for it
    let mut calls: HashMap<&str, usize> = HashMap::new();
    let mut order: Vec<&str> = Vec::new();
    for (index, message) in history.iter().enumerate() {
        for part in &message.parts {
            match part {
                Part::ToolCall(call) => {
                    if calls.insert(&call.id, 0).is_some() {
                        errors.push(format!("message {index}: call id `{}` used twice", call.id));
                    } else {
                        order.push(&call.id);
                    }
                }
                Part::ToolResult(result) => match calls.get_mut(result.call_id.as_str()) {
                    Some(n) => *n += 1,
                    None => errors.push(format!(
                        "message {index}: result for `{}` without an earlier call",
                        result.call_id
                    )),
                },
                _ => {}
            }
        }
    }
    for id in order {
        match calls.get(id) {
            Some(1) => {}
            Some(n) => errors.push(format!("call `{id}` has {n} results")),
            None => {}
        }
    }
    errors
}

/// `value` as JSON with object keys sorted at every level, so two calls with
/// the same arguments compare equal whatever order the model wrote them in
/// (and whether or not serde_json preserves insertion order in this build).
pub(crate) fn canonical_json(value: &Value) -> String {
    let mut out = String::new();
    write_canonical(value, &mut out);
    out
}

fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                if let Some(v) = map.get(key) {
                    write_canonical(v, out);
                }
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lrg_providers::{Role, ToolCall, ToolResult};
    use serde_json::json;

    #[test]
    fn canonical_json_ignores_key_order() {
        let a = json!({"b": 1, "a": {"y": [1, {"q": 1, "p": 2}], "x": "s"}});
        let b: Value =
            serde_json::from_str(r#"{"a":{"x":"s","y":[1,{"p":2,"q":1}]},"b":1}"#).unwrap();
        assert_eq!(canonical_json(&a), canonical_json(&b));
        assert_eq!(
            canonical_json(&a),
            r#"{"a":{"x":"s","y":[1,{"p":2,"q":1}]},"b":1}"#
        );
        assert_ne!(
            canonical_json(&json!({"a": 1})),
            canonical_json(&json!({"a": "1"}))
        );
    }

    #[test]
    fn pairing_errors_are_found() {
        let call = ToolCall {
            id: "c1".into(),
            name: "t".into(),
            arguments: json!({}),
        };
        let calling = Message {
            role: Role::Assistant,
            parts: vec![Part::ToolCall(call.clone())],
        };
        let result = Message::tool_results([ToolResult::text(&call, "ok", false)]);
        assert!(tool_pairing_errors(&[calling.clone(), result.clone()]).is_empty());
        assert_eq!(
            tool_pairing_errors(std::slice::from_ref(&calling)),
            ["call `c1` has 0 results"]
        );
        assert_eq!(
            tool_pairing_errors(&[result.clone(), calling.clone()]).len(),
            2
        );
        assert_eq!(
            tool_pairing_errors(&[calling, result.clone(), result]),
            ["call `c1` has 2 results"]
        );
    }
}
