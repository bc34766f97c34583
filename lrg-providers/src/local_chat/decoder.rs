//! [`AnswerDecoder`]: streams `analysis` and `reply` out of a JSON answer while
//! it is still being generated.
//!
//! The engine produces the answer a few characters at a time. Waiting for the
//! whole object before showing anything would hide the model's reasoning and
//! reply until the very end, and re-parsing the growing prefix at every token
//! would cost O(n²). Instead this is a small JSON lexer, fed one chunk at a time,
//! that tracks just enough structure (nesting depth, the current top-level key,
//! string escapes) to decode the two top-level strings as they arrive, and to
//! pass a call's tool name and argument text on as they are written. Everything
//! it is fed is also kept verbatim for the final, strict parse.

use crate::TurnEvent;

/// Which top-level string is being read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    /// A key of the top-level object.
    Key,
    /// The `analysis` value: streamed as reasoning.
    Analysis,
    /// The `reply` value: streamed as text.
    Reply,
    /// The one key of the `call` object: the tool's name.
    ToolName,
    /// Any other string (tool arguments, unknown keys): not streamed.
    Skip,
}

/// Where the lexer is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lex {
    /// Between tokens, outside any string.
    Structure,
    /// Inside a string.
    Str,
    /// Just after a backslash inside a string.
    Escape,
    /// Inside a `\uXXXX` escape, with the digits read so far.
    Unicode { value: u32, digits: u8 },
}

/// How far the answer's `call` has been read.
#[derive(Debug, Clone, PartialEq, Eq)]
enum CallPart {
    /// No tool name yet.
    Waiting,
    /// Reading the tool's name (decoded into `tool`).
    Name,
    /// The name is read; its arguments have not begun.
    Named,
    /// Inside the arguments: every character is passed on verbatim.
    Arguments,
    /// The arguments are complete.
    Done,
}

/// How far a typed answer's `reply` value has been read (see
/// [`AnswerDecoder::typed`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TypedReply {
    /// Not a typed answer: `reply` is a string, decoded.
    Off,
    /// Its `reply` key has not been read yet.
    Waiting,
    /// Past `"reply":`, before its value.
    Ready,
    /// Inside the value, which began with this kind of token.
    In(ValueKind),
    /// The value is complete.
    Done,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ValueKind {
    /// An object or array: it ends when its bracket closes.
    Container,
    /// A string: it ends at its closing quote.
    Str,
    /// A number or literal: it ends at the next delimiter.
    Scalar,
}

/// Longest top-level key worth remembering; the answer schema's keys are short,
/// and a runaway key must not grow memory.
const MAX_KEY_CHARS: usize = 32;

/// Incremental decoder of a constrained answer
/// (`{"analysis": …, "call": …}` or `{"analysis": …, "reply": …}`).
///
/// Feed it the engine's deltas in order with [`feed`](Self::feed); it returns
/// [`TurnEvent::ReasoningDelta`]s for the `analysis` string and
/// [`TurnEvent::TextDelta`]s for the `reply` string, decoded (escapes resolved,
/// surrogate pairs joined even when split across chunks), and for a `call`
/// [`TurnEvent::ToolCallDelta`]s with index 0: the first, once the arguments
/// begin, names the tool (and carries the id set with
/// [`with_call_id`](Self::with_call_id)); their fragments are the arguments'
/// JSON text verbatim. Whitespace between
/// tokens is tolerated, so engines with flexible whitespace work too. Each fed
/// character is looked at once: the total cost is linear in the answer length.
#[derive(Debug, Clone)]
pub struct AnswerDecoder {
    raw: String,
    depth: u32,
    expect_key: bool,
    key: String,
    lex: Lex,
    field: Field,
    high_surrogate: Option<u32>,
    call: CallPart,
    tool: String,
    call_id: Option<String>,
    typed: TypedReply,
}

impl Default for AnswerDecoder {
    fn default() -> Self {
        Self::new()
    }
}

