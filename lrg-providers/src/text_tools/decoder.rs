//! [`TextToolDecoder`]: any wire [`Decoder`] with its answer text read for
//! tool calls written as text.

use super::TextToolParser;
use crate::wire::{Decoder, Frame};
use crate::{ProviderError, StopReason, TurnEvent};

/// Wraps a provider's decoder: its text deltas go through a
/// [`TextToolParser`], everything else passes unchanged. A native tool call
/// in the stream wins: from then on text is passed through unparsed (the
/// server parses calls itself). When text calls were found, an `EndTurn`
/// stop becomes `ToolCalls`.
#[derive(Debug)]
pub struct TextToolDecoder<D> {
    inner: D,
    parser: TextToolParser,
    native: bool,
    scratch: Vec<TurnEvent>,
}

impl<D: Decoder> TextToolDecoder<D> {
    /// `inner`'s events, with text read by `parser`.
    pub fn new(inner: D, parser: TextToolParser) -> Self {
        Self {
            inner,
            parser,
            native: false,
            scratch: Vec::new(),
        }
    }

    fn route(&mut self, out: &mut Vec<TurnEvent>) {
        for event in self.scratch.drain(..) {
            match event {
                TurnEvent::TextDelta { text } if !self.native => self.parser.feed(&text, out),
                TurnEvent::ToolCall(call) => {
                    if !self.native {
                        self.native = true;
                        self.parser.finish(out);
                    }
                    out.push(TurnEvent::ToolCall(call));
                }
                TurnEvent::End { mut stop } => {
                    if !self.native {
                        self.parser.finish(out);
                    }
                    if self.parser.calls() > 0 && stop == StopReason::EndTurn {
                        stop = StopReason::ToolCalls;
                    }
                    out.push(TurnEvent::End { stop });
                }
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
