//! The streaming engine every format shares: text deltas in, text, reasoning
//! and whole calls out. A format is a table of [`Rule`]s (markers and what
//! they open); this file only knows how to find markers without re-scanning.
//!
//! Each byte is looked at a bounded number of times: text is scanned once for
//! the first byte of any marker, and only a possible marker prefix at the end
//! of a delta (shorter than the longest marker) is held back for the next one.
//! A call body is appended once and parsed once, when its end is found.

/// What a marker opens.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Open {
    /// Reasoning, streamed until `close`.
    Reasoning { close: &'static [&'static str] },
    /// Nothing: the marker (a stray end-of-turn token) is dropped.
    Drop,
    /// A call body, read until `end`, then parsed as `body`.
    Call {
        end: End,
        body: Body,
        fallback: Fallback,
    },
    /// A Harmony message header, read until `<|message|>`.
    HarmonyHeader,
}

/// Where a call body ends.
#[derive(Debug, Clone, Copy)]
pub(crate) enum End {
    /// At the first of these markers (or the end of the stream).
    Marker(&'static [&'static str]),
    /// When the first JSON/Python value closes: the first `{`, or a `[` or
    /// `(` when it is the first thing after the marker.
    Balanced,
}

/// How a call body is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Body {
    /// `{"name":…,"arguments":…}`, or a list of them.
    Json,
    /// Llama 3.x: JSON calls joined by `;` (`{…}; {…}`), each read as [`Body::Json`].
    JsonList,
    /// Qwen3-Coder's `<function=NAME><parameter=P>…</parameter></function>`.
    Qwen3Xml,
    /// Mistral: a JSON list, or `NAME[ARGS]{…}`.
    Mistral,
    /// DeepSeek's `<｜tool▁call▁begin｜>…<｜tool▁sep｜>…` entries.
    DeepSeek,
    /// `[f(a=1), g(b="x")]`.
    Pythonic,
    /// Llama 3.1's `<function=NAME>{…}</function>` (what follows `<function=`).
    LlamaFunction,
    /// Gemma's `tool_code` block: Python calls, one a line.
    ToolCode,
    /// The arguments of a Harmony call whose name was in the header.
    HarmonyArgs,
}

/// What a body that is not a call becomes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fallback {
    /// A parse failure (the model meant a call: the marker says so).
    Failure,
    /// Text, unless it has the shape of a call (then a call, or a failure
    /// for an unknown name): bare JSON or a list at the start of an answer.
    TextUnlessCall,
    /// Text, unless it is a call to an offered tool (Markdown code blocks).
    TextUnlessKnown,
}

/// A marker and what it opens.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Rule {
    pub open: &'static str,
    pub then: Open,
    /// Only at the start of the answer (nothing but whitespace before).
    pub start_only: bool,
    /// The marker is the body's first character(s) (`{`, `[`, `<function=`).
    pub keep_open: bool,
}

impl Rule {
    pub(crate) const fn new(open: &'static str, then: Open) -> Self {
        Self {
            open,
            then,
            start_only: false,
            keep_open: false,
        }
    }

    pub(crate) const fn at_start(open: &'static str, then: Open) -> Self {
        Self {
            open,
            then,
            start_only: true,
            keep_open: true,
        }
    }

    pub(crate) const fn kept(open: &'static str, then: Open) -> Self {
        Self {
            open,
            then,
            start_only: false,
            keep_open: true,
        }
    }
}

/// A set of markers with their first bytes, for a fast skip.
#[derive(Debug, Clone)]
pub(crate) struct Markers {
    list: Vec<&'static str>,
    /// Bit set of the markers' first bytes.
    first: [u64; 4],
    skip: Skip,
}

/// How text that holds no marker is skipped: every format's markers start
/// with one to three distinct bytes (`<`, `[`, `{`, `` ` ``), which `memchr`
/// finds a word at a time.
#[derive(Debug, Clone, Copy)]
enum Skip {
    None,
    One(u8),
    Two(u8, u8),
    Three(u8, u8, u8),
    Table,
}

impl Markers {
    pub(crate) fn new(list: impl IntoIterator<Item = &'static str>) -> Self {
        let list: Vec<&'static str> = list.into_iter().filter(|m| !m.is_empty()).collect();
        let mut first = [0u64; 4];
        let mut distinct: Vec<u8> = Vec::new();
        for m in &list {
            let b = m.as_bytes()[0];
            first[usize::from(b >> 6)] |= 1 << (b & 63);
            if !distinct.contains(&b) {
                distinct.push(b);
            }
        }
        let skip = match distinct[..] {
            [] => Skip::None,
            [a] => Skip::One(a),
            [a, b] => Skip::Two(a, b),
            [a, b, c] => Skip::Three(a, b, c),
            _ => Skip::Table,
        };
        Self { list, first, skip }
    }

    #[inline]
    fn starts(&self, b: u8) -> bool {
        self.first[usize::from(b >> 6)] & (1 << (b & 63)) != 0
    }

    /// Whether a marker may start in `hay`: the parser's per-delta check,
    /// inlined into it, as a token-sized delta is a few table lookups.
    #[inline]
    pub(crate) fn may_start(&self, hay: &[u8]) -> bool {
        match hay {
            [b] => self.starts(*b),
            _ => self.next_start(hay).is_some(),
        }
    }

    /// Where the first byte that may start a marker is in `hay`.
    pub(crate) fn next_start(&self, hay: &[u8]) -> Option<usize> {
        if hay.len() < 16 {
            // A token-sized delta: the table beats `memchr`'s setup.
            return hay.iter().position(|&b| self.starts(b));
        }
        match self.skip {
            Skip::None => None,
            Skip::One(a) => memchr::memchr(a, hay),
            Skip::Two(a, b) => memchr::memchr2(a, b, hay),
            Skip::Three(a, b, c) => memchr::memchr3(a, b, c, hay),
            Skip::Table => hay.iter().position(|&b| self.starts(b)),
        }
    }

