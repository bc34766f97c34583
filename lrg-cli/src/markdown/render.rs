//! One Markdown text to ANSI-styled terminal text.
//!
//! Model output is untrusted: control characters in it (an escape sequence
//! could move the cursor, retitle the window or hide text) are dropped
//! before any of it reaches the terminal; only the styles written here are.

use pulldown_cmark::{Alignment, CodeBlockKind, Event, HeadingLevel, Options, Parser, Tag, TagEnd};
use unicode_width::UnicodeWidthStr as _;

const BOLD: &str = "1";
const ITALIC: &str = "3";
const UNDERLINE: &str = "4";
const STRIKE: &str = "9";
const DIM: &str = "2";
const CODE: &str = "36";
const CODE_BLOCK: &str = "33";
const HEADING_1: &str = "1;4";

/// `markdown` styled for a terminal, ending with a newline (empty for
/// empty input).
pub fn render(markdown: &str) -> String {
    let options =
        Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TASKLISTS;
    let mut r = Renderer {
        at_line_start: true,
        ..Renderer::default()
    };
    for event in Parser::new_ext(markdown, options) {
        r.event(event);
    }
    if !r.at_line_start {
        r.out.push('\n');
    }
    r.out
}

/// `text` without ANSI escape sequences (for widths, and tests).
pub fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            // CSI: ESC [ params final-byte.
            if chars.next() == Some('[') {
                for c in chars.by_ref() {
                    if ('\x40'..='\x7e').contains(&c) {
                        break;
                    }
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// What a container puts at the start of each line: `first` on its first
/// line, `rest` after.
struct Container {
    first: String,
    rest: String,
    used: bool,
}

struct List {
    next: Option<u64>,
    depth: usize,
}

#[derive(Default)]
struct Table {
    aligns: Vec<Alignment>,
    rows: Vec<Vec<String>>,
    head_rows: usize,
    in_head: bool,
    /// The output around the table, set aside while a cell is written.
    outer: String,
}

#[derive(Default)]
struct Renderer {
    out: String,
    at_line_start: bool,
    /// Something was written: the next block is set apart by a blank line.
    wrote_block: bool,
    containers: Vec<Container>,
    /// Active SGR codes, re-applied after each line start.
    styles: Vec<&'static str>,
    lists: Vec<List>,
    /// Link targets, shown after the link text.
    links: Vec<String>,
    in_code_block: bool,
    table: Option<Table>,
    /// Items of a tight list hold no paragraphs: their blocks are not set
    /// apart.
    tight: Vec<bool>,
}

impl Renderer {
    fn event(&mut self, event: Event<'_>) {
        match event {
            Event::Start(tag) => self.start(tag),
            Event::End(tag) => self.end(tag),
            Event::Text(text) if self.in_code_block => self.code_lines(&text),
            Event::Text(text) => self.text(&text),
            Event::Code(code) => {
                self.push_style(CODE);
                self.text(&code);
                self.pop_style();
            }
            Event::InlineMath(t) | Event::DisplayMath(t) => self.text(&t),
            // Raw HTML is shown as written: a terminal runs none of it.
            Event::Html(html) => self.text(&html),
            Event::InlineHtml(html) => self.text(&html),
            Event::FootnoteReference(name) => self.text(&format!("[^{name}]")),
            Event::SoftBreak | Event::HardBreak => self.newline(),
            Event::Rule => {
                self.block_gap();
                self.push_style(DIM);
                self.text(&"─".repeat(40));
                self.pop_style();
                self.newline();
                self.wrote_block = true;
            }
            Event::TaskListMarker(done) => self.text(if done { "☑ " } else { "☐ " }),
        }
    }

    fn start(&mut self, tag: Tag<'_>) {
        match tag {
            Tag::Paragraph => self.block_gap(),
            Tag::Heading { level, .. } => {
                self.block_gap();
                self.push_style(if level == HeadingLevel::H1 {
                    HEADING_1
                } else {
                    BOLD
                });
            }
            Tag::BlockQuote(_) => {
                self.block_gap();
                let bar = sgr(DIM, "│ ");
                self.containers.push(Container {
                    first: bar.clone(),
                    rest: bar,
                    used: false,
                });
            }
            Tag::CodeBlock(kind) => {
                self.block_gap();
                if let CodeBlockKind::Fenced(lang) = &kind
                    && !lang.trim().is_empty()
                {
                    let lang = clean(lang.split_whitespace().next().unwrap_or_default());
                    self.push_style(DIM);
                    self.text(&lang);
                    self.pop_style();
                    self.newline();
                }
                self.in_code_block = true;
            }
            Tag::List(start) => {
                if self.lists.is_empty() {
                    self.block_gap();
                } else if !self.at_line_start {
                    self.newline();
                }
                let depth = self.lists.len();
                self.lists.push(List { next: start, depth });
                self.tight.push(true);
            }
            Tag::Item => {
                if !self.at_line_start {
                    self.newline();
                }
                if self.wrote_block && !self.tight.last().copied().unwrap_or(true) {
                    self.blank_line();
                }
                self.wrote_block = false;
                let marker = match self.lists.last_mut() {
                    Some(List { next: Some(n), .. }) => {
                        let marker = format!("{n}. ");
                        *n += 1;
                        marker
                    }
                    Some(List { depth, .. }) => {
                        format!("{} ", ["•", "◦", "▪"][*depth % 3])
                    }
                    None => "• ".to_string(),
                };
                let rest = " ".repeat(marker.width());
                self.containers.push(Container {
                    first: marker,
                    rest,
                    used: false,
                });
            }
            Tag::Table(aligns) => {
                self.block_gap();
                self.table = Some(Table {
                    aligns,
                    ..Table::default()
                });
            }
            Tag::TableHead => {
                if let Some(t) = &mut self.table {
                    t.in_head = true;
                    t.rows.push(Vec::new());
                }
            }
            Tag::TableRow => {
                if let Some(t) = &mut self.table {
                    t.rows.push(Vec::new());
                }
            }
            Tag::TableCell => {
                if let Some(t) = &mut self.table {
                    t.outer = std::mem::take(&mut self.out);
                    if t.in_head {
                        self.styles.push(BOLD);
                        self.out.push_str(&format!("\x1b[{BOLD}m"));
                    }
                }
            }
            Tag::Emphasis => self.push_style(ITALIC),
            Tag::Strong => self.push_style(BOLD),
            Tag::Strikethrough => self.push_style(STRIKE),
            Tag::Link { dest_url, .. } => {
                self.push_style(UNDERLINE);
                self.links.push(dest_url.to_string());
            }
            Tag::Image { dest_url, .. } => {
                // Never fetched: the picture is named, with where it is.
                self.text("[image: ");
                self.links.push(dest_url.to_string());
            }
            Tag::HtmlBlock => self.block_gap(),
            Tag::FootnoteDefinition(name) => {
                self.block_gap();
                self.text(&format!("[^{name}]: "));
            }
            Tag::DefinitionList
            | Tag::DefinitionListTitle
            | Tag::DefinitionListDefinition
            | Tag::Superscript
            | Tag::Subscript
            | Tag::MetadataBlock(_) => {}
        }
    }

    fn end(&mut self, tag: TagEnd) {
        match tag {
            TagEnd::Paragraph | TagEnd::HtmlBlock | TagEnd::FootnoteDefinition => {
                self.end_block();
                if let Some(tight) = self.tight.last_mut() {
                    // A paragraph in an item: the list is loose.
                    if !self.lists.is_empty() {
                        *tight = false;
                    }
                }
            }
            TagEnd::Heading(_) => {
                self.pop_style();
                self.end_block();
            }
            TagEnd::BlockQuote(_) => {
                self.containers.pop();
                self.wrote_block = true;
            }
            TagEnd::CodeBlock => {
                self.in_code_block = false;
                self.end_block();
            }
            TagEnd::List(_) => {
                self.lists.pop();
                self.tight.pop();
                if !self.at_line_start {
                    self.newline();
                }
                self.wrote_block = true;
            }
            TagEnd::Item => {
                if !self.at_line_start {
                    self.newline();
                }
                self.containers.pop();
                self.wrote_block = true;
            }
            TagEnd::Table => {
                if let Some(table) = self.table.take() {
                    self.table(&table);
                }
                self.wrote_block = true;
            }
            TagEnd::TableHead => {
                if let Some(t) = &mut self.table {
                    t.in_head = false;
                    t.head_rows = t.rows.len();
                }
            }
            TagEnd::TableCell => {
                if let Some(t) = &mut self.table {
                    if t.in_head {
                        self.styles.pop();
                        self.out.push_str("\x1b[0m");
                    }
                    let cell = std::mem::replace(&mut self.out, std::mem::take(&mut t.outer));
                    if let Some(row) = t.rows.last_mut() {
                        row.push(cell);
                    }
                }
            }
            TagEnd::Emphasis | TagEnd::Strong | TagEnd::Strikethrough => self.pop_style(),
            TagEnd::Link => {
                self.pop_style();
                if let Some(url) = self.links.pop() {
                    self.link_target(&url);
                }
            }
            TagEnd::Image => {
                self.text("]");
                if let Some(url) = self.links.pop() {
                    self.link_target(&url);
                }
            }
            TagEnd::TableRow
            | TagEnd::DefinitionList
            | TagEnd::DefinitionListTitle
            | TagEnd::DefinitionListDefinition
            | TagEnd::Superscript
            | TagEnd::Subscript
            | TagEnd::MetadataBlock(_) => {}
        }
    }

    /// " (url)", dimmed, unless the text already was the url.
    fn link_target(&mut self, url: &str) {
        let shown = strip_ansi(self.current_line());
        if !url.is_empty() && !shown.ends_with(url) {
            self.push_style(DIM);
            self.text(&format!(" ({url})"));
            self.pop_style();
        }
    }

    fn current_line(&self) -> &str {
        self.out.rsplit('\n').next().unwrap_or_default()
    }

    /// Start a block: a blank line after the block before it.
    fn block_gap(&mut self) {
        if !self.at_line_start && !self.out.is_empty() {
            self.newline();
        }
        if self.wrote_block {
            self.blank_line();
        }
        self.wrote_block = false;
    }

    fn end_block(&mut self) {
        if !self.at_line_start {
            self.newline();
        }
        self.wrote_block = true;
    }

    /// An empty line, with the bars of the quotes it is in.
    fn blank_line(&mut self) {
        let prefix = self.prefix();
        self.out.push_str(strip_ansi(&prefix).trim_end());
        self.out.push('\n');
        self.at_line_start = true;
    }

    fn newline(&mut self) {
        if self.table.is_some() {
            // A cell is one line.
            self.out.push(' ');
            return;
        }
        if !self.styles.is_empty() {
            self.out.push_str("\x1b[0m");
        }
        self.out.push('\n');
        self.at_line_start = true;
    }

    /// The containers' line starts, marking each first line used.
    fn prefix(&mut self) -> String {
        let mut prefix = String::new();
        for c in &mut self.containers {
            if c.used {
                prefix.push_str(&c.rest);
            } else {
                prefix.push_str(&c.first);
                c.used = true;
            }
        }
        prefix
    }

    fn text(&mut self, text: &str) {
        let text = clean(text);
        for (i, line) in text.split('\n').enumerate() {
            if i > 0 {
                self.newline();
            }
            if line.is_empty() {
                continue;
            }
            self.line_start();
            self.out.push_str(line);
        }
    }

    /// Begin a line when at one: the containers' prefixes, then the open
    /// styles again.
    fn line_start(&mut self) {
        // A table cell is written to a buffer of its own, with no prefix.
        if self.table.is_some() || !self.at_line_start {
            return;
        }
        self.at_line_start = false;
        let prefix = self.prefix();
        self.out.push_str(&prefix);
        if !self.styles.is_empty() {
            self.out
                .push_str(&format!("\x1b[{}m", self.styles.join(";")));
        }
    }

    fn code_lines(&mut self, code: &str) {
        for line in code.split_inclusive('\n') {
            let body = line.strip_suffix('\n').unwrap_or(line);
            if body.is_empty() {
                self.blank_line();
                continue;
            }
            self.line_start();
            self.out.push_str("    ");
            self.out.push_str(&sgr(CODE_BLOCK, &clean(body)));
            if line.ends_with('\n') {
                self.newline();
            }
        }
    }

    fn push_style(&mut self, code: &'static str) {
        self.styles.push(code);
        if !self.at_line_start || self.table.is_some() {
            self.out.push_str(&format!("\x1b[{code}m"));
        }
    }

    fn pop_style(&mut self) {
        self.styles.pop();
        if !self.at_line_start || self.table.is_some() {
            self.out.push_str("\x1b[0m");
            if !self.styles.is_empty() {
                self.out
                    .push_str(&format!("\x1b[{}m", self.styles.join(";")));
            }
        }
    }

    /// A table with box-drawing borders, columns as wide as their widest
    /// cell, aligned as the delimiter row says.
    fn table(&mut self, table: &Table) {
        let columns = table.rows.iter().map(Vec::len).max().unwrap_or(0);
        let widths: Vec<usize> = (0..columns)
            .map(|c| {
                table
                    .rows
                    .iter()
                    .filter_map(|row| row.get(c))
                    .map(|cell| strip_ansi(cell.trim()).width())
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let border = |left: &str, mid: &str, right: &str| {
            let inner: Vec<String> = widths.iter().map(|w| "─".repeat(w + 2)).collect();
            sgr(DIM, &format!("{left}{}{right}", inner.join(mid)))
        };
        let mut lines = vec![border("┌", "┬", "┐")];
        for (i, row) in table.rows.iter().enumerate() {
            if i == table.head_rows && i > 0 {
                lines.push(border("├", "┼", "┤"));
            }
            let bar = sgr(DIM, "│");
            let mut line = bar.clone();
            for (c, width) in widths.iter().enumerate() {
                let cell = row.get(c).map_or("", |s| s.trim());
                let pad = width.saturating_sub(strip_ansi(cell).width());
                let (before, after) = match table.aligns.get(c) {
                    Some(Alignment::Right) => (pad, 0),
                    Some(Alignment::Center) => (pad / 2, pad - pad / 2),
                    _ => (0, pad),
                };
                line.push_str(&format!(
                    " {}{cell}{} {bar}",
                    " ".repeat(before),
                    " ".repeat(after)
                ));
            }
            lines.push(line);
        }
        lines.push(border("└", "┴", "┘"));
        for line in lines {
            self.line_start();
            self.out.push_str(&line);
            self.newline();
        }
    }
}

fn sgr(code: &str, text: &str) -> String {
    if text.is_empty() {
        String::new()
    } else {
        format!("\x1b[{code}m{text}\x1b[0m")
    }
}

/// `text` less the control characters a terminal would act on (tabs and
/// newlines stay).
fn clean(text: &str) -> String {
    text.chars()
        .filter(|c| !c.is_control() || *c == '\n' || *c == '\t')
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain(md: &str) -> String {
        strip_ansi(&render(md))
    }

    #[test]
    fn headings_lists_code_and_tables() {
        let md = "## Done\n\nSome **bold** and `code`.\n\n- one\n- two\n  - nested\n\n1. first\n2. second\n\n```rust\nfn main() {}\n```\n\n| name | n |\n|:-----|--:|\n| a | 1 |\n| long | 22 |\n";
        let out = render(md);
        assert!(out.contains("\x1b[1mDone\x1b[0m"), "{out:?}");
        assert!(out.contains("\x1b[1mbold\x1b[0m"), "{out:?}");
        assert!(out.contains("\x1b[36mcode\x1b[0m"), "{out:?}");
        assert_eq!(
            strip_ansi(&out),
            "Done\n\
             \n\
             Some bold and code.\n\
             \n\
             • one\n\
             • two\n  ◦ nested\n\
             \n\
             1. first\n\
             2. second\n\
             \n\
             rust\n    fn main() {}\n\
             \n\
             ┌──────┬────┐\n\
             │ name │  n │\n\
             ├──────┼────┤\n\
             │ a    │  1 │\n\
             │ long │ 22 │\n\
             └──────┴────┘\n"
        );
    }

    #[test]
    fn quotes_links_tasks_and_rules() {
        assert_eq!(
            plain(
                "> quoted\n> more\n\nA [link](https://x.test) and <https://y.test>.\n\n- [x] done\n- [ ] not\n\n---\n"
            ),
            "│ quoted\n│ more\n\nA link (https://x.test) and https://y.test.\n\n• ☑ done\n• ☐ not\n\n────────────────────────────────────────\n"
        );
    }

    #[test]
    fn control_characters_from_the_model_never_reach_the_terminal() {
        let out = render("evil \x1b]0;title\x07 and \x1b[2J here\n\n```\n\x1b[31mred\n```\n");
        let ours = ["\x1b[0m", "\x1b[33m"];
        let mut rest = out.clone();
        for code in ours {
            rest = rest.replace(code, "");
        }
        assert!(!rest.contains('\x1b') && !rest.contains('\x07'), "{out:?}");
    }

    #[test]
    fn an_image_is_named_never_shown() {
        assert_eq!(
            plain("![a cat](https://img.test/cat.png)"),
            "[image: a cat] (https://img.test/cat.png)\n"
        );
    }

    #[test]
    fn empty_input_renders_nothing() {
        assert_eq!(render(""), "");
        assert_eq!(render("\n\n"), "");
    }
}
