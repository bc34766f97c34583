//! The flag groups several commands share: the model, limits, sampling,
//! tools and permissions (flattened into `run`, `chat`, `serve`, ...).

use std::path::PathBuf;

use clap::{Args, ValueEnum};
use lrg_chat::session::SessionConfig;
use lrg_providers::GenerationSettings;
use lrg_providers::text_tools::ToolMode;

/// Which model answers.
#[derive(Debug, Clone, Args)]
pub struct ModelArgs {
    /// The model, as provider:model (see "Models" below)
    #[arg(
        short,
        long,
        value_name = "PROVIDER:MODEL",
        env = "LRG_MODEL",
        hide_env_values = true
    )]
    pub model: Option<String>,
    /// Base URL of the model's server: for server:MODEL (default $LRG_SERVER_URL), or another
    /// address for ollama: and lmstudio:
    #[arg(long, value_name = "URL")]
    pub base_url: Option<String>,
    /// Refuse models that send the conversation to a third party's cloud
    #[arg(long, env = "LRG_LOCAL_ONLY", value_parser = clap::builder::BoolishValueParser::new())]
    pub local_only: bool,
    /// How tools reach a server you run (server:, lmstudio:, ollama:): native (default), auto
    /// (by the model's family; calls the model writes as text are read too), or a text format:
    /// hermes, qwen3-coder, mistral, llama3, harmony, granite, deepseek, pythonic, markdown-json
    #[arg(long, value_name = "FORMAT")]
    pub tool_format: Option<ToolMode>,
    /// The vision projector of a llama: model (its mmproj-*.gguf): with it the model sees the
    /// images of messages and tool results; without it images reach the model as short notes
    #[arg(long, value_name = "FILE", env = "LRG_MMPROJ", hide_env_values = true)]
    pub mmproj: Option<std::path::PathBuf>,
    /// Seconds a model's server may take to begin an answer, and then to send each next part
    /// of it, before the attempt fails (retried until --turn-deadline) [default: 60]
    #[arg(long, value_name = "SECS", value_parser = seconds)]
    pub model_timeout: Option<std::time::Duration>,
    /// How local engines are loaded and kept.
    #[command(flatten)]
    pub engine: super::EngineArgs,
}

/// Limits on one model turn: how large its answer may grow, and how long its
/// retries may go on. Unset ones keep the library's defaults.
#[derive(Debug, Clone, Copy, Default, Args)]
pub struct LimitArgs {
    /// The largest model answer taken (bytes, or with KiB/MiB: text, reasoning and tool-call
    /// arguments together); a larger one ends the turn with an error that names its size
    /// [default: 4MiB]
    #[arg(long, value_name = "SIZE", value_parser = byte_size)]
    pub max_answer: Option<usize>,
    /// Seconds a turn may go on retrying a failing or silent model, counted from its first
    /// try; a retry that would start later is not made and the turn ends with the last error
    /// [default: 180]
    #[arg(long, value_name = "SECS", value_parser = seconds)]
    pub turn_deadline: Option<std::time::Duration>,
    /// Stop before a model turn that would take this run past USD dollars (the cost so far plus
    /// the next request's estimated input, priced by `lrg prices`); exit 3
    #[arg(long, value_name = "USD", value_parser = dollars)]
    pub max_cost: Option<f64>,
    /// Stop before a model turn that would take this run past N tokens (prompt and completion
    /// together, the next request's estimated input included); exit 3
    #[arg(long, value_name = "N")]
    pub max_tokens_total: Option<u64>,
    /// Offer the model a few tools and `search_tools` instead of all of them: auto (above 30
    /// tools, or a tenth of a known context window), on, or off [default: auto]
    #[arg(long, value_name = "WHEN")]
    pub tool_search: Option<lrg_chat::tools::search::ToolSearch>,
}

/// `--max-cost`: dollars, 0 or more.
fn dollars(s: &str) -> Result<f64, String> {
    match s.trim_start_matches('$').parse::<f64>() {
        Ok(usd) if usd.is_finite() && usd >= 0.0 => Ok(usd),
        _ => Err(format!("`{s}` is not an amount of dollars (e.g. 0.50)")),
    }
}

