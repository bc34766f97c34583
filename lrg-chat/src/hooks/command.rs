//! A hook that is a command line.
//!
//! The command runs through the shell (`sh -c`; `cmd /C` on Windows) in
//! the hook's working directory, with lrg's environment less lrg's own
//! secrets. It gets one JSON object on stdin: `event` (`pre_tool_use`, …),
//! `session_id`, and the event's fields (`tool`, `call_id`, `arguments`,
//! `result`, `is_error`, `text`, `continued`). It answers with one JSON
//! object on stdout, or nothing:
//!
//! ```json
//! {"decision": "allow" | "deny" | "ask" | "block" | "continue", "reason": "…",
//!  "arguments": {…}, "context": "…", "note": "…"}
//! ```
//!
//! - `pre_tool_use` reads `decision` (allow, deny, ask), `reason` and
//!   `arguments` (a rewrite);
//! - `user_prompt_submit` reads `decision: "block"` with its `reason`, and
//!   `context`;
//! - `post_tool_use` reads `note`;
//! - `stop` reads `decision: "continue"` (or `"block"`, Claude Code's word
//!   for "do not stop yet") with its `reason`.
//!
//! Exit code 2 means "no" with stderr as the reason, as in Claude Code:
//! deny the call, block the message, add stderr as the note, or go on for
//! another turn. Any other failing exit, a timeout (the process group is
//! killed), or stdout that is not such an object is a failure: the hook
//! decides nothing.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

#[cfg(unix)]
use process_wrap::tokio::ProcessGroup;
use process_wrap::tokio::{CommandWrap, KillOnDrop};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use super::{
    HookError, HookEvent, PostToolUse, PreToolUse, PromptSubmit, PromptVerdict, SessionHooks,
    StopCheck, ToolDecision, ToolVerdict,
};

/// How long a hook may run when its config says nothing.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// Bytes of a hook's stdout and stderr read; the rest is dropped.
const MAX_OUTPUT: usize = 64 * 1024;
/// Characters of a hook's reason or output quoted back.
const MAX_QUOTED: usize = 2_000;

/// One command line run at one event, for the tools its matcher takes.
#[derive(Debug, Clone)]
pub struct CommandHook {
    name: String,
    event: HookEvent,
    command: String,
    matcher: Vec<glob::Pattern>,
    timeout: Duration,
    cwd: Option<PathBuf>,
}

impl CommandHook {
    /// A hook that runs `command` at `event`, for every tool, with the
    /// default timeout. Its name is the command's first word.
    pub fn new(event: HookEvent, command: impl Into<String>) -> Self {
        let command = command.into();
        let name = command
            .split_whitespace()
            .next()
            .unwrap_or("hook")
            .rsplit(['/', '\\'])
            .next()
            .unwrap_or("hook")
            .to_owned();
        Self {
            name,
            event,
            command,
            matcher: Vec::new(),
            timeout: DEFAULT_TIMEOUT,
            cwd: None,
        }
    }

    /// Only for tools whose name matches one of these globs (`delete_*`);
    /// empty: every tool. Events without a tool ignore it.
    pub fn matcher(mut self, patterns: Vec<glob::Pattern>) -> Self {
        self.matcher = patterns;
        self
    }

    /// How long it may run before it is killed and counted as failed.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The directory it runs in (default: lrg's own).
    pub fn cwd(mut self, dir: impl Into<PathBuf>) -> Self {
        self.cwd = Some(dir.into());
        self
    }

    /// The name shown in events (default: the command's first word; the
    /// command line itself is never shown, since it may hold a secret).
    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// The event it runs at.
    pub fn event(&self) -> HookEvent {
        self.event
    }

    fn takes(&self, event: HookEvent, tool: Option<&str>) -> bool {
        event == self.event
            && match tool {
                Some(tool) if !self.matcher.is_empty() => {
                    self.matcher.iter().any(|p| p.matches(tool))
                }
                _ => true,
            }
    }

