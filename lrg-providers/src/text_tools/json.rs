//! Lenient JSON: what models write when they mean JSON. Strict parsing is
//! tried first; only when it fails is the text rewritten once, left to right,
//! into strict JSON (trailing commas dropped, single quotes and unquoted keys
//! quoted, Python literals mapped, an unterminated string or bracket closed at
//! the end), and parsed again. Every repair is logged at debug level.

use serde_json::Value;

/// Parse `text` as JSON, repairing the usual model mistakes. `None` when even
/// the repaired text is not JSON. Never panics: serde_json bounds the nesting.
pub(crate) fn parse_lenient(text: &str) -> Option<Value> {
    let text = text.trim();
    if text.is_empty() {
        return None;
    }
    if let Ok(value) = serde_json::from_str(text) {
        return Some(value);
    }
    let (fixed, repairs) = repair(text);
    match serde_json::from_str(&fixed) {
        Ok(value) => {
            tracing::debug!(repairs = ?repairs, "repaired a tool call's JSON");
            Some(value)
        }
        Err(_) => None,
    }
}

/// One kind of repair, for the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Repair {
    TrailingComma,
    SingleQuotes,
    UnquotedKey,
    PythonLiteral,
    UnterminatedString,
    UnclosedBracket,
}

/// Rewrite lenient JSON into strict JSON, in one pass.
pub(crate) fn repair(text: &str) -> (String, Vec<Repair>) {
    let mut out = String::with_capacity(text.len() + 8);
    let mut repairs: Vec<Repair> = Vec::new();
    let note = |r: Repair, repairs: &mut Vec<Repair>| {
        if !repairs.contains(&r) {
            repairs.push(r);
        }
    };
    // Open brackets, so an unclosed one can be closed at the end.
    let mut stack: Vec<u8> = Vec::new();
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' | '\'' => {
                if c == '\'' {
                    note(Repair::SingleQuotes, &mut repairs);
                }
                out.push('"');
                let mut closed = false;
                while let Some((_, s)) = chars.next() {
                    match s {
                        '\\' => match chars.next() {
                            // `\'` is not a JSON escape.
                            Some((_, '\'')) => out.push('\''),
                            Some((_, e)) => {
                                out.push('\\');
                                out.push(e);
                            }
                            None => out.push_str("\\\\"),
                        },
                        _ if s == c => {
                            closed = true;
                            break;
                        }
                        '"' => out.push_str("\\\""),
                        '\n' => out.push_str("\\n"),
                        '\r' => out.push_str("\\r"),
                        '\t' => out.push_str("\\t"),
                        s if (s as u32) < 0x20 => {
                            out.push_str(&format!("\\u{:04x}", s as u32));
                        }
                        s => out.push(s),
                    }
                }
                if !closed {
                    note(Repair::UnterminatedString, &mut repairs);
                }
                out.push('"');
            }
            '{' | '[' => {
                stack.push(c as u8);
                out.push(c);
            }
            '}' | ']' => {
                strip_trailing_comma(&mut out, &mut repairs);
                stack.pop();
                out.push(c);
            }
            c if c.is_alphabetic() || c == '_' || c == '$' => {
                // A bare word: a literal, or an unquoted key.
                let mut end = i + c.len_utf8();
                while let Some(&(j, n)) = chars.peek() {
                    if n.is_alphanumeric() || n == '_' || n == '$' || n == '-' {
                        end = j + n.len_utf8();
                        chars.next();
                    } else {
                        break;
                    }
                }
                let word = &text[i..end];
                let is_key = text[end..].trim_start().starts_with(':');
                match word {
                    _ if is_key => {
                        note(Repair::UnquotedKey, &mut repairs);
                        out.push('"');
                        out.push_str(word);
                        out.push('"');
                    }
                    "true" | "false" | "null" => out.push_str(word),
                    "True" => literal(&mut out, "true", &mut repairs),
                    "False" => literal(&mut out, "false", &mut repairs),
                    "None" => literal(&mut out, "null", &mut repairs),
                    _ => out.push_str(word),
                }
            }
            c => out.push(c),
        }
    }
    if !stack.is_empty() {
        note(Repair::UnclosedBracket, &mut repairs);
        // A dangling `,` or `:` at the cut cannot be closed over.
        loop {
            let trimmed = out.trim_end();
            if let Some(t) = trimmed.strip_suffix(',') {
                out.truncate(t.len());
            } else if trimmed.ends_with(':') {
                out.truncate(trimmed.len());
                out.push_str("null");
            } else {
                break;
            }
        }
        while let Some(open) = stack.pop() {
            out.push(if open == b'{' { '}' } else { ']' });
        }
    }
    (out, repairs)
}

fn literal(out: &mut String, json: &str, repairs: &mut Vec<Repair>) {
    if !repairs.contains(&Repair::PythonLiteral) {
        repairs.push(Repair::PythonLiteral);
    }
    out.push_str(json);
}

/// Drop a `,` just before a closing bracket (ignoring whitespace).
fn strip_trailing_comma(out: &mut String, repairs: &mut Vec<Repair>) {
    let trimmed = out.trim_end();
    if let Some(t) = trimmed.strip_suffix(',') {
        out.truncate(t.len());
        if !repairs.contains(&Repair::TrailingComma) {
            repairs.push(Repair::TrailingComma);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn strict_json_is_taken_as_is() {
        assert_eq!(
            parse_lenient(r#"{"a": [1, 2]}"#),
            Some(json!({"a": [1, 2]}))
        );
    }

    #[test]
    fn the_usual_mistakes_are_repaired() {
        let cases = [
            (r#"{"a": 1,}"#, json!({"a": 1})),
            (r#"[1, 2, ]"#, json!([1, 2])),
            (r#"{'a': 'it\'s "x"'}"#, json!({"a": "it's \"x\""})),
            (
                r#"{city: "Paris", days: 3}"#,
                json!({"city": "Paris", "days": 3}),
            ),
            (
                r#"{"a": True, "b": None, "c": False}"#,
                json!({"a": true, "b": null, "c": false}),
            ),
            (r#"{"a": "unterminated"#, json!({"a": "unterminated"})),
            (r#"{"a": {"b": [1, 2"#, json!({"a": {"b": [1, 2]}})),
            (r#"{"a": 1,"#, json!({"a": 1})),
            (r#"{"a":"#, json!({"a": null})),
            ("{\"a\": \"line\nbreak\"}", json!({"a": "line\nbreak"})),
        ];
        for (text, want) in cases {
            assert_eq!(parse_lenient(text), Some(want), "{text}");
        }
    }

    #[test]
    fn garbage_is_none_and_deep_nesting_does_not_overflow() {
        assert_eq!(parse_lenient("not json at all ("), None);
        assert_eq!(parse_lenient(""), None);
        let deep = "[".repeat(100_000);
        assert_eq!(parse_lenient(&deep), None);
    }
}
