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
//!
//! A call whose name is close to an offered one but not it
//! (`functions.get_weather`, `Get_Weather`, `server__tool`,
//! `mcp__server__tool`) is [repaired](repair_call) to the one offered name
//! it fits, natively called or written as text alike, with a warning for
//! the person; a name that fits several is not guessed, and the model is
//! told the candidates ([`unknown_tool_text`]).

use std::borrow::Cow;
use std::collections::HashSet;

use lrg_providers::text_tools::{NameMatch, RECOVERY_TOOL, resolve_tool_name};
use lrg_providers::{ToolCall, ToolSpec};

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

/// `call` with its name as offered in `specs`, and the warning for the
/// person when it was repaired. A call to an offered name, to no name that
/// fits exactly one tool, or to lrg's recovery stand-in is returned as is.
pub fn repair_call<'a>(
    call: &'a ToolCall,
    specs: &[ToolSpec],
) -> (Cow<'a, ToolCall>, Option<String>) {
    if call.name == RECOVERY_TOOL || specs.iter().any(|s| s.name == call.name) {
        return (Cow::Borrowed(call), None);
    }
    let offered: Vec<String> = specs.iter().map(|s| s.name.clone()).collect();
    match resolve_tool_name(&call.name, &offered) {
        NameMatch::Repaired { name, .. } => {
            let warning = format!(
                "the model called `{}`, which is no tool's name; ran `{name}`, the one offered tool it matches",
                call.name
            );
            let repaired = ToolCall {
                name: name.to_string(),
                ..call.clone()
            };
            (Cow::Owned(repaired), Some(warning))
        }
        _ => (Cow::Borrowed(call), None),
    }
}

/// What the model is told for a call to `name`, which no offered tool has:
/// the candidates when it fits several, else the list of tools.
pub fn unknown_tool_text(name: &str, specs: &[ToolSpec]) -> String {
    let offered: Vec<String> = specs.iter().map(|s| s.name.clone()).collect();
    if let NameMatch::Ambiguous(candidates) = resolve_tool_name(name, &offered) {
        return format!(
            "There is no tool named `{name}`, and it fits several: {}. Call the one you mean by its exact name.",
            candidates.join(", ")
        );
    }
    let names: Vec<&str> = offered.iter().map(String::as_str).collect();
    super::unknown_tool_message(name, &names)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(name: &str) -> ToolSpec {
        ToolSpec {
            name: name.into(),
            description: String::new(),
            input_schema: serde_json::json!({"type": "object"}),
            annotations: Default::default(),
            output_schema: None,
        }
    }

    fn call(name: &str) -> ToolCall {
        ToolCall {
            id: "c1".into(),
            name: name.into(),
            arguments: serde_json::json!({}),
        }
    }

    #[test]
    fn a_close_name_is_repaired_with_a_warning_and_an_ambiguous_one_is_not() {
        let specs = [
            spec("get_weather"),
            spec("github__search"),
            spec("gitlab__search"),
        ];
        for written in [
            "functions.get_weather",
            "Get_Weather",
            "weather__get_weather",
            "mcp__weather__get_weather",
        ] {
            let written_call = call(written);
            let (repaired, warning) = repair_call(&written_call, &specs);
            assert_eq!(repaired.name, "get_weather", "{written}");
            let warning = warning.unwrap();
            assert!(
                warning.contains(written) && warning.contains("ran `get_weather`"),
                "{warning}"
            );
        }
        let exact = call("get_weather");
        let (same, warning) = repair_call(&exact, &specs);
        assert!(matches!(same, Cow::Borrowed(_)) && warning.is_none());
        let ambiguous = call("search");
        let (kept, warning) = repair_call(&ambiguous, &specs);
        assert_eq!((kept.name.as_str(), warning), ("search", None));
        assert_eq!(
            unknown_tool_text("search", &specs),
            "There is no tool named `search`, and it fits several: github__search, gitlab__search. \
             Call the one you mean by its exact name."
        );
        assert!(unknown_tool_text("nope", &specs).contains("Available tools: get_weather"));
        let stand_in = call(RECOVERY_TOOL);
        let (recovery, warning) = repair_call(&stand_in, &specs);
        assert_eq!((recovery.name.as_str(), warning), (RECOVERY_TOOL, None));
    }

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
