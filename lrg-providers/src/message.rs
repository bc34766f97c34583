//! Conversation types: what a chat is made of, and what gets persisted.

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Who wrote a message. The system prompt is not a message: it is a field of
/// [`crate::TurnRequest`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// The person (or script) talking to the model.
    User,
    /// The model.
    Assistant,
    /// Results of tool calls, answering the assistant message before it.
    Tool,
}

/// One message of a conversation: a role and its parts, in order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// Who wrote it.
    pub role: Role,
    /// What it holds, in order.
    pub parts: Vec<Part>,
}

/// One piece of a message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Part {
    /// Plain text.
    Text {
        /// The text.
        text: String,
    },
    /// The model's visible reasoning (not sent back to models that do not need it).
    Reasoning {
        /// The reasoning text.
        text: String,
    },
    /// An image.
    Image(Image),
    /// A tool call the assistant made.
    ToolCall(ToolCall),
    /// The result of a tool call.
    ToolResult(ToolResult),
    /// A provider's own form of part of a turn, sent back unchanged to the same
    /// provider and model, and ignored by every other.
    Native(NativePart),
}

/// An image, held as its encoded bytes (PNG, JPEG, ...).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Image {
    /// MIME type, e.g. `image/png`.
    pub mime: String,
    /// The encoded image; base64 when serialized.
    #[serde(with = "base64_bytes")]
    pub data: Bytes,
}

impl std::fmt::Debug for Image {
    // Never dump megabytes of pixels into a log line.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Image")
            .field("mime", &self.mime)
            .field("bytes", &self.data.len())
            .finish()
    }
}

/// A tool call made by the assistant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// Id pairing the call with its result; unique within a conversation.
    pub id: String,
    /// Name of the tool.
    pub name: String,
    /// Arguments, as a JSON value (normally an object).
    pub arguments: Value,
}

/// The result of one tool call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolResult {
    /// Id of the [`ToolCall`] this answers.
    pub call_id: String,
    /// Name of the tool that was called.
    pub name: String,
    /// Text and images the tool returned.
    pub parts: Vec<Part>,
    /// Whether the call failed (or never ran).
    #[serde(default)]
    pub is_error: bool,
}

/// A provider's own form of part of a turn (Claude thinking blocks with their
/// signatures, Gemini thought signatures, ...).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NativePart {
    /// Provider that produced it, e.g. `anthropic`.
    pub provider: String,
    /// Model that produced it; only that model receives it back.
    pub model: String,
    /// The raw value, exactly as the provider sent it.
    pub value: Value,
}

impl NativePart {
    /// Whether this part may be sent to `provider`/`model`.
    pub fn belongs_to(&self, provider: &str, model: &str) -> bool {
        self.provider == provider && self.model == model
    }
}

/// A tool as offered to a model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// Name, unique among the offered tools.
    pub name: String,
    /// What the tool does, for the model.
    #[serde(default)]
    pub description: String,
    /// JSON Schema of the arguments object.
    pub input_schema: Value,
    /// MCP-style hints about the tool's effects.
    #[serde(default)]
    pub annotations: ToolAnnotations,
    /// JSON Schema of the tool's structured result (MCP `outputSchema`),
    /// when it declares one: a result's `structuredContent` is checked
    /// against it. Left out of the JSON when `None`, so recordings of tools
    /// without one stay as they were.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
}

/// MCP tool annotations (`readOnlyHint`, `destructiveHint`, ...). All optional.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolAnnotations {
    /// Human-readable title.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The tool does not change its environment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_only_hint: Option<bool>,
    /// The tool may destroy data (meaningful when not read-only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destructive_hint: Option<bool>,
    /// Calling it twice with the same arguments has no further effect.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotent_hint: Option<bool>,
    /// The tool reaches an open world (the internet, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_world_hint: Option<bool>,
}

impl Message {
    /// A user message holding one text part.
    pub fn user(text: impl Into<String>) -> Self {
        Self {
            role: Role::User,
            parts: vec![Part::text(text)],
        }
    }

    /// An assistant message holding one text part.
    pub fn assistant(text: impl Into<String>) -> Self {
        Self {
            role: Role::Assistant,
            parts: vec![Part::text(text)],
        }
    }

    /// A tool message holding the given results.
    pub fn tool_results(results: impl IntoIterator<Item = ToolResult>) -> Self {
        Self {
            role: Role::Tool,
            parts: results.into_iter().map(Part::ToolResult).collect(),
        }
    }

    /// The concatenated text parts (not reasoning, not tool results).
    pub fn text(&self) -> String {
        self.parts
            .iter()
            .filter_map(|p| match p {
                Part::Text { text } => Some(text.as_str()),
                _ => None,
            })
            .collect()
    }

    /// The tool calls in this message, in order.
    pub fn tool_calls(&self) -> impl Iterator<Item = &ToolCall> {
        self.parts.iter().filter_map(|p| match p {
            Part::ToolCall(c) => Some(c),
            _ => None,
        })
    }
}

impl Part {
    /// A text part.
    pub fn text(text: impl Into<String>) -> Self {
        Part::Text { text: text.into() }
    }

    /// A reasoning part.
    pub fn reasoning(text: impl Into<String>) -> Self {
        Part::Reasoning { text: text.into() }
    }
}

impl ToolResult {
    /// A result holding one text part.
    pub fn text(call: &ToolCall, text: impl Into<String>, is_error: bool) -> Self {
        Self {
            call_id: call.id.clone(),
            name: call.name.clone(),
            parts: vec![Part::text(text)],
            is_error,
        }
    }

    /// The concatenated text parts.
    pub fn text_content(&self) -> String {
        let mut out = String::new();
        for p in &self.parts {
            if let Part::Text { text } = p {
                if !out.is_empty() {
                    out.push('\n');
                }
                out.push_str(text);
            }
        }
        out
    }
}

mod base64_bytes {
    use base64::Engine as _;
    use base64::engine::general_purpose::STANDARD;
    use bytes::Bytes;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(data: &Bytes, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&STANDARD.encode(data))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Bytes, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        STANDARD
            .decode(s.as_bytes())
            .map(Bytes::from)
            .map_err(serde::de::Error::custom)
    }
}

impl Image {
    /// The image as base64 (what most APIs want).
    pub fn base64(&self) -> String {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD.encode(&self.data)
    }
}