impl LimitArgs {
    /// `config` with these limits applied over it, and the window assumed
    /// for a model that reports none set to the catalog's.
    pub fn apply(&self, mut config: SessionConfig) -> SessionConfig {
        // One window for a model that reports none, in every front end: the
        // catalog's, which `lrg models` and the page's menu show.
        config.context.default_window = lrg_providers::catalog::ASSUMED_CONTEXT_WINDOW;
        if let Some(max) = self.max_answer {
            config.max_answer_bytes = max;
        }
        if let Some(deadline) = self.turn_deadline {
            config.retry.deadline = Some(deadline);
        }
        if let Some(search) = self.tool_search {
            config.tool_search = search;
        }
        config.prices = crate::prices::table();
        config.budget.per_run = lrg_chat::SpendLimit::default()
            .usd(self.max_cost)
            .tokens(self.max_tokens_total);
        config
    }
}

/// How the model samples its answers; each unset one is left to the model.
/// Also the `generation` table of `lrg test` scenario files.
#[derive(Debug, Clone, Default, Args, serde::Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct GenerationArgs {
    /// Sampling temperature, 0 (greedy) to 2 [default: the model's own]
    #[arg(long, value_name = "T", value_parser = temperature)]
    pub temperature: Option<f32>,
    /// Most tokens per answer, at least 1 [default: the provider's budget]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub max_tokens: Option<u32>,
    /// Nucleus sampling: draw only from the likeliest tokens whose probabilities add up to P,
    /// 0 to 1
    #[arg(long, value_name = "P", value_parser = top_p)]
    pub top_p: Option<f32>,
    /// Sampling seed, for repeatable answers where the provider honours one
    #[arg(long, value_name = "N")]
    pub seed: Option<u32>,
    /// End the answer where the model writes TEXT (repeatable; not for local engines, whose
    /// answers are JSON)
    #[arg(long, value_name = "TEXT", value_parser = clap::builder::NonEmptyStringValueParser::new())]
    pub stop: Vec<String>,
}

impl GenerationArgs {
    /// The settings these flags give.
    pub fn settings(&self) -> GenerationSettings {
        let mut settings = GenerationSettings::new().stop(self.stop.clone());
        settings.temperature = self.temperature;
        settings.max_tokens = self.max_tokens;
        settings.top_p = self.top_p;
        settings.seed = self.seed;
        settings
    }
}

/// `--temperature`, checked by the library's own rule.
fn temperature(s: &str) -> Result<f32, String> {
    checked(s, GenerationSettings::temperature)
}

/// `--top-p`, checked by the library's own rule.
fn top_p(s: &str) -> Result<f32, String> {
    checked(s, GenerationSettings::top_p)
}

/// A number, checked by `GenerationSettings::validate` once `set` sets it.
fn checked(s: &str, set: fn(GenerationSettings, f32) -> GenerationSettings) -> Result<f32, String> {
    let value = s
        .trim()
        .parse()
        .map_err(|_| format!("`{s}` is not a number"))?;
    set(GenerationSettings::new(), value)
        .validate()
        .map_err(|e| e.to_string())?;
    Ok(value)
}

/// Where the tools come from.
#[derive(Debug, Clone, Default, Args)]
pub struct ToolArgs {
    /// MCP servers from a JSON file in the usual {"mcpServers": {...}} format
    #[arg(long, value_name = "FILE")]
    pub mcp_config: Option<PathBuf>,
    /// An MCP server to start over stdio, as a shell-quoted command line (repeatable)
    #[arg(long, value_name = "'COMMAND ARGS...'")]
    pub mcp: Vec<String>,
    /// The largest tool result taken (bytes, or with KiB/MiB); a larger one is an error that
    /// names its size [default: 8MiB]
    #[arg(long, value_name = "SIZE", value_parser = byte_size)]
    pub max_tool_result: Option<usize>,
    /// A directory the MCP servers may work in (repeatable), offered in `roots/list` beside the
    /// current directory (`lrg serve`: these alone; `lrg acp`: not yet)
    #[arg(long = "root", value_name = "DIR")]
    pub roots: Vec<PathBuf>,
}

