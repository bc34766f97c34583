//! How many items a call is aimed at, for the bulk limit.

use lrg_providers::ToolSpec;
use serde_json::Value;

/// Counts the targets of a tool call. Apps whose tools aim at items some
/// other way (a saved result set, "the current selection") plug in their
/// own; the session uses [`LongestIdArray`] unless told otherwise.
pub trait TargetCounter: Send + Sync {
    /// How many items `arguments` aim `tool` at; `None` when it cannot be
    /// told (then the bulk limit does not apply).
    fn count(&self, tool: &ToolSpec, arguments: &Value) -> Option<usize>;
}

/// The default counter: the length of the longest array of ids (strings or
/// integers) among the arguments, looking one object level deep
/// (`{"ids": [...]}` and `{"filter": {"ids": [...]}}`).
#[derive(Debug, Clone, Copy, Default)]
pub struct LongestIdArray;

impl TargetCounter for LongestIdArray {
    fn count(&self, _tool: &ToolSpec, arguments: &Value) -> Option<usize> {
        let Value::Object(args) = arguments else {
            return None;
        };
        let mut best: Option<usize> = None;
        let mut consider = |value: &Value| {
            if let Some(n) = id_array_len(value) {
                best = Some(best.map_or(n, |b| b.max(n)));
            }
        };
        for value in args.values() {
            consider(value);
            if let Value::Object(inner) = value {
                inner.values().for_each(&mut consider);
            }
        }
        best
    }
}

fn id_array_len(value: &Value) -> Option<usize> {
    let Value::Array(items) = value else {
        return None;
    };
    let ids = items
        .iter()
        .all(|v| v.is_string() || v.is_i64() || v.is_u64());
    (ids && !items.is_empty()).then_some(items.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn count(args: Value) -> Option<usize> {
        let spec = ToolSpec {
            name: "t".into(),
            description: String::new(),
            input_schema: json!({"type": "object"}),
            annotations: Default::default(),
            output_schema: None,
        };
        LongestIdArray.count(&spec, &args)
    }

    #[test]
    fn counts_the_longest_id_array_one_level_deep() {
        assert_eq!(count(json!({"ids": [1, 2, 3], "tags": ["a"]})), Some(3));
        assert_eq!(
            count(json!({"filter": {"paths": ["a", "b"]}, "n": 5})),
            Some(2)
        );
        assert_eq!(
            count(json!({"a": {"b": {"ids": [1, 2, 3]}}})),
            None,
            "two levels deep"
        );
        assert_eq!(count(json!({"points": [[1, 2], [3, 4]]})), None, "not ids");
        assert_eq!(count(json!({"mixed": [1, {"x": 1}]})), None);
        assert_eq!(count(json!({"ids": []})), None);
        assert_eq!(
            count(json!({"weights": [0.5, 1.5]})),
            None,
            "floats are not ids"
        );
        assert_eq!(count(json!(["a", "b"])), None, "arguments are an object");
    }
}
