//! The sidecar's wire format: JSON lines, one request or reply per line
//! (the sidecar's `protocol.py` is the other half). Decoding is I/O-free.

use std::borrow::Cow;

use lrg_providers::ProviderError;
use lrg_providers::local_chat::{EngineMessage, EngineRole, EngineStop};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The protocol version this crate speaks; a sidecar saying another is refused.
pub const PROTOCOL_VERSION: u32 = 2;

/// How much of an unreadable line an error quotes.
const QUOTE_CHARS: usize = 120;

/// A request to the sidecar.
#[derive(Debug, Serialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub(crate) enum Request<'a> {
    Generate {
        id: u64,
        /// The chat whose prompt cache the turn continues.
        sequence: u64,
        messages: Vec<WireMessage<'a>>,
        schema: &'a Value,
        max_tokens: u32,
        temperature: f32,
        #[serde(skip_serializing_if = "Option::is_none")]
        top_p: Option<f32>,
        seed: Option<u32>,
    },
    Tokenize {
        id: u64,
        messages: Vec<WireMessage<'a>>,
    },
    Cancel {
        id: u64,
    },
    Ping {
        id: u64,
    },
    ClearCache {
        id: u64,
    },
    /// The chat is gone: free its prompt cache (no reply).
    Release {
        sequence: u64,
    },
    Shutdown,
}

/// A message as the sidecar renders it through the model's chat template.
#[derive(Debug, Serialize)]
pub(crate) struct WireMessage<'a> {
    role: EngineRole,
    content: Cow<'a, str>,
}

/// What a model without vision reads in place of each image.
pub(crate) const IMAGE_PLACEHOLDER: &str = "[image omitted: this model cannot see images]";

/// The messages for the sidecar; images become a text placeholder (the
/// sidecar runs text models only), so a conversation with one still works.
pub(crate) fn wire_messages(messages: &[EngineMessage]) -> Vec<WireMessage<'_>> {
    messages
        .iter()
        .map(|m| WireMessage {
            role: m.role,
            content: if m.images.is_empty() {
                Cow::Borrowed(m.content.as_str())
            } else {
                let mut text = m.content.clone();
                for _ in &m.images {
                    if !text.is_empty() {
                        text.push('\n');
                    }
                    text.push_str(IMAGE_PLACEHOLDER);
                }
                Cow::Owned(text)
            },
        })
        .collect()
}

impl Request<'_> {
    /// The request as one line, newline included.
    pub(crate) fn to_line(&self) -> Result<String, ProviderError> {
        let mut line = serde_json::to_string(self).map_err(|e| ProviderError::Other {
            message: format!("cannot encode a request to the MLX sidecar: {e}"),
        })?;
        line.push('\n');
        Ok(line)
    }
}

/// A line from the sidecar.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(crate) enum Reply {
    /// While the model loads, before `ready`.
    Loading {
        progress: f32,
    },
    Ready(Box<SidecarInfo>),
    Fatal {
        kind: FatalKind,
        message: String,
        #[serde(default)]
        package: Option<String>,
    },
    Progress {
        id: u64,
    },
    /// The prompt is in the cache: how it got there.
    Prefilled {
        id: u64,
        kept: u32,
        #[serde(default)]
        restored: u32,
        evaluated: u32,
        #[serde(default)]
        dropped: bool,
    },
    Delta {
        id: u64,
        text: String,
    },
    Done {
        id: u64,
        stop: EngineStop,
        usage: SidecarUsage,
        #[serde(default)]
        grammar_reused: bool,
        #[serde(default)]
        timings: Timings,
    },
    Tokens {
        id: u64,
        tokens: Vec<u32>,
    },
    Pong {
        id: u64,
    },
    Error {
        id: Option<u64>,
        kind: ErrorKind,
        message: String,
    },
}

/// Why the sidecar could not start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum FatalKind {
    MissingPackage,
    BadModel,
    #[serde(other)]
    Other,
}

/// Why a request failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum ErrorKind {
    ContextOverflow,
    BadRequest,
    #[serde(other)]
    Internal,
}

