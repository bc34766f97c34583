//! Turns token pieces (arbitrary byte runs) into whole-character text deltas.

/// Holds back the bytes of a character split across tokens until it is whole.
#[derive(Debug, Default)]
pub(crate) struct Utf8Stream {
    pending: Vec<u8>,
}

impl Utf8Stream {
    /// Appends `bytes` and returns the text that is now complete (possibly
    /// empty). Invalid sequences become U+FFFD rather than being held forever.
    pub fn push(&mut self, bytes: &[u8]) -> String {
        self.pending.extend_from_slice(bytes);
        let mut out = String::new();
        loop {
            match std::str::from_utf8(&self.pending) {
                Ok(s) => {
                    out.push_str(s);
                    self.pending.clear();
                    return out;
                }
                Err(e) => {
                    let valid = e.valid_up_to();
                    // The prefix was just checked, so this cannot fail.
                    out.push_str(std::str::from_utf8(&self.pending[..valid]).unwrap_or_default());
                    match e.error_len() {
                        // Incomplete character at the end: keep it for the next token.
                        None => {
                            self.pending.drain(..valid);
                            return out;
                        }
                        Some(bad) => {
                            out.push(char::REPLACEMENT_CHARACTER);
                            self.pending.drain(..valid + bad);
                        }
                    }
                }
            }
        }
    }

    /// Whatever is left at the end of generation (an unfinished character
    /// becomes U+FFFD).
    pub fn finish(&mut self) -> String {
        let rest = String::from_utf8_lossy(&self.pending).into_owned();
        self.pending.clear();
        rest
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_characters_are_held_back() {
        let text = "aé日😀b";
        let bytes = text.as_bytes();
        let mut s = Utf8Stream::default();
        let mut out = String::new();
        for b in bytes {
            let d = s.push(std::slice::from_ref(b));
            out.push_str(&d);
        }
        out.push_str(&s.finish());
        assert_eq!(out, text);
    }

    #[test]
    fn invalid_bytes_do_not_block() {
        let mut s = Utf8Stream::default();
        assert_eq!(s.push(b"a\xFFb"), "a\u{FFFD}b");
        assert_eq!(s.push(b"\xE6\x97"), "");
        assert_eq!(s.finish(), "\u{FFFD}");
    }
}