/// A size in bytes: `8388608`, `512KiB`, `8MiB` (also `K`/`KB`/`M`/`MB`, as binary units).
pub fn byte_size(s: &str) -> Result<usize, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let scale: f64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kb" | "kib" => 1024.0,
        "m" | "mb" | "mib" => 1024.0 * 1024.0,
        "g" | "gb" | "gib" => 1024.0 * 1024.0 * 1024.0,
        _ => return Err(format!("`{s}` is not a size (try 8MiB or 512KiB)")),
    };
    match number.parse::<f64>() {
        Ok(n) if n > 0.0 && (n * scale) <= (1u64 << 40) as f64 && n * scale >= 1.0 => {
            Ok((n * scale) as usize)
        }
        _ => Err(format!("`{s}` is not a size above 0 (try 8MiB or 512KiB)")),
    }
}

impl ToolArgs {
    /// Whether any tool source was given.
    pub fn is_empty(&self) -> bool {
        self.mcp_config.is_none() && self.mcp.is_empty()
    }
}

/// How much runs without asking.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ModeArg {
    /// Every tool call asks
    #[value(name = "ask_all", alias = "ask-all")]
    AskAll,
    /// Read-only tools run; the others ask
    #[value(name = "auto_read", alias = "auto-read")]
    AutoRead,
    /// Read and non-destructive tools run; destructive ones ask
    #[value(name = "auto_safe", alias = "auto-safe")]
    AutoSafe,
    /// Every tool runs (a bulk call still asks)
    #[value(name = "auto_all", alias = "auto-all")]
    AutoAll,
}

/// Permission settings for this run (kept in memory, never written).
#[derive(Debug, Clone, Args)]
pub struct PermissionArgs {
    /// Which tool calls run without asking [default: the settings file's, else auto_read]
    #[arg(long, value_enum, value_name = "MODE")]
    pub mode: Option<ModeArg>,
    /// Let TOOL run without asking (repeatable)
    #[arg(long, value_name = "TOOL")]
    pub allow: Vec<String>,
    /// Never offer TOOL to the model (repeatable)
    #[arg(long, value_name = "TOOL")]
    pub deny: Vec<String>,
    /// The permission settings file, where "always" answers are kept
    /// [default: $XDG_CONFIG_HOME/lrg/permissions.json or the platform's config dir]
    #[arg(long, value_name = "FILE")]
    pub permissions: Option<PathBuf>,
}

/// A positive number of seconds (`10`, `0.5`).
pub(super) fn seconds(s: &str) -> Result<std::time::Duration, String> {
    match s.trim().parse::<f64>() {
        Ok(secs) if secs > 0.0 && secs <= 86_400.0 => Ok(std::time::Duration::from_secs_f64(secs)),
        _ => Err(format!(
            "expected seconds above 0 (at most a day), got `{s}`"
        )),
    }
}

/// Where a session's prompt sections come from, besides `--system`:
/// project instructions, skills, memory.
#[derive(Debug, Clone, Default, Args)]
pub struct ContextArgs {
    /// Leave out the project instructions (the AGENTS.md files from here up to the repository
    /// root) and the project's skills (.lrg/skills/)
    #[arg(long)]
    pub no_project_context: bool,
    #[command(flatten)]
    pub extras: SkillMemoryArgs,
}

/// Skills and memory, which `serve` takes without a project.
#[derive(Debug, Clone, Default, Args)]
pub struct SkillMemoryArgs {
    /// Also offer the skills in DIR (folders with a SKILL.md), before the project's and your own
    /// ($XDG_CONFIG_HOME/lrg/skills) (repeatable)
    #[arg(long = "skills", value_name = "DIR")]
    pub skills: Vec<PathBuf>,
    /// Keep a memory in FILE (Markdown), shown to the model, which may add to it with `remember`
    /// and take from it with `forget` (both ask under the default mode)
    #[arg(long, value_name = "FILE")]
    pub memory: Option<PathBuf>,
}
