//! Replies as Markdown in the terminal: CommonMark with GFM tables, task
//! lists and strikethrough, parsed by `pulldown-cmark` and styled with ANSI
//! codes here ([`render()`]).
//!
//! Streaming: a reply arrives in deltas, and Markdown cannot be styled
//! before its block is known (a line `| a | b |` is a paragraph until the
//! `|---|` under it makes it a table; a line under a paragraph can turn it
//! into a heading). So [`Blocks`] holds the text of the block being written
//! and prints each block once it is finished: at a heading line, at the end
//! of a fenced code block, and at the first line after a blank line that
//! does not continue the block (an indented line continues a list item).
//! Nothing is ever printed twice or erased, so what scrolls by stays
//! readable; the cost is that a paragraph shows when it is done, not word by
//! word.
//!
//! Used only when stdout is a terminal and `NO_COLOR` is unset: piped
//! output gets the model's text as it came.

mod render;

pub use render::render;

/// Whether replies on stdout are shown as styled Markdown: stdout is a
/// terminal, `NO_COLOR` is not set (to anything) and `TERM` is not `dumb`.
pub fn wanted() -> bool {
    use std::io::IsTerminal as _;
    std::io::stdout().is_terminal()
        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
        && std::env::var_os("TERM").is_none_or(|t| t != "dumb")
}

/// A reply's text, gathered and rendered block by block (see the module
/// doc).
#[derive(Debug, Default)]
pub struct Blocks {
    /// The text not yet printed: the open block, then the start of the
    /// next line.
    pending: String,
    /// The open fenced code block's fence (its character and length).
    fence: Option<(char, usize)>,
    /// The open block is followed by a blank line: the next line that does
    /// not continue it starts a new block.
    after_blank: bool,
    /// Whether any block was printed (blocks after the first are set apart
    /// by a blank line).
    printed: bool,
}

impl Blocks {
    /// Add a delta; the finished blocks it completes, rendered (empty when
    /// none).
    pub fn push(&mut self, delta: &str) -> String {
        let start = self.pending.len();
        self.pending.push_str(delta);
        let mut out = String::new();
        // Look at each complete line the delta finished, from the line it
        // started in.
        let mut line_start = self.pending[..start].rfind('\n').map_or(0, |i| i + 1);
        while let Some(nl) = self.pending[line_start..].find('\n') {
            let line_end = line_start + nl + 1;
            let line = self.pending[line_start..line_end].to_string();
            match self.boundary(&line) {
                Boundary::None => line_start = line_end,
                Boundary::Before => {
                    out.push_str(&self.emit(line_start));
                    line_start = 0;
                    // The line starts the next block: look at it again.
                    if let Boundary::After = self.boundary(&line) {
                        out.push_str(&self.emit(line.len()));
                    } else {
                        line_start = line.len();
                    }
                }
                Boundary::After => {
                    out.push_str(&self.emit(line_end));
                    line_start = 0;
                }
            }
        }
        out
    }

    /// Render what is left (the reply ended).
    pub fn finish(&mut self) -> String {
        let out = self.emit(self.pending.len());
        self.fence = None;
        self.after_blank = false;
        self.printed = false;
        out
    }

    /// Whether the complete `line` (with its newline) ends the open block
    /// before it, after it, or not at all. Tracks fences and blank lines.
    fn boundary(&mut self, line: &str) -> Boundary {
        let text = line.trim_end_matches(['\n', '\r']);
        if let Some((ch, len)) = self.fence {
            if closes_fence(text, ch, len) {
                self.fence = None;
                return Boundary::After;
            }
            return Boundary::None;
        }
        if text.trim().is_empty() {
            self.after_blank = true;
            return Boundary::None;
        }
        if self.after_blank && !text.starts_with([' ', '\t']) {
            self.after_blank = false;
            return Boundary::Before;
        }
        self.after_blank = false;
        if let Some(fence) = opens_fence(text) {
            self.fence = Some(fence);
            return Boundary::None;
        }
        if is_atx_heading(text) {
            return Boundary::After;
        }
        Boundary::None
    }

    /// Render and drop `pending[..end]`.
    fn emit(&mut self, end: usize) -> String {
        let block: String = self.pending.drain(..end).collect();
        if block.trim().is_empty() {
            return String::new();
        }
        let rendered = render(&block);
        if rendered.is_empty() {
            return String::new();
        }
        let gap = if self.printed { "\n" } else { "" };
        self.printed = true;
        format!("{gap}{rendered}")
    }
}

