//! The command line, as clap reads it.

use std::net::IpAddr;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};
use lrg_chat::session::SessionConfig;
use lrg_providers::GenerationSettings;
use lrg_providers::text_tools::ToolMode;

/// The exit codes, shown in `--help` and the README.
pub const EXIT_CODES: &str = "\
Exit codes:
  0  the model replied
  1  a model or tool error ended the run
  2  bad usage or configuration
  3  stopped (Ctrl-C) or the step limit (--max-steps) ran out";

/// The "Models" help, from the provider table.
pub fn model_help() -> String {
    // `acp:` is not a provider of the table: the agent is a process that
    // runs its own loop (lrg_chat::acp::AcpBackend), resolved by the CLI.
    format!(
        "Models (--model provider:model, default $LRG_MODEL, else the first local model found):\n{}\n  {:<28}  {}",
        lrg_providers::Provider::help_lines(),
        "acp:'COMMAND ARGS'",
        "an external ACP agent, which runs its own tools"
    )
}

/// `lrg`: an agent chat runtime. A model works a set of tools (MCP servers)
/// and a person approves what it may change.
#[derive(Debug, Parser)]
#[command(name = "lrg", version, propagate_version = true, after_help = EXIT_CODES)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run one message to completion, for scripts and CI
    #[command(after_help = format!("{}\n\n{EXIT_CODES}", model_help()))]
    Run(RunArgs),
    /// Chat in the terminal (/retry, /clear, /compact, /help)
    #[command(after_help = format!("{}\n\n{EXIT_CODES}", model_help()))]
    Chat(ChatArgs),
    /// List the models reachable now, by provider
    #[command(after_help = EXIT_CODES)]
    Models(ModelsArgs),
    /// List the tools of the configured MCP servers and what the permissions say of them
    #[command(after_help = EXIT_CODES)]
    Tools(ToolsArgs),
    /// List, show and delete kept chats (`run`/`chat --session KEY`)
    #[command(after_help = EXIT_CODES)]
    Sessions(SessionsArgs),
    /// Serve the chat page and the HTTP API (/v1/chat/*); prints the page URL
    ///
    /// Opens a first chat and prints its page URL (the chat token is in the fragment). More
    /// chats are opened with POST /v1/chat/sessions and the agent token: $LRG_AGENT_TOKEN (32
    /// characters or more, e.g. from `openssl rand -hex 16`), or a fresh one written to a file
    /// only you can read, whose path is printed.
    #[command(after_help = format!("{}\n\n{EXIT_CODES}", model_help()))]
    Serve(ServeArgs),
    /// Serve a small demo MCP server (notes) over stdio, for trying lrg offline
    ///
    /// `--mcp 'lrg demo-server'` starts it from this same binary.
    #[command(after_help = EXIT_CODES)]
    DemoServer,
    /// Serve the Agent Client Protocol on stdio, for editors (Zed, ...)
    ///
    /// The editor starts `lrg acp` and drives lrg's loop: its MCP servers join --mcp's, tool
    /// calls that would ask become the editor's permission questions, and the model is a
    /// session option. With --store, sessions are kept and the editor can load them again.
    #[command(after_help = format!("{}\n\n{EXIT_CODES}", model_help()))]
    Acp(AcpArgs),
    /// Run scenario files as a regression suite (tool calls, replies, recordings; JUnit for CI)
    #[command(after_help = TEST_EXIT_CODES)]
    Test(TestArgs),
}

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
}