impl ErrorKind {
    pub(crate) fn into_error(self, message: String) -> ProviderError {
        match self {
            Self::ContextOverflow => ProviderError::ContextOverflow { message },
            Self::BadRequest => ProviderError::BadRequest { message },
            Self::Internal => ProviderError::Other {
                message: format!("the MLX sidecar failed: {message}"),
            },
        }
    }
}

/// What the sidecar said when it became ready: versions and the model.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[non_exhaustive]
pub struct SidecarInfo {
    /// Protocol version ([`PROTOCOL_VERSION`] once accepted).
    pub protocol: u32,
    /// Version of the sidecar package.
    pub sidecar: String,
    /// Versions of Python and the packages the sidecar runs on.
    pub versions: Versions,
    /// The MLX device it runs on (`Device(cpu, 0)`, `Device(gpu, 0)`).
    #[serde(default)]
    pub device: String,
    /// The loaded model.
    pub model: SidecarModel,
}

/// Versions of what the sidecar runs on.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[non_exhaustive]
pub struct Versions {
    /// Python.
    pub python: String,
    /// `mlx`.
    pub mlx: String,
    /// `mlx-lm`.
    pub mlx_lm: String,
    /// `llguidance`.
    pub llguidance: String,
}

/// The model the sidecar loaded.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[non_exhaustive]
pub struct SidecarModel {
    /// The model directory's name.
    pub name: String,
    /// Its `model_type` (`llama`, `qwen3`, ...).
    #[serde(default)]
    pub model_type: String,
    /// Tokens of one conversation.
    pub context_window: u32,
    /// Which config key gave the window, or `default` when none did and
    /// 32,768 was assumed.
    #[serde(default)]
    pub context_window_source: String,
    /// Tokens in the vocabulary.
    #[serde(default)]
    pub vocab_size: u32,
    /// Whether its prompt cache can be trimmed to a shared prefix (when not,
    /// every turn evaluates its whole prompt).
    #[serde(default)]
    pub trimmable_cache: bool,
}

/// The counters of a finished turn.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
pub(crate) struct SidecarUsage {
    pub prompt_tokens: u32,
    pub reused_tokens: u32,
    pub evaluated_tokens: u32,
    pub completion_tokens: u32,
    #[serde(default)]
    pub after_cancel_tokens: u32,
}

/// Milliseconds the sidecar measured for a turn.
#[derive(Debug, Clone, Copy, Default, PartialEq, Deserialize)]
pub(crate) struct Timings {
    #[serde(default)]
    pub prefill_ms: f64,
    #[serde(default)]
    pub first_token_ms: Option<f64>,
    #[serde(default)]
    pub total_ms: f64,
}

/// Decodes one line from the sidecar.
///
/// # Errors
/// `Protocol` quoting the start of the line when it is not a reply.
pub(crate) fn decode(line: &str) -> Result<Reply, ProviderError> {
    serde_json::from_str(line).map_err(|e| ProviderError::Protocol {
        message: format!(
            "the MLX sidecar wrote a line that is not a reply ({e}): {:?}",
            quote(line)
        ),
    })
}

/// Decodes the sidecar's first line, checking the protocol version before
/// anything else so a newer or older sidecar is named as such.
///
/// # Errors
/// `Config` on another protocol version, `Protocol` on anything unreadable.
pub(crate) fn decode_first(line: &str) -> Result<Reply, ProviderError> {
    if let Ok(Value::Object(obj)) = serde_json::from_str::<Value>(line)
        && obj.get("type").and_then(Value::as_str) == Some("ready")
    {
        let version = obj.get("protocol").and_then(Value::as_u64);
        if version != Some(u64::from(PROTOCOL_VERSION)) {
            let said = version.map_or_else(|| "no version".to_string(), |v| v.to_string());
            return Err(ProviderError::Config {
                message: format!(
                    "the MLX sidecar speaks protocol {said} and this lrg-mlx speaks \
                     {PROTOCOL_VERSION}: the sidecar package is from another version of lrg \
                     (reinstall it from this lrg's lrg-mlx/sidecar)"
                ),
            });
        }
    }
    decode(line)
}

