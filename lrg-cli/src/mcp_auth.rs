//! `lrg mcp login | logout | list`: OAuth logins to streamable-HTTP MCP
//! servers (lrg_chat::tools::oauth), with the tokens in a 0600 file in
//! lrg's config folder (`lrg/mcp-tokens.json`), which every command that
//! starts tool servers reads.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use clap::{Args, Subcommand};
use lrg_chat::tools::McpConfig;
use lrg_chat::tools::oauth::{
    AuthState, FileTokenStore, SharedTokenStore, auth_state, begin_login, logout,
};
use serde_json::{Value, json};

use crate::exit::{CliError, Exit};
use crate::{out, usage};

/// `lrg mcp`.
#[derive(Debug, Args)]
pub struct McpArgs {
    /// What to do.
    #[command(subcommand)]
    pub command: McpCommand,
}

/// The `lrg mcp` subcommands.
#[derive(Debug, Subcommand)]
pub enum McpCommand {
    /// Log in to an OAuth MCP server: opens the browser (or prints the URL) and keeps the tokens
    ///
    /// The browser is $BROWSER, else the platform's opener (xdg-open, open). The
    /// authorization server sends it back to a listener on 127.0.0.1; the tokens are kept
    /// in lrg/mcp-tokens.json in the config folder (readable by you only).
    Login(LoginArgs),
    /// Log out of an MCP server: revoke its tokens where the server offers it, and forget them
    Logout(ServerArgs),
    /// List the MCP servers with their login state: none, logged in (expiry) or needs login
    List(ListArgs),
}

/// `lrg mcp login`.
#[derive(Debug, Args)]
pub struct LoginArgs {
    #[command(flatten)]
    pub server: ServerArgs,
    /// Print the URL to open instead of opening a browser
    #[arg(long)]
    pub no_browser: bool,
    /// How long to wait for the browser to come back, in seconds
    #[arg(long, value_name = "SECONDS", default_value_t = 300)]
    pub timeout: u64,
}

/// A server of an MCP config file.
#[derive(Debug, Args)]
pub struct ServerArgs {
    /// The server's name in the config file
    pub name: String,
    /// The MCP config file that lists it ({"mcpServers": {...}})
    #[arg(long, value_name = "FILE")]
    pub mcp_config: Option<PathBuf>,
}

/// `lrg mcp list`.
#[derive(Debug, Args)]
pub struct ListArgs {
    /// The MCP config file ({"mcpServers": {...}})
    #[arg(long, value_name = "FILE")]
    pub mcp_config: Option<PathBuf>,
    /// Print JSON: {"servers": [{name, url?, auth, expires_at?}]}
    #[arg(long)]
    pub json: bool,
}

/// The token file, in lrg's config folder (`None` without a home).
pub fn token_store() -> Option<SharedTokenStore> {
    let path = crate::setup::config_dir()?
        .join("lrg")
        .join("mcp-tokens.json");
    Some(Arc::new(FileTokenStore::new(path)))
}

fn store_or_fail() -> Result<SharedTokenStore, CliError> {
    token_store().ok_or_else(|| {
        usage!("no config folder to keep the tokens in: set XDG_CONFIG_HOME or HOME")
    })
}

fn config(path: Option<&PathBuf>) -> Result<McpConfig, CliError> {
    let Some(path) = path else {
        return Err(usage!(
            "give --mcp-config FILE: the MCP config file that lists the server"
        ));
    };
    McpConfig::from_file(path).map_err(|e| usage!("--mcp-config: {e}"))
}

fn server<'a>(
    config: &'a McpConfig,
    args: &ServerArgs,
) -> Result<&'a lrg_chat::tools::McpServerConfig, CliError> {
    config.get(&args.name).ok_or_else(|| {
        let names: Vec<&str> = config.servers.iter().map(|(n, _)| n.as_str()).collect();
        usage!(
            "no server `{}` in the MCP config (it lists: {})",
            args.name,
            if names.is_empty() {
                "none".to_owned()
            } else {
                names.join(", ")
            }
        )
    })
}

/// `lrg mcp ...`.
pub async fn mcp(args: McpArgs) -> Result<Exit, CliError> {
    match args.command {
        McpCommand::Login(args) => login(args).await,
        McpCommand::Logout(args) => logout_cmd(args).await,
        McpCommand::List(args) => list(args).await,
    }
}

async fn login(args: LoginArgs) -> Result<Exit, CliError> {
    let config = config(args.server.mcp_config.as_ref())?;
    let cfg = server(&config, &args.server)?;
    let store = store_or_fail()?;
    let pending = begin_login(cfg, store, "lrg")
        .await
        .map_err(|e| usage!("cannot log in to `{}`: {e}", args.server.name))?;
    let url = pending.authorization_url().to_owned();
    let opened = !args.no_browser && open_browser(&url);
    if opened {
        eprintln!("Opened your browser to log in to `{}`.", args.server.name);
        eprintln!("If it did not open, go to:");
    } else {
        eprintln!("To log in to `{}`, open this URL:", args.server.name);
    }
    // The URL alone on stdout: a script (or a test) can pick it up.
    out::line(&url);
    eprintln!(
        "Waiting for the browser to come back (at most {} s)...",
        args.timeout
    );
    let outcome = pending
        .finish(Duration::from_secs(args.timeout.max(1)))
        .await
        .map_err(|e| {
            CliError::failed(anyhow::anyhow!(
                "login to `{}` failed: {e}",
                args.server.name
            ))
        })?;
    eprintln!(
        "Logged in to `{}`{}.",
        args.server.name,
        outcome
            .expires_at
            .map(|at| format!(" (the access token expires {})", when(at)))
            .unwrap_or_default()
    );
    Ok(Exit::Replied)
}

