//! `GET /v1beta/models`: the chat models a key can use, following
//! `nextPageToken`, with `inputTokenLimit` as the context window.

use serde_json::Value;

use super::{GeminiChat, PROVIDER};
use crate::endpoint::sends_to;
use crate::paging::follow_pages;
use crate::{ModelInfo, ModelLocation, ProviderError};

pub(super) async fn list(chat: &GeminiChat) -> Result<Vec<ModelInfo>, ProviderError> {
    follow_pages(|token| async move {
        let mut params = vec![("pageSize", "1000")];
        if let Some(t) = &token {
            params.push(("pageToken", t.as_str()));
        }
        let url = reqwest::Url::parse_with_params(&format!("{}/v1beta/models", chat.base), &params)
            .map_err(|e| ProviderError::Config {
                message: format!("bad Gemini base URL: {e}"),
            })?;
        let request = chat.request(reqwest::Method::GET, url)?;
        let page = chat
            .transport
            .get_json(request, chat.config.api_key.as_ref())
            .await?;
        parse_page(&page, &chat.base)
    })
    .await
}

/// One page: its chat models, and the token of the next page.
fn parse_page(page: &Value, base: &str) -> Result<(Vec<ModelInfo>, Option<String>), ProviderError> {
    // An empty account answers `{}`.
    let entries = match page.get("models") {
        None => &[][..],
        Some(Value::Array(entries)) => entries.as_slice(),
        Some(_) => {
            return Err(ProviderError::Protocol {
                message: "Gemini's model list has a `models` that is not an array".into(),
            });
        }
    };
    let models = entries
        .iter()
        .filter(|m| {
            // Embedding and image-only models cannot chat.
            m.get("supportedGenerationMethods")
                .and_then(Value::as_array)
                .is_none_or(|methods| {
                    methods
                        .iter()
                        .any(|x| x.as_str() == Some("generateContent"))
                })
        })
        .filter_map(|m| {
            let name = m.get("name").and_then(Value::as_str)?;
            let name = name.strip_prefix("models/").unwrap_or(name);
            Some(
                ModelInfo::new(PROVIDER.to_string(), name.to_string(), ModelLocation::Cloud)
                    .context_window(
                        m.get("inputTokenLimit")
                            .and_then(Value::as_u64)
                            .and_then(|n| u32::try_from(n).ok()),
                    )
                    .sends_to(sends_to(base))
                    .output_mode(super::output::output_mode(name)),
            )
        })
        .collect();
    let next = page
        .get("nextPageToken")
        .and_then(Value::as_str)
        .filter(|t| !t.is_empty())
        .map(str::to_string);
    Ok((models, next))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parses_a_page() {
        let page = json!({
            "models": [
                {"name": "models/gemini-2.5-flash", "inputTokenLimit": 1048576, "supportedGenerationMethods": ["generateContent", "countTokens"]},
                {"name": "models/text-embedding-004", "supportedGenerationMethods": ["embedContent"]},
                {"displayName": "nameless"},
            ],
            "nextPageToken": "p2"
        });
        let (models, next) =
            parse_page(&page, "https://generativelanguage.googleapis.com").unwrap();
        assert_eq!(models.len(), 1);
        assert_eq!(models[0].model, "gemini-2.5-flash");
        assert_eq!(models[0].context_window, Some(1_048_576));
        assert_eq!(models[0].output_mode, crate::typed::OutputMode::Native);
        assert_eq!(next.as_deref(), Some("p2"));
        assert!(parse_page(&json!({}), "x").unwrap().0.is_empty());
        assert!(parse_page(&json!({"models": 3}), "x").is_err());
    }
}
