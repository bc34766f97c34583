//! `lrg acp`: lrg as an Agent Client Protocol agent on stdin/stdout, for
//! editors. The protocol is [`lrg_chat::acp`]'s; this builds its sessions
//! from the flags: model, tools (the client's MCP servers join `--mcp`'s),
//! permissions and, with `--store`, kept sessions that `session/load` and
//! `session/resume` open again and `session/list` lists. Stdout is the protocol's: everything else goes to stderr.

use std::path::PathBuf;
use std::sync::Arc;

use futures::future::BoxFuture;
use lrg_chat::acp::{
    AcpError, AcpSession, ModelChoice, SessionFactory, SessionListing, SessionSpec,
};
use lrg_chat::session::{ChatSessionBuilder, SessionConfig};
use lrg_chat::store::{
    ListFilter, ModelBinding, RESUME_ROWS, SessionId, SessionMeta, SessionStore,
};
use lrg_chat::tools::{McpConfig, McpServerConfig, ToolHost};
use lrg_chat::{ChatSession, FixedModel, Permissions};
use lrg_providers::ModelLocation;
use lrg_providers::catalog::ModelCatalog;

use crate::cli::{AcpArgs, ContextArgs, LimitArgs, ModelArgs};
use crate::exit::{CliError, Exit};

/// Serve ACP on stdio until the client closes stdin.
pub async fn acp(args: AcpArgs) -> Result<Exit, CliError> {
    let permissions = crate::setup::permissions(&args.permissions)?;
    let own = crate::tools::servers(&args.tools)?;
    // A bad --model is a usage error now, not at every session/new.
    crate::resolve::resolve(&args.model, None).await?;
    let store = match &args.store.store {
        Some(_) => Some(crate::sessions::open_store(&args.store).await?),
        None => None,
    };
    let factory = Arc::new(Sessions {
        model: args.model,
        own,
        permissions,
        system: args.system,
        context: args.context,
        max_steps: args.max_steps,
        sub_agents: args.sub_agents,
        limits: args.limits,
        store,
    });
    lrg_chat::acp::serve_stdio(factory)
        .await
        .map_err(CliError::failed)?;
    Ok(Exit::Replied)
}

/// How `lrg acp` builds a session: as `run`/`chat` would from the same flags.
struct Sessions {
    model: ModelArgs,
    own: McpConfig,
    permissions: Arc<Permissions>,
    system: Option<String>,
    /// `--no-project-context`, `--skills`, `--memory`: the project is the
    /// editor session's folder.
    context: ContextArgs,
    max_steps: Option<u32>,
    /// `--sub-agents`.
    sub_agents: bool,
    limits: LimitArgs,
    store: Option<Arc<dyn SessionStore>>,
}

impl Sessions {
    /// The session's model, tools and builder; `model` overrides `--model`.
    async fn build(&self, spec: &SessionSpec, model: Option<&str>) -> Result<Built, AcpError> {
        let mut args = self.model.clone();
        if let Some(model) = model.or(spec.model.as_deref()) {
            args.model = Some(model.to_string());
        }
        // Provider futures are not provably Send (see serve.rs).
        let model = crate::serve::resolve_on_blocking_thread(args)
            .await
            .map_err(AcpError::Session)?;
        let info = model.info();
        if let Some(host) = &info.sends_to {
            eprintln!("lrg acp: this conversation is sent to {host}");
        }
        let host = Arc::new(ToolHost::new());
        let failures = host.add_mcp_config(&tools(&self.own, spec)).await;
        for failure in failures {
            eprintln!("lrg acp: warning: {failure} (its tools are missing)");
        }
        // The limits first: the setters below override their own parts of it.
        let mut builder = ChatSession::builder(Arc::new(FixedModel(model)))
            .config(self.limits.apply(SessionConfig::default()))
            .tools(host.clone())
            .permissions(self.permissions.clone())
            .local_only(self.model.local_only);
        let cwd = spec.cwd.is_dir().then_some(spec.cwd.as_path());
        let prompt = crate::prompt::context(&self.context, &self.model, cwd)
            .map_err(|e| AcpError::Session(e.to_string()))?
            .builder(self.system.as_deref());
        if let Err(e) = prompt.add_tools(&host) {
            eprintln!("lrg acp: warning: {e}");
        }
        builder = builder.prompt(prompt);
        let hooks =
            crate::config_file::hooks_in(cwd).map_err(|e| AcpError::Session(e.to_string()))?;
        builder = builder.hooks(hooks);
        if let Some(steps) = self.max_steps {
            builder = builder.max_steps(steps as usize);
        }
        if self.sub_agents {
            builder = builder.sub_agents(lrg_chat::sub_agents::SubAgents::default());
        }
        Ok(Built {
            builder,
            host,
            model: info.id(),
        })
    }
}

/// A session's parts, before it is built.
struct Built {
    builder: ChatSessionBuilder,
    host: Arc<ToolHost>,
    model: String,
}

impl Built {
    fn finish(self) -> AcpSession {
        AcpSession::new(self.builder.build(), self.model).with_host(self.host)
    }
}

