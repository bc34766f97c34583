//! What an `mcpServers` entry says of its own tools, beyond how to reach
//! the server:
//!
//! ```json
//! {"command": "…",
//!  "tools": {"allow": ["read_*", "search"], "deny": ["delete_*"], "always": ["search"]},
//!  "trust": "ask" | "read" | "all",
//!  "autoApprove": ["search", "read_file"]}
//! ```
//!
//! - `tools.allow` / `tools.deny` are globs on the server's own tool names:
//!   a denied tool (or, when `allow` is given, one it does not match) is
//!   never offered; `lrg tools` lists it as denied by the server's config.
//! - `tools.always`: offered even while tool search holds the rest back.
//! - `trust` maps onto lrg's rules for every tool of the server: `ask` asks
//!   before each call, `read` allows read-only tools and asks for the rest,
//!   `all` allows every call. `autoApprove` (Cline's and Claude Desktop's
//!   key) allows the tools it names. A rule the person set for a tool
//!   comes first; a destructive call allowed this way still counts against
//!   the bulk limit.

use serde_json::Value;

use super::ToolClass;
use crate::permissions::Rule;

/// What the configuration says of one offered tool: its server entry's
/// `tools.always`, `trust` and `autoApprove` keys as they apply to it (parsed
/// into a [`ServerPolicy`]), and where it runs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ToolPolicy {
    /// Offered even while tool search holds the rest back.
    pub always_offer: bool,
    /// Allow or ask, from the server's `trust` or `autoApprove`.
    pub rule: Option<Rule>,
    /// The server whose config decided, for `lrg tools`.
    pub server: Option<String>,
    /// Where the tool runs: a client tool waits for the app's answer.
    pub runs_on: super::client::RunsOn,
    /// A call to it ends the message with its result.
    pub ends_turn: bool,
}

/// How far a server's tools are trusted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trust {
    /// Ask before every call.
    Ask,
    /// Allow read-only tools; ask for the rest.
    Read,
    /// Allow every call.
    All,
}

/// The parsed policy keys of one server entry.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServerPolicy {
    allow: Option<Vec<glob::Pattern>>,
    deny: Vec<glob::Pattern>,
    always: Vec<glob::Pattern>,
    trust: Option<Trust>,
    auto_approve: Vec<String>,
}

impl ServerPolicy {
    /// Read the policy keys of a server entry; the message names the key
    /// that is wrong.
    pub fn from_entry(entry: &serde_json::Map<String, Value>) -> Result<Self, String> {
        let mut policy = Self::default();
        if let Some(tools) = entry.get("tools") {
            let Some(tools) = tools.as_object() else {
                return Err("`tools` must be an object with `allow`, `deny` or `always`".into());
            };
            for key in tools.keys() {
                if !["allow", "deny", "always"].contains(&key.as_str()) {
                    return Err(format!(
                        "`tools.{key}` is not a key lrg reads (allow, deny, always)"
                    ));
                }
            }
            policy.allow = tools
                .get("allow")
                .map(|v| globs("tools.allow", v))
                .transpose()?;
            policy.deny = tools
                .get("deny")
                .map(|v| globs("tools.deny", v))
                .transpose()?
                .unwrap_or_default();
            policy.always = tools
                .get("always")
                .map(|v| globs("tools.always", v))
                .transpose()?
                .unwrap_or_default();
        }
        policy.trust = match entry.get("trust") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(match s.as_str() {
                "ask" => Trust::Ask,
                "read" => Trust::Read,
                "all" => Trust::All,
                other => return Err(format!("`trust` is `{other}`: use ask, read or all")),
            }),
            Some(_) => return Err("`trust` must be \"ask\", \"read\" or \"all\"".into()),
        };
        if let Some(names) = entry.get("autoApprove") {
            policy.auto_approve = strings("autoApprove", names)?;
        }
        Ok(policy)
    }

    /// Whether it says anything at all.
    pub fn is_empty(&self) -> bool {
        self.allow.is_none()
            && self.deny.is_empty()
            && self.always.is_empty()
            && self.trust.is_none()
            && self.auto_approve.is_empty()
    }

    /// Whether the server's own tool `tool` may be offered at all.
    pub fn offers(&self, tool: &str) -> bool {
        let allowed = self
            .allow
            .as_ref()
            .is_none_or(|allow| allow.iter().any(|p| p.matches(tool)));
        allowed && !self.deny.iter().any(|p| p.matches(tool))
    }

    /// The policy of the server's tool `tool` (of `class`), from `server`.
    pub fn of(&self, server: &str, tool: &str, class: ToolClass) -> ToolPolicy {
        let rule = if self.auto_approve.iter().any(|n| n == tool) {
            Some(Rule::Allow)
        } else {
            match (self.trust, class) {
                (Some(Trust::All), _) | (Some(Trust::Read), ToolClass::Read) => Some(Rule::Allow),
                (Some(Trust::Ask | Trust::Read), _) => Some(Rule::Ask),
                (None, _) => None,
            }
        };
        ToolPolicy {
            always_offer: self.always.iter().any(|p| p.matches(tool)),
            rule,
            server: (rule.is_some() || !self.always.is_empty()).then(|| server.to_owned()),
            ..ToolPolicy::default()
        }
    }
}