enum Boundary {
    None,
    Before,
    After,
}

/// The fence a line opens: up to three spaces, then three or more backticks
/// or tildes (a backtick fence's info string has no backtick).
fn opens_fence(line: &str) -> Option<(char, usize)> {
    let indent = line.len() - line.trim_start_matches(' ').len();
    if indent > 3 {
        return None;
    }
    let rest = &line[indent..];
    let ch = rest.chars().next().filter(|c| *c == '`' || *c == '~')?;
    let len = rest.chars().take_while(|c| *c == ch).count();
    if len < 3 || (ch == '`' && rest[len..].contains('`')) {
        return None;
    }
    Some((ch, len))
}

fn closes_fence(line: &str, ch: char, len: usize) -> bool {
    let indent = line.len() - line.trim_start_matches(' ').len();
    if indent > 3 {
        return false;
    }
    let rest = line[indent..].trim_end();
    rest.chars().count() >= len && rest.chars().all(|c| c == ch)
}

fn is_atx_heading(line: &str) -> bool {
    let rest = line.trim_start_matches(' ');
    if line.len() - rest.len() > 3 {
        return false;
    }
    let hashes = rest.chars().take_while(|c| *c == '#').count();
    (1..=6).contains(&hashes)
        && rest[hashes..]
            .chars()
            .next()
            .is_none_or(|c| c == ' ' || c == '\t')
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feed `text` in deltas of `size` bytes (on char boundaries); what is
    /// printed after each delta, then at the end.
    fn stream(text: &str, size: usize) -> Vec<String> {
        let mut blocks = Blocks::default();
        let mut printed = Vec::new();
        let chars: Vec<char> = text.chars().collect();
        for chunk in chars.chunks(size) {
            let out = blocks.push(&chunk.iter().collect::<String>());
            if !out.is_empty() {
                printed.push(out);
            }
        }
        let out = blocks.finish();
        if !out.is_empty() {
            printed.push(out);
        }
        printed
    }

    #[test]
    fn blocks_are_printed_when_finished_whatever_the_deltas() {
        let text = "# Title\nFirst paragraph\nstill first.\n\nSecond.\n\n```rust\nlet a = 1;\n\nlet b = 2;\n```\nAfter.\n";
        let whole = stream(text, text.len()).concat();
        for size in [2, 3, 7] {
            assert_eq!(stream(text, size).concat(), whole, "deltas of {size}");
        }
        // Word by word: the heading, the first paragraph (once the line
        // after the blank one came), the second, the code block (blank line
        // and all), the last.
        let blocks = stream(text, 1);
        assert_eq!(blocks.concat(), whole);
        assert_eq!(blocks.len(), 5, "{blocks:#?}");
        assert!(blocks[3].contains("let a = 1;") && blocks[3].contains("let b = 2;"));
        assert_eq!(strip(&blocks[1]), "\nFirst paragraph\nstill first.\n");
        assert_eq!(
            strip(&whole),
            "Title\n\nFirst paragraph\nstill first.\n\nSecond.\n\nrust\n    let a = 1;\n\n    let b = 2;\n\nAfter.\n"
        );
    }

    #[test]
    fn a_table_is_one_block() {
        let printed = stream("| a | b |\n|---|---|\n| 1 | 2 |\n\nDone.\n", 1);
        assert_eq!(printed.len(), 2, "{printed:#?}");
        assert!(printed[0].contains('┌'), "{printed:#?}");
    }

    #[test]
    fn an_indented_line_after_a_blank_continues_a_list_item() {
        let printed = stream("1. one\n\n   more of one\n2. two\n", 4);
        assert_eq!(printed.len(), 1, "{printed:#?}");
        assert_eq!(strip(&printed[0]), "1. one\n\n   more of one\n\n2. two\n");
    }

    #[test]
    fn fences() {
        assert_eq!(opens_fence("```rust"), Some(('`', 3)));
        assert_eq!(opens_fence("~~~~"), Some(('~', 4)));
        assert_eq!(opens_fence("``"), None);
        assert_eq!(opens_fence("```a`b"), None);
        assert_eq!(opens_fence("    ```"), None);
        assert!(closes_fence("````", '`', 3));
        assert!(!closes_fence("``", '`', 3));
        assert!(!closes_fence("```x", '`', 3));
        assert!(is_atx_heading("## Hi"));
        assert!(!is_atx_heading("#hashtag"));
    }

    fn strip(s: &str) -> String {
        render::strip_ansi(s)
    }
}
