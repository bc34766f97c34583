//! The MCP client configuration users already have:
//! `{"mcpServers": {"<name>": {"command", "args", "env", "cwd"} | {"url", "headers", "oauth"}}}`.
//!
//! This is the format of Claude Desktop, Cursor, VS Code and most MCP clients,
//! so a user can paste the file they have. Unknown keys inside a server entry
//! are ignored (clients add their own, e.g. `type`, `timeout`), but an entry
//! that is neither a command nor a URL is an error naming the server. An
//! entry with `"disabled": true` is listed in [`McpConfig::disabled`] and
//! never started.
//!
//! # The environment of a child-process server
//!
//! A server started from a `command` does not inherit lrg's environment:
//! it gets the base set of the reference MCP SDKs (`PATH`, `HOME`, `USER`,
//! `LOGNAME`, `SHELL`, `TERM`, `LANG`, `LC_*`, `TMPDIR`; on Windows
//! `APPDATA`, `HOMEDRIVE`, `HOMEPATH`, `LOCALAPPDATA`, `PATH`,
//! `PROCESSOR_ARCHITECTURE`, `SYSTEMDRIVE`, `SYSTEMROOT`, `TEMP`,
//! `USERNAME`, `USERPROFILE`), plus its own `"env"`. API keys in lrg's
//! environment (`OPENAI_API_KEY`, `AWS_SECRET_ACCESS_KEY`, `GITHUB_TOKEN`,
//! ...) reach no server unless its entry asks for them:
//!
//! - `"inherit_env": ["GITHUB_TOKEN", "AWS_PROFILE"]` passes those names too;
//! - `"inherit_env": true` passes the whole environment.
//!
//! lrg's own secrets (`LRG_AGENT_TOKEN`, `LRG_NODE_SECRET`,
//! `LRG_SERVER_API_KEY`, any `LRG_` name with `TOKEN`, `SECRET`, `KEY` or
//! `PASSWORD` in it) are never inherited, not even with `true`; naming one
//! in the list is an error. They grant control of lrg itself (opening chats,
//! joining its cluster), which no tool needs; a server that truly must have
//! one gets it written in its `"env"`, where the choice is plain to see.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use super::inherit_env::InheritEnv;
use super::inherit_env::parse_inherit_env;

/// A whole MCP client configuration: named servers, in file order.
///
/// File order matters: when two servers offer a tool of the same name, the
/// server listed first keeps the bare name (see [`crate::tools`]).
#[derive(Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct McpConfig {
    /// The servers, in the order the file lists them.
    pub servers: Vec<(String, McpServerConfig)>,
    /// Servers the file lists with `"disabled": true`: named, never started.
    pub disabled: Vec<String>,
    /// What each server's entry says of its own tools (`tools`, `trust`,
    /// `autoApprove`; see [`super::ServerPolicy`]), for the servers whose
    /// entry says anything.
    pub policies: BTreeMap<String, super::ServerPolicy>,
}

/// How to reach one MCP server.
///
/// Deserializing one (e.g. inside an app's own config) applies the same
/// checks as [`McpConfig::from_json`], and its errors never quote values.
#[derive(Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum McpServerConfig {
    /// A child process speaking MCP over its stdin/stdout.
    Stdio(StdioServerConfig),
    /// A streamable-HTTP server.
    Http(HttpServerConfig),
}

/// A child-process server: `{"command", "args", "env", "cwd"}`.
#[derive(Clone, PartialEq, Eq, Serialize)]
pub struct StdioServerConfig {
    /// The program to run (looked up on `PATH` when not a path).
    pub command: String,
    /// Its arguments.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// Its own environment variables, set on top of what it inherits.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// Which of lrg's environment it inherits beyond the base set (see the
    /// [module docs](self)): `"inherit_env"` in the file.
    #[serde(default, skip_serializing_if = "InheritEnv::is_base")]
    pub inherit_env: InheritEnv,
    /// Working directory; the current one when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<PathBuf>,
}

/// A streamable-HTTP server: `{"url", "headers", "oauth"}`.
#[derive(Clone, PartialEq, Eq, Serialize)]
pub struct HttpServerConfig {
    /// The MCP endpoint, e.g. `https://example.com/mcp`.
    pub url: String,
    /// Headers sent with every request (often `Authorization`). Their values
    /// are secrets as far as this crate is concerned: `Debug` redacts them.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// `"oauth"`: the server takes an OAuth login, with this pre-registered
    /// client or scopes (see [`super::oauth`]). A server without it still
    /// gets its stored tokens, if it was logged in to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oauth: Option<super::oauth::OAuthSettings>,
}