    /// Run it with `input` on stdin; what it answered.
    async fn run(&self, input: Value) -> Result<Reply, HookError> {
        let (shell, flag) = if cfg!(windows) {
            ("cmd", "/C")
        } else {
            ("sh", "-c")
        };
        let mut cmd = tokio::process::Command::new(shell);
        // Everything but lrg's own keys and tokens.
        lrg_providers::child_env::apply(&mut cmd, |_| true);
        cmd.arg(flag)
            .arg(&self.command)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(dir) = &self.cwd {
            cmd.current_dir(dir);
        }
        let mut wrapped = CommandWrap::from(cmd);
        // Its own process group, so a timeout kills what it started too.
        #[cfg(unix)]
        wrapped.wrap(ProcessGroup::leader());
        wrapped.wrap(KillOnDrop);
        let mut child = wrapped
            .spawn()
            .map_err(|e| HookError(format!("cannot start it: {e}")))?;
        let inner = child.inner_mut();
        let mut stdin = inner.stdin().take();
        let mut stdout = inner.stdout().take();
        let mut stderr = inner.stderr().take();
        let body = input.to_string();
        let talk = async {
            if let Some(mut stdin) = stdin.take() {
                // A hook that does not read its input is fine: a broken
                // pipe here is not its failure.
                let _ = stdin.write_all(body.as_bytes()).await;
                let _ = stdin.shutdown().await;
            }
            let (out, err) = tokio::join!(read_capped(stdout.take()), read_capped(stderr.take()));
            let status = child.wait().await;
            (out, err, status)
        };
        let (out, err, status) = match tokio::time::timeout(self.timeout, talk).await {
            Ok(done) => done,
            Err(_) => {
                return Err(HookError(format!(
                    "timed out after {} s and was killed",
                    self.timeout.as_secs_f64()
                )));
            }
        };
        let status = status.map_err(|e| HookError(format!("cannot wait for it: {e}")))?;
        let stderr = quote(err.trim());
        match status.code() {
            Some(0) => parse_reply(out.trim()),
            Some(2) => Ok(Reply::No(if stderr.is_empty() {
                "refused by a hook".to_owned()
            } else {
                stderr
            })),
            code => {
                let how = code.map_or("was killed by a signal".to_owned(), |c| {
                    format!("exited with status {c}")
                });
                Err(HookError(if stderr.is_empty() {
                    how
                } else {
                    format!("{how}: {stderr}")
                }))
            }
        }
    }
}

/// What a command answered: its JSON, or "no" (exit 2) with a reason.
enum Reply {
    Json(Answer),
    No(String),
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Answer {
    decision: Option<String>,
    reason: Option<String>,
    arguments: Option<Value>,
    context: Option<String>,
    note: Option<String>,
}

fn parse_reply(out: &str) -> Result<Reply, HookError> {
    if out.is_empty() {
        return Ok(Reply::Json(Answer::default()));
    }
    serde_json::from_str::<Answer>(out)
        .map(Reply::Json)
        .map_err(|e| {
            HookError(format!(
                "printed something that is not its JSON answer ({e}): {}",
                quote(out)
            ))
        })
}

async fn read_capped<R: tokio::io::AsyncRead + Unpin>(reader: Option<R>) -> String {
    let Some(reader) = reader else {
        return String::new();
    };
    let mut bytes = Vec::new();
    let _ = reader.take(MAX_OUTPUT as u64).read_to_end(&mut bytes).await;
    String::from_utf8_lossy(&bytes).into_owned()
}

fn quote(text: &str) -> String {
    match text.char_indices().nth(MAX_QUOTED) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

fn unknown_decision(event: HookEvent, decision: &str) -> HookError {
    HookError(format!(
        "answered decision `{decision}`, which {} does not take",
        event.as_str()
    ))
}

impl SessionHooks for CommandHook {
    fn name(&self) -> &str {
        &self.name
    }

    fn user_prompt_submit<'a>(
        &'a self,
        prompt: &'a PromptSubmit,
    ) -> futures::future::BoxFuture<'a, Result<PromptVerdict, HookError>> {
        Box::pin(async move {
            if !self.takes(HookEvent::UserPromptSubmit, None) {
                return Ok(PromptVerdict::Continue);
            }
            let input = json!({"event": "user_prompt_submit", "session_id": prompt.session_id, "text": prompt.text});
            match self.run(input).await? {
                Reply::No(reason) => Ok(PromptVerdict::Block(reason)),
                Reply::Json(answer) => match answer.decision.as_deref() {
                    Some("block" | "deny") => Ok(PromptVerdict::Block(
                        answer.reason.unwrap_or_else(|| "blocked by a hook".into()),
                    )),
                    None | Some("allow" | "continue") => Ok(answer
                        .context
                        .filter(|c| !c.trim().is_empty())
                        .map_or(PromptVerdict::Continue, PromptVerdict::AddContext)),
                    Some(other) => Err(unknown_decision(self.event, other)),
                },
            }
        })
    }

