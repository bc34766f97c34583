//! The command line, as clap reads it.

use std::net::IpAddr;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

mod engine;
mod flags;

pub use engine::{EngineArgs, default_max_loaded_models};
use flags::seconds;
pub use flags::*;

/// The exit codes, shown in `--help` and the README.
pub const EXIT_CODES: &str = "\
Exit codes:
  0  the model replied
  1  a model or tool error ended the run
  2  bad usage or configuration
  3  stopped (Ctrl-C), the step limit (--max-steps) ran out, or a budget
     (--max-cost, --max-tokens-total) would have been passed";

/// The "Models" help, from the provider table.
pub fn model_help() -> String {
    // `acp:` is not a provider of the table: the agent is a process that
    // runs its own loop (lrg_chat::acp::AcpBackend), resolved by the CLI.
    format!(
        "Models (--model provider:model, default $LRG_MODEL, else the first local model found):\n{}\n  {:<28}  {}",
        lrg_providers::Provider::help_lines(),
        "acp:'COMMAND ARGS'[#MODEL]",
        "an external ACP agent, which runs its own tools (#MODEL: one of its models)"
    )
}

/// `lrg`: an agent chat runtime. A model works a set of tools (MCP servers)
/// and a person approves what it may change.
#[derive(Debug, Parser)]
#[command(name = "lrg", version, propagate_version = true, after_help = EXIT_CODES)]
pub struct Cli {
    /// lrg's config file (hooks, project doc names)
    /// [default: $XDG_CONFIG_HOME/lrg/config.toml or the platform's config dir, when it exists]
    #[arg(long, global = true, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// A prices file (TOML or JSON) over the built-in price table: it overrides and adds prices
    /// (see `lrg prices --schema`)
    #[arg(long, global = true, value_name = "FILE", env = "LRG_PRICES")]
    pub prices: Option<PathBuf>,
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
    /// List the MCP servers' resources and resource templates, or read one (--read)
    #[command(after_help = EXIT_CODES)]
    Resources(ResourcesArgs),
    /// List the MCP servers' prompts and their arguments (`/prompt` in `lrg chat` sends one)
    #[command(after_help = EXIT_CODES)]
    Prompts(PromptsArgs),
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
    /// Print the system prompt and tools the next model turn would send, section by section
    ///
    /// No model is needed: without --model it shows what a model that takes tools natively
    /// gets. The project instructions (AGENTS.md), skills and memory are read as `lrg run`
    /// reads them.
    #[command(after_help = EXIT_CODES)]
    Prompt(PromptArgs),
    /// List the price table turns are priced with (dollars per million tokens)
    #[command(after_help = EXIT_CODES)]
    Prices(PricesArgs),
    /// Log in to and out of OAuth MCP servers, and list their login state
    #[command(after_help = EXIT_CODES)]
    Mcp(crate::mcp_auth::McpArgs),
}

