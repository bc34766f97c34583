//! Server-sent events framing (the WHATWG event-stream format).

use super::{Frame, find_byte};

/// Incremental SSE parser: `data:` lines are joined, an empty line ends an
/// event, comments (heartbeats) are skipped, `\r\n`, `\r`-free `\n` both work.
#[derive(Debug, Default)]
pub struct SseFramer {
    buf: Vec<u8>,
    scanned: usize,
    event: Option<String>,
    data: String,
    has_data: bool,
}

impl SseFramer {
    /// Feed bytes; complete events are appended to `out`.
    pub fn push(&mut self, bytes: &[u8], out: &mut Vec<Frame>) {
        // Taken out so lines can be borrowed from it while `self` is updated.
        let mut buf = std::mem::take(&mut self.buf);
        buf.extend_from_slice(bytes);
        let mut start = 0;
        while let Some(nl) = find_byte(&buf, self.scanned.max(start), b'\n') {
            let mut line_end = nl;
            if line_end > start && buf[line_end - 1] == b'\r' {
                line_end -= 1;
            }
            let line = String::from_utf8_lossy(&buf[start..line_end]);
            self.line(&line, out);
            start = nl + 1;
        }
        if start > 0 {
            buf.drain(..start);
        }
        self.scanned = buf.len();
        self.buf = buf;
    }

    /// The body ended: dispatch an event left without its blank line.
    pub fn finish(&mut self, out: &mut Vec<Frame>) {
        if !self.buf.is_empty() {
            let rest = std::mem::take(&mut self.buf);
            let line = String::from_utf8_lossy(&rest).into_owned();
            self.line(line.trim_end_matches('\r'), out);
        }
        self.scanned = 0;
        self.dispatch(out);
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
            out.push(Frame { event: self.event.take(), data: std::mem::take(&mut self.data) });
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
        assert_eq!(whole[0], Frame { event: Some("message_start".into()), data: "{\"a\":1}".into() });
        assert_eq!(whole[1].data, "x\ny");
        assert_eq!(whole[2].data, "[DONE]");
        for split in 0..body.len() {
            assert_eq!(frames(&[&body[..split], &body[split..]]), whole, "split at {split}");
        }
        let bytes: Vec<&[u8]> = body.chunks(1).collect();
        assert_eq!(frames(&bytes), whole);
    }

    #[test]
    fn last_event_without_blank_line_is_kept() {
        assert_eq!(frames(&[b"data: tail"]), vec![Frame { event: None, data: "tail".into() }]);
    }
}
