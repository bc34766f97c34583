//! Kept chats: `run`/`chat --session KEY` (create-or-resume through a
//! [`SessionRegistry`]) and `lrg sessions` (list, show, rm, and export
//! `--test`, in [`export`]).
//!
//! A key given on the command line is the session's context key; the client
//! key is the OS user, so two people on one machine never share a chat.
//!
//! A kept chat is never lost on reopen: with no `--model` it resumes on its
//! own model ([`kept_model`]); with another model the command exits 2 and
//! changes nothing, unless `--carry-over` (the conversation moves to the
//! new model) or `--replace` (a new chat under the key; the old one is
//! archived, and `lrg sessions show`/`rm` take its archive id). Only
//! `lrg sessions rm` deletes.

mod export;

use std::path::PathBuf;
use std::sync::Arc;

use lrg_chat::ChatSession;
use lrg_chat::events::Event;
use lrg_chat::registry::{
    OpenRequest, OpenedHow, OtherModel, RegistryConfig, RegistryError, SessionRegistry,
};
use lrg_chat::session::ChatSessionBuilder;
use lrg_chat::store::{
    JsonlStore, ListFilter, ModelBinding, SessionId, SessionKey, SessionKeys, SessionStore,
    SessionSummary, StoreError,
};
use lrg_chat::transcript::{Transcript, TranscriptRow};
use lrg_providers::ModelInfo;

use crate::cli::{SessionArgs, SessionsAction, SessionsArgs, StoreArgs};
use crate::exit::{CliError, Exit};
use crate::out;
use crate::usage;

/// The client key of this process: the OS user, made to fit the key rule
/// (`local` when there is none).
pub fn client_key() -> String {
    let user = ["USER", "USERNAME", "LOGNAME"]
        .into_iter()
        .find_map(|v| std::env::var(v).ok().filter(|u| !u.is_empty()))
        .unwrap_or_default();
    let fitted: String = user
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._:@-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect();
    if SessionKey::parse("client_key", &fitted).is_ok() {
        fitted
    } else {
        "local".into()
    }
}

fn keys(key: &str) -> Result<SessionKeys, CliError> {
    SessionKeys::new(&client_key(), key).map_err(|e| usage!("--session: {e}"))
}

/// The store `--store` (or `LRG_STORE`, or the default directory) names.
pub async fn open_store(args: &StoreArgs) -> Result<Arc<dyn SessionStore>, CliError> {
    let given = args
        .store
        .as_deref()
        .map(str::trim)
        .filter(|s| !s.is_empty());
    match given {
        Some(url) if url.starts_with("postgres://") || url.starts_with("postgresql://") => {
            postgres(url).await
        }
        Some(dir) => Ok(Arc::new(JsonlStore::new(dir))),
        None => match JsonlStore::default_dir() {
            Some(dir) => Ok(Arc::new(JsonlStore::new(dir))),
            None => Err(usage!(
                "no place to keep chats: set --store DIR (or LRG_STORE), XDG_DATA_HOME or HOME"
            )),
        },
    }
}

#[cfg(feature = "postgres")]
async fn postgres(url: &str) -> Result<Arc<dyn SessionStore>, CliError> {
    let store = lrg_chat::store::PgStore::connect(url)
        .await
        .map_err(CliError::failed)?;
    Ok(Arc::new(store))
}

#[cfg(not(feature = "postgres"))]
async fn postgres(_: &str) -> Result<Arc<dyn SessionStore>, CliError> {
    Err(usage!(
        "this lrg was built without PostgreSQL support: build it with `--features postgres`, \
         or give --store a directory"
    ))
}

fn store_error(e: StoreError) -> CliError {
    match e {
        StoreError::Locked { .. } => CliError::usage(e),
        // Damage needs a person, not a retry: exit 2, the file named.
        e if e.is_damage() => CliError::usage(anyhow::anyhow!(
            "{e}. The chat cannot be resumed until the file is repaired or moved away \
             (`lrg sessions` lists it as damaged)"
        )),
        other => CliError::failed(other),
    }
}

