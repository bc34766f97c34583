//! Probing one provider: its models, real context windows and what each can
//! do, within the probe timeout. A probe never fails: what went wrong
//! becomes the provider's `unavailable` reason.

use std::collections::HashMap;

use serde_json::Value;

use super::connections::{Connections, Endpoint, Known, connect_http};
use super::files::{FoundModel, find};
use super::table::{Access, EngineFiles, Provider, WindowProbe};
use super::{ASSUMED_CONTEXT_WINDOW, Availability, CatalogModel, ProviderModels};
use crate::anthropic::{AnthropicChat, AnthropicConfig};
use crate::gemini::{GeminiChat, GeminiConfig};
use crate::ollama::{OllamaChat, OllamaConfig, list_detailed, parse_host};
use crate::openai::{OpenAiChat, OpenAiConfig};
use crate::responses::{ResponsesChat, ResponsesConfig};
use crate::transport::{HttpTransport, TransportConfig};
use crate::typed::OutputMode;
use crate::{ApiKey, ModelInfo, ModelLocation, ProviderError};

/// What a probe learned beyond the model list.
#[derive(Debug, Clone, Copy, Default)]
struct Extra {
    window: Option<u32>,
    vision: Option<bool>,
    tools: Option<bool>,
    /// Not a chat model (an embedding model).
    skip: bool,
}

/// `provider`'s models now, or why it cannot be used; bounded by the probe
/// timeout.
pub(crate) async fn probe(connections: &Connections, provider: Provider) -> ProviderModels {
    let timeout = connections.probe_timeout();
    let spec = provider.spec();
    let result = match spec.access {
        Access::Engine(kind) => {
            let found =
                tokio::time::timeout(timeout, local_files(connections, provider, kind)).await;
            // Files are listed even without their engine, so a user sees
            // what a build with it would run.
            match found {
                Ok(Ok(models)) if !connections.has_engine(provider) => {
                    return group(
                        provider,
                        Availability::Unavailable {
                            reason: format!("the {} engine is not part of this program", spec.name),
                        },
                        models,
                    );
                }
                other => other,
            }
        }
        // Looking on PATH and in install dirs: no request, no timeout.
        Access::Cli(kind) => Ok(crate::cli_agents::availability(kind).map(|()| {
            // Text only: no images, and no native tools (lrg's tools reach
            // the CLI described in its prompt, their calls read from its text).
            let extra = Extra {
                vision: Some(false),
                tools: Some(false),
                ..Extra::default()
            };
            crate::cli_agents::models(kind)
                .into_iter()
                .map(|info| from_info(provider, info, extra))
                .collect()
        })),
        _ => tokio::time::timeout(timeout, http_probe(connections, provider)).await,
    };
    let (availability, models) = match result {
        Ok(Ok(models)) => (Availability::Available, models),
        Ok(Err(reason)) => (Availability::Unavailable { reason }, Vec::new()),
        Err(_) => (
            Availability::Unavailable {
                reason: format!("no answer within {}", seconds(timeout)),
            },
            Vec::new(),
        ),
    };
    group(provider, availability, models)
}

fn group(
    provider: Provider,
    availability: Availability,
    models: Vec<CatalogModel>,
) -> ProviderModels {
    ProviderModels {
        provider,
        name: provider.spec().name,
        locality: provider.locality(),
        availability,
        models,
    }
}

/// The model files of an engine's kind in the model directories.
async fn local_files(
    connections: &Connections,
    provider: Provider,
    kind: EngineFiles,
) -> Result<Vec<CatalogModel>, String> {
    let (dirs, paths) = (
        connections.model_dirs().to_vec(),
        connections.model_paths().to_vec(),
    );
    let found = tokio::task::spawn_blocking(move || find(kind, &dirs, &paths))
        .await
        .map_err(|_| "looking for model files failed".to_string())?;
    Ok(found.into_iter().map(|f| from_file(provider, f)).collect())
}

fn seconds(d: std::time::Duration) -> String {
    let s = d.as_secs_f64();
    if s.fract() == 0.0 {
        format!("{s:.0} s")
    } else {
        format!("{s:.1} s")
    }
}

async fn http_probe(
    connections: &Connections,
    provider: Provider,
) -> Result<Vec<CatalogModel>, String> {
    let timeout = connections.probe_timeout();
    let transport = TransportConfig::new(timeout, timeout);
    let endpoint = connections
        .endpoint_with(provider, transport)
        .map_err(|e| reason(&e))?;
    http_models(&endpoint).await.map_err(|e| reason(&e))
}

