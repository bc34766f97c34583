//! The final, strict parse of a complete constrained answer.

use serde_json::{Map, Value};

/// A complete answer of a local model, parsed.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// `{"analysis": …, "reply": …}`: the model answers the user.
    Reply {
        /// The model's reasoning.
        analysis: String,
        /// The answer text.
        reply: String,
    },
    /// `{"analysis": …, "reply": <JSON>}`: a typed answer (the request had an
    /// [`OutputSchema`](crate::typed::OutputSchema)); `reply` is the value
    /// the grammar let through, of any JSON type.
    Typed {
        /// The model's reasoning.
        analysis: String,
        /// The answer.
        reply: Value,
    },
    /// `{"analysis": …, "call": {"<tool>": {…}}}`: the model calls one tool.
    Call {
        /// The model's reasoning.
        analysis: String,
        /// The tool's name.
        name: String,
        /// Its arguments.
        arguments: Value,
    },
}

/// Parse a complete answer. The error says what is wrong, without quoting the
/// answer (the caller adds its tail where useful).
pub fn parse_answer(text: &str) -> Result<Answer, String> {
    parse(text, false)
}

/// [`parse_answer`] for a typed answer: `reply` may be any JSON value
/// ([`Answer::Typed`]).
pub fn parse_typed_answer(text: &str) -> Result<Answer, String> {
    parse(text, true)
}

fn parse(text: &str, typed: bool) -> Result<Answer, String> {
    let value: Value =
        serde_json::from_str(text).map_err(|e| format!("the answer is not valid JSON ({e})"))?;
    let Value::Object(mut object) = value else {
        return Err("the answer is not a JSON object".into());
    };
    if let Some(key) = object
        .keys()
        .find(|k| !matches!(k.as_str(), "analysis" | "call" | "reply"))
    {
        return Err(format!("the answer has an unexpected key `{key}`"));
    }
    let analysis = match object.remove("analysis") {
        Some(Value::String(s)) => s,
        Some(_) => return Err("`analysis` is not a string".into()),
        None => return Err("the answer has no `analysis`".into()),
    };
    match (object.remove("call"), object.remove("reply")) {
        (Some(_), Some(_)) => Err("the answer has both `call` and `reply`".into()),
        (None, None) => Err("the answer has neither `call` nor `reply`".into()),
        (None, Some(reply)) if typed => Ok(Answer::Typed { analysis, reply }),
        (None, Some(Value::String(reply))) => Ok(Answer::Reply { analysis, reply }),
        (None, Some(_)) => Err("`reply` is not a string".into()),
        (Some(Value::Object(call)), None) => parse_call(analysis, call),
        (Some(_), None) => Err("`call` is not an object".into()),
    }
}

fn parse_call(analysis: String, call: Map<String, Value>) -> Result<Answer, String> {
    if call.len() != 1 {
        return Err(format!(
            "`call` must name exactly one tool, it has {} keys",
            call.len()
        ));
    }
    let Some((name, arguments)) = call.into_iter().next() else {
        return Err("`call` names no tool".into());
    };
    if !arguments.is_object() {
        return Err(format!("the arguments of `{name}` are not a JSON object"));
    }
    Ok(Answer::Call {
        analysis,
        name,
        arguments,
    })
}

/// The last `max_chars` characters of `text`, marked when cut, for error
/// messages about a malformed answer.
pub(crate) fn tail(text: &str, max_chars: usize) -> String {
    let count = text.chars().count();
    if count <= max_chars {
        return text.to_string();
    }
    let start = text
        .char_indices()
        .nth(count - max_chars)
        .map_or(0, |(i, _)| i);
    format!("…{}", &text[start..])
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parses_both_forms() {
        assert_eq!(
            parse_answer(r#"{"analysis":"a","reply":"b"}"#),
            Ok(Answer::Reply {
                analysis: "a".into(),
                reply: "b".into()
            })
        );
        assert_eq!(
            parse_answer(r#"{"analysis":"a","call":{"ls":{"path":"."}}}"#),
            Ok(Answer::Call {
                analysis: "a".into(),
                name: "ls".into(),
                arguments: json!({"path": "."})
            })
        );
    }

    #[test]
    fn rejects_malformed_answers() {
        for (text, needle) in [
            (r#"{"analysis":"a","reply":"b""#, "not valid JSON"),
            (r#"["a"]"#, "not a JSON object"),
            (
                r#"{"analysis":"a","reply":"b","x":1}"#,
                "unexpected key `x`",
            ),
            (r#"{"reply":"b"}"#, "no `analysis`"),
            (
                r#"{"analysis":1,"reply":"b"}"#,
                "`analysis` is not a string",
            ),
            (r#"{"analysis":"a"}"#, "neither"),
            (r#"{"analysis":"a","reply":"b","call":{"t":{}}}"#, "both"),
            (r#"{"analysis":"a","reply":2}"#, "`reply` is not a string"),
            (r#"{"analysis":"a","call":"t"}"#, "`call` is not an object"),
            (r#"{"analysis":"a","call":{}}"#, "exactly one tool"),
            (
                r#"{"analysis":"a","call":{"a":{},"b":{}}}"#,
                "exactly one tool",
            ),
            (r#"{"analysis":"a","call":{"a":3}}"#, "arguments of `a`"),
        ] {
            let err = parse_answer(text).expect_err(text);
            assert!(err.contains(needle), "{text}: {err}");
        }
    }

    #[test]
    fn tail_keeps_char_boundaries() {
        assert_eq!(tail("héllo", 10), "héllo");
        assert_eq!(tail("héllo wörld", 4), "…örld");
    }
}