fn strings(key: &str, value: &Value) -> Result<Vec<String>, String> {
    let Some(items) = value.as_array() else {
        return Err(format!("`{key}` must be a list of tool names"));
    };
    items
        .iter()
        .map(|v| {
            v.as_str()
                .map(str::to_owned)
                .ok_or_else(|| format!("`{key}` must hold only strings"))
        })
        .collect()
}

fn globs(key: &str, value: &Value) -> Result<Vec<glob::Pattern>, String> {
    strings(key, value)?
        .iter()
        .map(|p| glob::Pattern::new(p).map_err(|e| format!("`{key}`: `{p}` is not a glob: {e}")))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn policy(entry: Value) -> ServerPolicy {
        ServerPolicy::from_entry(entry.as_object().unwrap()).unwrap()
    }

    #[test]
    fn allow_and_deny_are_globs() {
        let p = policy(json!({"tools": {"allow": ["read_*", "search"], "deny": ["read_secret*"]}}));
        assert!(p.offers("read_file"));
        assert!(p.offers("search"));
        assert!(!p.offers("write_file"), "not allowed");
        assert!(!p.offers("read_secrets"), "denied");
        assert!(policy(json!({})).offers("anything"));
    }

    #[test]
    fn trust_and_auto_approve_map_onto_rules() {
        let p = policy(json!({"trust": "read", "autoApprove": ["write_file"]}));
        assert_eq!(
            p.of("fs", "read_file", ToolClass::Read).rule,
            Some(Rule::Allow)
        );
        assert_eq!(
            p.of("fs", "delete", ToolClass::Destructive).rule,
            Some(Rule::Ask)
        );
        assert_eq!(
            p.of("fs", "write_file", ToolClass::Change).rule,
            Some(Rule::Allow)
        );
        assert_eq!(
            policy(json!({"trust": "all"}))
                .of("s", "x", ToolClass::Destructive)
                .rule,
            Some(Rule::Allow)
        );
        assert_eq!(
            policy(json!({})).of("s", "x", ToolClass::Read),
            ToolPolicy::default()
        );
    }

    #[test]
    fn bad_keys_are_named() {
        let bad = |v: Value| ServerPolicy::from_entry(v.as_object().unwrap()).unwrap_err();
        assert!(bad(json!({"trust": "maybe"})).contains("`trust`"));
        assert!(bad(json!({"tools": {"allow": "x"}})).contains("tools.allow"));
        assert!(bad(json!({"tools": {"only": []}})).contains("tools.only"));
        assert!(bad(json!({"tools": {"deny": ["[x"]}})).contains("not a glob"));
        assert!(bad(json!({"autoApprove": [1]})).contains("autoApprove"));
    }
}
