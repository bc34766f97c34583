//! Wire plumbing shared by the HTTP adapters: byte streams split into frames
//! ([`SseFramer`], [`NdjsonFramer`]) and the [`Decoder`] state machine each
//! provider implements. No I/O happens here, so decoders are easy to snapshot
//! and to fuzz.

mod call_ids;
mod json;
mod ndjson;
mod sse;

pub(crate) use call_ids::CallIds;
pub(crate) use json::{StrOrJson, borrowed_str};
pub use ndjson::NdjsonFramer;
pub use sse::SseFramer;

use crate::{ProviderError, TurnEvent};

/// One frame of a streamed answer: an SSE event or one NDJSON line.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Frame {
    /// The SSE `event:` field, when one was given (always `None` for NDJSON).
    pub event: Option<String>,
    /// The SSE `data:` lines joined with `\n`, or the NDJSON line.
    pub data: String,
}

/// How a response body is split into frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// `text/event-stream`.
    Sse,
    /// Newline-delimited JSON (Ollama).
    Ndjson,
}

/// Splits a byte stream into [`Frame`]s, whatever the chunk boundaries.
#[derive(Debug)]
pub enum Framer {
    /// SSE.
    Sse(SseFramer),
    /// NDJSON.
    Ndjson(NdjsonFramer),
}

impl Framer {
    /// A framer for `framing`.
    pub fn new(framing: Framing) -> Self {
        match framing {
            Framing::Sse => Framer::Sse(SseFramer::default()),
            Framing::Ndjson => Framer::Ndjson(NdjsonFramer::default()),
        }
    }

    /// Feed bytes; complete frames are appended to `out`.
    pub fn push(&mut self, bytes: &[u8], out: &mut Vec<Frame>) {
        match self {
            Framer::Sse(f) => f.push(bytes, out),
            Framer::Ndjson(f) => f.push(bytes, out),
        }
    }

    /// The body ended: flush a last frame that had no terminator.
    pub fn finish(&mut self, out: &mut Vec<Frame>) {
        match self {
            Framer::Sse(f) => f.finish(out),
            Framer::Ndjson(f) => f.finish(out),
        }
    }
}

/// A provider's answer decoder: fed one frame at a time, it emits turn events.
///
/// The same decoder serves streamed and whole replies. It holds partial state
/// (tool-call fragments, open thinking blocks) between frames.
pub trait Decoder: Send {
    /// Decode one frame, appending any events to `out`.
    fn decode(&mut self, frame: &Frame, out: &mut Vec<TurnEvent>) -> Result<(), ProviderError>;

    /// The body ended. Flush what is pending (e.g. tool calls completed only by
    /// the end of the stream) and end with `TurnEvent::End`; a stream cut before
    /// the provider's own end marker is a [`ProviderError::Transient`].
    fn finish(&mut self, out: &mut Vec<TurnEvent>) -> Result<(), ProviderError>;
}

/// A boxed decoder decodes like the one inside, so a wrapper such as
/// [`crate::text_tools::TextToolDecoder`] can take a decoder chosen at run time.
impl<D: Decoder + ?Sized> Decoder for Box<D> {
    fn decode(&mut self, frame: &Frame, out: &mut Vec<TurnEvent>) -> Result<(), ProviderError> {
        (**self).decode(frame, out)
    }

    fn finish(&mut self, out: &mut Vec<TurnEvent>) -> Result<(), ProviderError> {
        (**self).finish(out)
    }
}

/// Feed `frames` (data only) to `decoder` until one fails, then finish it
/// unless one failed: the events it gave, and how it ended. For decoder tests.
#[cfg(test)]
pub(crate) fn decode_frames(
    decoder: &mut dyn Decoder,
    frames: &[&str],
) -> (Vec<TurnEvent>, Result<(), ProviderError>) {
    let mut out = Vec::new();
    for data in frames {
        let frame = Frame {
            event: None,
            data: (*data).to_string(),
        };
        if let Err(e) = decoder.decode(&frame, &mut out) {
            return (out, Err(e));
        }
    }
    let end = decoder.finish(&mut out);
    (out, end)
}

/// Find `needle` in `hay` starting at `from`.
fn find_byte(hay: &[u8], from: usize, needle: u8) -> Option<usize> {
    memchr::memchr(needle, hay.get(from..)?).map(|i| i + from)
}