impl LimitArgs {
    /// `config` with these limits applied over it.
    pub fn apply(&self, mut config: SessionConfig) -> SessionConfig {
        if let Some(max) = self.max_answer {
            config.max_answer_bytes = max;
        }
        if let Some(deadline) = self.turn_deadline {
            config.retry.deadline = Some(deadline);
        }
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

/// `lrg run`.
#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    /// The message; `-` (or nothing, with stdin not a terminal) reads it from stdin
    #[arg(value_name = "PROMPT | -")]
    pub prompt: Option<String>,
    #[command(flatten)]
    pub model: ModelArgs,
    #[command(flatten)]
    pub limits: LimitArgs,
    #[command(flatten)]
    pub generation: GenerationArgs,
    #[command(flatten)]
    pub tools: ToolArgs,
    #[command(flatten)]
    pub permissions: PermissionArgs,
    /// Approve every tool call that would ask
    #[arg(short, long)]
    pub yes: bool,
    /// Print the session's events as JSON lines on stdout (first line: the schema version)
    #[arg(long)]
    pub json: bool,
    /// The system prompt
    #[arg(long, value_name = "TEXT")]
    pub system: Option<String>,
    /// Model turns allowed for the message
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub max_steps: Option<u32>,
    /// Let the model delegate tasks to sub-agents that work in the background (4 at a time)
    #[arg(long)]
    pub sub_agents: bool,
    /// Write the final reply to FILE
    #[arg(long, value_name = "FILE")]
    pub output_last_message: Option<PathBuf>,
    /// Make the final answer JSON matching the JSON Schema in FILE: stdout is then that JSON
    /// alone, on one line (answers that do not match are sent back to be corrected; exit 1 when
    /// none does, 2 when FILE is not a valid JSON Schema)
    #[arg(long, value_name = "FILE", conflicts_with = "sub_agents")]
    pub output_schema: Option<PathBuf>,
    /// Record every model request and answer to FILE (replay it with --model replay:FILE)
    #[arg(long, value_name = "FILE")]
    pub record: Option<PathBuf>,
    #[command(flatten)]
    pub saved: SessionArgs,
}

/// `lrg chat`.
#[derive(Debug, Clone, Args)]
pub struct ChatArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    #[command(flatten)]
    pub limits: LimitArgs,
    #[command(flatten)]
    pub generation: GenerationArgs,
    #[command(flatten)]
    pub tools: ToolArgs,
    #[command(flatten)]
    pub permissions: PermissionArgs,
    /// Approve every tool call that would ask
    #[arg(short, long)]
    pub yes: bool,
    /// The system prompt
    #[arg(long, value_name = "TEXT")]
    pub system: Option<String>,
    /// Model turns allowed per message
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub max_steps: Option<u32>,
    /// Let the model delegate tasks to sub-agents that work in the background (4 at a time)
    #[arg(long)]
    pub sub_agents: bool,
    /// Record every model request and answer to FILE
    #[arg(long, value_name = "FILE")]
    pub record: Option<PathBuf>,
    #[command(flatten)]
    pub saved: SessionArgs,
}

/// `lrg acp`.
#[derive(Debug, Clone, Args)]
pub struct AcpArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    #[command(flatten)]
    pub limits: LimitArgs,
    #[command(flatten)]
    pub tools: ToolArgs,
    #[command(flatten)]
    pub permissions: PermissionArgs,
    /// The system prompt of each session
    #[arg(long, value_name = "TEXT")]
    pub system: Option<String>,
    /// Model turns allowed per prompt
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub max_steps: Option<u32>,
    // Sessions are kept (and `session/load` offered) only when --store or LRG_STORE is given.
    #[command(flatten)]
    pub store: StoreArgs,
}

/// `lrg models`.
#[derive(Debug, Clone, Args)]
pub struct ModelsArgs {
    /// Print JSON instead of a table
    #[arg(long)]
    pub json: bool,
    /// Base URL of your OpenAI-compatible server, to list its models too (default $LRG_SERVER_URL)
    #[arg(long, value_name = "URL")]
    pub base_url: Option<String>,
    /// List only models that keep the conversation off third-party clouds
    #[arg(long, env = "LRG_LOCAL_ONLY", value_parser = clap::builder::BoolishValueParser::new())]
    pub local_only: bool,
}

