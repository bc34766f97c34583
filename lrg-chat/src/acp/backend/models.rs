//! The agent's models: its model config option (ACP `configOptions`, the
//! one of category `model`, else the one with id `model`), chosen with
//! `session/set_config_option` on each agent session lrg opens, and listed
//! for a model menu from a throwaway session ([`agent_models`]).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{LazyLock, Mutex};
use std::time::{Duration, Instant};

use agent_client_protocol::v1::schema::{
    NewSessionRequest, SessionConfigId, SessionConfigKind, SessionConfigOption,
    SessionConfigOptionCategory, SessionConfigSelect, SessionConfigSelectOptions, SessionId,
    SetSessionConfigOptionRequest,
};

use lrg_providers::ProviderError;

use super::start::START_TIMEOUT;
use super::{AcpBackend, Inner};
use crate::acp::MODEL_OPTION;

/// One model an agent offers.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct AgentModel {
    /// The value of the agent's model option (what `acp:COMMAND#MODEL` names).
    pub id: String,
    /// What the agent calls it for people.
    pub name: String,
}

/// The models an agent offers in its model config option.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct AgentModels {
    /// The model a new agent session starts on, as the agent says.
    pub current: Option<String>,
    /// Every choice, in the agent's order (groups flattened).
    pub models: Vec<AgentModel>,
}

/// The agent's model option among `options`: its id and its choices.
pub(super) fn model_option(
    options: &[SessionConfigOption],
) -> Option<(SessionConfigId, AgentModels)> {
    fn select(o: &SessionConfigOption) -> Option<(SessionConfigId, &SessionConfigSelect)> {
        match &o.kind {
            SessionConfigKind::Select(s) => Some((o.id.clone(), s)),
            _ => None,
        }
    }
    // The category is the protocol's way to say "this is the model"; the id
    // is what agents that predate categories (and lrg itself) use.
    let (id, select) = options
        .iter()
        .filter(|o| o.category == Some(SessionConfigOptionCategory::Model))
        .find_map(select)
        .or_else(|| {
            options
                .iter()
                .filter(|o| *o.id.0 == *MODEL_OPTION)
                .find_map(select)
        })?;
    let flat: Vec<_> = match &select.options {
        SessionConfigSelectOptions::Ungrouped(all) => all.iter().collect(),
        SessionConfigSelectOptions::Grouped(groups) => {
            groups.iter().flat_map(|g| g.options.iter()).collect()
        }
        _ => Vec::new(),
    };
    let models = flat
        .into_iter()
        .map(|o| AgentModel {
            id: o.value.0.to_string(),
            name: o.name.clone(),
        })
        .collect();
    Some((
        id,
        AgentModels {
            current: Some(select.current_value.0.to_string()),
            models,
        },
    ))
}

impl Inner {
    /// Choose the model this backend was made for on the new agent session
    /// `session`, whose answer offered `options`.
    pub(super) async fn choose_model(
        &self,
        cx: &agent_client_protocol::v1::ConnectionTo<agent_client_protocol::Agent>,
        session: &SessionId,
        options: &[SessionConfigOption],
    ) -> Result<(), ProviderError> {
        let Some(wanted) = &self.model else {
            return Ok(());
        };
        let Some((option, offered)) = model_option(options) else {
            return Err(self.failed(format!(
                "model `{wanted}` was asked for, but the agent offers no model option"
            )));
        };
        if offered.current.as_deref() == Some(wanted.as_str()) {
            return Ok(());
        }
        if !offered.models.iter().any(|m| m.id == *wanted) {
            let ids: Vec<&str> = offered.models.iter().map(|m| m.id.as_str()).collect();
            return Err(ProviderError::BadRequest {
                message: format!(
                    "ACP agent `{}` has no model `{wanted}`; it offers: {}",
                    self.name(),
                    ids.join(", ")
                ),
            });
        }
        let set = cx
            .send_request(SetSessionConfigOptionRequest::new(
                session.clone(),
                option,
                wanted.as_str(),
            ))
            .block_task();
        tokio::time::timeout(START_TIMEOUT, set)
            .await
            .map_err(|_| self.failed("session/set_config_option got no answer"))?
            .map_err(|e| self.failed(format!("choosing model `{wanted}`: {e}")))?;
        Ok(())
    }
}

/// How long a listing of an agent's models is reused.
const MODELS_TTL: Duration = Duration::from_secs(300);

/// How long a failure to list them is: less, since the fix (installing
/// the agent, logging in) is the person's next step.
const FAILURE_TTL: Duration = Duration::from_secs(30);

type ModelCache = HashMap<Vec<String>, (Instant, Result<AgentModels, String>)>;

/// What each agent command said last, so a menu asked often starts each
/// agent once in a while, not every time.
static CACHE: LazyLock<Mutex<ModelCache>> = LazyLock::new(Mutex::default);

/// The models the agent `command` offers: it is started in `cwd`, asked for
/// one throwaway session, and stopped. The answer is reused for a few
/// minutes per command (a failure for half a minute). `timeout` bounds the whole exchange, so a
/// slow agent never holds up a model menu: it fails with a reason instead.
/// An agent with no model option offers none (an empty list).
pub async fn agent_models(
    command: Vec<String>,
    cwd: impl Into<PathBuf>,
    timeout: Duration,
) -> Result<AgentModels, ProviderError> {
    let failed = |message: String| ProviderError::Other { message };
    let cached = lrg_providers::sync::lock(&CACHE).get(&command).cloned();
    if let Some((at, known)) = cached {
        let ttl = if known.is_ok() {
            MODELS_TTL
        } else {
            FAILURE_TTL
        };
        if at.elapsed() < ttl {
            return known.map_err(failed);
        }
    }
    let backend = AcpBackend::new(command.clone(), cwd)?;
    let inner = backend.inner;
    let ask = async {
        let running = inner.start().await?;
        let answer = running
            .cx
            .send_request(NewSessionRequest::new(inner.cwd.clone()))
            .block_task()
            .await
            .map_err(|e| inner.failed(format!("session/new: {e}")))?;
        // `running` is dropped here: the agent's process group is killed.
        Ok::<_, ProviderError>(
            model_option(answer.config_options.as_deref().unwrap_or_default())
                .map(|(_, models)| models)
                .unwrap_or_default(),
        )
    };
    let result = match tokio::time::timeout(timeout, ask).await {
        Ok(Ok(models)) => Ok(models),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err(format!(
            "ACP agent `{}` did not tell its models within {} ms",
            inner.name(),
            timeout.as_millis()
        )),
    };
    lrg_providers::sync::lock(&CACHE).insert(command, (Instant::now(), result.clone()));
    result.map_err(failed)
}
