//! The corpus of tool schemas the `schema_*` tests shape: real MCP servers'
//! tools, schemars-generated argument types, and hand-written choices.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One tool's name and input schema.
#[derive(Debug, Clone)]
pub struct Tool {
    /// `<source>/<tool>`.
    pub name: String,
    /// The input schema as the tool declares it.
    pub schema: Value,
}

pub fn fixtures_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/schemas")
}

/// The tools of a fixture file (an MCP `tools` array: `name` + `inputSchema`).
pub fn fixture(file: &str) -> Vec<Tool> {
    let path = fixtures_dir().join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let tools: Vec<Value> =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let source = file.trim_end_matches(".json");
    tools
        .into_iter()
        .map(|tool| Tool {
            name: format!("{source}/{}", tool["name"].as_str().unwrap()),
            schema: tool["inputSchema"].clone(),
        })
        .collect()
}

/// Every tool of every fixture file.
pub fn corpus() -> Vec<Tool> {
    [
        "mcp-server-everything.json",
        "mcp-server-filesystem.json",
        "choices.json",
        "schemars.json",
    ]
    .iter()
    .flat_map(|file| fixture(file))
    .collect()
}

// ---- schemars-generated argument types -------------------------------------

/// How results are ordered.
#[derive(Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SortOrder {
    /// Best match first.
    Relevance,
    /// Newest first.
    Newest,
    Oldest,
}

/// A closed range of dates.
#[derive(Serialize, Deserialize, JsonSchema)]
pub struct DateRange {
    /// First day, `YYYY-MM-DD`.
    pub from: String,
    /// Last day, `YYYY-MM-DD`.
    pub to: Option<String>,
}

/// Filters on the search.
#[derive(Serialize, Deserialize, JsonSchema)]
pub struct Filters {
    /// Only items with all of these tags.
    pub tags: Vec<String>,
    /// Only items created in this range.
    pub created: Option<DateRange>,
    /// Minimum rating, 0 to 5.
    pub min_rating: Option<f32>,
}

/// Arguments of a search tool: Option, enums, nested `$defs`, i64 and f64.
#[derive(Serialize, Deserialize, JsonSchema)]
pub struct SearchArgs {
    /// What to look for.
    pub query: String,
    /// How many results, at most.
    pub limit: Option<u32>,
    /// Skip this many results.
    pub offset: i64,
    /// Weight of recency against relevance, 0.0 to 1.0.
    pub recency_weight: f64,
    pub order: SortOrder,
    pub filters: Option<Filters>,
}

/// A shape to draw.
#[derive(Serialize, Deserialize, JsonSchema)]
pub enum Shape {
    /// A circle around the origin.
    Circle { radius: f64 },
    /// An axis-aligned rectangle.
    Rect { width: f64, height: f64 },
    /// Nothing at all.
    Empty,
}

/// An edit, tagged by its `op`.
#[derive(Serialize, Deserialize, JsonSchema)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Edit {
    Insert { line: u32, text: String },
    Delete { from: u32, to: u32 },
}

/// Where to read from: untagged, told apart by the field present.
#[derive(Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum Source {
    Path { path: String },
    Url { url: String },
}

/// Arguments of a drawing tool: externally, internally and untagged enums,
/// integers of several widths.
#[derive(Serialize, Deserialize, JsonSchema)]
pub struct DrawArgs {
    pub shape: Shape,
    pub edits: Vec<Edit>,
    pub source: Option<Source>,
    pub layer: u8,
    pub z_index: i32,
    pub seed: u64,
    #[serde(default)]
    pub dry_run: bool,
}

/// Paging shared by list tools.
#[derive(Serialize, Deserialize, JsonSchema)]
pub struct Paging {
    /// Page number, from 0.
    pub page: u32,
    /// Items per page.
    pub per_page: Option<u16>,
}

/// A flattened struct beside own fields.
#[derive(Serialize, Deserialize, JsonSchema)]
pub struct ListArgs {
    /// Directory to list.
    pub dir: String,
    #[serde(flatten)]
    pub paging: Paging,
    /// A mapping of names to values.
    pub labels: std::collections::BTreeMap<String, String>,
    /// Two numbers.
    pub pair: (i64, f64),
}

/// The schemars schemas of the types above, by name.
pub fn schemars_tools() -> Vec<Tool> {
    fn tool<T: JsonSchema>(name: &str) -> Tool {
        Tool {
            name: format!("schemars/{name}"),
            schema: schemars::schema_for!(T).to_value(),
        }
    }
    vec![
        tool::<SearchArgs>("search"),
        tool::<DrawArgs>("draw"),
        tool::<ListArgs>("list"),
        tool::<Filters>("filters"),
    ]
}
