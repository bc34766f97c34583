//! [`TextToolDecoder`]: any wire [`Decoder`] with its answer text read for
//! tool calls written as text.

use super::TextToolParser;
use crate::model::whole_call_delta;
use crate::wire::{Decoder, Frame};
use crate::{ProviderError, StopReason, TurnEvent};

/// Wraps a provider's decoder: its text deltas go through a
/// [`TextToolParser`], everything else passes unchanged. Calls read from the
/// text are held until the end of the answer, because a native tool call in
/// the stream wins: when one comes, the held calls are dropped and later text
/// passes through unparsed (the server parses calls itself). When text calls
/// are kept, each goes out after its one [`TurnEvent::ToolCallDelta`], and an
/// `EndTurn` stop becomes `ToolCalls`.
#[derive(Debug)]
pub struct TextToolDecoder<D> {
    inner: D,
    parser: TextToolParser,
    native: bool,
    scratch: Vec<TurnEvent>,
    parsed: Vec<TurnEvent>,
    held: Vec<TurnEvent>,
}

impl<D: Decoder> TextToolDecoder<D> {
    /// `inner`'s events, with text read by `parser`.
    pub fn new(inner: D, parser: TextToolParser) -> Self {
        Self {
            inner,
            parser,
            native: false,
            scratch: Vec::new(),
            parsed: Vec::new(),
            held: Vec::new(),
        }
    }

    /// `inner`, with its text read by `parser` when there is one: the one
    /// place an adapter wires [`TextTurn`](super::TextTurn)'s parser in.
    pub fn wrap(inner: D, parser: Option<TextToolParser>) -> Box<dyn Decoder>
    where
        D: 'static,
    {
        match parser {
            Some(parser) => Box::new(Self::new(inner, parser)),
            None => Box::new(inner),
        }
    }

    fn route(&mut self, out: &mut Vec<TurnEvent>) {
        let mut events = std::mem::take(&mut self.scratch);
        for event in events.drain(..) {
            match event {
                TurnEvent::TextDelta { text } if !self.native => {
                    self.parser.feed(&text, &mut self.parsed);
                    self.sort_parsed(out);
                }
                TurnEvent::ReasoningDelta { text } => {
                    // Reasoning in the server's own field: the text that
                    // follows is the answer, not reasoning a template opened.
                    self.parser.server_separates_reasoning();
                    out.push(TurnEvent::ReasoningDelta { text });
                }
                TurnEvent::ToolCall(call) => {
                    if !self.native {
                        self.native = true;
                        self.parser.finish(&mut self.parsed);
                        self.sort_parsed(out);
                        if !self.held.is_empty() {
                            tracing::debug!(
                                dropped = self.held.len(),
                                "native tool calls in the answer: calls read from its text are dropped"
                            );
                            self.held.clear();
                        }
                    }
                    out.push(TurnEvent::ToolCall(call));
                }
                TurnEvent::End { mut stop } => {
                    if !self.native {
                        self.parser.finish(&mut self.parsed);
                        self.sort_parsed(out);
                    }
                    if !self.held.is_empty() && stop == StopReason::EndTurn {
                        stop = StopReason::ToolCalls;
                    }
                    // Each kept call with its one delta: they are known
                    // whole only now. Held calls exist only without native
                    // ones, so they number the turn's calls from 0.
                    for (index, call) in (0u32..).zip(self.held.drain(..)) {
                        if let TurnEvent::ToolCall(c) = &call {
                            out.push(whole_call_delta(index, c));
                        }
                        out.push(call);
                    }
                    out.push(TurnEvent::End { stop });
                }
                other => out.push(other),
            }
        }
        self.scratch = events;
    }

    /// Text and reasoning go out now; calls wait for the end.
    fn sort_parsed(&mut self, out: &mut Vec<TurnEvent>) {
        for event in self.parsed.drain(..) {
            match event {
                call @ TurnEvent::ToolCall(_) if !self.native => self.held.push(call),
                TurnEvent::ToolCall(_) => {}
                other => out.push(other),
            }
        }
    }
}

impl<D: Decoder> Decoder for TextToolDecoder<D> {
    fn decode(&mut self, frame: &Frame, out: &mut Vec<TurnEvent>) -> Result<(), ProviderError> {
        let result = self.inner.decode(frame, &mut self.scratch);
        self.route(out);
        result
    }

    fn finish(&mut self, out: &mut Vec<TurnEvent>) -> Result<(), ProviderError> {
        let result = self.inner.finish(&mut self.scratch);
        self.route(out);
        result
    }
}
