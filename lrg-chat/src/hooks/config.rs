//! Hooks as configured: lrg's TOML `hooks` table, or codex's (and Claude
//! Code's) `hooks.json`.
//!
//! ```toml
//! [[hooks.pre_tool_use]]
//! matcher = "delete_*"          # a glob on the tool name; omitted = every tool
//! command = "python3 hooks/guard.py"
//! timeout_s = 10
//! ```
//!
//! ```json
//! {"hooks": {"PreToolUse": [{"matcher": "delete_*|drop_*",
//!   "hooks": [{"type": "command", "command": "python3 hooks/guard.py", "timeout": 10}]}]}}
//! ```
//!
//! A `hooks.json` matcher is split at `|` and each part read as a glob
//! (`Edit|Write` matches either tool); `*` or an empty matcher takes every
//! tool. Regular expressions beyond that are not read.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;

use super::{CommandHook, HookEvent, SessionHooks};

/// Why a hooks config was refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HooksConfigError {
    /// A matcher is not a glob.
    #[error("hook matcher `{matcher}` is not a glob: {message}")]
    Matcher {
        /// The matcher as written.
        matcher: String,
        /// What is wrong with it.
        message: String,
    },
    /// A hook has no command, or a timeout that is not a positive number.
    #[error("hook {index} of `{event}`: {message}")]
    Invalid {
        /// The event's name.
        event: String,
        /// The hook's position under it, from 1.
        index: usize,
        /// What is wrong.
        message: String,
    },
    /// A `hooks.json` is not JSON of codex's shape.
    #[error("{path}: not a hooks.json of codex's shape: {message}")]
    Json {
        /// The file.
        path: String,
        /// What is wrong.
        message: String,
    },
}

/// One configured command hook.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HookCommandConfig {
    /// The command line, run through the shell.
    pub command: String,
    /// A glob on the tool name; omitted: every tool.
    #[serde(default)]
    pub matcher: Option<String>,
    /// Seconds it may run (default 10).
    #[serde(default)]
    pub timeout_s: Option<f64>,
    /// A name for events and warnings (default: the command's first word).
    #[serde(default)]
    pub name: Option<String>,
}

/// The `hooks` table: command hooks per event.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HooksConfig {
    /// Run before the model sees a message.
    #[serde(default)]
    pub user_prompt_submit: Vec<HookCommandConfig>,
    /// Run before a call's permission check.
    #[serde(default)]
    pub pre_tool_use: Vec<HookCommandConfig>,
    /// Run after a call.
    #[serde(default)]
    pub post_tool_use: Vec<HookCommandConfig>,
    /// Run when the model has answered.
    #[serde(default)]
    pub stop: Vec<HookCommandConfig>,
}

#[derive(Deserialize)]
struct CodexFile {
    hooks: BTreeMap<String, Vec<CodexGroup>>,
}

#[derive(Deserialize)]
struct CodexGroup {
    #[serde(default)]
    matcher: Option<String>,
    hooks: Vec<CodexHook>,
}

#[derive(Deserialize)]
struct CodexHook {
    #[serde(rename = "type", default)]
    kind: Option<String>,
    command: Option<String>,
    #[serde(default)]
    timeout: Option<f64>,
}

impl HooksConfig {
    /// Whether no hook is configured.
    pub fn is_empty(&self) -> bool {
        self.user_prompt_submit.is_empty()
            && self.pre_tool_use.is_empty()
            && self.post_tool_use.is_empty()
            && self.stop.is_empty()
    }

    /// Add `other`'s hooks after these (both run).
    pub fn extend(&mut self, other: HooksConfig) {
        self.user_prompt_submit.extend(other.user_prompt_submit);
        self.pre_tool_use.extend(other.pre_tool_use);
        self.post_tool_use.extend(other.post_tool_use);
        self.stop.extend(other.stop);
    }

    /// Read a `hooks.json` of codex's shape (`path` names it in errors).
    /// Events lrg has no point for (`SessionStart`, …) are skipped with a
    /// `tracing` warning; hooks of a type other than `command` too.
    pub fn from_codex_json(text: &str, path: &Path) -> Result<Self, HooksConfigError> {
        let file: CodexFile = serde_json::from_str(text).map_err(|e| HooksConfigError::Json {
            path: path.display().to_string(),
            message: e.to_string(),
        })?;
        let mut config = Self::default();
        for (event, groups) in file.hooks {
            let list = match event.as_str() {
                "UserPromptSubmit" | "user_prompt_submit" => &mut config.user_prompt_submit,
                "PreToolUse" | "pre_tool_use" => &mut config.pre_tool_use,
                "PostToolUse" | "post_tool_use" => &mut config.post_tool_use,
                "Stop" | "stop" => &mut config.stop,
                other => {
                    tracing::warn!(event = other, file = %path.display(), "hook event not supported by lrg; skipped");
                    continue;
                }
            };
            for group in groups {
                for hook in group.hooks {
                    if hook.kind.as_deref().is_some_and(|k| k != "command") {
                        tracing::warn!(file = %path.display(), "only hooks of type `command` are run; one skipped");
                        continue;
                    }
                    list.push(HookCommandConfig {
                        command: hook.command.unwrap_or_default(),
                        matcher: group.matcher.clone(),
                        timeout_s: hook.timeout,
                        name: None,
                    });
                }
            }
        }
        Ok(config)
    }

