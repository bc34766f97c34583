//! How the CLI styles what a person reads: ANSI escapes only on a terminal
//! ([`Style`]), and long text cut to a line ([`clip`], lrg's one helper for
//! that).

pub use lrg_providers::text::clip;

/// ANSI styling, on only when the stream is a terminal.
#[derive(Debug, Clone, Copy)]
pub struct Style {
    /// Whether to emit escape codes.
    pub ansi: bool,
}

impl Style {
    /// Dimmed text (reasoning, arguments).
    pub fn dim(self, text: &str) -> String {
        self.wrap("2", text)
    }

    /// Bold text.
    pub fn bold(self, text: &str) -> String {
        self.wrap("1", text)
    }

    /// Red text (errors).
    pub fn red(self, text: &str) -> String {
        self.wrap("31", text)
    }

    fn wrap(self, code: &str, text: &str) -> String {
        if self.ansi && !text.is_empty() {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_string()
        }
    }
}