/// A provider error as an `unavailable` reason: its message without the
/// "configuration error:" prefix (keys are scrubbed by the transport).
fn reason(e: &ProviderError) -> String {
    match e {
        ProviderError::Config { message } | ProviderError::Transient { message, .. } => {
            message.clone()
        }
        other => other.to_string(),
    }
}

async fn http_models(endpoint: &Endpoint) -> Result<Vec<CatalogModel>, ProviderError> {
    let spec = endpoint.provider.spec();
    let base = endpoint.base_url.clone();
    let transport = endpoint.transport.clone();
    match spec.access {
        Access::OpenAi { dialect, windows } => {
            let mut config = OpenAiConfig::new(dialect, base.clone(), "").with_transport(transport);
            if let Some(key) = endpoint.api_key.clone() {
                config = config.with_api_key(key);
            }
            let chat = OpenAiChat::new(config)?;
            let http = HttpTransport::new(endpoint.transport.clone())?;
            let key = endpoint.api_key.as_ref();
            let (listed, extras) =
                futures::join!(chat.list_models(), extras(&http, &base, key, windows));
            let cloud = spec.locality == ModelLocation::Cloud;
            Ok(listed?
                .into_iter()
                .filter_map(|info| {
                    let extra = extras
                        .get(&info.model)
                        .or_else(|| extras.get(ANY_MODEL))
                        .copied()
                        .unwrap_or_default();
                    let extra = if cloud {
                        Extra {
                            vision: openai_chat_family(&info.model),
                            tools: openai_chat_family(&info.model),
                            ..extra
                        }
                    } else {
                        extra
                    };
                    (!extra.skip).then(|| from_info(endpoint.provider, info, extra))
                })
                .collect())
        }
        Access::Ollama => {
            let chat = OllamaChat::new(
                OllamaConfig::new(parse_host(&base), "").with_transport(transport),
            )?;
            Ok(list_detailed(&chat)
                .await?
                .into_iter()
                .map(|(info, caps)| {
                    let extra = Extra {
                        vision: caps.vision,
                        tools: caps.tools,
                        ..Extra::default()
                    };
                    from_info(endpoint.provider, info, extra)
                })
                .collect())
        }
        Access::Anthropic | Access::Gemini => {
            let listed = match (spec.access, endpoint.api_key.clone()) {
                (_, None) => {
                    return Err(ProviderError::Config {
                        message: format!(
                            "no API key for {}: set {}",
                            spec.name,
                            spec.key_env.join(" or ")
                        ),
                    });
                }
                (Access::Anthropic, Some(key)) => {
                    let config = AnthropicConfig::new("claude", key)
                        .with_base_url(base)
                        .with_transport(transport);
                    AnthropicChat::new(config)?.list_models().await?
                }
                (_, Some(key)) => {
                    let config = GeminiConfig::new("gemini", key)
                        .with_base_url(base)
                        .with_transport(transport);
                    GeminiChat::new(config)?.list_models().await?
                }
            };
            // Every current Claude and Gemini chat model sees images and
            // calls tools natively.
            let extra = Extra {
                vision: Some(true),
                tools: Some(true),
                ..Extra::default()
            };
            Ok(listed
                .into_iter()
                .map(|info| from_info(endpoint.provider, info, extra))
                .collect())
        }
        Access::Responses(host) => {
            let mut config = ResponsesConfig::new(host, base, "").with_transport(transport);
            if let Some(key) = endpoint.api_key.clone() {
                config = config.with_api_key(key);
            }
            let listed = ResponsesChat::new(config)?.list_models().await?;
            let openai = host == crate::responses::ResponsesHost::OPENAI;
            Ok(listed
                .into_iter()
                .map(|info| {
                    let known = if openai {
                        openai_chat_family(&info.model)
                    } else {
                        None
                    };
                    let extra = Extra {
                        vision: known,
                        tools: known,
                        ..Extra::default()
                    };
                    from_info(endpoint.provider, info, extra)
                })
                .collect())
        }
        Access::Engine(_) | Access::File | Access::Cli(_) => {
            // Not HTTP: reaching here is a table error; connect_http says so.
            connect_http(endpoint, "", Known::default()).map(|_| Vec::new())
        }
    }
}

/// Key of an [`Extra`] that applies to every model of a server (llama-server
/// serves one model, whatever id it is asked for).
const ANY_MODEL: &str = "";

/// OpenAI chat models that see images and call tools: the GPT-4o, 4.1 and 5
/// families and the o-series (not embeddings, audio or image models).
fn openai_chat_family(model: &str) -> Option<bool> {
    let chat = ["gpt-4o", "gpt-4.1", "gpt-5", "o1", "o3", "o4"]
        .iter()
        .any(|p| model.starts_with(p));
    let other = ["audio", "realtime", "transcribe", "tts", "search", "image"]
        .iter()
        .any(|w| model.contains(w));
    (chat && !other).then_some(true)
}

