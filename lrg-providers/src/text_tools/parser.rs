//! [`TextToolParser`]: the streaming state machine that turns an answer's
//! text deltas into text, reasoning and tool calls.

use serde_json::Value;

use super::formats::{self, Written, read_body};
use super::scan::{Balance, Body, Closed, End, Fallback, Hit, Markers, Open, Rule, find};
use super::{NameMatch, RECOVERY_TOOL, ToolFormat, match_tool_name, recovery, resolve_tool_name};
use crate::wire::CallIds;
use crate::{Message, ToolCall, ToolSpec, TurnEvent};

/// Where the parser is.
#[derive(Debug)]
enum Mode {
    /// Answer text, watching for the format's markers.
    Text,
    /// A streamed region (reasoning, a Harmony text channel) until a closer.
    Stream {
        reasoning: bool,
        closers: Markers,
        /// The opener a model may write again at the start of reasoning its
        /// template opened (also in `closers`): dropped there, reasoning
        /// text after the first non-blank reasoning.
        reopen: Option<&'static str>,
    },
    /// A call body until its end.
    Capture {
        open: &'static str,
        end: CaptureEnd,
        body: Body,
        fallback: Fallback,
        text: String,
        /// The tool name a Harmony header gave.
        name: Option<String>,
    },
    /// A Harmony header until `<|message|>`.
    Header { opener: &'static str, text: String },
}

#[derive(Debug)]
enum CaptureEnd {
    Marker(Markers),
    Balanced(Balance),
}

const HARMONY_MESSAGE: &str = "<|message|>";
const HARMONY_CLOSERS: [&str; 5] = [
    "<|end|>",
    "<|return|>",
    "<|call|>",
    "<|start|>",
    "<|channel|>",
];

/// The streaming parser of one answer in one [`ToolFormat`]. See the module docs.
#[derive(Debug)]
pub struct TextToolParser {
    format: ToolFormat,
    /// The markers of every format in the chain, the first format's first.
    rules: Vec<Rule>,
    openers: Markers,
    /// What ends a Harmony header (built once, not per delta).
    header_end: Markers,
    tools: Vec<ToolSpec>,
    names: Vec<String>,
    ids: CallIds,
    mode: Mode,
    /// A held possible marker prefix, at most one marker long.
    carry: String,
    /// Nothing but whitespace has been shown as text yet.
    at_start: bool,
    calls: usize,
    failures: usize,
    /// Nothing has been fed yet.
    fresh: bool,
}

impl TextToolParser {
    /// A parser for `format` alone that accepts calls to `tools`.
    pub fn new(format: ToolFormat, tools: &[ToolSpec]) -> Self {
        Self::chained(&[format], tools)
    }

    /// A parser that reads the formats of `chain` at once, the first one's
    /// markers before the others' where two start at the same place (a
    /// marker two formats share is the first one's): a family's format,
    /// then fenced JSON ([`ToolFormat::chain`]). Its [`format`](Self::format)
    /// (the one recovery messages show) is the first; an empty chain reads
    /// [`ToolFormat::MarkdownJson`].
    pub fn chained(chain: &[ToolFormat], tools: &[ToolSpec]) -> Self {
        let format = chain.first().copied().unwrap_or(ToolFormat::MarkdownJson);
        let rules = formats::chain(chain);
        Self {
            format,
            openers: Markers::new(rules.iter().map(|r| r.open)),
            rules,
            header_end: Markers::new([HARMONY_MESSAGE]),
            tools: tools.to_vec(),
            names: tools.iter().map(|t| t.name.clone()).collect(),
            ids: CallIds::default(),
            mode: Mode::Text,
            carry: String::new(),
            at_start: true,
            calls: 0,
            failures: 0,
            fresh: true,
        }
    }

