//! Reaching models from the flags: the library's provider table and
//! catalog ([`lrg_providers::catalog`]) with `--base-url` applied. Nothing
//! here names a provider but the engines this binary links in.

use std::sync::Arc;

use lrg_providers::catalog::{Connections, ModelCatalog, ProviderModels};
use lrg_providers::{ChatModel, ModelLocation, ModelRef, Provider};

use crate::cli::ModelArgs;
use crate::exit::CliError;
use crate::usage;

fn non_empty(s: Option<&str>) -> Option<String> {
    s.map(str::trim)
        .filter(|u| !u.is_empty())
        .map(str::to_string)
}

/// The connections the environment and flags describe. `--base-url` goes to
/// `provider` (a server the user runs; a cloud's address comes from its env
/// var), or, with no model chosen, to every server provider.
pub fn connections(args: &ModelArgs, provider: Option<Provider>) -> Connections {
    args.engine.configure_pool();
    let mut connections = args.engine.apply(crate::local::with_engines(
        Connections::from_env(),
        args.mmproj.as_deref(),
    ));
    if let Some(mode) = args.tool_format {
        connections = connections.with_tool_mode(mode);
    }
    if let Some(timeout) = args.model_timeout {
        // Both the wait for an answer to begin and the silence between its parts.
        connections = connections.with_transport(
            lrg_providers::transport::TransportConfig::default().with_idle_timeout(timeout),
        );
    }
    if let Some(url) = non_empty(args.base_url.as_deref()) {
        let servers: Vec<Provider> = match provider {
            Some(p) => vec![p],
            None => Provider::ALL.to_vec(),
        };
        for p in servers {
            if p.locality() == ModelLocation::Server {
                connections = connections.with_base_url(p, url.clone());
            }
        }
    }
    connections
}

/// The model for `model_ref` (not `replay:`, handled before).
pub async fn connect(
    model_ref: &ModelRef,
    args: &ModelArgs,
) -> Result<Arc<dyn ChatModel>, CliError> {
    if let Some(missing) = crate::local::missing_engine(model_ref) {
        return Err(missing);
    }
    let connections = connections(args, Some(model_ref.provider));
    crate::load_bar::while_connecting(connections.engine_pool(), connections.connect(model_ref))
        .await
        .map_err(|e| usage!("--model {model_ref}: {e}"))
}

/// What to run when neither `--model` nor `LRG_MODEL` says: the first local
/// model (a model file when an engine is built in, then Ollama, then LM
/// Studio). Says which on stderr.
pub async fn default_model(args: &ModelArgs) -> Result<String, CliError> {
    let catalog = ModelCatalog::new(connections(args, None));
    match catalog.first_local().await {
        Ok(model) => {
            eprintln!(
                "lrg: no --model given; using {} (the first local model)",
                model.id
            );
            Ok(model.id)
        }
        Err(groups) => Err(usage!(
            "no model chosen, and no local model was found ({}).\n\
             Pass --model PROVIDER:MODEL or set LRG_MODEL, for example:\n  \
             LRG_MODEL=openai:gpt-4.1 with OPENAI_API_KEY set\n  \
             LRG_MODEL=anthropic:claude-sonnet-4-5 with ANTHROPIC_API_KEY set\n  \
             LRG_MODEL=ollama:qwen3:8b with Ollama running\n  \
             LRG_MODEL=llama:/path/to/model.gguf\n\
             (`lrg models` shows what is reachable now)",
            tried(&groups)
        )),
    }
}

/// `Ollama: no answer within 2 s, LM Studio: ...`.
fn tried(groups: &[ProviderModels]) -> String {
    groups
        .iter()
        .map(|g| {
            format!(
                "{}: {}",
                g.name,
                g.availability.reason().unwrap_or("no models")
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// Every provider with what it offers now, or why it cannot be used (the
/// catalog, as `lrg models` lists it), `--base-url` going to `provider` as
/// [`connections`] says.
pub async fn list_all(args: &ModelArgs, provider: Option<Provider>) -> Vec<ProviderModels> {
    let mut groups = ModelCatalog::new(connections(args, provider))
        .list()
        .await
        .as_ref()
        .clone();
    crate::local::explain_missing(&mut groups);
    groups
}
