//! Cutting text down to size for error messages, logs and one-line
//! listings, without splitting a UTF-8 character. [`clip`] is the one
//! helper for that across lrg's crates.

/// How much of a bad frame the stream decoders quote in an error.
pub(crate) const QUOTE: usize = 200;

/// The longest prefix of `text` that is at most `max` bytes and ends on a
/// character boundary.
pub(crate) fn truncate(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// `text` cut to [`QUOTE`] bytes, with `…` marking a cut so a reader knows
/// the quote is partial.
pub(crate) fn quote(text: &str) -> String {
    let cut = truncate(text, QUOTE);
    if cut.len() < text.len() {
        format!("{cut}…")
    } else {
        cut.to_string()
    }
}

/// `text` cut to at most `max` characters, with `…` added when cut (a
/// listing's description, an argument shown on one line).
pub fn clip(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clip_counts_characters_and_marks_a_cut() {
        assert_eq!(clip("héllo", 5), "héllo");
        assert_eq!(clip("héllo", 2), "hé…");
        assert_eq!(clip("", 0), "");
    }

    #[test]
    fn short_text_is_kept_whole() {
        assert_eq!(quote("abc"), "abc");
        assert_eq!(truncate("abc", 3), "abc");
    }

    #[test]
    fn cuts_never_split_a_character() {
        // "é" is two bytes: a cut at byte 3 would land inside the second one.
        assert_eq!(truncate("éé", 3), "é");
        let long = "é".repeat(QUOTE);
        let q = quote(&long);
        assert!(q.ends_with('…'));
        assert_eq!(q.trim_end_matches('…').len(), QUOTE);
    }
}
