//! The agent's own tool calls in lrg's history: an external agent runs its
//! tools itself, so a call it made is kept as a typed record
//! ([`AgentToolCall`]) in a [`Native`](lrg_providers::Part::Native) part of
//! provider `acp`, never as a [`Part::ToolCall`](lrg_providers::Part::ToolCall):
//! the loop never runs it again, no other model is sent it, and a resumed
//! chat's events and its transcript show it as the `tool_call` and
//! `tool_done` it was.

use lrg_providers::{NativePart, Part};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::events::Event;
use crate::tools::ToolClass;

/// The provider of the native parts that hold agent tool calls.
pub const PROVIDER: &str = "acp";

/// The key of the record in the native part's value.
const KEY: &str = "agent_tool_call";

/// A tool call an external agent ran (it asked lrg's permission where it
/// asked at all), as it ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct AgentToolCall {
    /// The agent's id of the call.
    pub id: String,
    /// What the agent called it (its title: a tool name or a sentence).
    pub title: String,
    /// Its permission class, from the agent's tool kind.
    pub class: ToolClass,
    /// Its input, as the agent told it.
    pub arguments: Value,
    /// Whether it succeeded; `None` when the turn ended before the agent
    /// said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ok: Option<bool>,
    /// The text of its result.
    #[serde(default)]
    pub result: String,
}

impl AgentToolCall {
    /// The part that keeps it in the history of a chat on agent `model`.
    pub fn to_part(&self, model: &str) -> Part {
        Part::Native(self.to_native(model))
    }

    /// The native part [`to_part`](Self::to_part) wraps.
    pub fn to_native(&self, model: &str) -> NativePart {
        // A struct of strings and JSON values always serializes.
        let value = serde_json::to_value(self).unwrap_or(Value::Null);
        NativePart {
            provider: PROVIDER.to_string(),
            model: model.to_string(),
            value: serde_json::json!({ KEY: value }),
        }
    }

    /// The call a history part holds, when it holds one.
    pub fn from_part(part: &Part) -> Option<Self> {
        let Part::Native(native) = part else {
            return None;
        };
        if native.provider != PROVIDER {
            return None;
        }
        serde_json::from_value(native.value.get(KEY)?.clone()).ok()
    }

    /// The events that told it: `tool_call`, then `tool_done` when it ended.
    pub(crate) fn events(&self) -> Vec<Event> {
        let mut events = vec![Event::ToolCall {
            call_id: self.id.clone(),
            tool: self.title.clone(),
            title: None,
            class: self.class,
            arguments: self.arguments.clone(),
            targets: None,
            runs_on: Default::default(),
        }];
        if let Some(ok) = self.ok {
            events.push(Event::ToolDone {
                call_id: self.id.clone(),
                ok,
                text: self.result.clone(),
                images: Vec::new(),
                structured: None,
                resources: Vec::new(),
            });
        }
        events
    }
}

/// The events of the agent tool calls among an assistant row's parts.
pub(crate) fn row_events(parts: &[Part]) -> Vec<Event> {
    parts
        .iter()
        .filter_map(AgentToolCall::from_part)
        .flat_map(|call| call.events())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_survives_its_part_and_other_natives_are_not_calls() {
        let call = AgentToolCall {
            id: "t1".into(),
            title: "write a.txt".into(),
            class: ToolClass::Change,
            arguments: serde_json::json!({"path": "a.txt"}),
            ok: Some(true),
            result: "wrote a.txt".into(),
        };
        let part = call.to_part("agent");
        assert_eq!(AgentToolCall::from_part(&part), Some(call));
        let other = Part::Native(NativePart {
            provider: "anthropic".into(),
            model: "claude".into(),
            value: serde_json::json!({ KEY: {} }),
        });
        assert_eq!(AgentToolCall::from_part(&other), None);
        assert_eq!(AgentToolCall::from_part(&Part::text("hi")), None);
    }
}