    fn pre_tool_use<'a>(
        &'a self,
        call: &'a PreToolUse,
    ) -> futures::future::BoxFuture<'a, Result<ToolVerdict, HookError>> {
        Box::pin(async move {
            if !self.takes(HookEvent::PreToolUse, Some(&call.tool)) {
                return Ok(ToolVerdict::default());
            }
            let input = json!({"event": "pre_tool_use", "session_id": call.session_id,
                "tool": call.tool, "call_id": call.call_id, "arguments": call.arguments, "class": call.class});
            match self.run(input).await? {
                Reply::No(reason) => Ok(ToolVerdict::deny(reason)),
                Reply::Json(answer) => {
                    let decision = match answer.decision.as_deref() {
                        None => None,
                        Some("allow") => Some(ToolDecision::Allow),
                        Some("deny" | "block") => Some(ToolDecision::Deny),
                        Some("ask") => Some(ToolDecision::Ask),
                        Some(other) => return Err(unknown_decision(self.event, other)),
                    };
                    Ok(ToolVerdict {
                        decision,
                        reason: answer.reason,
                        arguments: answer.arguments,
                    })
                }
            }
        })
    }

    fn post_tool_use<'a>(
        &'a self,
        call: &'a PostToolUse,
    ) -> futures::future::BoxFuture<'a, Result<Option<String>, HookError>> {
        Box::pin(async move {
            if !self.takes(HookEvent::PostToolUse, Some(&call.tool)) {
                return Ok(None);
            }
            let input = json!({"event": "post_tool_use", "session_id": call.session_id,
                "tool": call.tool, "call_id": call.call_id, "arguments": call.arguments,
                "result": call.result, "is_error": call.is_error});
            Ok(match self.run(input).await? {
                Reply::No(note) => Some(note),
                Reply::Json(answer) => answer.note.or(answer.reason),
            }
            .filter(|n| !n.trim().is_empty()))
        })
    }

    fn stop<'a>(
        &'a self,
        check: &'a StopCheck,
    ) -> futures::future::BoxFuture<'a, Result<Option<String>, HookError>> {
        Box::pin(async move {
            if !self.takes(HookEvent::Stop, None) {
                return Ok(None);
            }
            let input = json!({"event": "stop", "session_id": check.session_id,
                "text": check.text, "continued": check.continued});
            match self.run(input).await? {
                Reply::No(reason) => Ok(Some(reason)),
                Reply::Json(answer) => match answer.decision.as_deref() {
                    Some("continue" | "block") => Ok(Some(
                        answer
                            .reason
                            .unwrap_or_else(|| "a hook asks you to go on".into()),
                    )),
                    None | Some("allow" | "stop") => Ok(None),
                    Some(other) => Err(unknown_decision(self.event, other)),
                },
            }
        })
    }
}
