//! Agent CLIs logged in on this machine (Claude Code, Codex, Gemini CLI) as
//! [`ChatModel`]s with their own tools off: [`CliAgent`].
//!
//! Each turn runs one CLI process in its own process group, with an empty
//! scratch directory as its cwd and its tools switched off where the CLI
//! allows it (Claude Code: no tools, an empty strict MCP set; Codex: a
//! read-only sandbox, the user's config ignored).
//!
//! None of them inherits this process's environment: each gets the base set
//! every child gets ([`crate::child_env`]), the proxy settings, and its own
//! vendor's names ([`CliSpec::env`]) — Claude Code `ANTHROPIC_*`, `CLAUDE_*`
//! (and `AWS_*` only under `CLAUDE_CODE_USE_BEDROCK`, the Vertex names only
//! under `CLAUDE_CODE_USE_VERTEX`); Codex `CODEX_*`, `OPENAI_API_KEY`,
//! `OPENAI_BASE_URL`; Gemini CLI `GEMINI_*`, `GOOGLE_*`, `CLOUDSDK_*`. Never
//! an lrg token. Their logins under `HOME` (`~/.claude`, `~/.codex`,
//! `~/.gemini`) are found as before.
//! Cancelling the turn kills the group. The CLI's own session id is kept in
//! the history (a [`crate::NativePart`] on the answer), so a later turn
//! resumes that session and sends only the new messages; when the id is
//! lost the conversation is replayed as a transcript.
//!
//! The vendor receives the conversation: the location is always
//! [`ModelLocation::Cloud`].
//!
//! The only tools such a model can use are lrg's own, those offered in the
//! request: they are described in the system prompt in the CLI's
//! [`CliSpec::tool_format`] (Hermes `<tool_call>` tags for all three), its
//! answer text is read for calls by the text-format parsers
//! ([`crate::text_tools`]), and calls and results go back in the prompt as
//! text in the same format. A resumed session is sent only the new tail,
//! which after a tool call is its results.
//!
//! ```no_run
//! # async fn demo() -> Result<(), lrg_providers::ProviderError> {
//! use lrg_providers::cli_agents::{CliAgent, CliAgentConfig, CliKind};
//! use lrg_providers::{ChatModel, Message, TurnRequest, collect_turn};
//!
//! let model = CliAgent::new(CliAgentConfig::new(CliKind::Claude, "sonnet"))?;
//! let request = TurnRequest::new(vec![Message::user("Hello")]);
//! let turn = collect_turn(model.turn(request, Default::default())).await?;
//! println!("{}", turn.text());
//! # Ok(()) }
//! ```

mod claude;
mod codex;
mod gemini;
mod lines;
mod process;
mod prompt;
mod spec;

use std::path::PathBuf;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

pub use prompt::SESSION;
pub use spec::{CliKind, CliSpec, EnvPolicy};

use crate::openai::system_with_instructions;
use crate::text_tools::{TextToolDecoder, TextTurn, ToolMode};
use crate::typed::OutputMode;
use crate::wire::Decoder;
use crate::{ChatModel, ModelInfo, ModelLocation, ProviderError, TurnRequest, TurnStream};

/// Whether an external agent (ACP) started with `command` gets `name` from lrg's
/// environment, beyond the base set every child gets
/// ([`crate::child_env`]).
///
/// An ACP agent may be anything, but it is nearly always one of the agent
/// CLIs or an adapter around one (`claude-code-acp`, `gemini
/// --experimental-acp`, `codex-acp`): when a word of the command names one,
/// the agent gets that CLI's own login names
/// ([`CliSpec::env`]); when none does, the login
/// names of all three, since it may drive any of them. Never anything else
/// (`AWS_*`, `GITHUB_TOKEN`, other vendors' keys), and never an lrg token.
pub fn agent_env_passes(command: &[String], name: &str) -> bool {
    let named: Vec<CliKind> = CliKind::ALL
        .into_iter()
        .filter(|k| {
            let program = k.spec().program;
            command.iter().any(|word| {
                let file = std::path::Path::new(word)
                    .file_name()
                    .and_then(|f| f.to_str())
                    .unwrap_or(word);
                file.to_ascii_lowercase().contains(program)
            })
        })
        .collect();
    let kinds = if named.is_empty() {
        CliKind::ALL.to_vec()
    } else {
        named
    };
    kinds.iter().any(|k| k.spec().env.passes(name))
}

/// Ends the tools section of a CLI's system prompt.
const AFTER_CALLS: &str = "\n\nThese are the only tools you have. The calls you write are run \
     for you and their results sent in the next message: end your answer after your last call.";

/// Longest silence allowed from a CLI; they think without printing.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(300);

/// Settings of a [`CliAgent`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct CliAgentConfig {
    /// Which CLI.
    pub kind: CliKind,
    /// Model name passed to the CLI (`default`: the CLI's own choice).
    pub model: String,
    /// The executable; `None` finds it (env var, `PATH`, install dirs).
    pub program: Option<PathBuf>,
    /// Longest silence allowed before the turn is given up.
    pub idle_timeout: Duration,
}

impl CliAgentConfig {
    /// A config for `model` through `kind`'s CLI.
    pub fn new(kind: CliKind, model: impl Into<String>) -> Self {
        Self {
            kind,
            model: model.into(),
            program: None,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
        }
    }

    /// With this executable rather than the one found.
    pub fn with_program(mut self, program: impl Into<PathBuf>) -> Self {
        self.program = Some(program.into());
        self
    }

    /// With this idle timeout.
    pub fn with_idle_timeout(mut self, timeout: Duration) -> Self {
        self.idle_timeout = timeout;
        self
    }
}

