//! `lrg sessions export KEY --test DIR`: a kept chat turned into a
//! regression test that `lrg test DIR` runs offline.
//!
//! Two files go into DIR: `<key>.recording.json`, the model's turns of the
//! chat's first message as `--record` writes them, and `<key>.test.yaml`, a
//! scenario that sends that message again, replays the recording and
//! asserts the tool calls (names and arguments, each as often as made),
//! their order and the final reply (exactly, or that it contains its first
//! sentence). Its `tools` are the chat's MCP servers, verbatim.
//!
//! The recording is the one `--record` wrote when the chat began with it
//! (its first message's turns only), when the scenario replays it as it
//! is; otherwise it is rebuilt: the scenario is run on the kept answers,
//! with every tool answering its kept result, and recorded. Either way the
//! scenario is then run once more, here and offline, on the recording and
//! the kept results — what `lrg test` does with the real servers — so an
//! export that would not pass is never written. A tool whose description
//! or result has changed since makes `lrg test` fail with the request
//! diff, as any replay does.
//!
//! What makes it possible is the chat's [`ChatSetup`] (kept since this
//! lrg): a chat kept before, or by an app that keeps none, is refused with
//! what it lacks.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use lrg_chat::store::{ChatSetup, SessionStore};
use lrg_chat::transcript::{ToolOutcome, outcome_of};
use lrg_providers::record::{Recording, RecordingModel, ReplayModel};
use lrg_providers::{
    GenerationSettings, Message, ModelInfo, Part, Role, ToolCall, ToolResult, TurnRequest,
};
use serde_json::Value;

use crate::cli::ReplyMatch;
use crate::exit::{CliError, Exit};
use crate::suite::runner::run_session;
use crate::suite::scenario::{self, Case};
use crate::{out, usage};
use kept::{KeptAnswers, KeptTools};
use scenario_out::{
    GenerationOut, PermissionsOut, ScenarioOut, ToolsOut, expectations, permissions_for,
    rerecordable,
};

mod kept;
mod scenario_out;

/// `lrg sessions export KEY --test DIR`.
pub(super) async fn export(
    store: &dyn SessionStore,
    key: &str,
    dir: &Path,
    reply: ReplyMatch,
    json: bool,
) -> Result<Exit, CliError> {
    let found = super::find(store, key).await?;
    let stored = store
        .load(&found.meta.id)
        .await
        .map_err(super::store_error)?;
    let first = FirstMessage::of(key, &stored.rows)?;
    let setup = usable_setup(key, stored.state.setup.as_deref(), &first)?;
    let model = setup
        .model
        .clone()
        .ok_or_else(|| usage!("kept chat `{key}`: its setup lacks the model's description"))?;

    std::fs::create_dir_all(dir).map_err(|e| usage!("--test {}: {e}", dir.display()))?;
    let stem = file_stem(key);
    let files = Files {
        scenario: dir.join(format!("{stem}.test.yaml")),
        recording: dir.join(format!("{stem}.recording.json")),
        recording_name: format!("{stem}.recording.json"),
    };
    let exported = Exported {
        key,
        bound_model: &found.meta.model.model,
        setup,
        first: &first,
        reply,
        files: &files,
    };

    // The chat's own recording, when it began with one and replays as it is.
    let mut note = None;
    if let Some(path) = &setup.origin.recording {
        match exported.reuse(path).await {
            Ok(()) => return done(&files, Some(path), None, json),
            Err(why) => {
                note = Some(format!(
                    "the recording {} was not reused ({why}); it was rebuilt from the kept history",
                    path.display()
                ));
            }
        }
    }
    if let Err(e) = exported.rebuild(&model).await {
        let _ = std::fs::remove_file(&files.scenario);
        let _ = std::fs::remove_file(&files.recording);
        return Err(e);
    }
    done(&files, None, note, json)
}

/// Where the export goes.
struct Files {
    scenario: PathBuf,
    recording: PathBuf,
    /// The recording as the scenario names it (beside it).
    recording_name: String,
}

/// Say what was written; with `--json`, as one object.
fn done(
    files: &Files,
    reused: Option<&PathBuf>,
    note: Option<String>,
    json: bool,
) -> Result<Exit, CliError> {
    if let Some(note) = &note {
        eprintln!("lrg: {note}");
    }
    if json {
        let value = serde_json::json!({
            "scenario": files.scenario,
            "recording": files.recording,
            "reused": reused,
            "note": note,
        });
        out::line(serde_json::to_string_pretty(&value).unwrap_or_default());
        return Ok(Exit::Replied);
    }
    let how = match reused {
        Some(from) => format!("the first message's turns of {}", from.display()),
        None => "rebuilt from the kept history".to_string(),
    };
    out::line(format_args!("wrote {}", files.scenario.display()));
    out::line(format_args!("wrote {} ({how})", files.recording.display()));
    let folder = files
        .scenario
        .parent()
        .map_or_else(|| ".".to_string(), |d| d.display().to_string());
    out::line(format_args!("run it with: lrg test {folder}"));
    Ok(Exit::Replied)
}

