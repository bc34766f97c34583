//! [`ChatSetup`]: how a kept chat was set up when its first message was
//! sent, so that the chat can later be turned into a regression test (`lrg
//! sessions export KEY --test DIR`) without any network: the model as it
//! described itself, the system prompt, the sampling settings, the tools the
//! chat's tools listed and where those tools came from.
//!
//! It is kept with the chat's [`SessionState`](super::SessionState) and
//! written with it. A JSONL file holds it once, in the first state line
//! that carries it (a later state line without one keeps it), so a chat
//! with large tool schemas does not grow by them at every step. Chats kept
//! before setups were have none; every field defaults, so a setup written
//! by an older lrg loads too, and an exporter says what it lacks.

use std::path::PathBuf;
use std::sync::Arc;

use lrg_providers::{GenerationSettings, ModelInfo, ToolSpec};
use serde::{Deserialize, Serialize};

/// How a chat was set up for its first message (the model, system prompt,
/// sampling settings and tools), so that a kept chat can be turned into a
/// regression test without a network. Made by [`crate::ChatSession::keep_setup`], from the
/// session and what the app tells of its tools ([`SetupOrigin`]).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ChatSetup {
    /// The model, as it described itself: its context window decides what
    /// fits in a request, its provider which native parts are sent back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<ModelInfo>,
    /// The system prompt the first model turn was to be sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system: Option<String>,
    /// The session's generation settings (temperature, budget, ...).
    #[serde(default)]
    pub generation: GenerationSettings,
    /// Model turns allowed per message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_steps: Option<usize>,
    /// Every tool the chat's tools listed, in their order, before the
    /// permissions (and tool search) chose which to offer.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<ToolSpec>,
    /// Tools the permissions blocked, which were never offered.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub blocked: Vec<String>,
    /// Whether the chat ran with sub-agents (whose own tool it offered).
    #[serde(default, skip_serializing_if = "is_false")]
    pub sub_agents: bool,
    /// Where the tools came from, and the recording, as the app told it.
    #[serde(default)]
    pub origin: SetupOrigin,
}

// The floats in a setup are validated generation settings (never NaN), so
// its equality is an equivalence; `SessionState`, which holds one, is `Eq`.
impl Eq for ChatSetup {}

/// What only the app knows of a chat's setup: the MCP servers it started
/// (command lines as the person gave them), the folder they ran in, the
/// recording it wrote, and the tools that came from elsewhere.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct SetupOrigin {
    /// MCP servers started over stdio, each a shell-quoted command line as
    /// given (`--mcp`), paths in it as written.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mcp: Vec<String>,
    /// An `{"mcpServers": ...}` file the servers were read from, absolute.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mcp_config: Option<PathBuf>,
    /// The working directory the servers were started in, absolute.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<PathBuf>,
    /// The recording the run that sent the first message wrote
    /// (`--record`), absolute.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recording: Option<PathBuf>,
    /// Tools that came from neither of those servers (Rust functions, the
    /// memory and skill tools), by name: a test that starts only the
    /// servers cannot offer them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub other_tools: Vec<String>,
}

impl SetupOrigin {
    /// No servers, no recording.
    pub fn new() -> Self {
        Self::default()
    }

    /// The MCP servers' command lines, as given.
    pub fn mcp(mut self, lines: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.mcp = lines.into_iter().map(Into::into).collect();
        self
    }

    /// The MCP servers file (give it absolute).
    pub fn mcp_config(mut self, path: Option<PathBuf>) -> Self {
        self.mcp_config = path;
        self
    }

    /// The servers' working directory.
    pub fn cwd(mut self, dir: Option<PathBuf>) -> Self {
        self.cwd = dir;
        self
    }

    /// The recording being written (give it absolute).
    pub fn recording(mut self, path: Option<PathBuf>) -> Self {
        self.recording = path;
        self
    }