    /// Start inside reasoning, for a chat template that ends the prompt with
    /// the reasoning opener (`<think>\n`: QwQ, DeepSeek-R1, Qwen3
    /// thinking-2507), so that only the closer shows up in the answer. The
    /// answer is reasoning until the closer (`</think>`); an opener the model
    /// writes again before any reasoning is dropped. As vLLM's `deepseek_r1`
    /// reasoning parser does, an answer that never closes its reasoning is
    /// all reasoning (a model cut off mid-thought says nothing yet). Formats
    /// without a reasoning marker (Llama 3.x, Harmony) ignore this.
    pub fn starting_in_reasoning(mut self) -> Self {
        let opened = self.rules.iter().find_map(|r| match r.then {
            Open::Reasoning { close } => Some((r.open, close)),
            _ => None,
        });
        if let Some((open, close)) = opened {
            self.mode = Mode::Stream {
                reasoning: true,
                closers: Markers::new(close.iter().copied().chain([open])),
                reopen: Some(open),
            };
        }
        self
    }

    /// The server sends reasoning in its own field, so it separates the
    /// reasoning itself: the answer text comes after it. A parser that
    /// [started in reasoning](Self::starting_in_reasoning) and has read
    /// nothing yet starts in the answer instead.
    pub fn server_separates_reasoning(&mut self) {
        if self.fresh
            && let Mode::Stream {
                reopen: Some(_), ..
            } = self.mode
        {
            self.mode = Mode::Text;
        }
    }

    /// Make generated call ids avoid those already in `history`.
    pub fn with_history(mut self, history: &[Message]) -> Self {
        self.ids = CallIds::from_history(history);
        self
    }

    /// The format this parser reads.
    pub fn format(&self) -> ToolFormat {
        self.format
    }

    /// Calls emitted so far (recovery calls included).
    pub fn calls(&self) -> usize {
        self.calls
    }

    /// Calls that failed and became [`RECOVERY_TOOL`] calls.
    pub fn failures(&self) -> usize {
        self.failures
    }

    /// Feed the next text delta.
    ///
    /// Inline, so that a token-sized delta in which no marker can start
    /// (most deltas) costs its caller no call into the parser: only the
    /// event it becomes (measured at 1-byte deltas in `benches/text_tools.rs`).
    #[inline]
    pub fn feed(&mut self, delta: &str, out: &mut Vec<TurnEvent>) {
        if delta.is_empty() {
            return;
        }
        self.fresh = false;
        if self.carry.is_empty() && self.plain(delta, out) {
            return;
        }
        self.scan(delta, out);
    }

    /// A delta that may hold a marker, or extends a held one.
    fn scan(&mut self, delta: &str, out: &mut Vec<TurnEvent>) {
        if self.carry.is_empty() {
            if let Some(held) = self.run(delta, out) {
                self.carry.push_str(&delta[held..]);
            }
        } else {
            // Only a held marker prefix (a few bytes) is copied, and into
            // the buffer it is held in: a delta that only extends a possible
            // marker costs no allocation.
            let mut work = std::mem::take(&mut self.carry);
            work.push_str(delta);
            match self.run(&work, out) {
                Some(held) => {
                    work.drain(..held);
                }
                None => work.clear(),
            }
            self.carry = work;
        }
    }

    /// The fast path of a delta in which no marker can start (most of an
    /// answer, and every token-sized delta of prose): text goes out, or onto
    /// a call body, without the scan's bookkeeping. `false`: take the scan.
    #[inline]
    fn plain(&mut self, delta: &str, out: &mut Vec<TurnEvent>) -> bool {
        match &mut self.mode {
            Mode::Text if !self.openers.may_start(delta.as_bytes()) => {
                if self.at_start && !delta.trim().is_empty() {
                    self.at_start = false;
                }
                push_text(out, delta);
                true
            }
            Mode::Capture {
                end: CaptureEnd::Marker(closers),
                text,
                ..
            } if !closers.may_start(delta.as_bytes()) => {
                text.push_str(delta);
                true
            }
            _ => false,
        }
    }

