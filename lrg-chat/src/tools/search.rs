//! Tool search: when a session has more tools than a model should see at
//! once, it is offered a few of them and `search_tools`, and finds the rest
//! when it needs them (the third design's auto-discovery; Anthropic's tool
//! search and goose's router answer the same need).
//!
//! - [`ToolSearch::Auto`] (the default) turns search on above
//!   [`AUTO_MAX_TOOLS`] tools, or when the tools' schemas would take more
//!   than [`AUTO_MAX_WINDOW_SHARE`] of a context window that is known (never
//!   of an assumed one).
//! - The model is then offered the tools the configuration marks `always`,
//!   the tools this chat already used, lrg's own tools ([`OWN_TOOLS`]),
//!   what was found for this message, and `search_tools {query, limit?}`.
//! - Before a message's first turn, the message itself is searched and its
//!   [`PRE_OFFERED`] best matches are offered, so a one-tool task needs no
//!   search call.
//! - Matches are ranked with BM25 (the `bm25` crate) over each tool's name
//!   (split at `_`, `-`, `.` and camelCase), title, description, and its
//!   arguments' names and descriptions.
//!
//! A call to a tool that exists but was not offered runs as if it had been
//! found: deferring a tool never makes it unreachable.

use std::collections::HashSet;

use bm25::{Document, Language, SearchEngine, SearchEngineBuilder};
use lrg_providers::{ToolAnnotations, ToolSpec};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// Whether a session searches its tools instead of offering them all.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolSearch {
    /// Search above [`AUTO_MAX_TOOLS`] tools, or above
    /// [`AUTO_MAX_WINDOW_SHARE`] of a known window.
    #[default]
    Auto,
    /// Always search (even with few tools).
    On,
    /// Offer every tool, always.
    Off,
}

impl std::str::FromStr for ToolSearch {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "auto" => Ok(Self::Auto),
            "on" => Ok(Self::On),
            "off" => Ok(Self::Off),
            other => Err(format!("`{other}` is not auto, on or off")),
        }
    }
}

/// Above this many tools, [`ToolSearch::Auto`] searches.
pub const AUTO_MAX_TOOLS: usize = 30;
/// Above this share of a known context window (the tools' schemas, at
/// about 3 characters a token), [`ToolSearch::Auto`] searches.
pub const AUTO_MAX_WINDOW_SHARE: f64 = 0.10;
/// The search tool's name.
pub const SEARCH_TOOL: &str = "search_tools";
/// Matches a search returns when the model asks for no number.
pub const DEFAULT_LIMIT: usize = 5;
/// The most matches one search returns.
pub const MAX_LIMIT: usize = 20;
/// Matches of the message itself offered before its first turn.
pub const PRE_OFFERED: usize = 5;
/// lrg's own tools, offered whenever they exist, search or not.
pub const OWN_TOOLS: &[&str] = &[
    SEARCH_TOOL,
    "load_skill",
    "remember",
    "forget",
    "list_mcp_resources",
    "list_mcp_resource_templates",
    "read_mcp_resource",
    "spawn_sub_agent",
    "list_sub_agents",
    "read_sub_agent",
];

/// Characters of a description quoted per match.
const DESCRIPTION_CHARS: usize = 200;

/// Whether `mode` searches over `specs`, for a model whose window is
/// `window` (`None`: not known, so the window rule does not apply).
pub fn searches(mode: ToolSearch, specs: &[ToolSpec], window: Option<u32>) -> bool {
    match mode {
        ToolSearch::Off => false,
        ToolSearch::On => true,
        ToolSearch::Auto => {
            if specs.len() > AUTO_MAX_TOOLS {
                return true;
            }
            match window {
                Some(window) if window > 0 => {
                    let chars: usize = specs.iter().map(spec_chars).sum();
                    (chars as f64 / 3.0) > f64::from(window) * AUTO_MAX_WINDOW_SHARE
                }
                _ => false,
            }
        }
    }
}

fn spec_chars(spec: &ToolSpec) -> usize {
    spec.name.len() + spec.description.len() + value_chars(&spec.input_schema)
}

fn value_chars(value: &Value) -> usize {
    match value {
        Value::String(s) => s.len() + 2,
        Value::Array(items) => items.iter().map(value_chars).sum::<usize>() + items.len() + 2,
        Value::Object(map) => {
            map.iter()
                .map(|(k, v)| k.len() + 3 + value_chars(v))
                .sum::<usize>()
                + 2
        }
        _ => 5,
    }
}

