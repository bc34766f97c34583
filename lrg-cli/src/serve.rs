//! `lrg serve`: the HTTP API and the chat page on this machine.
//!
//! Binds 127.0.0.1 unless told otherwise (another address needs
//! `--allow-remote` and is warned about), opens a first chat with the
//! flags' model, tools and permissions, and prints its page URL (the chat
//! token in the fragment) on stdout. The agent token for opening more chats
//! is `LRG_AGENT_TOKEN`, or a fresh one written to a 0600 file whose path is
//! printed. Ctrl-C ends every chat cleanly: streams close, running tools
//! finish and their results are recorded, tool servers stop.
//!
//! Every chat is kept in the store (`--store DIR|postgres://…`,
//! `LRG_STORE`, else the data directory, as for `run`/`chat --session`):
//! the page's, the API's, keyed or not. Keyed ones are resumed by their
//! keys, by this server or the next one; every one is listed and opened
//! again through its owner (the printed URL carries the default owner's
//! token: `#session=…&token=…&owner=default&owner_token=…`). Idle ones are
//! put away there after 30 minutes without a page watching.
//!
//! `--sub-agents` lets every chat's model delegate tasks to sub-agents
//! (unless an API open says `sub_agents: false`): the page shows a card per
//! sub-agent, and asks its questions.
//!
//! Permissions are bound to the settings file `lrg chat` uses, so an
//! "always" answer on the page is saved and holds in the terminal too
//! (unless permission flags change them for this run, as there).
//!
//! What each token may do is in the README's Security section: the agent
//! token opens chats (with tools and a model, but a model that runs a
//! program or reads a path only when the menu offers it, or with
//! `--allow-model-specs`); a chat token works its own chat and may switch
//! only to a model of its menu. `LRG_AGENT_TOKEN` must have 32 characters
//! or more.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use lrg_chat::http::{
    ChatServer, ChatSpec, HttpConfig, MenuEntry, MenuGroup, ModelMenu, ServeOptions, StandardOpener,
};
use lrg_chat::session::SessionConfig;
use lrg_chat::store::{DEFAULT_OWNER, JsonlStore, SessionStore};
use lrg_providers::{ModelLocation, ModelRef, Provider, ProviderError};
use tokio::sync::Mutex;

use crate::cli::{ModelArgs, ServeArgs};
use crate::exit::{CliError, Exit};
use crate::usage;

