//! Newline-delimited JSON framing (Ollama's native API).

use super::{Frame, find_byte};

/// Incremental NDJSON splitter; blank lines are skipped.
#[derive(Debug, Default)]
pub struct NdjsonFramer {
    buf: Vec<u8>,
    scanned: usize,
}

impl NdjsonFramer {
    /// Feed bytes; complete lines are appended to `out`.
    pub fn push(&mut self, bytes: &[u8], out: &mut Vec<Frame>) {
        self.buf.extend_from_slice(bytes);
        let mut start = 0;
        while let Some(nl) = find_byte(&self.buf, self.scanned.max(start), b'\n') {
            emit(&self.buf[start..nl], out);
            start = nl + 1;
        }
        if start > 0 {
            self.buf.drain(..start);
        }
        self.scanned = self.buf.len();
    }

    /// The body ended: emit a last line that had no newline.
    pub fn finish(&mut self, out: &mut Vec<Frame>) {
        let rest = std::mem::take(&mut self.buf);
        emit(&rest, out);
        self.scanned = 0;
    }
}

fn emit(line: &[u8], out: &mut Vec<Frame>) {
    let line = String::from_utf8_lossy(line);
    let line = line.trim();
    if !line.is_empty() {
        out.push(Frame { event: None, data: line.to_string() });
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