/// Whether `kind`'s CLI can be used here: `Err` says why not, naming what
/// to install or set, never a path.
pub fn availability(kind: CliKind) -> Result<(), String> {
    match spec::locate_here(kind.spec()) {
        Some(_) => Ok(()),
        None => Err(spec::not_found(kind.spec())),
    }
}

/// The models `kind` offers (the CLI's own aliases; `default` lets it choose).
pub fn models(kind: CliKind) -> Vec<ModelInfo> {
    let spec = kind.spec();
    spec.models.iter().map(|model| info(spec, model)).collect()
}

fn info(spec: &CliSpec, model: &str) -> ModelInfo {
    // Text only: these CLIs are sent a placeholder for each image.
    // A typed answer is asked for in words and read from the text.
    ModelInfo::new(spec.provider, model, ModelLocation::Cloud)
        .sends_to(Some(spec.sends_to.to_string()))
        .vision(false)
        .output_mode(OutputMode::Prompted)
}

/// An agent CLI as a model with its own tools off (lrg's come as text).
#[derive(Debug, Clone)]
pub struct CliAgent {
    config: CliAgentConfig,
    program: PathBuf,
}

impl CliAgent {
    /// A model from its config; fails when the executable cannot be found.
    pub fn new(config: CliAgentConfig) -> Result<Self, ProviderError> {
        let spec = config.kind.spec();
        let program = match &config.program {
            Some(program) => program.clone(),
            None => spec::locate_here(spec).ok_or_else(|| ProviderError::Config {
                message: spec::not_found(spec),
            })?,
        };
        Ok(Self { config, program })
    }

    /// The config in use.
    pub fn config(&self) -> &CliAgentConfig {
        &self.config
    }

    fn decoder(&self) -> Box<dyn Decoder> {
        stream_decoder(self.config.kind, &self.config.model)
    }
}

/// The decoder of `kind`'s JSON-lines output, one line per frame (also what
/// the `cli_agents` fuzz target feeds).
pub(crate) fn stream_decoder(kind: CliKind, model: &str) -> Box<dyn Decoder> {
    let provider = kind.spec().provider;
    match kind {
        CliKind::Claude => Box::new(claude::ClaudeDecoder::new(provider, model)),
        CliKind::Codex => Box::new(codex::CodexDecoder::new(provider, model)),
        CliKind::Gemini => Box::new(gemini::GeminiDecoder::new(provider, model)),
    }
}

impl ChatModel for CliAgent {
    fn info(&self) -> ModelInfo {
        info(self.config.kind.spec(), &self.config.model)
    }

    fn turn(&self, request: TurnRequest, cancel: CancellationToken) -> TurnStream {
        let kind = self.config.kind;
        let spec = kind.spec();
        let model = self.config.model.as_str();
        // Tools go in the system prompt, calls and results in the history
        // as text; the parser reads calls back out of the answer.
        let TextTurn {
            mut request,
            parser,
        } = TextTurn::new(ToolMode::Text(spec.tool_format), model, request);
        if parser.is_some()
            && let Some(system) = request.system.as_mut()
        {
            // An agent CLI is used to running its own tools: say who runs these.
            system.push_str(AFTER_CALLS);
        }
        if let Some(schema) = &request.output {
            // The session adds the instructions for a prompted model; a
            // caller who asks this adapter directly gets them too.
            request.system = Some(system_with_instructions(request.system.as_deref(), schema));
        }
        let system_flag = kind != CliKind::Gemini;
        let mut prompt = prompt::prompt(&request, spec.provider, model, !system_flag);
        if let (Some(schema), Some(_)) = (&request.output, &prompt.resume) {
            // A resumed session keeps the instructions it started with, not
            // this message's: the schema goes with the new text.
            prompt.text.push_str("\n\n");
            prompt.text.push_str(&schema.instructions());
        }
        let resume = prompt.resume.as_deref();
        // A resumed session already has its instructions.
        let system = request.system.as_deref().filter(|_| resume.is_none());
        let args = match kind {
            CliKind::Claude => claude::args(model, system, resume),
            CliKind::Codex => codex::args(model, system, resume),
            CliKind::Gemini => gemini::args(model, resume),
        };
        // An agent CLI picks its own sampling: no flag takes these.
        crate::generation::dropped(spec.name, &request.settings.which_set());
        let invocation = process::Invocation {
            spec,
            program: self.program.clone(),
            args,
            stdin: prompt.text,
            idle_timeout: self.config.idle_timeout,
        };
        let decoder = match parser {
            Some(parser) => Box::new(TextToolDecoder::new(self.decoder(), parser)),
            None => self.decoder(),
        };
        process::run(invocation, decoder, cancel)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmd(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| (*w).to_owned()).collect()
    }

    #[test]
    fn an_acp_agent_gets_the_login_names_of_the_cli_it_names_only() {
        let claude = cmd(&["npx", "@zed-industries/claude-code-acp"]);
        assert!(agent_env_passes(&claude, "ANTHROPIC_API_KEY"));
        assert!(!agent_env_passes(&claude, "GEMINI_API_KEY"));
        let gemini = cmd(&["/usr/bin/gemini", "--experimental-acp"]);
        assert!(agent_env_passes(&gemini, "GEMINI_API_KEY"));
        assert!(!agent_env_passes(&gemini, "ANTHROPIC_API_KEY"));
        let other = cmd(&["my-agent"]);
        assert!(agent_env_passes(&other, "OPENAI_API_KEY"));
        for command in [claude, gemini, other] {
            for name in ["AWS_SECRET_ACCESS_KEY", "GITHUB_TOKEN", "LRG_AGENT_TOKEN"] {
                assert!(!agent_env_passes(&command, name), "{name}");
            }
        }
    }
}
