//! The scenario files of `lrg test`: TOML or YAML, one case or several.
//!
//! A file is one case, or holds several under `cases`, each taking from the
//! top level every field it does not set itself (a shared model, tools,
//! permissions, expectations). Paths in a file (`script:`/`replay:` models,
//! `recording`, `tools.mcp_config`, `output.schema`) are relative to the
//! file's folder. `lrg test --schema` prints the JSON Schema of the format.
//!
//! A case with `[output] schema = "FILE"` is typed: its last message is
//! sent the way `lrg run --output-schema FILE` sends it, so its answer must
//! match that JSON Schema. The file is read and checked when the scenario
//! is loaded: one that is missing, not JSON or not a usable schema is a bad
//! scenario file (exit 2), named with the schema file and what is wrong.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use lrg_chat::permissions::{Mode, PermissionSettings, Rule};
use lrg_chat::testing::{ApprovalAnswer, DEFAULT_TIMEOUT, Expectations};
use lrg_providers::typed::OutputSchema;
use lrg_providers::{GenerationSettings, InvalidSetting};
use schemars::JsonSchema;
use serde::Deserialize;

use crate::cli::{GenerationArgs, ToolArgs};

/// Where the tools come from.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolsSpec {
    /// MCP servers to start over stdio, each a shell-quoted command line
    /// (`lrg demo-server` runs this same binary).
    #[serde(default)]
    pub mcp: Vec<String>,
    /// A JSON file of MCP servers in the usual `{"mcpServers": {...}}` format.
    #[serde(default)]
    pub mcp_config: Option<PathBuf>,
}

/// The permissions of a case (in memory; nothing is written).
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PermissionsSpec {
    /// Which calls run without asking (default `auto_read`).
    #[serde(default)]
    pub mode: Option<Mode>,
    /// A rule per tool: `allow`, `ask` or `block`.
    #[serde(default)]
    pub rules: BTreeMap<String, Rule>,
    /// Destructive calls aimed at more items than this ask (0: off).
    #[serde(default)]
    pub bulk_limit: Option<u32>,
    /// Answers to the approval questions the case expects, used in order,
    /// each for one question: `{tool = "delete_notes", answer = "once"}`,
    /// `{tool = "add_note", answer = "deny", note = "not now"}`. A question
    /// without an answer is denied.
    #[serde(default)]
    pub approvals: Vec<ApprovalAnswer>,
}

/// A typed case: the JSON Schema its answer must match.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OutputSpec {
    /// A JSON file holding the JSON Schema the last message's answer must
    /// match (that message is sent typed, as `lrg run --output-schema`).
    pub schema: PathBuf,
}

/// One case, or (at a file's top level) the defaults of the `cases` below.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(title = "lrg test scenario")]
pub struct CaseSpec {
    /// The case's name (default: the file's name).
    #[serde(default)]
    pub name: Option<String>,
    /// The model: `provider:model`, `script:FILE` (a ScriptedModel file: a
    /// JSON array of turns) or `replay:FILE` (a recording).
    #[serde(default)]
    pub model: Option<String>,
    /// The model server's base URL, for `server:` (and other addresses of
    /// `ollama:`, `lmstudio:`).
    #[serde(default)]
    pub base_url: Option<String>,
    /// A recording of this case: replayed instead of calling `model`, and
    /// (re)made from `model` by `lrg test --record`.
    #[serde(default)]
    pub recording: Option<PathBuf>,
    /// The tools.
    #[serde(default)]
    pub tools: Option<ToolsSpec>,
    /// The permissions, and the answers to expected approvals.
    #[serde(default)]
    pub permissions: Option<PermissionsSpec>,
    /// The system prompt.
    #[serde(default)]
    pub system: Option<String>,
    /// Model turns allowed per message.
    #[serde(default)]
    pub max_steps: Option<usize>,
    /// Generation settings (temperature, max_tokens, top_p, seed, stop).
    #[serde(default)]
    pub generation: Option<GenerationArgs>,
    /// The message to send.
    #[serde(default)]
    pub message: Option<String>,
    /// Messages to send in turn, for a multi-turn case.
    #[serde(default)]
    pub messages: Option<Vec<String>>,
    /// How long the case may run, in seconds (default 120).
    #[serde(default)]
    pub timeout_secs: Option<u64>,
    /// What the run must do; `exit_status` defaults to 0.
    #[serde(default)]
    pub expect: Option<Expectations>,
    /// The answer's JSON Schema: the case is typed.
    #[serde(default)]
    pub output: Option<OutputSpec>,
    /// Several cases in one file (top level only): each takes the top-level
    /// fields it does not set.
    #[serde(default)]
    pub cases: Vec<CaseSpec>,
}