/// A BM25 index over a list of tools.
pub struct ToolIndex {
    engine: SearchEngine<u32>,
    names: Vec<String>,
}

impl std::fmt::Debug for ToolIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolIndex")
            .field("tools", &self.names.len())
            .finish()
    }
}

impl ToolIndex {
    /// Index `specs` (the search tool itself is left out).
    pub fn new(specs: &[ToolSpec]) -> Self {
        let mut names = Vec::with_capacity(specs.len());
        let mut documents = Vec::with_capacity(specs.len());
        for spec in specs.iter().filter(|s| s.name != SEARCH_TOOL) {
            documents.push(Document::new(names.len() as u32, document(spec)));
            names.push(spec.name.clone());
        }
        let engine =
            SearchEngineBuilder::<u32>::with_documents(Language::English, documents).build();
        Self { engine, names }
    }

    /// How many tools it holds.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// The names of the best `limit` matches for `query`, best first; a
    /// tool named exactly (or by a split form of its name) comes first.
    pub fn search(&self, query: &str, limit: usize) -> Vec<&str> {
        let limit = limit.clamp(1, MAX_LIMIT);
        let mut out: Vec<&str> = Vec::with_capacity(limit);
        let wanted = query.trim();
        if let Some(exact) = self.names.iter().find(|n| n.eq_ignore_ascii_case(wanted)) {
            out.push(exact);
        }
        for result in self.engine.search(&split_name(query), limit + 1) {
            let Some(name) = self.names.get(result.document.id as usize) else {
                continue;
            };
            if result.score > 0.0 && !out.contains(&name.as_str()) {
                out.push(name);
            }
            if out.len() == limit {
                break;
            }
        }
        out
    }
}

/// What a tool is indexed by: its name split into words, title,
/// description, and each argument's name (split) and description.
pub fn document(spec: &ToolSpec) -> String {
    let mut text = split_name(&spec.name);
    for part in [
        spec.annotations.title.as_deref(),
        Some(spec.description.as_str()),
    ]
    .into_iter()
    .flatten()
    {
        text.push(' ');
        text.push_str(part);
    }
    if let Some(properties) = spec
        .input_schema
        .get("properties")
        .and_then(Value::as_object)
    {
        for (name, schema) in properties {
            text.push(' ');
            text.push_str(&split_name(name));
            if let Some(description) = schema.get("description").and_then(Value::as_str) {
                text.push(' ');
                text.push_str(description);
            }
        }
    }
    text
}

/// `get_weatherForecast-v2` → `get weather forecast v2`: the words of an
/// identifier, for matching it against what a person would write.
pub fn split_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 8);
    let mut previous: Option<char> = None;
    for c in name.chars() {
        if matches!(c, '_' | '-' | '.' | '/' | ':') {
            out.push(' ');
        } else {
            if c.is_uppercase() && previous.is_some_and(|p| p.is_lowercase() || p.is_ascii_digit())
            {
                out.push(' ');
            }
            out.extend(c.to_lowercase());
        }
        previous = Some(c);
    }
    out
}

/// The `search_tools` tool as offered to models.
pub fn search_tool_spec() -> ToolSpec {
    ToolSpec {
        name: SEARCH_TOOL.to_owned(),
        description: "Find tools for a task. Only some of the available tools are offered at \
                      first: describe what you need in a few words and the matching tools are \
                      offered from your next step on. Call it again with other words if none fits."
            .to_owned(),
        input_schema: json!({
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "What the tool should do, in a few words."},
                "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT,
                          "description": "How many tools to find (default 5)."}
            },
            "required": ["query"],
            "additionalProperties": false
        }),
        annotations: ToolAnnotations {
            read_only_hint: Some(true),
            title: Some("Search tools".to_owned()),
            ..Default::default()
        },
        output_schema: None,
    }
}

/// What a search tells the model: one line per tool found.
pub fn describe_found(specs: &[ToolSpec], names: &[&str]) -> String {
    if names.is_empty() {
        return "No tool matches. Try other words, or do the task without a tool.".to_owned();
    }
    let mut text = String::from("Found these tools; they are offered from your next step on:\n");
    for name in names {
        let description = specs
            .iter()
            .find(|s| s.name == *name)
            .map(|s| clip(&s.description, DESCRIPTION_CHARS))
            .unwrap_or_default();
        text.push_str(&format!("- {name}: {description}\n"));
    }
    text
}

