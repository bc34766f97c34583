//! CliAgent against fake `claude`, `codex` and `gemini` executables (a bash
//! fixture printing each CLI's documented stream-json): the arguments and
//! stdin each receives, resume ids across turns, replay when the id is
//! lost, process-group kill on cancel and idle timeout with no process left
//! behind, and errors for a missing executable, a crash, garbage, and the
//! CLI's own failure report.
#![cfg(unix)]
#![allow(clippy::unwrap_used, clippy::expect_used)] // helpers outside #[test] fns may panic: this is a test

use crate::common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{events, turn};
use lrg_providers::cli_agents::{CliAgent, CliAgentConfig, CliKind};
use lrg_providers::{
    ChatModel, Message, ModelLocation, Part, ProviderError, StopReason, ToolCall, ToolResult,
    ToolSpec, TurnEvent, TurnRequest, Usage,
};

const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/cli_agents/fake_cli.sh"
);

/// A directory holding the fake CLI under `program`'s name; it logs there.
struct Fake {
    dir: tempfile::TempDir,
    program: PathBuf,
}

impl Fake {
    fn new(program: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join(program);
        std::fs::copy(FIXTURE, &file).unwrap();
        Fake { dir, program: file }
    }

    fn model(&self, kind: CliKind, model: &str) -> CliAgent {
        let config = CliAgentConfig::new(kind, model)
            .with_program(&self.program)
            .with_idle_timeout(Duration::from_secs(5));
        CliAgent::new(config).unwrap()
    }

    fn log(&self, what: &str, n: usize) -> String {
        std::fs::read_to_string(self.dir.path().join(format!("{what}.{n}"))).unwrap()
    }

    fn args(&self, n: usize) -> Vec<String> {
        self.log("args", n).lines().map(str::to_string).collect()
    }
}

fn ask(text: &str) -> TurnRequest {
    TurnRequest::new(vec![Message::user(text)]).system("Be brief.")
}

/// `request` with `messages` as its conversation.
fn with_messages(mut request: TurnRequest, messages: Vec<Message>) -> TurnRequest {
    request.messages = messages.into();
    request
}

#[tokio::test]
async fn claude_streams_reasoning_and_text_with_chat_only_args() {
    let fake = Fake::new("claude");
    let model = fake.model(CliKind::Claude, "sonnet");
    let all: Vec<TurnEvent> = events(&model, ask("hi"))
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    assert_eq!(
        &all[..3],
        [
            TurnEvent::ReasoningDelta {
                text: "Greet back.".into()
            },
            TurnEvent::TextDelta {
                text: "Hello".into()
            },
            TurnEvent::TextDelta {
                text: " there".into()
            },
        ],
        "deltas come live, and the whole message does not repeat them"
    );
    // As the Messages API counts: cache reads and writes added to the input.
    assert_eq!(
        all[3],
        TurnEvent::Usage(
            Usage::new(18, 7)
                .with_cached_prompt_tokens(5)
                .with_cache_write_tokens(10)
        )
    );
    assert!(matches!(&all[4], TurnEvent::Native(n) if n.value["id"] == "sess-1"));
    assert_eq!(
        all[5],
        TurnEvent::End {
            stop: StopReason::EndTurn
        }
    );
    assert_eq!(
        fake.args(1),
        [
            "-p",
            "--output-format",
            "stream-json",
            "--verbose",
            "--include-partial-messages",
            "--tools",
            "",
            "--strict-mcp-config",
            "--mcp-config",
            r#"{"mcpServers":{}}"#,
            "--model",
            "sonnet",
            "--system-prompt",
            "Be brief.",
        ]
    );
    // Claude Code no longer inherits this process's environment.
    let env = fake.log("env", 1);
    assert!(!env.contains("CARGO_MANIFEST_DIR="), "{env}");
    assert!(env.lines().any(|l| l.starts_with("PATH=")), "{env}");
    assert_eq!(fake.log("stdin", 1), "hi");
    // Its cwd was an empty scratch directory, gone once the turn ended.
    let cwd = PathBuf::from(fake.log("cwd", 1).trim());
    assert!(
        cwd.file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("lrg-cli-agent-")
    );
    assert!(!cwd.exists(), "the scratch directory was left behind");
    let info = model.info();
    assert_eq!(
        (
            info.provider.as_str(),
            info.location,
            info.sends_to.as_deref()
        ),
        (
            "claude-cli",
            ModelLocation::Cloud,
            Some("api.anthropic.com")
        )
    );
}