/// Serve until Ctrl-C.
pub async fn serve(args: ServeArgs) -> Result<Exit, CliError> {
    if !args.bind.is_loopback() && !args.allow_remote {
        return Err(usage!(
            "--bind {} is reachable from other machines: add --allow-remote if you mean it",
            args.bind
        ));
    }
    // One model in memory unless --max-loaded-models says otherwise.
    crate::cli::default_max_loaded_models(1);
    let (agent_token, token_file) = agent_token()?;
    let model = match args.model.model.as_deref().map(str::trim) {
        Some(m) if !m.is_empty() => m.to_string(),
        _ => crate::providers::default_model(&args.model).await?,
    };
    // Bound to the settings file `lrg chat` uses, and shared by every chat
    // that names no permissions of its own: "always allow" on the page is
    // saved, as it is in the terminal.
    let permissions = crate::setup::permissions(&args.permissions)?;
    let servers = crate::tools::servers(&args.tools)?;
    let mut defaults = ChatSpec::new()
        .model(model.clone())
        .local_only(args.model.local_only);
    if !servers.servers.is_empty() {
        defaults = defaults.mcp_servers(servers);
    }
    if let Some(system) = &args.system {
        defaults = defaults.system(system.clone());
    }
    // The default of every chat, the page's included; an API open may say
    // otherwise with `sub_agents`.
    if args.sub_agents {
        defaults = defaults.sub_agents(true);
    }

    let listener = tokio::net::TcpListener::bind((args.bind, args.port))
        .await
        .map_err(|e| usage!("cannot listen on {}:{}: {e}", args.bind, args.port))?;
    let addr = listener
        .local_addr()
        .map_err(|e| CliError::failed(anyhow::anyhow!("no local address: {e}")))?;
    let origin = format!("http://{addr}");
    let mut config = HttpConfig::new(agent_token)
        .defaults(defaults)
        .allow_model_specs(args.allow_model_specs)
        // Bound to loopback, a request naming another host comes through a
        // rebound DNS name: refused, whatever its token.
        .loopback_hosts_only(args.bind.is_loopback());
    if let Some(store) = store(&args).await? {
        config = config.store(store);
    }
    config = config.max_kept_rows(
        args.max_kept_rows
            .map(|n| usize::try_from(n).unwrap_or(usize::MAX)),
    );
    config = config.allow_origin(origin.clone());
    if args.bind.is_loopback() {
        config = config.allow_origin(format!("http://localhost:{}", addr.port()));
    } else {
        eprintln!(
            "lrg: WARNING: listening on {addr}, reachable from other machines; \
             traffic is plain HTTP, and anyone holding a token can make the model work your tools"
        );
    }

    let model_args = args.model.clone();
    let mut session_config = args.limits.apply(SessionConfig {
        generation: args.generation.settings(),
        ..SessionConfig::default()
    });
    if let Some(steps) = args.max_steps {
        session_config.max_steps = steps as usize;
    }
    // Served chats read no project unless --project names one.
    let prompt_context =
        crate::prompt::serve_context(args.project.as_ref(), &args.context, &args.model)?;
    let served = provider_of(&model);
    let opener = StandardOpener::new(move |id: &str| {
        let model_args = ModelArgs {
            model: Some(id.to_string()),
            // --base-url is the served model's server: another provider of
            // the menu is reached at its own address.
            base_url: model_args
                .base_url
                .clone()
                .filter(|_| provider_of(id) == served),
            tool_format: model_args.tool_format,
            local_only: model_args.local_only,
            mmproj: model_args.mmproj.clone(),
            model_timeout: model_args.model_timeout,
            engine: model_args.engine,
        };
        Box::pin(async move {
            resolve_on_blocking_thread(model_args)
                .await
                .map_err(|message| ProviderError::Config { message })
        })
    })
    .session_config(session_config)
    .permissions(permissions)
    .prompt_context(prompt_context)
    // Served chats get only the roots --root names, never the current directory.
    .roots(crate::tools::explicit_roots(&args.tools)?)
    .hooks(crate::config_file::hooks()?);
    // Servers logged in to with `lrg mcp login`; one that needs a login
    // shows on the page with that command.
    let opener = match crate::mcp_auth::token_store() {
        Some(store) => opener.token_store(store),
        None => opener,
    };
    let menu = CliMenu {
        args: args.model.clone(),
        served,
        cache: Mutex::new(None),
    };
    let server = ChatServer::new(config, Arc::new(opener), Arc::new(menu));
    let _sweeper = server.spawn_sweeper(SWEEP);

    let first = server
        .open_chat(ChatSpec::new())
        .await
        .map_err(|e| usage!("cannot open the first chat: {e}"))?;
    // The default owner's token rides along, so the page lists, opens and
    // starts this owner's chats.
    let owner_token = server
        .owner_token(DEFAULT_OWNER)
        .map_err(|e| CliError::failed(anyhow::anyhow!("cannot mint the owner token: {e}")))?;
    let url = format!(
        "{origin}{}&owner={DEFAULT_OWNER}&owner_token={owner_token}",
        first.page_url
    );
    if let Some(path) = &token_file {
        eprintln!(
            "lrg: agent token (to open chats over the API) is in {}",
            path.display()
        );
    }
    // Ctrl-C is listened for before the URL is printed: a script that reads
    // the URL and at once sends SIGINT must get a clean stop, not a kill.
    let mut ctrl_c = Box::pin(tokio::signal::ctrl_c());
    if let std::task::Poll::Ready(Err(e)) = futures::poll!(ctrl_c.as_mut()) {
        return Err(CliError::failed(anyhow::anyhow!(
            "cannot listen for Ctrl-C: {e}"
        )));
    }
    eprintln!("lrg: serving on {origin} — open this page (Ctrl-C stops):");
    crate::out::line(&url);
    // The URL did not reach its reader (a closed pipe, a full disk): nobody
    // can open the page, so the server stops at once, the way Ctrl-C stops it.
    let unread = crate::out::stopped();
    if args.open && !unread {
        open_browser(&url);
    }

    let router = server.router();
    let (done_tx, done_rx) = tokio::sync::oneshot::channel::<()>();
    let stopping = server.clone();
    tokio::spawn(async move {
        if unread || ctrl_c.await.is_ok() {
            if !unread {
                eprintln!("\nlrg: stopping every chat (running tools finish first)…");
            }
            stopping.shutdown().await;
        }
        let _ = done_tx.send(());
    });
    let mut options = ServeOptions::default()
        .header_read_timeout(args.header_timeout)
        .body_read_timeout(args.body_timeout)
        .idle_timeout(args.idle_timeout);
    if let Some(max) = args.max_connections {
        options = options.max_connections(max as usize);
    }
    lrg_chat::http::serve(listener, router, options, async move {
        let _ = done_rx.await;
    })
    .await
    .map_err(|e| CliError::failed(anyhow::anyhow!("the server failed: {e}")))?;
    // The token dies with the server: nothing is left to read it from.
    if let Some(dir) = token_file.as_deref().and_then(std::path::Path::parent) {
        let _ = std::fs::remove_dir_all(dir);
    }
    eprintln!("lrg: stopped");
    Ok(Exit::Replied)
}

