//! Model listing: `/api/tags`, with each model's context length from
//! `/api/show`.

use futures::StreamExt as _;
use serde_json::{Value, json};

use super::OllamaChat;
use crate::{ModelInfo, ModelLocation, ProviderError};

/// How many `/api/show` calls run at once.
const SHOW_CONCURRENCY: usize = 8;

/// The model names in a `/api/tags` answer.
pub(crate) fn parse_tags(value: &Value) -> Result<Vec<String>, ProviderError> {
    let Some(models) = value.get("models").and_then(Value::as_array) else {
        return Err(ProviderError::Protocol {
            message: "Ollama's model list has no `models` array".into(),
        });
    };
    Ok(models
        .iter()
        .filter_map(|m| {
            m.get("name")
                .or_else(|| m.get("model"))
                .and_then(Value::as_str)
        })
        .map(str::to_string)
        .collect())
}

/// The trained context length in a `/api/show` answer: `model_info`'s
/// `<architecture>.context_length`, else any `*.context_length`.
pub(crate) fn parse_context_length(show: &Value) -> Option<u32> {
    let info = show.get("model_info")?.as_object()?;
    let arch = info.get("general.architecture").and_then(Value::as_str);
    let by_arch = arch.and_then(|a| info.get(&format!("{a}.context_length")));
    let any = || {
        info.iter()
            .find(|(k, _)| k.ends_with(".context_length"))
            .map(|(_, v)| v)
    };
    by_arch
        .or_else(any)?
        .as_u64()
        .and_then(|n| u32::try_from(n).ok())
}

/// What a model can do, from `/api/show`'s `capabilities` (`None` where the
/// server does not say: older Ollama versions).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Capabilities {
    /// `vision` is listed.
    pub vision: Option<bool>,
    /// `tools` is listed.
    pub tools: Option<bool>,
}

/// The capabilities in a `/api/show` answer.
pub(crate) fn parse_capabilities(show: &Value) -> Capabilities {
    let Some(list) = show.get("capabilities").and_then(Value::as_array) else {
        return Capabilities::default();
    };
    let has = |c: &str| Some(list.iter().any(|x| x.as_str() == Some(c)));
    Capabilities {
        vision: has("vision"),
        tools: has("tools"),
    }
}

pub(super) async fn list(chat: &OllamaChat) -> Result<Vec<ModelInfo>, ProviderError> {
    Ok(list_detailed(chat)
        .await?
        .into_iter()
        .map(|(info, _)| info)
        .collect())
}

/// The server's models with what `/api/show` says of each.
pub(crate) async fn list_detailed(
    chat: &OllamaChat,
) -> Result<Vec<(ModelInfo, Capabilities)>, ProviderError> {
    let transport = &chat.transport;
    let tags = transport
        .get_json(transport.client().get(chat.endpoint("api/tags")), None)
        .await?;
    let names = parse_tags(&tags)?;
    let sends_to = chat.info_sends_to();
    let show_url = chat.endpoint("api/show");
    // One failed `show` leaves that model's window unknown; the list stands.
    let shown: Vec<(Option<u32>, Capabilities)> = futures::stream::iter(names.iter())
        .map(|name| {
            let request = transport.client().post(&show_url).json(&json!({"model": name}));
            async move {
                match transport.get_json(request, None).await {
                    Ok(show) => (parse_context_length(&show), parse_capabilities(&show)),
                    Err(e) => {
                        tracing::debug!(model = %name, error = %e, "ollama show failed; context length unknown");
                        (None, Capabilities::default())
                    }
                }
            }
        })
        .buffered(SHOW_CONCURRENCY)
        .collect()
        .await;
    Ok(names
        .into_iter()
        .zip(shown)
        .map(|(model, (context_window, caps))| {
            let info = ModelInfo::new("ollama", model, ModelLocation::Server)
                .context_window(context_window)
                .sends_to(sends_to.clone())
                .output_mode(crate::typed::OutputMode::Native);
            (info, caps)
        })
        .collect())
}

#[cfg(test)]
mod capability_tests {
    use super::*;

    #[test]
    fn capabilities_from_show() {
        let caps = parse_capabilities(&json!({"capabilities": ["completion", "vision"]}));
        assert_eq!((caps.vision, caps.tools), (Some(true), Some(false)));
        assert_eq!(parse_capabilities(&json!({})), Capabilities::default());
    }
}