#[tokio::test]
async fn a_second_turn_resumes_with_only_the_new_tail() {
    let fake = Fake::new("claude");
    let model = fake.model(CliKind::Claude, "sonnet");
    let first = ask("hi");
    let answer = turn(&model, first.clone()).await.unwrap();
    assert_eq!(answer.text(), "Hello there");
    let mut history = first.messages.to_vec();
    history.push(answer.into_message());
    history.push(Message::user("and how are you?"));
    let second = with_messages(first.clone(), history.clone());
    turn(&model, second).await.unwrap();
    let args = fake.args(2);
    assert_eq!(&args[args.len() - 2..], ["--resume", "sess-1"]);
    assert!(
        !args.contains(&"--system-prompt".to_string()),
        "a resumed session has its instructions: {args:?}"
    );
    assert_eq!(fake.log("stdin", 2), "and how are you?");

    // The id lost (say the history went through a store that dropped it):
    // the whole conversation is replayed.
    for message in &mut history {
        message.parts.retain(|p| !matches!(p, Part::Native(_)));
    }
    turn(&model, with_messages(first, history)).await.unwrap();
    assert!(!fake.args(3).contains(&"--resume".to_string()));
    assert_eq!(
        fake.log("stdin", 3),
        "The conversation so far:\n\nUser: hi\n\nAssistant: Hello there\n\n\
         Continue it: answer the user's latest message.\n\nand how are you?"
    );
}

fn notes_tool() -> ToolSpec {
    ToolSpec {
        name: "read_note".into(),
        description: "Read one note by its name.".into(),
        input_schema: serde_json::json!({"type": "object",
            "properties": {"name": {"type": "string"}}, "required": ["name"]}),
        annotations: Default::default(),
        output_schema: None,
    }
}