/// How often idle keyed chats are looked for.
const SWEEP: Duration = Duration::from_secs(60);

/// The store of chats: the one `--store` (or `LRG_STORE`) names, else the
/// data directory; none (chats then last only while the server runs) when
/// there is no data directory either.
async fn store(args: &ServeArgs) -> Result<Option<Arc<dyn SessionStore>>, CliError> {
    let given = args
        .store
        .store
        .as_deref()
        .is_some_and(|s| !s.trim().is_empty());
    if !given && JsonlStore::default_dir().is_none() {
        eprintln!(
            "lrg: no place to keep chats (set --store DIR, LRG_STORE, XDG_DATA_HOME or HOME): \
             chats last only while this server runs"
        );
        return Ok(None);
    }
    crate::sessions::open_store(&args.store).await.map(Some)
}

/// `LRG_AGENT_TOKEN`, or a fresh token written to a file only this user can
/// read (returned with its path).
fn agent_token() -> Result<(String, Option<PathBuf>), CliError> {
    if let Ok(token) = std::env::var("LRG_AGENT_TOKEN")
        && !token.trim().is_empty()
    {
        let token = token.trim().to_string();
        // A short token is guessed by whoever can reach the port; the error
        // tells its length only, never the token.
        lrg_chat::http::check_token(&token).map_err(|e| usage!("LRG_AGENT_TOKEN: {e}"))?;
        return Ok((token, None));
    }
    let token = lrg_chat::http::generate_token();
    let dir = std::env::var_os("XDG_RUNTIME_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir)
        .join(format!("lrg-{}", std::process::id()));
    let path = dir.join("agent-token");
    write_private(&dir, &path, &token)
        .map_err(|e| CliError::failed(anyhow::anyhow!("cannot write {}: {e}", path.display())))?;
    Ok((token, Some(path)))
}

#[cfg(unix)]
fn write_private(
    dir: &std::path::Path,
    path: &std::path::Path,
    token: &str,
) -> std::io::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    file.write_all(token.as_bytes())
}

#[cfg(not(unix))]
fn write_private(
    dir: &std::path::Path,
    path: &std::path::Path,
    token: &str,
) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    std::fs::write(path, token)
}