/// The chat's setup, if it holds what an export needs; else what it lacks.
fn usable_setup<'a>(
    key: &str,
    setup: Option<&'a ChatSetup>,
    first: &FirstMessage,
) -> Result<&'a ChatSetup, CliError> {
    let Some(setup) = setup else {
        return Err(usage!(
            "kept chat `{key}` has no setup: it was kept by an lrg from before chats kept their \
             setup, or by an app that keeps none. An export needs the model's description, the \
             system prompt, the generation settings, the MCP servers and the tools they offered; \
             start the chat again with `lrg run --session` or `lrg chat --session` to keep them"
        ));
    };
    let mut missing = Vec::new();
    if setup.model.is_none() {
        missing.push("the model's description (its context window)");
    }
    if !first.calls.is_empty() {
        if setup.tools.is_empty() {
            missing.push("the tools the chat offered");
        }
        if setup.origin.mcp.is_empty() && setup.origin.mcp_config.is_none() {
            missing.push("the MCP servers that offered them");
        }
    }
    if !missing.is_empty() {
        return Err(usage!(
            "kept chat `{key}` cannot be exported: its setup lacks {}",
            missing.join(", ")
        ));
    }
    if setup.sub_agents {
        return Err(usage!(
            "kept chat `{key}` ran with --sub-agents, which `lrg test` does not run: it cannot \
             be exported as a test"
        ));
    }
    let offered_elsewhere: Vec<&str> = setup
        .origin
        .other_tools
        .iter()
        .map(String::as_str)
        .filter(|name| !setup.blocked.iter().any(|b| b == name))
        .collect();
    if !offered_elsewhere.is_empty() {
        return Err(usage!(
            "kept chat `{key}` offered tools that no MCP server gave it ({}: skills, memory or \
             functions of the app), which a scenario cannot start; it cannot be exported as a test",
            offered_elsewhere.join(", ")
        ));
    }
    Ok(setup)
}

/// `key` as a file name: what a file system takes, the rest `_`.
fn file_stem(key: &str) -> String {
    let stem: String = key
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    match stem.trim_start_matches('.') {
        "" => "chat".to_string(),
        s => s.to_string(),
    }
}

/// One call of the first message and the result it got.
struct KeptCall {
    call: ToolCall,
    result: ToolResult,
}

/// The chat's first message, as kept: what the scenario sends and asserts.
struct FirstMessage {
    text: String,
    /// The model's turns, in order.
    turns: Vec<Message>,
    calls: Vec<KeptCall>,
    /// The final reply.
    reply: String,
}