/// The server root (base URL without `/v1`), for its own non-OpenAI routes.
fn root(base: &str) -> &str {
    let base = base.trim_end_matches('/');
    base.strip_suffix("/v1").unwrap_or(base)
}

/// Reads what one of a server's own routes says of its models.
type ParseExtras = fn(&Value) -> HashMap<String, Extra>;

/// What the server's own routes add; sent with the server's key (the same
/// host the chat goes to).
async fn extras(
    http: &HttpTransport,
    base: &str,
    key: Option<&ApiKey>,
    windows: &[WindowProbe],
) -> HashMap<String, Extra> {
    let mut out = HashMap::new();
    for probe in windows {
        let (url, parse): (String, ParseExtras) = match probe {
            WindowProbe::LmStudio => (format!("{}/api/v0/models", root(base)), parse_lmstudio),
            WindowProbe::LmStudioV1 => (format!("{}/api/v1/models", root(base)), parse_lmstudio_v1),
            WindowProbe::LlamaServerProps => (format!("{}/props", root(base)), parse_props),
        };
        let mut request = http.client().get(&url);
        if let Some(key) = key {
            request = request.bearer_auth(key.expose());
        }
        match http.get_json(request, key).await {
            Ok(value) => {
                for (k, v) in parse(&value) {
                    out.entry(k).or_insert(v);
                }
            }
            // Another kind of server: its list alone has to do.
            Err(e) => tracing::debug!(?probe, error = %e, "window probe not answered"),
        }
    }
    out
}

/// LM Studio's `/api/v0/models`: `loaded_context_length` (what a loaded
/// model runs with) else `max_context_length`, `type` (`vlm` sees images,
/// `embeddings` cannot chat) and `capabilities` (`tool_use`).
fn parse_lmstudio(value: &Value) -> HashMap<String, Extra> {
    let entries = value.get("data").and_then(Value::as_array);
    entries
        .into_iter()
        .flatten()
        .filter_map(|m| {
            let id = m.get("id").and_then(Value::as_str)?;
            let int = |k: &str| {
                m.get(k)
                    .and_then(Value::as_u64)
                    .and_then(|n| u32::try_from(n).ok())
            };
            let ty = m.get("type").and_then(Value::as_str);
            let caps = m.get("capabilities").and_then(Value::as_array);
            Some((
                id.to_string(),
                Extra {
                    window: int("loaded_context_length").or_else(|| int("max_context_length")),
                    vision: ty.map(|t| t == "vlm"),
                    tools: caps.map(|c| c.iter().any(|x| x.as_str() == Some("tool_use"))),
                    skip: ty == Some("embeddings"),
                },
            ))
        })
        .collect()
}

/// LM Studio's `/api/v1/models` (0.4 and later): `key` names the model,
/// the first loaded instance's `config.context_length` else
/// `max_context_length`, `capabilities.vision` and
/// `capabilities.trained_for_tool_use`; `type: embedding` cannot chat.
fn parse_lmstudio_v1(value: &Value) -> HashMap<String, Extra> {
    let entries = value.get("models").and_then(Value::as_array);
    entries
        .into_iter()
        .flatten()
        .filter_map(|m| {
            let id = m.get("key").and_then(Value::as_str)?;
            let window = |v: Option<&Value>| {
                v.and_then(Value::as_u64)
                    .and_then(|n| u32::try_from(n).ok())
            };
            let loaded = window(m.pointer("/loaded_instances/0/config/context_length"));
            let caps = m.get("capabilities");
            let flag = |k: &str| caps.and_then(|c| c.get(k)).and_then(Value::as_bool);
            let ty = m.get("type").and_then(Value::as_str);
            Some((
                id.to_string(),
                Extra {
                    window: loaded.or_else(|| window(m.get("max_context_length"))),
                    vision: flag("vision"),
                    tools: flag("trained_for_tool_use"),
                    skip: ty.is_some_and(|t| t.starts_with("embedding")),
                },
            ))
        })
        .collect()
}

/// llama-server's `/props`: `default_generation_settings.n_ctx` (or a
/// top-level `n_ctx`) and `modalities.vision`.
fn parse_props(value: &Value) -> HashMap<String, Extra> {
    let window = value
        .pointer("/default_generation_settings/n_ctx")
        .or_else(|| value.get("n_ctx"))
        .and_then(Value::as_u64)
        .and_then(|n| u32::try_from(n).ok());
    let vision = value.pointer("/modalities/vision").and_then(Value::as_bool);
    if window.is_none() && vision.is_none() {
        return HashMap::new();
    }
    let extra = Extra {
        window,
        vision,
        ..Extra::default()
    };
    HashMap::from([(ANY_MODEL.to_string(), extra)])
}