/// Resolves `args` to a model on a blocking thread (see
/// [`on_blocking_thread`]); the error is the message to show.
pub(crate) async fn resolve_on_blocking_thread(
    args: ModelArgs,
) -> Result<Arc<dyn lrg_providers::ChatModel>, String> {
    on_blocking_thread(move || async move {
        crate::resolve::resolve(&args, None)
            .await
            .map(|r| r.model)
            .map_err(|e| e.to_string())
    })
    .await
    .and_then(|r| r)
}

/// Run `work` to completion on a blocking thread of this runtime. The
/// provider code's futures are not provably `Send` (higher-ranked closure
/// lifetimes), which a router's handlers must be; `block_on` asks no `Send`.
pub(crate) async fn on_blocking_thread<T, F>(
    work: impl FnOnce() -> F + Send + 'static,
) -> Result<T, String>
where
    T: Send + 'static,
    F: std::future::Future<Output = T>,
{
    let handle = tokio::runtime::Handle::current();
    tokio::task::spawn_blocking(move || handle.block_on(work()))
        .await
        .map_err(|e| format!("the model lookup failed: {e}"))
}

fn open_browser(url: &str) {
    let program = if cfg!(target_os = "macos") {
        "open"
    } else if cfg!(windows) {
        "explorer"
    } else {
        "xdg-open"
    };
    if let Err(e) = std::process::Command::new(program).arg(url).spawn() {
        eprintln!("lrg: could not open a browser ({program}: {e}); open the URL above yourself");
    }
}

/// The model menu over what `lrg models` lists, kept for a minute (listing
/// asks every provider over the network).
struct CliMenu {
    args: ModelArgs,
    /// The served model's provider: the one `--base-url` points at.
    served: Option<Provider>,
    cache: Mutex<Option<(Instant, Vec<MenuGroup>)>>,
}

/// The provider of model id `id`, when it names one.
fn provider_of(id: &str) -> Option<Provider> {
    id.trim().parse::<ModelRef>().ok().map(|r| r.provider)
}

const MENU_TTL: Duration = Duration::from_secs(60);

impl ModelMenu for CliMenu {
    fn menu(&self) -> BoxFuture<'_, Vec<MenuGroup>> {
        Box::pin(async move {
            let mut cache = self.cache.lock().await;
            if let Some((at, groups)) = &*cache
                && at.elapsed() < MENU_TTL
            {
                return groups.clone();
            }
            let (args, served) = (self.args.clone(), self.served);
            // --base-url only where the served model is: given to every
            // server provider, each would list the same server again.
            let listing = on_blocking_thread(move || async move {
                crate::providers::list_all(&args, served).await
            })
            .await;
            let mut entries = Vec::new();
            let local_only = self.args.local_only;
            for p in listing.unwrap_or_default() {
                // --local-only: clouds are not offered.
                if local_only && p.locality == ModelLocation::Cloud {
                    continue;
                }
                match p.availability.reason() {
                    None => {
                        for m in &p.models {
                            let mut entry =
                                MenuEntry::available(p.provider.as_str(), &m.model, m.locality)
                                    .with_context_window(m.context_window)
                                    .with_loaded(m.loaded);
                            if let Some(host) = &m.sends_to {
                                entry = entry.with_sends_to(host);
                            }
                            entries.push(entry);
                        }
                    }
                    Some(reason) => entries.push(MenuEntry::unavailable(
                        p.provider.as_str(),
                        "",
                        p.locality,
                        reason,
                    )),
                }
            }
            let args = self.args.clone();
            let agents =
                on_blocking_thread(move || async move { crate::acp_agents::list(&args).await })
                    .await;
            entries.extend(crate::acp_agents::menu_entries(&agents.unwrap_or_default()));
            // What can be used first; the page folds the rest away.
            entries.sort_by_key(|e| !e.available);
            let groups = MenuGroup::group(entries);
            *cache = Some((Instant::now(), groups.clone()));
            groups
        })
    }
}
