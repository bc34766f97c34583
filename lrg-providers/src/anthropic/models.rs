//! `GET /v1/models`: the models a key can use, following `has_more` pages.

use serde_json::Value;

use super::{AnthropicChat, PROVIDER};
use crate::endpoint::sends_to;
use crate::paging::follow_pages;
use crate::{ModelInfo, ModelLocation, ProviderError};

pub(super) async fn list(chat: &AnthropicChat) -> Result<Vec<ModelInfo>, ProviderError> {
    follow_pages(|after| async move {
        let mut params = vec![("limit", "1000")];
        if let Some(id) = &after {
            params.push(("after_id", id.as_str()));
        }
        let url = reqwest::Url::parse_with_params(&format!("{}/v1/models", chat.base), &params)
            .map_err(|e| ProviderError::Config {
                message: format!("bad Anthropic base URL: {e}"),
            })?;
        let request = chat.request_url(reqwest::Method::GET, url)?;
        let page = chat
            .transport
            .get_json(request, chat.config.api_key.as_ref())
            .await?;
        parse_page(&page, &chat.base)
    })
    .await
}

/// One page: its models, and the id to continue after when there are more.
fn parse_page(page: &Value, base: &str) -> Result<(Vec<ModelInfo>, Option<String>), ProviderError> {
    let data =
        page.get("data")
            .and_then(Value::as_array)
            .ok_or_else(|| ProviderError::Protocol {
                message: "Anthropic's model list has no `data` array".into(),
            })?;
    let models = data
        .iter()
        .filter_map(|m| {
            let id = m.get("id").and_then(Value::as_str)?;
            // Newer answers state the window; older ones do not.
            let window = ["max_input_tokens", "context_window"]
                .iter()
                .find_map(|f| m.get(*f).and_then(Value::as_u64))
                .and_then(|n| u32::try_from(n).ok());
            Some(
                ModelInfo::new(PROVIDER.to_string(), id.to_string(), ModelLocation::Cloud)
                    .context_window(window)
                    .sends_to(sends_to(base))
                    .output_mode(super::output_mode(id)),
            )
        })
        .collect();
    let more = page
        .get("has_more")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let next = if more {
        page.get("last_id")
            .and_then(Value::as_str)
            .map(str::to_string)
    } else {
        None
    };
    Ok((models, next))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parses_a_page() {
        let page = json!({
            "data": [{"type": "model", "id": "claude-a", "display_name": "A"}, {"id": 5}, {"id": "claude-b", "max_input_tokens": 200000}],
            "has_more": true, "last_id": "claude-b"
        });
        let (models, next) = parse_page(&page, "https://api.anthropic.com").unwrap();
        assert_eq!(
            models.iter().map(|m| m.model.as_str()).collect::<Vec<_>>(),
            ["claude-a", "claude-b"]
        );
        assert_eq!(models[1].context_window, Some(200_000));
        // Neither name has structured outputs: the answer tool.
        assert_eq!(models[0].output_mode, crate::typed::OutputMode::ForcedTool);
        assert_eq!(models[0].sends_to.as_deref(), Some("api.anthropic.com"));
        assert_eq!(next.as_deref(), Some("claude-b"));
        assert!(parse_page(&json!({"error": 1}), "x").is_err());
    }
}