/// lrg's tools reach an agent CLI only as text: described in its system
/// prompt in Hermes format, its `<tool_call>` read back as a call, and the
/// result sent on the resumed session as a `<tool_response>`.
#[tokio::test]
async fn claude_gets_lrgs_tools_as_hermes_text_and_their_results_on_resume() {
    let fake = Fake::new("claude");
    std::fs::write(
        fake.dir.path().join("tool_call"),
        r#"{"name": "read_note", "arguments": {"name": "shopping"}}"#,
    )
    .unwrap();
    let model = fake.model(CliKind::Claude, "sonnet");
    let first = ask("what is on my shopping list?").tools(vec![notes_tool()]);
    let answer = turn(&model, first.clone()).await.unwrap();
    assert_eq!(answer.stop, Some(StopReason::ToolCalls));
    assert_eq!(
        answer.text(),
        "Let me look.\n",
        "the call is not shown as text"
    );
    let call = answer.into_message();
    let calls: Vec<&ToolCall> = call.tool_calls().collect();
    assert_eq!(calls.len(), 1, "{call:?}");
    assert_eq!(calls[0].name, "read_note");
    assert_eq!(calls[0].arguments, serde_json::json!({"name": "shopping"}));
    // The tools are in the system prompt (the log has one argument a line,
    // so the prompt's own lines are apart), and the CLI's own stay off.
    let logged = fake.log("args", 1);
    let system = &logged[logged.find("--system-prompt\n").unwrap()..];
    assert!(system.contains("Be brief.\n\n# Tools"), "{system}");
    assert!(
        system.contains("<tools>") && system.contains(r#""name":"read_note""#),
        "{system}"
    );
    assert!(system.contains("<tool_call>"), "{system}");
    let args = fake.args(1);
    assert_eq!(
        args[args.iter().position(|a| a == "--tools").unwrap() + 1],
        ""
    );

    // The result goes back as text on the resumed session: only the tail.
    let result = ToolResult::text(calls[0], "milk, eggs", false);
    let mut history = first.messages.to_vec();
    history.push(call.clone());
    history.push(Message::tool_results([result]));
    let reply = turn(&model, with_messages(first.clone(), history.clone()))
        .await
        .unwrap();
    assert_eq!(reply.text(), "Done: the tool answered.");
    assert_eq!(reply.stop, Some(StopReason::EndTurn));
    let args = fake.args(2);
    assert_eq!(&args[args.len() - 2..], ["--resume", "sess-1"]);
    assert_eq!(
        fake.log("stdin", 2),
        "<tool_response>\nmilk, eggs\n</tool_response>"
    );

    // The session id lost: the replay writes the call and its result in the
    // same format.
    for message in &mut history {
        message.parts.retain(|p| !matches!(p, Part::Native(_)));
    }
    turn(&model, with_messages(first, history)).await.unwrap();
    assert!(!fake.args(3).contains(&"--resume".to_string()));
    let replay = fake.log("stdin", 3);
    assert!(
        replay.contains(
            "Assistant: Let me look.\n\n<tool_call>\n{\"name\":\"read_note\",\"arguments\":{\"name\":\"shopping\"}}\n</tool_call>"
        ),
        "{replay}"
    );
    assert!(
        replay.ends_with("<tool_response>\nmilk, eggs\n</tool_response>"),
        "{replay}"
    );
}

#[tokio::test]
async fn claude_without_partial_messages_reads_whole_messages() {
    let fake = Fake::new("claude");
    let got = turn(&fake.model(CliKind::Claude, "whole"), ask("hi"))
        .await
        .unwrap();
    assert_eq!(got.text(), "Hello whole");
}

#[tokio::test]
async fn codex_runs_read_only_without_the_inherited_environment() {
    let fake = Fake::new("codex");
    let model = fake.model(CliKind::Codex, "gpt-5-codex");
    let got = turn(&model, ask("hi")).await.unwrap();
    assert_eq!(
        got.parts[..2],
        [
            Part::reasoning("**Greeting the user**"),
            Part::text("Hello there")
        ]
    );
    assert_eq!(
        got.usage,
        Some(Usage::new(20, 7).with_cached_prompt_tokens(5))
    );
    assert_eq!(
        fake.args(1),
        [
            "exec",
            "--json",
            "--skip-git-repo-check",
            "--ignore-user-config",
            "--sandbox",
            "read-only",
            "--model",
            "gpt-5-codex",
            "-c",
            r#"developer_instructions="Be brief.""#,
            "-",
        ]
    );
    assert_eq!(fake.log("stdin", 1), "hi");
    // Cargo sets CARGO_MANIFEST_DIR for this test process; codex must not see it.
    let env = fake.log("env", 1);
    assert!(!env.contains("CARGO_MANIFEST_DIR="), "{env}");
    assert!(env.lines().any(|l| l.starts_with("PATH=")), "{env}");

    let mut history = ask("hi").messages;
    history.push(got.into_message());
    history.push(Message::user("more"));
    turn(&model, TurnRequest::new(history)).await.unwrap();
    let args = fake.args(2);
    assert_eq!(&args[args.len() - 3..], ["resume", "thread-1", "-"]);
    assert_eq!(fake.log("stdin", 2), "more");
}

#[tokio::test]
async fn gemini_streams_deltas_and_resumes_its_session() {
    let fake = Fake::new("gemini");
    let model = fake.model(CliKind::Gemini, "gemini-2.5-pro");
    let got = turn(&model, ask("hi")).await.unwrap();
    assert_eq!(got.text(), "Hello there");
    // `input_tokens` includes the `cached` part.
    assert_eq!(
        got.usage,
        Some(Usage::new(18, 7).with_cached_prompt_tokens(12))
    );
    assert_eq!(
        fake.args(1),
        [
            "--output-format",
            "stream-json",
            "--model",
            "gemini-2.5-pro"
        ]
    );
    // No system-prompt flag: the instructions lead the first prompt.
    assert_eq!(fake.log("stdin", 1), "Instructions: Be brief.\n\nhi");
    // Only the base set and Google's own names: not this process's others
    // (cargo sets CARGO_MANIFEST_DIR here).
    let env = fake.log("env", 1);
    assert!(!env.contains("CARGO_MANIFEST_DIR="), "{env}");
    assert!(env.lines().any(|l| l.starts_with("PATH=")), "{env}");

    let mut history = ask("hi").messages;
    history.push(got.into_message());
    history.push(Message::user("more"));
    turn(&model, TurnRequest::new(history)).await.unwrap();
    assert_eq!(&fake.args(2)[4..], ["--resume", "gem-1"]);
}

/// Whether `pid` is gone (or a zombie waiting for init to reap it).
fn gone(pid: &str) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // No /proc entry: gone, where there is a /proc to look in.
        Err(_) => Path::new("/proc/self").exists() || !alive_by_kill(pid),
        Ok(stat) => stat
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z')),
    }
}