/// A kept chat, opened.
pub struct Kept {
    /// The session.
    pub session: ChatSession,
    /// Its last replayed history event.
    pub shown: u64,
    /// The registry holding it (and its store's lock).
    pub registry: SessionRegistry,
}

/// The model the chat kept under `key` is on, if there is one: what a
/// `--session` run with no `--model` (and no `LRG_MODEL`) resumes it on. A
/// damaged chat under the key is refused (exit 2), as an open would.
pub async fn kept_model(key: &str, saved: &SessionArgs) -> Result<Option<String>, CliError> {
    let keys = keys(key)?;
    let store = open_store(&saved.store).await?;
    let found = store.find(&keys).await.map_err(store_error)?;
    Ok(found.map(|f| f.meta.model.model))
}

/// What `--carry-over` / `--replace` ask for.
fn policy(saved: &SessionArgs) -> OtherModel {
    if saved.carry_over {
        OtherModel::CarryOver
    } else if saved.replace {
        OtherModel::Replace
    } else {
        OtherModel::Refuse
    }
}

/// Exit 2 for a key on another model: nothing changed, and both ways
/// forward named.
fn other_model(key: &str, stored: &str, info: &ModelInfo) -> CliError {
    let asked = info.id();
    let sent = info
        .sends_to
        .as_deref()
        .map(|host| format!(", which sends it to {host}"))
        .unwrap_or_default();
    usage!(
        "session {key} is a chat with {stored}, not {asked}; nothing was changed. \
         Leave out --model to go on with {stored}, or:\n  \
         --carry-over  carry this conversation over to {asked}{sent}\n  \
         --replace     start a new chat under {key}; the old one is archived, not deleted \
         (`lrg sessions` lists it)"
    )
}

/// Create or resume the chat kept under `key` on `model` (`info`), in the
/// store and with the bounds `saved` gives; keys on another model are
/// refused (exit 2, nothing changed) unless `--carry-over` or `--replace`
/// says what to do. A damaged chat under the key is refused (exit 2) and
/// left as it is.
pub async fn open_kept(
    key: &str,
    saved: &SessionArgs,
    info: &ModelInfo,
    builder: impl Fn() -> ChatSessionBuilder + Send + Sync + 'static,
) -> Result<Kept, CliError> {
    let model = info.id();
    let keys = keys(key)?;
    let store = open_store(&saved.store).await?;
    let max_kept_rows = saved
        .max_kept_rows
        .map(|n| usize::try_from(n).unwrap_or(usize::MAX));
    let registry = SessionRegistry::new(
        move |_: &ModelBinding| Ok(builder()),
        RegistryConfig::default().max_kept_rows(max_kept_rows),
    )
    .with_store(store);
    let request = OpenRequest::keyed(keys, ModelBinding::new(&model)).on_other_model(policy(saved));
    let opened = registry.open(request).await.map_err(|e| match e {
        RegistryError::Store(e) => store_error(e),
        RegistryError::Keys(e) => usage!("--session: {e}"),
        RegistryError::OtherModel { stored_model, .. } => other_model(key, &stored_model, info),
        other => CliError::failed(other),
    })?;
    match &opened.how {
        OpenedHow::Resumed { rows } => {
            eprintln!(
                "lrg: resuming session {key} ({rows} rows; `lrg sessions show {key}` prints them)"
            )
        }
        OpenedHow::CarriedOver { from, rows } => {
            let sent = info
                .sends_to
                .as_deref()
                .map(|host| format!("; the conversation is being sent to {host}"))
                .unwrap_or_default();
            eprintln!("lrg: carrying session {key} ({rows} rows) over from {from} to {model}{sent}")
        }
        OpenedHow::Replaced {
            archived,
            old_model,
        } => eprintln!(
            "lrg: session {key} is a new chat with {model}; the old one with {old_model} is \
             archived as {archived} (`lrg sessions show {archived}` prints it)"
        ),
        _ => {}
    }
    // Printing starts after the replayed history (a warning about the file,
    // or the model switch of a carry-over, comes after it and is shown).
    let entries = opened.session.events().entries();
    let shown = entries
        .iter()
        .rev()
        .find(|e| !matches!(e.event, Event::Warning { .. } | Event::ModelSwitched { .. }))
        .and_then(|e| e.seq)
        .unwrap_or(0);
    Ok(Kept {
        session: opened.session,
        shown,
        registry,
    })
}