impl AnswerDecoder {
    /// A decoder at the start of an answer.
    pub fn new() -> Self {
        Self {
            raw: String::new(),
            depth: 0,
            expect_key: false,
            key: String::new(),
            lex: Lex::Structure,
            field: Field::Skip,
            high_surrogate: None,
            call: CallPart::Waiting,
            tool: String::new(),
            call_id: None,
            typed: TypedReply::Off,
        }
    }

    /// A decoder for a typed answer, whose `reply` is a JSON value of any
    /// type: its text is passed on verbatim as [`TurnEvent::TextDelta`]s
    /// (the JSON as written, which is what the answer's text then is).
    pub fn typed(mut self) -> Self {
        self.typed = TypedReply::Waiting;
        self
    }

    /// The id the first [`TurnEvent::ToolCallDelta`] announces a call with
    /// (the id its `ToolCall` will get); without one it carries `None`.
    pub fn with_call_id(mut self, id: impl Into<String>) -> Self {
        self.call_id = Some(id.into());
        self
    }

    /// Everything fed so far, verbatim.
    pub fn raw(&self) -> &str {
        &self.raw
    }

    /// Consume the decoder, returning everything fed to it.
    pub fn into_raw(self) -> String {
        self.raw
    }

    /// Feed the next chunk of the answer; returns the deltas it completes, in
    /// order (at most one per field change, so usually zero or one).
    pub fn feed(&mut self, chunk: &str) -> Vec<TurnEvent> {
        let mut out = Vec::new();
        self.raw.push_str(chunk);
        for c in chunk.chars() {
            self.step(c, &mut out);
        }
        out
    }

    fn step(&mut self, c: char, out: &mut Vec<TurnEvent>) {
        if self.call == CallPart::Arguments {
            push_fragment(c, out);
        }
        if self.typed != TypedReply::Off {
            self.typed_step(c, out);
        }
        match self.lex {
            Lex::Structure => {
                self.structure(c);
                self.call_structure(c, out);
            }
            Lex::Str => self.in_string(c, out),
            Lex::Escape => self.escape(c, out),
            Lex::Unicode { value, digits } => match c.to_digit(16) {
                Some(d) => {
                    let value = value * 16 + d;
                    if digits == 3 {
                        self.lex = Lex::Str;
                        self.code_unit(value, out);
                    } else {
                        self.lex = Lex::Unicode {
                            value,
                            digits: digits + 1,
                        };
                    }
                }
                None => {
                    // Malformed escape: the final parse rejects it; show a
                    // replacement and read the character as ordinary content.
                    self.lex = Lex::Str;
                    self.emit('\u{FFFD}', out);
                    self.in_string(c, out);
                }
            },
        }
    }

    /// Pass a typed reply's characters on verbatim. Runs before the lexer
    /// takes `c`, so the state it reads is the one `c` arrives in.
    fn typed_step(&mut self, c: char, out: &mut Vec<TurnEvent>) {
        match self.typed {
            TypedReply::Ready if !c.is_whitespace() => {
                let kind = match c {
                    '{' | '[' => ValueKind::Container,
                    '"' => ValueKind::Str,
                    _ => ValueKind::Scalar,
                };
                self.typed = TypedReply::In(kind);
                push_text(c, out);
            }
            TypedReply::In(ValueKind::Container) => {
                push_text(c, out);
                // The closing bracket brings the depth back to the answer's own.
                if self.lex == Lex::Structure && matches!(c, '}' | ']') && self.depth == 2 {
                    self.typed = TypedReply::Done;
                }
            }
            TypedReply::In(ValueKind::Str) => {
                push_text(c, out);
                if self.lex == Lex::Str && c == '"' {
                    self.typed = TypedReply::Done;
                }
            }
            TypedReply::In(ValueKind::Scalar) => {
                if c.is_whitespace() || matches!(c, ',' | '}' | ']') {
                    self.typed = TypedReply::Done;
                } else {
                    push_text(c, out);
                }
            }
            _ => {}
        }
    }