    /// Tools from elsewhere than the servers, by name.
    pub fn other_tools(mut self, names: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.other_tools = names.into_iter().map(Into::into).collect();
        self
    }
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// Serde for the shared setup a state holds: a state is written after
/// every step, and shares its setup rather than copying the tool schemas.
pub(super) mod shared {
    use super::{Arc, ChatSetup, Deserialize, Serialize};

    pub(crate) fn serialize<S: serde::Serializer>(
        setup: &Option<Arc<ChatSetup>>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        setup.as_deref().serialize(serializer)
    }

    pub(crate) fn deserialize<'de, D: serde::Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<Arc<ChatSetup>>, D::Error> {
        Ok(Option::<ChatSetup>::deserialize(deserializer)?.map(Arc::new))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::super::{JsonlStore, ModelBinding, SessionMeta, SessionState, SessionStore};
    use super::*;
    use lrg_providers::Message;

    fn with_setup(n: u32) -> SessionState {
        SessionState {
            updated_ms: u64::from(n),
            setup: Some(Arc::new(ChatSetup {
                system: Some("Be brief.".into()),
                origin: SetupOrigin::new().mcp(["lrg demo-server"]),
                ..ChatSetup::default()
            })),
            ..SessionState::default()
        }
    }

    #[tokio::test]
    async fn a_jsonl_file_holds_a_setup_once_and_loads_it_with_every_later_state() {
        let dir = tempfile::TempDir::new().unwrap();
        let store = JsonlStore::new(dir.path());
        let meta = SessionMeta::new(ModelBinding::new("script:s.json"));
        store.create(&meta).await.unwrap();
        let first = with_setup(1);
        let rows = [Message::user("hi")];
        store.append(&meta.id, &rows, &first).await.unwrap();
        // Equal, though not the same `Arc`: still written once.
        store.append(&meta.id, &rows, &with_setup(2)).await.unwrap();
        let file = || std::fs::read_to_string(store.path_of(&meta.id)).unwrap();
        assert_eq!(file().matches("\"setup\"").count(), 1, "{}", file());
        let loaded = store.load(&meta.id).await.unwrap();
        assert_eq!(loaded.state.updated_ms, 2);
        assert_eq!(loaded.state.setup, first.setup);

        // A changed setup is written again; a rewrite writes it whole.
        let mut other = with_setup(3);
        other.setup = Some(Arc::new(ChatSetup::default()));
        store.append(&meta.id, &[], &other).await.unwrap();
        assert_eq!(file().matches("\"setup\"").count(), 2);
        store.rewrite(&meta.id, &rows, &first).await.unwrap();
        store.append(&meta.id, &rows, &with_setup(4)).await.unwrap();
        assert_eq!(file().matches("\"setup\"").count(), 1, "{}", file());
        assert_eq!(store.load(&meta.id).await.unwrap().state.setup, first.setup);

        // A resumed writer knows the file holds it.
        store.release(&meta.id).await;
        let resumed = store.resume(&meta.id, usize::MAX).await.unwrap();
        assert_eq!(resumed.state.setup, first.setup);
        store.append(&meta.id, &rows, &with_setup(5)).await.unwrap();
        assert_eq!(file().matches("\"setup\"").count(), 1, "{}", file());
    }

    #[test]
    fn a_state_from_before_setups_loads_without_one() {
        let old = r#"{"usage":{"prompt_tokens":1,"completion_tokens":2},"updated_ms":5}"#;
        let state: SessionState = serde_json::from_str(old).unwrap();
        assert_eq!(state.setup, None);
        // And a state without one writes none.
        assert!(!serde_json::to_string(&state).unwrap().contains("setup"));
    }

    #[test]
    fn a_partial_setup_loads_with_defaults() {
        let state: SessionState =
            serde_json::from_str(r#"{"setup":{"origin":{"mcp":["lrg demo-server"]}}}"#).unwrap();
        let setup = state.setup.unwrap();
        assert_eq!(setup.origin.mcp, ["lrg demo-server"]);
        assert!(setup.model.is_none() && setup.tools.is_empty() && setup.system.is_none());
    }
}