/// The first line of `text`, clipped to `max` characters.
fn clip(text: &str, max: usize) -> String {
    lrg_providers::text::clip(text.lines().next().unwrap_or_default(), max)
}

/// The tools offered while searching: `specs` in their order, those in
/// `keep` (always-offered, used, found) and lrg's own, then the search
/// tool.
pub fn offered_subset(specs: &[ToolSpec], keep: &HashSet<String>) -> Vec<ToolSpec> {
    let mut out: Vec<ToolSpec> = specs
        .iter()
        .filter(|s| {
            s.name != SEARCH_TOOL
                && (keep.contains(&s.name) || OWN_TOOLS.contains(&s.name.as_str()))
        })
        .cloned()
        .collect();
    out.push(search_tool_spec());
    out
}

/// The arguments of a `search_tools` call: the query and the limit, or
/// what is wrong with them.
pub fn parse_call(arguments: &Value) -> Result<(String, usize), String> {
    let query = arguments
        .get("query")
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|q| !q.is_empty())
        .ok_or("`query` is required: a few words saying what the tool should do")?;
    let limit = match arguments.get("limit") {
        None | Some(Value::Null) => DEFAULT_LIMIT,
        Some(v) => v
            .as_u64()
            .filter(|n| (1..=MAX_LIMIT as u64).contains(n))
            .map(|n| n as usize)
            .ok_or(format!(
                "`limit` must be a whole number from 1 to {MAX_LIMIT}"
            ))?,
    };
    Ok((query.to_owned(), limit))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(name: &str, description: &str) -> ToolSpec {
        ToolSpec {
            name: name.into(),
            description: description.into(),
            input_schema: json!({"type": "object", "properties": {
                "city": {"type": "string", "description": "The city's name."}}}),
            annotations: ToolAnnotations::default(),
            output_schema: None,
        }
    }

    #[test]
    fn names_split_into_words() {
        assert_eq!(
            split_name("get_weatherForecast-v2"),
            "get weather forecast v2"
        );
        assert_eq!(split_name("listPRs"), "list prs");
        assert_eq!(split_name("github.search_issues"), "github search issues");
    }

    #[test]
    fn the_right_tool_ranks_first_and_an_exact_name_wins() {
        let specs = vec![
            tool("get_weather", "Current weather for a city."),
            tool("send_email", "Send an email message."),
            tool("create_invoice", "Create an invoice for a customer."),
        ];
        let index = ToolIndex::new(&specs);
        assert_eq!(index.search("what's the weather like", 2)[0], "get_weather");
        assert_eq!(index.search("email my boss", 1), vec!["send_email"]);
        assert_eq!(index.search("create_invoice", 1), vec!["create_invoice"]);
        assert!(index.search("zebra xylophone", 5).is_empty());
    }

    #[test]
    fn auto_searches_above_the_thresholds_only() {
        let few: Vec<ToolSpec> = (0..30).map(|i| tool(&format!("t{i}"), "x")).collect();
        assert!(!searches(ToolSearch::Auto, &few, None));
        assert!(searches(ToolSearch::On, &few, None));
        let many: Vec<ToolSpec> = (0..31).map(|i| tool(&format!("t{i}"), "x")).collect();
        assert!(searches(ToolSearch::Auto, &many, None));
        assert!(!searches(ToolSearch::Off, &many, None));
        // 30 tools of ~120 characters: 1,200 tokens, over 10% of 8,192.
        assert!(searches(ToolSearch::Auto, &few, Some(8_192)));
        assert!(!searches(ToolSearch::Auto, &few, Some(128_000)));
    }

    #[test]
    fn bad_calls_say_what_is_wrong() {
        assert_eq!(
            parse_call(&json!({"query": " maps "})).unwrap(),
            ("maps".into(), 5)
        );
        assert!(parse_call(&json!({})).unwrap_err().contains("`query`"));
        assert!(
            parse_call(&json!({"query": "x", "limit": 99}))
                .unwrap_err()
                .contains("1 to 20")
        );
    }
}