    /// The answer ended: flush held text, and read a call cut short by the
    /// end (it is repaired, or becomes a failure).
    pub fn finish(&mut self, out: &mut Vec<TurnEvent>) {
        let carry = std::mem::take(&mut self.carry);
        match std::mem::replace(&mut self.mode, Mode::Text) {
            Mode::Text => self.text(&carry, out),
            Mode::Stream { reasoning, .. } => self.emit(reasoning, &carry, out),
            Mode::Capture {
                open,
                body,
                fallback,
                mut text,
                name,
                ..
            } => {
                text.push_str(&carry);
                self.finish_call(open, body, fallback, &text, "", name, out);
            }
            Mode::Header { .. } => {}
        }
    }

    /// Process `work` from the start; where what might be a cut marker at
    /// its end starts, to be held for the next delta.
    fn run(&mut self, work: &str, out: &mut Vec<TurnEvent>) -> Option<usize> {
        let mut pos = 0;
        while pos < work.len() {
            let s = &work[pos..];
            match &mut self.mode {
                Mode::Text => {
                    let at_start = self.at_start;
                    let rules = &self.rules;
                    let hit = find(s, &self.openers, |i| at_start || !rules[i].start_only);
                    match hit {
                        Hit::Full { pos: p, idx } => {
                            self.text(&s[..p], out);
                            let rule = self.rules[idx];
                            pos += p;
                            if !rule.keep_open {
                                pos += rule.open.len();
                            }
                            self.enter(rule);
                        }
                        Hit::Partial { pos: p } => {
                            self.text(&s[..p], out);
                            return Some(pos + p);
                        }
                        Hit::None => {
                            self.text(s, out);
                            return None;
                        }
                    }
                }
                Mode::Stream {
                    reasoning,
                    closers,
                    reopen,
                } => {
                    let reasoning = *reasoning;
                    let hit = find(s, closers, |_| true);
                    let before = match hit {
                        Hit::Full { pos: p, .. } | Hit::Partial { pos: p } => &s[..p],
                        Hit::None => s,
                    };
                    let blank = before.trim().is_empty();
                    let reopened = match hit {
                        Hit::Full { idx, .. } if blank && Some(closers.get(idx)) == *reopen => {
                            Some(closers.get(idx))
                        }
                        _ => None,
                    };
                    if !blank || reopened.is_some() {
                        *reopen = None;
                    }
                    self.emit(reasoning, before, out);
                    match hit {
                        Hit::Full { pos: p, idx } => {
                            pos += p;
                            let closer = match &self.mode {
                                Mode::Stream { closers, .. } => closers.get(idx),
                                _ => "",
                            };
                            if let Some(opener) = reopened {
                                // Written again at the start: dropped.
                                pos += opener.len();
                                continue;
                            }
                            if self.rules.iter().any(|r| {
                                r.open == closer && matches!(r.then, Open::Reasoning { .. })
                            }) {
                                // The opener again, later in reasoning: text of it.
                                self.emit(reasoning, closer, out);
                                pos += closer.len();
                                continue;
                            }
                            // A closer that opens the next message is read again.
                            if !self.rules.iter().any(|r| r.open == closer) {
                                pos += closer.len();
                            }
                            self.mode = Mode::Text;
                        }
                        Hit::Partial { pos: p } => {
                            return Some(pos + p);
                        }
                        Hit::None => return None,
                    }
                }
                Mode::Header { text, .. } => match find(s, &self.header_end, |_| true) {
                    Hit::Full { pos: p, .. } => {
                        text.push_str(&s[..p]);
                        pos += p + HARMONY_MESSAGE.len();
                        self.header_done();
                    }
                    Hit::Partial { pos: p } => {
                        text.push_str(&s[..p]);
                        return Some(pos + p);
                    }
                    Hit::None => {
                        text.push_str(s);
                        return None;
                    }
                },
                Mode::Capture { end, text, .. } => {
                    let mut given_back = String::new();
                    let done = match end {
                        CaptureEnd::Marker(closers) => match find(s, closers, |_| true) {
                            Hit::Full { pos: p, idx } => {
                                text.push_str(&s[..p]);
                                let closer = closers.get(idx);
                                pos += p + closer.len();
                                Some(closer)
                            }
                            Hit::Partial { pos: p } => {
                                text.push_str(&s[..p]);
                                return Some(pos + p);
                            }
                            Hit::None => {
                                text.push_str(s);
                                return None;
                            }
                        },
                        CaptureEnd::Balanced(balance) => match balance.feed(s) {
                            Some(Closed { at, back }) => {
                                text.push_str(&s[..at]);
                                pos += at;
                                // What a list read past its last value
                                // (whitespace, a `;`) is text again.
                                given_back = text.split_off(text.len().saturating_sub(back));
                                Some("")
                            }
                            None => {
                                text.push_str(s);
                                return None;
                            }
                        },
                    };
                    if let Some(closer) = done
                        && let Mode::Capture {
                            open,
                            body,
                            fallback,
                            text,
                            name,
                            ..
                        } = std::mem::replace(&mut self.mode, Mode::Text)
                    {
                        self.finish_call(open, body, fallback, &text, closer, name, out);
                        self.text(&std::mem::take(&mut given_back), out);
                    }
                }
            }
        }
        None
    }