/// `lrg sessions`.
pub async fn sessions(args: SessionsArgs) -> Result<Exit, CliError> {
    let store = open_store(&args.store).await?;
    match args.action.unwrap_or(SessionsAction::List) {
        SessionsAction::List => list(store.as_ref(), args.json).await,
        SessionsAction::Show { key } => show(store.as_ref(), &key, args.json).await,
        SessionsAction::Rm { key } => rm(store.as_ref(), &key).await,
        SessionsAction::Export { key, test, reply } => {
            export::export(store.as_ref(), &key, &test, reply, args.json).await
        }
    }
}

/// Keep, with a new kept chat, how it is set up (the session's part and
/// the flags' servers and recording), so that `lrg sessions export --test`
/// can turn it into a test later. A resumed chat keeps the setup of its
/// first message; a model that cannot be resolved now fails the first
/// turn as well, which says why.
pub async fn keep_setup(
    session: &ChatSession,
    tools: &crate::cli::ToolArgs,
    record: Option<&PathBuf>,
    host: &lrg_chat::ToolHost,
) {
    let cwd = std::env::current_dir().ok();
    let absolute = |path: &PathBuf| match &cwd {
        Some(dir) if path.is_relative() => dir.join(path),
        _ => path.clone(),
    };
    let other_tools = host
        .tools()
        .into_iter()
        .filter(|t| !matches!(t.source, lrg_chat::tools::ToolSource::Mcp { .. }))
        .map(|t| t.spec.name);
    let origin = lrg_chat::store::SetupOrigin::new()
        .mcp(tools.mcp.iter().cloned())
        .mcp_config(tools.mcp_config.as_ref().map(absolute))
        .recording(record.map(absolute))
        .other_tools(other_tools)
        .cwd(cwd.clone());
    let _ = session.keep_setup(origin).await;
}

async fn list(store: &dyn SessionStore, json: bool) -> Result<Exit, CliError> {
    let mut filter = ListFilter::all();
    let me = client_key();
    filter.client_key = Some(me.clone());
    let all = store.list(&filter).await.map_err(store_error)?;
    // Damaged chats are listed too, never hidden: yours, and those whose
    // owner cannot be told any more.
    let damaged: Vec<_> = store
        .damaged()
        .await
        .map_err(store_error)?
        .into_iter()
        .filter(|d| d.keys.as_ref().is_none_or(|k| k.client().as_str() == me))
        .collect();
    let damaged_key = |d: &lrg_chat::store::DamagedSession| {
        d.keys
            .as_ref()
            .map_or_else(|| "?".to_string(), |k| k.context().as_str().to_string())
    };
    let rows: Vec<_> = all
        .iter()
        .map(|s| {
            let key = s
                .meta
                .keys
                .as_ref()
                .map(|k| k.context().as_str().to_string())
                .unwrap_or_default();
            (key, s)
        })
        .collect();
    if json {
        let mut out: Vec<_> = rows
            .iter()
            .map(|(key, s)| {
                let mut row = serde_json::json!({
                    "key": key,
                    "id": s.meta.id,
                    "model": s.meta.model.model,
                    "rows": s.rows,
                    "updated_ms": s.updated_ms,
                    "archived": s.meta.archived,
                });
                // What `lrg sessions show` and `rm` take for it.
                if let Some(archive_id) = s.meta.archive_id() {
                    row["archive_id"] = serde_json::json!(archive_id);
                }
                row
            })
            .collect();
        out.extend(damaged.iter().map(|d| {
            serde_json::json!({
                "key": d.keys.as_ref().map(|k| k.context().as_str()),
                "id": d.id,
                "file": d.file,
                "damaged": d.error.to_string(),
            })
        }));
        out::line(serde_json::to_string_pretty(&out).unwrap_or_default());
        return Ok(Exit::Replied);
    }
    if rows.is_empty() && damaged.is_empty() {
        eprintln!("no kept chats (start one with `lrg chat --session KEY`)");
        return Ok(Exit::Replied);
    }
    let width = rows
        .iter()
        .map(|(k, _)| k.len())
        .chain(damaged.iter().map(|d| damaged_key(d).len()))
        .max()
        .unwrap_or(3)
        .max(3);
    let mwidth = rows
        .iter()
        .map(|(_, s)| s.meta.model.model.len())
        .max()
        .unwrap_or(5)
        .max(if damaged.is_empty() {
            5
        } else {
            "DAMAGED".len()
        });
    out::line(format_args!(
        "{:width$}  {:mwidth$}  {:>5}  LAST USED",
        "KEY", "MODEL", "ROWS"
    ));
    let now = now_ms();
    for (key, s) in rows {
        let archived = s
            .meta
            .archive_id()
            .map(|id| format!("  (archived: {id})"))
            .unwrap_or_default();
        out::line(format_args!(
            "{key:width$}  {:mwidth$}  {:>5}  {}{archived}",
            s.meta.model.model,
            s.rows,
            ago(now.saturating_sub(s.updated_ms))
        ));
    }
    for d in &damaged {
        out::line(format_args!(
            "{:width$}  {:mwidth$}  {:>5}  {}",
            damaged_key(d),
            "DAMAGED",
            "?",
            d.error
        ));
    }
    Ok(Exit::Replied)
}