/// Why a configuration could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum McpConfigError {
    /// The file could not be read.
    #[error("cannot read MCP config {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The text is not JSON, or its top level has the wrong shape.
    #[error("MCP config is not valid: {0}")]
    Syntax(String),
    /// One server entry is wrong; the message names the server and the problem.
    #[error("MCP server `{server}`: {problem}")]
    Server {
        /// The server's name in the file.
        server: String,
        /// What is wrong with it.
        problem: String,
    },
}

impl McpConfig {
    /// A configuration of these servers, in order.
    pub fn new(servers: Vec<(String, McpServerConfig)>) -> Self {
        Self {
            servers,
            disabled: Vec::new(),
            policies: BTreeMap::new(),
        }
    }

    /// Parse the JSON text of a configuration, keeping the servers in file order.
    pub fn from_json(text: &str) -> Result<Self, McpConfigError> {
        let top: TopLevel = serde_json::from_str(text).map_err(|e| {
            McpConfigError::Syntax(match e.classify() {
                serde_json::error::Category::Syntax | serde_json::error::Category::Eof => {
                    format!("not JSON ({e})")
                }
                _ => e.to_string(),
            })
        })?;
        Self::from_entries(top)
    }

    /// Read and parse a configuration file.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self, McpConfigError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| McpConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        Self::from_json(&text).map_err(|e| match e {
            McpConfigError::Syntax(m) => McpConfigError::Syntax(format!("{}: {m}", path.display())),
            other => other,
        })
    }

    /// Interpret an already-parsed JSON value. Servers come in the order of
    /// the value's map, which is alphabetical unless serde_json keeps insertion
    /// order; prefer [`McpConfig::from_json`] when the order matters.
    pub fn from_value(root: Value) -> Result<Self, McpConfigError> {
        let top: TopLevel =
            serde_json::from_value(root).map_err(|e| McpConfigError::Syntax(e.to_string()))?;
        Self::from_entries(top)
    }

    fn from_entries(top: TopLevel) -> Result<Self, McpConfigError> {
        let Some(entries) = top.0 else {
            return Err(McpConfigError::Syntax(
                "no \"mcpServers\" key at the top level".to_owned(),
            ));
        };
        let mut servers: Vec<(String, McpServerConfig)> = Vec::with_capacity(entries.len());
        let mut disabled = Vec::new();
        let mut policies = BTreeMap::new();
        for (name, entry) in entries {
            if servers.iter().any(|(n, _)| *n == name) || disabled.contains(&name) {
                return Err(McpConfigError::Server {
                    server: name,
                    problem: "is listed twice".to_owned(),
                });
            }
            // A disabled entry is not read further: clients keep half-written
            // servers switched off this way.
            if entry.get("disabled") == Some(&Value::Bool(true)) {
                disabled.push(name);
                continue;
            }
            if let Some(map) = entry.as_object() {
                let policy = super::ServerPolicy::from_entry(map).map_err(|problem| {
                    McpConfigError::Server {
                        server: name.clone(),
                        problem,
                    }
                })?;
                if !policy.is_empty() {
                    policies.insert(name.clone(), policy);
                }
            }
            let server = parse_server(&name, entry)?;
            servers.push((name, server));
        }
        Ok(Self {
            servers,
            disabled,
            policies,
        })
    }

    /// The server named `name`, if configured.
    pub fn get(&self, name: &str) -> Option<&McpServerConfig> {
        self.servers.iter().find(|(n, _)| n == name).map(|(_, c)| c)
    }
}

impl Serialize for McpConfig {
    /// `{"mcpServers": {...}}`, servers in order.
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap as _;
        struct Servers<'a>(&'a [(String, McpServerConfig)]);
        impl Serialize for Servers<'_> {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                let mut map = s.serialize_map(Some(self.0.len()))?;
                for (name, cfg) in self.0 {
                    map.serialize_entry(name, cfg)?;
                }
                map.end()
            }
        }
        let mut map = s.serialize_map(Some(1))?;
        map.serialize_entry("mcpServers", &Servers(&self.servers))?;
        map.end()
    }
}

impl<'de> Deserialize<'de> for McpConfig {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let top = TopLevel::deserialize(d)?;
        McpConfig::from_entries(top).map_err(serde::de::Error::custom)
    }
}

impl<'de> Deserialize<'de> for McpServerConfig {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(d)?;
        parse_server("(this server)", value).map_err(|e| match e {
            McpConfigError::Server { problem, .. } => serde::de::Error::custom(problem),
            other => serde::de::Error::custom(other),
        })
    }
}

/// The top level of a config file: only `mcpServers` is read, in file order.
struct TopLevel(Option<Vec<(String, Value)>>);

/// A JSON object read as its entries in order (serde_json's own map sorts).
struct Ordered(Vec<(String, Value)>);

