//! `lrg prompts`: the prompts the MCP servers `--mcp-config`/`--mcp` name
//! offer, with their arguments; and `/prompt SERVER/NAME key=value …` in
//! `lrg chat`, which expands one into the message to send.
//!
//! `--json` prints `{"prompts": [{server, name, description, arguments:
//! [{name, description, required}]}], "failed_servers": [{server, error}]}`.

use std::collections::BTreeMap;

use lrg_chat::tools::{McpPrompt, ToolHost};
use serde_json::{Value, json};

use crate::cli::PromptsArgs;
use crate::exit::{CliError, Exit};
use crate::{out, usage};

/// `lrg prompts`.
pub async fn prompts(args: PromptsArgs) -> Result<Exit, CliError> {
    if args.tools.mcp.is_empty() && args.tools.mcp_config.is_none() {
        return Err(usage!(
            "no tool servers: give --mcp-config FILE or --mcp 'COMMAND ARGS...'"
        ));
    }
    let host = crate::tools::host(&args.tools, false).await?;
    let listing = host.prompts().await;
    let not_running = host.failures();
    if args.json {
        let mut failed: Vec<Value> = not_running
            .iter()
            .map(|f| json!({"server": f.server, "error": f.message}))
            .collect();
        failed.extend(
            listing
                .failures
                .iter()
                .map(|f| json!({"error": f.to_string()})),
        );
        let body = json!({"prompts": listing.items, "failed_servers": failed});
        out::line(serde_json::to_string_pretty(&body).unwrap_or_default());
    } else {
        if listing.items.is_empty() {
            out::line("(no prompts)");
        }
        for p in &listing.items {
            out::line(usage_line(p));
            if let Some(d) = p.description.as_deref().and_then(|d| d.lines().next()) {
                out::line(format_args!("    {}", crate::style::clip(d, 100)));
            }
            for a in &p.arguments {
                let need = if a.required { "required" } else { "optional" };
                let what = a.description.as_deref().unwrap_or_default();
                out::line(format_args!("    {} ({need}) {what}", a.name));
            }
        }
        for f in &not_running {
            eprintln!(
                "lrg: tool server `{}` is not running: {}",
                f.server, f.message
            );
        }
        for f in &listing.failures {
            eprintln!("lrg: {f}");
        }
    }
    host.shutdown().await;
    Ok(if listing.failures.is_empty() && not_running.is_empty() {
        Exit::Replied
    } else {
        Exit::Failed
    })
}

/// `/prompt SERVER/NAME key=<key> …`: how a prompt is used in `lrg chat`.
fn usage_line(p: &McpPrompt) -> String {
    let mut line = format!("/prompt {}/{}", p.server, p.name);
    for a in &p.arguments {
        if a.required {
            line.push_str(&format!(" {}=…", a.name));
        } else {
            line.push_str(&format!(" [{}=…]", a.name));
        }
    }
    line
}

/// What `/prompt` was given: the server, the prompt, and its arguments.
#[derive(Debug, PartialEq, Eq)]
pub struct PromptCall {
    /// The server.
    pub server: String,
    /// The prompt's name on it.
    pub name: String,
    /// `key=value` pairs.
    pub arguments: BTreeMap<String, String>,
}

/// Read `SERVER/NAME key=value …` (values may be quoted as in a shell).
pub fn parse(rest: &str) -> Result<PromptCall, String> {
    let words = shell_words::split(rest).map_err(|e| format!("/prompt: {e}"))?;
    let Some((first, args)) = words.split_first() else {
        return Err(
            "/prompt needs SERVER/NAME, e.g. /prompt everything/args-prompt city=Paris \
                    (see `lrg prompts`)"
                .to_owned(),
        );
    };
    let Some((server, name)) = first.split_once('/') else {
        return Err(format!(
            "/prompt: `{first}` is not SERVER/NAME (e.g. everything/simple-prompt)"
        ));
    };
    if server.is_empty() || name.is_empty() {
        return Err(format!("/prompt: `{first}` is not SERVER/NAME"));
    }
    let mut arguments = BTreeMap::new();
    for a in args {
        let Some((k, v)) = a.split_once('=') else {
            return Err(format!("/prompt: `{a}` is not key=value"));
        };
        if k.is_empty() {
            return Err(format!("/prompt: `{a}` has no key"));
        }
        arguments.insert(k.to_owned(), v.to_owned());
    }
    Ok(PromptCall {
        server: server.to_owned(),
        name: name.to_owned(),
        arguments,
    })
}

/// Expand a `/prompt` line into the message to send. A required argument
/// left out is completed when the server suggests exactly one value for
/// it (`completion/complete`), and otherwise named with the server's
/// suggestions, so the person can type it.
pub async fn expand(host: &ToolHost, rest: &str) -> Result<lrg_chat::UserInput, String> {
    let mut call = parse(rest)?;
    let listing = host.prompts().await;
    let Some(prompt) = listing
        .items
        .iter()
        .find(|p| p.server == call.server && p.name == call.name)
    else {
        let known: Vec<String> = listing
            .items
            .iter()
            .map(|p| format!("{}/{}", p.server, p.name))
            .collect();
        return Err(format!(
            "no prompt {}/{} (prompts: {})",
            call.server,
            call.name,
            if known.is_empty() {
                "none".to_owned()
            } else {
                known.join(", ")
            }
        ));
    };
    for a in prompt.arguments.iter().filter(|a| a.required) {
        if call.arguments.contains_key(&a.name) {
            continue;
        }
        match host
            .complete_prompt_argument(&call.server, &call.name, &a.name, "", &call.arguments)
            .await
        {
            Ok(values) if values.len() == 1 => {
                call.arguments.insert(a.name.clone(), values[0].clone());
            }
            Ok(values) if !values.is_empty() => {
                return Err(format!(
                    "{}/{} needs {}=…; the server suggests: {}",
                    call.server,
                    call.name,
                    a.name,
                    values.join(", ")
                ));
            }
            _ => {}
        }
    }
    host.get_prompt(&call.server, &call.name, &call.arguments)
        .await
        .map(|p| p.into_input())
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prompt_line_is_read_like_a_shell_line() {
        let call = parse("everything/args-prompt city='New York' state=NY").unwrap();
        assert_eq!(call.server, "everything");
        assert_eq!(call.name, "args-prompt");
        assert_eq!(call.arguments["city"], "New York");
        assert_eq!(call.arguments["state"], "NY");
        assert!(parse("").unwrap_err().contains("needs SERVER/NAME"));
        assert!(
            parse("args-prompt")
                .unwrap_err()
                .contains("is not SERVER/NAME")
        );
        assert!(parse("a/b city").unwrap_err().contains("is not key=value"));
    }
}