    fn structure(&mut self, c: char) {
        match c {
            '{' | '[' => {
                self.depth += 1;
                if self.depth == 1 {
                    self.expect_key = c == '{';
                }
            }
            '}' | ']' => self.depth = self.depth.saturating_sub(1),
            ',' if self.depth == 1 => self.expect_key = true,
            ':' if self.depth == 1 => {
                self.expect_key = false;
                if self.typed == TypedReply::Waiting && self.key == "reply" {
                    self.typed = TypedReply::Ready;
                }
            }
            '"' => {
                self.lex = Lex::Str;
                self.field =
                    if self.depth == 2 && self.key == "call" && self.call == CallPart::Waiting {
                        self.call = CallPart::Name;
                        Field::ToolName
                    } else if self.depth != 1 {
                        Field::Skip
                    } else if self.expect_key {
                        self.key.clear();
                        Field::Key
                    } else {
                        match self.key.as_str() {
                            "analysis" => Field::Analysis,
                            // A typed reply is passed on verbatim instead.
                            "reply" if self.typed == TypedReply::Off => Field::Reply,
                            _ => Field::Skip,
                        }
                    };
            }
            // Whitespace, numbers, literals: nothing to track.
            _ => {}
        }
    }

    /// Follow the `call` object: its arguments begin with the container that
    /// opens depth 3 after the tool's name and end when depth is back at 2.
    fn call_structure(&mut self, c: char, out: &mut Vec<TurnEvent>) {
        match (&self.call, c) {
            (CallPart::Named, '{' | '[') if self.depth == 3 => {
                self.call = CallPart::Arguments;
                out.push(TurnEvent::ToolCallDelta {
                    index: 0,
                    id: self.call_id.take(),
                    name: Some(std::mem::take(&mut self.tool)),
                    arguments_fragment: c.to_string(),
                });
            }
            (CallPart::Arguments, '}' | ']') if self.depth == 2 => self.call = CallPart::Done,
            _ => {}
        }
    }

    fn in_string(&mut self, c: char, out: &mut Vec<TurnEvent>) {
        match c {
            '"' => {
                self.flush_surrogate(out);
                self.lex = Lex::Structure;
                if self.field == Field::ToolName {
                    self.call = CallPart::Named;
                }
            }
            '\\' => self.lex = Lex::Escape,
            _ => {
                self.flush_surrogate(out);
                self.emit(c, out);
            }
        }
    }

    fn escape(&mut self, c: char, out: &mut Vec<TurnEvent>) {
        self.lex = Lex::Str;
        let decoded = match c {
            'u' => {
                // A pending high surrogate stays pending: this may be its pair.
                self.lex = Lex::Unicode {
                    value: 0,
                    digits: 0,
                };
                return;
            }
            'n' => '\n',
            't' => '\t',
            'r' => '\r',
            'b' => '\u{8}',
            'f' => '\u{c}',
            // `"`, `\`, `/` stand for themselves; anything else is invalid JSON
            // that the final parse rejects, shown as written meanwhile.
            other => other,
        };
        self.flush_surrogate(out);
        self.emit(decoded, out);
    }

    /// One UTF-16 code unit from a `\uXXXX` escape.
    fn code_unit(&mut self, unit: u32, out: &mut Vec<TurnEvent>) {
        let is_high = (0xD800..0xDC00).contains(&unit);
        let is_low = (0xDC00..0xE000).contains(&unit);
        if is_low && let Some(high) = self.high_surrogate.take() {
            let scalar = 0x10000 + ((high - 0xD800) << 10) + (unit - 0xDC00);
            self.emit(char::from_u32(scalar).unwrap_or('\u{FFFD}'), out);
            return;
        }
        self.flush_surrogate(out);
        if is_high {
            self.high_surrogate = Some(unit);
        } else {
            // A lone low surrogate is not a character.
            self.emit(char::from_u32(unit).unwrap_or('\u{FFFD}'), out);
        }
    }