impl<'de> Deserialize<'de> for TopLevel {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = TopLevel;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object with an \"mcpServers\" key")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<TopLevel, A::Error> {
                let mut servers = None;
                while let Some(key) = map.next_key::<String>()? {
                    if key == "mcpServers" {
                        servers = Some(map.next_value::<Ordered>()?.0);
                    } else {
                        map.next_value::<serde::de::IgnoredAny>()?;
                    }
                }
                Ok(TopLevel(servers))
            }
        }
        d.deserialize_map(V)
    }
}

impl<'de> Deserialize<'de> for Ordered {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Ordered;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("\"mcpServers\" to be an object of named servers")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Ordered, A::Error> {
                let mut out = Vec::new();
                while let Some((k, v)) = map.next_entry::<String, Value>()? {
                    out.push((k, v));
                }
                Ok(Ordered(out))
            }
        }
        d.deserialize_map(V)
    }
}

fn parse_server(name: &str, entry: Value) -> Result<McpServerConfig, McpConfigError> {
    // Entries are read field by field, not through serde, so that no error
    // message ever quotes a value (env values and headers are often secrets).
    let err = |problem: String| McpConfigError::Server {
        server: name.to_owned(),
        problem,
    };
    if name.trim().is_empty() {
        return Err(err("a server name must not be empty".to_owned()));
    }
    let Value::Object(map) = entry else {
        return Err(err(format!(
            "expected an object, found {}",
            kind_of(&entry)
        )));
    };
    let has_command = map.contains_key("command");
    let has_url = map.contains_key("url");
    match (has_command, has_url) {
        (true, true) => Err(err("has both \"command\" and \"url\"; give one".to_owned())),
        (false, false) => Err(err(
            "needs either \"command\" (a program to run) or \"url\" (a streamable-HTTP endpoint)"
                .to_owned(),
        )),
        (true, false) => {
            let command = match map.get("command") {
                Some(Value::String(c)) if !c.trim().is_empty() => c.clone(),
                Some(Value::String(_)) => return Err(err("\"command\" is empty".to_owned())),
                Some(other) => {
                    return Err(err(format!(
                        "\"command\" must be a string, found {}",
                        kind_of(other)
                    )));
                }
                None => String::new(),
            };
            let args = match map.get("args") {
                None | Some(Value::Null) => Vec::new(),
                Some(Value::Array(items)) => {
                    let mut args = Vec::with_capacity(items.len());
                    for (i, item) in items.iter().enumerate() {
                        match item {
                            Value::String(a) => args.push(a.clone()),
                            other => {
                                return Err(err(format!(
                                    "\"args\"[{i}] must be a string, found {}",
                                    kind_of(other)
                                )));
                            }
                        }
                    }
                    args
                }
                Some(other) => {
                    return Err(err(format!(
                        "\"args\" must be an array of strings, found {}",
                        kind_of(other)
                    )));
                }
            };
            let mut env = BTreeMap::new();
            match map.get("env") {
                None | Some(Value::Null) => {}
                Some(Value::Object(vars)) => {
                    for (k, v) in vars {
                        // Values are never echoed: they are often API keys.
                        let Value::String(v) = v else {
                            return Err(err(format!(
                                "environment variable \"{k}\" must have a string value, found {}",
                                kind_of(v)
                            )));
                        };
                        if k.is_empty() || k.contains('=') || k.contains('\0') {
                            return Err(err(format!(
                                "\"{k}\" is not a valid environment variable name"
                            )));
                        }
                        env.insert(k.clone(), v.clone());
                    }
                }
                Some(other) => {
                    return Err(err(format!(
                        "\"env\" must be an object of NAME: value, found {}",
                        kind_of(other)
                    )));
                }
            }
            let inherit_env = parse_inherit_env(map.get("inherit_env")).map_err(err)?;
            let cwd = match map.get("cwd") {
                None | Some(Value::Null) => None,
                Some(Value::String(d)) if !d.is_empty() => Some(PathBuf::from(d)),
                Some(Value::String(_)) => return Err(err("\"cwd\" is empty".to_owned())),
                Some(other) => {
                    return Err(err(format!(
                        "\"cwd\" must be a string, found {}",
                        kind_of(other)
                    )));
                }
            };
            Ok(McpServerConfig::Stdio(StdioServerConfig {
                command,
                args,
                env,
                inherit_env,
                cwd,
            }))
        }
        (false, true) => {
            let url = match map.get("url") {
                Some(Value::String(u)) => u.clone(),
                Some(other) => {
                    return Err(err(format!(
                        "\"url\" must be a string, found {}",
                        kind_of(other)
                    )));
                }
                // Checked above; `check_url` rejects the empty string.
                None => String::new(),
            };
            check_url(&url).map_err(err)?;
            let mut headers = BTreeMap::new();
            match map.get("headers") {
                None | Some(Value::Null) => {}
                Some(Value::Object(h)) => {
                    for (k, v) in h {
                        let Value::String(v) = v else {
                            return Err(err(format!(
                                "header \"{k}\" must have a string value, found {}",
                                kind_of(v)
                            )));
                        };
                        check_header(k, v).map_err(err)?;
                        headers.insert(k.clone(), v.clone());
                    }
                }
                Some(other) => {
                    return Err(err(format!(
                        "\"headers\" must be an object of name: value, found {}",
                        kind_of(other)
                    )));
                }
            }
            let oauth = super::oauth::parse_settings(map.get("oauth")).map_err(err)?;
            Ok(McpServerConfig::Http(HttpServerConfig {
                url,
                headers,
                oauth,
            }))
        }
    }
}