fn quote(line: &str) -> String {
    match line.char_indices().nth(QUOTE_CHARS) {
        Some((i, _)) => format!("{}…", &line[..i]),
        None => line.to_string(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use serde_json::json;

    #[test]
    fn requests_are_one_line_each() {
        let schema = json!({"type": "object"});
        let msgs = vec![EngineMessage {
            role: EngineRole::User,
            content: "two\nlines".into(),
            images: Vec::new(),
        }];
        let line = Request::Generate {
            id: 7,
            sequence: 2,
            messages: wire_messages(&msgs),
            schema: &schema,
            max_tokens: 10,
            temperature: 0.5,
            top_p: Some(0.25),
            seed: Some(3),
        }
        .to_line()
        .unwrap();
        assert_eq!(line.matches('\n').count(), 1);
        let v: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(
            v,
            json!({"op": "generate", "id": 7, "sequence": 2, "messages": [{"role": "user", "content": "two\nlines"}],
                   "schema": {"type": "object"}, "max_tokens": 10, "temperature": 0.5, "top_p": 0.25, "seed": 3})
        );
        assert_eq!(
            Request::Cancel { id: 7 }.to_line().unwrap(),
            "{\"op\":\"cancel\",\"id\":7}\n"
        );
        assert_eq!(
            Request::Shutdown.to_line().unwrap(),
            "{\"op\":\"shutdown\"}\n"
        );
    }

    #[test]
    fn images_become_a_placeholder() {
        let image = lrg_providers::Image {
            mime: "image/png".into(),
            data: vec![1u8, 2, 3].into(),
        };
        let msgs = vec![EngineMessage {
            role: EngineRole::User,
            content: "Result of screenshot:".into(),
            images: vec![image.clone(), image],
        }];
        let wire = serde_json::to_value(wire_messages(&msgs)).unwrap();
        assert_eq!(
            wire[0]["content"],
            format!("Result of screenshot:\n{IMAGE_PLACEHOLDER}\n{IMAGE_PLACEHOLDER}")
        );
    }

    #[test]
    fn replies_decode() {
        let done = decode(
            r#"{"type":"done","id":3,"stop":"max_tokens","usage":{"prompt_tokens":9,"reused_tokens":4,"evaluated_tokens":5,"completion_tokens":2,"cached_tokens":11},"grammar_reused":true,"timings":{"prefill_ms":1.5,"first_token_ms":null,"total_ms":3}}"#,
        )
        .unwrap();
        let Reply::Done {
            id,
            stop,
            usage,
            grammar_reused,
            ..
        } = done
        else {
            panic!("{done:?}")
        };
        assert_eq!((id, stop, grammar_reused), (3, EngineStop::MaxTokens, true));
        assert_eq!(usage.evaluated_tokens, 5);
        assert_eq!(
            decode(r#"{"type":"error","id":1,"kind":"something_new","message":"m"}"#).unwrap(),
            Reply::Error {
                id: Some(1),
                kind: ErrorKind::Internal,
                message: "m".into()
            }
        );
    }

    #[test]
    fn garbage_is_a_protocol_error_quoting_it() {
        let long = format!("Traceback (most recent call last): {}", "x".repeat(500));
        let err = decode(&long).unwrap_err();
        let ProviderError::Protocol { message } = &err else {
            panic!("{err:?}")
        };
        assert!(message.contains("Traceback"), "{message}");
        assert!(message.len() < 400, "{message}");
        assert!(matches!(
            decode(r#"{"type":"delta"}"#),
            Err(ProviderError::Protocol { .. })
        ));
    }

    #[test]
    fn another_protocol_version_is_named() {
        for line in [
            r#"{"type":"ready","protocol":3,"future":"fields"}"#,
            r#"{"type":"ready"}"#,
        ] {
            let err = decode_first(line).unwrap_err();
            let ProviderError::Config { message } = &err else {
                panic!("{err:?}")
            };
            assert!(message.contains("speaks protocol"), "{message}");
        }
        let ready = decode_first(
            r#"{"type":"ready","protocol":2,"sidecar":"0.1.0","versions":{"python":"3.11","mlx":"0.3","mlx_lm":"0.3","llguidance":"1.9"},"model":{"name":"tiny","context_window":32768}}"#,
        )
        .unwrap();
        assert!(matches!(ready, Reply::Ready(info) if info.model.context_window == 32768));
    }
}