fn alive_by_kill(pid: &str) -> bool {
    std::process::Command::new("kill")
        .args(["-0", pid])
        .status()
        .is_ok_and(|s| s.success())
}

async fn wait_gone(pid: &str) -> bool {
    for _ in 0..50 {
        if gone(pid) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}

#[tokio::test]
async fn cancel_kills_the_whole_process_group() {
    for (kind, program) in [
        (CliKind::Claude, "claude"),
        (CliKind::Codex, "codex"),
        (CliKind::Gemini, "gemini"),
    ] {
        let fake = Fake::new(program);
        let model = fake.model(kind, "sleep");
        common::assert_cancel_ends_at_once(&model, ask("hi"), "Hel").await;
        let grandchild = fake.log("grandchild", 1);
        assert!(
            wait_gone(grandchild.trim()).await,
            "{program}: its child {} outlived the cancel",
            grandchild.trim()
        );
        let pgid = fake.log("pgid", 1);
        assert_ne!(
            pgid.trim(),
            std::process::id().to_string(),
            "{program} ran in our group"
        );
    }
}

#[tokio::test]
async fn dropping_the_turn_kills_the_whole_process_group() {
    use futures::StreamExt as _;
    let fake = Fake::new("gemini");
    let model = fake.model(CliKind::Gemini, "sleep");
    let mut stream = model.turn(ask("hi"), tokio_util::sync::CancellationToken::new());
    let first = tokio::time::timeout(Duration::from_secs(10), stream.next())
        .await
        .unwrap();
    assert_eq!(first, Some(Ok(TurnEvent::TextDelta { text: "Hel".into() })));
    drop(stream);
    let grandchild = fake.log("grandchild", 1);
    assert!(
        wait_gone(grandchild.trim()).await,
        "its child {} outlived the dropped turn",
        grandchild.trim()
    );
}

#[tokio::test]
async fn a_silent_cli_is_stopped_after_the_idle_timeout() {
    let fake = Fake::new("claude");
    let config = CliAgentConfig::new(CliKind::Claude, "sleep")
        .with_program(&fake.program)
        .with_idle_timeout(Duration::from_millis(500));
    let all = events(&CliAgent::new(config).unwrap(), ask("hi")).await;
    assert_eq!(all[0], Ok(TurnEvent::TextDelta { text: "Hel".into() }));
    let err = all.last().unwrap().clone().unwrap_err();
    assert!(
        err.is_transient() && err.to_string().contains("silent"),
        "{err}"
    );
    let grandchild = fake.log("grandchild", 1);
    assert!(
        wait_gone(grandchild.trim()).await,
        "{grandchild}: {:?} (group {})",
        std::fs::read_to_string(format!("/proc/{}/stat", grandchild.trim())),
        fake.log("pgid", 1)
    );
}

#[tokio::test]
async fn dying_midway_reports_the_exit_and_stderr() {
    let fake = Fake::new("codex");
    let all = events(&fake.model(CliKind::Codex, "die"), ask("hi")).await;
    assert_eq!(all[0], Ok(TurnEvent::TextDelta { text: "Hel".into() }));
    let err = all.last().unwrap().clone().unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("status 3") && text.contains("lost the connection"),
        "{text}"
    );

    let fake = Fake::new("claude");
    let err = turn(&fake.model(CliKind::Claude, "signal"), ask("hi"))
        .await
        .unwrap_err();
    assert!(
        err.is_transient() && err.to_string().contains("signal"),
        "{err}"
    );
}