    pub(crate) fn get(&self, idx: usize) -> &'static str {
        self.list.get(idx).copied().unwrap_or("")
    }
}

/// Where the first marker in a text is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Hit {
    /// Marker `idx` starts at `pos`.
    Full { pos: usize, idx: usize },
    /// The text from `pos` on may be the start of a marker: hold it.
    Partial { pos: usize },
    /// No marker can start in this text.
    None,
}

/// The first marker of `set` (those `allow` lets through) in `s`.
pub(crate) fn find(s: &str, set: &Markers, allow: impl Fn(usize) -> bool) -> Hit {
    let bytes = s.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match set.next_start(&bytes[i..]) {
            None => return Hit::None,
            Some(k) => i += k,
        }
        let rest = &bytes[i..];
        let mut partial = false;
        for (idx, m) in set.list.iter().enumerate() {
            if !allow(idx) {
                continue;
            }
            let m = m.as_bytes();
            if rest.starts_with(m) {
                return Hit::Full { pos: i, idx };
            }
            if rest.len() < m.len() && m.starts_with(rest) {
                partial = true;
            }
        }
        // Markers start with ASCII, so `i` is a character boundary.
        if partial {
            return Hit::Partial { pos: i };
        }
        i += 1;
    }
    Hit::None
}

/// Tracks brackets and strings to find where a JSON or Python value ends.
#[derive(Debug, Clone, Default)]
pub(crate) struct Balance {
    depth: u64,
    quote: Option<char>,
    escape: bool,
    started: bool,
    seen_text: bool,
    /// Values joined by `;` are one body ([`Body::JsonList`]).
    list: bool,
    /// In a list, after a value closed: the bytes read since, and whether
    /// they held the `;`.
    after: Option<(usize, bool)>,
}

/// Where a balanced body ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Closed {
    /// The byte index in the fed text where the body ends.
    pub at: usize,
    /// How many bytes read before `at` (whitespace, a `;`) are not part of
    /// it: a list looked past its last value for a `;` and found none.
    pub back: usize,
}

impl Balance {
    /// A balance for `{…}; {…}` lists: it closes only at the first thing
    /// after a value that is not a `;` followed by another `{`.
    pub(crate) fn list() -> Self {
        Self {
            list: true,
            ..Self::default()
        }
    }

    /// Feed `s`; where the body ended, if it did in `s`.
    pub(crate) fn feed(&mut self, s: &str) -> Option<Closed> {
        for (i, c) in s.char_indices() {
            if let Some((read, semi)) = &mut self.after {
                match c {
                    c if c.is_whitespace() => *read += c.len_utf8(),
                    ';' if !*semi => {
                        *read += 1;
                        *semi = true;
                    }
                    '{' if *semi => {
                        self.after = None;
                        self.depth = 1;
                    }
                    _ => {
                        return Some(Closed { at: i, back: *read });
                    }
                }
                continue;
            }
            if !self.started {
                let first = !self.seen_text;
                if !c.is_whitespace() {
                    self.seen_text = true;
                }
                // `[` and `(` open a value only as the first thing; a name
                // before (`NAME[ARGS]{…}`) waits for the `{`.
                if c == '{' || (first && (c == '[' || c == '(')) {
                    self.started = true;
                    self.depth = 1;
                }
                continue;
            }
            if let Some(q) = self.quote {
                if self.escape {
                    self.escape = false;
                } else if c == '\\' {
                    self.escape = true;
                } else if c == q {
                    self.quote = None;
                }
                continue;
            }
            match c {
                '"' | '\'' => self.quote = Some(c),
                '{' | '[' | '(' => self.depth += 1,
                '}' | ']' | ')' => {
                    self.depth = self.depth.saturating_sub(1);
                    if self.depth == 0 {
                        if self.list {
                            self.after = Some((0, false));
                            continue;
                        }
                        return Some(Closed {
                            at: i + c.len_utf8(),
                            back: 0,
                        });
                    }
                }
                _ => {}
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn find_reports_full_partial_and_none() {
        let set = Markers::new(["<tool_call>", "<think>"]);
        let all = |_| true;
        assert_eq!(find("ab<think>x", &set, all), Hit::Full { pos: 2, idx: 1 });
        assert_eq!(find("ab<to", &set, all), Hit::Partial { pos: 2 });
        assert_eq!(find("a < b", &set, all), Hit::None);
        assert_eq!(find("é<", &set, all), Hit::Partial { pos: 2 });
    }

    #[test]
    fn balance_ends_at_the_closing_bracket() {
        let closed = |at| Some(Closed { at, back: 0 });
        let mut b = Balance::default();
        assert_eq!(b.feed(r#" {"a": "}", "b": [1, {"#), None);
        assert_eq!(b.feed(r#"}]} tail"#), closed(3));
        let mut named = Balance::default();
        assert_eq!(named.feed(r#"get[ARGS]{"x": "\"}"} more"#), closed(21));
    }

    #[test]
    fn a_list_goes_on_past_each_semicolon_and_gives_back_what_follows_the_last_value() {
        let mut b = Balance::list();
        assert_eq!(b.feed(r#"{"a": ";"} ; "#), None);
        assert_eq!(b.feed(r#"{"b": 1}  "#), None);
        assert_eq!(b.feed("x"), Some(Closed { at: 0, back: 2 }));
        let mut semi = Balance::list();
        assert_eq!(semi.feed("{} ; done"), Some(Closed { at: 5, back: 3 }));
    }
}
