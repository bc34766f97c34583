//! `lrg resources`: the resources and resource templates of the MCP
//! servers `--mcp-config`/`--mcp` name, or with `--read URI --server NAME`
//! one resource's contents.
//!
//! `--json` prints `{"resources": [{server, uri, name, mimeType, ...}],
//! "templates": [{server, uriTemplate, name, mimeType, ...}],
//! "failed_servers": [{server, error}]}`, where `server` is the name
//! `read_mcp_resource` (and `--server`) takes.

use std::io::{IsTerminal as _, Write as _};

use base64::Engine as _;
use lrg_chat::tools::{McpRequestError, ResourceBody, ResourceContents};
use serde_json::{Value, json};

use crate::cli::ResourcesArgs;
use crate::exit::{CliError, Exit};
use crate::{out, usage};

/// `lrg resources`.
pub async fn resources(args: ResourcesArgs) -> Result<Exit, CliError> {
    if args.tools.mcp.is_empty() && args.tools.mcp_config.is_none() {
        return Err(usage!(
            "no tool servers: give --mcp-config FILE or --mcp 'COMMAND ARGS...'"
        ));
    }
    let host = crate::tools::host(&args.tools, false).await?;
    let result = match (&args.read, &args.server) {
        (Some(uri), Some(server)) => read(&host, server, uri, args.json).await,
        (Some(_), None) => Err(usage!(
            "--read needs --server NAME: the server the resource belongs to (see `lrg resources`)"
        )),
        (None, Some(_)) => Err(usage!("--server goes with --read URI")),
        (None, None) => list(&host, args.json).await,
    };
    host.shutdown().await;
    result
}

async fn list(host: &lrg_chat::tools::ToolHost, json: bool) -> Result<Exit, CliError> {
    let resources = host.resources().await;
    let templates = host.resource_templates().await;
    let mut failures: Vec<&McpRequestError> = resources.failures.iter().collect();
    // A server that failed both listings is named once.
    for f in &templates.failures {
        if !failures.contains(&f) {
            failures.push(f);
        }
    }
    let not_running = host.failures();
    if json {
        let mut failed: Vec<Value> = not_running
            .iter()
            .map(|f| json!({"server": f.server, "error": f.message}))
            .collect();
        failed.extend(failures.iter().map(|f| json!({"error": f.to_string()})));
        let body = json!({
            "resources": resources.items,
            "templates": templates.items,
            "failed_servers": failed,
        });
        out::line(serde_json::to_string_pretty(&body).unwrap_or_default());
    } else {
        if resources.items.is_empty() {
            out::line("(no resources)");
        }
        let width = |f: &dyn Fn(&lrg_chat::tools::McpResource) -> usize, min: usize| {
            resources.items.iter().map(f).max().unwrap_or(0).max(min)
        };
        let ws = width(&|r| r.server.chars().count(), 6);
        let wu = width(&|r| r.uri.chars().count(), 3);
        if !resources.items.is_empty() {
            out::line(format_args!(
                "{:ws$}  {:wu$}  mimeType    name",
                "server", "uri"
            ));
        }
        for r in &resources.items {
            out::line(format_args!(
                "{:ws$}  {:wu$}  {:10}  {}",
                r.server,
                r.uri,
                r.mime_type.as_deref().unwrap_or("-"),
                r.name
            ));
        }
        if !templates.items.is_empty() {
            out::line("");
            out::line("templates (fill in the {placeholders}, then --read):");
            for t in &templates.items {
                out::line(format_args!("{}  {}  {}", t.server, t.uri_template, t.name));
            }
        }
        for f in &not_running {
            eprintln!(
                "lrg: tool server `{}` is not running: {}",
                f.server, f.message
            );
        }
        for f in &failures {
            eprintln!("lrg: {f}");
        }
    }
    Ok(if failures.is_empty() && not_running.is_empty() {
        Exit::Replied
    } else {
        Exit::Failed
    })
}

/// Print one resource: text as it is; bytes raw when stdout is not a
/// terminal (`> file.png`), else a line saying what they are. `--json`
/// prints `{"contents": [{uri, mimeType, text | blob (base64)}]}`.
async fn read(
    host: &lrg_chat::tools::ToolHost,
    server: &str,
    uri: &str,
    json: bool,
) -> Result<Exit, CliError> {
    let contents = host.read_resource(server, uri).await.map_err(|e| match e {
        McpRequestError::UnknownServer { .. } => CliError::usage(e),
        other => CliError::failed(other),
    })?;
    if json {
        let items: Vec<Value> = contents.iter().map(content_json).collect();
        out::line(serde_json::to_string_pretty(&json!({"contents": items})).unwrap_or_default());
        return Ok(Exit::Replied);
    }
    let terminal = std::io::stdout().is_terminal();
    for c in &contents {
        match &c.body {
            ResourceBody::Text(text) => out::print(text),
            ResourceBody::Blob(bytes) if !terminal => {
                let mut stdout = std::io::stdout().lock();
                stdout
                    .write_all(bytes)
                    .and_then(|()| stdout.flush())
                    .map_err(|e| CliError::failed(anyhow::anyhow!("writing the resource: {e}")))?;
            }
            ResourceBody::Blob(bytes) => eprintln!(
                "lrg: {} is {} bytes of {}: redirect stdout to a file to save it, or use --json",
                c.uri,
                bytes.len(),
                c.mime_type.as_deref().unwrap_or("binary data")
            ),
            _ => eprintln!("lrg: {} is of a kind this lrg cannot show", c.uri),
        }
    }
    Ok(Exit::Replied)
}

fn content_json(c: &ResourceContents) -> Value {
    let mut v = json!({"uri": c.uri, "mimeType": c.mime_type});
    match &c.body {
        ResourceBody::Text(text) => v["text"] = json!(text),
        ResourceBody::Blob(bytes) => {
            v["blob"] = json!(base64::engine::general_purpose::STANDARD.encode(bytes));
        }
        _ => {}
    }
    v
}
