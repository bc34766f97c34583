//! Wiring a session from the flags: model, tools, permissions.

use std::path::PathBuf;
use std::sync::Arc;

use lrg_chat::permissions::{Mode, PermissionSettings, Rule};
use lrg_chat::registry::SessionRegistry;
use lrg_chat::session::{SessionConfig, SwitchableModel};
use lrg_chat::tools::ToolHost;
use lrg_chat::{ChatSession, Permissions};
use lrg_providers::record::ReplayModel;
use lrg_providers::{GenerationSettings, ModelInfo};

use crate::cli::{
    ContextArgs, LimitArgs, ModeArg, ModelArgs, PermissionArgs, SessionArgs, ToolArgs,
};
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
    /// `--session` and `--store`.
    pub saved: &'a SessionArgs,
    /// `--temperature`, `--max-tokens`, `--top-p`, `--seed`, `--stop`.
    pub generation: GenerationSettings,
    /// `--sub-agents`.
    pub sub_agents: bool,
    /// `--max-answer` and `--turn-deadline`.
    pub limits: LimitArgs,
    /// `--no-project-context`, `--skills`, `--memory`.
    pub context: &'a ContextArgs,
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
    /// The last event of a resumed chat's history: printing starts after it.
    pub shown: u64,
    /// Holds a kept chat's store open (its writer's lock) while it runs.
    #[expect(
        dead_code,
        reason = "held, not read: dropping it releases the chat's lock"
    )]
    pub registry: Option<SessionRegistry>,
}

/// The settings file: `--permissions`, else `lrg/permissions.json` in the
/// user's config directory (`None` when there is no home to find it in).
pub fn permissions_path(args: &PermissionArgs) -> Option<PathBuf> {
    args.permissions
        .clone()
        .or_else(|| config_dir().map(|d| d.join("lrg").join("permissions.json")))
}

/// `$XDG_CONFIG_HOME`, else the platform's per-user config directory.
pub(crate) fn config_dir() -> Option<PathBuf> {
    let env = |k: &str| {
        std::env::var_os(k)
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
    };
    if let Some(xdg) = env("XDG_CONFIG_HOME") {
        return Some(xdg);
    }
    if cfg!(windows) {
        return env("APPDATA");
    }
    let home = env("HOME")?;
    Some(if cfg!(target_os = "macos") {
        home.join("Library").join("Application Support")
    } else {
        home.join(".config")
    })
}

/// Whether the flags change the settings for this run (then nothing this run
/// changes is saved: a one-off `--mode auto_all` must not become the default).
fn flags_given(args: &PermissionArgs) -> bool {
    args.mode.is_some() || !args.allow.is_empty() || !args.deny.is_empty()
}

/// The permission settings in force: the settings file's (when there is
/// one), with the flags on top.
pub fn permission_settings(args: &PermissionArgs) -> Result<PermissionSettings, CliError> {
    let mut settings = match permissions_path(args) {
        Some(path) if path.exists() => Permissions::open(&path)
            .map_err(|e| usage!("{e}"))?
            .settings(),
        _ => PermissionSettings::default(),
    };
    if let Some(mode) = args.mode {
        settings.mode = match mode {
            ModeArg::AskAll => Mode::AskAll,
            ModeArg::AutoRead => Mode::AutoRead,
            ModeArg::AutoSafe => Mode::AutoSafe,
            ModeArg::AutoAll => Mode::AutoAll,
        };
    }
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

/// The permissions of a session: bound to the settings file, so that an
/// "always" answer holds in later runs, unless the flags change the settings
/// for this run or there is no file to bind (then they live in memory, and
/// the printer says so when they change).
pub fn permissions(args: &PermissionArgs) -> Result<Arc<Permissions>, CliError> {
    let settings = permission_settings(args)?;
    let memory = || Ok(Arc::new(Permissions::new(settings.clone())));
    if flags_given(args) {
        return memory();
    }
    let Some(path) = permissions_path(args) else {
        return memory();
    };
    match Permissions::open(&path) {
        Ok(p) => Ok(Arc::new(p)),
        Err(e) => {
            eprintln!("lrg: warning: {e}; permission changes will not be saved");
            memory()
        }
    }
}

/// Build the session the flags describe.
pub async fn session(flags: SessionFlags<'_>) -> Result<Ready, CliError> {
    let permissions = permissions(flags.permissions)?;
    // No --model (nor LRG_MODEL): a kept chat resumes on its own model.
    let mut model_args = flags.model.clone();
    if model_args
        .model
        .as_deref()
        .is_none_or(|m| m.trim().is_empty())
        && let Some(key) = &flags.saved.session
    {
        model_args.model = crate::sessions::kept_model(key, flags.saved).await?;
    }
    let resolved = crate::resolve::resolve(&model_args, flags.record.map(PathBuf::as_path)).await?;
    let host = crate::tools::host(flags.tools, flags.strict_tools).await?;
    // AGENTS.md, skills and memory, rebuilt at every turn; `--system` first.
    let prompt =
        Arc::new(crate::prompt::context(flags.context, flags.model, None)?.builder(flags.system));
    if let Err(e) = prompt.add_tools(&host) {
        host.shutdown().await;
        return Err(usage!("{e}"));
    }
    let info = resolved.model.info();
    // Said once, before anything is sent: where this conversation goes.
    if let Some(host) = &info.sends_to {
        eprintln!("This conversation is sent to {host}");
    }
    let source = Arc::new(SwitchableModel::new(resolved.model));
    let tools = host.clone();
    let max_steps = flags.max_steps;
    let local_only = flags.model.local_only;
    let generation = flags.generation;
    let sub_agents = flags.sub_agents;
    let config = flags.limits.apply(SessionConfig::default());
    let hooks = crate::config_file::hooks()?;
    let model_source = source.clone();
    let builder = move || {
        // The limits first: the setters below override their own parts of it.
        let mut builder = ChatSession::builder(model_source.clone())
            .config(config.clone())
            .tools(tools.clone())
            .permissions(permissions.clone())
            // Checked again in the loop, at every turn.
            .local_only(local_only)
            .generation(generation.clone())
            .prompt(prompt.clone())
            .hooks(hooks.iter().cloned());
        if let Some(steps) = max_steps {
            builder = builder.max_steps(steps as usize);
        }
        if sub_agents {
            builder = builder.sub_agents(lrg_chat::sub_agents::SubAgents::default());
        }
        builder
    };
    let (session, shown, registry) = match &flags.saved.session {
        None => (builder().build(), 0, None),
        Some(key) => {
            let kept = crate::sessions::open_kept(key, flags.saved, &info, builder).await?;
            // For `lrg sessions export --test`: a new chat keeps its setup.
            crate::sessions::keep_setup(&kept.session, flags.tools, flags.record, &host).await;
            (kept.session, kept.shown, Some(kept.registry))
        }
    };
    Ok(Ready {
        session,
        source,
        host,
        replay: resolved.replay,
        info,
        shown,
        registry,
    })
}