/// Which shaped schema `lrg tools --schema` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SchemaArg {
    /// What the local grammar engines take
    Grammar,
    /// What OpenAI (and OpenAI-compatible servers) take
    Openai,
    /// What Anthropic takes
    Anthropic,
    /// What Gemini takes
    Gemini,
}

/// `lrg tools`.
#[derive(Debug, Clone, Args)]
pub struct ToolsArgs {
    #[command(flatten)]
    pub tools: ToolArgs,
    #[command(flatten)]
    pub permissions: PermissionArgs,
    /// Print JSON instead of a table
    #[arg(long)]
    pub json: bool,
    /// Print each tool's input schema as shaped for an engine or API
    #[arg(long, value_enum, value_name = "TARGET")]
    pub schema: Option<SchemaArg>,
}

/// Where chats are kept.
#[derive(Debug, Clone, Default, Args)]
pub struct StoreArgs {
    /// Where chats are kept: a directory, or postgres://... (default: $LRG_STORE, else
    /// $XDG_DATA_HOME/lrg/sessions)
    #[arg(
        long,
        value_name = "DIR | postgres://...",
        env = "LRG_STORE",
        hide_env_values = true
    )]
    pub store: Option<String>,
}

/// A chat kept under a key (`--session`).
#[derive(Debug, Clone, Default, Args)]
pub struct SessionArgs {
    /// Keep this chat under KEY and resume it next time (yours: the client key is your OS user)
    #[arg(long, value_name = "KEY")]
    pub session: Option<String>,
    /// Keep at most N history rows of a resumed chat live; older ones move to an archive file
    /// beside it (`<chat>.jsonl.archive-<n>`), never deleted [default: all rows kept]
    #[arg(long, value_name = "N", requires = "session", value_parser = clap::value_parser!(u64).range(1..))]
    pub max_kept_rows: Option<u64>,
    /// When KEY's chat is on another model than --model: carry its conversation over to the new
    /// model (which receives all of it) and go on there
    #[arg(long, requires = "session", conflicts_with = "replace")]
    pub carry_over: bool,
    /// When KEY's chat is on another model than --model: start a new chat under KEY; the old one
    /// is archived, not deleted (`lrg sessions` lists it with its archive id)
    #[arg(long, requires = "session")]
    pub replace: bool,
    #[command(flatten)]
    pub store: StoreArgs,
}

/// `lrg sessions`.
#[derive(Debug, Clone, Args)]
pub struct SessionsArgs {
    /// What to do (default: list)
    #[command(subcommand)]
    pub action: Option<SessionsAction>,
    #[command(flatten)]
    pub store: StoreArgs,
    /// Print JSON instead of text
    #[arg(long, global = true)]
    pub json: bool,
}

/// `lrg sessions` subcommands.
#[derive(Debug, Clone, Subcommand)]
pub enum SessionsAction {
    /// List your kept chats: key, model, rows, last used (archived ones with their archive id)
    List,
    /// Print a kept chat's transcript
    Show {
        /// The chat's key (as given to --session), or an archived chat's archive id
        key: String,
    },
    /// Delete a kept chat
    Rm {
        /// The chat's key (as given to --session), or an archived chat's archive id
        key: String,
    },
}