/// A case ready to run.
#[derive(Debug, Clone)]
pub struct Case {
    /// The file it came from, as found.
    pub file: PathBuf,
    /// Its name.
    pub name: String,
    /// The model id, with a file path made relative to the working directory.
    pub model: Option<String>,
    /// `base_url`.
    pub base_url: Option<String>,
    /// The recording, if any.
    pub recording: Option<PathBuf>,
    /// The tools, as the CLI's flags would give them.
    pub tools: ToolArgs,
    /// The permission settings.
    pub settings: PermissionSettings,
    /// Approval answers.
    pub approvals: Vec<ApprovalAnswer>,
    /// The system prompt.
    pub system: Option<String>,
    /// Model turns per message.
    pub max_steps: Option<usize>,
    /// The session's generation settings.
    pub generation: GenerationSettings,
    /// The messages.
    pub messages: Vec<String>,
    /// The time limit.
    pub timeout: Duration,
    /// The expectations (exit status defaulted to 0).
    pub expect: Expectations,
    /// The schema the last message's answer must match, read from
    /// `output.schema`: the case is typed.
    pub output: Option<OutputSchema>,
}

impl Case {
    /// `FILE::NAME`, what `--filter` matches and reports show.
    pub fn id(&self) -> String {
        format!("{}::{}", self.file.display(), self.name)
    }
}

/// A scenario file that cannot be used: where, and what is wrong.
#[derive(Debug, Clone)]
pub struct ScenarioError {
    /// The file.
    pub file: PathBuf,
    /// The line, when known.
    pub line: Option<usize>,
    /// The field, as a path (`cases[1].expect.calls[0].tool`), when known.
    pub field: Option<String>,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        if let Some(field) = &self.field {
            write!(f, ": field `{field}`")?;
        }
        write!(f, ": {}", self.message)
    }
}

/// File name endings a folder is searched for.
pub const SCENARIO_SUFFIXES: &[&str] = &[".test.toml", ".test.yaml", ".test.yml"];

/// The scenario files under `paths`: a file as given, a folder searched
/// (recursively, sorted) for `*.test.toml`, `*.test.yaml` and `*.test.yml`.
pub fn find_files(paths: &[PathBuf]) -> Result<Vec<PathBuf>, ScenarioError> {
    let mut files = Vec::new();
    for path in paths {
        if path.is_dir() {
            walk(path, &mut files)?;
        } else if path.is_file() {
            files.push(path.clone());
        } else {
            return Err(ScenarioError {
                file: path.clone(),
                line: None,
                field: None,
                message: "no such file or folder".into(),
            });
        }
    }
    Ok(files)
}

fn walk(dir: &Path, files: &mut Vec<PathBuf>) -> Result<(), ScenarioError> {
    let read = std::fs::read_dir(dir).map_err(|e| ScenarioError {
        file: dir.to_path_buf(),
        line: None,
        field: None,
        message: format!("cannot read the folder: {e}"),
    })?;
    let mut entries: Vec<PathBuf> = read.filter_map(|e| e.ok().map(|e| e.path())).collect();
    entries.sort();
    for path in entries {
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        if path.is_dir() {
            if !name.starts_with('.') && name != "target" {
                walk(&path, files)?;
            }
        } else if SCENARIO_SUFFIXES.iter().any(|s| name.ends_with(s)) {
            files.push(path);
        }
    }
    Ok(())
}

/// 1-based line of byte offset `at` in `text`.
fn line_at(text: &str, at: usize) -> usize {
    text.get(..at).unwrap_or(text).matches('\n').count() + 1
}

/// Parse a file's text as TOML or YAML (by its extension).
fn parse(file: &Path, text: &str) -> Result<CaseSpec, ScenarioError> {
    let error = |line, field: String, message: String| ScenarioError {
        file: file.to_path_buf(),
        line,
        field: (!field.is_empty() && field != ".").then_some(field),
        message,
    };
    let ext = file
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or_default();
    match ext {
        "yaml" | "yml" => {
            let de = serde_norway::Deserializer::from_str(text);
            serde_path_to_error::deserialize(de).map_err(|e| {
                let line = e.inner().location().map(|l| l.line());
                let field = e.path().to_string();
                // The YAML message repeats the path and the position, which
                // the report gives on its own: keep what is wrong.
                let mut message = e.inner().to_string();
                if let Some(at) = message.rfind(" at line ") {
                    message.truncate(at);
                }
                if let Some((path, rest)) = message.split_once(": ")
                    && !path.contains(' ')
                {
                    message = rest.to_string();
                }
                error(line, field, message)
            })
        }
        "toml" => {
            let de = toml::Deserializer::parse(text).map_err(|e| {
                error(
                    e.span().map(|s| line_at(text, s.start)),
                    String::new(),
                    e.message().to_string(),
                )
            })?;
            serde_path_to_error::deserialize(de).map_err(|e| {
                let line = e.inner().span().map(|s| line_at(text, s.start));
                let field = e.path().to_string();
                error(line, field, e.inner().message().to_string())
            })
        }
        _ => Err(error(
            None,
            String::new(),
            "not a scenario file: the name must end in .toml, .yaml or .yml".into(),
        )),
    }
}