fn ago(ms: u64) -> String {
    let s = ms / 1000;
    match s {
        0..60 => "just now".into(),
        60..3600 => format!("{} min ago", s / 60),
        3600..86_400 => format!("{} h ago", s / 3600),
        _ => format!("{} d ago", s / 86_400),
    }
}

/// The chat `key` names: the one kept under that key, else the archived
/// chat whose archive id it is (yours only).
async fn find(store: &dyn SessionStore, key: &str) -> Result<SessionSummary, CliError> {
    let keys = SessionKeys::new(&client_key(), key).map_err(|e| usage!("{e}"))?;
    if let Some(found) = store.find(&keys).await.map_err(store_error)? {
        return Ok(found);
    }
    archived(store, key)
        .await?
        .ok_or_else(|| usage!("no kept chat `{key}` (`lrg sessions` lists them)"))
}

/// Your archived chat whose archive id is `id`, if `id` is one.
async fn archived(store: &dyn SessionStore, id: &str) -> Result<Option<SessionSummary>, CliError> {
    let Ok(id) = id.parse::<SessionId>() else {
        return Ok(None);
    };
    let mut mine = ListFilter::all();
    mine.client_key = Some(client_key());
    Ok(store
        .list(&mine)
        .await
        .map_err(store_error)?
        .into_iter()
        .find(|s| s.meta.archive_id() == Some(&id)))
}