    fn enter(&mut self, rule: Rule) {
        self.mode = match rule.then {
            Open::Drop => Mode::Text,
            Open::Reasoning { close } => Mode::Stream {
                reasoning: true,
                closers: Markers::new(close.iter().copied()),
                reopen: None,
            },
            Open::HarmonyHeader => Mode::Header {
                opener: rule.open,
                text: String::new(),
            },
            Open::Call {
                end,
                body,
                fallback,
            } => Mode::Capture {
                open: if rule.keep_open { "" } else { rule.open },
                end: match end {
                    End::Marker(list) => CaptureEnd::Marker(Markers::new(list.iter().copied())),
                    End::Balanced if body == Body::JsonList => {
                        CaptureEnd::Balanced(Balance::list())
                    }
                    End::Balanced => CaptureEnd::Balanced(Balance::default()),
                },
                body,
                fallback,
                text: String::new(),
                name: None,
            },
        };
    }

    /// A Harmony header is complete: pick the channel and recipient.
    fn header_done(&mut self) {
        let Mode::Header { opener, text } = std::mem::replace(&mut self.mode, Mode::Text) else {
            return;
        };
        let channel = match text.split_once("<|channel|>") {
            Some((_, after)) => after,
            None if opener == "<|channel|>" => text.as_str(),
            None => "",
        };
        let channel = channel.split_whitespace().next().unwrap_or("final");
        let recipient = text
            .split_whitespace()
            .chain(text.split("<|"))
            .find_map(|w| w.strip_prefix("to="))
            .map(|r| r.split(['<', ' ']).next().unwrap_or(r).to_string());
        let closers = || Markers::new(HARMONY_CLOSERS);
        self.mode = match recipient {
            Some(to) => Mode::Capture {
                open: "",
                end: CaptureEnd::Marker(closers()),
                body: Body::HarmonyArgs,
                fallback: Fallback::Failure,
                text: String::new(),
                name: Some(to.strip_prefix("functions.").unwrap_or(&to).to_string()),
            },
            None => Mode::Stream {
                reasoning: channel.starts_with("analysis"),
                closers: closers(),
                reopen: None,
            },
        };
    }

    fn text(&mut self, text: &str, out: &mut Vec<TurnEvent>) {
        self.emit(false, text, out);
    }

    fn emit(&mut self, reasoning: bool, text: &str, out: &mut Vec<TurnEvent>) {
        if text.is_empty() {
            return;
        }
        if reasoning {
            if let Some(TurnEvent::ReasoningDelta { text: prev }) = out.last_mut() {
                prev.push_str(text);
            } else {
                out.push(TurnEvent::ReasoningDelta {
                    text: text.to_string(),
                });
            }
            return;
        }
        // Leading whitespace is held back with the start: a bare call may follow.
        if self.at_start && !text.trim().is_empty() {
            self.at_start = false;
        }
        push_text(out, text);
    }