/// The first line that sets the key `key` (`key =` in TOML, `key:` in
/// YAML), to point at a value that only a check after parsing finds wrong.
fn line_of(text: &str, key: &str) -> Option<usize> {
    text.lines()
        .position(|line| sets_key(line, key))
        .map(|i| i + 1)
}

/// The first line that sets the key `key` to a value holding `value` (a
/// path as written): of several `schema` keys, the one that names it.
fn line_of_value(text: &str, key: &str, value: &str) -> Option<usize> {
    text.lines()
        .position(|line| sets_key(line, key) && line.contains(value))
        .map(|i| i + 1)
}

/// Whether `line` sets the key `key`, alone or as the last part of a
/// dotted key (`reply.regex =`).
fn sets_key(line: &str, key: &str) -> bool {
    if key.is_empty() {
        return false;
    }
    let word = |c: char| c.is_alphanumeric() || c == '_';
    line.match_indices(key).any(|(at, _)| {
        let before = line[..at].chars().next_back();
        let rest = &line[at + key.len()..];
        let after = rest
            .trim_start_matches(['"', '\''])
            .trim_start()
            .chars()
            .next();
        !before.is_some_and(word) && matches!(after, Some('=' | ':'))
    })
}

/// Read a scenario file into its cases.
pub fn load(file: &Path) -> Result<Vec<Case>, ScenarioError> {
    let text = std::fs::read_to_string(file).map_err(|e| ScenarioError {
        file: file.to_path_buf(),
        line: None,
        field: None,
        message: format!("cannot read it: {e}"),
    })?;
    let mut top = parse(file, &text)?;
    let dir = file.parent().unwrap_or(Path::new("")).to_path_buf();
    let stem = file
        .file_name()
        .and_then(|n| n.to_str())
        .map(|n| {
            SCENARIO_SUFFIXES
                .iter()
                .chain(&[".toml", ".yaml", ".yml"])
                .find_map(|s| n.strip_suffix(s))
                .unwrap_or(n)
                .to_string()
        })
        .unwrap_or_default();
    let specs = std::mem::take(&mut top.cases);
    let (specs, prefix): (Vec<CaseSpec>, fn(usize) -> String) = if specs.is_empty() {
        (vec![top.clone()], |_| String::new())
    } else {
        (specs, |i| format!("cases[{i}]."))
    };
    let mut cases: Vec<Case> = Vec::new();
    for (i, spec) in specs.into_iter().enumerate() {
        let at = |field: &str, message: String, needle: &str| ScenarioError {
            file: file.to_path_buf(),
            line: line_of(&text, needle),
            field: Some(format!("{}{field}", prefix(i))),
            message,
        };
        if !spec.cases.is_empty() {
            return Err(at("cases", "cases do not nest".into(), "cases"));
        }
        // The case's own schema, else the file's: read once per case, each
        // error pointing at the line that names the file.
        let output = match (&spec.output, &top.output) {
            (Some(own), _) => Some((own.schema.clone(), format!("{}output.schema", prefix(i)))),
            (None, Some(shared)) => Some((shared.schema.clone(), "output.schema".to_string())),
            (None, None) => None,
        };
        let mut case = merge(spec, &top, &dir, &stem, i)
            .map_err(|(field, msg, needle)| at(&field, msg, &needle))?;
        case.file = file.to_path_buf();
        if let Some((path, field)) = output {
            let schema = output_schema(&beside(&dir, &path)).map_err(|message| ScenarioError {
                file: file.to_path_buf(),
                line: line_of_value(&text, "schema", &path.to_string_lossy()),
                field: Some(field),
                message,
            })?;
            case.output = Some(schema);
        }
        if cases.iter().any(|c| c.name == case.name) {
            return Err(at(
                "name",
                format!("another case of this file is named {:?}", case.name),
                "name",
            ));
        }
        cases.push(case);
    }
    Ok(cases)
}

/// The answer schema in the JSON file at `path`, checked as `lrg run
/// --output-schema` checks it; the error names the file.
fn output_schema(path: &Path) -> Result<OutputSchema, String> {
    let shown = path.display();
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read the answer schema {shown}: {e}"))?;
    let value: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| format!("the answer schema {shown} is not JSON: {e}"))?;
    OutputSchema::new(value).map_err(|e| format!("{shown}: {e}"))
}

