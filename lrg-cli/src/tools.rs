//! Tool servers from `--mcp-config` and `--mcp`, and `lrg tools`.

use std::sync::Arc;

use lrg_chat::permissions::{Decision, decide_configured};
use lrg_chat::tools::Tools as _;
use lrg_chat::tools::{
    McpConfig, McpServerConfig, StdioServerConfig, ToolHost, ToolInfo, ToolSource,
};
use lrg_providers::schema::{SchemaTarget, grammar_schema, portable_tool_schema};
use serde_json::{Value, json};

use crate::cli::{SchemaArg, ToolArgs, ToolsArgs};
use crate::exit::{CliError, Exit};
use crate::out;
use crate::usage;

/// Programs that run another program named in their arguments: a server
/// started through one is named after what it runs.
const LAUNCHERS: &[&str] = &[
    "npx", "uvx", "bunx", "pnpx", "node", "deno", "bun", "python", "python3", "uv", "docker",
];

/// The servers `--mcp-config` and `--mcp` name, in that order (and those
/// the config file lists as disabled).
pub fn servers(args: &ToolArgs) -> Result<McpConfig, CliError> {
    let mut config = match &args.mcp_config {
        Some(path) => McpConfig::from_file(path).map_err(|e| usage!("--mcp-config: {e}"))?,
        None => McpConfig::default(),
    };
    let servers = &mut config.servers;
    for line in &args.mcp {
        let words = shell_words::split(line).map_err(|e| usage!("--mcp {line:?}: {e}"))?;
        let Some((command, rest)) = words.split_first() else {
            return Err(usage!(
                "--mcp needs a command, e.g. --mcp 'npx -y @modelcontextprotocol/server-everything'"
            ));
        };
        let mut name = server_name(command, rest);
        let base = name.clone();
        let mut n = 2;
        while servers.iter().any(|(existing, _)| *existing == name) {
            name = format!("{base}_{n}");
            n += 1;
        }
        let command = if command == "lrg" {
            this_binary()?
        } else {
            command.clone()
        };
        servers.push((
            name,
            McpServerConfig::Stdio(StdioServerConfig::new(command).args(rest.iter().cloned())),
        ));
    }
    Ok(config)
}

/// `lrg` in `--mcp` means this very binary, which need not be on `PATH`
/// (under `cargo run`, say).
pub(crate) fn this_binary() -> Result<String, CliError> {
    std::env::current_exe()
        .map(|p| p.to_string_lossy().into_owned())
        .map_err(|e| usage!("cannot find the lrg binary to run `lrg` in --mcp: {e}"))
}

/// A short name for a server started by `command rest...`: the program's
/// name, or for a launcher (`npx`, `uvx`, ...) the package or script it runs.
fn server_name(command: &str, rest: &[String]) -> String {
    let stem = |s: &str| {
        let last = s.rsplit(['/', '\\']).next().unwrap_or(s);
        let last = last.split('@').find(|p| !p.is_empty()).unwrap_or(last);
        let last = last.rsplit_once('.').map_or(last, |(a, _)| a);
        last.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect::<String>()
    };
    let program = stem(command);
    let name = if LAUNCHERS.contains(&program.as_str()) {
        rest.iter()
            .find(|a| !a.starts_with('-') && a.as_str() != "run")
            .map_or(program.clone(), |a| stem(a))
    } else if program == "lrg" {
        rest.first().map_or(program.clone(), |a| stem(a))
    } else {
        program
    };
    if name.is_empty() {
        "mcp".to_string()
    } else {
        name
    }
}

/// Start the servers the flags name. With `strict`, a server that does not
/// start ends the command (exit 2); otherwise it is reported on stderr.
pub async fn host(args: &ToolArgs, strict: bool) -> Result<Arc<ToolHost>, CliError> {
    let mut options = lrg_chat::tools::ToolHostOptions::default();
    if let Some(max) = args.max_tool_result {
        options.max_result_bytes = max;
    }
    let host = Arc::new(ToolHost::with_options(options));
    // Servers logged in to with `lrg mcp login` get their tokens.
    if let Some(store) = crate::mcp_auth::token_store() {
        host.set_token_store(store);
    }
    // Set before the servers start: each asks for them as it connects.
    host.set_roots(roots(args)?).await;
    let config = servers(args)?;
    let failures = host.add_mcp_config(&config).await;
    if !failures.is_empty() {
        let text = failures
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("\n  ");
        if strict {
            host.shutdown().await;
            return Err(usage!("tool servers did not start:\n  {text}"));
        }
        eprintln!("lrg: warning: tool servers did not start (their tools are missing):\n  {text}");
    }
    Ok(host)
}

/// The roots the servers are offered: the current directory, then each
/// `--root` (one that is not a directory is a usage error).
fn roots(args: &ToolArgs) -> Result<Vec<lrg_chat::tools::Root>, CliError> {
    let mut roots = Vec::new();
    if let Ok(cwd) = std::env::current_dir()
        && let Ok(root) = lrg_chat::tools::Root::dir(&cwd)
    {
        roots.push(root);
    }
    for root in explicit_roots(args)? {
        if !roots.contains(&root) {
            roots.push(root);
        }
    }
    Ok(roots)
}

/// The roots `--root` names, alone (what a served chat is offered).
pub fn explicit_roots(args: &ToolArgs) -> Result<Vec<lrg_chat::tools::Root>, CliError> {
    args.roots
        .iter()
        .map(|dir| lrg_chat::tools::Root::dir(dir).map_err(|e| usage!("--root: {e}")))
        .collect()
}