/// lrg's own servers first, then the client's, renamed `<name>_2` ... when
/// a name is taken; the client's child servers run in the session's
/// directory.
fn tools(own: &McpConfig, spec: &SessionSpec) -> McpConfig {
    let mut servers = own.servers.clone();
    for (name, config) in &spec.mcp.servers {
        let mut config = config.clone();
        if let McpServerConfig::Stdio(child) = &mut config
            && child.cwd.is_none()
            && spec.cwd.is_dir()
        {
            child.cwd = Some(spec.cwd.clone());
        }
        let mut unique = name.clone();
        let mut n = 2;
        while servers.iter().any(|(taken, _)| *taken == unique) {
            unique = format!("{name}_{n}");
            n += 1;
        }
        servers.push((unique, config));
    }
    let mut config = McpConfig::new(servers);
    // lrg's own servers keep what their entries say of their tools.
    config.policies = own.policies.clone();
    config
}

fn store_error(e: impl std::fmt::Display) -> AcpError {
    AcpError::Session(format!("session store: {e}"))
}

impl SessionFactory for Sessions {
    fn open(&self, spec: SessionSpec) -> BoxFuture<'_, Result<AcpSession, AcpError>> {
        Box::pin(async move {
            let mut built = self.build(&spec, None).await?;
            if let Some(store) = &self.store {
                let mut meta = SessionMeta::new(ModelBinding::new(built.model.clone()));
                // Kept with the editor's folder, so `session/list` there finds it.
                meta.cwd = Some(spec.cwd.clone()).filter(|cwd| cwd.is_absolute());
                if let Err(e) = store.create(&meta).await {
                    built.host.shutdown().await;
                    return Err(store_error(e));
                }
                built.builder = built.builder.store(store.clone(), meta.id);
            }
            Ok(built.finish())
        })
    }

    fn can_load(&self) -> bool {
        self.store.is_some()
    }

    fn load<'a>(
        &'a self,
        id: &'a str,
        spec: SessionSpec,
    ) -> BoxFuture<'a, Result<AcpSession, AcpError>> {
        Box::pin(async move {
            let Some(store) = &self.store else {
                return Err(AcpError::Unsupported(
                    "sessions are not kept: start `lrg acp` with --store".into(),
                ));
            };
            let sid: SessionId = id
                .parse()
                .map_err(|_| AcpError::NotFound(format!("unknown session id `{id}`")))?;
            let stored = store.resume(&sid, RESUME_ROWS).await.map_err(|e| match e {
                lrg_chat::store::StoreError::NotFound(_) => {
                    AcpError::NotFound(format!("unknown session id `{id}`"))
                }
                other => store_error(other),
            })?;
            // A kept chat goes on with the model it was made with.
            let model = stored.meta.model.model.clone();
            let mut built = self.build(&spec, Some(&model)).await?;
            built.builder = built.builder.store(store.clone(), sid).resumed(stored);
            Ok(built.finish())
        })
    }

    fn list(&self, cwd: Option<PathBuf>) -> BoxFuture<'_, Result<Vec<SessionListing>, AcpError>> {
        Box::pin(async move {
            let Some(store) = &self.store else {
                return Err(AcpError::Unsupported(
                    "sessions are not kept: start `lrg acp` with --store".into(),
                ));
            };
            let mut kept = store.list(&ListFilter::all()).await.map_err(store_error)?;
            kept.sort_by(|a, b| {
                (b.updated_ms, a.meta.id.as_str()).cmp(&(a.updated_ms, b.meta.id.as_str()))
            });
            // Only what an editor made (a folder is known) and may go on
            // with: archived chats and sub-agents are not sessions of its own.
            Ok(kept
                .into_iter()
                .filter(|s| !s.meta.archived && s.meta.sub_agent.is_none())
                .filter_map(|s| {
                    let folder = s.meta.cwd.clone()?;
                    if cwd.as_ref().is_some_and(|want| *want != folder) {
                        return None;
                    }
                    let mut listing =
                        SessionListing::new(s.meta.id.as_str(), folder).updated(s.updated_ms);
                    if let Some(title) = s.meta.name.clone().or(s.first_message.clone()) {
                        listing = listing.with_title(title);
                    }
                    Some(listing)
                })
                .collect())
        })
    }

    fn models(&self) -> BoxFuture<'_, Vec<ModelChoice>> {
        let args = self.model.clone();
        Box::pin(async move {
            crate::serve::on_blocking_thread(move || async move {
                let connections =
                    crate::providers::connections(&args, Some(lrg_providers::Provider::Server));
                let listing = ModelCatalog::new(connections).list().await;
                listing
                    .iter()
                    .filter(|g| g.availability.is_available())
                    .filter(|g| !args.local_only || g.locality != ModelLocation::Cloud)
                    .flat_map(|g| g.models.iter())
                    .map(|m| ModelChoice::new(m.id.clone(), m.name.clone().unwrap_or(m.id.clone())))
                    .collect()
            })
            .await
            .unwrap_or_default()
        })
    }
}
