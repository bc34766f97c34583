//! Finding the JSON in a model's answer: models wrap it in fences, put a
//! sentence before it, or add prose after it.

use serde_json::Value;

/// Candidate starts of an embedded value tried before giving up: each failed
/// try reads until the JSON breaks, so an answer full of braces must not cost
/// a parse per brace.
const MAX_TRIES: usize = 64;

/// The JSON value in `text`, looked for in this order:
/// 1. the whole text (trimmed);
/// 2. the last fenced block (```` ```json ```` or a bare ```` ``` ````) that
///    parses;
/// 3. the first balanced JSON object in the text (then, failing that, the
///    first array), with whatever follows it ignored.
///
/// `None` when there is none.
///
/// ```
/// use lrg_providers::typed::extract_json;
/// use serde_json::json;
/// assert_eq!(extract_json(r#"{"a": 1}"#), Some(json!({"a": 1})));
/// assert_eq!(extract_json("Here:\n```json\n{\"a\": 2}\n```\nDone."), Some(json!({"a": 2})));
/// assert_eq!(extract_json(r#"Sure: {"a": 3} — hope that helps {"b"}"#), Some(json!({"a": 3})));
/// assert_eq!(extract_json("no json here"), None);
/// ```
pub fn extract_json(text: &str) -> Option<Value> {
    let trimmed = text.trim();
    if let Ok(value) = serde_json::from_str::<Value>(trimmed) {
        return Some(value);
    }
    if let Some(value) = last_fenced(text) {
        return Some(value);
    }
    first_embedded(text, b'{').or_else(|| first_embedded(text, b'['))
}

/// The last fenced block whose info string is empty or `json` and whose body
/// parses.
fn last_fenced(text: &str) -> Option<Value> {
    let mut found = None;
    let mut rest = text;
    while let Some(open) = rest.find("```") {
        let after = &rest[open + 3..];
        let Some(line_end) = after.find('\n') else {
            break;
        };
        let info = after[..line_end].trim();
        let body = &after[line_end + 1..];
        let Some(close) = body.find("```") else {
            break;
        };
        if (info.is_empty() || info.eq_ignore_ascii_case("json"))
            && let Ok(value) = serde_json::from_str::<Value>(body[..close].trim())
        {
            found = Some(value);
        }
        rest = &body[close + 3..];
    }
    found
}

/// The first value starting at an `open` byte that parses as a whole JSON
/// value (the parser stops at its end, so prose after it is left alone).
fn first_embedded(text: &str, open: u8) -> Option<Value> {
    let starts = text
        .bytes()
        .enumerate()
        .filter(|(_, b)| *b == open)
        .map(|(start, _)| start)
        .take(MAX_TRIES);
    for start in starts {
        let mut values = serde_json::Deserializer::from_str(&text[start..]).into_iter::<Value>();
        if let Some(Ok(value)) = values.next() {
            return Some(value);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn whole_text_first() {
        assert_eq!(extract_json("  [1, 2]\n"), Some(json!([1, 2])));
        assert_eq!(
            extract_json("\"just a string\""),
            Some(json!("just a string"))
        );
    }

    #[test]
    fn the_last_json_fence_wins() {
        let text = "First try:\n```json\n{\"a\": 1}\n```\nBetter:\n```JSON\n{\"a\": 2}\n```\n";
        assert_eq!(extract_json(text), Some(json!({"a": 2})));
        // A fence of another language is not the answer.
        let text = "```python\nprint(1)\n```\nand {\"y\": 2}";
        assert_eq!(extract_json(text), Some(json!({"y": 2})));
        // A fence that does not parse is skipped.
        let text = "```json\n{\"a\": 1}\n```\n```json\n{broken\n```";
        assert_eq!(extract_json(text), Some(json!({"a": 1})));
    }

    #[test]
    fn an_object_inside_prose() {
        let text = "The triage is {\"label\": \"bug\", \"note\": \"a } inside\"} and that is all.";
        assert_eq!(
            extract_json(text),
            Some(json!({"label": "bug", "note": "a } inside"}))
        );
        // Braces that open nothing are skipped.
        assert_eq!(extract_json("{ oops { \"a\": 1 }"), Some(json!({"a": 1})));
        assert_eq!(extract_json("list: [1, 2] then"), Some(json!([1, 2])));
    }

    #[test]
    fn unclosed_fences_and_brace_floods_end() {
        // An unclosed fence still holds an object.
        assert_eq!(extract_json("```json\n{\"a\": 1}"), Some(json!({"a": 1})));
        let flood = "{".repeat(100_000);
        assert_eq!(extract_json(&flood), None);
    }
}