/// `value` with every object's keys sorted.
fn canonical(value: Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(String, Value)> = map.into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            Value::Object(
                entries
                    .into_iter()
                    .map(|(k, v)| (k, canonical(v)))
                    .collect(),
            )
        }
        Value::Array(items) => Value::Array(items.into_iter().map(canonical).collect()),
        other => other,
    }
}

fn shaped(info: &ToolInfo, target: SchemaArg) -> Value {
    let schema = &info.spec.input_schema;
    let result = match target {
        SchemaArg::Grammar => grammar_schema(schema, lrg_providers::local_chat::ARGUMENT_MAX_CHARS),
        SchemaArg::Openai => portable_tool_schema(schema, SchemaTarget::OpenAi),
        SchemaArg::Anthropic => portable_tool_schema(schema, SchemaTarget::Anthropic),
        SchemaArg::Gemini => portable_tool_schema(schema, SchemaTarget::Gemini),
    };
    match result {
        Ok(v) => v,
        Err(e) => json!({ "error": e.to_string() }),
    }
}

/// `lrg tools`.
pub async fn tools(args: ToolsArgs) -> Result<Exit, CliError> {
    if args.tools.is_empty() {
        return Err(usage!(
            "no tool servers: give --mcp-config FILE or --mcp 'COMMAND ARGS...'"
        ));
    }
    let settings = crate::setup::permission_settings(&args.permissions)?;
    let disabled = servers(&args.tools)?.disabled;
    let host = host(&args.tools, false).await?;
    let failures = host.failures();
    let tools = host.tools();
    let mut rows: Vec<Value> = tools
        .iter()
        .map(|t| {
            let configured = host.policy(&t.spec.name).rule;
            let permission = match decide_configured(
                &settings,
                &t.spec.name,
                t.class,
                false,
                None,
                configured,
            ) {
                Decision::Allow => "allow",
                Decision::Ask(_) => "ask",
                Decision::Block => "block",
            };
            let server = match &t.source {
                ToolSource::Mcp { server, .. } => server.clone(),
                ToolSource::Rust => "rust".to_string(),
                ToolSource::Client => "client".to_string(),
            };
            let mut row = json!({
                "name": t.spec.name,
                "server": server,
                "class": t.class,
                "permission": permission,
                "because": because(&settings, &t.spec.name, configured.is_some()),
                "description": t.spec.description,
            });
            if let Some(target) = args.schema {
                row["schema"] = shaped(t, target);
            }
            // Sorted keys: the same output whatever serde_json's features.
            canonical(row)
        })
        .collect();
    // Listed, never offered: the server's own config denies them.
    for (server, tool) in host.held_back() {
        rows.push(canonical(json!({
            "name": tool,
            "server": server,
            "class": null,
            "permission": "denied",
            "because": "server config",
            "description": "(denied by the server's config: never offered)",
        })));
    }
    if args.json {
        let failures: Vec<Value> = failures
            .iter()
            .map(|f| json!({"server": f.server, "error": f.message}))
            .collect();
        let out = canonical(
            json!({ "tools": rows, "failed_servers": failures, "disabled_servers": disabled }),
        );
        out::line(serde_json::to_string_pretty(&out).unwrap_or_default());
    } else {
        print_table(&rows, args.schema.is_some());
        for server in &disabled {
            out::line(format_args!(
                "(server `{server}` is disabled in the config: not started)"
            ));
        }
        for f in &failures {
            eprintln!(
                "lrg: tool server `{}` is not running: {}",
                f.server, f.message
            );
        }
    }
    host.shutdown().await;
    Ok(if failures.is_empty() {
        Exit::Replied
    } else {
        Exit::Failed
    })
}

/// Where a tool's permission comes from: the person's rule, the server's
/// config (`trust`, `autoApprove`), or the mode applied to the class the
/// tool's annotations give it.
fn because(settings: &lrg_chat::PermissionSettings, name: &str, configured: bool) -> String {
    if settings.rules.contains_key(name) {
        "rule".to_owned()
    } else if configured {
        "server config".to_owned()
    } else {
        let mode = serde_json::to_value(settings.mode)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default();
        format!("mode {mode} + annotations")
    }
}

fn print_table(rows: &[Value], with_schema: bool) {
    let s = |v: &Value, k: &str| v[k].as_str().unwrap_or_default().to_string();
    let width = |k: &str| {
        rows.iter()
            .map(|r| s(r, k).chars().count())
            .max()
            .unwrap_or(0)
            .max(k.len())
    };
    let (wn, ws, wc, wp, wb) = (
        width("name"),
        width("server"),
        width("class"),
        width("permission"),
        width("because"),
    );
    out::line(format_args!(
        "{:wn$}  {:ws$}  {:wc$}  {:wp$}  {:wb$}  description",
        "name", "server", "class", "permission", "because"
    ));
    for r in rows {
        let desc = s(r, "description");
        let desc = desc.lines().next().unwrap_or_default();
        out::line(format_args!(
            "{:wn$}  {:ws$}  {:wc$}  {:wp$}  {:wb$}  {}",
            s(r, "name"),
            s(r, "server"),
            s(r, "class"),
            s(r, "permission"),
            s(r, "because"),
            crate::style::clip(desc, 80)
        ));
        if with_schema {
            let schema = serde_json::to_string_pretty(&r["schema"]).unwrap_or_default();
            for line in schema.lines() {
                out::line(format_args!("    {line}"));
            }
        }
    }
}
