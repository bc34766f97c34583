//! The model menu a chat offers: every model reachable with its
//! connections, grouped by provider, each available or not with a reason.
//!
//! The app supplies it through [`ModelMenu`] (for example over the model
//! catalog); [`StaticMenu`] is a fixed list.

use futures::future::BoxFuture;
use lrg_providers::{ModelInfo, ModelLocation};
use serde::Serialize;

/// One model of the menu.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct MenuEntry {
    /// `provider:model`, what `POST …/model` takes.
    pub id: String,
    /// The provider prefix.
    pub provider: String,
    /// The provider's model name.
    pub model: String,
    /// Whether it can be used now.
    pub available: bool,
    /// Why not, when it cannot (never a key or a full path).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Where it runs.
    pub locality: ModelLocation,
    /// Where a conversation goes when it leaves the machine, if it does.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sends_to: Option<String>,
    /// Its context window in tokens, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context_window: Option<u32>,
    /// Whether this chat runs on it.
    pub current: bool,
    /// Whether the model keeps the conversation itself (an external ACP
    /// agent): the page offers no Compact for it.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub keeps_conversation: bool,
    /// Whether a local engine holds it loaded now (its next chat waits for
    /// no load).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub loaded: bool,
}

impl MenuEntry {
    /// An available model.
    pub fn available(
        provider: impl Into<String>,
        model: impl Into<String>,
        locality: ModelLocation,
    ) -> Self {
        let (provider, model) = (provider.into(), model.into());
        Self {
            id: format!("{provider}:{model}"),
            provider,
            model,
            available: true,
            reason: None,
            locality,
            sends_to: None,
            context_window: None,
            current: false,
            keeps_conversation: false,
            loaded: false,
        }
    }

    /// A model that cannot be used now, and why.
    pub fn unavailable(
        provider: impl Into<String>,
        model: impl Into<String>,
        locality: ModelLocation,
        reason: impl Into<String>,
    ) -> Self {
        Self {
            available: false,
            reason: Some(reason.into()),
            ..Self::available(provider, model, locality)
        }
    }

    /// The model a chat runs on, as it describes itself.
    pub fn from_info(info: &ModelInfo) -> Self {
        Self {
            sends_to: info.sends_to.clone(),
            context_window: info.context_window,
            keeps_conversation: info.keeps_conversation,
            ..Self::available(info.provider.clone(), info.model.clone(), info.location)
        }
    }

    /// Marked as loaded now by a local engine.
    pub fn with_loaded(mut self, loaded: bool) -> Self {
        self.loaded = loaded;
        self
    }

    /// Set where the conversation goes.
    pub fn with_sends_to(mut self, host: impl Into<String>) -> Self {
        self.sends_to = Some(host.into());
        self
    }

    /// Set the context window.
    pub fn with_context_window(mut self, tokens: u32) -> Self {
        self.context_window = Some(tokens);
        self
    }
}

/// The models of one provider.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct MenuGroup {
    /// The provider prefix.
    pub provider: String,
    /// Its models, in menu order.
    pub models: Vec<MenuEntry>,
}

impl MenuGroup {
    /// Group `entries` by provider, keeping the order each provider and
    /// model first appears in.
    pub fn group(entries: impl IntoIterator<Item = MenuEntry>) -> Vec<MenuGroup> {
        let mut groups: Vec<MenuGroup> = Vec::new();
        for entry in entries {
            match groups.iter_mut().find(|g| g.provider == entry.provider) {
                Some(group) => group.models.push(entry),
                None => groups.push(MenuGroup {
                    provider: entry.provider.clone(),
                    models: vec![entry],
                }),
            }
        }
        groups
    }
}

/// Where the menu comes from.
pub trait ModelMenu: Send + Sync {
    /// Every model reachable now, grouped by provider.
    fn menu(&self) -> BoxFuture<'_, Vec<MenuGroup>>;
}

/// A fixed menu.
#[derive(Debug, Clone, Default)]
pub struct StaticMenu(pub Vec<MenuEntry>);

impl ModelMenu for StaticMenu {
    fn menu(&self) -> BoxFuture<'_, Vec<MenuGroup>> {
        let groups = MenuGroup::group(self.0.clone());
        Box::pin(async move { groups })
    }
}

/// The menu of one chat: `groups` with `current` marked, and listed (as
/// unavailable) when the menu lacks it.
pub(crate) fn with_current(mut groups: Vec<MenuGroup>, current: &ModelInfo) -> Vec<MenuGroup> {
    let id = format!("{}:{}", current.provider, current.model);
    let mut found = false;
    for entry in groups.iter_mut().flat_map(|g| g.models.iter_mut()) {
        if entry.id == id {
            entry.current = true;
            found = true;
        }
    }
    if !found {
        let mut entry = MenuEntry::from_info(current);
        entry.current = true;
        entry.available = false;
        entry.reason = Some("not among the models reachable now".into());
        match groups.iter_mut().find(|g| g.provider == entry.provider) {
            Some(group) => group.models.insert(0, entry),
            None => groups.insert(
                0,
                MenuGroup {
                    provider: entry.provider.clone(),
                    models: vec![entry],
                },
            ),
        }
    }
    groups
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_agent_that_keeps_its_conversation_says_so_to_the_page() {
        let agent =
            ModelInfo::new("acp", "codex-acp", ModelLocation::Server).keeps_conversation(true);
        let entry = serde_json::to_value(MenuEntry::from_info(&agent)).unwrap();
        assert_eq!(entry["keeps_conversation"], true);
        let plain = ModelInfo::new("ollama", "qwen3:8b", ModelLocation::Server);
        let entry = serde_json::to_value(MenuEntry::from_info(&plain)).unwrap();
        assert!(entry.get("keeps_conversation").is_none(), "{entry}");
    }
}
