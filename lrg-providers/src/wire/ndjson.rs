//! Newline-delimited JSON framing (Ollama's native API).

use super::{Frame, find_byte};

/// Incremental NDJSON splitter; blank lines are skipped.
#[derive(Debug, Default)]
pub struct NdjsonFramer {
    /// The start of a line whose end has not arrived yet.
    buf: Vec<u8>,
}

impl NdjsonFramer {
    /// Feed bytes; complete lines are appended to `out`.
    pub fn push(&mut self, mut bytes: &[u8], out: &mut Vec<Frame>) {
        // Lines are read straight from `bytes`; only a line cut by the chunk
        // boundary is copied.
        if !self.buf.is_empty() {
            let Some(nl) = find_byte(bytes, 0, b'\n') else {
                self.buf.extend_from_slice(bytes);
                return;
            };
            self.buf.extend_from_slice(&bytes[..nl]);
            emit(&self.buf, out);
            self.buf.clear();
            bytes = &bytes[nl + 1..];
        }
        while let Some(nl) = find_byte(bytes, 0, b'\n') {
            emit(&bytes[..nl], out);
            bytes = &bytes[nl + 1..];
        }
        self.buf.extend_from_slice(bytes);
    }

    /// The body ended: emit a last line that had no newline.
    pub fn finish(&mut self, out: &mut Vec<Frame>) {
        let rest = std::mem::take(&mut self.buf);
        emit(&rest, out);
    }
}

fn emit(line: &[u8], out: &mut Vec<Frame>) {
    // Valid UTF-8 is the rule; the lossy path (slow) only for the exception.
    let line = match std::str::from_utf8(line) {
        Ok(text) => std::borrow::Cow::Borrowed(text),
        Err(_) => String::from_utf8_lossy(line),
    };
    let line = line.trim();
    if !line.is_empty() {
        out.push(Frame {
            event: None,
            data: line.to_string(),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_across_chunks() {
        let body = b"{\"a\":1}\n\n{\"b\":2}\r\n{\"c\":3}";
        let mut f = NdjsonFramer::default();
        let mut out = Vec::new();
        for c in body.chunks(3) {
            f.push(c, &mut out);
        }
        f.finish(&mut out);
        let data: Vec<_> = out.iter().map(|f| f.data.as_str()).collect();
        assert_eq!(data, ["{\"a\":1}", "{\"b\":2}", "{\"c\":3}"]);
    }
}