    /// A high surrogate not followed by its low half becomes U+FFFD.
    fn flush_surrogate(&mut self, out: &mut Vec<TurnEvent>) {
        if self.high_surrogate.take().is_some() {
            self.emit('\u{FFFD}', out);
        }
    }

    fn emit(&mut self, c: char, out: &mut Vec<TurnEvent>) {
        match self.field {
            Field::Key => {
                if self.key.chars().count() < MAX_KEY_CHARS {
                    self.key.push(c);
                }
            }
            Field::Analysis => match out.last_mut() {
                Some(TurnEvent::ReasoningDelta { text }) => text.push(c),
                _ => out.push(TurnEvent::ReasoningDelta {
                    text: c.to_string(),
                }),
            },
            Field::Reply => push_text(c, out),
            Field::ToolName => self.tool.push(c),
            Field::Skip => {}
        }
    }
}

/// One more character of the answer's text, joined to the text delta this feed
/// already holds.
fn push_text(c: char, out: &mut Vec<TurnEvent>) {
    match out.last_mut() {
        Some(TurnEvent::TextDelta { text }) => text.push(c),
        _ => out.push(TurnEvent::TextDelta {
            text: c.to_string(),
        }),
    }
}

/// One more character of the call's arguments, joined to the delta this feed
/// already holds.
fn push_fragment(c: char, out: &mut Vec<TurnEvent>) {
    match out.last_mut() {
        Some(TurnEvent::ToolCallDelta {
            arguments_fragment, ..
        }) => arguments_fragment.push(c),
        _ => out.push(TurnEvent::ToolCallDelta {
            index: 0,
            id: None,
            name: None,
            arguments_fragment: c.to_string(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reasoning, text, and the call's name and joined arguments.
    fn decode_calls(chunks: &[&str]) -> (String, String, Option<(String, String)>) {
        let mut d = AnswerDecoder::new().with_call_id("call_9");
        let (mut reasoning, mut text) = (String::new(), String::new());
        let mut call: Option<(String, String)> = None;
        for chunk in chunks {
            for event in d.feed(chunk) {
                match event {
                    TurnEvent::ReasoningDelta { text: t } => reasoning.push_str(&t),
                    TurnEvent::TextDelta { text: t } => text.push_str(&t),
                    TurnEvent::ToolCallDelta {
                        index: 0,
                        id,
                        name,
                        arguments_fragment,
                    } => match (&mut call, name) {
                        (None, Some(name)) => {
                            assert_eq!(id.as_deref(), Some("call_9"));
                            call = Some((name, arguments_fragment));
                        }
                        (Some((_, args)), None) => {
                            assert_eq!(id, None);
                            args.push_str(&arguments_fragment);
                        }
                        (_, name) => panic!("name {name:?} on the wrong delta"),
                    },
                    other => panic!("unexpected event {other:?}"),
                }
            }
        }
        (reasoning, text, call)
    }

    fn decode_in(chunks: &[&str]) -> (String, String) {
        let (reasoning, text, _) = decode_calls(chunks);
        (reasoning, text)
    }

    #[test]
    fn call_name_and_arguments_stream_verbatim() {
        let answer =
            r#"{"analysis": "go", "call": {"move_\u0069tems": {"ids": [1, 2], "to": "a}\"b"}}}"#;
        let args = r#"{"ids": [1, 2], "to": "a}\"b"}"#;
        let chars: Vec<String> = answer.chars().map(String::from).collect();
        let charwise: Vec<&str> = chars.iter().map(String::as_str).collect();
        for chunks in [vec![answer], charwise] {
            let (r, t, call) = decode_calls(&chunks);
            assert_eq!((r.as_str(), t.as_str()), ("go", ""));
            let (name, joined) = call.expect("a call was streamed");
            assert_eq!(name, "move_items");
            assert_eq!(joined, args);
        }
    }

    #[test]
    fn surrogate_pair_split_inside_escape() {
        let (r, _) = decode_in(&[r#"{"analysis":"a\uD8"#, r#"3D\u"#, r#"DE0"#, r#"0b"}"#]);
        assert_eq!(r, "a😀b");
    }

    #[test]
    fn lone_surrogates_become_replacement() {
        let (r, _) = decode_in(&[r#"{"analysis":"\uD83Dx\uDE00\uD83D"}"#]);
        assert_eq!(r, "\u{FFFD}x\u{FFFD}\u{FFFD}");
    }

    #[test]
    fn nested_strings_and_keys_do_not_leak() {
        let (r, t) = decode_in(&[
            r#"{"analysis":"x","call":{"t":{"reply":"no","analysis":"no","a":["}\"",{"reply":"q"}]}}}"#,
        ]);
        assert_eq!((r.as_str(), t.as_str()), ("x", ""));
    }

    #[test]
    fn whitespace_between_tokens_is_tolerated() {
        let (r, t) = decode_in(&["{ \"analysis\" :\n \"a\" ,\n \"reply\" : \"b\\tc\" }"]);
        assert_eq!((r.as_str(), t.as_str()), ("a", "b\tc"));
    }

    #[test]
    fn long_keys_are_capped() {
        let key = "k".repeat(1000);
        let mut d = AnswerDecoder::new();
        d.feed(&format!("{{\"{key}\":1,"));
        assert_eq!(d.key.chars().count(), MAX_KEY_CHARS);
    }

    /// Reasoning and text of a typed answer fed in `chunks`.
    fn decode_typed(chunks: &[&str]) -> (String, String) {
        let mut d = AnswerDecoder::new().typed();
        let (mut reasoning, mut text) = (String::new(), String::new());
        for chunk in chunks {
            for event in d.feed(chunk) {
                match event {
                    TurnEvent::ReasoningDelta { text: t } => reasoning.push_str(&t),
                    TurnEvent::TextDelta { text: t } => text.push_str(&t),
                    other => panic!("unexpected event {other:?}"),
                }
            }
        }
        (reasoning, text)
    }

    #[test]
    fn a_typed_reply_is_passed_on_verbatim_whatever_its_type() {
        for (answer, reply) in [
            (
                r#"{"analysis": "a \"b\"", "reply": {"label": "bug}", "tags": ["x", {"y": [1]}]}}"#,
                r#"{"label": "bug}", "tags": ["x", {"y": [1]}]}"#,
            ),
            (r#"{"analysis":"","reply":[1, 2]}"#, "[1, 2]"),
            (
                r#"{"analysis":"","reply": "say \"hi\"" }"#,
                r#""say \"hi\"""#,
            ),
            (r#"{"analysis":"","reply":-12.5e3}"#, "-12.5e3"),
            (r#"{"analysis":"","reply": true }"#, "true"),
            (r#"{"analysis":"","reply":""}"#, r#""""#),
        ] {
            let whole = decode_typed(&[answer]);
            assert_eq!(whole.1, reply, "{answer}");
            // The same when fed one character at a time.
            let chars: Vec<String> = answer.chars().map(String::from).collect();
            let refs: Vec<&str> = chars.iter().map(String::as_str).collect();
            assert_eq!(decode_typed(&refs), whole, "{answer}");
            assert!(serde_json::from_str::<serde_json::Value>(&whole.1).is_ok());
        }
        assert_eq!(
            decode_typed(&[r#"{"analysis": "a \"b\"", "reply": {}}"#]).0,
            r#"a "b""#
        );
    }

    #[test]
    fn a_typed_decoder_still_streams_calls() {
        let mut d = AnswerDecoder::new().typed().with_call_id("call_1");
        let events = d.feed(r#"{"analysis":"x","call":{"ls":{"path":"."}}}"#);
        assert!(events.iter().any(|e| matches!(
            e,
            TurnEvent::ToolCallDelta { name: Some(n), .. } if n == "ls"
        )));
        assert!(
            !events
                .iter()
                .any(|e| matches!(e, TurnEvent::TextDelta { .. }))
        );
    }
}