/// `lrg prices`.
#[derive(Debug, Clone, Args)]
pub struct PricesArgs {
    /// Print the table as JSON (a prices file)
    #[arg(long)]
    pub json: bool,
    /// Print the JSON Schema of a prices file (--prices FILE, $LRG_PRICES)
    #[arg(long, conflicts_with = "json")]
    pub schema: bool,
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
    /// Answer tool servers' questions (MCP elicitation) from FILE: JSON, server name → the
    /// field values to answer its forms with (fields left out take their defaults), or
    /// "decline"/"cancel". Without it every question is declined
    #[arg(long, value_name = "FILE")]
    pub answers: Option<PathBuf>,
    /// Print the session's events as JSON lines on stdout (first line: the schema version)
    #[arg(long)]
    pub json: bool,
    /// The system prompt
    #[arg(long, value_name = "TEXT")]
    pub system: Option<String>,
    #[command(flatten)]
    pub context: ContextArgs,
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
    #[command(flatten)]
    pub context: ContextArgs,
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
    #[command(flatten)]
    pub context: ContextArgs,
    /// Model turns allowed per prompt
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub max_steps: Option<u32>,
    /// Let each session's model delegate tasks to sub-agents
    /// (spawn_sub_agent, list_sub_agents, read_sub_agent); their results start turns of
    /// their own, which the editor sees as they run
    #[arg(long)]
    pub sub_agents: bool,
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

/// `lrg resources`.
#[derive(Debug, Clone, Args)]
pub struct ResourcesArgs {
    #[command(flatten)]
    pub tools: ToolArgs,
    /// Print JSON instead of a table
    #[arg(long)]
    pub json: bool,
    /// Read this resource (with --server) and print its contents
    #[arg(long, value_name = "URI", requires = "server")]
    pub read: Option<String>,
    /// The server the resource of --read belongs to, as `lrg resources` lists it
    #[arg(long, value_name = "NAME", requires = "read")]
    pub server: Option<String>,
}

/// `lrg prompts`.
#[derive(Debug, Clone, Args)]
pub struct PromptsArgs {
    #[command(flatten)]
    pub tools: ToolArgs,
    /// Print JSON instead of a list
    #[arg(long)]
    pub json: bool,
}

/// Where chats are kept.
#[derive(Debug, Clone, Default, Args)]
pub struct StoreArgs {
    /// Where chats are kept: a directory, or postgres://... (default: $LRG_STORE, else
    /// $XDG_DATA_HOME/lrg/sessions)
    // Global: `lrg sessions show KEY --store DIR` as well as `lrg sessions --store DIR show KEY`.
    #[arg(
        long,
        global = true,
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
    /// Print a kept chat's transcript, then its sub-agents (how each ended, and when)
    Show {
        /// The chat's key (as given to --session), or an archived chat's archive id
        key: String,
    },
    /// Delete a kept chat
    Rm {
        /// The chat's key (as given to --session), or an archived chat's archive id
        key: String,
    },
    /// Turn a kept chat into a regression test: a recording and a scenario file in DIR that
    /// `lrg test DIR` runs offline
    ///
    /// The scenario replays the chat's first message and asserts its tool calls (names and
    /// arguments), their order and the final reply. The recording is the one `--record` wrote
    /// when the chat began with it, else it is rebuilt from the kept history.
    Export {
        /// The chat's key (as given to --session), or an archived chat's archive id
        key: String,
        /// The folder to write `<key>.test.yaml` and `<key>.recording.json` into (created if
        /// need be; files of an earlier export of the chat are written over)
        #[arg(long = "test", value_name = "DIR")]
        test: std::path::PathBuf,
        /// How the final reply is asserted: all of it, or that it contains its first sentence
        #[arg(long = "match", value_name = "HOW", value_enum, default_value_t = ReplyMatch::Exact)]
        reply: ReplyMatch,
    },
}

/// `lrg sessions export --match`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ReplyMatch {
    /// The reply must be exactly the kept one
    Exact,
    /// The reply must contain the kept reply's first sentence
    Contains,
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
    /// The project whose instructions (AGENTS.md, from DIR up to its repository root) and skills
    /// (.lrg/skills/) every chat gets [default: none]
    #[arg(long, value_name = "DIR")]
    pub project: Option<PathBuf>,
    #[command(flatten)]
    pub context: SkillMemoryArgs,
    /// Model turns allowed per message
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub max_steps: Option<u32>,
    /// Let the model of each chat delegate tasks to sub-agents that work in the background (4
    /// at a time); the page shows each one. An open may still set `sub_agents` itself
    #[arg(long)]
    pub sub_agents: bool,
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

/// `lrg prompt`.
#[derive(Debug, Clone, Args)]
pub struct PromptArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    #[command(flatten)]
    pub tools: ToolArgs,
    #[command(flatten)]
    pub permissions: PermissionArgs,
    /// The system prompt (the `base` section)
    #[arg(long, value_name = "TEXT")]
    pub system: Option<String>,
    #[command(flatten)]
    pub context: ContextArgs,
    /// As with sub-agents on (`--sub-agents` of run and chat)
    #[arg(long)]
    pub sub_agents: bool,
    /// As for `lrg run --output-schema FILE`: with the answer schema in words, where the model
    /// is asked that way
    #[arg(long, value_name = "FILE", conflicts_with = "sub_agents")]
    pub output_schema: Option<PathBuf>,
    /// Print JSON: {"sections": [{"name", "text", "source", "added_by"}], "tools": [{"name",
    /// "description", "class"}], "model"}
    #[arg(long)]
    pub json: bool,
}
