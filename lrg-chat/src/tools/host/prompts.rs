//! Prompts through the host: every server's prompts, one expanded with its
//! arguments (checked here first, so a missing or unknown argument is
//! named before the server is asked), and argument completion.

use std::collections::BTreeMap;

use super::super::{ExpandedPrompt, Listing, McpPrompt, McpRequestError};
use super::{ToolHost, read};

impl ToolHost {
    /// Every prompt of every server that offers prompts, servers in the
    /// order they were added; servers that could not list theirs are in
    /// the listing's `failures`.
    pub async fn prompts(&self) -> Listing<McpPrompt> {
        let timeout = self.options.call_timeout;
        self.connect_all().await;
        let servers = read(&self.servers);
        let mut listing = Listing::default();
        for server in servers.iter().filter(|s| s.caps().prompts) {
            match server.prompt_list(timeout).await {
                Ok(prompts) => listing.items.extend(prompts),
                Err(e) => listing.failures.push(e),
            }
        }
        listing
    }

    /// Expand prompt `name` of `server` with `arguments`. Each argument the
    /// prompt requires must be given and each given must be one it takes;
    /// otherwise the error names them (and lists what it takes).
    pub async fn get_prompt(
        &self,
        server: &str,
        name: &str,
        arguments: &BTreeMap<String, String>,
    ) -> Result<ExpandedPrompt, McpRequestError> {
        let timeout = self.options.call_timeout;
        let s = self.server_named(server)?;
        let prompts = s.prompt_list(timeout).await?;
        let Some(prompt) = prompts.iter().find(|p| p.name == name) else {
            let known: Vec<&str> = prompts.iter().map(|p| p.name.as_str()).collect();
            return Err(McpRequestError::Invalid {
                message: format!(
                    "tool server `{server}` has no prompt `{name}` (its prompts: {})",
                    if known.is_empty() {
                        "none".to_owned()
                    } else {
                        known.join(", ")
                    }
                ),
            });
        };
        check_arguments(prompt, arguments)?;
        s.prompt_get(name, arguments, timeout).await
    }

    /// Values `server` suggests for argument `argument` of prompt `prompt`,
    /// given what was typed so far (`value`) and the arguments already
    /// chosen (`completion/complete`). A server that does not offer
    /// completions gives [`McpRequestError::NotOffered`].
    pub async fn complete_prompt_argument(
        &self,
        server: &str,
        prompt: &str,
        argument: &str,
        value: &str,
        chosen: &BTreeMap<String, String>,
    ) -> Result<Vec<String>, McpRequestError> {
        self.server_named(server)?
            .prompt_complete(prompt, argument, value, chosen, self.options.call_timeout)
            .await
    }
}

/// The arguments fit the prompt: the required given, none unknown.
fn check_arguments(
    prompt: &McpPrompt,
    arguments: &BTreeMap<String, String>,
) -> Result<(), McpRequestError> {
    let takes = || {
        if prompt.arguments.is_empty() {
            "it takes none".to_owned()
        } else {
            let names: Vec<String> = prompt
                .arguments
                .iter()
                .map(|a| {
                    if a.required {
                        format!("{} (required)", a.name)
                    } else {
                        a.name.clone()
                    }
                })
                .collect();
            format!("it takes {}", names.join(", "))
        }
    };
    let unknown: Vec<&str> = arguments
        .keys()
        .filter(|k| !prompt.arguments.iter().any(|a| &a.name == *k))
        .map(String::as_str)
        .collect();
    if !unknown.is_empty() {
        return Err(McpRequestError::Invalid {
            message: format!(
                "prompt `{}` has no argument {}; {}",
                prompt.name,
                quoted(&unknown),
                takes()
            ),
        });
    }
    let missing: Vec<&str> = prompt
        .arguments
        .iter()
        .filter(|a| a.required && !arguments.contains_key(&a.name))
        .map(|a| a.name.as_str())
        .collect();
    if !missing.is_empty() {
        return Err(McpRequestError::Invalid {
            message: format!(
                "prompt `{}` needs argument {}; {}",
                prompt.name,
                quoted(&missing),
                takes()
            ),
        });
    }
    Ok(())
}

fn quoted(names: &[&str]) -> String {
    names
        .iter()
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::McpPromptArgument;

    fn prompt() -> McpPrompt {
        McpPrompt {
            server: "s".into(),
            name: "args-prompt".into(),
            title: None,
            description: None,
            arguments: vec![
                McpPromptArgument {
                    name: "city".into(),
                    description: None,
                    required: true,
                },
                McpPromptArgument {
                    name: "state".into(),
                    description: None,
                    required: false,
                },
            ],
        }
    }

    #[test]
    fn arguments_are_checked_by_name() {
        let mut args = BTreeMap::new();
        let e = check_arguments(&prompt(), &args).unwrap_err().to_string();
        assert_eq!(
            e,
            "prompt `args-prompt` needs argument `city`; it takes city (required), state"
        );
        args.insert("town".to_owned(), "x".to_owned());
        let e = check_arguments(&prompt(), &args).unwrap_err().to_string();
        assert!(
            e.starts_with("prompt `args-prompt` has no argument `town`"),
            "{e}"
        );
        args.clear();
        args.insert("city".to_owned(), "Paris".to_owned());
        assert!(check_arguments(&prompt(), &args).is_ok());
    }
}