fn check_url(url: &str) -> Result<(), String> {
    let lower = url.to_ascii_lowercase();
    let rest = lower
        .strip_prefix("http://")
        .or_else(|| lower.strip_prefix("https://"));
    match rest {
        Some(host) if !host.is_empty() && !host.starts_with('/') => Ok(()),
        // A URL may carry credentials (`https://user:pass@host`): not echoed.
        _ => Err("\"url\" must be an http:// or https:// address with a host".to_owned()),
    }
}

/// Header names the MCP transport sets itself; a config may not override them.
const RESERVED_HEADERS: &[&str] = &["accept", "mcp-session-id", "last-event-id", "content-type"];

fn check_header(name: &str, value: &str) -> Result<(), String> {
    if axum::http::HeaderName::from_bytes(name.as_bytes()).is_err() {
        return Err(format!("\"{name}\" is not a valid HTTP header name"));
    }
    if RESERVED_HEADERS
        .iter()
        .any(|r| name.eq_ignore_ascii_case(r))
    {
        return Err(format!(
            "header \"{name}\" is set by the MCP transport and cannot be configured"
        ));
    }
    // The value is never echoed: it is likely a token.
    if axum::http::HeaderValue::from_str(value).is_err() {
        return Err(format!(
            "the value of header \"{name}\" has characters HTTP does not allow (value not shown)"
        ));
    }
    Ok(())
}

pub(super) fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

impl fmt::Debug for McpConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map()
            .entries(self.servers.iter().map(|(n, c)| (n, c)))
            .finish()
    }
}

impl fmt::Debug for McpServerConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            McpServerConfig::Stdio(s) => s.fmt(f),
            McpServerConfig::Http(h) => h.fmt(f),
        }
    }
}

impl fmt::Debug for StdioServerConfig {
    // Environment values often carry API keys: show the names only.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StdioServerConfig")
            .field("command", &self.command)
            .field("args", &self.args)
            .field("env", &Redacted(self.env.keys()))
            .field("inherit_env", &self.inherit_env)
            .field("cwd", &self.cwd)
            .finish()
    }
}

impl fmt::Debug for HttpServerConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpServerConfig")
            .field("url", &self.url)
            .field("headers", &Redacted(self.headers.keys()))
            .field("oauth", &self.oauth)
            .finish()
    }
}

/// Renders `{name: "<redacted>", ...}` for a map whose values are secret.
struct Redacted<I>(I);

impl<'a, I: Iterator<Item = &'a String> + Clone> fmt::Debug for Redacted<I> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map()
            .entries(self.0.clone().map(|k| (k, "<redacted>")))
            .finish()
    }
}

impl HttpServerConfig {
    /// A server at `url` with no extra headers.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            headers: BTreeMap::new(),
            oauth: None,
        }
    }

    /// Log in to it with OAuth, with these client settings.
    pub fn oauth(mut self, settings: super::oauth::OAuthSettings) -> Self {
        self.oauth = Some(settings);
        self
    }

    /// Add a header sent with every request.
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.insert(name.into(), value.into());
        self
    }
}

impl StdioServerConfig {
    /// Run `command` with no arguments.
    pub fn new(command: impl Into<String>) -> Self {
        Self {
            command: command.into(),
            args: Vec::new(),
            env: BTreeMap::new(),
            inherit_env: InheritEnv::Base,
            cwd: None,
        }
    }

    /// Append arguments.
    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// Set an environment variable for the child.
    pub fn env(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.insert(name.into(), value.into());
        self
    }

    /// Which of lrg's environment it inherits beyond the base set.
    pub fn inherit_env(mut self, inherit: InheritEnv) -> Self {
        self.inherit_env = inherit;
        self
    }

    /// Set the working directory.
    pub fn cwd(mut self, dir: impl Into<PathBuf>) -> Self {
        self.cwd = Some(dir.into());
        self
    }
}