async fn show(store: &dyn SessionStore, key: &str, json: bool) -> Result<Exit, CliError> {
    let found = find(store, key).await?;
    let stored = store.load(&found.meta.id).await.map_err(store_error)?;
    for warning in &stored.warnings {
        eprintln!("lrg: {warning}");
    }
    // All of it: the store keeps the whole conversation, and so does its
    // reader here (the HTTP API's transcript is the bounded one).
    let transcript = Transcript::whole(&stored.rows);
    let total = kept_total(&stored.state);
    // How its sub-agents ended (kept with each one's transcript).
    let sub_agents = lrg_chat::sub_agents::stored(store, &found.meta.id)
        .await
        .map_err(store_error)?;
    if json {
        // The transcript's fields, then the chat's totals beside them.
        let mut value = serde_json::to_value(&transcript).unwrap_or_default();
        if let Some(object) = value.as_object_mut() {
            object.insert(
                "total".into(),
                serde_json::to_value(total).unwrap_or_default(),
            );
            object.insert(
                "sub_agents".into(),
                serde_json::to_value(&sub_agents).unwrap_or_default(),
            );
        }
        out::line(serde_json::to_string_pretty(&value).unwrap_or_default());
        return Ok(Exit::Replied);
    }
    if transcript.truncated {
        out::line("(older rows left out)");
    }
    for row in &transcript.rows {
        match row {
            TranscriptRow::User { text, images } => {
                let images = if *images > 0 {
                    format!(" [{images} image(s)]")
                } else {
                    String::new()
                };
                out::line(format_args!("you: {text}{images}"));
            }
            TranscriptRow::Assistant { text, .. } => out::line(format_args!("model: {text}")),
            TranscriptRow::ToolCall {
                tool,
                arguments,
                outcome,
                output,
                ..
            } => {
                let outcome = serde_json::to_value(outcome)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default();
                out::line(format_args!(
                    "tool {tool} {arguments} ({outcome}): {output}"
                ));
            }
            _ => {}
        }
    }
    for agent in &sub_agents {
        out::line(sub_agent_line(agent, now_ms()));
    }
    // Only when a turn reported usage: a model that reports none has no
    // total worth a line.
    if stored.state.usage != lrg_providers::Usage::default() {
        out::line(format_args!("total: {}", crate::prices::summary_of(&total)));
    }
    Ok(Exit::Replied)
}

/// One of a kept chat's sub-agents, for `lrg sessions show`:
/// `sub-agent 1 done: count the notes (started 3 min ago, took 12 s)`.
fn sub_agent_line(agent: &lrg_chat::sub_agents::SubAgentInfo, now: u64) -> String {
    let started = agent
        .started_ms
        .map(|at| format!("started {}", ago(now.saturating_sub(at))));
    let took = match (agent.started_ms, agent.ended_ms) {
        (Some(start), Some(end)) => Some(format!("took {} s", end.saturating_sub(start) / 1000)),
        _ => None,
    };
    let times: Vec<String> = started.into_iter().chain(took).collect();
    let times = if times.is_empty() {
        String::new()
    } else {
        format!(" ({})", times.join(", "))
    };
    format!(
        "sub-agent {} {}: {}{times}",
        agent.n,
        agent.status.as_str(),
        agent.description
    )
}

/// Milliseconds since the Unix epoch (the store's clock).
fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// What a kept chat has cost: its tokens and, when the store kept it, its
/// cost (a chat kept before costs were has an unknown one).
fn kept_total(state: &lrg_chat::store::SessionState) -> lrg_providers::pricing::Spend {
    let mut total = lrg_providers::pricing::Spend::default();
    let cost = state.cost.unwrap_or(lrg_providers::pricing::Cost::UNPRICED);
    total.add(state.usage, cost);
    total
}

async fn rm(store: &dyn SessionStore, key: &str) -> Result<Exit, CliError> {
    let keys = SessionKeys::new(&client_key(), key).map_err(|e| usage!("{e}"))?;
    let id = match store.find(&keys).await {
        Ok(Some(found)) => found.meta.id,
        Ok(None) => match archived(store, key).await? {
            Some(found) => found.meta.id,
            None => return Err(usage!("no kept chat `{key}` (`lrg sessions` lists them)")),
        },
        // Asked for by name, a damaged chat may go: that is how a person
        // who cannot repair it is rid of it.
        Err(e) if e.is_damage() => store
            .damaged()
            .await
            .map_err(store_error)?
            .into_iter()
            .find(|d| d.keys.as_ref() == Some(&keys))
            .and_then(|d| d.id)
            .ok_or_else(|| store_error(e))?,
        Err(e) => return Err(store_error(e)),
    };
    // Its sub-agents' transcripts go with it.
    lrg_chat::store::delete_sub_agents(store, &id)
        .await
        .map_err(store_error)?;
    store.delete(&id).await.map_err(store_error)?;
    eprintln!("deleted kept chat {key}");
    Ok(Exit::Replied)
}
