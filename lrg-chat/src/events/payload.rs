//! The payloads some events carry: who asks ([`SubAgentAsk`]) and what a
//! result holds ([`ImageDescriptor`]).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::tools::ToolClass;

/// The sub-agent behind an [`Event::ApprovalNeeded`](super::Event::ApprovalNeeded), and what it wants to
/// run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct SubAgentAsk {
    /// The sub-agent's session id.
    pub sub_session_id: String,
    /// The tool it wants to call.
    pub tool: String,
    /// What the tool may do to the world.
    pub class: ToolClass,
    /// The arguments, as the sub-agent's model wrote them.
    pub arguments: Value,
}

impl SubAgentAsk {
    /// Sub-agent `sub_session_id` asks to call `tool` (of `class`) with
    /// `arguments`.
    pub fn new(
        sub_session_id: impl Into<String>,
        tool: impl Into<String>,
        class: ToolClass,
        arguments: Value,
    ) -> Self {
        Self {
            sub_session_id: sub_session_id.into(),
            tool: tool.into(),
            class,
            arguments,
        }
    }
}

/// One image of a tool result, as `tool_done` describes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ImageDescriptor {
    /// Its position among the result's images, from 0.
    pub index: usize,
    /// MIME type, e.g. `image/png`.
    pub mime: String,
    /// Size of the encoded image in bytes.
    pub bytes: usize,
}

impl ImageDescriptor {
    /// The image at `index`, of type `mime`, `bytes` long.
    pub fn new(index: usize, mime: impl Into<String>, bytes: usize) -> Self {
        Self {
            index,
            mime: mime.into(),
            bytes,
        }
    }

    /// Describe the images among `parts`, in order.
    pub fn of_parts(parts: &[lrg_providers::Part]) -> Vec<Self> {
        parts
            .iter()
            .filter_map(|p| match p {
                lrg_providers::Part::Image(image) => Some(image),
                _ => None,
            })
            .enumerate()
            .map(|(index, image)| Self {
                index,
                mime: image.mime.clone(),
                bytes: image.data.len(),
            })
            .collect()
    }
}
