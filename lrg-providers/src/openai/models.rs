//! Model listing (`GET /models`).

use serde_json::Value;

use super::Dialect;
use crate::{ModelInfo, ProviderError};

/// Where servers put a model's context window in their `/models` entries:
/// OpenRouter and others `context_length`, vLLM `max_model_len`, Groq
/// `context_window`, llama.cpp `meta.n_ctx_train`.
const CONTEXT_POINTERS: &[&str] = &[
    "/context_length",
    "/max_model_len",
    "/context_window",
    "/meta/n_ctx",
    "/meta/n_ctx_train",
];

/// The models in a `/models` answer (`{"data": [{"id": ...}, ...]}`), in the
/// server's order.
pub(crate) fn parse_models(
    value: &Value,
    dialect: &Dialect,
    sends_to: Option<String>,
) -> Result<Vec<ModelInfo>, ProviderError> {
    let Some(entries) = value.get("data").and_then(Value::as_array) else {
        return Err(ProviderError::Protocol {
            message: "the model list has no `data` array".into(),
        });
    };
    Ok(entries
        .iter()
        .filter_map(|entry| {
            let id = entry.get("id").and_then(Value::as_str)?;
            let context_window = CONTEXT_POINTERS
                .iter()
                .find_map(|p| entry.pointer(p).and_then(Value::as_u64))
                .and_then(|n| u32::try_from(n).ok());
            Some(
                ModelInfo::new(
                    dialect.provider.to_string(),
                    id.to_string(),
                    dialect.location,
                )
                .context_window(context_window)
                .sends_to(sends_to.clone())
                .output_mode(dialect.output_mode()),
            )
        })
        .collect())
}