fn from_info(provider: Provider, info: ModelInfo, extra: Extra) -> CatalogModel {
    let window = extra.window.or(info.context_window);
    CatalogModel {
        id: format!("{provider}:{}", info.model),
        provider,
        model: info.model,
        name: None,
        locality: info.location,
        context_window: window.unwrap_or(ASSUMED_CONTEXT_WINDOW),
        window_assumed: window.is_none(),
        vision: extra.vision,
        native_tools: extra.tools,
        sends_to: info.sends_to,
        output_mode: info.output_mode,
        size_bytes: None,
        architecture: None,
        loaded: false,
    }
}

fn from_file(provider: Provider, found: FoundModel) -> CatalogModel {
    let model = found.path.to_string_lossy().into_owned();
    CatalogModel {
        id: format!("{provider}:{model}"),
        provider,
        model,
        name: Some(found.name),
        locality: ModelLocation::Local,
        context_window: found.context_length.unwrap_or(ASSUMED_CONTEXT_WINDOW),
        window_assumed: found.context_length.is_none(),
        // Local engines answer in constrained JSON and read text only.
        vision: Some(false),
        native_tools: Some(false),
        sends_to: None,
        // The engines hold a typed answer to its schema with their grammar.
        output_mode: OutputMode::Grammar,
        size_bytes: Some(found.size),
        architecture: found.architecture,
        // Marked at each listing: the pool changes faster than the cache.
        loaded: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn lmstudio_windows_types_and_tools() {
        let v = json!({"data": [
            {"id": "qwen3-8b", "type": "llm", "state": "loaded", "max_context_length": 40960,
             "loaded_context_length": 8192, "capabilities": ["tool_use"]},
            {"id": "gemma-3", "type": "vlm", "max_context_length": 131072},
            {"id": "nomic-embed", "type": "embeddings"},
        ]});
        let m = parse_lmstudio(&v);
        assert_eq!(m["qwen3-8b"].window, Some(8192));
        assert_eq!(m["qwen3-8b"].tools, Some(true));
        assert_eq!(m["gemma-3"].window, Some(131_072));
        assert_eq!(
            (m["gemma-3"].vision, m["gemma-3"].tools),
            (Some(true), None)
        );
        assert!(m["nomic-embed"].skip);
        assert!(parse_lmstudio(&json!({"x": 1})).is_empty());
    }

    #[test]
    fn lmstudio_v1_capabilities_and_loaded_windows() {
        let v = json!({"models": [
            {"type": "llm", "key": "google/gemma-3-4b", "max_context_length": 131072,
             "loaded_instances": [], "capabilities": {"vision": true, "trained_for_tool_use": false}},
            {"type": "llm", "key": "qwen/qwen3.5-9b", "max_context_length": 262144,
             "loaded_instances": [{"id": "qwen/qwen3.5-9b", "config": {"context_length": 4096}}],
             "capabilities": {"vision": false, "trained_for_tool_use": true}},
            {"type": "embedding", "key": "nomic-embed"},
        ]});
        let m = parse_lmstudio_v1(&v);
        let gemma = m["google/gemma-3-4b"];
        assert_eq!(
            (gemma.window, gemma.vision, gemma.tools),
            (Some(131_072), Some(true), Some(false))
        );
        let qwen = m["qwen/qwen3.5-9b"];
        assert_eq!(
            (qwen.window, qwen.vision, qwen.tools),
            (Some(4096), Some(false), Some(true))
        );
        assert!(m["nomic-embed"].skip);
        assert!(parse_lmstudio_v1(&json!({"data": []})).is_empty());
    }

    #[test]
    fn llama_server_props() {
        let m = parse_props(
            &json!({"default_generation_settings": {"n_ctx": 16384}, "modalities": {"vision": false}}),
        );
        assert_eq!(m[ANY_MODEL].window, Some(16_384));
        assert_eq!(
            parse_props(&json!({"n_ctx": 4096}))[ANY_MODEL].window,
            Some(4096)
        );
        assert!(parse_props(&json!({})).is_empty());
    }

    #[test]
    fn openai_families() {
        assert_eq!(openai_chat_family("gpt-4.1-mini"), Some(true));
        assert_eq!(openai_chat_family("gpt-4o-audio-preview"), None);
        assert_eq!(openai_chat_family("text-embedding-3-small"), None);
        assert_eq!(root("http://h:1234/v1/"), "http://h:1234");
    }
}