    /// The hooks, in order: every `user_prompt_submit` one, then
    /// `pre_tool_use`, `post_tool_use`, `stop`; each runs in `cwd` when
    /// given. Checks every command, timeout and matcher.
    pub fn into_hooks(
        self,
        cwd: Option<&Path>,
    ) -> Result<Vec<Arc<dyn SessionHooks>>, HooksConfigError> {
        let mut hooks: Vec<Arc<dyn SessionHooks>> = Vec::new();
        for (event, list) in [
            (HookEvent::UserPromptSubmit, self.user_prompt_submit),
            (HookEvent::PreToolUse, self.pre_tool_use),
            (HookEvent::PostToolUse, self.post_tool_use),
            (HookEvent::Stop, self.stop),
        ] {
            for (i, entry) in list.into_iter().enumerate() {
                hooks.push(Arc::new(command_hook(event, i + 1, entry, cwd)?));
            }
        }
        Ok(hooks)
    }
}

fn command_hook(
    event: HookEvent,
    index: usize,
    entry: HookCommandConfig,
    cwd: Option<&Path>,
) -> Result<CommandHook, HooksConfigError> {
    let invalid = |message: &str| HooksConfigError::Invalid {
        event: event.as_str().to_owned(),
        index,
        message: message.to_owned(),
    };
    if entry.command.trim().is_empty() {
        return Err(invalid("it has no `command`"));
    }
    let timeout = match entry.timeout_s {
        None => super::command::DEFAULT_TIMEOUT,
        Some(s) if s.is_finite() && s > 0.0 && s <= 3_600.0 => Duration::from_secs_f64(s),
        Some(s) => {
            return Err(invalid(&format!(
                "timeout {s} is not a number of seconds between 0 and 3600"
            )));
        }
    };
    let mut hook = CommandHook::new(event, entry.command)
        .timeout(timeout)
        .matcher(matcher(entry.matcher.as_deref())?);
    if let Some(name) = entry.name.filter(|n| !n.trim().is_empty()) {
        hook = hook.named(name);
    }
    if let Some(dir) = cwd {
        hook = hook.cwd(dir);
    }
    Ok(hook)
}

/// `a|b*` → the globs `a` and `b*`; `*`, empty or none → every tool.
fn matcher(text: Option<&str>) -> Result<Vec<glob::Pattern>, HooksConfigError> {
    let Some(text) = text.map(str::trim).filter(|t| !t.is_empty() && *t != "*") else {
        return Ok(Vec::new());
    };
    text.split('|')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(|p| {
            glob::Pattern::new(p).map_err(|e| HooksConfigError::Matcher {
                matcher: text.to_owned(),
                message: e.to_string(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn toml_table_reads_the_documented_shape() {
        let config: HooksConfig = toml_like(
            r#"{"pre_tool_use": [{"matcher": "delete_*", "command": "python3 hooks/guard.py", "timeout_s": 10}]}"#,
        );
        assert_eq!(config.pre_tool_use.len(), 1);
        assert_eq!(config.pre_tool_use[0].matcher.as_deref(), Some("delete_*"));
        let hooks = config.into_hooks(None).unwrap();
        assert_eq!(hooks.len(), 1);
        assert_eq!(hooks[0].name(), "python3");
    }

    fn toml_like(json: &str) -> HooksConfig {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn codex_json_maps_events_and_split_matchers() {
        let text = r#"{"hooks": {
            "PreToolUse": [{"matcher": "Edit|Write", "hooks": [{"type": "command", "command": "guard", "timeout": 5}]}],
            "Stop": [{"hooks": [{"type": "command", "command": "check"}]}],
            "SessionStart": [{"hooks": [{"type": "command", "command": "hello"}]}]
        }}"#;
        let config = HooksConfig::from_codex_json(text, Path::new("hooks.json")).unwrap();
        assert_eq!(config.pre_tool_use[0].timeout_s, Some(5.0));
        assert_eq!(config.stop.len(), 1);
        assert!(
            config.user_prompt_submit.is_empty(),
            "SessionStart is skipped"
        );
        let globs = matcher(Some("Edit|Write")).unwrap();
        assert!(globs.iter().any(|g| g.matches("Write")));
        assert!(!globs.iter().any(|g| g.matches("Read")));
    }

    #[test]
    fn bad_entries_name_what_is_wrong() {
        let bad = HooksConfig {
            stop: vec![HookCommandConfig {
                command: "x".into(),
                timeout_s: Some(-1.0),
                ..Default::default()
            }],
            ..Default::default()
        };
        let error = bad.into_hooks(None).err().unwrap().to_string();
        assert!(
            error.contains("hook 1 of `stop`") && error.contains("-1"),
            "{error}"
        );
        let error = matcher(Some("[a")).unwrap_err().to_string();
        assert!(error.contains("`[a`"), "{error}");
        let error = HooksConfig::from_codex_json("[]", Path::new("h.json"))
            .unwrap_err()
            .to_string();
        assert!(error.starts_with("h.json:"), "{error}");
    }
}