impl FirstMessage {
    /// The first message of `rows`, refused (with why) when a scenario
    /// cannot replay it.
    fn of(key: &str, rows: &[Message]) -> Result<Self, CliError> {
        let refuse = |why: &str| usage!("kept chat `{key}` cannot be exported as a test: {why}");
        let Some(start) = rows.iter().position(|m| m.role == Role::User) else {
            return Err(refuse("it has no message"));
        };
        let user = &rows[start];
        if user.text().starts_with(lrg_chat::session::SUMMARY_PREFIX) {
            return Err(refuse(
                "it was compacted: its first message is a summary, not what the person sent",
            ));
        }
        if user.parts.iter().any(|p| matches!(p, Part::Image(_))) {
            return Err(refuse(
                "its first message has images, which a scenario cannot send",
            ));
        }
        let end = rows[start + 1..]
            .iter()
            .position(|m| m.role == Role::User)
            .map_or(rows.len(), |i| start + 1 + i);
        let exchange = &rows[start + 1..end];
        let turns: Vec<Message> = exchange
            .iter()
            .filter(|m| m.role == Role::Assistant)
            .cloned()
            .collect();
        let results: Vec<&ToolResult> = exchange
            .iter()
            .filter(|m| m.role == Role::Tool)
            .flat_map(|m| m.parts.iter())
            .filter_map(|p| match p {
                Part::ToolResult(r) => Some(r),
                _ => None,
            })
            .collect();
        let mut calls = Vec::new();
        for call in turns.iter().flat_map(Message::tool_calls) {
            let Some(result) = results.iter().find(|r| r.call_id == call.id) else {
                return Err(refuse(&format!(
                    "the call of `{}` ({}) has no result",
                    call.name, call.id
                )));
            };
            match outcome_of(result) {
                ToolOutcome::Stopped => {
                    return Err(refuse(
                        "its first message was stopped before it was answered",
                    ));
                }
                ToolOutcome::Running => {
                    return Err(refuse(&format!("the call of `{}` never ended", call.name)));
                }
                ToolOutcome::Denied if deny_note(result).is_none() && !turned_off(result) => {
                    return Err(refuse(&format!(
                        "a hook of the operator refused the call of `{}`, which a scenario \
                         cannot configure",
                        call.name
                    )));
                }
                _ => {}
            }
            calls.push(KeptCall {
                call: call.clone(),
                result: (*result).clone(),
            });
        }
        let last = exchange.last();
        let reply = match last {
            Some(m) if m.role == Role::Assistant && m.tool_calls().next().is_none() => m.text(),
            Some(m) if m.role == Role::Tool => {
                return Err(refuse(
                    "its first message was ended by a tool (one that ends the turn), not a reply",
                ));
            }
            _ => {
                return Err(refuse(
                    "its first message got no reply (it ended with an error, or was stopped)",
                ));
            }
        };
        if reply.ends_with(lrg_chat::session::STOPPED_NOTE) {
            return Err(refuse(
                "its first message was stopped before it was answered",
            ));
        }
        Ok(Self {
            text: user.text(),
            turns,
            calls,
            reply,
        })
    }
}

const NOT_ALLOWED: &str = "Not run: the user did not allow this call.";
const NOTE_MARK: &str = " The user's note: ";

/// The person's note of a denied call (`Some("")` when they gave none);
/// `None` when the call was not denied by the person.
fn deny_note(result: &ToolResult) -> Option<String> {
    let text = result.text_content();
    let rest = text.strip_prefix(NOT_ALLOWED)?;
    Some(rest.strip_prefix(NOTE_MARK).unwrap_or(rest).to_string())
}

/// Whether the call was refused because its tool was turned off (blocked).
fn turned_off(result: &ToolResult) -> bool {
    result
        .text_content()
        .starts_with("Not run: the user turned the tool")
}

/// What is being exported.
struct Exported<'a> {
    key: &'a str,
    /// The model the chat is bound to (`provider:model`).
    bound_model: &'a str,
    setup: &'a ChatSetup,
    first: &'a FirstMessage,
    reply: ReplyMatch,
    files: &'a Files,
}

