//! Pythonic calls, as Llama 4 and others write them:
//! `[get_weather(city="Paris"), add(a=1, b=2)]`. A small recursive-descent
//! reader of Python literals (strings, numbers, `True`/`False`/`None`, lists,
//! dicts, tuples) with a depth limit, so hostile input cannot overflow the stack.

use serde_json::{Map, Number, Value};

use super::formats::Written;

/// How deeply literals may nest.
const MAX_DEPTH: usize = 64;

/// The calls in a Python list of calls (the brackets are optional).
pub(crate) fn parse_calls(text: &str) -> Option<Vec<Written>> {
    let mut p = Reader {
        s: text.trim().as_bytes(),
        text: text.trim(),
        i: 0,
    };
    let bracketed = p.eat(b'[');
    let mut calls = Vec::new();
    loop {
        p.ws();
        if bracketed && p.eat(b']') {
            break;
        }
        if p.done() {
            // Without `]`: the list was cut short, keep what is whole.
            break;
        }
        calls.push(p.call()?);
        p.ws();
        if !p.eat(b',') {
            if bracketed {
                p.ws();
                if !p.eat(b']') && !p.done() {
                    return None;
                }
            }
            break;
        }
    }
    p.ws();
    (p.done() && !calls.is_empty()).then_some(calls)
}

struct Reader<'a> {
    s: &'a [u8],
    text: &'a str,
    i: usize,
}

impl Reader<'_> {
    fn done(&self) -> bool {
        self.i >= self.s.len()
    }

    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    fn ws(&mut self) {
        while self.peek().is_some_and(|b| b.is_ascii_whitespace()) {
            self.i += 1;
        }
    }

    fn eat(&mut self, b: u8) -> bool {
        self.ws();
        if self.peek() == Some(b) {
            self.i += 1;
            true
        } else {
            false
        }
    }

    fn ident(&mut self) -> Option<&str> {
        self.ws();
        let start = self.i;
        while self
            .peek()
            .is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.' || b == b'-')
        {
            self.i += 1;
        }
        (self.i > start).then(|| &self.text[start..self.i])
    }

    /// `name(key=value, …)`
    fn call(&mut self) -> Option<Written> {
        let name = self.ident()?.to_string();
        if !self.eat(b'(') {
            return None;
        }
        let mut args = Map::new();
        loop {
            if self.eat(b')') {
                break;
            }
            let key = self.ident()?.to_string();
            if !self.eat(b'=') {
                return None;
            }
            let value = self.value(0)?;
            args.insert(key, value);
            if !self.eat(b',') {
                if !self.eat(b')') {
                    return None;
                }
                break;
            }
        }
        Some((name, Value::Object(args)))
    }

    fn value(&mut self, depth: usize) -> Option<Value> {
        if depth > MAX_DEPTH {
            return None;
        }
        self.ws();
        match self.peek()? {
            b'"' | b'\'' => self.string().map(Value::String),
            b'[' | b'(' => {
                let close = if self.peek() == Some(b'[') {
                    b']'
                } else {
                    b')'
                };
                self.i += 1;
                let mut items = Vec::new();
                loop {
                    if self.eat(close) {
                        break;
                    }
                    items.push(self.value(depth + 1)?);
                    if !self.eat(b',') {
                        if !self.eat(close) {
                            return None;
                        }
                        break;
                    }
                }
                Some(Value::Array(items))
            }
            b'{' => {
                self.i += 1;
                let mut map = Map::new();
                loop {
                    if self.eat(b'}') {
                        break;
                    }
                    let key = match self.value(depth + 1)? {
                        Value::String(s) => s,
                        other => other.to_string(),
                    };
                    if !self.eat(b':') {
                        return None;
                    }
                    map.insert(key, self.value(depth + 1)?);
                    if !self.eat(b',') {
                        if !self.eat(b'}') {
                            return None;
                        }
                        break;
                    }
                }
                Some(Value::Object(map))
            }
            _ => {
                let start = self.i;
                while self.peek().is_some_and(|b| {
                    b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'+' | b'_')
                }) {
                    self.i += 1;
                }
                let word = &self.text[start..self.i];
                match word {
                    "True" | "true" => Some(Value::Bool(true)),
                    "False" | "false" => Some(Value::Bool(false)),
                    "None" | "null" => Some(Value::Null),
                    _ => number(word),
                }
            }
        }
    }

    /// A quoted string with Python escapes (the common ones).
    fn string(&mut self) -> Option<String> {
        let quote = self.peek()?;
        self.i += 1;
        let mut out = String::new();
        let rest = &self.text[self.i..];
        let mut chars = rest.char_indices();
        while let Some((k, c)) = chars.next() {
            match c {
                '\\' => {
                    let (_, e) = chars.next()?;
                    match e {
                        'n' => out.push('\n'),
                        't' => out.push('\t'),
                        'r' => out.push('\r'),
                        'u' => {
                            let hex: String = chars.by_ref().take(4).map(|(_, h)| h).collect();
                            out.push(char::from_u32(u32::from_str_radix(&hex, 16).ok()?)?);
                        }
                        other => out.push(other),
                    }
                }
                c if c as u32 == u32::from(quote) => {
                    self.i += k + 1;
                    return Some(out);
                }
                c => out.push(c),
            }
        }
        None
    }
}

fn number(word: &str) -> Option<Value> {
    if let Ok(n) = word.parse::<i64>() {
        return Some(Value::Number(n.into()));
    }
    let f = word.parse::<f64>().ok()?;
    Number::from_f64(f).map(Value::Number)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_python_call_lists() {
        let calls = parse_calls(
            r#"[get_weather(city="Paris", units='metric'), add(a=1, b=-2.5), noop(), f(x=[1, (2, 3)], y={"k": None, 'b': True})]"#,
        )
        .unwrap();
        assert_eq!(
            calls[0],
            (
                "get_weather".into(),
                json!({"city": "Paris", "units": "metric"})
            )
        );
        assert_eq!(calls[1], ("add".into(), json!({"a": 1, "b": -2.5})));
        assert_eq!(calls[2], ("noop".into(), json!({})));
        assert_eq!(
            calls[3],
            (
                "f".into(),
                json!({"x": [1, [2, 3]], "y": {"k": null, "b": true}})
            )
        );
    }

    #[test]
    fn rejects_what_is_not_a_call_list() {
        for text in [
            "[1, 2]",
            "[]",
            "[f(x=)]",
            "[f(x=1)] x",
            "hello",
            "[f(\"a\")]",
        ] {
            assert_eq!(parse_calls(text), None, "{text}");
        }
        let deep = format!("[f(x={}1{})]", "[".repeat(1000), "]".repeat(1000));
        assert_eq!(parse_calls(&deep), None);
    }
}
