//! ACP agents as models: the known agents on PATH (the catalog's presets)
//! and the one `--model acp:…` names, each with the models it offers (read
//! from a throwaway agent session, see [`lrg_chat::acp::agent_models`]), for
//! `lrg models` and the page's model menu.

use std::time::Duration;

use lrg_chat::acp::{AgentModels, agent_models};
use lrg_chat::http::MenuEntry;
use lrg_providers::catalog::ModelCatalog;
use lrg_providers::{AcpModelId, ModelLocation};
use serde::Serialize;

use crate::cli::ModelArgs;

/// How long one agent may take to tell its models: started, initialized
/// and a session opened. Agents are asked concurrently, so a listing waits
/// this at most.
const MODELS_TIMEOUT: Duration = Duration::from_secs(5);

/// One agent, as `lrg models --json` lists it.
#[derive(Debug, Clone, Serialize)]
pub struct ListedAgent {
    /// Its name for people (the command, for one `--model` names).
    pub name: String,
    /// The model id that runs it on its default model.
    pub id: String,
    /// Its command line.
    pub command: String,
    /// The model its sessions start on, as it says.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub current: Option<String>,
    /// Its models, each with the id that runs it (`acp:COMMAND#MODEL`).
    pub models: Vec<ListedModel>,
    /// Why its models are not known, when it did not tell them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// One model of an agent.
#[derive(Debug, Clone, Serialize)]
pub struct ListedModel {
    /// `acp:COMMAND#MODEL`.
    pub id: String,
    /// The agent's value for it.
    pub model: String,
    /// What the agent calls it.
    pub name: String,
}

/// The agents to list: the known ones on PATH, and the one `--model` names
/// when it is an agent. None under `--local-only`: where an agent sends the
/// conversation is its own business, which lrg cannot vouch for.
pub async fn list(args: &ModelArgs) -> Vec<ListedAgent> {
    if args.local_only {
        return Vec::new();
    }
    let catalog = ModelCatalog::new(crate::providers::connections(args, None));
    let mut wanted: Vec<(String, String)> = catalog
        .agents()
        .into_iter()
        .map(|a| (a.preset.name.to_string(), a.preset.command_line()))
        .collect();
    if let Some(id) = args.model.as_deref().and_then(AcpModelId::parse)
        && !wanted.iter().any(|(_, c)| *c == id.command)
    {
        wanted.insert(0, (id.command.clone(), id.command));
    }
    let asks = wanted
        .into_iter()
        .map(|(name, command)| listed(name, command));
    futures::future::join_all(asks).await
}

async fn listed(name: String, command: String) -> ListedAgent {
    let id = AcpModelId::new(command.clone(), None).to_string();
    let told = match words(&command) {
        Ok(words) => match std::env::current_dir() {
            Ok(cwd) => agent_models(words, cwd, MODELS_TIMEOUT)
                .await
                .map_err(|e| e.to_string()),
            Err(e) => Err(format!("no working directory for the agent: {e}")),
        },
        Err(e) => Err(e),
    };
    let (models, reason) = match told {
        Ok(models) => (models, None),
        Err(reason) => (AgentModels::default(), Some(reason)),
    };
    ListedAgent {
        name,
        models: models
            .models
            .iter()
            .map(|m| ListedModel {
                id: AcpModelId::new(command.clone(), Some(m.id.clone())).to_string(),
                model: m.id.clone(),
                name: m.name.clone(),
            })
            .collect(),
        current: models.current,
        id,
        command,
        reason,
    }
}

/// The program and arguments of `command`, as `--model acp:…` runs them.
fn words(command: &str) -> Result<Vec<String>, String> {
    let mut words = shell_words::split(command).map_err(|e| format!("acp:{command}: {e}"))?;
    if words.first().is_some_and(|w| w == "lrg") {
        words[0] = crate::tools::this_binary().map_err(|e| e.to_string())?;
    }
    Ok(words)
}

/// The human lines `lrg models` prints for `agents`.
pub fn table(agents: &[ListedAgent]) -> String {
    let mut out = String::new();
    if agents.is_empty() {
        return out;
    }
    out.push_str("ACP agents (each runs its own loop and tools)\n");
    for a in agents {
        out.push_str(&format!("  {}  {}\n", a.id, a.name));
        if let Some(reason) = &a.reason {
            out.push_str(&format!("    models not known: {reason}\n"));
        }
        for m in &a.models {
            let current = if a.current.as_deref() == Some(m.model.as_str()) {
                " (its default)"
            } else {
                ""
            };
            out.push_str(&format!("    {}  {}{current}\n", m.id, m.name));
        }
    }
    out
}

/// The menu entries of `agents`, grouped under each agent (`acp:COMMAND`):
/// its default model, then those it offers, each shown by the agent's name
/// for it and chosen by its full id.
pub fn menu_entries(agents: &[ListedAgent]) -> Vec<MenuEntry> {
    let mut entries = Vec::new();
    for a in agents {
        let entry = |id: &str, shown: &str| {
            let mut entry = MenuEntry::available("acp", shown, ModelLocation::Server);
            entry.id = id.to_string();
            entry.provider = a.id.clone();
            entry
        };
        entries.push(entry(&a.id, "the agent's default"));
        entries.extend(a.models.iter().map(|m| entry(&m.id, &m.name)));
    }
    entries
}
