//! One server's prompts: listing them, expanding one with its arguments
//! (`prompts/get`), and completing an argument's value
//! (`completion/complete`); in public, server-named forms.

use std::collections::BTreeMap;
use std::time::Duration;

use lrg_providers::{Image, Message, Part, Role};
use rmcp::model::{
    ArgumentInfo, CompleteRequestParams, CompletionContext, GetPromptRequestParams, Reference,
};
use serde::Serialize;
use serde_json::Value;

use super::McpServer;
use super::request::{McpRequestError, bounded};

/// A prompt a server offers (`prompts/list`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct McpPrompt {
    /// The server's name.
    pub server: String,
    /// The prompt's name on that server.
    pub name: String,
    /// A human-readable title, when it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// What it is for.
    pub description: Option<String>,
    /// The arguments it takes, in the server's order.
    pub arguments: Vec<McpPromptArgument>,
}

/// One argument of a prompt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct McpPromptArgument {
    /// Its name.
    pub name: String,
    /// What to give.
    pub description: Option<String>,
    /// Whether the prompt cannot be expanded without it.
    pub required: bool,
}

/// A prompt expanded with its arguments: the messages the server made of it.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ExpandedPrompt {
    /// The server.
    pub server: String,
    /// The prompt.
    pub name: String,
    /// The server's description of the result, when it gave one.
    pub description: Option<String>,
    /// The messages, user and assistant, in order.
    pub messages: Vec<Message>,
}

impl ExpandedPrompt {
    /// The prompt as one message to send: its messages' text, in order and
    /// separated by blank lines, and their images. A chat message has one
    /// author, so a prompt's assistant turns become part of the text.
    pub fn into_input(self) -> crate::session::UserInput {
        let mut texts = Vec::new();
        let mut images: Vec<Image> = Vec::new();
        for m in self.messages {
            for p in m.parts {
                match p {
                    Part::Text { text } if !text.trim().is_empty() => texts.push(text),
                    Part::Image(img) => images.push(img),
                    _ => {}
                }
            }
        }
        crate::session::UserInput {
            text: texts.join("\n\n"),
            images,
        }
    }
}

impl McpServer {
    /// Every prompt the server lists.
    pub(crate) async fn prompt_list(
        &self,
        timeout: Duration,
    ) -> Result<Vec<McpPrompt>, McpRequestError> {
        let peer = self.peer_for("prompts", |c| c.prompts).await?;
        let prompts = bounded(&self.name, "prompts/list", timeout, peer.list_all_prompts()).await?;
        Ok(prompts
            .into_iter()
            .map(|p| McpPrompt {
                server: self.name.clone(),
                name: p.name,
                title: p.title,
                description: p.description,
                arguments: p
                    .arguments
                    .unwrap_or_default()
                    .into_iter()
                    .map(|a| McpPromptArgument {
                        name: a.name,
                        description: a.description,
                        required: a.required == Some(true),
                    })
                    .collect(),
            })
            .collect())
    }

    /// Expand `name` with `arguments` (checked by the caller).
    pub(crate) async fn prompt_get(
        &self,
        name: &str,
        arguments: &BTreeMap<String, String>,
        timeout: Duration,
    ) -> Result<ExpandedPrompt, McpRequestError> {
        let peer = self.peer_for("prompts", |c| c.prompts).await?;
        let mut params = GetPromptRequestParams::new(name);
        if !arguments.is_empty() {
            params.arguments = Some(
                arguments
                    .iter()
                    .map(|(k, v)| (k.clone(), Value::String(v.clone())))
                    .collect(),
            );
        }
        let result = bounded(&self.name, "prompts/get", timeout, peer.get_prompt(params)).await?;
        let messages = result
            .messages
            .into_iter()
            .map(|m| Message {
                role: match m.role {
                    rmcp::model::Role::Assistant => Role::Assistant,
                    _ => Role::User,
                },
                parts: vec![super::super::content::part_from_block(m.content)],
            })
            .collect();
        Ok(ExpandedPrompt {
            server: self.name.clone(),
            name: name.to_owned(),
            description: result.description,
            messages,
        })
    }

    /// Values the server suggests for `argument` of prompt `prompt`, given
    /// what was typed (`value`) and the arguments already chosen.
    pub(crate) async fn prompt_complete(
        &self,
        prompt: &str,
        argument: &str,
        value: &str,
        chosen: &BTreeMap<String, String>,
        timeout: Duration,
    ) -> Result<Vec<String>, McpRequestError> {
        let peer = self.peer_for("completions", |c| c.completions).await?;
        let mut params = CompleteRequestParams::new(
            Reference::for_prompt(prompt),
            ArgumentInfo::new(argument, value),
        );
        if !chosen.is_empty() {
            params = params.with_context(CompletionContext::with_arguments(
                chosen.clone().into_iter().collect(),
            ));
        }
        let result = bounded(
            &self.name,
            "completion/complete",
            timeout,
            peer.complete(params),
        )
        .await?;
        Ok(result.completion.values)
    }
}