async fn logout_cmd(args: ServerArgs) -> Result<Exit, CliError> {
    let config = config(args.mcp_config.as_ref())?;
    let cfg = server(&config, &args)?;
    let store = store_or_fail()?;
    let kept = auth_state(cfg, &store).await.ok();
    let revoked = logout(cfg, &store)
        .await
        .map_err(|e| usage!("cannot log out of `{}`: {e}", args.name))?;
    match kept {
        Some(AuthState::LoggedIn { .. }) | Some(AuthState::NeedsLogin) if revoked => {
            eprintln!(
                "Logged out of `{}`: its tokens were revoked and forgotten.",
                args.name
            )
        }
        Some(AuthState::LoggedIn { .. }) => eprintln!(
            "Logged out of `{}`: its tokens were forgotten (the server offers no revocation).",
            args.name
        ),
        _ => eprintln!("`{}` had no login to forget.", args.name),
    }
    Ok(Exit::Replied)
}

async fn list(args: ListArgs) -> Result<Exit, CliError> {
    let config = config(args.mcp_config.as_ref())?;
    let store = store_or_fail()?;
    let states = futures::future::join_all(
        config
            .servers
            .iter()
            .map(|(_, cfg)| auth_state(cfg, &store)),
    )
    .await;
    let mut rows = Vec::new();
    for ((name, cfg), state) in config.servers.iter().zip(states) {
        let url = match cfg {
            lrg_chat::tools::McpServerConfig::Http(h) => Some(h.url.clone()),
            _ => None,
        };
        let (auth, detail, expires_at) = match state {
            Ok(AuthState::None) => ("none", String::new(), None),
            Ok(AuthState::LoggedIn {
                expires_at,
                refreshable,
            }) => {
                let detail = match expires_at {
                    Some(at) if at <= SystemTime::now() && refreshable => {
                        "(expired; renewed at the next use)".to_owned()
                    }
                    Some(at) => format!("(expires {})", when(at)),
                    None => "(no expiry given)".to_owned(),
                };
                ("logged_in", detail, expires_at.map(unix_seconds))
            }
            Ok(AuthState::NeedsLogin) => {
                ("needs_login", format!("(run `lrg mcp login {name}`)"), None)
            }
            Ok(_) => ("none", String::new(), None),
            Err(e) => ("error", format!("({e})"), None),
        };
        rows.push((name.clone(), url, auth, detail, expires_at));
    }
    if args.json {
        let servers: Vec<Value> = rows
            .iter()
            .map(|(name, url, auth, _, expires_at)| {
                let mut row = json!({"name": name, "auth": auth});
                if let Some(url) = url {
                    row["url"] = json!(url);
                }
                if let Some(at) = expires_at {
                    row["expires_at"] = json!(at);
                }
                row
            })
            .collect();
        out::line(serde_json::to_string_pretty(&json!({ "servers": servers })).unwrap_or_default());
    } else {
        let width = rows
            .iter()
            .map(|r| r.0.chars().count())
            .max()
            .unwrap_or(0)
            .max(4);
        for (name, url, auth, detail, _) in &rows {
            let shown = match *auth {
                "logged_in" => "logged in",
                "needs_login" => "needs login",
                other => other,
            };
            out::line(format_args!(
                "{name:width$}  {shown} {detail}  {}",
                url.as_deref().unwrap_or("(child process)")
            ));
        }
        for name in &config.disabled {
            out::line(format_args!("{name:width$}  (disabled in the config)"));
        }
    }
    Ok(Exit::Replied)
}

fn unix_seconds(at: SystemTime) -> u64 {
    at.duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// "in 59 min", "in 3 h", or "5 min ago".
fn when(at: SystemTime) -> String {
    let span = |d: Duration| {
        let s = d.as_secs();
        if s < 120 {
            format!("{s} s")
        } else if s < 2 * 3600 {
            format!("{} min", s / 60)
        } else if s < 2 * 86_400 {
            format!("{} h", s / 3600)
        } else {
            format!("{} days", s / 86_400)
        }
    };
    match at.duration_since(SystemTime::now()) {
        Ok(ahead) => format!("in {}", span(ahead)),
        Err(e) => format!("{} ago", span(e.duration())),
    }
}

/// Open `url` in $BROWSER, else the platform's opener; whether one started.
fn open_browser(url: &str) -> bool {
    let mut candidates: Vec<(String, Vec<String>)> = Vec::new();
    if let Some(browser) = std::env::var_os("BROWSER").filter(|b| !b.is_empty()) {
        // $BROWSER may hold several, separated by ':' (the old convention).
        for one in browser
            .to_string_lossy()
            .split(':')
            .filter(|s| !s.is_empty())
        {
            if let Ok(words) = shell_words::split(one)
                && let Some((program, rest)) = words.split_first()
            {
                let mut args: Vec<String> = rest.to_vec();
                match args.iter_mut().find(|a| a.contains("%s")) {
                    Some(a) => *a = a.replace("%s", url),
                    None => args.push(url.to_owned()),
                }
                candidates.push((program.clone(), args));
            }
        }
    }
    let opener = if cfg!(target_os = "macos") {
        Some(("open", vec![url.to_owned()]))
    } else if cfg!(windows) {
        Some((
            "rundll32",
            vec!["url.dll,FileProtocolHandler".to_owned(), url.to_owned()],
        ))
    } else {
        Some(("xdg-open", vec![url.to_owned()]))
    };
    if let Some((program, args)) = opener {
        candidates.push((program.to_owned(), args));
    }
    for (program, args) in candidates {
        let started = std::process::Command::new(&program)
            .args(&args)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn();
        if started.is_ok() {
            return true;
        }
    }
    false
}