/// `lrg serve`.
#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    #[command(flatten)]
    pub limits: LimitArgs,
    #[command(flatten)]
    pub generation: GenerationArgs,
    #[command(flatten)]
    pub tools: ToolArgs,
    #[command(flatten)]
    pub permissions: PermissionArgs,
    /// The system prompt of each chat
    #[arg(long, value_name = "TEXT")]
    pub system: Option<String>,
    /// Model turns allowed per message
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub max_steps: Option<u32>,
    /// The port to listen on (0: any free port)
    #[arg(long, value_name = "N", default_value_t = 8377)]
    pub port: u16,
    /// The address to listen on; anything but loopback needs --allow-remote
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1")]
    pub bind: IpAddr,
    /// Allow --bind to a non-loopback address: anyone who can reach it and holds a token
    /// can make the model work your tools
    #[arg(long)]
    pub allow_remote: bool,
    /// Open the page in a browser
    #[arg(long)]
    pub open: bool,
    /// Let the agent token open chats on any model id, including ones that run a program or
    /// read a path here (acp:COMMAND, script:FILE, replay:FILE, llama:FILE, mlx:DIR, agent
    /// CLIs); without it, only the models `lrg models` lists and --model. Chat tokens never can
    #[arg(long)]
    pub allow_model_specs: bool,
    /// Connections open at once; when full, the longest-idle one is closed to make room, and
    /// event streams are kept [default: the open-files limit less a quarter of it, at least
    /// 64, kept for files and tool servers]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub max_connections: Option<u32>,
    /// Seconds a request's headers may take to arrive before the connection is closed
    #[arg(long, value_name = "SECS", default_value = "10", value_parser = seconds)]
    pub header_timeout: std::time::Duration,
    /// Seconds a request's body may take to arrive (then 408)
    #[arg(long, value_name = "SECS", default_value = "60", value_parser = seconds)]
    pub body_timeout: std::time::Duration,
    /// Seconds a kept-alive connection may sit idle before it is closed
    #[arg(long, value_name = "SECS", default_value = "5", value_parser = seconds)]
    pub idle_timeout: std::time::Duration,
    /// Keep at most N history rows of a resumed keyed chat live; older ones move to an archive
    /// file beside it (`<chat>.jsonl.archive-<n>`), never deleted [default: all rows kept]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub max_kept_rows: Option<u64>,
    /// Where chats opened with client_key and context_key are kept, to be resumed by them
    #[command(flatten)]
    pub store: StoreArgs,
}

/// A positive number of seconds (`10`, `0.5`).
fn seconds(s: &str) -> Result<std::time::Duration, String> {
    match s.trim().parse::<f64>() {
        Ok(secs) if secs > 0.0 && secs <= 86_400.0 => Ok(std::time::Duration::from_secs_f64(secs)),
        _ => Err(format!(
            "expected seconds above 0 (at most a day), got `{s}`"
        )),
    }
}

/// The exit codes of `lrg test`.
pub const TEST_EXIT_CODES: &str = "\
Scenario files: TOML or YAML, one case or several (`cases`); `lrg test --schema` prints the format.
A folder is searched for *.test.toml, *.test.yaml and *.test.yml.

Exit codes:
  0  every case passed
  1  a case failed (or could not run)
  2  a bad scenario file (named with its line and field) or bad usage";

/// `lrg test`.
#[derive(Debug, Clone, Args)]
pub struct TestArgs {
    /// Scenario files, or folders to search for them (default: the current folder)
    #[arg(value_name = "PATHS")]
    pub paths: Vec<PathBuf>,
    /// Cases run at once (default: the number of CPUs, at most 8)
    #[arg(short, long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub jobs: Option<u32>,
    /// Run only the cases whose FILE::NAME contains TEXT
    #[arg(long, value_name = "TEXT")]
    pub filter: Option<String>,
    /// Write a JUnit XML report to FILE
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// Print the results as JSON on stdout (the human report goes to stderr)
    #[arg(long)]
    pub json: bool,
    /// Re-record each case's `recording` against its real model (or --model)
    #[arg(long)]
    pub record: bool,
    /// With --record: record even under CI
    #[arg(long, requires = "record")]
    pub force: bool,
    /// With --record: the model to record with, instead of the case's
    #[arg(short, long, value_name = "PROVIDER:MODEL")]
    pub model: Option<String>,
    /// Run each case N times (for models that are not deterministic)
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub repeat: u32,
    /// With --repeat: a case passes when at least K runs pass (default: all)
    #[arg(long, value_name = "K", value_parser = clap::value_parser!(u32).range(1..))]
    pub min_pass: Option<u32>,
    /// Print the JSON Schema of scenario files and exit
    #[arg(long)]
    pub schema: bool,
}
