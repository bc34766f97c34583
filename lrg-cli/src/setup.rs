//! Wiring a session from the flags: model, tools, permissions.

use std::path::PathBuf;
use std::sync::Arc;

use lrg_chat::permissions::{Mode, PermissionSettings, Rule};
use lrg_chat::session::SwitchableModel;
use lrg_chat::tools::ToolHost;
use lrg_chat::{ChatSession, Permissions};
use lrg_providers::ModelInfo;
use lrg_providers::record::ReplayModel;

use crate::cli::{ModeArg, ModelArgs, PermissionArgs, ToolArgs};
use crate::exit::CliError;
use crate::usage;

/// What `run` and `chat` share.
pub struct SessionFlags<'a> {
    /// The model flags.
    pub model: &'a ModelArgs,
    /// The tool flags.
    pub tools: &'a ToolArgs,
    /// The permission flags.
    pub permissions: &'a PermissionArgs,
    /// `--system`.
    pub system: Option<&'a str>,
    /// `--max-steps`.
    pub max_steps: Option<u32>,
    /// `--record`.
    pub record: Option<&'a PathBuf>,
    /// Whether a tool server that does not start ends the command (a run)
    /// or is only warned about (a chat).
    pub strict_tools: bool,
}

/// A session ready to take messages.
pub struct Ready {
    /// The session.
    pub session: ChatSession,
    /// Its model source, for `/model` to switch.
    pub source: Arc<SwitchableModel>,
    /// Its tools, to shut down at the end.
    pub host: Arc<ToolHost>,
    /// The replay, to check for unplayed turns.
    pub replay: Option<Arc<ReplayModel>>,
    /// The model, as it describes itself.
    pub info: ModelInfo,
}

/// The permission settings the flags ask for.
pub fn permission_settings(args: &PermissionArgs) -> Result<PermissionSettings, CliError> {
    let mode = match args.mode {
        ModeArg::AskAll => Mode::AskAll,
        ModeArg::AutoRead => Mode::AutoRead,
        ModeArg::AutoSafe => Mode::AutoSafe,
        ModeArg::AutoAll => Mode::AutoAll,
    };
    let mut settings = PermissionSettings {
        mode,
        ..PermissionSettings::default()
    };
    for tool in &args.allow {
        settings.rules.insert(tool.clone(), Rule::Allow);
    }
    for tool in &args.deny {
        if settings.rules.insert(tool.clone(), Rule::Block).is_some() {
            return Err(usage!("tool `{tool}` is given to both --allow and --deny"));
        }
    }
    Ok(settings)
}

/// Build the session the flags describe.
pub async fn session(flags: SessionFlags<'_>) -> Result<Ready, CliError> {
    let settings = permission_settings(flags.permissions)?;
    let resolved = crate::resolve::resolve(flags.model, flags.record.map(PathBuf::as_path)).await?;
    let host = crate::tools::host(flags.tools, flags.strict_tools).await?;
    let info = resolved.model.info();
    // Said once, before anything is sent: where this conversation goes.
    if let Some(host) = &info.sends_to {
        eprintln!("This conversation is sent to {host}");
    }
    let source = Arc::new(SwitchableModel::new(resolved.model));
    let mut builder = ChatSession::builder(source.clone())
        .tools(host.clone())
        // In memory only: a command-line run never rewrites anyone's settings.
        .permissions(Arc::new(Permissions::new(settings)))
        // Checked again in the loop, at every turn.
        .local_only(flags.model.local_only);
    if let Some(system) = flags.system {
        builder = builder.system_prompt(system);
    }
    if let Some(steps) = flags.max_steps {
        builder = builder.max_steps(steps as usize);
    }
    Ok(Ready {
        session: builder.build(),
        source,
        host,
        replay: resolved.replay,
        info,
    })
}