impl Exported<'_> {
    /// Reuse the chat's `--record` recording: its first message's turns,
    /// with the scenario sending what they were sent. `Err` says why not.
    async fn reuse(&self, path: &Path) -> Result<(), String> {
        let recording = Recording::load(path).map_err(|e| e.to_string())?;
        let turns = recording
            .exchanges
            .iter()
            .take_while(|x| users_in(&x.request) == 1)
            .count();
        let first: TurnRequest = recording
            .exchanges
            .first()
            .filter(|_| turns > 0)
            .and_then(|x| serde_json::from_value(x.request.clone()).ok())
            .ok_or("it does not begin with this chat's first message")?;
        let text = first.messages.iter().find(|m| m.role == Role::User);
        if text.map(Message::text).as_deref() != Some(self.first.text.as_str()) {
            return Err("it holds another chat's first message (written over since?)".into());
        }
        let mut trimmed = recording.clone();
        trimmed.exchanges.truncate(turns);
        let case = self.write_scenario(first.system.clone(), &first.settings)?;
        trimmed
            .save(&self.files.recording)
            .map_err(|e| e.to_string())?;
        self.check(&case).await
    }

    /// Rebuild the recording: the scenario run on the kept answers and
    /// tool results, recorded, then checked like a reused one.
    async fn rebuild(&self, model: &ModelInfo) -> Result<(), CliError> {
        let case = self
            .write_scenario(self.setup.system.clone(), &self.setup.generation)
            .map_err(|e| CliError::failed(anyhow::anyhow!("{e}")))?;
        let answers = KeptAnswers::new(model, &self.first.turns);
        let recorder = RecordingModel::create(answers, &self.files.recording)
            .map_err(|e| usage!("--test: {e}"))?;
        let tools = KeptTools::new(&self.setup.tools, &self.first.calls);
        let _ = run_session(&case, Arc::new(recorder), None, Arc::new(tools)).await;
        self.check(&case).await.map_err(|why| {
            CliError::failed(anyhow::anyhow!(
                "kept chat `{}`: the rebuilt test does not pass on the kept history, so nothing \
                 was written:\n{why}",
                self.key
            ))
        })
    }

    /// Run the written scenario offline, as `lrg test` would with servers
    /// that answer as they did: `Err` holds the failures.
    async fn check(&self, case: &Case) -> Result<(), String> {
        let replay =
            Arc::new(ReplayModel::from_file(&self.files.recording).map_err(|e| e.to_string())?);
        let tools = KeptTools::new(&self.setup.tools, &self.first.calls);
        let run = run_session(case, replay.clone(), Some(replay), Arc::new(tools)).await;
        let failures = case.expect.check(&run);
        if failures.is_empty() {
            return Ok(());
        }
        Err(failures
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("\n"))
    }

    /// Write the scenario (sending `system` with `generation`) and read it
    /// back as `lrg test` does.
    fn write_scenario(
        &self,
        system: Option<String>,
        generation: &GenerationSettings,
    ) -> Result<Case, String> {
        let text = self.scenario_text(system, generation);
        std::fs::write(&self.files.scenario, text)
            .map_err(|e| format!("{}: {e}", self.files.scenario.display()))?;
        let mut cases = scenario::load(&self.files.scenario).map_err(|e| e.to_string())?;
        match (cases.pop(), cases.is_empty()) {
            (Some(case), true) => Ok(case),
            _ => Err(format!("{}: not one case", self.files.scenario.display())),
        }
    }

    fn scenario_text(&self, system: Option<String>, generation: &GenerationSettings) -> String {
        let setup = self.setup;
        let defaults = lrg_chat::session::SessionConfig::default();
        let (rules, approvals) = permissions_for(&self.first.calls, &setup.blocked);
        let scenario = ScenarioOut {
            name: self.key,
            model: rerecordable(self.bound_model),
            recording: &self.files.recording_name,
            tools: ToolsOut {
                mcp: &setup.origin.mcp,
                mcp_config: setup.origin.mcp_config.as_deref(),
            },
            system,
            max_steps: setup.max_steps.filter(|n| *n != defaults.max_steps),
            generation: GenerationOut::of(generation),
            permissions: PermissionsOut {
                mode: "auto_all",
                bulk_limit: 0,
                rules,
                approvals,
            },
            message: &self.first.text,
            expect: expectations(self.first, self.reply),
        };
        let body = serde_norway::to_string(&scenario).unwrap_or_default();
        let mut head = format!(
            "# A regression test made from the kept chat `{}` by `lrg sessions export` (lrg {}).\n\
             # It sends the chat's first message again, replays the model's turns from\n\
             # {} and checks the tool calls, their order and the final reply.\n\
             # Run it with `lrg test` on this folder. Every call runs without asking (auto_all)\n\
             # unless the chat's person denied one; the answers below deny it again.\n",
            self.key,
            env!("CARGO_PKG_VERSION"),
            self.files.recording_name,
        );
        if let Some(cwd) = &setup.origin.cwd {
            head.push_str(&format!(
                "# The servers ran in {}: a relative path in them is read from where `lrg test` runs.\n",
                cwd.display()
            ));
        }
        if generation.top_k.is_some() {
            head.push_str("# The chat's top_k is not a scenario setting and was left out.\n");
        }
        head + &body
    }
}

/// How many user messages a recorded request holds.
fn users_in(request: &Value) -> usize {
    request
        .get("messages")
        .and_then(Value::as_array)
        .map_or(0, |messages| {
            messages
                .iter()
                .filter(|m| m.get("role").and_then(Value::as_str) == Some("user"))
                .count()
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_becomes_a_file_name() {
        assert_eq!(file_stem("doc:1"), "doc_1");
        assert_eq!(file_stem("../x"), "_x");
        assert_eq!(file_stem(".."), "chat");
    }

    #[test]
    fn a_denial_keeps_its_note() {
        let call = ToolCall {
            id: "c1".into(),
            name: "delete_notes".into(),
            arguments: serde_json::json!({}),
        };
        let denied = ToolResult::text(
            &call,
            "Not run: the user did not allow this call. The user's note: not today",
            true,
        );
        assert_eq!(deny_note(&denied).as_deref(), Some("not today"));
        let bare = ToolResult::text(&call, NOT_ALLOWED, true);
        assert_eq!(deny_note(&bare).as_deref(), Some(""));
        let ran = ToolResult::text(&call, "deleted 1 note(s)", false);
        assert_eq!(deny_note(&ran), None);
    }
}
