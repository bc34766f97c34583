//! Server-sent events framing (the WHATWG event-stream format).

use super::{Frame, find_byte};

/// Incremental SSE parser: `data:` lines are joined, an empty line ends an
/// event, comments (heartbeats) are skipped, `\r\n`, `\r`-free `\n` both work.
#[derive(Debug, Default)]
pub struct SseFramer {
    /// The start of a line whose end has not arrived yet.
    buf: Vec<u8>,
    event: Option<String>,
    data: String,
    has_data: bool,
}

impl SseFramer {
    /// Feed bytes; complete events are appended to `out`.
    pub fn push(&mut self, mut bytes: &[u8], out: &mut Vec<Frame>) {
        // Lines are read straight from `bytes`; only a line cut by the chunk
        // boundary is copied, so a long stream is not copied twice.
        if !self.buf.is_empty() {
            let Some(nl) = find_byte(bytes, 0, b'\n') else {
                self.buf.extend_from_slice(bytes);
                return;
            };
            let mut line = std::mem::take(&mut self.buf);
            line.extend_from_slice(&bytes[..nl]);
            self.raw_line(&line, out);
            line.clear();
            self.buf = line;
            bytes = &bytes[nl + 1..];
        }
        while let Some(nl) = find_byte(bytes, 0, b'\n') {
            self.raw_line(&bytes[..nl], out);
            bytes = &bytes[nl + 1..];
        }
        self.buf.extend_from_slice(bytes);
    }

    /// The body ended: dispatch an event left without its blank line.
    pub fn finish(&mut self, out: &mut Vec<Frame>) {
        if !self.buf.is_empty() {
            let rest = std::mem::take(&mut self.buf);
            self.raw_line(&rest, out);
        }
        self.dispatch(out);
    }

    fn raw_line(&mut self, line: &[u8], out: &mut Vec<Frame>) {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        // Valid UTF-8 is the rule; the lossy path (slow) only for the exception.
        match std::str::from_utf8(line) {
            Ok(text) => self.line(text, out),
            Err(_) => self.line(&String::from_utf8_lossy(line), out),
        }
    }

    fn line(&mut self, line: &str, out: &mut Vec<Frame>) {
        if line.is_empty() {
            self.dispatch(out);
            return;
        }
        if line.starts_with(':') {
            return;
        }
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (line, ""),
        };
        match field {
            "data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.has_data = true;
            }
            "event" => self.event = Some(value.to_string()),
            _ => {}
        }
    }

    fn dispatch(&mut self, out: &mut Vec<Frame>) {
        if self.has_data {
            out.push(Frame {
                event: self.event.take(),
                data: std::mem::take(&mut self.data),
            });
        }
        self.event = None;
        self.has_data = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(chunks: &[&[u8]]) -> Vec<Frame> {
        let mut f = SseFramer::default();
        let mut out = Vec::new();
        for c in chunks {
            f.push(c, &mut out);
        }
        f.finish(&mut out);
        out
    }

    #[test]
    fn splits_events_across_any_chunking() {
        let body = b": ping\r\nevent: message_start\r\ndata: {\"a\":1}\r\n\r\ndata: x\ndata: y\n\ndata: [DONE]\n\n";
        let whole = frames(&[body]);
        assert_eq!(whole.len(), 3);
        assert_eq!(
            whole[0],
            Frame {
                event: Some("message_start".into()),
                data: "{\"a\":1}".into()
            }
        );
        assert_eq!(whole[1].data, "x\ny");
        assert_eq!(whole[2].data, "[DONE]");
        for split in 0..body.len() {
            assert_eq!(
                frames(&[&body[..split], &body[split..]]),
                whole,
                "split at {split}"
            );
        }
        let bytes: Vec<&[u8]> = body.chunks(1).collect();
        assert_eq!(frames(&bytes), whole);
    }

    #[test]
    fn invalid_utf8_is_replaced_and_a_line_may_span_many_chunks() {
        let body: &[u8] = b"data: a\xffb\r\n\r\ndata: long line\n\n";
        let one_byte: Vec<&[u8]> = body.chunks(1).collect();
        let got = frames(&one_byte);
        assert_eq!(got[0].data, "a\u{fffd}b");
        assert_eq!(got[1].data, "long line");
    }

    #[test]
    fn last_event_without_blank_line_is_kept() {
        assert_eq!(
            frames(&[b"data: tail"]),
            vec![Frame {
                event: None,
                data: "tail".into()
            }]
        );
    }
}
