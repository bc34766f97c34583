//! Tool names as APIs accept them, and the collision rule.
//!
//! Cloud APIs accept tool names matching `^[a-zA-Z0-9_-]{1,64}$`. MCP servers
//! may use other characters (dots, slashes, spaces), so every name is
//! *sanitized*: each other character becomes `_`, an empty name becomes
//! `tool`, and the result is cut to 64 characters.
//!
//! When two sources offer the same (sanitized) name, the one with precedence
//! keeps it: Rust function tools first, then MCP servers in the order they
//! were added (for a config file, file order). A later tool gets
//! `<server>__<tool>` (sanitized, cut to 64); if even that is taken, `_2`,
//! `_3`, ... is appended (cutting the name to keep 64). The same inputs in
//! the same order always give the same names.

use std::collections::HashSet;

/// The longest name APIs accept.
pub const MAX_NAME_LEN: usize = 64;

/// Whether `name` is already acceptable to every API (`^[a-zA-Z0-9_-]{1,64}$`).
pub fn is_valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// `name` with every character outside `[a-zA-Z0-9_-]` replaced by `_`,
/// cut to 64 characters; `tool` when nothing is left.
pub fn sanitize_name(name: &str) -> String {
    let mut out: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(MAX_NAME_LEN)
        .collect();
    if out.is_empty() {
        out.push_str("tool");
    }
    out
}

/// Hands out unique names in precedence order (see the module docs).
#[derive(Debug, Default)]
pub struct NameAllocator {
    taken: HashSet<String>,
}

impl NameAllocator {
    /// An allocator with no names taken.
    pub fn new() -> Self {
        Self::default()
    }

    /// The name for tool `tool` of source `source`, unique among those
    /// handed out so far.
    pub fn allocate(&mut self, source: &str, tool: &str) -> String {
        let bare = sanitize_name(tool);
        if self.taken.insert(bare.clone()) {
            return bare;
        }
        let prefixed = sanitize_name(&format!("{source}__{tool}"));
        if self.taken.insert(prefixed.clone()) {
            return prefixed;
        }
        for n in 2usize.. {
            let suffix = format!("_{n}");
            let keep = MAX_NAME_LEN
                .saturating_sub(suffix.len())
                .min(prefixed.len());
            let candidate = format!("{}{suffix}", &prefixed[..keep]);
            if self.taken.insert(candidate.clone()) {
                return candidate;
            }
        }
        // The loop above ends: only finitely many names are taken.
        prefixed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sanitizes_predictably() {
        assert_eq!(sanitize_name("files.read"), "files_read");
        assert_eq!(sanitize_name("a b/c"), "a_b_c");
        assert_eq!(sanitize_name("get-sum"), "get-sum");
        assert_eq!(sanitize_name(""), "tool");
        assert_eq!(sanitize_name("héllo"), "h_llo");
        assert_eq!(sanitize_name(&"x".repeat(100)).len(), 64);
        assert!(is_valid_name(&sanitize_name("weird name!*?")));
    }

    #[test]
    fn first_keeps_bare_name_later_get_prefix_then_number() {
        let mut a = NameAllocator::new();
        assert_eq!(a.allocate("one", "echo"), "echo");
        assert_eq!(a.allocate("two", "echo"), "two__echo");
        assert_eq!(a.allocate("three", "echo"), "three__echo");
        // A tool literally named like a prefixed one pushes the real collision to a number.
        assert_eq!(a.allocate("x", "four__echo"), "four__echo");
        assert_eq!(a.allocate("four", "echo"), "four__echo_2");
        assert_eq!(a.allocate("four", "echo"), "four__echo_3");
    }

    #[test]
    fn long_names_stay_within_64() {
        let mut a = NameAllocator::new();
        let long = "t".repeat(70);
        let first = a.allocate("s", &long);
        let second = a.allocate("s", &long);
        let third = a.allocate("s", &long);
        for n in [&first, &second, &third] {
            assert!(is_valid_name(n), "{n}");
        }
        assert_ne!(first, second);
        assert_ne!(second, third);
        assert!(third.ends_with("_2"));
    }
}