    #[allow(clippy::too_many_arguments)]
    fn finish_call(
        &mut self,
        open: &'static str,
        body: Body,
        fallback: Fallback,
        text: &str,
        closer: &str,
        name: Option<String>,
        out: &mut Vec<TurnEvent>,
    ) {
        let called = if body == Body::JsonList {
            // The first value decides, as a lone one would, whether this is
            // a call at all; once it is, a later value that is no call is a
            // failure, never text.
            let mut values = split_list(text).into_iter();
            let first = values.next().unwrap_or(text);
            let called = self.read_calls(Body::Json, fallback, first, None, out);
            if called {
                for value in values {
                    self.read_calls(Body::Json, Fallback::Failure, value, None, out);
                }
            }
            called
        } else {
            self.read_calls(body, fallback, text, name, out)
        };
        if !called {
            self.text(&format!("{open}{text}{closer}"), out);
        }
    }

    /// Emit the calls (or failures) `text` holds; `false` when, by
    /// `fallback`, it is text after all (nothing is emitted then).
    fn read_calls(
        &mut self,
        body: Body,
        fallback: Fallback,
        text: &str,
        name: Option<String>,
        out: &mut Vec<TurnEvent>,
    ) -> bool {
        let tools = &self.tools;
        let schema_of = |n: &str| -> Option<Value> {
            match_tool_name(n, &self.names)
                .and_then(|m| tools.iter().find(|t| t.name == m))
                .map(|t| t.input_schema.clone())
        };
        let read = read_body(body, text, name.as_deref(), &schema_of);
        let calls: Vec<Written> = match read {
            Ok(calls) => calls,
            Err(problem) => {
                if fallback != Fallback::Failure {
                    return false;
                }
                self.fail(
                    recovery::unreadable(self.format, &problem, text, &self.tools),
                    out,
                );
                return true;
            }
        };
        if fallback == Fallback::TextUnlessKnown
            && calls
                .iter()
                .any(|(n, _)| match_tool_name(n, &self.names).is_none())
        {
            return false;
        }
        for (written, arguments) in calls {
            match match_tool_name(&written, &self.names) {
                Some(name) => {
                    let id = self.ids.claim(None);
                    out.push(TurnEvent::ToolCall(ToolCall {
                        id,
                        name: name.to_string(),
                        arguments,
                    }));
                    self.calls += 1;
                }
                None => {
                    let candidates = match resolve_tool_name(&written, &self.names) {
                        NameMatch::Ambiguous(names) => names,
                        _ => Vec::new(),
                    };
                    let message =
                        recovery::unknown_name(self.format, &written, &candidates, &self.tools);
                    self.fail(message, out);
                }
            }
        }
        true
    }

    fn fail(&mut self, message: Value, out: &mut Vec<TurnEvent>) {
        self.failures += 1;
        self.calls += 1;
        let id = self.ids.claim(None);
        tracing::debug!(format = %self.format, "a tool call written as text could not be used");
        out.push(TurnEvent::ToolCall(ToolCall {
            id,
            name: RECOVERY_TOOL.to_string(),
            arguments: message,
        }));
    }
}

/// `text` as answer text: onto the delta `out` ends with, or as a new one.
#[inline]
fn push_text(out: &mut Vec<TurnEvent>, text: &str) {
    if let Some(TurnEvent::TextDelta { text: prev }) = out.last_mut() {
        prev.push_str(text);
    } else {
        // `extend` reserves before the event is made, so it is written
        // straight into `out`; `push` builds it on the stack and copies it
        // after its capacity check, a store-forwarding stall per delta
        // (perf, 1-byte deltas).
        out.extend(std::iter::once(TurnEvent::TextDelta {
            text: text.to_owned(),
        }));
    }
}

/// The values of a `{…}; {…}` list ([`Body::JsonList`]); what follows the
/// last whole value (a value cut by the end of the stream) is one more.
fn split_list(text: &str) -> Vec<&str> {
    let mut values = Vec::new();
    let mut rest = text;
    while let Some(Closed { at, .. }) = Balance::default().feed(rest) {
        values.push(&rest[..at]);
        rest = rest[at..].trim_start();
        rest = rest.strip_prefix(';').unwrap_or(rest);
    }
    if !rest.trim().is_empty() {
        values.push(rest);
    }
    values
}