#[tokio::test]
async fn garbage_is_a_protocol_error_quoting_it() {
    for (kind, program) in [(CliKind::Claude, "claude"), (CliKind::Gemini, "gemini")] {
        let fake = Fake::new(program);
        let err = turn(&fake.model(kind, "garbage"), ask("hi"))
            .await
            .unwrap_err();
        assert!(
            matches!(err, ProviderError::Protocol { .. }) && err.to_string().contains("oops"),
            "{program}: {err:?}"
        );
    }
}

#[tokio::test]
async fn the_clis_own_failure_reports_are_auth_errors() {
    for (kind, program) in [
        (CliKind::Claude, "claude"),
        (CliKind::Codex, "codex"),
        (CliKind::Gemini, "gemini"),
    ] {
        let fake = Fake::new(program);
        let err = turn(&fake.model(kind, "fail"), ask("hi"))
            .await
            .unwrap_err();
        assert!(
            matches!(err, ProviderError::Auth { .. }),
            "{program}: {err:?}"
        );
    }
}

#[tokio::test]
async fn a_missing_executable_is_a_config_error_without_a_path() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("claude");
    let model =
        CliAgent::new(CliAgentConfig::new(CliKind::Claude, "sonnet").with_program(&missing))
            .unwrap();
    let err = turn(&model, ask("hi")).await.unwrap_err();
    assert!(matches!(err, ProviderError::Config { .. }), "{err:?}");
    let text = err.to_string();
    assert!(
        text.contains("CLAUDE_CODE_PATH") && !text.contains(&*dir.path().to_string_lossy()),
        "{text}"
    );
}

#[tokio::test]
async fn a_typed_answer_is_asked_for_in_words_fresh_and_resumed() {
    use lrg_providers::typed::OutputMode;
    let schema = common::triage_schema();
    let instructions = schema.instructions();
    let fake = Fake::new("claude");
    let model = fake.model(CliKind::Claude, "sonnet");
    assert_eq!(model.info().output_mode, OutputMode::Prompted);
    let first = ask("Triage: it crashes").output(schema.clone());
    let answer = turn(&model, first.clone()).await.unwrap();
    // A fresh session: the instructions follow the system prompt, once
    // (the fake logs one argument a line).
    let system = format!("--system-prompt\nBe brief.\n\n{instructions}\n");
    assert!(
        fake.log("args", 1).contains(&system),
        "{}",
        fake.log("args", 1)
    );
    let mut already = first.clone();
    already.system = Some(format!("Be brief.\n\n{instructions}"));
    turn(&model, already).await.unwrap();
    let args = fake.log("args", 2);
    assert!(args.contains(&system), "{args}");
    assert_eq!(args.matches(&instructions).count(), 1, "not twice: {args}");

    // Resumed, the session keeps its old system prompt: the schema comes
    // with the new text.
    let mut history = first.messages.to_vec();
    history.push(answer.into_message());
    history.push(Message::user("Now this one: it hangs"));
    turn(&model, with_messages(first, history)).await.unwrap();
    assert!(fake.args(3).contains(&"--resume".to_string()));
    assert_eq!(
        fake.log("stdin", 3),
        format!("Now this one: it hangs\n\n{instructions}")
    );

    // Gemini CLI has no system flag: the instructions lead the prompt.
    let fake = Fake::new("gemini");
    let model = fake.model(CliKind::Gemini, "gemini-2.5-pro");
    turn(&model, ask("Triage: it crashes").output(schema))
        .await
        .unwrap();
    assert_eq!(
        fake.log("stdin", 1),
        format!("Instructions: Be brief.\n\n{instructions}\n\nTriage: it crashes")
    );
}
