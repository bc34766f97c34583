//! Turning `--model provider:model` into a [`ChatModel`].

use std::path::Path;
use std::sync::Arc;

use lrg_chat::acp::AcpBackend;
use lrg_providers::record::{RecordingModel, ReplayModel};
use lrg_providers::{AcpModelId, ChatModel, ModelRef, Provider, ScriptedModel};

use crate::cli::ModelArgs;
use crate::exit::CliError;
use crate::usage;

/// The model a command runs on.
pub struct Resolved {
    /// The model the session talks to (wrapped for recording when asked).
    pub model: Arc<dyn ChatModel>,
    /// The replay, when `replay:` was chosen: checked for unplayed turns at the end.
    pub replay: Option<Arc<ReplayModel>>,
}

/// Resolve the model the flags (or `LRG_MODEL`) name, or the first local
/// server that answers; wrap it in a recorder when `record` is given.
pub async fn resolve(args: &ModelArgs, record: Option<&Path>) -> Result<Resolved, CliError> {
    let id = match args
        .model
        .as_deref()
        .map(str::trim)
        .filter(|m| !m.is_empty())
    {
        Some(id) => id.to_string(),
        None => crate::providers::default_model(args).await?,
    };
    // `acp:COMMAND#MODEL`: the agent's model after the last unquoted `#`.
    if let Some(AcpModelId { command, model }) = AcpModelId::parse(&id) {
        let mut words = shell_words::split(&command).map_err(|e| usage!("--model {id:?}: {e}"))?;
        // As in --mcp, `lrg` is this very binary.
        if words.first().is_some_and(|w| w == "lrg") {
            words[0] = crate::tools::this_binary()?;
        }
        let cwd = std::env::current_dir()
            .map_err(|e| usage!("--model {id}: no working directory for the agent: {e}"))?;
        let model: Arc<dyn ChatModel> =
            Arc::new(AcpBackend::on_model(words, cwd, model).map_err(|e| usage!("{e}"))?);
        return Ok(Resolved {
            model: recorded(model, record)?,
            replay: None,
        });
    }
    let model_ref: ModelRef = id.parse().map_err(|e| usage!("--model {id:?}: {e}"))?;
    if args.local_only && model_ref.provider.is_cloud() {
        return Err(usage!(
            "--local-only: {model_ref} would send the conversation to {}'s cloud; \
             choose a model on this machine or your own server (`lrg models --local-only`)",
            model_ref.provider.spec().name
        ));
    }
    let mut replay = None;
    let model: Arc<dyn ChatModel> = match model_ref.provider {
        Provider::Script => Arc::new(
            ScriptedModel::from_file(&model_ref.model).map_err(|e| usage!("--model {id}: {e}"))?,
        ),
        Provider::Replay => {
            let r = Arc::new(
                ReplayModel::from_file(&model_ref.model)
                    .map_err(|e| usage!("--model {id}: {e}"))?,
            );
            replay = Some(r.clone());
            r
        }
        _ => crate::providers::connect(&model_ref, args).await?,
    };
    Ok(Resolved {
        model: recorded(model, record)?,
        replay,
    })
}

/// `model`, wrapped in a recorder when `record` is given.
fn recorded(
    model: Arc<dyn ChatModel>,
    record: Option<&Path>,
) -> Result<Arc<dyn ChatModel>, CliError> {
    Ok(match record {
        None => model,
        Some(path) => {
            Arc::new(RecordingModel::create(model, path).map_err(|e| usage!("--record: {e}"))?)
        }
    })
}

/// After a replayed run: turns left unplayed mean the session now stops
/// earlier than when the recording was made.
pub fn check_replay_finished(replay: &ReplayModel) -> Result<(), CliError> {
    match replay.remaining() {
        0 => Ok(()),
        n => Err(CliError::failed(anyhow::anyhow!(
            "replay: {n} recorded model turn(s) were not played: the session now stops after {} of {} \
             turn(s); re-record with --record if that is intended",
            replay.played(),
            replay.recording().exchanges.len()
        ))),
    }
}