/// `path` read from a scenario in `dir`.
fn beside(dir: &Path, path: &Path) -> PathBuf {
    if path.is_absolute() {
        path.to_path_buf()
    } else {
        dir.join(path)
    }
}

/// A model id whose file path (`script:`, `replay:`, `llama:`, `mlx:`) is
/// read relative to the scenario's folder.
fn model_beside(dir: &Path, id: &str) -> String {
    match id.split_once(':') {
        Some((provider @ ("script" | "replay" | "llama" | "mlx"), path)) => {
            format!("{provider}:{}", beside(dir, Path::new(path)).display())
        }
        _ => id.to_string(),
    }
}

/// The field, the problem, and a text to find the line by.
type MergeError = (String, String, String);

/// One case: its own fields, else the file's top-level ones.
fn merge(
    spec: CaseSpec,
    top: &CaseSpec,
    dir: &Path,
    stem: &str,
    index: usize,
) -> Result<Case, MergeError> {
    let name = match (&spec.name, top.cases.is_empty()) {
        (Some(n), _) => n.clone(),
        (None, true) => stem.to_string(),
        (None, false) => format!("case {}", index + 1),
    };
    let messages = match (spec.message, spec.messages) {
        (Some(_), Some(_)) => {
            return Err((
                "messages".into(),
                "give `message` or `messages`, not both".into(),
                "messages".into(),
            ));
        }
        (Some(m), None) => vec![m],
        (None, Some(ms)) => ms,
        (None, None) => match (&top.message, &top.messages) {
            (Some(m), _) => vec![m.clone()],
            (None, Some(ms)) => ms.clone(),
            (None, None) => Vec::new(),
        },
    };
    if messages.is_empty() {
        return Err((
            "message".into(),
            "the case sends no message: give `message` or `messages`".into(),
            String::new(),
        ));
    }
    let model = spec.model.or_else(|| top.model.clone());
    let recording = spec.recording.or_else(|| top.recording.clone());
    if model.is_none() && recording.is_none() {
        return Err((
            "model".into(),
            "the case names no model: give `model` (or a `recording`)".into(),
            String::new(),
        ));
    }
    if let Some(id) = &model
        && let Err(e) = id.parse::<lrg_providers::ModelRef>()
    {
        return Err(("model".into(), e.to_string(), "model".into()));
    }
    let max_steps = spec.max_steps.or(top.max_steps);
    if max_steps == Some(0) {
        return Err((
            "max_steps".into(),
            "must be at least 1".into(),
            "max_steps".into(),
        ));
    }
    let generation = spec
        .generation
        .or_else(|| top.generation.clone())
        .unwrap_or_default()
        .settings();
    if let Err(e) = generation.validate() {
        let key = match e {
            InvalidSetting::Temperature(_) => "temperature",
            InvalidSetting::TopP(_) => "top_p",
            InvalidSetting::MaxTokens => "max_tokens",
            _ => "stop",
        };
        return Err((format!("generation.{key}"), e.to_string(), key.into()));
    }
    let tools = spec.tools.or_else(|| top.tools.clone()).unwrap_or_default();
    let permissions = spec
        .permissions
        .or_else(|| top.permissions.clone())
        .unwrap_or_default();
    let mut settings = PermissionSettings::default();
    if let Some(mode) = permissions.mode {
        settings.mode = mode;
    }
    settings.rules = permissions.rules;
    if let Some(limit) = permissions.bulk_limit {
        settings.bulk_limit = limit;
    }
    let mut expect = spec
        .expect
        .or_else(|| top.expect.clone())
        .unwrap_or_default();
    if let Err(e) = expect.validate() {
        // The last segment of the path is the key that holds the bad value.
        let key = e.field.rsplit('.').next().unwrap_or_default().to_string();
        return Err((format!("expect.{}", e.field), e.problem, key));
    }
    expect.exit_status.get_or_insert(0);
    Ok(Case {
        file: PathBuf::new(),
        name,
        model: model.map(|m| model_beside(dir, &m)),
        base_url: spec.base_url.or_else(|| top.base_url.clone()),
        recording: recording.map(|r| beside(dir, &r)),
        tools: ToolArgs {
            mcp_config: tools.mcp_config.map(|p| beside(dir, &p)),
            mcp: tools.mcp,
            max_tool_result: None,
            roots: Vec::new(),
        },
        settings,
        approvals: permissions.approvals,
        system: spec.system.or_else(|| top.system.clone()),
        max_steps,
        generation,
        messages,
        timeout: spec
            .timeout_secs
            .or(top.timeout_secs)
            .map_or(DEFAULT_TIMEOUT, Duration::from_secs),
        expect,
        output: None,
    })
}

/// The JSON Schema of a scenario file.
pub fn schema() -> serde_json::Value {
    serde_json::to_value(schemars::schema_for!(CaseSpec)).unwrap_or_default()
}
